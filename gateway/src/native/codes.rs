//! Kafka error codes as native ones. The native codes are a smaller, stable
//! set (see `docs/native-protocol.md`); several Kafka codes that ask a
//! client for the same reaction share one.

use sdk::proto::ErrorCode;

use dataplane::group::engine::GroupError;

/// The native code for a Kafka error code.
pub fn from_kafka(code: i16) -> ErrorCode {
    match code {
        0 => ErrorCode::NONE,
        1 => ErrorCode::OFFSET_OUT_OF_RANGE,
        2 | 43 | 76 | 87 => ErrorCode::INVALID_RECORDS,
        3 | 100 => ErrorCode::UNKNOWN_TOPIC,
        5 | 8 | 14 | 15 | 16 => ErrorCode::NOT_AVAILABLE,
        6 | 74 | 75 => ErrorCode::NOT_LEADER,
        7 => ErrorCode::TIMED_OUT,
        10 | 18 => ErrorCode::RECORDS_TOO_LARGE,
        12 | 42 => ErrorCode::INVALID_REQUEST,
        17 => ErrorCode::INVALID_TOPIC,
        19 => ErrorCode::NOT_ENOUGH_REPLICAS,
        20 => ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        21 => ErrorCode::INVALID_ACKS,
        22 | 25 | 27 | 79 | 82 => ErrorCode::GROUP_BUSY,
        24 | 69 => ErrorCode::INVALID_GROUP,
        29..=31 | 53 | 58 => ErrorCode::UNAUTHORIZED,
        35 => ErrorCode::UNSUPPORTED_VERSION,
        36 => ErrorCode::TOPIC_ALREADY_EXISTS,
        37 => ErrorCode::INVALID_PARTITIONS,
        38 | 39 => ErrorCode::INVALID_REPLICATION_FACTOR,
        40 | 44 => ErrorCode::INVALID_CONFIG,
        45 => ErrorCode::OUT_OF_ORDER_SEQUENCE,
        46 => ErrorCode::DUPLICATE_SEQUENCE,
        47 | 90 => ErrorCode::PRODUCER_FENCED,
        48 | 49 => ErrorCode::INVALID_TXN_STATE,
        50 => ErrorCode::INVALID_TXN_TIMEOUT,
        51 => ErrorCode::CONCURRENT_TRANSACTIONS,
        56 => ErrorCode::STORAGE_ERROR,
        59 => ErrorCode::UNKNOWN_PRODUCER,
        _ => ErrorCode::UNKNOWN_SERVER_ERROR,
    }
}

/// The native code for a Kafka error code of a member's commit: the
/// membership errors say what the member must do (join again), where a
/// commit outside membership maps them all to GROUP_BUSY.
pub fn from_kafka_for_member(code: i16) -> ErrorCode {
    match code {
        16 => ErrorCode::NOT_COORDINATOR,
        22 => ErrorCode::ILLEGAL_GENERATION,
        25 | 82 => ErrorCode::UNKNOWN_MEMBER,
        27 => ErrorCode::REBALANCE_IN_PROGRESS,
        other => from_kafka(other),
    }
}

/// The native code for a Kafka error code of the transaction coordinator:
/// NOT_COORDINATOR tells the client to find the transactional id's
/// coordinator again, where other operations make it NOT_AVAILABLE.
/// TxnOffsetCommit's membership checks answer as a member's commit does.
pub fn from_kafka_for_txn(code: i16) -> ErrorCode {
    from_kafka_for_member(code)
}

