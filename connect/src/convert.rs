//! Converters: how a connector's keys and values become record bytes and
//! back (`key.converter`, `value.converter`, and their settings under
//! `key.converter.*` and `value.converter.*`).
//!
//! `JsonConverter`, `StringConverter` and `ByteArrayConverter` work on the
//! bytes alone (`JsonConverter` with `schemas.enable=true` reads and
//! writes Connect's `{"schema": …, "payload": …}` envelope, see
//! [`envelope`]). `AvroConverter`, `ProtobufConverter` and
//! `JsonSchemaConverter` go through a schema registry and Confluent's
//! wire format ([`wire`]): a sink reads the schema id of each key or value
//! and decodes it with that schema, looked up in this agent's built-in
//! registry (the metastore) or, with `*.schema.registry.url`, over HTTP
//! from that registry; a source writes a JSON value with the latest
//! schema of the subject `<topic>-key` or `<topic>-value`
//! (`use.latest.version=true`) or with a schema inferred from the value
//! and registered there (`auto.register.schemas`, the default), over the
//! registry's REST API: the URL set, or this agent's own registry.
//! Protobuf is read only.
//!
//! Sinks see every key and value as the JSON, text or bytes a plain
//! converter would give them: the sink runner hands them records whose
//! registry-framed (or enveloped) keys and values were decoded to JSON
//! text first ([`RecordConverters::normalize`]); a connector that wants
//! JSON values calls [`RecordConverters::key_json`] and
//! [`RecordConverters::value_json`]. A key or value that does not decode
//! is the record's error (the runner's `errors.tolerance` and dead-letter
//! topic apply).

pub mod avro;
pub mod envelope;
pub mod error;
pub mod json_schema;
pub mod protobuf;
pub mod schemas;
pub mod wire;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use bytes::Bytes;
use metastore::Metastore;
use registry::{Parsed, SchemaType};
use serde_json::Value;

pub use self::error::ConvertError;
use self::schemas::{Loaded, Schemas, Source};
use crate::record::SinkRecord;

/// A connector's config (as [`crate::config::Config`]).
type Config = std::collections::BTreeMap<String, String>;
/// A problem with one key: `(key, message)` (as [`crate::config::Problem`]).
type Problem = (String, String);

/// What a converter does with a key or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Json,
    String,
    Bytes,
    Avro,
    Protobuf,
    JsonSchema,
}

/// Every converter: its class, its short name, what it is.
pub const CONVERTERS: [(&str, &str, Kind); 6] = [
    (
        "org.apache.kafka.connect.json.JsonConverter",
        "json",
        Kind::Json,
    ),
    (
        "org.apache.kafka.connect.storage.StringConverter",
        "string",
        Kind::String,
    ),
    (
        "org.apache.kafka.connect.converters.ByteArrayConverter",
        "bytes",
        Kind::Bytes,
    ),
    (
        "io.confluent.connect.avro.AvroConverter",
        "avro",
        Kind::Avro,
    ),
    (
        "io.confluent.connect.protobuf.ProtobufConverter",
        "protobuf",
        Kind::Protobuf,
    ),
    (
        "io.confluent.connect.json.JsonSchemaConverter",
        "jsonschema",
        Kind::JsonSchema,
    ),
];

impl Kind {
    /// The converter a `key.converter` or `value.converter` names (its
    /// class or short name).
    pub fn of(class: &str) -> Option<Kind> {
        let class = class.trim();
        CONVERTERS
            .iter()
            .find(|(c, short, _)| *c == class || short.eq_ignore_ascii_case(class))
            .map(|(_, _, k)| *k)
    }

    /// The short name.
    pub fn name(self) -> &'static str {
        CONVERTERS
            .iter()
            .find(|(_, _, k)| *k == self)
            .map_or("json", |(_, short, _)| *short)
    }

    /// Whether it goes through a schema registry.
    pub fn uses_registry(self) -> bool {
        matches!(self, Kind::Avro | Kind::Protobuf | Kind::JsonSchema)
    }

    fn schema_type(self) -> Option<SchemaType> {
        match self {
            Kind::Avro => Some(SchemaType::Avro),
            Kind::Protobuf => Some(SchemaType::Protobuf),
            Kind::JsonSchema => Some(SchemaType::Json),
            _ => None,
        }
    }
}

