//! The one place internal errors become Kafka error codes. Every match is
//! exhaustive, so a new error variant cannot silently turn into
//! UNKNOWN_SERVER_ERROR.

use kafka_protocol::ResponseError;

use storage::tier::TierError;
use storage::StorageError;

use metastore::MetaError;

use dataplane::backend::LogError;
use dataplane::group::engine::GroupError;
use dataplane::node::Unavailable;
use dataplane::partition::replication::replica_set::NotEnoughReplicas;

/// The Kafka error code for a partition this node cannot serve.
pub fn unavailable(e: &Unavailable) -> ResponseError {
    match e {
        Unavailable::UnknownPartition => ResponseError::UnknownTopicOrPartition,
        Unavailable::NotLeader => ResponseError::NotLeaderOrFollower,
        Unavailable::Log(e) => log_error(e),
    }
}

/// The Kafka error code for a partition-log failure.
pub fn log_error(e: &LogError) -> ResponseError {
    match e {
        LogError::Storage(s) => storage_error(s),
        LogError::Tier(t) => tier_error(t),
        LogError::NotServing(_) => ResponseError::NotLeaderOrFollower,
        LogError::OffsetNotAvailable(_) => ResponseError::OffsetNotAvailable,
        LogError::NotDurable(_) | LogError::Read(_) => ResponseError::KafkaStorageError,
        LogError::NotEnoughReplicas(NotEnoughReplicas::Before { .. }) => {
            ResponseError::NotEnoughReplicas
        }
        LogError::NotEnoughReplicas(NotEnoughReplicas::AfterAppend { .. }) => {
            ResponseError::NotEnoughReplicasAfterAppend
        }
    }
}

/// The Kafka error code for a failure of the partition log itself.
pub fn storage_error(e: &StorageError) -> ResponseError {
    match e {
        StorageError::CorruptBatch { .. } => ResponseError::CorruptMessage,
        StorageError::InvalidRecord { .. }
        | StorageError::KeylessRecords { .. }
        | StorageError::SchemaValidation { .. } => ResponseError::InvalidRecord,
        StorageError::UnsupportedMagic { .. } => ResponseError::UnsupportedForMessageFormat,
        StorageError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        StorageError::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
        StorageError::UnsupportedCompression { .. } => ResponseError::UnsupportedCompressionType,
        StorageError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        StorageError::StaleLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        // A replica's fetch that does not continue its log: a broker-side
        // fault with no Kafka code of its own.
        StorageError::ReplicaOffsetMismatch { .. } => ResponseError::KafkaStorageError,
        StorageError::Corrupt { .. } | StorageError::Offline { .. } | StorageError::Io { .. } => {
            ResponseError::KafkaStorageError
        }
    }
}

/// The Kafka error code for a failure between a log and object storage. All
/// are KAFKA_STORAGE_ERROR, which clients retry: back-pressure lifts once
/// uploads catch up, and object-store failures are retried by the broker.
pub fn tier_error(e: &TierError) -> ResponseError {
    match e {
        TierError::Storage(s) => storage_error(s),
        TierError::Backpressure { .. }
        | TierError::Objects(_)
        | TierError::Manifest(_)
        | TierError::CorruptObject { .. }
        | TierError::Timeout { .. }
        | TierError::TruncationBelowTiered { .. }
        | TierError::Stopped => ResponseError::KafkaStorageError,
    }
}

/// The Kafka error code for a metastore failure.
pub fn meta_error(e: &MetaError) -> ResponseError {
    match e {
        MetaError::TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists,
        MetaError::UnknownTopic { .. }
        | MetaError::UnknownTopicId { .. }
        | MetaError::UnknownPartition { .. } => ResponseError::UnknownTopicOrPartition,
        MetaError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        MetaError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
        MetaError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
        MetaError::InvalidReplicaAssignment { .. } => ResponseError::InvalidReplicaAssignment,
        MetaError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        MetaError::InvalidRequest { .. }
        | MetaError::DuplicateAgent { .. }
        | MetaError::AgentAlive { .. } => ResponseError::InvalidRequest,
        MetaError::GroupIdNotFound { .. } => ResponseError::GroupIdNotFound,
        MetaError::InvalidGroupId { .. } => ResponseError::InvalidGroupId,
        MetaError::OffsetMetadataTooLarge { .. } => ResponseError::OffsetMetadataTooLarge,
        MetaError::NotCoordinator { .. } => ResponseError::NotCoordinator,
        MetaError::Transaction { refusal, .. } => txn_refusal(*refusal),
        // The metastore is electing a leader, unreachable or stopping:
        // clients retry.
        MetaError::NotLeader { .. }
        | MetaError::Timeout { .. }
        | MetaError::Network { .. }
        | MetaError::Membership { .. }
        | MetaError::ShuttingDown => ResponseError::RequestTimedOut,
        MetaError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        MetaError::NotPartitionLeader { .. } => ResponseError::NotLeaderOrFollower,
        MetaError::EligibleLeadersNotAvailable { .. } => ResponseError::EligibleLeadersNotAvailable,
        MetaError::ElectionNotNeeded { .. } => ResponseError::ElectionNotNeeded,
        MetaError::NoReassignmentInProgress { .. } => ResponseError::NoReassignmentInProgress,
        // Replication, tiering and internal failures that no Kafka request
        // the gateway serves should cause: a bug worth a log line.
        MetaError::UnknownAgent { .. }
        | MetaError::StaleRequest { .. }
        | MetaError::IneligibleReplica { .. }
        | MetaError::SegmentOverlap { .. }
        | MetaError::ProducerIdsExhausted
        | MetaError::Storage { .. }
        | MetaError::Registry { .. }
        | MetaError::Connect { .. }
        | MetaError::InvalidSettings { .. } => ResponseError::UnknownServerError,
    }
}

/// The Kafka error for a transaction coordinator's refusal.
pub fn txn_refusal(r: metastore::transactions::TxnRefusal) -> ResponseError {
    use metastore::transactions::TxnRefusal;
    match r {
        TxnRefusal::ProducerFenced => ResponseError::ProducerFenced,
        TxnRefusal::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnRefusal::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnRefusal::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnRefusal::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
        TxnRefusal::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
    }
}

/// The Kafka error code for a group-protocol refusal.
pub fn group_error(e: GroupError) -> ResponseError {
    match e {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::InvalidRequest => ResponseError::InvalidRequest,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor => ResponseError::UnsupportedAssignor,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::InvalidRegularExpression => ResponseError::InvalidRegularExpression,
    }
}

/// `error_code` field value for an optional error.
pub fn code(e: Option<ResponseError>) -> i16 {
    e.map(|e| e.code()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dataplane::backend::{LogError, NotDurable};
    use kafka_protocol::ResponseError;

    /// Writes a failed durability point leaves unacknowledged are answered
    /// with a code clients retry, whatever the cause.
    #[test]
    fn writes_that_were_not_made_durable_get_kafka_storage_error() {
        let cause = Arc::new(LogError::NotServing("closed"));
        for e in [
            NotDurable::SyncThreadStopped,
            NotDurable::SyncFailed(cause.clone()),
            NotDurable::CloseFailed(cause),
        ] {
            assert_eq!(
                super::log_error(&LogError::NotDurable(e)),
                ResponseError::KafkaStorageError
            );
        }
    }
}
