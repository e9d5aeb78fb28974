//! What several native operations share: the fatal error frame, the
//! refusal of a group operation, and Kafka's codes refined for the native
//! protocol.

use metastore::Topics;
use sdk::proto::{self, ErrorCode, ErrorFrame};

use crate::broker::Broker;
use crate::native::codes::from_kafka;

pub(in crate::native) fn fatal(
    correlation: u32,
    error: ErrorCode,
    message: impl Into<String>,
) -> ErrorFrame {
    ErrorFrame {
        correlation,
        error,
        message: message.into(),
    }
}

pub(in crate::native) fn group_refused(correlation: u32) -> proto::GroupResponse {
    proto::GroupResponse {
        correlation,
        error: ErrorCode::UNAUTHORIZED,
    }
}

/// UNKNOWN_TOPIC from Kafka's UNKNOWN_TOPIC_OR_PARTITION when the topic
/// exists: then it is the partition that does not.
pub(in crate::native) fn refine(b: &Broker, topic: &str, code: i16) -> ErrorCode {
    let e = from_kafka(code);
    if e == ErrorCode::UNKNOWN_TOPIC && b.node.catalog.topic(topic).is_some() {
        ErrorCode::UNKNOWN_PARTITION
    } else {
        e
    }
}

pub(in crate::native) fn partition_index(p: u32) -> i32 {
    // an index past i32::MAX names no partition: the handler says so
    i32::try_from(p).unwrap_or(i32::MAX)
}
