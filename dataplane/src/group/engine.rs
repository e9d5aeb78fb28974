//! The classic consumer-group protocol as a pure state machine.
//!
//! No IO and no clock: every call takes `now_ms`, and requests that must wait
//! (JoinGroup until the join phase completes, SyncGroup until the leader sends
//! the assignment) are parked under a caller-chosen [`ReplyId`]. Their answers
//! come back later as [`Reply`] values from another call, typically
//! [`GroupEngine::tick`] or the request that completes the phase. The driver
//! in `coordinator.rs` maps reply ids to oneshot channels and sleeps until
//! [`GroupEngine::next_deadline`].
//!
//! Group life cycle, as Apache Kafka's classic coordinator has it:
//! `Empty -> PreparingRebalance -> CompletingRebalance -> Stable`, back to
//! `PreparingRebalance` whenever membership or a member's protocols change,
//! and back to `Empty` when the last member leaves or expires.

use std::collections::HashMap;

use bytes::Bytes;

use super::state::{subscription_changed, Group, Member};
pub use super::types::*;

/// A static member's previous incarnation: its member id and its state.
type Replaced = (String, Member);

/// Every classic group this coordinator owns.
///
/// It serves only the groups whose coordinator slot its agent holds
/// ([`GroupEngine::hold`], in `ownership.rs`): a request for any other
/// group is answered NOT_COORDINATOR, and every group in memory belongs to
/// a slot held at the epoch it was built at.
#[derive(Debug)]
pub struct GroupEngine {
    pub(super) limits: GroupLimits,
    pub(super) groups: HashMap<String, Group>,
    id_prefix: String,
    next_member_seq: u64,
    /// The coordinator slots this agent holds; none until told.
    pub(super) held: HeldSlots,
    /// Consumer groups of the KIP-848 protocol (see `consumer`).
    pub(super) consumer: HashMap<String, super::consumer_state::ConsumerGroup>,
}

impl GroupEngine {
    /// `id_prefix` makes member ids unique across coordinator restarts (pass a random string).
    pub fn new(limits: GroupLimits, id_prefix: impl Into<String>) -> Self {
        GroupEngine {
            limits,
            groups: HashMap::new(),
            id_prefix: id_prefix.into(),
            next_member_seq: 0,
            held: HeldSlots::default(),
            consumer: HashMap::new(),
        }
    }

    fn new_member_id(&mut self, client_id: &str) -> String {
        self.next_member_seq += 1;
        format!("{client_id}-{}-{}", self.id_prefix, self.next_member_seq)
    }

    /// Handles a JoinGroup; the answer is either immediate or parked under `reply`.
    pub fn join(&mut self, now_ms: i64, req: JoinRequest, reply: ReplyId) -> Vec<Reply> {
        let immediate = |resp: JoinResponse| vec![Reply::Join(reply, resp)];
        if req.group_id.is_empty() {
            return immediate(JoinResponse::error(
                GroupError::InvalidGroupId,
                req.member_id,
            ));
        }
        // a consumer group of the same id: with members it refuses classic
        // members; without, it becomes a classic group (offline migration)
        if let Some(c) = self.consumer.get(&req.group_id) {
            if !c.members.is_empty() {
                return immediate(JoinResponse::error(
                    GroupError::InconsistentGroupProtocol,
                    req.member_id,
                ));
            }
            self.consumer.remove(&req.group_id);
        }
        if let Err(e) = self.fence(&req.group_id) {
            return immediate(JoinResponse::error(e, req.member_id));
        }
        if req.session_timeout_ms < self.limits.min_session_timeout_ms
            || req.session_timeout_ms > self.limits.max_session_timeout_ms
        {
            return immediate(JoinResponse::error(
                GroupError::InvalidSessionTimeout,
                req.member_id,
            ));
        }
        let new_id = if req.member_id.is_empty() {
            Some(self.new_member_id(&req.client_id))
        } else {
            None
        };
        let limits = self.limits.clone();
        // Refuse before any state exists for the group: a stream of bad joins
        // with fresh group ids must not leave groups behind.
        let supported = match self.groups.get(&req.group_id) {
            Some(g) => g.supports(&req.protocol_type, &req.protocols),
            None => !req.protocols.is_empty() && !req.protocol_type.is_empty(),
        };
        if !supported {
            return immediate(JoinResponse::error(
                GroupError::InconsistentGroupProtocol,
                req.member_id,
            ));
        }
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(Group::new);
        let mut out = Vec::new();
        let admitted = match new_id {
            Some(fresh) => Self::admit_new(group, &req, fresh, reply, now_ms, &limits, &mut out),
            None => Self::admit_known(group, &req, reply, &limits),
        };
        match admitted {
            Ok((member_id, replaced)) => {
                Self::seat(
                    group, req, member_id, replaced, reply, now_ms, &limits, &mut out,
                );
            }
            Err(refusal) => out.push(*refusal),
        }
        out
    }

