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

use std::time::Duration;

use serde::{Deserialize, Deserializer};

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
    pub aggregates: Vec<Aggregate>,
    pub sink: Sink,
    /// How often closed windows are written and the state checkpointed.
    #[serde(default = "default_checkpoint_interval", with = "duration")]
    pub checkpoint_interval: Duration,
}

/// The topic read and how its records are understood.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// A broker's Kafka address, `host:port`.
    pub bootstrap: String,
    pub topic: String,
    pub format: Format,
    /// The field holding the event time, milliseconds since the epoch.
    pub event_time: String,
    /// The field grouped by; without it, the record's Kafka key.
    #[serde(default)]
    pub key: Option<String>,
    /// A partition with no new record for this long (and nothing more to
    /// read) stops holding the watermark back.
    #[serde(default = "default_idle_timeout", with = "duration")]
    pub idle_timeout: Duration,
}

/// How a record's value is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One JSON object per record value.
    Json,
}

/// The windows records are grouped into, on event time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    #[serde(rename = "type")]
    pub kind: WindowKind,
    #[serde(with = "duration")]
    pub size: Duration,
    /// How far behind the newest event time a record may be and still count.
    #[serde(default, with = "duration")]
    pub allowed_lateness: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WindowKind {
    /// Fixed-size windows side by side: `[k*size, (k+1)*size)`.
    Tumbling,
}

/// One output column computed per key and window.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregate {
    pub op: AggregateOp,
    /// The numeric field aggregated (every op but `count`).
    #[serde(default)]
    pub field: Option<String>,
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
}

/// Where closed windows go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sink {
    #[serde(rename = "type")]
    pub kind: SinkKind,
    /// `s3://bucket/prefix`, or `file:///abs/dir`.
    pub url: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// Parquet files committed by checkpoint.
    Parquet,
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

    /// Checks what the types alone cannot.
    pub fn validate(&self) -> Result<(), PipelineError> {
        if self.name.trim().is_empty() {
            return Err(invalid("name", "must not be empty"));
        }
        let s = &self.source;
        if s.bootstrap.trim().is_empty() || !s.bootstrap.contains(':') {
            return Err(invalid("source.bootstrap", "expected host:port"));
        }
        if s.topic.trim().is_empty() {
            return Err(invalid("source.topic", "must not be empty"));
        }
        if s.event_time.trim().is_empty() {
            return Err(invalid("source.event_time", "must name a field"));
        }
        if s.key.as_deref().is_some_and(|k| k.trim().is_empty()) {
            return Err(invalid("source.key", "must name a field (or be left out)"));
        }
        if s.idle_timeout.is_zero() {
            return Err(invalid("source.idle_timeout", "must be more than 0"));
        }
        if self.window.size.as_millis() < 1 {
            return Err(invalid("window.size", "must be at least 1ms"));
        }
        if self.checkpoint_interval.as_millis() < 1 {
            return Err(invalid("checkpoint_interval", "must be at least 1ms"));
        }
        if self.aggregates.is_empty() {
            return Err(invalid("aggregates", "at least one aggregate is needed"));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, a) in self.aggregates.iter().enumerate() {
            let at = |key: &str| format!("aggregates[{i}].{key}");
            match (a.op, &a.field) {
                (AggregateOp::Count, Some(_)) => {
                    return Err(invalid(&at("field"), "count takes no field"))
                }
                (AggregateOp::Count, None) => {}
                (_, None) => return Err(invalid(&at("field"), "this op needs a field")),
                (_, Some(f)) if f.trim().is_empty() => {
                    return Err(invalid(&at("field"), "must name a field"))
                }
                _ => {}
            }
            if a.name.trim().is_empty() {
                return Err(invalid(&at("as"), "must name the output column"));
            }
            if [KEY_COLUMN, WINDOW_START_COLUMN, WINDOW_END_COLUMN].contains(&a.name.as_str()) {
                return Err(invalid(
                    &at("as"),
                    format!("{:?} is a column every output already has", a.name),
                ));
            }
            if !names.insert(a.name.as_str()) {
                return Err(invalid(&at("as"), format!("{:?} is used twice", a.name)));
            }
        }
        let url = &self.sink.url;
        match url.split_once("://") {
            Some(("s3", rest)) if rest.split('/').next().is_some_and(|b| !b.is_empty()) => {}
            Some(("file", rest)) if rest.starts_with('/') => {}
            _ => {
                return Err(invalid(
                    "sink.url",
                    format!("{url:?}: expected s3://bucket/prefix or file:///abs/dir"),
                ))
            }
        }
        Ok(())
    }

    /// The window size in milliseconds (at least 1, as validated).
    pub fn window_ms(&self) -> i64 {
        i64::try_from(self.window.size.as_millis())
            .unwrap_or(i64::MAX)
            .max(1)
    }

    /// The allowed lateness in milliseconds.
    pub fn lateness_ms(&self) -> i64 {
        i64::try_from(self.window.allowed_lateness.as_millis()).unwrap_or(i64::MAX)
    }

    /// The distinct fields the aggregates read, in first-use order.
    pub fn value_fields(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for f in self.aggregates.iter().filter_map(|a| a.field.as_ref()) {
            if !out.contains(f) {
                out.push(f.clone());
            }
        }
        out
    }
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

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
