//! The one place internal errors become Kafka error codes. Every match is
//! exhaustive, so a new error variant cannot silently turn into
//! UNKNOWN_SERVER_ERROR.

use kafka_protocol::ResponseError;

use crate::backend::{CatalogError, LogError};
use crate::group::engine::GroupError;

/// The Kafka error code for a partition-log failure.
pub fn log_error(e: &LogError) -> ResponseError {
    match e {
        LogError::Corrupt(_) => ResponseError::CorruptMessage,
        LogError::InvalidRecord(_) => ResponseError::InvalidRecord,
        LogError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        LogError::UnknownProducerId { .. } => ResponseError::UnknownProducerId,
        LogError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        LogError::UnsupportedFormat(_) => ResponseError::UnsupportedForMessageFormat,
        LogError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType,
        LogError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        LogError::InvalidConfig(_) => ResponseError::InvalidConfig,
        LogError::Storage(_) => ResponseError::KafkaStorageError,
        LogError::Io(_) => ResponseError::KafkaStorageError,
    }
}

/// The Kafka error code for a catalog failure.
pub fn catalog_error(e: &CatalogError) -> ResponseError {
    match e {
        CatalogError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        CatalogError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        CatalogError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        CatalogError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        CatalogError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        CatalogError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        CatalogError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        CatalogError::InvalidRequest(_) => ResponseError::InvalidRequest,
        CatalogError::GroupIdNotFound(_) => ResponseError::GroupIdNotFound,
        CatalogError::InvalidGroupId(_) => ResponseError::InvalidGroupId,
        CatalogError::OffsetMetadataTooLarge { .. } => ResponseError::OffsetMetadataTooLarge,
        CatalogError::Unavailable(_) => ResponseError::RequestTimedOut,
        CatalogError::Internal(_) => ResponseError::UnknownServerError,
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
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
    }
}

/// `error_code` field value for an optional error.
pub fn code(e: Option<ResponseError>) -> i16 {
    e.map(|e| e.code()).unwrap_or(0)
}
