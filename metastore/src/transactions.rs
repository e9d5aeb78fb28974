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
//! Clients on transaction version 2 (KIP-890 part 2: EndTxn v5, Produce
//! v12, TxnOffsetCommit v5) never add partitions themselves: the partition
//! leader adds one on the first transactional write to it, and
//! TxnOffsetCommit adds its group. Their EndTxn bumps the producer epoch
//! as it prepares the outcome, so the markers carry the new epoch and any
//! late write of the ended transaction is fenced; an exhausted epoch
//! takes a new producer id, which the record switches to once the markers
//! are written.
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

    /// A transaction is open from its first AddPartitionsToTxn or
    /// AddOffsetsToTxn until every marker of its outcome is written.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
        )
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
    /// Source offsets written in the transaction by an exactly-once source
    /// task of the Connect engine (KIP-618), by connector: they become the
    /// connector's offsets when the transaction commits, with its records.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pending_connect: BTreeMap<String, Vec<(String, Option<String>)>>,
    /// When the current transaction began (metastore leader's clock), or
    /// when the record last changed state outside a transaction.
    pub started_ms: i64,
    pub updated_ms: i64,
    /// The current transaction is run by a client on transaction version 2
    /// (it began with an implicit add, or ended with EndTxn v5): its EndTxn
    /// bumps the epoch, and an EndTxn naming the epoch before the bump is a
    /// retry of the last one.
    #[serde(default, skip_serializing_if = "is_false")]
    pub epoch_bumps: bool,
    /// The producer id the record moves to once the prepared outcome's
    /// markers are written: an EndTxn that found the epoch exhausted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_producer_id: Option<i64>,
    /// The producer id the record had before an exhausted epoch moved it to
    /// a new one (an EndTxn retried by the old producer is recognised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_producer_id: Option<i64>,
}

fn is_false(b: &bool) -> bool {
    !*b
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

    /// The producer (id, epoch) a client continues with once the current
    /// outcome is complete: the id taken for an exhausted epoch, at epoch 0,
    /// or the record's own.
    pub fn producer_after_completion(&self) -> (i64, i16) {
        match self.next_producer_id {
            Some(id) => (id, 0),
            None => (self.producer_id, self.producer_epoch),
        }
    }
}

pub use crate::error::TxnRefusal;
