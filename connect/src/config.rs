//! Connector configs: the keys every connector has (Connect's
//! `ConnectorConfig`, `SinkConnectorConfig`), the definitions the
//! `/connector-plugins/{plugin}/config` endpoints show, and validation that
//! reports every problem at once.

use std::collections::BTreeMap;

use serde::Serialize;

/// A connector's config as Connect's REST API carries it.
pub type Config = BTreeMap<String, String>;

/// One config key a connector knows (Connect's `ConfigKeyInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigDef {
    pub name: &'static str,
    /// `STRING`, `INT`, `LONG`, `BOOLEAN`, `LIST`, `CLASS`, `PASSWORD`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub required: bool,
    pub default_value: Option<String>,
    /// `HIGH`, `MEDIUM`, `LOW`.
    pub importance: &'static str,
    pub documentation: &'static str,
    pub group: &'static str,
}

impl ConfigDef {
    pub fn new(
        name: &'static str,
        kind: &'static str,
        default_value: Option<&str>,
        importance: &'static str,
        documentation: &'static str,
    ) -> Self {
        ConfigDef {
            name,
            kind,
            required: default_value.is_none(),
            default_value: default_value.map(str::to_owned),
            importance,
            documentation,
            group: "Common",
        }
    }

    pub fn in_group(mut self, group: &'static str) -> Self {
        self.group = group;
        self
    }

    pub fn optional(mut self) -> Self {
        self.required = false;
        self
    }
}

/// A problem with one key: `(key, message)`.
pub type Problem = (String, String);

/// The keys of every connector.
pub fn common_definitions(sink: bool) -> Vec<ConfigDef> {
    let mut defs = vec![
        ConfigDef::new("name", "STRING", None, "HIGH", "Globally unique name of the connector."),
        ConfigDef::new(
            "connector.class",
            "STRING",
            None,
            "HIGH",
            "The connector's class: its short name (DatagenSource, ObjectStoreSink) or a full class name.",
        ),
        ConfigDef::new(
            "tasks.max",
            "INT",
            Some("1"),
            "HIGH",
            "The most tasks the connector is split into.",
        ),
        ConfigDef::new(
            "key.converter",
            "CLASS",
            Some("org.apache.kafka.connect.json.JsonConverter"),
            "LOW",
            "How record keys are read and written: JSON, string, bytes, or through the schema registry: Avro, Protobuf (sinks), JSON Schema. Its settings are key.converter.*.",
        ),
        ConfigDef::new(
            "value.converter",
            "CLASS",
            Some("org.apache.kafka.connect.json.JsonConverter"),
            "LOW",
            "How record values are read and written: JSON, string, bytes, or through the schema registry: Avro, Protobuf (sinks), JSON Schema. Its settings are value.converter.*.",
        ),
        ConfigDef::new(
            "errors.tolerance",
            "STRING",
            Some("none"),
            "MEDIUM",
            "none: a record that fails fails the task; all: it is skipped (and sent to the dead-letter topic when one is set).",
        )
        .in_group("Error Handling"),
    ];
    if !sink {
        defs.push(ConfigDef::new(
            "exactly.once.support",
            "STRING",
            Some("requested"),
            "MEDIUM",
            "required: each batch the source makes is written in one transaction with the source offset it reaches (KIP-618), so a task that fails or moves resumes with no record lost or written twice; requested (the default): at least once.",
        ));
        defs.push(ConfigDef::new(
            "transaction.boundary",
            "STRING",
            Some("poll"),
            "LOW",
            "When an exactly-once source's transactions end: poll, one per batch the source makes (the only one served).",
        ));
    }
    if sink {
        defs.push(ConfigDef::new(
            "topics",
            "LIST",
            None,
            "HIGH",
            "The topics the sink reads, comma-separated.",
        ));
        defs.push(
            ConfigDef::new(
                "errors.deadletterqueue.topic.name",
                "STRING",
                Some(""),
                "MEDIUM",
                "Where records that failed go when errors.tolerance is all (empty: nowhere).",
            )
            .in_group("Error Handling"),
        );
    }
    defs
}

