//! Consumer groups over the native protocol: FindCoordinator, JoinGroup,
//! Heartbeat and LeaveGroup, served by the broker's group coordinator
//! (`dataplane::group`), the one Kafka's JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup use. Native groups therefore live in the same group store as
//! Kafka's: DescribeGroups and ListGroups show them, and their offsets are
//! the group's offsets Kafka tools read.
//!
//! A native member joins with protocol type `consumer` and the one protocol
//! [`PROTOCOL_NAME`], which only native members propose: the coordinator
//! refuses a Kafka consumer joining a native group, and a native member
//! joining a Kafka group, with INCONSISTENT_GROUP_PROTOCOL. The member
//! metadata and the assignments are Kafka's consumer-protocol encodings
//! (`ConsumerProtocolSubscription` and `ConsumerProtocolAssignment`,
//! version 0), so Kafka tools decode a native member's topics and
//! partitions.
//!
//! One native JoinGroup is Kafka's JoinGroup and SyncGroup together, both
//! done here: after the join phase the elected leader's request computes
//! the assignment ([`range_assign`]) from the members' subscriptions and
//! the catalog's partition counts and syncs it; the other members sync with
//! nothing and receive theirs. A sync that finds the group rebalancing again
//! joins the next generation, within the same request.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use metastore::{AgentId, Groups, Topics};
use sdk::proto::{self, ErrorCode};

use super::codes::from_group;
use crate::broker::Broker;
use crate::brokers;
use crate::kafka::api::{s, Client};
use dataplane::group::engine::{GroupError, JoinRequest, JoinedMember, SyncRequest};
use dataplane::node::GroupHome;

/// Kafka's protocol type of consumer groups: Kafka tools decode the
/// members' metadata and assignments as consumer-protocol messages.
pub(super) const PROTOCOL_TYPE: &str = "consumer";
/// The assignment protocol of native members; no Kafka client proposes it.
pub(super) const PROTOCOL_NAME: &str = "aerostream-range";
/// Version of the consumer-protocol messages written.
const CONSUMER_PROTOCOL_VERSION: i16 = 0;
/// Joins a request makes when each sync finds the group rebalancing again.
const MAX_JOINS: usize = 5;

/// The agent that coordinates `group`: the holder of its coordinator slot,
/// the agent Kafka's FindCoordinator names (in load-balancer mode, the
/// agent the balancer forwards the group's requests to).
fn coordinator(b: &Broker, group: &str) -> Option<AgentId> {
    b.node.catalog.coordinator(group).map(|p| p.holder.agent)
}

/// Whether this server coordinates `group`.
pub(super) fn coordinates(b: &Broker, group: &str) -> bool {
    matches!(b.node.group_home(group), GroupHome::Here(_))
}

pub(super) fn find_coordinator(
    b: &Broker,
    f: proto::FindCoordinator,
) -> proto::FindCoordinatorResponse {
    let refuse = |error| proto::FindCoordinatorResponse {
        correlation: f.correlation,
        error,
        ..Default::default()
    };
    if f.group.is_empty() {
        return refuse(ErrorCode::INVALID_GROUP);
    }
    let Some(c) = coordinator(b, &f.group) else {
        return refuse(ErrorCode::NOT_AVAILABLE);
    };
    // the coordinator at its native address; an agent without a native
    // listener (or not registered yet) cannot be reached natively
    let native = brokers::native_agents(&b.node.catalog, &b.config)
        .into_iter()
        .find(|e| u64::try_from(e.id).ok() == Some(c))
        .and_then(|e| {
            Some((
                u32::try_from(e.id).ok()?,
                e.host,
                u16::try_from(e.port).ok()?,
            ))
        });
    match native {
        Some((node_id, host, port)) => proto::FindCoordinatorResponse {
            correlation: f.correlation,
            error: ErrorCode::NONE,
            node_id,
            host,
            port,
        },
        None => refuse(ErrorCode::NOT_AVAILABLE),
    }
}

