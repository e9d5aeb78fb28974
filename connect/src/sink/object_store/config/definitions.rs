//! The definitions of the connector's keys, as Connect's validate
//! endpoint reports them.

use std::fmt;

use super::*;

/// The type of a configuration key, as Connect names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    String,
    Int,
    Long,
    Boolean,
    List,
}

impl ConfigType {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::List => "LIST",
        }
    }
}

impl fmt::Display for ConfigType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much a key matters, as Connect names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Importance {
    High,
    Medium,
    Low,
}

impl Importance {
    pub fn as_str(self) -> &'static str {
        match self {
            Importance::High => "HIGH",
            Importance::Medium => "MEDIUM",
            Importance::Low => "LOW",
        }
    }
}

impl fmt::Display for Importance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One key of the connector's configuration, for the validate endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    pub required: bool,
    pub default: Option<String>,
    pub importance: Importance,
    pub documentation: &'static str,
}

/// The keys this connector knows.
pub fn definitions() -> Vec<ConfigDef> {
    use ConfigType as T;
    use Importance as I;
    let def = |name, kind, default: Option<&str>, importance, documentation| ConfigDef {
        name,
        kind,
        // Only the URL is always needed; the field and time partitioners'
        // own keys are needed by them alone, which validate reports.
        required: name == STORE_URL,
        default: default.map(str::to_string),
        importance,
        documentation,
    };
    vec![
        def(
            STORE_URL,
            T::String,
            None,
            I::High,
            "Where files are written: s3://bucket/prefix, gs://bucket/prefix, \
             az://container/prefix (or file:///dir, memory://). Credentials and \
             endpoints come from the usual AWS_*, GOOGLE_* and AZURE_* environment \
             variables of the agent.",
        ),
        def(
            FORMAT,
            T::String,
            Some("parquet"),
            I::High,
            "File format: parquet (one row per record: topic, partition, offset, \
             timestamp, key, value, headers) or json (one JSON object per line \
             with the same fields).",
        ),
        def(
            FLUSH_SIZE,
            T::Int,
            Some(DEFAULT_FLUSH_SIZE),
            I::High,
            "Records per file: a topic partition's buffer is written once it holds \
             this many records. At least 1.",
        ),
        def(
            ROTATE_SCHEDULE_INTERVAL_MS,
            T::Long,
            Some("-1"),
            I::Medium,
            "When positive, a partition's buffer older than this many milliseconds \
             is written even if it holds fewer than flush.size records. File \
             boundaries then depend on timing, so after a crash a partition may be \
             written again into files that overlap earlier ones (at-least-once) \
             rather than replacing them. -1 turns it off.",
        ),
        def(
            TOPICS_DIR,
            T::String,
            Some(DEFAULT_TOPICS_DIR),
            I::High,
            "The folder under the store's prefix that holds one folder per topic.",
        ),
        def(
            PARTITIONER_CLASS,
            T::String,
            Some("default"),
            I::High,
            "How files are laid out under a topic's folder: default \
             (partition=<kafka partition>), field (<field>=<value> of \
             partition.field.name) or time (path.format of the record's time). \
             Confluent's DefaultPartitioner, FieldPartitioner and \
             TimeBasedPartitioner class names are accepted too.",
        ),
        def(
            PARTITION_FIELD_NAME,
            T::List,
            None,
            I::Medium,
            "For the field partitioner: comma-separated top-level fields of the \
             record's JSON value. A record whose value is absent, not a JSON \
             object, lacks the field or holds null goes to <field>=null.",
        ),
        def(
            PATH_FORMAT,
            T::String,
            None,
            I::Medium,
            "For the time partitioner: a Joda-style pattern such as \
             'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH. Letters YYYY (or yyyy), \
             YY, MM, dd, HH, mm and ss are fields; text in single quotes is \
             literal; other characters are kept.",
        ),
        def(
            PARTITION_DURATION_MS,
            T::Long,
            Some("-1"),
            I::Medium,
            "For the time partitioner: the bucket size in milliseconds; a record's \
             time is rounded down to a multiple of it before formatting.",
        ),
        def(
            TIMEZONE,
            T::String,
            Some("UTC"),
            I::Medium,
            "For the time partitioner: the time zone of path.format. Only UTC.",
        ),
        def(
            TIMESTAMP_EXTRACTOR,
            T::String,
            Some("Record"),
            I::Medium,
            "For the time partitioner: Record (the record's timestamp; a rewrite \
             after a crash lands in the same place) or Wallclock (the time the \
             record is buffered).",
        ),
        def(
            PARQUET_CODEC,
            T::String,
            Some("snappy"),
            I::Low,
            "Parquet compression: snappy, zstd or none.",
        ),
        def(
            KEY_CONVERTER,
            T::String,
            Some(DEFAULT_CONVERTER),
            I::Low,
            "Chooses the key column's type: StringConverter or JsonConverter (utf8; \
             aliases string, json) or ByteArrayConverter (binary; alias bytes); \
             AvroConverter, ProtobufConverter and JsonSchemaConverter (aliases avro, \
             protobuf, jsonschema) store the decoded key as JSON text (utf8).",
        ),
        def(
            VALUE_CONVERTER,
            T::String,
            Some(DEFAULT_CONVERTER),
            I::Low,
            "Chooses the value column's type: StringConverter or JsonConverter \
             (utf8; aliases string, json) or ByteArrayConverter (binary; alias \
             bytes); AvroConverter, ProtobufConverter and JsonSchemaConverter \
             (aliases avro, protobuf, jsonschema) store the decoded value as JSON \
             text (utf8).",
        ),
    ]
}
