//! The pipeline file: what a processor reads, how it windows and aggregates,
//! and where it writes. Parsed from YAML with unknown keys refused (the
//! error names the key and its line), then validated.
//!
//! ```yaml
//! name: counts
//! source: {bootstrap: "127.0.0.1:9092", topic: events, format: json, event_time: ts, key: k}
//! window: {type: tumbling, size: 1s}
//! aggregates: [{op: count, as: n}]
//! sink: {type: parquet, url: "s3://bucket/counts"}
//! ```
//!
//! The source's record format and its keys (`registry` for Avro, `layout`
//! and `endian` for fixed binary values) are checked in `pipeline/layout.rs`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

mod layout;
mod validate;

pub use layout::{Endian, FieldType, LayoutField};

/// Column names the output always has; an aggregate may not take them.
pub const KEY_COLUMN: &str = "key";
pub const WINDOW_START_COLUMN: &str = "window_start";
pub const WINDOW_END_COLUMN: &str = "window_end";

/// A pipeline file that cannot be used, with the reason.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("cannot read the pipeline file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the pipeline file is not valid: {0}")]
    Parse(String),
    #[error("the pipeline file is not valid: {key}: {reason}")]
    Invalid { key: String, reason: String },
}

fn invalid(key: &str, reason: impl Into<String>) -> PipelineError {
    PipelineError::Invalid {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// One pipeline: a source topic, a window, aggregates and a sink.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// Names the pipeline in logs.
    pub name: String,
    pub source: Source,
    pub window: Window,
    /// Conditions a record must meet to be aggregated, all of them (an
    /// item may be `any` of several).
    #[serde(default)]
    pub filter: Vec<FilterItem>,
    pub aggregates: Vec<Aggregate>,
    pub sink: Sink,
    /// A live view of the closed windows over WebSocket.
    #[serde(default)]
    pub live: Option<LiveView>,
    /// How often closed windows are written and the state checkpointed.
    #[serde(default = "default_checkpoint_interval", with = "duration")]
    pub checkpoint_interval: Duration,
    /// Several workers sharing the source's partitions (see
    /// the `distribute` module); without it one process reads them all.
    #[serde(default)]
    pub distribution: Option<Distribution>,
    /// Set by a worker for each partition it runs (`p<partition>`): the
    /// partition's output and checkpoints are under `sink.url` +
    /// `/partitions/<partition>`, its transactions under its own id.
    #[serde(skip)]
    pub instance: Option<String>,
    /// Where the local state store lives.
    #[serde(default)]
    pub state: Option<StateDir>,
}

/// How a pipeline's workers share the source's partitions.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distribution {
    /// Agents' HTTP addresses (`http://host:port`), tried in turn: their
    /// REST API keeps the workers' partition leases in the metastore.
    pub coordinators: Vec<String>,
    /// This worker's id, unique among the pipeline's workers; by default
    /// the host name and the process id.
    #[serde(default)]
    pub worker: Option<String>,
    /// How long a worker that stops heartbeating keeps its partitions.
    #[serde(default = "default_lease_ttl", with = "duration")]
    pub lease_ttl: Duration,
}

/// The field of a live view's row that tells a closed window's (`true`)
/// from an early result's (`false`); no aggregate may take its name.
pub const FINAL: &str = "final";

/// Whether a bootstrap address names AeroStream's native protocol
/// (`aero://host:port`) rather than a Kafka listener.
pub fn is_native(bootstrap: &str) -> bool {
    bootstrap.starts_with("aero://")
}

fn default_lease_ttl() -> Duration {
    Duration::from_secs(6)
}

/// The local state store's folder.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateDir {
    pub dir: std::path::PathBuf,
}

/// Where the live view listens.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveView {
    /// `host:port` (port 0: any free port, logged at start).
    pub listen: String,
}