/// Key or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Key,
    Value,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Key => "key",
            Side::Value => "value",
        }
    }
}

/// This agent's schema registry URL: unknown until the gateway has bound
/// its listeners, then the URL, or none when the registry is off.
#[derive(Debug, Clone, Default)]
pub struct DefaultRegistry(Arc<OnceLock<Option<String>>>);

impl DefaultRegistry {
    /// One whose URL is already known.
    pub fn at(url: impl Into<String>) -> DefaultRegistry {
        let r = DefaultRegistry::default();
        let _ = r.0.set(Some(url.into()));
        r
    }

    /// One known to be off.
    pub fn off() -> DefaultRegistry {
        let r = DefaultRegistry::default();
        r.set(None);
        r
    }

    /// Records the registry listener's address (an unspecified address
    /// is reached on loopback), or that there is none.
    pub fn set(&self, addr: Option<SocketAddr>) {
        let url = addr.map(|addr| {
            let host = match addr {
                SocketAddr::V4(a) if a.ip().is_unspecified() => "127.0.0.1".to_owned(),
                SocketAddr::V6(a) if a.ip().is_unspecified() => "[::1]".to_owned(),
                SocketAddr::V4(a) => a.ip().to_string(),
                SocketAddr::V6(a) => format!("[{}]", a.ip()),
            };
            format!("http://{host}:{}", addr.port())
        });
        let _ = self.0.set(url);
    }

    /// The URL, when known and on.
    pub fn url(&self) -> Option<String> {
        self.0.get().cloned().flatten()
    }

    /// Whether the registry is known to be off.
    pub fn is_off(&self) -> bool {
        matches!(self.0.get(), Some(None))
    }

    /// The URL, waiting up to `patience` for the agent to tell it (a task
    /// may start before the gateway has bound its listeners).
    pub async fn wait(&self, patience: std::time::Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + patience;
        while self.0.get().is_none() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        self.url()
    }
}

impl PartialEq for DefaultRegistry {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for DefaultRegistry {}

/// One converter's settings (`<side>.converter` and `<side>.converter.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub kind: Kind,
    /// `schema.registry.url` (the first of a comma-separated list).
    pub registry_url: Option<String>,
    /// `auto.register.schemas` (default true).
    pub auto_register: bool,
    /// `use.latest.version` (default false).
    pub use_latest: bool,
    /// `schemas.enable` of `JsonConverter` (default false).
    pub schemas_enable: bool,
    /// `json.fail.invalid.schema` of `JsonSchemaConverter` (default false).
    pub fail_invalid: bool,
    /// `basic.auth.user.info` (`user:password`).
    pub user_info: Option<(String, String)>,
}

