//! The one error type of the metastore.
//!
//! Every command is validated inside the replicated state machine, so its
//! errors travel through the Raft log and across the network to the node that
//! asked: [`MetaError`] is therefore plain data (`Clone`, serde) rather than a
//! wrapper around live `io::Error`s.
//!
//! The gateway maps each variant to a Kafka error code in one exhaustive
//! `match`; the intended codes are noted on each variant.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What can go wrong when reading or changing cluster metadata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum MetaError {
    /// Kafka `TOPIC_ALREADY_EXISTS` (36).
    #[error("topic '{name}' already exists")]
    TopicAlreadyExists { name: String },

    /// Kafka `UNKNOWN_TOPIC_OR_PARTITION` (3).
    #[error("topic '{name}' does not exist")]
    UnknownTopic { name: String },

    /// Kafka `UNKNOWN_TOPIC_ID` (100).
    #[error("no topic has id {id}")]
    UnknownTopicId { id: Uuid },

    /// Kafka `UNKNOWN_TOPIC_OR_PARTITION` (3).
    #[error("topic '{topic}' has no partition {partition}")]
    UnknownPartition { topic: String, partition: i32 },

    /// Kafka `INVALID_TOPIC_EXCEPTION` (17).
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopicName { name: String, reason: String },

    /// Kafka `INVALID_PARTITIONS` (37).
    #[error("invalid partition count: {reason}")]
    InvalidPartitions { reason: String },

    /// Kafka `INVALID_REPLICATION_FACTOR` (38).
    #[error("invalid replication factor: {reason}")]
    InvalidReplicationFactor { reason: String },

    /// Kafka `INVALID_REPLICA_ASSIGNMENT` (39).
    #[error("invalid replica assignment: {reason}")]
    InvalidReplicaAssignment { reason: String },

    /// Kafka `INVALID_CONFIG` (40).
    #[error("invalid topic config '{key}': {reason}")]
    InvalidConfig { key: String, reason: String },

    /// Kafka `INVALID_REQUEST` (42).
    #[error("invalid request: {reason}")]
    InvalidRequest { reason: String },

    /// Kafka `BROKER_NOT_AVAILABLE` (8) when a client names an agent the
    /// cluster has never seen.
    #[error("agent {agent_id} is not registered")]
    UnknownAgent { agent_id: u64 },

    /// Another process registered with an id whose agent still holds its
    /// lease (two agents started with one `--node-id`). Kafka
    /// `INVALID_REQUEST` (42).
    #[error("agent {agent_id} is already running at {addr} (another process with the same --node-id holds its lease)")]
    DuplicateAgent { agent_id: u64, addr: String },

    /// An agent that holds its lease cannot be removed. Kafka
    /// `INVALID_REQUEST` (42).
    #[error("agent {agent_id} is alive (it holds its lease); stop it before removing it")]
    AgentAlive { agent_id: u64 },

    /// A lease decision was made on a view that has since changed (a
    /// heartbeat arrived, another election happened). Nothing was changed;
    /// the decision is re-evaluated on the next tick. Kafka `STALE_CONTROLLER_EPOCH` (11).
    #[error("stale request: {reason}")]
    StaleRequest { reason: String },

    /// The caller's leader epoch is older than the partition's.
    /// Kafka `FENCED_LEADER_EPOCH` (74).
    #[error("leader epoch {given} of {topic}-{partition} is fenced; current epoch is {current}")]
    FencedLeaderEpoch {
        topic: String,
        partition: i32,
        given: i32,
        current: i32,
    },

    /// The caller is not the partition's leader. Kafka `NOT_LEADER_OR_FOLLOWER` (6).
    #[error("agent {agent_id} does not lead {topic}-{partition}")]
    NotPartitionLeader {
        topic: String,
        partition: i32,
        agent_id: u64,
    },

    /// A replica named for the ISR is unknown, fenced or not a replica.
    /// Kafka `INELIGIBLE_REPLICA` (107).
    #[error("ineligible replica for {topic}-{partition}: {reason}")]
    IneligibleReplica {
        topic: String,
        partition: i32,
        reason: String,
    },

    /// Kafka `ELECTION_NOT_NEEDED` (84).
    #[error("{topic}-{partition} already has the leader the election would pick")]
    ElectionNotNeeded { topic: String, partition: i32 },

    /// Kafka `PREFERRED_LEADER_NOT_AVAILABLE` (80) / `ELIGIBLE_LEADERS_NOT_AVAILABLE` (83).
    #[error("no eligible leader for {topic}-{partition}: {reason}")]
    EligibleLeadersNotAvailable {
        topic: String,
        partition: i32,
        reason: String,
    },

    /// A reassignment was cancelled, or was to be completed, where none is
    /// under way. Kafka `NO_REASSIGNMENT_IN_PROGRESS` (85).
    #[error("no reassignment of {topic}-{partition} is in progress")]
    NoReassignmentInProgress { topic: String, partition: i32 },

    /// Kafka `GROUP_ID_NOT_FOUND` (69).
    #[error("consumer group '{group}' has no committed offsets")]
    GroupIdNotFound { group: String },

    /// Kafka `INVALID_GROUP_ID` (24).
    #[error("invalid consumer group id: {reason}")]
    InvalidGroupId { reason: String },

    /// Kafka `OFFSET_METADATA_TOO_LARGE` (12).
    #[error("offset metadata is {len} bytes; the limit is {max}")]
    OffsetMetadataTooLarge { len: usize, max: usize },

    /// A coordinator's write for a group whose coordinator slot moved
    /// since (or was never its). Nothing was changed. Kafka
    /// `NOT_COORDINATOR` (16): the client finds the coordinator again.
    #[error("not the coordinator of group '{group}': {reason}")]
    NotCoordinator { group: String, reason: String },

    /// A transactional request the transaction's state or producer does
    /// not allow; `refusal` is Kafka's name for it. Nothing was changed.
    #[error("{reason}")]
    Transaction { refusal: TxnRefusal, reason: String },

    /// A segment that overlaps what the manifest already holds. The uploader
    /// must reconcile with [`crate::Manifests::segments`] before retrying.
    #[error("segment {key} [{base_offset}..={last_offset}] overlaps the manifest: {reason}")]
    SegmentOverlap {
        key: String,
        base_offset: i64,
        last_offset: i64,
        reason: String,
    },

    /// The 64-bit producer id space is used up (never in practice).
    #[error("producer id space exhausted")]
    ProducerIdsExhausted,

    /// This node cannot order writes and does not know who can right now
    /// (election in progress, or partitioned away from a quorum).
    /// Kafka `NOT_CONTROLLER` (41), retriable.
    #[error(
        "no metastore leader is reachable from node {node_id} (last known leader: {leader:?})"
    )]
    NotLeader { node_id: u64, leader: Option<u64> },

    /// A request could not be completed in time; whether a write took effect
    /// is unknown when `maybe_applied` is set. Kafka `REQUEST_TIMED_OUT` (7).
    #[error("metastore {what} timed out{}", if *maybe_applied { " (it may still take effect)" } else { "" })]
    Timeout { what: String, maybe_applied: bool },

    /// A peer could not be reached or answered with garbage. Retriable.
    #[error("metastore network error talking to node {node_id}: {reason}")]
    Network { node_id: u64, reason: String },

    /// Raft membership could not be changed as asked.
    #[error("membership change rejected: {reason}")]
    Membership { reason: String },

    /// The local disk failed; the node stops serving.
    /// Kafka `KAFKA_STORAGE_ERROR` (56).
    #[error("metastore storage failure: {reason}")]
    Storage { reason: String },

    /// The node was shut down (or its Raft core stopped after a fatal error).
    #[error("metastore node is shut down")]
    ShuttingDown,

    /// [`crate::MetastoreConfig`] is not usable.
    #[error("invalid metastore settings: {reason}")]
    InvalidSettings { reason: String },

    /// A schema registry request the registry's state refuses, with the
    /// registry's own error code (40401, 42205, ...; see
    /// [`crate::registry::code`]). Nothing was changed.
    #[error("{message}")]
    Registry { code: u32, message: String },

    /// A Connect REST request the Connect state refuses, with the HTTP
    /// status Connect answers it with (404, 409, ...; see
    /// [`crate::connect::code`]). Nothing was changed.
    #[error("{message}")]
    Connect { status: u16, message: String },
}

