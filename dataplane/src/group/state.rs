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
        }
    }
}