impl Settings {
    /// Reads the settings of `side`'s converter, adding every problem.
    pub fn parse(config: &Config, side: Side, problems: &mut Vec<Problem>) -> Settings {
        let key = format!("{}.converter", side.as_str());
        let kind = match config.get(&key) {
            None => Kind::Json,
            Some(v) => Kind::of(v).unwrap_or_else(|| {
                problems.push((
                    key.clone(),
                    format!(
                        "Invalid value {v} for configuration {key}: use one of {}",
                        CONVERTERS
                            .iter()
                            .map(|(c, short, _)| format!("{c} ({short})"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
                Kind::Json
            }),
        };
        let setting = |name: &str| {
            config
                .get(&format!("{key}.{name}"))
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
        };
        let mut flag = |name: &str, default: bool| match setting(name) {
            None => default,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                problems.push((
                    format!("{key}.{name}"),
                    format!("Invalid value {v} for configuration {key}.{name}: true or false"),
                ));
                default
            }
        };
        let auto_register = flag("auto.register.schemas", true);
        let use_latest = flag("use.latest.version", false);
        let schemas_enable = flag("schemas.enable", false);
        let fail_invalid = flag("json.fail.invalid.schema", false);
        let registry_url = setting("schema.registry.url").and_then(|v| {
            let first = v.split(',').map(str::trim).find(|u| !u.is_empty())?;
            match reqwest::Url::parse(first) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                    Some(first.trim_end_matches('/').to_owned())
                }
                _ => {
                    problems.push((
                        format!("{key}.schema.registry.url"),
                        format!(
                            "Invalid value {v} for configuration {key}.schema.registry.url: \
                             an http:// or https:// URL"
                        ),
                    ));
                    None
                }
            }
        });
        let user_info = setting("basic.auth.user.info").and_then(|v| match v.split_once(':') {
            Some((u, p)) => Some((u.to_owned(), p.to_owned())),
            None => {
                problems.push((
                    format!("{key}.basic.auth.user.info"),
                    format!("{key}.basic.auth.user.info: user:password"),
                ));
                None
            }
        });
        Settings {
            kind,
            registry_url,
            auto_register,
            use_latest,
            schemas_enable,
            fail_invalid,
            user_info,
        }
    }
}

/// Every problem with `config`'s converters, as far as the config alone
/// tells (see [`registry_problems`] for what depends on this agent).
pub fn problems(config: &Config, sink: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    for side in [Side::Key, Side::Value] {
        let s = Settings::parse(config, side, &mut problems);
        let key = format!("{}.converter", side.as_str());
        if sink || !s.kind.uses_registry() {
            continue;
        }
        if s.kind == Kind::Protobuf {
            problems.push((
                key,
                "ProtobufConverter reads records only: a source connector cannot write with it \
                 (use AvroConverter or JsonSchemaConverter)"
                    .into(),
            ));
        } else if !s.auto_register && !s.use_latest {
            problems.push((
                format!("{key}.auto.register.schemas"),
                format!(
                    "{key}: with auto.register.schemas=false a source writes with the latest \
                     schema of its subject: set {key}.use.latest.version=true"
                ),
            ));
        }
    }
    problems
}

/// The problems that depend on this agent: a source connector writing
/// through a registry with no `schema.registry.url` needs this agent's
/// registry, which may be off.
pub fn registry_problems(config: &Config, sink: bool, registry_off: bool) -> Vec<Problem> {
    if sink || !registry_off {
        return Vec::new();
    }
    let mut ignored = Vec::new();
    [Side::Key, Side::Value]
        .into_iter()
        .filter_map(|side| {
            let s = Settings::parse(config, side, &mut ignored);
            let key = format!("{}.converter", side.as_str());
            (s.kind.uses_registry() && s.registry_url.is_none()).then(|| {
                (
                    key.clone(),
                    format!(
                        "{key}: this agent's schema registry is off (--schema-registry-addr off, \
                         or its address was taken): set {key}.schema.registry.url"
                    ),
                )
            })
        })
        .collect()
}

/// A key or value as its converter reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Json(Value),
    Text(String),
    Bytes(Bytes),
}

impl Decoded {
    /// As JSON: text as a string, bytes as a base64 string.
    pub fn into_json(self) -> Value {
        match self {
            Decoded::Json(v) => v,
            Decoded::Text(t) => Value::String(t),
            Decoded::Bytes(b) => {
                Value::String(base64::engine::general_purpose::STANDARD.encode(&b))
            }
        }
    }
}

/// The schema a source writes a subject with, and its id.
type Writing = (i32, Arc<Loaded>);

/// One side's converter.
pub struct Converter {
    side: Side,
    settings: Settings,
    schemas: Option<Arc<Schemas>>,
    /// Per subject and schema text (empty for the latest version): the
    /// schema written with.
    writing: Mutex<HashMap<(String, String), Writing>>,
}

impl std::fmt::Debug for Converter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Converter")
            .field("side", &self.side)
            .field("settings", &self.settings)
            .finish()
    }
}

