//! Transactions as the coordinator keeps them: one record per
//! transactional id, in the replicated state, so that whichever agent holds
//! the id's coordinator slot after a failure finds every transaction where
//! the last one left it and completes or aborts it.
//!
//! A transaction moves through Kafka's states:
//!
//! ```text
//! Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers written──▶ CompleteCommit
//!                                        │                PrepareAbort  ──markers written──▶ CompleteAbort
//!                                        └──timeout (epoch bumped)──▶ PrepareAbort
//! Complete* ──AddPartitions──▶ Ongoing (the next transaction)
//! ```
//!
//! The prepare step is logged before any marker is written, so a
//! coordinator that dies between the two leaves a record that says which
//! outcome to finish; the markers are idempotent in the partition logs
//! (a second marker for a transaction already ended is refused there).
//! Offsets a transaction commits for a consumer group (TxnOffsetCommit)
//! wait in its record and become the group's committed offsets in the same
//! step that completes a commit; an abort drops them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::types::OffsetCommit;

/// Longest transaction a producer may ask for (Kafka's
/// `transaction.max.timeout.ms` default, 15 minutes).
pub const MAX_TRANSACTION_TIMEOUT_MS: i32 = 900_000;

/// Where a transactional id's current transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    /// No transaction since the producer initialised.
    Empty,
    /// Partitions or a group were added; the producer may write.
    Ongoing,
    /// EndTxn(commit) logged; COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId logged; ABORT
    /// markers are being written.
    PrepareAbort,
    /// Every partition holds its COMMIT marker; the group offsets applied.
    CompleteCommit,
    /// Every partition holds its ABORT marker.
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name for the state (DescribeTransactions, ListTransactions).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// A prepared outcome whose markers are still being written: `Some(true)`
    /// for a commit, `Some(false)` for an abort.
    pub fn preparing(self) -> Option<bool> {
        match self {
            TxnState::PrepareCommit => Some(true),
            TxnState::PrepareAbort => Some(false),
            _ => None,
        }
    }
}

/// One partition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnPartition {
    pub topic: String,
    pub partition: i32,
}

/// A transactional id and its current (or last) transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch the producer had before the coordinator bumped it to abort
    /// its transaction (a timeout, or a new producer's InitProducerId): a
    /// producer naming it when it re-initialises is the same one (KIP-588).
    #[serde(default)]
    pub last_producer_epoch: Option<i16>,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions written in the current transaction.
    pub partitions: BTreeSet<TxnPartition>,
    /// Consumer groups whose offsets the transaction commits (AddOffsetsToTxn).
    pub groups: BTreeSet<String>,
    /// Offsets committed in the transaction, by group: applied on commit.
    pub pending_offsets: BTreeMap<String, Vec<OffsetCommit>>,
    /// When the current transaction began (metastore leader's clock), or
    /// when the record last changed state outside a transaction.
    pub started_ms: i64,
    pub updated_ms: i64,
}

impl TxnRecord {
    /// Whether `(producer_id, producer_epoch)` may write in the current
    /// transaction to `partition`: the producer is the id's current one,
    /// the transaction is ongoing and the partition was added to it.
    pub fn admits(&self, producer_id: i64, producer_epoch: i16, partition: &TxnPartition) -> bool {
        self.producer_id == producer_id
            && self.producer_epoch == producer_epoch
            && self.state == TxnState::Ongoing
            && self.partitions.contains(partition)
    }
}

pub use crate::error::TxnRefusal;
