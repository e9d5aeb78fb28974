//! Consumer groups of the KIP-848 protocol (ConsumerGroupHeartbeat), in the
//! same pure [`GroupEngine`] as the classic groups: no IO, no clock.
//!
//! The rules are Kafka's (`GroupMetadataManager` and
//! `CurrentAssignmentBuilder` of Kafka's group coordinator):
//! - A group has an epoch, bumped whenever a member joins or leaves, a
//!   member's subscription changes, or the subscribed topics change (one
//!   created, one deleted, partitions added).
//! - When the group epoch passes the target assignment's epoch, the next
//!   heartbeat computes a new target with the group's server-side assignor
//!   (`uniform` unless a member names `range`; see `assignor`).
//! - Each member reconciles towards its target on its own heartbeats: it
//!   first revokes what it must give up (state UNREVOKED_PARTITIONS, at its
//!   old epoch) and acknowledges that by no longer listing those partitions
//!   as owned; then it moves to the target epoch and gets the partitions no
//!   other member still owns (UNRELEASED_PARTITIONS until the rest are
//!   released, STABLE when it holds its whole target). No member ever owns
//!   a partition another member still owns.
//! - A member that stops heartbeating for the session timeout, or does not
//!   revoke within its rebalance timeout, is removed (fenced). A member that
//!   sends an epoch it does not have gets FENCED_MEMBER_EPOCH and rejoins
//!   with epoch 0; one that resends the previous epoch with a subset of its
//!   assignment is accepted (its last answer was lost).
//! - Static members (an instance id) that leave with epoch -2 keep their
//!   assignment for the session timeout; the next member with the same
//!   instance id takes it over, a second live one gets UNRELEASED_INSTANCE_ID.
//! - A subscription is topic names, or a regular expression matched against
//!   every topic name (Rust `regex` syntax, which accepts the RE2/J patterns
//!   clients send). As in Kafka, where patterns are resolved off the
//!   heartbeat path, a new pattern counts from the group's next heartbeat,
//!   and every heartbeat matches the patterns again (new topics join).
//! - An empty classic group (only committed offsets) becomes a consumer group
//!   when a member joins with this protocol, and back: the offsets are the
//!   group's in the metastore whatever its protocol. A classic group with
//!   members refuses consumer-protocol members (GROUP_ID_NOT_FOUND, as Kafka
//!   with online migration off) and a consumer group with members refuses
//!   JoinGroup (INCONSISTENT_GROUP_PROTOCOL).
//!
//! Groups are kept in memory by the agent holding the group's coordinator
//! slot. When the slot moves, members heartbeating the new holder get
//! UNKNOWN_MEMBER_ID and rejoin (Kafka keeps the group in its offsets
//! topic instead); committed offsets are in the metastore and survive.

use std::sync::Arc;

use uuid::Uuid;

use super::assignor::{Assignment, ASSIGNORS, DEFAULT_ASSIGNOR};
use super::engine::GroupEngine;
use super::types::{GroupError, GroupState};

/// Member epoch of a member leaving the group.
pub const LEAVE_EPOCH: i32 = -1;
/// Member epoch of a static member leaving for a while (it keeps its
/// partitions for its session timeout).
pub const STATIC_LEAVE_EPOCH: i32 = -2;

use super::consumer_state::{anchored, ConsumerMember};
pub use super::consumer_state::{MemberState, TopicCatalog};

