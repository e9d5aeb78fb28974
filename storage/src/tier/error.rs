//! Errors of tiered storage.

use super::manifest::ManifestError;
use crate::error::StorageError;

/// Everything that can go wrong between a partition log and object storage.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    /// Producing must wait: the data on local disk that is not yet in object
    /// storage has reached the node's local disk limit. Retriable (Kafka:
    /// KAFKA_STORAGE_ERROR, which clients retry).
    #[error("local disk limit reached: {pending} bytes wait for upload to object storage and {incoming} more would pass the limit of {limit} bytes; retry once uploads catch up")]
    Backpressure {
        pending: u64,
        incoming: u64,
        limit: u64,
    },

    /// The partition log itself failed.
    #[error(transparent)]
    Storage(#[from] StorageError),

    /// Object storage or the cold cache failed.
    #[error(transparent)]
    Objects(#[from] cache::CacheError),

    /// The manifest refused or failed a change.
    #[error(transparent)]
    Manifest(#[from] ManifestError),

    /// A tiered object does not hold what its manifest entry says, or a
    /// batch read from it fails its CRC-32C. Retriable: the object's cached
    /// blocks are dropped, so a retry reads it from the store again (Kafka:
    /// KAFKA_STORAGE_ERROR, which consumers retry).
    #[error("tiered object {key} is damaged at byte {position}: {reason}")]
    CorruptObject {
        key: String,
        position: u64,
        reason: String,
    },

    /// A follower was asked to truncate below what object storage already
    /// holds for the partition: committed tiered segments cannot be taken
    /// back, so the logs would disagree. Uploads stay below the high
    /// watermark, which truncation never passes, so this is a replication
    /// fault, not a retriable condition.
    #[error(
        "cannot truncate to offset {offset}: object storage holds the partition up to {tiered_end}"
    )]
    TruncationBelowTiered { offset: i64, tiered_end: i64 },

    /// An object-store call took longer than its deadline.
    #[error("{what} did not finish within {seconds} s")]
    Timeout { what: String, seconds: u64 },

    /// The tiering service has stopped (the node is shutting down).
    #[error("tiered storage has stopped")]
    Stopped,
}

impl TierError {
    /// Whether the same call may succeed later.
    pub fn is_retriable(&self) -> bool {
        match self {
            TierError::Backpressure { .. }
            | TierError::Timeout { .. }
            | TierError::Stopped
            | TierError::CorruptObject { .. } => true,
            TierError::Objects(e) => e.is_retriable(),
            TierError::Manifest(e) => e.retriable,
            TierError::Storage(_) | TierError::TruncationBelowTiered { .. } => false,
        }
    }
}
