//! The `ObjectStoreSink` configuration: its keys, their parsing and the
//! definitions Connect's validate endpoint reports.

use std::collections::BTreeMap;

use super::partition::Partitioner;

mod definitions;
mod parse;

pub use definitions::{ConfigDef, ConfigType, Importance};
use parse::parse_all;

/// A configuration problem, naming the key (and the value when there is
/// one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("missing required configuration {key:?}{}", reason_suffix(.reason))]
    Missing { key: String, reason: String },
    #[error("invalid value {value:?} for configuration {key:?}: {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
}

fn reason_suffix(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(" ({reason})")
    }
}

impl ConfigError {
    /// The configuration key the problem is about.
    pub fn key(&self) -> &str {
        match self {
            ConfigError::Missing { key, .. } | ConfigError::Invalid { key, .. } => key,
        }
    }

    fn invalid(key: &str, value: &str, reason: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    fn missing(key: &str, reason: impl Into<String>) -> Self {
        ConfigError::Missing {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}

/// The file format written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Parquet,
    /// One JSON object per line.
    Json,
}

impl Format {
    /// The object name's extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Json => "json",
        }
    }
}

/// The Parquet compression codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParquetCodec {
    Snappy,
    Zstd,
    None,
}

/// How a key or a value is stored, as chosen by its converter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converter {
    /// `StringConverter`: a utf8 column; a JSON string in JSON lines.
    String,
    /// `JsonConverter`: a utf8 column; embedded as JSON in JSON lines when
    /// it parses as JSON, else as a string. Also `AvroConverter`,
    /// `ProtobufConverter` and `JsonSchemaConverter`, whose keys and values
    /// the sink runner decodes to JSON text first.
    Json,
    /// `ByteArrayConverter`: a binary column; base64 in JSON lines.
    Bytes,
}

impl Converter {
    /// Whether the bytes must be UTF-8 (the column is utf8).
    pub fn is_text(self) -> bool {
        !matches!(self, Converter::Bytes)
    }
}

/// Where a record's time (for the time partitioner) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampExtractor {
    /// The record's timestamp: a rewrite after a crash lands in the same
    /// place.
    Record,
    /// The clock when the record is buffered: a rewrite after a crash may
    /// land under another time path.
    Wallclock,
}

/// The parsed, validated connector configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectStoreSinkConfig {
    pub store_url: String,
    pub format: Format,
    /// Records per file (at least 1).
    pub flush_size: usize,
    /// When set, a partition's buffer older than this is written even if
    /// it holds fewer than `flush_size` records. Files then no longer
    /// start at the same offsets when a partition is re-read after a
    /// crash, so a rewrite may add a file that overlaps one already
    /// written (at-least-once) instead of replacing it.
    pub rotate_schedule_interval: Option<std::time::Duration>,
    /// The folder under the store's prefix that holds one folder per
    /// topic, as `/`-separated segments.
    pub topics_dir: String,
    pub partitioner: Partitioner,
    pub timestamp_extractor: TimestampExtractor,
    pub parquet_codec: ParquetCodec,
    pub key_converter: Converter,
    pub value_converter: Converter,
}

pub const STORE_URL: &str = "store.url";
pub const FORMAT: &str = "format";
pub const FLUSH_SIZE: &str = "flush.size";
pub const ROTATE_SCHEDULE_INTERVAL_MS: &str = "rotate.schedule.interval.ms";
pub const TOPICS_DIR: &str = "topics.dir";
pub const PARTITIONER_CLASS: &str = "partitioner.class";
pub const PARTITION_FIELD_NAME: &str = "partition.field.name";
pub const PATH_FORMAT: &str = "path.format";
pub const PARTITION_DURATION_MS: &str = "partition.duration.ms";
pub const TIMEZONE: &str = "timezone";
pub const TIMESTAMP_EXTRACTOR: &str = "timestamp.extractor";
pub const PARQUET_CODEC: &str = "parquet.codec";
pub const KEY_CONVERTER: &str = "key.converter";
pub const VALUE_CONVERTER: &str = "value.converter";

const DEFAULT_FLUSH_SIZE: &str = "1000";
const DEFAULT_TOPICS_DIR: &str = "topics";
const DEFAULT_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";

const DEFAULT_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.DefaultPartitioner";
const FIELD_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.FieldPartitioner";
const TIME_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.TimeBasedPartitioner";

impl ObjectStoreSinkConfig {
    /// Parses `config`, failing on the first problem found (see
    /// [`ObjectStoreSinkConfig::validate`] for all of them). Keys this
    /// connector does not know are ignored: Connect passes worker and
    /// consumer settings through, and `topics`, `name`,
    /// `connector.class`, `tasks.max` and `errors.*` are the engine's.
    pub fn parse(config: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        parse_all(config).map_err(|mut errors| errors.swap_remove(0))
    }

    /// Every problem of `config`, as (key, message) pairs; empty when it
    /// parses.
    pub fn validate(config: &BTreeMap<String, String>) -> Vec<(String, String)> {
        match parse_all(config) {
            Ok(_) => Vec::new(),
            Err(errors) => errors
                .into_iter()
                .map(|e| (e.key().to_string(), e.to_string()))
                .collect(),
        }
    }

    /// The keys this connector knows (the engine reports its own:
    /// `name`, `connector.class`, `tasks.max`, `topics`, `errors.*`).
    pub fn definitions() -> Vec<ConfigDef> {
        definitions::definitions()
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