    /// A member without an id: a fresh id, a static member's new incarnation
    /// (which takes the old one's place), or MEMBER_ID_REQUIRED. `Ok` carries
    /// the id to seat and the member it replaces.
    fn admit_new(
        group: &mut Group,
        req: &JoinRequest,
        fresh: String,
        reply: ReplyId,
        now_ms: i64,
        limits: &GroupLimits,
        out: &mut Vec<Reply>,
    ) -> Result<(String, Option<Replaced>), Box<Reply>> {
        let mut replaced = None;
        if let Some(instance) = &req.group_instance_id {
            // A static member coming back with a new incarnation replaces its old id.
            if let Some(old_id) = group.static_members.get(instance).cloned() {
                if let Some(mut old) = group.members.remove(&old_id) {
                    if let Some(r) = old.pending_join.take() {
                        out.push(Reply::Join(
                            r,
                            JoinResponse::error(GroupError::FencedInstanceId, old_id.clone()),
                        ));
                    }
                    if let Some(r) = old.pending_sync.take() {
                        out.push(Reply::Sync(
                            r,
                            SyncResponse::error(GroupError::FencedInstanceId),
                        ));
                    }
                    if group.leader.as_deref() == Some(old_id.as_str()) {
                        group.leader = Some(fresh.clone());
                    }
                    // KIP-345: the new incarnation inherits the old one's place
                    // (and assignment), so an unchanged member needs no rebalance.
                    replaced = Some((old_id, old));
                }
            }
            group.static_members.insert(instance.clone(), fresh.clone());
        } else if req.require_known_member_id {
            group
                .pending_members
                .insert(fresh.clone(), now_ms + i64::from(req.session_timeout_ms));
            return Err(Box::new(Reply::Join(
                reply,
                JoinResponse::error(GroupError::MemberIdRequired, fresh),
            )));
        }
        if group.members.len() >= limits.max_size {
            return Err(Box::new(Reply::Join(
                reply,
                JoinResponse::error(GroupError::GroupMaxSizeReached, fresh),
            )));
        }
        Ok((fresh, replaced))
    }

    /// A member naming its id: one handed out with MEMBER_ID_REQUIRED, or a
    /// current member rejoining.
    fn admit_known(
        group: &mut Group,
        req: &JoinRequest,
        reply: ReplyId,
        limits: &GroupLimits,
    ) -> Result<(String, Option<Replaced>), Box<Reply>> {
        let id = req.member_id.clone();
        let refuse =
            |e: GroupError, id: String| Box::new(Reply::Join(reply, JoinResponse::error(e, id)));
        if group.pending_members.remove(&id).is_some() {
            if group.members.len() >= limits.max_size {
                return Err(refuse(GroupError::GroupMaxSizeReached, id));
            }
        } else if let Some(existing) = group.members.get(&id) {
            if existing.instance_id != req.group_instance_id {
                return Err(refuse(GroupError::FencedInstanceId, id));
            }
        } else {
            let error = match &req.group_instance_id {
                Some(inst) if group.static_members.contains_key(inst) => {
                    GroupError::FencedInstanceId
                }
                _ => GroupError::UnknownMemberId,
            };
            return Err(refuse(error, id));
        }
        Ok((id, None))
    }

