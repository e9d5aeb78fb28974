//! What can go wrong while writing.

use super::config::ConfigError;

/// A failure of the sink writer.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `store.url` could not be turned into a store.
    #[error("cannot open the object store of store.url {url:?}: {source}")]
    Store {
        url: String,
        #[source]
        source: cache::CacheError,
    },
    /// A key or value is not UTF-8 but its converter makes its column
    /// text. Nothing of the record is buffered; the engine applies
    /// `errors.tolerance`.
    #[error(
        "record {topic}-{partition} at offset {offset}: the {field} is not valid UTF-8, \
         but {field}.converter stores it as text (use ByteArrayConverter for binary data)"
    )]
    NotUtf8 {
        topic: String,
        partition: i32,
        offset: i64,
        /// `key` or `value`.
        field: &'static str,
    },
    /// Building the Parquet file failed.
    #[error("cannot encode {path} as Parquet: {source}")]
    Encode {
        path: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// The store refused or failed the write; the records stay buffered
    /// and the next flush tries again.
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: ::object_store::Error,
    },
}
