//! `ObjectStoreSink`: records to S3, GCS or Azure as Parquet or JSON-lines
//! files.
//!
//! The engine parses a connector's config with
//! [`ObjectStoreSinkConfig::parse`] (or reports every problem with
//! [`ObjectStoreSinkConfig::validate`]), opens an [`ObjectStoreWriter`]
//! per task, hands it the records it consumes with
//! [`ObjectStoreWriter::put`], calls [`ObjectStoreWriter::flush_due`]
//! regularly and commits the offsets that returns.
//!
//! Objects are named
//! `<prefix>/<topics.dir>/<topic>/<encoded partition>/<topic>+<kafka
//! partition>+<first offset, 20 digits>.<parquet|json>`, where the encoded
//! partition is `partition=<kafka partition>` (default partitioner),
//! `<field>=<value>/...` (field partitioner) or the record's formatted time
//! (time partitioner). A file holds the `flush.size` records of a topic
//! partition from the first one buffered (a flush of a field- or
//! time-partitioned buffer writes one file per encoded partition, each
//! named by its own first offset), and is written whole with one `put`, so
//! it is complete when visible. Since the offsets are committed only once
//! the files are written, a task that crashes re-reads from the first
//! offset of the first file not committed and writes the same objects
//! with the same bytes: each record ends up in exactly one file. That
//! holds unless file boundaries or folders depend on timing: with
//! `rotate.schedule.interval.ms` (a short file may be written at another
//! point) or the `Wallclock` timestamp extractor (a record may land under
//! another time folder), a rewrite may add a file overlapping one already
//! written, and the guarantee is at-least-once.

mod config;
pub(crate) mod encode;
mod error;
mod partition;
mod writer;

pub use config::{
    ConfigDef, ConfigError, ConfigType, Converter, Format, Importance, ObjectStoreSinkConfig,
    ParquetCodec, TimestampExtractor,
};
pub use error::SinkError;
pub use partition::{Partitioner, PathFormat};
pub use writer::{ObjectStoreWriter, WriterStats};

/// The connector's full class name (`ObjectStoreSink` for short).
pub const CLASS: &str = "io.aerostream.connect.storage.ObjectStoreSink";

/// This connector's own keys as the plugin endpoints show them (the keys
/// every connector has are listed by [`crate::config::common_definitions`]).
pub fn definitions() -> Vec<crate::config::ConfigDef> {
    let common = crate::config::common_definitions(true);
    ObjectStoreSinkConfig::definitions()
        .into_iter()
        .filter(|d| !common.iter().any(|c| c.name == d.name))
        .map(|d| crate::config::ConfigDef {
            name: d.name,
            kind: d.kind.as_str(),
            required: d.required,
            default_value: d.default,
            importance: d.importance.as_str(),
            documentation: d.documentation,
            group: "Storage",
        })
        .collect()
}

/// Every problem with a config's own keys.
pub fn validate(config: &crate::config::Config) -> Vec<crate::config::Problem> {
    ObjectStoreSinkConfig::validate(config)
}