/// The converters this engine knows, as Connect's classes and their short
/// names: the short name of the one `value` names (see [`crate::convert`]).
pub fn converter_kind(value: &str) -> Option<&'static str> {
    crate::convert::Kind::of(value).map(crate::convert::Kind::name)
}

/// `tasks.max` as given (default 1).
pub fn tasks_max(config: &Config) -> Result<usize, Problem> {
    match config.get("tasks.max") {
        None => Ok(1),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=metastore::connect::MAX_TASKS).contains(&n) => Ok(n),
            _ => Err((
                "tasks.max".into(),
                format!(
                    "Invalid value {v} for configuration tasks.max: must be 1 to {}",
                    metastore::connect::MAX_TASKS
                ),
            )),
        },
    }
}

/// The sink's topics (`topics`, comma-separated, trimmed, no empties).
pub fn topics(config: &Config) -> Vec<String> {
    config
        .get("topics")
        .map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Every problem with the keys every connector has.
pub fn validate_common(config: &Config, sink: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Err(p) = tasks_max(config) {
        problems.push(p);
    }
    problems.extend(crate::convert::problems(config, sink));
    if let Some(v) = config.get("errors.tolerance") {
        if v != "none" && v != "all" {
            problems.push((
                "errors.tolerance".into(),
                format!("Invalid value {v} for configuration errors.tolerance: none or all"),
            ));
        }
    }
    if !sink {
        if let Some(v) = config.get("exactly.once.support") {
            if !matches!(v.trim(), "requested" | "required") {
                problems.push((
                    "exactly.once.support".into(),
                    format!("Invalid value {v} for configuration exactly.once.support: requested or required"),
                ));
            }
        }
        if let Some(v) = config.get("transaction.boundary") {
            if v.trim() != "poll" {
                problems.push((
                    "transaction.boundary".into(),
                    format!(
                        "Invalid value {v} for configuration transaction.boundary: only poll is served (interval and connector are not)"
                    ),
                ));
            }
        }
    }
    if sink {
        if config.contains_key("topics.regex") {
            problems.push((
                "topics.regex".into(),
                "topics.regex is not supported: list the topics in topics".into(),
            ));
        }
        if topics(config).is_empty() {
            problems.push((
                "topics".into(),
                "Must configure one of topics or topics.regex".into(),
            ));
        }
    }
    problems
}

/// A required text setting, trimmed; an empty one is a problem.
pub fn required(config: &Config, key: &str, problems: &mut Vec<Problem>) -> String {
    let value = config
        .get(key)
        .map(|v| v.trim().to_owned())
        .unwrap_or_default();
    if value.is_empty() {
        problems.push((
            key.to_owned(),
            format!("Missing required configuration \"{key}\" which has no default value."),
        ));
    }
    value
}

/// Request headers given as `Name: value` separated by `|` (the HTTP
/// connectors' `http.headers`); each malformed one is a problem.
pub fn http_headers(
    config: &Config,
    key: &str,
    problems: &mut Vec<Problem>,
) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for h in config
        .get(key)
        .map(String::as_str)
        .unwrap_or_default()
        .split('|')
        .filter(|h| !h.trim().is_empty())
    {
        match h.split_once(':') {
            Some((name, value))
                if reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()).is_ok()
                    && reqwest::header::HeaderValue::from_str(value.trim()).is_ok() =>
            {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
            _ => problems.push((
                key.to_owned(),
                format!("Invalid header {h:?} in {key}: `Name: value`"),
            )),
        }
    }
    headers
}

/// A number setting (`default` when unset); one that does not parse or
/// fails `ok` is a problem saying `what` it must be.
pub fn number<T: std::str::FromStr>(
    config: &Config,
    key: &str,
    default: T,
    ok: impl Fn(&T) -> bool,
    what: &str,
    problems: &mut Vec<Problem>,
) -> T {
    match config.get(key).map(|v| (v, v.trim().parse::<T>())) {
        None => default,
        Some((_, Ok(n))) if ok(&n) => n,
        Some((v, _)) => {
            problems.push((
                key.to_owned(),
                format!("Invalid value {v} for configuration {key}: {what}"),
            ));
            default
        }
    }
}