pub(super) async fn join_group(
    b: &Broker,
    c: &Client,
    client_id: &str,
    j: proto::JoinGroup,
) -> proto::JoinGroupResponse {
    let refuse = |error, member_id: String| proto::JoinGroupResponse {
        correlation: j.correlation,
        error,
        generation: -1,
        member_id,
        assignment: Vec::new(),
    };
    if j.group.is_empty() {
        return refuse(ErrorCode::INVALID_GROUP, j.member_id);
    }
    if j.topics.is_empty() || j.topics.iter().any(String::is_empty) {
        return refuse(ErrorCode::INVALID_REQUEST, j.member_id);
    }
    if !coordinates(b, &j.group) {
        return refuse(ErrorCode::NOT_COORDINATOR, j.member_id);
    }
    let topics: BTreeSet<&str> = j.topics.iter().map(String::as_str).collect();
    let metadata = encode_subscription(&topics);
    let mut member_id = j.member_id.clone();
    for _ in 0..MAX_JOINS {
        let join = JoinRequest {
            group_id: j.group.clone(),
            member_id: member_id.clone(),
            group_instance_id: None,
            client_id: client_id.to_string(),
            client_host: c.host.clone(),
            session_timeout_ms: i32::try_from(j.session_timeout_ms).unwrap_or(i32::MAX),
            rebalance_timeout_ms: i32::try_from(j.rebalance_timeout_ms).unwrap_or(i32::MAX),
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocols: vec![(PROTOCOL_NAME.to_string(), metadata.clone())],
            require_known_member_id: false,
            supports_skip_assignment: false,
        };
        // waits for the join phase: every member rejoined, or the group's
        // rebalance timeout passed
        let Ok(joined) = b.node.groups.join(join).await else {
            return refuse(ErrorCode::NOT_AVAILABLE, member_id);
        };
        if let Some(e) = joined.error {
            return refuse(from_group(e), joined.member_id);
        }
        member_id = joined.member_id;
        if joined.protocol_name.as_deref() != Some(PROTOCOL_NAME) {
            return refuse(ErrorCode::INCONSISTENT_GROUP_PROTOCOL, member_id);
        }
        let assignments = if joined.leader == member_id {
            encode_assignments(&range_assign(&subscriptions(&joined.members), |t| {
                b.node
                    .catalog
                    .topic(t)
                    .and_then(|info| u32::try_from(info.partitions.len()).ok())
            }))
        } else {
            Vec::new()
        };
        let sync = SyncRequest {
            group_id: j.group.clone(),
            member_id: member_id.clone(),
            group_instance_id: None,
            generation_id: joined.generation_id,
            protocol_type: Some(PROTOCOL_TYPE.to_string()),
            protocol_name: Some(PROTOCOL_NAME.to_string()),
            assignments,
        };
        // waits for the leader's assignment (bounded by the rebalance
        // timeout too: then the group rebalances without the laggards)
        let Ok(synced) = b.node.groups.sync(sync).await else {
            return refuse(ErrorCode::NOT_AVAILABLE, member_id);
        };
        match synced.error {
            None => {}
            // the group moved on while this member synced: join its next generation
            Some(GroupError::RebalanceInProgress) => continue,
            Some(e) => return refuse(from_group(e), member_id),
        }
        let Some(assignment) = decode_assignment(synced.assignment) else {
            tracing::warn!(group = %j.group, "a native group's assignment could not be decoded");
            return refuse(ErrorCode::UNKNOWN_SERVER_ERROR, member_id);
        };
        return proto::JoinGroupResponse {
            correlation: j.correlation,
            error: ErrorCode::NONE,
            generation: joined.generation_id,
            member_id,
            assignment,
        };
    }
    refuse(ErrorCode::REBALANCE_IN_PROGRESS, member_id)
}

