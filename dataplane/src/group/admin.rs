//! Consumer groups: the list, one group's members and assignment, and its
//! committed offsets: one implementation for Kafka's
//! ListGroups/DescribeGroups/OffsetFetch, `/v1/groups` and the native
//! protocol. Membership lives in the group's coordinator (the agent that
//! holds its coordinator slot), committed offsets in the metastore; a group
//! with offsets but no live member is `Empty`. Each answer says whether
//! this agent coordinates the group: Kafka's APIs answer only for those
//! (NOT_COORDINATOR for the rest), `/v1/groups` for every group.

use std::collections::BTreeMap;

use metastore::Groups;

use super::coordinator::CoordinatorGone;
use super::engine::{GroupError, GroupState, MemberDescription};
use crate::node::{GroupHome, Node};

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
    /// `classic`, or `consumer` for a KIP-848 group (ListGroups v5).
    pub group_type: String,
    /// This agent coordinates the group.
    pub here: bool,
}

/// Every group: those with members on this agent's coordinator, then those
/// that only have committed offsets (coordinated here or elsewhere).
pub async fn list_groups(node: &Node) -> Result<Vec<ListedGroup>, CoordinatorGone> {
    let mut all: Vec<ListedGroup> = node
        .groups
        .list()
        .await?
        .into_iter()
        .map(|(group_id, state, protocol_type, group_type)| ListedGroup {
            group_id,
            state: state.as_str().to_string(),
            protocol_type,
            group_type: group_type.to_string(),
            here: true,
        })
        .collect();
    for g in node.catalog.groups() {
        if !all.iter().any(|l| l.group_id == g) {
            all.push(ListedGroup {
                here: matches!(node.group_home(&g), GroupHome::Here(_)),
                group_id: g,
                state: GroupState::Empty.as_str().to_string(),
                protocol_type: String::new(),
                group_type: "classic".to_string(),
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
    /// This agent coordinates the group; when it does not, the state and
    /// members are not known here (the group reads as `Empty` or [`DEAD`]
    /// from its offsets).
    pub here: bool,
}

impl DescribedGroup {
    /// Whether the group exists (has members or committed offsets).
    pub fn exists(&self) -> bool {
        self.state != DEAD
    }
}

/// A group's state and members; a group with committed offsets and no
/// member is `Empty`, one with neither is [`DEAD`].
pub async fn describe_group(node: &Node, group: &str) -> Result<DescribedGroup, CoordinatorGone> {
    let (described, here) = match node.groups.describe(group.to_string()).await? {
        Ok(d) => (d, true),
        Err(GroupError::NotCoordinator) => (None, false),
        // describing refuses nothing else
        Err(_) => (None, true),
    };
    Ok(match described {
        Some(d) => DescribedGroup {
            state: d.state.as_str().to_string(),
            protocol_type: d.protocol_type,
            protocol: d.protocol,
            members: d.members,
            here,
        },
        None => DescribedGroup {
            here,
            state: if node.catalog.groups().iter().any(|g| g == group) {
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
    node: &Node,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<(String, Vec<Committed>)> {
    let committed = node.catalog.committed_offsets(group);
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
