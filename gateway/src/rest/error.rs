//! The REST API's errors: a JSON body `{"code": "...", "message": "..."}`
//! with a stable code and a fitting HTTP status. The codes are part of the
//! API (docs/rest-api.md lists them); messages are for humans and may change.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use kafka_protocol::ResponseError;
use metastore::MetaError;
use serde::Serialize;
use utoipa::ToSchema;

use dataplane::group::coordinator::CoordinatorGone;
use dataplane::node::Unavailable;

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code, e.g. `topic_not_found`.
    pub code: String,
    /// What went wrong, for a human.
    pub message: String,
}

/// An error answer of the REST API.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// `invalid_request` (400): the request itself is malformed.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// `not_found` (404): no such endpoint.
    pub fn not_found(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no endpoint at {path}"),
        )
    }

    pub fn topic_not_found(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "topic_not_found",
            format!("topic '{name}' does not exist"),
        )
    }

    pub fn partition_not_found(topic: &str, partition: i32) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "partition_not_found",
            format!("topic '{topic}' has no partition {partition}"),
        )
    }

    pub fn group_not_found(group: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "group_not_found",
            format!("group '{group}' does not exist"),
        )
    }

    /// `not_leader` (421): another agent leads the partition; ask it.
    pub fn not_leader(topic: &str, partition: i32, leader: Option<u64>) -> Self {
        let who = match leader {
            Some(l) => format!("agent {l} leads it"),
            None => "it has no leader right now".to_string(),
        };
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            "not_leader",
            format!("this agent does not lead {topic}/{partition}; {who}"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_string(),
            message: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<MetaError> for ApiError {
    fn from(e: MetaError) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            MetaError::TopicAlreadyExists { .. } => (S::CONFLICT, "topic_exists"),
            MetaError::UnknownTopic { .. } | MetaError::UnknownTopicId { .. } => {
                (S::NOT_FOUND, "topic_not_found")
            }
            MetaError::UnknownPartition { .. } => (S::NOT_FOUND, "partition_not_found"),
            MetaError::GroupIdNotFound { .. } => (S::NOT_FOUND, "group_not_found"),
            MetaError::InvalidTopicName { .. } => (S::BAD_REQUEST, "invalid_topic_name"),
            MetaError::InvalidPartitions { .. } => (S::BAD_REQUEST, "invalid_partitions"),
            MetaError::InvalidReplicationFactor { .. } => {
                (S::BAD_REQUEST, "invalid_replication_factor")
            }
            MetaError::InvalidReplicaAssignment { .. } => {
                (S::BAD_REQUEST, "invalid_replica_assignment")
            }
            MetaError::InvalidConfig { .. } => (S::BAD_REQUEST, "invalid_config"),
            MetaError::InvalidRequest { .. }
            | MetaError::InvalidGroupId { .. }
            | MetaError::OffsetMetadataTooLarge { .. } => (S::BAD_REQUEST, "invalid_request"),
            MetaError::DuplicateAgent { .. } | MetaError::AgentAlive { .. } => {
                (S::CONFLICT, "conflict")
            }
            MetaError::FencedLeaderEpoch { .. } | MetaError::NotPartitionLeader { .. } => {
                (S::MISDIRECTED_REQUEST, "not_leader")
            }
            MetaError::ElectionNotNeeded { .. } | MetaError::NoReassignmentInProgress { .. } => {
                (S::CONFLICT, "conflict")
            }
            MetaError::Transaction { .. } => (S::CONFLICT, "transaction_state"),
            // The metastore is electing a leader, unreachable or stopping,
            // or a group's coordinator just moved: retry.
            MetaError::NotLeader { .. }
            | MetaError::NotCoordinator { .. }
            | MetaError::Timeout { .. }
            | MetaError::Network { .. }
            | MetaError::Membership { .. }
            | MetaError::ShuttingDown
            | MetaError::EligibleLeadersNotAvailable { .. } => {
                (S::SERVICE_UNAVAILABLE, "unavailable")
            }
            MetaError::UnknownAgent { .. }
            | MetaError::StaleRequest { .. }
            | MetaError::IneligibleReplica { .. }
            | MetaError::SegmentOverlap { .. }
            | MetaError::ProducerIdsExhausted
            | MetaError::Storage { .. }
            | MetaError::Registry { .. }
            | MetaError::Connect { .. }
            | MetaError::InvalidSettings { .. } => (S::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<CoordinatorGone> for ApiError {
    fn from(_: CoordinatorGone) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the group coordinator has stopped",
        )
    }
}

/// A partition that cannot be served here, for `topic`/`partition` led by
/// `leader` (as the metastore says).
pub fn unavailable(e: Unavailable, topic: &str, partition: i32, leader: Option<u64>) -> ApiError {
    match e {
        Unavailable::UnknownPartition => ApiError::partition_not_found(topic, partition),
        Unavailable::NotLeader => ApiError::not_leader(topic, partition, leader),
        Unavailable::Log(e) => match crate::codes::log_error(&e) {
            ResponseError::OffsetOutOfRange => ApiError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "offset_out_of_range",
                e.to_string(),
            ),
            ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch => {
                ApiError::not_leader(topic, partition, leader)
            }
            _ => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                e.to_string(),
            ),
        },
    }
}
