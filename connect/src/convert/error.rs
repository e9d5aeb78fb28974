//! Why a key or value could not be converted.

/// A conversion that failed: the record's, or the registry's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The bytes are not in the schema registry's wire format.
    #[error("not in the schema registry's wire format: {0}")]
    NotFramed(String),
    /// The schema id names no schema the registry has.
    #[error("schema id {id} is not in the schema registry ({registry})")]
    UnknownSchema { id: i32, registry: String },
    /// The registry could not be asked, or its answer is not usable.
    #[error("schema registry: {0}")]
    Registry(String),
    /// The payload does not decode with its schema.
    #[error("schema id {id} ({kind}) does not decode it: {reason}")]
    Decode {
        id: i32,
        kind: &'static str,
        reason: String,
    },
    /// Bytes that are not what a plain converter reads (JSON, UTF-8).
    #[error("{0}")]
    Plain(String),
    /// A value that cannot be written with its schema.
    #[error("cannot be encoded: {0}")]
    Encode(String),
}

impl ConvertError {
    pub fn not_framed(reason: impl Into<String>) -> Self {
        ConvertError::NotFramed(reason.into())
    }
}
