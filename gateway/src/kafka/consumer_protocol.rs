//! Kafka's consumer protocol: the assignment a consumer group's leader
//! hands each member, as bytes the group coordinator stores without reading.
//! The REST API and the native protocol show or use it, so they decode it
//! here.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;

/// A member's assignment in Kafka's consumer protocol (a version, then a
/// `ConsumerProtocolAssignment`) as (topic, partitions); an empty
/// assignment is no partitions, bytes that do not decode are `None`.
pub fn decode_consumer_assignment(mut b: Bytes) -> Option<Vec<(String, Vec<i32>)>> {
    if b.is_empty() {
        return Some(Vec::new());
    }
    if b.remaining() < 2 {
        return None;
    }
    let version = b.get_i16().clamp(0, 3);
    let a = ConsumerProtocolAssignment::decode(&mut b, version).ok()?;
    Some(
        a.assigned_partitions
            .into_iter()
            .map(|tp| (tp.topic.to_string(), tp.partitions))
            .collect(),
    )
}