impl Converter {
    /// A converter reading schemas from `source` (used when its kind goes
    /// through a registry).
    pub fn new(side: Side, settings: Settings, source: Option<Source>) -> Converter {
        let schemas = if settings.kind.uses_registry() {
            source.map(|s| Arc::new(Schemas::new(s)))
        } else {
            None
        };
        Converter {
            side,
            settings,
            schemas,
            writing: Mutex::new(HashMap::new()),
        }
    }

    pub fn kind(&self) -> Kind {
        self.settings.kind
    }

    /// Whether reading changes the bytes a sink is given (a registry
    /// converter, or JSON envelopes).
    fn rewrites(&self) -> bool {
        self.settings.kind.uses_registry()
            || (self.settings.kind == Kind::Json && self.settings.schemas_enable)
    }

    fn schemas(&self) -> Result<&Schemas, ConvertError> {
        self.schemas.as_deref().ok_or_else(|| {
            ConvertError::Registry("no schema registry is known to this converter".into())
        })
    }

    /// Reads a key or value.
    pub async fn decode(&self, bytes: &[u8]) -> Result<Decoded, ConvertError> {
        match self.settings.kind {
            Kind::Bytes => Ok(Decoded::Bytes(Bytes::copy_from_slice(bytes))),
            Kind::String => std::str::from_utf8(bytes)
                .map(|t| Decoded::Text(t.to_owned()))
                .map_err(|_| ConvertError::Plain("not UTF-8 (StringConverter)".into())),
            Kind::Json => {
                let value: Value = serde_json::from_slice(bytes)
                    .map_err(|e| ConvertError::Plain(format!("not JSON: {e}")))?;
                if self.settings.schemas_enable {
                    envelope::unwrap(value)
                        .map(Decoded::Json)
                        .map_err(ConvertError::Plain)
                } else {
                    Ok(Decoded::Json(value))
                }
            }
            Kind::Avro | Kind::Protobuf | Kind::JsonSchema => {
                let (id, rest) = wire::split(bytes)?;
                let loaded = self.schemas()?.by_id(id).await?;
                self.decode_framed(id, &loaded, rest).map(Decoded::Json)
            }
        }
    }

    fn decode_framed(&self, id: i32, loaded: &Loaded, rest: &[u8]) -> Result<Value, ConvertError> {
        let failed =
            |kind: &'static str| move |reason: String| ConvertError::Decode { id, kind, reason };
        match (&loaded.parsed, self.settings.kind) {
            (Parsed::Avro(schema), Kind::Avro) => {
                avro::decode(schema, rest).map_err(failed("AVRO"))
            }
            (Parsed::Protobuf(schema), Kind::Protobuf) => {
                let (indexes, payload) = wire::message_indexes(rest)?;
                protobuf::decode(schema, &indexes, payload).map_err(failed("PROTOBUF"))
            }
            (Parsed::Json(_), Kind::JsonSchema) => {
                let value: Value = serde_json::from_slice(rest)
                    .map_err(|e| failed("JSON")(format!("the payload is not JSON: {e}")))?;
                if self.settings.fail_invalid {
                    match &loaded.validator {
                        Some(Ok(v)) => json_schema::check(v, &value).map_err(failed("JSON"))?,
                        Some(Err(e)) => return Err(failed("JSON")(e.clone())),
                        None => {}
                    }
                }
                Ok(value)
            }
            (parsed, kind) => Err(ConvertError::Decode {
                id,
                kind: parsed.schema_type().as_str(),
                reason: format!(
                    "it is a {} schema, but the {}.converter is {}",
                    parsed.schema_type().as_str(),
                    self.side.as_str(),
                    kind.name()
                ),
            }),
        }
    }