pub(super) async fn heartbeat(b: &Broker, h: proto::Heartbeat) -> proto::HeartbeatResponse {
    let error = if h.group.is_empty() {
        ErrorCode::INVALID_GROUP
    } else if !coordinates(b, &h.group) {
        ErrorCode::NOT_COORDINATOR
    } else {
        match b
            .node
            .groups
            .heartbeat(h.group, h.member_id, None, h.generation)
            .await
        {
            Ok(Ok(())) => ErrorCode::NONE,
            Ok(Err(e)) => from_group(e),
            Err(_) => ErrorCode::NOT_AVAILABLE,
        }
    };
    proto::HeartbeatResponse(proto::GroupResponse {
        correlation: h.correlation,
        error,
    })
}

pub(super) async fn leave_group(b: &Broker, l: proto::LeaveGroup) -> proto::LeaveGroupResponse {
    let error = if l.group.is_empty() {
        ErrorCode::INVALID_GROUP
    } else if !coordinates(b, &l.group) {
        ErrorCode::NOT_COORDINATOR
    } else {
        match b
            .node
            .groups
            .leave(l.group, vec![(l.member_id, None)])
            .await
        {
            Ok(results) => match results.first() {
                Some(Ok(())) => ErrorCode::NONE,
                Some(Err(e)) => from_group(*e),
                None => ErrorCode::UNKNOWN_SERVER_ERROR,
            },
            Err(_) => ErrorCode::NOT_AVAILABLE,
        }
    };
    proto::LeaveGroupResponse(proto::GroupResponse {
        correlation: l.correlation,
        error,
    })
}

// ------------------------------------------------------------ assignment

/// Kafka's range assignment, per topic: the topic's subscribers sorted by
/// member id, partitions `0..n` cut into contiguous ranges in that order,
/// the first `n % members` ranges one partition longer. Topics the catalog
/// does not know get no assignment. Every member is in the answer, with
/// an empty assignment when it gets nothing.
pub(crate) fn range_assign(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    partitions_of: impl Fn(&str) -> Option<u32>,
) -> BTreeMap<String, BTreeMap<String, Vec<u32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<u32>>> = subscriptions
        .keys()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    let mut subscribers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (member, topics) in subscriptions {
        for t in topics {
            subscribers.entry(t).or_default().push(member);
        }
    }
    for (topic, members) in subscribers {
        let Some(n) = partitions_of(topic) else {
            continue;
        };
        // BTreeMap order: `members` is sorted by member id already
        let m = u32::try_from(members.len()).unwrap_or(u32::MAX).max(1);
        let (each, extra) = (n / m, n % m);
        let mut next = 0u32;
        for (i, member) in members.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let len = each + u32::from(i < extra);
            if len > 0 {
                if let Some(assigned) = out.get_mut(*member) {
                    assigned.insert(topic.to_string(), (next..next + len).collect());
                }
            }
            next += len;
        }
    }
    out
}

/// Each member's subscribed topics, from its join metadata; a member whose
/// metadata does not decode subscribes to nothing.
fn subscriptions(members: &[JoinedMember]) -> BTreeMap<String, BTreeSet<String>> {
    members
        .iter()
        .map(|m| {
            let topics = decode_subscription(m.metadata.clone()).unwrap_or_default();
            (m.member_id.clone(), topics)
        })
        .collect()
}

/// `i16` version, then the message at that version: how Kafka's consumer
/// protocol frames member metadata and assignments.
fn versioned(m: &impl Encodable) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(CONSUMER_PROTOCOL_VERSION);
    if let Err(e) = m.encode(&mut buf, CONSUMER_PROTOCOL_VERSION) {
        // only strings over 32 KiB fail, and topic names are far shorter
        tracing::warn!(error = %e, "encoding a consumer-protocol message failed");
    }
    buf.freeze()
}

fn encode_subscription(topics: &BTreeSet<&str>) -> Bytes {
    versioned(
        &ConsumerProtocolSubscription::default()
            .with_topics(topics.iter().map(|t| s(*t)).collect())
            .with_user_data(None),
    )
}

fn decode_subscription(mut b: Bytes) -> Option<BTreeSet<String>> {
    if b.remaining() < 2 {
        return None;
    }
    let version = b.get_i16().clamp(0, 3);
    let sub = ConsumerProtocolSubscription::decode(&mut b, version).ok()?;
    Some(sub.topics.into_iter().map(|t| t.to_string()).collect())
}