impl MetaError {
    /// Whether retrying the same request later can succeed without the caller
    /// changing anything.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            MetaError::NotLeader { .. }
                | MetaError::Timeout { .. }
                | MetaError::Network { .. }
                | MetaError::StaleRequest { .. }
                | MetaError::EligibleLeadersNotAvailable { .. }
        )
    }

    /// Whether a write that failed with this error may have been applied
    /// anyway, or may still be: its outcome is unknown until the metadata
    /// shows it. Refusals by the state machine and writes that never
    /// reached a leader were certainly not applied.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            MetaError::Timeout { maybe_applied, .. } => *maybe_applied,
            // the answer was lost or garbled, or the node stopped while waiting for it
            MetaError::Network { .. } | MetaError::ShuttingDown | MetaError::Storage { .. } => true,
            MetaError::TopicAlreadyExists { .. }
            | MetaError::UnknownTopic { .. }
            | MetaError::UnknownTopicId { .. }
            | MetaError::UnknownPartition { .. }
            | MetaError::InvalidTopicName { .. }
            | MetaError::InvalidPartitions { .. }
            | MetaError::InvalidReplicationFactor { .. }
            | MetaError::InvalidReplicaAssignment { .. }
            | MetaError::InvalidConfig { .. }
            | MetaError::InvalidRequest { .. }
            | MetaError::GroupIdNotFound { .. }
            | MetaError::InvalidGroupId { .. }
            | MetaError::OffsetMetadataTooLarge { .. }
            | MetaError::UnknownAgent { .. }
            | MetaError::StaleRequest { .. }
            | MetaError::FencedLeaderEpoch { .. }
            | MetaError::NotPartitionLeader { .. }
            | MetaError::IneligibleReplica { .. }
            | MetaError::ElectionNotNeeded { .. }
            | MetaError::NoReassignmentInProgress { .. }
            | MetaError::EligibleLeadersNotAvailable { .. }
            | MetaError::SegmentOverlap { .. }
            | MetaError::ProducerIdsExhausted
            | MetaError::NotLeader { .. }
            | MetaError::Membership { .. }
            | MetaError::DuplicateAgent { .. }
            | MetaError::NotCoordinator { .. }
            | MetaError::Transaction { .. }
            | MetaError::AgentAlive { .. }
            | MetaError::Registry { .. }
            | MetaError::Connect { .. }
            | MetaError::InvalidSettings { .. } => false,
        }
    }

    pub(crate) fn invalid_request(reason: impl Into<String>) -> MetaError {
        MetaError::InvalidRequest {
            reason: reason.into(),
        }
    }

    pub(crate) fn storage(what: &str, err: impl std::fmt::Display) -> MetaError {
        MetaError::Storage {
            reason: format!("{what}: {err}"),
        }
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;

/// Why a transactional request was refused, as Kafka names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnRefusal {
    /// A newer producer with the same transactional id exists.
    ProducerFenced,
    /// The producer id is not the transactional id's current one.
    InvalidProducerIdMapping,
    /// The request does not fit the transaction's state.
    InvalidTxnState,
    /// The previous transaction is still being completed: retry.
    ConcurrentTransactions,
    /// The timeout is not positive or above `crate::transactions::MAX_TRANSACTION_TIMEOUT_MS`.
    InvalidTransactionTimeout,
    /// The epoch is not the producer's current one (KIP-360 recovery
    /// named an epoch the coordinator does not know).
    InvalidProducerEpoch,
}
