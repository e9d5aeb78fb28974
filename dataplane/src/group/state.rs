//! The state of one classic group and its members, as the
//! engine keeps it.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::types::{GroupState, JoinResponse, JoinedMember, ReplyId};

#[derive(Debug)]
pub(super) struct Member {
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout_ms: i32,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) protocol_type: String,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    pub(super) pending_join: Option<ReplyId>,
    pub(super) pending_sync: Option<ReplyId>,
    pub(super) heartbeat_deadline: i64,
}

impl Member {
    /// Members parked in a join or sync are kept alive by that request, not by heartbeats.
    pub(super) fn keeps_alive_by_heartbeat(&self) -> bool {
        self.pending_join.is_none() && self.pending_sync.is_none()
    }

    pub(super) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug)]
pub(super) struct Group {
    pub(super) state: GroupState,
    pub(super) generation: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with the time they lapse.
    pub(super) pending_members: HashMap<String, i64>,
    pub(super) static_members: HashMap<String, String>,
    /// When the current phase ends (join phase or sync phase), if one is running.
    pub(super) phase_deadline: Option<i64>,
    /// A rebalance out of `Empty` waits for the initial delay even when all have joined.
    pub(super) initial_delay: bool,
    /// The configured initial delay, the step by which it is extended.
    pub(super) initial_delay_step_ms: i64,
    /// How much longer the initial delay may still be extended (what is
    /// left of the rebalance timeout).
    pub(super) initial_delay_remaining_ms: i64,
    /// A member new to a never-balanced group arrived during the current
    /// step of the initial delay.
    pub(super) new_member_added: bool,
}

impl Group {
    pub(super) fn new() -> Self {
        Group {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            phase_deadline: None,
            initial_delay: false,
            initial_delay_step_ms: 0,
            initial_delay_remaining_ms: 0,
            new_member_added: false,
        }
    }

    /// Nothing would be lost by forgetting the group.
    pub(super) fn unused(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.phase_deadline.is_none()
    }

    pub(super) fn rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    pub(super) fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocols.is_empty() || protocol_type.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// The protocol every member supports that most members list first.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&String> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == *name))
            })
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(&n))
            {
                *votes.entry(name).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        candidates
            .into_iter()
            .find(|c| votes.get(c).copied() == Some(best))
            .cloned()
    }

    pub(super) fn all_joined(&self) -> bool {
        self.members.values().all(|m| m.pending_join.is_some())
    }

    pub(super) fn join_response_for(&self, member_id: &str) -> JoinResponse {
        let is_leader = self.leader.as_deref() == Some(member_id);
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = if is_leader {
            self.members
                .iter()
                .map(|(id, m)| JoinedMember {
                    member_id: id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResponse {
            error: None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
            skip_assignment: false,
        }
    }
}

/// Whether a static member's new incarnation subscribes to something else
/// than its previous one: other protocols, other metadata or, for the
/// consumer protocol, other topics. A consumer's subscription also carries
/// the partitions it owns, its generation and its assignor's user data;
/// those describe the incarnation (a restarted consumer owns nothing yet),
/// so they do not count.
pub(super) fn subscription_changed(
    protocol_type: &str,
    old: &[(String, Bytes)],
    new: &[(String, Bytes)],
) -> bool {
    old.len() != new.len()
        || old
            .iter()
            .zip(new)
            .any(|((old_name, old_meta), (name, meta))| {
                if old_name != name {
                    return true;
                }
                if protocol_type != "consumer" {
                    return old_meta != meta;
                }
                match (consumer_topics(old_meta), consumer_topics(meta)) {
                    (Some(a), Some(b)) => a != b,
                    _ => old_meta != meta,
                }
            })
}

/// The topics of a ConsumerProtocolSubscription (any version: a version
/// and the topic array come first in all of them), sorted; `None` when the
/// bytes do not hold one.
fn consumer_topics(metadata: &[u8]) -> Option<Vec<&[u8]>> {
    let rest = metadata.get(2..)?;
    let (count, mut rest) = rest.split_first_chunk::<4>()?;
    let count = usize::try_from(i32::from_be_bytes(*count)).ok()?;
    // each topic takes at least its two length bytes
    let mut topics = Vec::with_capacity(count.min(rest.len() / 2));
    for _ in 0..count {
        let (len, after) = rest.split_first_chunk::<2>()?;
        let len = usize::try_from(i16::from_be_bytes(*len)).ok()?;
        topics.push(after.get(..len)?);
        rest = after.get(len..)?;
    }
    topics.sort_unstable();
    topics.dedup();
    Some(topics)
}