    /// Writes `value` for `topic`.
    pub async fn encode(&self, topic: &str, value: &Value) -> Result<Bytes, ConvertError> {
        let text_of = |v: &Value| match v {
            Value::String(s) => s.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        };
        match self.settings.kind {
            Kind::String | Kind::Bytes => Ok(Bytes::from(text_of(value))),
            Kind::Json if self.settings.schemas_enable => {
                Ok(Bytes::from(envelope::wrap(value.clone()).to_string()))
            }
            Kind::Json => Ok(Bytes::from(value.to_string())),
            Kind::Protobuf => Err(ConvertError::Encode(
                "ProtobufConverter reads records only".into(),
            )),
            Kind::Avro | Kind::JsonSchema => {
                let (id, loaded) = self.schema_to_write(topic, value).await?;
                let payload = match &loaded.parsed {
                    Parsed::Avro(schema) => {
                        avro::encode(schema, value).map_err(ConvertError::Encode)?
                    }
                    Parsed::Json(_) => {
                        match &loaded.validator {
                            Some(Ok(v)) => {
                                json_schema::check(v, value).map_err(ConvertError::Encode)?
                            }
                            Some(Err(e)) => return Err(ConvertError::Encode(e.clone())),
                            None => {}
                        }
                        value.to_string().into_bytes()
                    }
                    Parsed::Protobuf(_) => {
                        return Err(ConvertError::Encode(format!(
                            "schema id {id} is a PROTOBUF schema, but the {}.converter is {}",
                            self.side.as_str(),
                            self.settings.kind.name()
                        )))
                    }
                };
                Ok(Bytes::from(wire::frame(id, &payload)))
            }
        }
    }

    /// The schema `value` is written with: the subject's latest, or one
    /// inferred from it and registered.
    async fn schema_to_write(&self, topic: &str, value: &Value) -> Result<Writing, ConvertError> {
        let subject = format!("{topic}-{}", self.side.as_str());
        let (schema_type, text) = if self.settings.use_latest {
            (None, String::new())
        } else {
            let inferred = match self.settings.kind {
                Kind::Avro => avro::infer(value).map_err(ConvertError::Encode)?,
                _ => json_schema::infer(value),
            };
            (self.settings.kind.schema_type(), inferred.to_string())
        };
        let cache_key = (subject.clone(), text.clone());
        if let Some(hit) = self
            .writing
            .lock()
            .ok()
            .and_then(|m| m.get(&cache_key).cloned())
        {
            return Ok(hit);
        }
        let schemas = self.schemas()?;
        let found = match schema_type {
            None => schemas.latest(&subject).await?,
            Some(t) => schemas.register(&subject, t, &text).await?,
        };
        if let Ok(mut m) = self.writing.lock() {
            m.insert(cache_key, found.clone());
        }
        Ok(found)
    }
}

/// A connector's key and value converters.
#[derive(Debug)]
pub struct RecordConverters {
    pub key: Converter,
    pub value: Converter,
}

fn remote(settings: &Settings, url: String) -> Result<Source, String> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| format!("the schema registry client could not be set up: {e}"))?;
    Ok(Source::Remote {
        url: url.trim_end_matches('/').to_owned(),
        client,
        user_info: settings.user_info.clone(),
    })
}

fn parse_both(config: &Config) -> Result<(Settings, Settings), String> {
    let mut problems = Vec::new();
    let key = Settings::parse(config, Side::Key, &mut problems);
    let value = Settings::parse(config, Side::Value, &mut problems);
    if problems.is_empty() {
        Ok((key, value))
    } else {
        Err(problems
            .into_iter()
            .map(|(k, m)| format!("{k}: {m}"))
            .collect::<Vec<_>>()
            .join("; "))
    }
}

impl RecordConverters {
    /// A sink's converters: schemas by id from `*.schema.registry.url`
    /// when set, else from `meta` (this agent's built-in registry).
    pub fn for_sink(config: &Config, meta: &Metastore) -> Result<RecordConverters, String> {
        let (key, value) = parse_both(config)?;
        let source = |s: &Settings| match &s.registry_url {
            Some(url) => remote(s, url.clone()),
            None => Ok(Source::Local(meta.clone())),
        };
        Ok(RecordConverters {
            key: Converter::new(Side::Key, key.clone(), Some(source(&key)?)),
            value: Converter::new(Side::Value, value.clone(), Some(source(&value)?)),
        })
    }

