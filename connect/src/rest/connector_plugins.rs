//! `/connector-plugins`: the connectors (and, asked, converters) this
//! engine has, the keys each connector takes (KIP-769), and config
//! validation in Connect's `ConfigInfos` shape, which UIs draw their forms
//! from.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::Value;

use super::connectors::{config_of, plugin_of};
use super::{ApiError, Body, Params, QueryParams, Rest};
use crate::config::{Config, ConfigDef, Problem};
use crate::plugins::{self, Plugin};

/// The converters `key.converter` and `value.converter` take.
pub const CONVERTERS: [&str; 6] = [
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "io.confluent.connect.avro.AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter",
];

/// Connect's `PluginInfo`.
#[derive(Debug, Serialize)]
pub(super) struct PluginInfo {
    class: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    version: &'static str,
}

/// `GET /connector-plugins`: the connectors; with `?connectorsOnly=false`
/// the converters too.
pub(super) async fn list(query: QueryParams) -> Json<Vec<PluginInfo>> {
    let mut out: Vec<PluginInfo> = plugins::ALL
        .iter()
        .map(|p| PluginInfo {
            class: p.class(),
            kind: p.kind().as_str(),
            version: plugins::VERSION,
        })
        .collect();
    if !query.flag("connectorsOnly", true) {
        out.extend(CONVERTERS.iter().map(|class| PluginInfo {
            class,
            kind: "converter",
            version: plugins::VERSION,
        }));
    }
    Json(out)
}

/// Connect's `ConfigKeyInfo`.
#[derive(Debug, Clone, Serialize)]
pub(super) struct KeyInfo {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    required: bool,
    default_value: Option<String>,
    importance: &'static str,
    documentation: &'static str,
    group: &'static str,
    /// Its place in its group, from 1.
    order: i32,
    width: &'static str,
    display_name: String,
    dependents: Vec<String>,
}

fn key_infos(defs: &[ConfigDef]) -> Vec<KeyInfo> {
    let mut in_group: BTreeMap<&str, i32> = BTreeMap::new();
    defs.iter()
        .map(|d| {
            let order = in_group.entry(d.group).or_insert(0);
            *order += 1;
            KeyInfo {
                name: d.name.to_owned(),
                kind: d.kind,
                required: d.required,
                default_value: d.default_value.clone(),
                importance: d.importance,
                documentation: d.documentation,
                group: d.group,
                order: *order,
                width: "NONE",
                display_name: d.name.to_owned(),
                dependents: Vec::new(),
            }
        })
        .collect()
}

fn unknown_plugin(name: &str) -> ApiError {
    ApiError::not_found(format!("Unknown plugin {name}."))
}

/// `GET /connector-plugins/{plugin}/config`: the keys it takes (none for a
/// converter: their settings are read under `key.converter.*` and
/// `value.converter.*`, see [`crate::convert`]).
pub(super) async fn config(Params(name): Params<String>) -> Result<Json<Vec<KeyInfo>>, ApiError> {
    if let Some(p) = Plugin::find(&name) {
        return Ok(Json(key_infos(&p.definitions())));
    }
    let simple = |c: &str| c.rsplit('.').next().unwrap_or(c).to_owned();
    if CONVERTERS.iter().any(|c| *c == name || simple(c) == name) {
        return Ok(Json(Vec::new()));
    }
    Err(unknown_plugin(&name))
}

/// Connect's `ConfigValueInfo`.
#[derive(Debug, Serialize)]
pub(super) struct ValueInfo {
    name: String,
    value: Option<String>,
    recommended_values: Vec<String>,
    errors: Vec<String>,
    visible: bool,
}

/// Connect's `ConfigInfo`.
#[derive(Debug, Serialize)]
pub(super) struct ConfigInfo {
    definition: KeyInfo,
    value: ValueInfo,
}

/// Connect's `ConfigInfos`.
#[derive(Debug, Serialize)]
pub(super) struct ConfigInfos {
    name: String,
    error_count: usize,
    groups: Vec<&'static str>,
    configs: Vec<ConfigInfo>,
}

/// The validation of `config` against `plugin`: every key it knows, with
/// its value and errors; problems with keys it does not define come last.
/// `here` are the problems that depend on this agent.
pub(super) fn config_infos(
    class: &str,
    plugin: Plugin,
    config: &Config,
    here: Vec<Problem>,
) -> ConfigInfos {
    let mut problems: Vec<Problem> = plugin.validate(config);
    problems.extend(here);
    if config.get("name").is_none_or(|n| n.trim().is_empty()) {
        problems.insert(
            0,
            (
                "name".into(),
                "Missing required configuration \"name\" which has no default value.".into(),
            ),
        );
    }
    let defs = plugin.definitions();
    let mut groups: Vec<&'static str> = Vec::new();
    for d in &defs {
        if !groups.contains(&d.group) {
            groups.push(d.group);
        }
    }
    let errors_of = |key: &str| -> Vec<String> {
        problems
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, m)| m.clone())
            .collect()
    };
    let mut configs: Vec<ConfigInfo> = key_infos(&defs)
        .into_iter()
        .zip(&defs)
        .map(|(definition, d)| {
            let value = match config.get(d.name) {
                Some(_) if d.kind == "PASSWORD" => Some("[hidden]".to_owned()),
                Some(v) => Some(v.clone()),
                None => d.default_value.clone(),
            };
            ConfigInfo {
                value: ValueInfo {
                    name: d.name.to_owned(),
                    value,
                    recommended_values: Vec::new(),
                    errors: errors_of(d.name),
                    visible: true,
                },
                definition,
            }
        })
        .collect();
    let mut extra: Vec<&str> = Vec::new();
    for (key, _) in &problems {
        if !defs.iter().any(|d| d.name == key) && !extra.contains(&key.as_str()) {
            extra.push(key);
        }
    }
    for key in extra {
        configs.push(ConfigInfo {
            definition: KeyInfo {
                name: key.to_owned(),
                kind: "STRING",
                required: false,
                default_value: None,
                importance: "LOW",
                documentation: "",
                group: "Common",
                order: -1,
                width: "NONE",
                display_name: key.to_owned(),
                dependents: Vec::new(),
            },
            value: ValueInfo {
                name: key.to_owned(),
                value: config.get(key).cloned(),
                recommended_values: Vec::new(),
                errors: errors_of(key),
                visible: true,
            },
        });
    }
    ConfigInfos {
        name: class.to_owned(),
        error_count: problems.len(),
        groups,
        configs,
    }
}

/// `PUT /connector-plugins/{plugin}/config/validate`: always 200 with the
/// validation when the plugin is known, whatever its errors.
pub(super) async fn validate(
    State(rest): State<Rest>,
    Params(name): Params<String>,
    Body(raw): Body<BTreeMap<String, Value>>,
) -> Result<Json<ConfigInfos>, ApiError> {
    let config = config_of(raw)?;
    let (plugin, class) = plugin_of(&config)?;
    if Plugin::find(&name) != Some(plugin) {
        return Err(ApiError::bad_request(format!(
            "Included connector type {class} does not match request type {name}"
        )));
    }
    let here = rest.agent_problems(plugin, &config);
    Ok(Json(config_infos(class, plugin, &config, here)))
}

#[cfg(test)]
#[path = "connector_plugins_tests.rs"]
mod tests;