fn encode_assignments(
    assigned: &BTreeMap<String, BTreeMap<String, Vec<u32>>>,
) -> Vec<(String, Bytes)> {
    assigned
        .iter()
        .map(|(member, topics)| {
            let parts = topics
                .iter()
                .map(|(t, ps)| {
                    TopicPartition::default()
                        .with_topic(TopicName(s(t.clone())))
                        .with_partitions(ps.iter().filter_map(|p| i32::try_from(*p).ok()).collect())
                })
                .collect();
            let a = ConsumerProtocolAssignment::default()
                .with_assigned_partitions(parts)
                .with_user_data(None);
            (member.clone(), versioned(&a))
        })
        .collect()
}

/// A member's assignment as the native answer lists it; an empty
/// assignment (nothing for this member) is no partitions.
fn decode_assignment(b: Bytes) -> Option<Vec<proto::TopicAssignment>> {
    let topics = crate::kafka::consumer_protocol::decode_consumer_assignment(b)?;
    Some(
        topics
            .into_iter()
            .map(|(topic, partitions)| proto::TopicAssignment {
                topic,
                partitions: partitions
                    .into_iter()
                    .filter_map(|p| u32::try_from(p).ok())
                    .collect(),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        members
            .iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    #[test]
    fn range_assignment_cuts_each_topic_into_contiguous_ranges_by_member_id() {
        let counts = |t: &str| match t {
            "six" => Some(6),
            "four" => Some(4),
            _ => None,
        };
        let got = range_assign(
            &subs(&[
                ("c", &["six"]),
                ("a", &["six", "four"]),
                ("b", &["six", "four", "gone"]),
            ]),
            counts,
        );
        assert_eq!(got["a"]["six"], vec![0, 1]);
        assert_eq!(got["b"]["six"], vec![2, 3]);
        assert_eq!(got["c"]["six"], vec![4, 5]);
        assert_eq!(got["a"]["four"], vec![0, 1]);
        assert_eq!(got["b"]["four"], vec![2, 3]);
        assert!(!got["c"].contains_key("four"));
        assert!(
            !got["b"].contains_key("gone"),
            "unknown topics are not assigned"
        );
        // uneven: the first members get one more
        let got = range_assign(
            &subs(&[
                ("a", &["six"]),
                ("b", &["six"]),
                ("c", &["six"]),
                ("d", &["six"]),
            ]),
            counts,
        );
        let lens: Vec<usize> = ["a", "b", "c", "d"]
            .iter()
            .map(|m| got[*m]["six"].len())
            .collect();
        assert_eq!(lens, vec![2, 2, 1, 1]);
        // more members than partitions: the last ones get nothing, but are listed
        let got = range_assign(&subs(&[("a", &["x"]), ("b", &["x"])]), |_| Some(1));
        assert_eq!(got["a"]["x"], vec![0]);
        assert!(got["b"].is_empty());
    }

    #[test]
    fn subscriptions_and_assignments_are_kafka_consumer_protocol_messages() {
        let topics: BTreeSet<&str> = ["b", "a"].into_iter().collect();
        let meta = encode_subscription(&topics);
        assert_eq!(&meta[..2], &[0, 0], "version 0 first");
        assert_eq!(
            decode_subscription(meta),
            Some(["a".to_string(), "b".to_string()].into_iter().collect())
        );
        let mut assigned = BTreeMap::new();
        assigned.insert(
            "m1".to_string(),
            [("a".to_string(), vec![0, 2])]
                .into_iter()
                .collect::<BTreeMap<_, _>>(),
        );
        let encoded = encode_assignments(&assigned);
        assert_eq!(encoded.len(), 1);
        assert_eq!(
            decode_assignment(encoded[0].1.clone()),
            Some(vec![proto::TopicAssignment {
                topic: "a".into(),
                partitions: vec![0, 2]
            }])
        );
        assert_eq!(decode_assignment(Bytes::new()), Some(vec![]));
        assert_eq!(decode_assignment(Bytes::from_static(&[0])), None);
    }
}
