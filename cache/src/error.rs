//! The crate's error type: one enum, messages a person can act on.

use std::sync::Arc;

/// Everything that can go wrong in the object-storage seam and the cold cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The `--object-store` URL could not be understood.
    #[error("object store URL {url:?} is not usable: {reason}")]
    InvalidUrl { url: String, reason: String },

    /// The backend rejected its configuration (missing bucket, bad credentials shape, ...).
    #[error("object store {url:?} could not be configured: {source}")]
    Configure {
        url: String,
        #[source]
        source: object_store::Error,
    },

    /// A local directory needed by the store or the disk tier could not be prepared.
    #[error("could not prepare directory {path}: {source}")]
    Directory {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// A local file to upload could not be read.
    #[error("could not read {path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// An object key violates the layout (negative offsets, last before base, ...).
    #[error("invalid object key: {reason}")]
    InvalidKey { reason: String },

    /// A read asked for bytes outside the object.
    #[error("range {start}..{end} is outside object {key} of {object_size} bytes")]
    RangeOutOfBounds {
        key: String,
        start: u64,
        end: u64,
        object_size: u64,
    },

    /// The store returned fewer or more bytes than the block needs: the object
    /// is not the size the caller said it is (it was replaced or truncated).
    #[error("object {key} returned {got} bytes for block {block} where {expected} were expected")]
    SizeMismatch {
        key: String,
        block: u64,
        expected: u64,
        got: u64,
    },

    /// A file read for upload does not hold the bytes its writer recorded
    /// (the local disk changed them after they were written): nothing was
    /// committed under the key.
    #[error("{path} no longer holds the bytes written to it: {reason}")]
    ContentMismatch { path: String, reason: String },

    /// The object store failed a request (after the client's own retries).
    #[error("object store request for {key} failed: {source}")]
    Store {
        key: String,
        #[source]
        source: Arc<object_store::Error>,
    },

    /// The cache configuration is inconsistent.
    #[error("cache configuration is invalid: {reason}")]
    InvalidConfig { reason: String },

    /// The hybrid cache itself failed (disk tier IO, shutdown, ...).
    #[error("cache failure: {message}")]
    Cache { message: String },
}

impl CacheError {
    /// Whether retrying the same call later may succeed (store outages, timeouts,
    /// local cache IO) as opposed to a caller mistake or a missing object.
    pub fn is_retriable(&self) -> bool {
        match self {
            CacheError::Store { source, .. } => !matches!(
                source.as_ref(),
                object_store::Error::NotFound { .. }
                    | object_store::Error::InvalidPath { .. }
                    | object_store::Error::NotSupported { .. }
                    | object_store::Error::NotImplemented { .. }
                    | object_store::Error::PermissionDenied { .. }
                    | object_store::Error::Unauthenticated { .. }
                    | object_store::Error::UnknownConfigurationKey { .. }
                    | object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }
                    | object_store::Error::NotModified { .. }
            ),
            CacheError::Cache { .. } | CacheError::File { .. } => true,
            CacheError::InvalidUrl { .. }
            | CacheError::Configure { .. }
            | CacheError::Directory { .. }
            | CacheError::InvalidKey { .. }
            | CacheError::RangeOutOfBounds { .. }
            | CacheError::SizeMismatch { .. }
            | CacheError::ContentMismatch { .. }
            | CacheError::InvalidConfig { .. } => false,
        }
    }

    /// Whether the object does not exist in the store.
    pub fn is_not_found(&self) -> bool {
        matches!(self, CacheError::Store { source, .. } if matches!(source.as_ref(), object_store::Error::NotFound { .. }))
    }
}