    /// Seats an admitted member and moves the group on: a follower
    /// rejoining with nothing new gets the current generation again, so
    /// does a static member's new incarnation asking for what the old one
    /// had (leader or not); anything else joins (or starts) a rebalance.
    #[allow(clippy::too_many_arguments)]
    fn seat(
        group: &mut Group,
        req: JoinRequest,
        member_id: String,
        replaced: Option<Replaced>,
        reply: ReplyId,
        now_ms: i64,
        limits: &GroupLimits,
        out: &mut Vec<Reply>,
    ) {
        let (replaced_id, replaced) = match replaced {
            Some((id, m)) => (Some(id), Some(m)),
            None => (None, None),
        };
        let subscription_changed = replaced.as_ref().is_some_and(|old| {
            old.protocol_type != req.protocol_type
                || subscription_changed(&req.protocol_type, &old.protocols, &req.protocols)
        });
        let previous = group.members.remove(&member_id).or(replaced);
        let protocols_changed = previous
            .as_ref()
            .map(|p| p.protocols != req.protocols || p.protocol_type != req.protocol_type)
            .unwrap_or(true);
        let supports_skip_assignment = req.supports_skip_assignment;
        if let Some(prev) = &previous {
            if let Some(r) = prev.pending_join {
                // A second join from the same member supersedes the first.
                out.push(Reply::Join(
                    r,
                    JoinResponse::error(GroupError::RebalanceInProgress, member_id.clone()),
                ));
            }
        }
        let member = Member {
            instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: previous
                .as_ref()
                .map(|p| p.assignment.clone())
                .unwrap_or_default(),
            pending_join: Some(reply),
            pending_sync: previous.as_ref().and_then(|p| p.pending_sync),
            heartbeat_deadline: now_ms + i64::from(req.session_timeout_ms),
        };
        if group.members.is_empty() {
            group.protocol_type = Some(req.protocol_type.clone());
        }
        if previous.is_none()
            && group.state == GroupState::PreparingRebalance
            && group.generation == 0
        {
            group.new_member_added = true;
        }
        group.members.insert(member_id.clone(), member);
        if group.leader.is_none() {
            group.leader = Some(member_id.clone());
        }

        if let Some(old_id) = replaced_id {
            Self::seat_returning_static(
                group,
                &member_id,
                &old_id,
                subscription_changed,
                supports_skip_assignment,
                reply,
                now_ms,
                limits,
                out,
            );
            return;
        }
        match group.state {
            GroupState::CompletingRebalance | GroupState::Stable
                if !protocols_changed && group.leader.as_deref() != Some(member_id.as_str()) =>
            {
                // A follower rejoining with nothing new gets the current generation again.
                if let Some(m) = group.members.get_mut(&member_id) {
                    m.pending_join = None;
                }
                out.push(Reply::Join(reply, group.join_response_for(&member_id)));
            }
            GroupState::PreparingRebalance => {
                out.extend(Self::maybe_complete_join(group, now_ms));
            }
            _ => {
                out.extend(Self::prepare_rebalance(group, now_ms, limits));
                out.extend(Self::maybe_complete_join(group, now_ms));
            }
        }
    }