    /// A source's converters: schemas registered and read over the REST
    /// API of `*.schema.registry.url`, else of this agent's registry
    /// (waited for up to a minute while the agent starts).
    pub async fn for_source(
        config: &Config,
        default_registry: &DefaultRegistry,
    ) -> Result<RecordConverters, String> {
        let (key, value) = parse_both(config)?;
        let needs_default = [&key, &value]
            .iter()
            .any(|s| s.kind.uses_registry() && s.registry_url.is_none());
        let default_url = if needs_default {
            default_registry
                .wait(std::time::Duration::from_secs(60))
                .await
        } else {
            None
        };
        let make = |side: Side, s: Settings| -> Result<Converter, String> {
            let source = if s.kind.uses_registry() {
                let url = s
                    .registry_url
                    .clone()
                    .or_else(|| default_url.clone())
                    .ok_or_else(|| {
                        format!(
                            "{side}.converter: this agent's schema registry is off: set \
                         {side}.converter.schema.registry.url",
                            side = side.as_str()
                        )
                    })?;
                Some(remote(&s, url)?)
            } else {
                None
            };
            Ok(Converter::new(side, s, source))
        };
        Ok(RecordConverters {
            key: make(Side::Key, key)?,
            value: make(Side::Value, value)?,
        })
    }

    /// The record's key as JSON (`None` when it has none).
    pub async fn key_json(&self, record: &SinkRecord) -> Result<Option<Value>, String> {
        read_json(&self.key, record, record.key.as_deref()).await
    }

    /// The record's value as JSON (`None` when it has none: a tombstone).
    pub async fn value_json(&self, record: &SinkRecord) -> Result<Option<Value>, String> {
        read_json(&self.value, record, record.value.as_deref()).await
    }

    /// The record as a sink is given it: keys and values that a registry
    /// converter (or a JSON envelope) frames are replaced by their JSON
    /// text; the others are left as they are.
    pub async fn normalize(&self, record: &SinkRecord) -> Result<SinkRecord, String> {
        let mut out = record.clone();
        if self.key.rewrites() {
            out.key = read_json(&self.key, record, record.key.as_deref())
                .await?
                .map(|v| Bytes::from(v.to_string()));
        }
        if self.value.rewrites() {
            out.value = read_json(&self.value, record, record.value.as_deref())
                .await?
                .map(|v| Bytes::from(v.to_string()));
        }
        Ok(out)
    }

    /// A source's record, made by the connector as (JSON) bytes, in the
    /// bytes its converters write; unchanged unless a registry converter
    /// or a JSON envelope is configured. Bytes that are not JSON are
    /// written as a JSON string.
    pub async fn encode(
        &self,
        topic: &str,
        key: Option<Bytes>,
        value: Bytes,
    ) -> Result<(Option<Bytes>, Bytes), String> {
        let key = match key {
            Some(k) => Some(write_side(&self.key, topic, k).await?),
            None => None,
        };
        Ok((key, write_side(&self.value, topic, value).await?))
    }
}

async fn write_side(c: &Converter, topic: &str, bytes: Bytes) -> Result<Bytes, String> {
    if !c.rewrites() {
        return Ok(bytes);
    }
    let json = serde_json::from_slice::<Value>(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    c.encode(topic, &json)
        .await
        .map_err(|e| format!("writing a {} to {topic} failed: {e}", c.side.as_str()))
}

async fn read_json(
    converter: &Converter,
    record: &SinkRecord,
    bytes: Option<&[u8]>,
) -> Result<Option<Value>, String> {
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    match converter.decode(bytes).await {
        Ok(d) => Ok(Some(d.into_json())),
        Err(e) => Err(format!(
            "the {} of {}-{} at offset {}: {e}",
            converter.side.as_str(),
            record.topic,
            record.partition,
            record.offset,
        )),
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