/// The topic read and how its records are understood.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// A broker's Kafka address, `host:port`.
    pub bootstrap: String,
    pub topic: String,
    pub format: Format,
    /// `avro`: the schema registry's URL, `http://host:port`.
    #[serde(default)]
    pub registry: Option<String>,
    /// `fixed`: the fields of each value, in order, packed.
    #[serde(default)]
    pub layout: Option<Vec<LayoutField>>,
    /// `fixed`: the byte order of its numbers (default little-endian).
    #[serde(default)]
    pub endian: Option<Endian>,
    /// The field holding the event time, milliseconds since the epoch.
    pub event_time: String,
    /// The field grouped by; without it, the record's Kafka key.
    #[serde(default)]
    pub key: Option<String>,
    /// A partition with no new record for this long (and nothing more to
    /// read) stops holding the watermark back.
    #[serde(default = "default_idle_timeout", with = "duration")]
    pub idle_timeout: Duration,
    /// TLS to the brokers (Kafka's SSL and SASL_SSL).
    #[serde(default)]
    pub tls: Option<SourceTls>,
    /// A SASL login to the brokers.
    #[serde(default)]
    pub sasl: Option<SourceSasl>,
}

/// TLS to the brokers: the CA to trust, and a client certificate for
/// listeners that ask for one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceTls {
    /// CA certificates (PEM) the brokers' certificates are checked with.
    pub ca: std::path::PathBuf,
    #[serde(default)]
    pub cert: Option<std::path::PathBuf>,
    #[serde(default)]
    pub key: Option<std::path::PathBuf>,
}

/// A SASL login; the password is read from an environment variable, never
/// from the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSasl {
    /// `SCRAM-SHA-512`, `SCRAM-SHA-256` or `PLAIN`.
    pub mechanism: String,
    pub username: String,
    /// The variable holding the password (default
    /// `AEROSTREAM_SASL_PASSWORD`).
    #[serde(default = "default_password_env")]
    pub password_env: String,
}

fn default_password_env() -> String {
    "AEROSTREAM_SASL_PASSWORD".to_owned()
}

/// How a record's value is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One JSON object per record value.
    Json,
    /// An Avro record per value in the Confluent wire format: byte 0, the
    /// schema id (4 bytes, big-endian), the Avro binary encoding.
    Avro,
    /// Fields at fixed offsets (`layout`), numbers in `endian` order.
    Fixed,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Avro => "avro",
            Format::Fixed => "fixed",
        }
    }
}

/// The windows records are grouped into, on event time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    #[serde(rename = "type")]
    pub kind: WindowKind,
    /// The window length (tumbling and sliding).
    #[serde(default, with = "optional_duration")]
    pub size: Option<Duration>,
    /// How far apart sliding windows start.
    #[serde(default, with = "optional_duration")]
    pub slide: Option<Duration>,
    /// The quiet time that ends a session.
    #[serde(default, with = "optional_duration")]
    pub gap: Option<Duration>,
    /// How far behind the newest event time a record may be and still count.
    #[serde(default, with = "duration")]
    pub allowed_lateness: Duration,
    /// What becomes of late records.
    #[serde(default)]
    pub late_records: LateRecords,
    /// Every this much processing time, the figures so far of each open
    /// window that changed go to the live view, marked not final (early
    /// results); shorter than the window, and only with `live`.
    #[serde(default, with = "optional_duration")]
    pub early: Option<Duration>,
}

/// What becomes of a record whose windows have all closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LateRecords {
    /// Counted and dropped.
    #[default]
    Drop,
    /// Counted and written to `late/part-<epoch>.parquet` under the sink
    /// URL, committed with the checkpoint like the windows.
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WindowKind {
    /// Fixed-size windows side by side: `[k*size, (k+1)*size)`.
    Tumbling,
    /// Fixed-size windows starting every `slide`: `[k*slide, k*slide+size)`;
    /// a record is in `size / slide` of them.
    Sliding,
    /// Per key, records closer than `gap` to each other in event time form
    /// one window: `[first event, last event + gap)`.
    Session,
}

impl WindowKind {
    pub fn name(self) -> &'static str {
        match self {
            WindowKind::Tumbling => "tumbling",
            WindowKind::Sliding => "sliding",
            WindowKind::Session => "session",
        }
    }
}

/// The windows in milliseconds, as validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpec {
    /// Tumbling (`slide == size`) or sliding windows.
    Aligned {
        size: i64,
        slide: i64,
    },
    Session {
        gap: i64,
    },
}

/// One item of `filter`: a condition, or `{any: [...]}`, conditions one
/// of which must hold. An `any` inside an `any` is refused: it would say
/// no more than its conditions listed in the outer one.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawFilter")]
pub enum FilterItem {
    Condition(Filter),
    Any(Vec<Filter>),
}