    /// A static member's new incarnation, seated in its old one's place, as
    /// Kafka's classic coordinator has it (KIP-345): in a stable group it
    /// gets the current generation and, at its SyncGroup, the old one's
    /// assignment, unless the group's protocol would change or it
    /// subscribes to something else. A leader is either told to skip the
    /// assignment (JoinGroup v9+, KIP-814) or named the old id, so that it
    /// does not assign. During a sync phase the leader may be assigning to
    /// the old id, so the group rebalances.
    #[allow(clippy::too_many_arguments)]
    fn seat_returning_static(
        group: &mut Group,
        member_id: &str,
        old_id: &str,
        subscription_changed: bool,
        supports_skip_assignment: bool,
        reply: ReplyId,
        now_ms: i64,
        limits: &GroupLimits,
        out: &mut Vec<Reply>,
    ) {
        match group.state {
            GroupState::Stable
                if !subscription_changed && group.select_protocol() == group.protocol =>
            {
                if let Some(m) = group.members.get_mut(member_id) {
                    m.pending_join = None;
                }
                let mut resp = group.join_response_for(member_id);
                if group.leader.as_deref() == Some(member_id) {
                    if supports_skip_assignment {
                        resp.skip_assignment = true;
                    } else {
                        resp.leader = old_id.to_string();
                        resp.members.clear();
                    }
                }
                out.push(Reply::Join(reply, resp));
            }
            GroupState::PreparingRebalance => {
                out.extend(Self::maybe_complete_join(group, now_ms));
            }
            _ => {
                out.extend(Self::prepare_rebalance(group, now_ms, limits));
                out.extend(Self::maybe_complete_join(group, now_ms));
            }
        }
    }

    fn prepare_rebalance(group: &mut Group, now_ms: i64, limits: &GroupLimits) -> Vec<Reply> {
        let mut out = Vec::new();
        // Syncs parked for the generation that is being abandoned cannot complete.
        for m in group.members.values_mut() {
            if let Some(r) = m.pending_sync.take() {
                out.push(Reply::Sync(
                    r,
                    SyncResponse::error(GroupError::RebalanceInProgress),
                ));
            }
        }
        let delay = if group.state == GroupState::Empty {
            limits
                .initial_rebalance_delay_ms
                .min(group.rebalance_timeout())
        } else {
            group.rebalance_timeout()
        };
        group.initial_delay = group.state == GroupState::Empty && delay > 0;
        if group.initial_delay {
            group.initial_delay_step_ms = delay;
            group.initial_delay_remaining_ms = (group.rebalance_timeout() - delay).max(0);
            group.new_member_added = false;
        }
        group.state = GroupState::PreparingRebalance;
        group.phase_deadline = Some(now_ms + delay);
        out
    }

    fn maybe_complete_join(group: &mut Group, now_ms: i64) -> Vec<Reply> {
        if group.state != GroupState::PreparingRebalance {
            return Vec::new();
        }
        let deadline_passed = group.phase_deadline.is_none_or(|d| now_ms >= d);
        if deadline_passed && Self::extend_initial_delay(group, now_ms) {
            return Vec::new();
        }
        let waiting_initial = group.initial_delay && !deadline_passed;
        if (group.all_joined() && !waiting_initial) || deadline_passed {
            Self::complete_join(group, now_ms)
        } else {
            Vec::new()
        }
    }

    /// As Kafka's coordinator does, the first rebalance of a new group
    /// waits the initial delay again while members keep arriving, each
    /// time for as long as that delay, until the rebalance timeout is
    /// spent: consumers starting together land in one generation. True
    /// when the delay was extended.
    fn extend_initial_delay(group: &mut Group, now_ms: i64) -> bool {
        if !group.initial_delay || !group.new_member_added || group.initial_delay_remaining_ms <= 0
        {
            return false;
        }
        group.new_member_added = false;
        let step = group
            .initial_delay_step_ms
            .min(group.initial_delay_remaining_ms);
        group.initial_delay_remaining_ms -= step;
        group.phase_deadline = Some(now_ms + step);
        true
    }