/// The native code for an answer of the group coordinator.
pub fn from_group(e: GroupError) -> ErrorCode {
    match e {
        GroupError::InvalidGroupId => ErrorCode::INVALID_GROUP,
        GroupError::InvalidSessionTimeout => ErrorCode::INVALID_SESSION_TIMEOUT,
        GroupError::InconsistentGroupProtocol => ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
        // native members are never static (no instance id): a fenced
        // instance cannot happen, and would mean the member is gone
        GroupError::UnknownMemberId
        | GroupError::MemberIdRequired
        | GroupError::FencedInstanceId => ErrorCode::UNKNOWN_MEMBER,
        GroupError::IllegalGeneration => ErrorCode::ILLEGAL_GENERATION,
        GroupError::RebalanceInProgress => ErrorCode::REBALANCE_IN_PROGRESS,
        GroupError::GroupMaxSizeReached => ErrorCode::GROUP_FULL,
        GroupError::NonEmptyGroup => ErrorCode::GROUP_BUSY,
        GroupError::NotCoordinator => ErrorCode::NOT_COORDINATOR,
        // a native member meets a consumer-protocol (KIP-848) group of the
        // same id only by committing to it or joining it
        GroupError::StaleMemberEpoch | GroupError::FencedMemberEpoch => {
            ErrorCode::ILLEGAL_GENERATION
        }
        GroupError::UnreleasedInstanceId => ErrorCode::UNKNOWN_MEMBER,
        GroupError::GroupIdNotFound => ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
        GroupError::InvalidRequest
        | GroupError::UnsupportedAssignor
        | GroupError::InvalidRegularExpression => ErrorCode::INVALID_REQUEST,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::ResponseError as K;

    #[test]
    fn kafka_errors_a_client_reacts_to_keep_their_meaning() {
        let cases = [
            (K::NotLeaderOrFollower, ErrorCode::NOT_LEADER),
            (K::FencedLeaderEpoch, ErrorCode::NOT_LEADER),
            (K::UnknownTopicOrPartition, ErrorCode::UNKNOWN_TOPIC),
            (K::OffsetOutOfRange, ErrorCode::OFFSET_OUT_OF_RANGE),
            (K::CorruptMessage, ErrorCode::INVALID_RECORDS),
            (K::InvalidRecord, ErrorCode::INVALID_RECORDS),
            (K::MessageTooLarge, ErrorCode::RECORDS_TOO_LARGE),
            (K::NotEnoughReplicas, ErrorCode::NOT_ENOUGH_REPLICAS),
            (
                K::NotEnoughReplicasAfterAppend,
                ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            ),
            (K::RequestTimedOut, ErrorCode::TIMED_OUT),
            (K::TopicAlreadyExists, ErrorCode::TOPIC_ALREADY_EXISTS),
            (K::InvalidTopicException, ErrorCode::INVALID_TOPIC),
            (K::InvalidPartitions, ErrorCode::INVALID_PARTITIONS),
            (
                K::InvalidReplicationFactor,
                ErrorCode::INVALID_REPLICATION_FACTOR,
            ),
            (K::InvalidConfig, ErrorCode::INVALID_CONFIG),
            (
                K::OutOfOrderSequenceNumber,
                ErrorCode::OUT_OF_ORDER_SEQUENCE,
            ),
            (K::DuplicateSequenceNumber, ErrorCode::DUPLICATE_SEQUENCE),
            (K::InvalidProducerEpoch, ErrorCode::PRODUCER_FENCED),
            (K::ProducerFenced, ErrorCode::PRODUCER_FENCED),
            (K::UnknownProducerId, ErrorCode::UNKNOWN_PRODUCER),
            (K::KafkaStorageError, ErrorCode::STORAGE_ERROR),
            (K::CoordinatorNotAvailable, ErrorCode::NOT_AVAILABLE),
            (K::LeaderNotAvailable, ErrorCode::NOT_AVAILABLE),
            (K::InvalidRequiredAcks, ErrorCode::INVALID_ACKS),
            (K::IllegalGeneration, ErrorCode::GROUP_BUSY),
            (K::UnknownMemberId, ErrorCode::GROUP_BUSY),
            (K::RebalanceInProgress, ErrorCode::GROUP_BUSY),
            (K::InvalidGroupId, ErrorCode::INVALID_GROUP),
            (K::OffsetMetadataTooLarge, ErrorCode::INVALID_REQUEST),
        ];
        for (kafka, native) in cases {
            assert_eq!(from_kafka(kafka.code()), native, "{kafka:?}");
        }
        assert_eq!(
            from_kafka_for_member(K::IllegalGeneration.code()),
            ErrorCode::ILLEGAL_GENERATION
        );
        assert_eq!(
            from_kafka_for_member(K::UnknownMemberId.code()),
            ErrorCode::UNKNOWN_MEMBER
        );
        assert_eq!(
            from_kafka_for_member(K::RebalanceInProgress.code()),
            ErrorCode::REBALANCE_IN_PROGRESS
        );
        assert_eq!(
            from_kafka_for_member(K::NotLeaderOrFollower.code()),
            ErrorCode::NOT_LEADER
        );
        assert_eq!(from_kafka(0), ErrorCode::NONE);
        assert_eq!(from_kafka(-1), ErrorCode::UNKNOWN_SERVER_ERROR);
    }

    #[test]
    fn the_transaction_coordinators_errors_say_what_a_producer_does() {
        let cases = [
            (K::NotCoordinator, ErrorCode::NOT_COORDINATOR),
            (K::CoordinatorNotAvailable, ErrorCode::NOT_AVAILABLE),
            (
                K::ConcurrentTransactions,
                ErrorCode::CONCURRENT_TRANSACTIONS,
            ),
            (K::InvalidTxnState, ErrorCode::INVALID_TXN_STATE),
            (K::InvalidProducerIdMapping, ErrorCode::INVALID_TXN_STATE),
            (K::InvalidTransactionTimeout, ErrorCode::INVALID_TXN_TIMEOUT),
            (K::InvalidProducerEpoch, ErrorCode::PRODUCER_FENCED),
            (K::ProducerFenced, ErrorCode::PRODUCER_FENCED),
            (
                K::TransactionalIdAuthorizationFailed,
                ErrorCode::UNAUTHORIZED,
            ),
        ];
        for (kafka, native) in cases {
            assert_eq!(from_kafka_for_txn(kafka.code()), native, "{kafka:?}");
        }
        assert_eq!(
            from_kafka_for_txn(K::UnknownMemberId.code()),
            ErrorCode::UNKNOWN_MEMBER
        );
        // elsewhere a lost coordinator is only unavailability
        assert_eq!(
            from_kafka(K::NotCoordinator.code()),
            ErrorCode::NOT_AVAILABLE
        );
    }
}