/// One condition on a record's field.
#[derive(Debug, Clone)]
pub struct Filter {
    pub field: String,
    pub op: FilterOp,
    /// The value compared with (every op but `in`).
    pub value: Option<Scalar>,
    /// The values one of which the field must equal (`in`).
    pub values: Option<Vec<Scalar>>,
}

/// A filter item as written: a condition's keys, or `any`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFilter {
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    op: Option<FilterOp>,
    #[serde(default)]
    value: Option<Scalar>,
    #[serde(default)]
    values: Option<Vec<Scalar>>,
    #[serde(default)]
    any: Option<Vec<RawFilter>>,
}

impl TryFrom<RawFilter> for FilterItem {
    type Error = String;

    fn try_from(raw: RawFilter) -> Result<FilterItem, String> {
        let Some(any) = raw.any else {
            return raw.condition().map(FilterItem::Condition);
        };
        if raw.field.is_some() || raw.op.is_some() || raw.value.is_some() || raw.values.is_some() {
            return Err(
                "`any` takes a list of conditions and no field, op, value or values of its own"
                    .into(),
            );
        }
        if any.is_empty() {
            return Err("`any` needs at least one condition".into());
        }
        any.into_iter()
            .map(|c| {
                if c.any.is_some() {
                    return Err("an `any` inside an `any` is not supported: list its \
                                conditions in the outer `any`"
                        .to_owned());
                }
                c.condition()
            })
            .collect::<Result<_, _>>()
            .map(FilterItem::Any)
    }
}

impl RawFilter {
    fn condition(self) -> Result<Filter, String> {
        match (self.field, self.op) {
            (Some(field), Some(op)) => Ok(Filter {
                field,
                op,
                value: self.value,
                values: self.values,
            }),
            (None, _) => Err("a condition needs `field` (or is `{any: [...]}`)".into()),
            (_, None) => Err("a condition needs `op`".into()),
        }
    }
}

impl FilterItem {
    /// The conditions, in the order they are written.
    pub fn conditions(&self) -> &[Filter] {
        match self {
            FilterItem::Condition(c) => std::slice::from_ref(c),
            FilterItem::Any(any) => any,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

/// A value a filter compares with: a number compares with numeric fields,
/// a string with string fields.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    Number(f64),
    Text(String),
}

impl Filter {
    /// The values compared with, whatever the op.
    pub fn operands(&self) -> Vec<&Scalar> {
        match self.op {
            FilterOp::In => self.values.iter().flatten().collect(),
            _ => self.value.iter().collect(),
        }
    }

    /// Whether the field is compared as text (else as a number).
    pub fn is_text(&self) -> bool {
        matches!(self.operands().first(), Some(Scalar::Text(_)))
    }
}

/// One output column computed per key and window.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregate {
    pub op: AggregateOp,
    /// The numeric field aggregated (every op but `count`).
    #[serde(default)]
    pub field: Option<String>,
    /// The numeric field weighting `field` (`wavg` only).
    #[serde(default)]
    pub weight: Option<String>,
    /// The quantile, from 0 to 1 (`quantile` only).
    #[serde(default)]
    pub q: Option<f64>,
    /// The output column's name.
    #[serde(rename = "as")]
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AggregateOp {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    /// Weighted average: sum(field * weight) / sum(weight) over the
    /// records that have both (e.g. a volume-weighted average price).
    Wavg,
    /// Approximate count of the field's distinct values (a string, number
    /// or boolean; HyperLogLog++, about 1.6% standard error).
    Distinct,
    /// Approximate `q`-quantile of the numeric field (DDSketch, within 1%
    /// of the true value).
    Quantile,
}

/// Where closed windows go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sink {
    #[serde(rename = "type")]
    pub kind: SinkKind,
    /// `s3://bucket/prefix`, or `file:///abs/dir`: the Parquet files, and
    /// the checkpoints (of a topic sink too).
    pub url: String,
    /// The output topic (`topic` sinks), on the source's cluster.
    #[serde(default)]
    pub topic: Option<String>,
    /// Parquet sinks: folders of the windows' UTC day (`dt=YYYY-MM-DD/`)
    /// or hour (`dt=YYYY-MM-DD/hour=HH/`), as Hive partitions.
    #[serde(default)]
    pub partition_by: Option<PartitionBy>,
}

/// How a Parquet sink's files are put in folders by window start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionBy {
    Day,
    Hour,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// Parquet files committed by checkpoint.
    Parquet,
    /// JSON records in a topic, written in one Kafka transaction per
    /// checkpoint with the source offsets.
    Topic,
}

