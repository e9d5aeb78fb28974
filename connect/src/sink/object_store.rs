//! `ObjectStoreSink`: records to S3, GCS or Azure as Parquet or JSON-lines
//! files.

mod config;
mod partition;

pub use config::{
    ConfigDef, ConfigError, ConfigType, Converter, Format, Importance, ObjectStoreSinkConfig,
    ParquetCodec, TimestampExtractor,
};
pub use partition::{Partitioner, PathFormat};
