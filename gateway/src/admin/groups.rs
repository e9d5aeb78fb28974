//! Consumer groups: the list, one group's members and assignment, and its
//! committed offsets, for ListGroups/DescribeGroups/OffsetFetch and
//! `/v1/groups`. Membership lives in this agent's group coordinator,
//! committed offsets in the metastore; a group with offsets but no live
//! member is `Empty`.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;
use metastore::Groups;

use crate::broker::Broker;
use dataplane::group::coordinator::CoordinatorGone;
use dataplane::group::engine::{GroupState, MemberDescription};

/// Kafka's state name of a group nobody knows.
pub const DEAD: &str = "Dead";

/// One group of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    /// Kafka's state name (`Stable`, `Empty`, ...).
    pub state: String,
    /// `consumer` for consumer groups; empty when only offsets remain.
    pub protocol_type: String,
}

/// Every group: those with members on this agent's coordinator, then those
/// that only have committed offsets.
pub async fn list_groups(b: &Broker) -> Result<Vec<ListedGroup>, CoordinatorGone> {
    let mut all: Vec<ListedGroup> = b
        .node
        .groups
        .list()
        .await?
        .into_iter()
        .map(|(group_id, state, protocol_type)| ListedGroup {
            group_id,
            state: state.as_str().to_string(),
            protocol_type,
        })
        .collect();
    for g in b.node.catalog.groups() {
        if !all.iter().any(|l| l.group_id == g) {
            all.push(ListedGroup {
                group_id: g,
                state: GroupState::Empty.as_str().to_string(),
                protocol_type: String::new(),
            });
        }
    }
    Ok(all)
}

/// One group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct DescribedGroup {
    /// Kafka's state name; [`DEAD`] when the group is unknown.
    pub state: String,
    pub protocol_type: String,
    /// The chosen assignor (`range`, ...).
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

impl DescribedGroup {
    /// Whether the group exists (has members or committed offsets).
    pub fn exists(&self) -> bool {
        self.state != DEAD
    }
}

/// A group's state and members; a group with committed offsets and no
/// member is `Empty`, one with neither is [`DEAD`].
pub async fn describe_group(b: &Broker, group: &str) -> Result<DescribedGroup, CoordinatorGone> {
    let described = b.node.groups.describe(group.to_string()).await?;
    Ok(match described {
        Some(d) => DescribedGroup {
            state: d.state.as_str().to_string(),
            protocol_type: d.protocol_type,
            protocol: d.protocol,
            members: d.members,
        },
        None => DescribedGroup {
            state: if b.node.catalog.groups().iter().any(|g| g == group) {
                GroupState::Empty.as_str().to_string()
            } else {
                DEAD.to_string()
            },
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        },
    })
}

/// A committed offset as OffsetFetch answers it: `offset` and
/// `leader_epoch` are -1 when nothing is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// A group's committed offsets for the partitions asked, or for every
/// partition it committed when `topics` is `None`; by topic.
pub fn committed_offsets(
    b: &Broker,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<(String, Vec<Committed>)> {
    let committed = b.node.catalog.committed_offsets(group);
    let wanted = match topics {
        Some(t) => t,
        None => {
            let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (t, p) in committed.keys() {
                by_topic.entry(t.clone()).or_default().push(*p);
            }
            by_topic.into_iter().collect()
        }
    };
    wanted
        .into_iter()
        .map(|(topic, parts)| {
            let entries = parts
                .into_iter()
                .map(|p| match committed.get(&(topic.clone(), p)) {
                    Some(o) => Committed {
                        partition: p,
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: o.metadata.clone().unwrap_or_default(),
                    },
                    None => Committed {
                        partition: p,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                    },
                })
                .collect();
            (topic, entries)
        })
        .collect()
}

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