impl Pipeline {
    /// The local state store's folder: `state.dir`, or by default
    /// `<temp dir>/aerostream-state/<name>-<hash of the sink URL>`, so two
    /// pipelines of one name writing to different sinks never share one.
    pub fn state_dir(&self) -> std::path::PathBuf {
        match &self.state {
            Some(s) => s.dir.clone(),
            None => {
                let hash = twox_hash::XxHash64::oneshot(0, self.sink.url.as_bytes());
                // the name as one safe path component
                let name: String = self
                    .name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                std::env::temp_dir()
                    .join("aerostream-state")
                    .join(format!("{name}-{hash:016x}"))
            }
        }
    }
}

fn default_checkpoint_interval() -> Duration {
    Duration::from_secs(2)
}

fn default_idle_timeout() -> Duration {
    Duration::from_secs(5)
}

impl Pipeline {
    /// Reads, parses and validates the pipeline file at `path`.
    pub fn from_file(path: &std::path::Path) -> Result<Pipeline, PipelineError> {
        let text = std::fs::read_to_string(path).map_err(|source| PipelineError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Pipeline::parse(&text)
    }

    /// Parses and validates a pipeline from YAML text.
    pub fn parse(text: &str) -> Result<Pipeline, PipelineError> {
        let pipeline: Pipeline =
            serde_yaml::from_str(text).map_err(|e| PipelineError::Parse(e.to_string()))?;
        pipeline.validate()?;
        Ok(pipeline)
    }

    /// Every condition of the filters, in the order they are written: each
    /// has a column of its own in a decoded batch.
    pub fn filter_conditions(&self) -> impl Iterator<Item = &Filter> {
        self.filter.iter().flat_map(FilterItem::conditions)
    }

    /// The windows in milliseconds.
    pub fn windows(&self) -> WindowSpec {
        let w = &self.window;
        match w.kind {
            WindowKind::Tumbling => WindowSpec::Aligned {
                size: ms(w.size),
                slide: ms(w.size),
            },
            WindowKind::Sliding => WindowSpec::Aligned {
                size: ms(w.size),
                slide: ms(w.slide),
            },
            WindowKind::Session => WindowSpec::Session { gap: ms(w.gap) },
        }
    }

    /// The allowed lateness in milliseconds.
    pub fn lateness_ms(&self) -> i64 {
        i64::try_from(self.window.allowed_lateness.as_millis()).unwrap_or(i64::MAX)
    }

    /// The numeric fields the aggregates read (values and weights), each
    /// once, in first-use order.
    pub fn value_fields(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let read = self
            .aggregates
            .iter()
            .filter(|a| a.op != AggregateOp::Distinct)
            .flat_map(|a| a.field.iter().chain(a.weight.iter()));
        for f in read {
            if !out.contains(f) {
                out.push(f.clone());
            }
        }
        out
    }

    /// The fields `distinct` aggregates count, each once, in first-use
    /// order.
    pub fn distinct_fields(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in self
            .aggregates
            .iter()
            .filter(|a| a.op == AggregateOp::Distinct)
        {
            if let Some(f) = &a.field {
                if !out.contains(f) {
                    out.push(f.clone());
                }
            }
        }
        out
    }
}

/// The most windows one record may fall in (`size / slide`).
pub const MAX_WINDOWS_PER_RECORD: i64 = 1_000;

/// A validated duration in milliseconds (at least 1).
fn ms(d: Option<Duration>) -> i64 {
    d.map_or(1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .max(1)
}

/// Parses `500ms`, `1s`, `2m`, `1h` (a whole number and a unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let expected = || format!("{text:?} is not a duration: expected e.g. 500ms, 1s, 2m or 1h");
    let n: u64 = number.parse().map_err(|_| expected())?;
    let ms = match unit.trim() {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(expected()),
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// Serde glue for durations written as `1s`, `500ms`.
mod duration {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// The same for a duration that may be left out.
mod optional_duration {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