    fn complete_join(group: &mut Group, now_ms: i64) -> Vec<Reply> {
        // Dynamic members that did not rejoin in time are dropped from the
        // new generation. Static members stay until their session ends
        // (KIP-345): one restarting during a rebalance keeps its place.
        let missing: Vec<String> = group
            .members
            .iter()
            .filter(|(_, m)| m.pending_join.is_none() && m.instance_id.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in missing {
            Self::drop_member(group, &id);
        }
        if !group.members.is_empty() && !group.members.values().any(|m| m.pending_join.is_some()) {
            // Only absent static members are left: nothing changes until one
            // comes back or a session ends.
            group.phase_deadline = group
                .members
                .values()
                .map(|m| m.heartbeat_deadline.max(now_ms + 1))
                .min();
            return Vec::new();
        }
        group.generation += 1;
        group.initial_delay = false;
        if group.members.is_empty() {
            group.state = GroupState::Empty;
            group.protocol = None;
            group.leader = None;
            group.phase_deadline = None;
            return Vec::new();
        }
        // The leader assigns, so it must be one that joined.
        if group.leader.as_ref().is_none_or(|l| {
            group
                .members
                .get(l)
                .is_none_or(|m| m.pending_join.is_none())
        }) {
            group.leader = group
                .members
                .iter()
                .find(|(_, m)| m.pending_join.is_some())
                .map(|(id, _)| id.clone());
        }
        group.protocol = group.select_protocol();
        group.state = GroupState::CompletingRebalance;
        group.phase_deadline = Some(now_ms + group.rebalance_timeout());
        let ids: Vec<String> = group.members.keys().cloned().collect();
        let mut out = Vec::new();
        for id in ids {
            let resp = group.join_response_for(&id);
            if let Some(m) = group.members.get_mut(&id) {
                m.assignment = Bytes::new();
                if let Some(r) = m.pending_join.take() {
                    m.heartbeat_deadline = now_ms + i64::from(m.session_timeout_ms);
                    out.push(Reply::Join(r, resp));
                }
            }
        }
        out
    }

    fn drop_member(group: &mut Group, member_id: &str) -> Vec<Reply> {
        let mut out = Vec::new();
        if let Some(mut m) = group.members.remove(member_id) {
            if let Some(inst) = &m.instance_id {
                if group.static_members.get(inst).map(String::as_str) == Some(member_id) {
                    group.static_members.remove(inst);
                }
            }
            if let Some(r) = m.pending_join.take() {
                out.push(Reply::Join(
                    r,
                    JoinResponse::error(GroupError::UnknownMemberId, member_id.to_string()),
                ));
            }
            if let Some(r) = m.pending_sync.take() {
                out.push(Reply::Sync(
                    r,
                    SyncResponse::error(GroupError::UnknownMemberId),
                ));
            }
        }
        if group.leader.as_deref() == Some(member_id) {
            group.leader = None;
        }
        out
    }

    /// Removes a member and rebalances the rest.
    fn remove_and_rebalance(
        group: &mut Group,
        member_id: &str,
        now_ms: i64,
        limits: &GroupLimits,
    ) -> Vec<Reply> {
        let mut out = Self::drop_member(group, member_id);
        out.extend(Self::rebalance_after_removal(group, now_ms, limits));
        out
    }

    /// Rebalances the members left after some were removed.
    fn rebalance_after_removal(group: &mut Group, now_ms: i64, limits: &GroupLimits) -> Vec<Reply> {
        let mut out = Vec::new();
        if group.leader.is_none() {
            group.leader = group.members.keys().next().cloned();
        }
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                out.extend(Self::prepare_rebalance(group, now_ms, limits));
                out.extend(Self::maybe_complete_join(group, now_ms));
            }
            GroupState::PreparingRebalance => {
                out.extend(Self::maybe_complete_join(group, now_ms));
            }
            // (consumer-group states: never a classic group's)
            GroupState::Empty | GroupState::Assigning | GroupState::Reconciling => {}
        }
        if group.members.is_empty() && group.state == GroupState::PreparingRebalance {
            out.extend(Self::complete_join(group, now_ms));
        }
        out
    }

    /// Handles a SyncGroup; the answer is either immediate or parked under `reply`.
    pub fn sync(&mut self, now_ms: i64, req: SyncRequest, reply: ReplyId) -> Vec<Reply> {
        let immediate = |e| vec![Reply::Sync(reply, SyncResponse::error(e))];
        if let Err(e) = self.fence(&req.group_id) {
            return immediate(e);
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return immediate(GroupError::UnknownMemberId);
        };
        if let Err(e) = Self::check_member(group, &req.member_id, req.group_instance_id.as_deref())
        {
            return immediate(e);
        }
        if req.generation_id != group.generation {
            return immediate(GroupError::IllegalGeneration);
        }
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != group.protocol_type.as_ref())
            || req
                .protocol_name
                .as_ref()
                .is_some_and(|p| Some(p) != group.protocol.as_ref())
        {
            return immediate(GroupError::InconsistentGroupProtocol);
        }
        match group.state {
            GroupState::Empty | GroupState::Assigning | GroupState::Reconciling => {
                immediate(GroupError::UnknownMemberId)
            }
            GroupState::PreparingRebalance => immediate(GroupError::RebalanceInProgress),
            GroupState::Stable => {
                let m = group.members.get_mut(&req.member_id);
                let assignment = m
                    .map(|m| {
                        m.heartbeat_deadline = now_ms + i64::from(m.session_timeout_ms);
                        m.assignment.clone()
                    })
                    .unwrap_or_default();
                vec![Reply::Sync(
                    reply,
                    SyncResponse {
                        error: None,
                        protocol_type: group.protocol_type.clone(),
                        protocol_name: group.protocol.clone(),
                        assignment,
                    },
                )]
            }
            GroupState::CompletingRebalance => {
                let mut out = Vec::new();
                if let Some(m) = group.members.get_mut(&req.member_id) {
                    if let Some(prev) = m.pending_sync.replace(reply) {
                        out.push(Reply::Sync(
                            prev,
                            SyncResponse::error(GroupError::RebalanceInProgress),
                        ));
                    }
                    m.heartbeat_deadline = now_ms + i64::from(m.session_timeout_ms);
                }
                if group.leader.as_deref() == Some(req.member_id.as_str()) {
                    let mut given: HashMap<String, Bytes> = req.assignments.into_iter().collect();
                    for (id, m) in group.members.iter_mut() {
                        m.assignment = given.remove(id).unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
                    group.phase_deadline = None;
                    for m in group.members.values_mut() {
                        if let Some(r) = m.pending_sync.take() {
                            out.push(Reply::Sync(
                                r,
                                SyncResponse {
                                    error: None,
                                    protocol_type: group.protocol_type.clone(),
                                    protocol_name: group.protocol.clone(),
                                    assignment: m.assignment.clone(),
                                },
                            ));
                        }
                    }
                }
                out
            }
        }
    }

    fn check_member(
        group: &Group,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(inst) = instance_id {
            if let Some(current) = group.static_members.get(inst) {
                if current != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
            }
        }
        match group.members.get(member_id) {
            None => Err(GroupError::UnknownMemberId),
            Some(m) if m.instance_id.as_deref() != instance_id => Err(GroupError::FencedInstanceId),
            Some(_) => Ok(()),
        }
    }

    /// Handles a Heartbeat; always answered at once.
    pub fn heartbeat(
        &mut self,
        now_ms: i64,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        self.fence(group_id)?;
        let group = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::UnknownMemberId)?;
        Self::check_member(group, member_id, instance_id)?;
        if group.state == GroupState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        if generation_id != group.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = group.members.get_mut(member_id) {
            m.heartbeat_deadline = now_ms + i64::from(m.session_timeout_ms);
        }
        match group.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Handles one member of a LeaveGroup. `member_id` may be empty when a static
    /// member is named by its instance id alone.
    pub fn leave(
        &mut self,
        now_ms: i64,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> (Result<(), GroupError>, Vec<Reply>) {
        let member = (member_id.to_string(), instance_id.map(str::to_string));
        let (mut results, out) = self.leave_batch(now_ms, group_id, &[member]);
        (
            results.pop().unwrap_or(Err(GroupError::UnknownMemberId)),
            out,
        )
    }

    /// Handles a LeaveGroup naming several members (v3+), each by its member
    /// id, its instance id or both: each one's answer in order, and one
    /// rebalance for all that left. Naming a static member by an id its
    /// instance no longer has is FENCED_INSTANCE_ID.
    pub fn leave_batch(
        &mut self,
        now_ms: i64,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> (Vec<Result<(), GroupError>>, Vec<Reply>) {
        let limits = self.limits.clone();
        if let Err(e) = self.fence(group_id) {
            return (members.iter().map(|_| Err(e)).collect(), Vec::new());
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            let unknown = members.iter().map(|_| Err(GroupError::UnknownMemberId));
            return (unknown.collect(), Vec::new());
        };
        let mut results = Vec::with_capacity(members.len());
        let mut out = Vec::new();
        let mut removed = false;
        for (member_id, instance_id) in members {
            let target = match instance_id {
                Some(inst) => match group.static_members.get(inst) {
                    Some(current) if member_id.is_empty() || current == member_id => {
                        current.clone()
                    }
                    Some(_) => {
                        results.push(Err(GroupError::FencedInstanceId));
                        continue;
                    }
                    None => {
                        results.push(Err(GroupError::UnknownMemberId));
                        continue;
                    }
                },
                None => member_id.clone(),
            };
            if group.pending_members.remove(&target).is_some() {
                results.push(Ok(()));
            } else if group.members.contains_key(&target) {
                out.extend(Self::drop_member(group, &target));
                removed = true;
                results.push(Ok(()));
            } else {
                results.push(Err(GroupError::UnknownMemberId));
            }
        }
        if removed {
            out.extend(Self::rebalance_after_removal(group, now_ms, &limits));
        }
        self.forget_if_unused(group_id);
        (results, out)
    }

    /// Drops a group that has no members, no pending members and no phase
    /// running. Its committed offsets live in the metastore, so the group is
    /// still listed and described (as Empty) from those; only its in-memory
    /// state goes, which bounds the coordinator's memory and the work of every
    /// wake-up by the groups in use.
    fn forget_if_unused(&mut self, group_id: &str) {
        if self.groups.get(group_id).is_some_and(Group::unused) {
            self.groups.remove(group_id);
        }
    }

    /// Groups held in memory (tests and metrics).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Expires sessions and ends phases whose time is up.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Reply> {
        let limits = self.limits.clone();
        let mut out = Vec::new();
        for group in self.groups.values_mut() {
            group
                .pending_members
                .retain(|_, deadline| *deadline > now_ms);
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| m.keeps_alive_by_heartbeat() && m.heartbeat_deadline <= now_ms)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                out.extend(Self::remove_and_rebalance(group, &id, now_ms, &limits));
            }
            if group.phase_deadline.is_some_and(|d| d <= now_ms) {
                match group.state {
                    GroupState::PreparingRebalance => {
                        if !Self::extend_initial_delay(group, now_ms) {
                            out.extend(Self::complete_join(group, now_ms));
                        }
                    }
                    GroupState::CompletingRebalance => {
                        // The leader never sent the assignment: start over without the laggards.
                        let unsynced: Vec<String> = group
                            .members
                            .iter()
                            .filter(|(_, m)| m.pending_sync.is_none())
                            .map(|(id, _)| id.clone())
                            .collect();
                        for id in unsynced {
                            out.extend(Self::drop_member(group, &id));
                        }
                        if group.leader.is_none() {
                            group.leader = group.members.keys().next().cloned();
                        }
                        out.extend(Self::prepare_rebalance(group, now_ms, &limits));
                        out.extend(Self::maybe_complete_join(group, now_ms));
                    }
                    GroupState::Stable
                    | GroupState::Empty
                    | GroupState::Assigning
                    | GroupState::Reconciling => group.phase_deadline = None,
                }
            }
        }
        self.groups.retain(|_, g| !g.unused());
        self.consumer_tick(now_ms);
        out
    }

    /// The earliest time at which [`GroupEngine::tick`] has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups
            .values()
            .flat_map(|g| {
                g.phase_deadline
                    .into_iter()
                    .chain(g.pending_members.values().copied())
                    .chain(
                        g.members
                            .values()
                            .filter(|m| m.keeps_alive_by_heartbeat())
                            .map(|m| m.heartbeat_deadline),
                    )
            })
            .chain(self.consumer_deadline())
            .min()
    }
}

#[path = "engine_queries.rs"]
mod queries;

#[cfg(test)]
#[path = "engine_tests.rs"]
pub(super) mod tests;