/// A ConsumerGroupHeartbeat, decoded. `None` fields are unchanged since
/// the member's last heartbeat.
#[derive(Debug, Clone)]
pub struct ConsumerHeartbeat {
    pub group_id: String,
    /// Empty when joining with version 0 (the coordinator picks one).
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns now.
    pub owned: Option<Vec<(Uuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
    /// Every topic of the cluster now.
    pub topics: Arc<TopicCatalog>,
}

impl ConsumerHeartbeat {
    /// Which optional fields the request carried, and how (`null`, empty
    /// or how many): what a refusal of a malformed heartbeat is judged on.
    pub fn shape(&self) -> String {
        fn list<T>(l: Option<&[T]>) -> String {
            match l {
                Some(l) => format!("[{}]", l.len()),
                None => "null".to_owned(),
            }
        }
        fn text(t: Option<&str>) -> String {
            match t {
                Some(t) => format!("{t:?}"),
                None => "null".to_owned(),
            }
        }
        format!(
            "epoch={} member_id={:?} instance_id={} rack_id={} rebalance_timeout_ms={} topic_names={} topic_regex={} assignor={} owned={}",
            self.member_epoch,
            self.member_id,
            text(self.instance_id.as_deref()),
            text(self.rack_id.as_deref()),
            self.rebalance_timeout_ms,
            list(self.subscribed_topic_names.as_deref()),
            text(self.subscribed_topic_regex.as_deref()),
            text(self.server_assignor.as_deref()),
            list(self.owned.as_deref()),
        )
    }
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The partitions the member may own now, when they changed (or the
    /// request was a full one).
    pub assignment: Option<Assignment>,
}

/// A refused heartbeat: the error and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRefusal {
    pub error: GroupError,
    pub message: String,
}

fn refuse<T>(error: GroupError, message: impl Into<String>) -> Result<T, ConsumerRefusal> {
    Err(ConsumerRefusal {
        error,
        message: message.into(),
    })
}

/// Checks the fields a heartbeat must carry (Kafka's rules).
fn check(req: &ConsumerHeartbeat) -> Result<(), ConsumerRefusal> {
    let invalid = |m: &str| refuse(GroupError::InvalidRequest, m);
    if req.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    match req.member_epoch {
        e if e > 0 || e == LEAVE_EPOCH => {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        }
        0 => {
            // A member (re)joining owns nothing. It says so with an empty
            // list, or with no list at all: librdkafka, once it left the
            // group from its steady state (the leave's answer sets its
            // epoch back to 0 but not its state), sends its next
            // subscription in an incremental heartbeat at epoch 0 (no owned
            // list, no rebalance timeout). Such a join keeps the member's
            // last rebalance timeout, or takes the clients' default for a
            // new member (see `DEFAULT_REBALANCE_TIMEOUT_MS`). Only
            // partitions claimed at epoch 0 are malformed.
            if req.owned.as_ref().is_some_and(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            // An empty list of names or an empty pattern joins the group
            // with no topics (a client whose subscription is empty for the
            // moment); only a request carrying neither is malformed.
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        STATIC_LEAVE_EPOCH => {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
            if req.instance_id.is_none() {
                return invalid("InstanceId can't be null.");
            }
        }
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(a) = req.server_assignor.as_deref() {
        if !ASSIGNORS.contains(&a) {
            return refuse(
                GroupError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {a} is not supported. Supported assignors: {}.",
                    ASSIGNORS.join(", ")
                ),
            );
        }
    }
    // (an empty pattern clears the member's pattern)
    if let Some(r) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if regex::Regex::new(&anchored(r)).is_err() {
            return refuse(
                GroupError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{r}` is not a valid regular expression."),
            );
        }
    }
    Ok(())
}

fn to_assignment(owned: &[(Uuid, Vec<i32>)]) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in owned {
        if !ps.is_empty() {
            a.entry(*t).or_default().extend(ps.iter().copied());
        }
    }
    a
}

fn is_subset(owned: Option<&Assignment>, of: &Assignment) -> bool {
    owned.is_some_and(|o| {
        o.iter()
            .all(|(t, ps)| of.get(t).is_some_and(|have| ps.is_subset(have)))
    })
}

impl GroupEngine {
    /// Handles a ConsumerGroupHeartbeat.
    pub fn consumer_heartbeat(
        &mut self,
        now_ms: i64,
        req: ConsumerHeartbeat,
    ) -> Result<ConsumerAnswer, ConsumerRefusal> {
        if let Err(r) = check(&req) {
            // a malformed request fails the client for good: say which
            // rule refused which shape
            tracing::info!(
                group = %req.group_id,
                member = %req.member_id,
                epoch = req.member_epoch,
                error = ?r.error,
                shape = %req.shape(),
                "ConsumerGroupHeartbeat refused as malformed: {}",
                r.message
            );
            return Err(r);
        }
        self.fence(&req.group_id)
            .or_else(|e| refuse(e, "this agent does not coordinate the group"))?;
        let joining = req.member_epoch == 0;
        // (a member joining owns nothing, whether it sent an empty list or none)
        let owned = match req.owned.as_deref() {
            Some(o) => Some(to_assignment(o)),
            None if joining => Some(Assignment::new()),
            None => None,
        };
        // the other protocol's group of the same id
        if let Some(classic) = self.groups.get(&req.group_id) {
            if !classic.members.is_empty() || !classic.pending_members.is_empty() {
                return refuse(
                    GroupError::GroupIdNotFound,
                    format!("Group {} is a classic group with members; it cannot take consumer-protocol members.", req.group_id),
                );
            }
            if joining {
                self.groups.remove(&req.group_id);
            }
        }
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == STATIC_LEAVE_EPOCH {
            return self.consumer_leave(&req);
        }
        let heartbeat_interval_ms = self.limits.consumer_heartbeat_interval_ms;
        let session_ms = i64::from(self.limits.consumer_session_timeout_ms);
        let max_size = self.limits.max_size;
        let group = match self.consumer.get_mut(&req.group_id) {
            Some(g) => g,
            None if joining => self.consumer.entry(req.group_id.clone()).or_default(),
            None => {
                return refuse(
                    GroupError::UnknownMemberId,
                    format!(
                        "Member {} is not a member of group {}.",
                        req.member_id, req.group_id
                    ),
                )
            }
        };
        if group.members.len() >= max_size && !group.members.contains_key(&req.member_id) {
            let static_rejoin = req
                .instance_id
                .as_ref()
                .is_some_and(|i| group.static_members.contains_key(i));
            if !static_rejoin {
                return refuse(
                    GroupError::GroupMaxSizeReached,
                    format!("The consumer group has reached its maximum capacity of {max_size} members."),
                );
            }
        }
        let member_id = if req.member_id.is_empty() {
            Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        // the member: existing (checked), new, or a static member's successor
        let (mut member, replaced) = match &req.instance_id {
            Some(inst) => {
                let existing = group.static_members.get(inst).cloned();
                match existing {
                    Some(old_id) if joining => {
                        let Some(old) = group.members.get(&old_id) else {
                            return refuse(GroupError::UnknownMemberId, "unknown static member");
                        };
                        if old.epoch != STATIC_LEAVE_EPOCH && old_id != member_id {
                            return refuse(
                                GroupError::UnreleasedInstanceId,
                                format!("Static member {old_id} with instance id {inst} is not released yet."),
                            );
                        }
                        let mut m = old.clone();
                        m.epoch = 0;
                        m.previous_epoch = 0;
                        (m, Some(old_id))
                    }
                    Some(old_id) => {
                        if old_id != member_id {
                            return refuse(
                                GroupError::FencedInstanceId,
                                format!("Static member {member_id} with instance id {inst} was replaced by {old_id}."),
                            );
                        }
                        let Some(m) = group.members.get(&member_id) else {
                            return refuse(GroupError::UnknownMemberId, "unknown static member");
                        };
                        check_epoch(m, req.member_epoch, owned.as_ref())?;
                        (m.clone(), None)
                    }
                    None if joining => (ConsumerMember::new(now_ms), None),
                    None => {
                        return refuse(
                            GroupError::UnknownMemberId,
                            format!("Instance id {inst} is unknown."),
                        )
                    }
                }
            }
            None => match group.members.get(&member_id) {
                Some(m) => {
                    check_epoch(m, req.member_epoch, owned.as_ref())?;
                    (m.clone(), None)
                }
                None if joining => (ConsumerMember::new(now_ms), None),
                None => {
                    return refuse(
                        GroupError::UnknownMemberId,
                        format!(
                            "Member {member_id} is not a member of group {}.",
                            req.group_id
                        ),
                    )
                }
            },
        };
        let before = member.clone();
        // 0. the patterns the group had before this heartbeat, matched again
        group.resolve_patterns(&req.topics);
        // 1. the member's own fields; a new subscription moves the group epoch
        if req.instance_id.is_some() {
            member.instance_id = req.instance_id.clone();
        }
        if req.rack_id.is_some() {
            member.rack_id = req.rack_id.clone();
        }
        if req.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if req.server_assignor.is_some() {
            member.assignor = req.server_assignor.clone();
        }
        if let Some(names) = &req.subscribed_topic_names {
            member.names = names.clone();
        }
        if let Some(r) = &req.subscribed_topic_regex {
            member.regex = Some(r.clone()).filter(|r| !r.is_empty());
        }
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        let new_member = !group.members.contains_key(&member_id) && replaced.is_none();
        let mut bump = new_member
            || before.names != member.names
            || before.regex != member.regex
            || before.assignor != member.assignor;
        if let Some(old_id) = &replaced {
            if old_id != &member_id {
                // the successor takes the old member's place and partitions
                group.members.remove(old_id);
                group
                    .target
                    .remove(old_id)
                    .map(|t| group.target.insert(member_id.clone(), t));
                group.owners.retain(|_, owner| owner != old_id);
            }
        }
        if let Some(inst) = &member.instance_id {
            group.static_members.insert(inst.clone(), member_id.clone());
        }
        group.members.insert(member_id.clone(), member.clone());
        group.own(&member_id, &member);
        // 2. the subscribed topics as they are now
        let metadata = group.resolve(&req.topics);
        if metadata != group.metadata {
            group.metadata = metadata;
            bump = true;
        }
        if bump {
            group.epoch += 1;
        }
        // 3. a new target assignment when the group moved on
        if group.epoch > group.assignment_epoch {
            group.compute_target(&req.topics);
        }
        // 4. the member towards its target
        group.reconcile(&member_id, &mut member, owned.as_ref(), now_ms);
        member.session_deadline = now_ms + session_ms;
        group.members.insert(member_id.clone(), member.clone());
        group.own(&member_id, &member);
        let full = joining
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.owned.is_some());
        Ok(ConsumerAnswer {
            member_id,
            member_epoch: member.epoch,
            heartbeat_interval_ms,
            assignment: (full || before.assigned != member.assigned)
                .then(|| member.assigned.clone()),
        })
    }

    fn consumer_leave(
        &mut self,
        req: &ConsumerHeartbeat,
    ) -> Result<ConsumerAnswer, ConsumerRefusal> {
        let unknown = || {
            refuse(
                GroupError::UnknownMemberId,
                format!(
                    "Member {} is not a member of group {}.",
                    req.member_id, req.group_id
                ),
            )
        };
        let Some(group) = self.consumer.get_mut(&req.group_id) else {
            return unknown();
        };
        let member_id = match &req.instance_id {
            Some(inst) => {
                let Some(id) = group.static_members.get(inst).cloned() else {
                    return refuse(
                        GroupError::UnknownMemberId,
                        format!("Instance id {inst} is unknown."),
                    );
                };
                if id != req.member_id {
                    return refuse(
                        GroupError::FencedInstanceId,
                        format!(
                            "Static member {} with instance id {inst} was replaced by {id}.",
                            req.member_id
                        ),
                    );
                }
                id
            }
            None => req.member_id.clone(),
        };
        if !group.members.contains_key(&member_id) {
            return unknown();
        }
        if req.member_epoch == STATIC_LEAVE_EPOCH {
            // it keeps its partitions until its session ends or it returns
            if let Some(m) = group.members.get_mut(&member_id) {
                m.epoch = STATIC_LEAVE_EPOCH;
                m.revoking = Assignment::new();
                m.state = MemberState::Stable;
                m.revoke_deadline = None;
                let m = m.clone();
                group.own(&member_id, &m);
            }
        } else {
            group.remove(&member_id);
        }
        Ok(ConsumerAnswer {
            member_id,
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Removes members whose session or revocation time is up.
    pub(super) fn consumer_tick(&mut self, now_ms: i64) {
        for (id, group) in self.consumer.iter_mut() {
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| {
                    m.session_deadline <= now_ms || m.revoke_deadline.is_some_and(|d| d <= now_ms)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for m in expired {
                tracing::info!(group = %id, member = %m, "consumer group member fenced: its session or rebalance timeout passed");
                group.remove(&m);
            }
        }
        self.consumer.retain(|_, g| !g.members.is_empty());
    }

    /// The earliest time the consumer groups have work for [`GroupEngine::tick`].
    pub(super) fn consumer_deadline(&self) -> Option<i64> {
        self.consumer
            .values()
            .flat_map(|g| g.members.values())
            .flat_map(|m| std::iter::once(m.session_deadline).chain(m.revoke_deadline))
            .min()
    }

    /// Describes a consumer group (ConsumerGroupDescribe); `None` when
    /// this coordinator has no consumer group of that id.
    pub fn consumer_describe(
        &self,
        group_id: &str,
    ) -> Result<Option<ConsumerGroupDescription>, GroupError> {
        self.fence(group_id)?;
        let Some(g) = self.consumer.get(group_id) else {
            return Ok(None);
        };
        Ok(Some(ConsumerGroupDescription {
            state: g.state(),
            epoch: g.epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: if g.assignor.is_empty() {
                DEFAULT_ASSIGNOR.to_string()
            } else {
                g.assignor.clone()
            },
            members: g
                .members
                .iter()
                .map(|(id, m)| ConsumerMemberDescription {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.names.clone(),
                    subscribed_topic_regex: m.regex.clone(),
                    assignment: m.assigned.clone(),
                    target: g.target.get(id).cloned().unwrap_or_default(),
                })
                .collect(),
        }))
    }

    /// The OffsetCommit check of a consumer group: from a member at its
    /// current epoch, or from outside the group (epoch < 0) while it has no
    /// member. `None` when there is no consumer group of that id.
    pub(super) fn consumer_commit_check(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Option<Result<(), GroupError>> {
        let g = self.consumer.get(group_id)?;
        if member_epoch < 0 && g.members.is_empty() {
            return Some(Ok(()));
        }
        let Some(m) = g.members.get(member_id) else {
            return Some(Err(GroupError::UnknownMemberId));
        };
        Some(if m.epoch == member_epoch {
            Ok(())
        } else {
            Err(GroupError::StaleMemberEpoch)
        })
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch`: a fetch naming no
    /// member and no epoch (the admin client, older clients) passes; one
    /// from a member of a consumer group must come from a known member at
    /// its current epoch. Groups of the classic protocol are not checked
    /// (Kafka does not either).
    pub(super) fn consumer_fetch_check(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        if member_id.is_none_or(str::is_empty) && member_epoch < 0 {
            return Ok(());
        }
        let Some(g) = self.consumer.get(group_id) else {
            return Ok(());
        };
        let Some(m) = member_id.and_then(|id| g.members.get(id)) else {
            return Err(GroupError::UnknownMemberId);
        };
        if m.epoch == member_epoch {
            Ok(())
        } else {
            Err(GroupError::StaleMemberEpoch)
        }
    }
}

/// Kafka's check of the epoch a known member sends.
fn check_epoch(
    m: &ConsumerMember,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), ConsumerRefusal> {
    if received > m.epoch {
        return refuse(
            GroupError::FencedMemberEpoch,
            format!("The consumer group member has a greater member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", m.epoch),
        );
    }
    if received < m.epoch && (received != m.previous_epoch || !is_subset(owned, &m.assigned)) {
        return refuse(
            GroupError::FencedMemberEpoch,
            format!("The consumer group member has a smaller member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", m.epoch),
        );
    }
    Ok(())
}

/// A consumer group, for ConsumerGroupDescribe.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerGroupDescription {
    pub state: GroupState,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ConsumerMemberDescription>,
}

/// One member of a consumer group, for ConsumerGroupDescribe.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Assignment,
    pub target: Assignment,
}

#[cfg(test)]
#[path = "consumer_tests.rs"]
mod tests;
