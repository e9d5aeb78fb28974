//! What the metastore leader knows of the agents' liveness: when it last
//! heard each one, on its own monotonic clock.
//!
//! Leases must not depend on the wall clocks of different machines (a voter
//! whose clock ran ahead while it led, an NTP step on the leader). So a
//! heartbeat is not a stamped log entry: it is a request to the Raft leader,
//! which notes when *it* received it, on its monotonic clock, and forgets
//! it when it stops leading (as KRaft's controller tracks broker sessions).
//! Pure: time is handed in. The rules, step by step:
//!
//! 1. An agent is silent for the time since this node last heard it (a
//!    heartbeat or a registration reached it).
//! 2. This node judges from when its leadership began, and again from when
//!    it resumes after a stall of its own (its tick came more than a
//!    quarter lease late: it may not have read the heartbeats that queued
//!    meanwhile). It cannot know who spoke before that point, so every
//!    agent counts as heard half a lease before it: a live agent, which
//!    heartbeats several times per lease, has half a lease to reach this
//!    node, and one that died with the previous leader is fenced half a
//!    lease after the takeover rather than a whole one. (Fencing a live
//!    agent by mistake costs availability, never data: epochs fence its
//!    writes and it rejoins.)
//! 3. While a fence of an agent is being proposed, a heartbeat from it must
//!    be logged (a `Heartbeat` entry, which bumps the agent's lease
//!    generation): landing before the fence, it makes the fence stale;
//!    landing after, it lifts it. A fenced agent's heartbeat is logged too,
//!    to lift the fence. Every other heartbeat stays off the log.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::types::AgentId;

/// The leader's view of agent liveness; empty on a node that does not lead.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    heard: HashMap<AgentId, Instant>,
    /// Rule 2: judging from here on; `None` while this node does not lead.
    judging_from: Option<Instant>,
    /// When the driver last finished a round, to notice its own stalls.
    rested_at: Option<Instant>,
    /// Rule 3: agents whose fence is being proposed.
    fencing: BTreeSet<AgentId>,
}

impl Liveness {
    /// This node became the Raft leader at `now`.
    pub(crate) fn took_over(&mut self, now: Instant) {
        self.judging_from = Some(now);
        self.rested_at = Some(now);
        self.fencing.clear();
    }

    /// This node no longer leads: what it heard is of no use to a successor.
    pub(crate) fn stepped_down(&mut self) {
        *self = Liveness::default();
    }

    /// The driver starts a round at `now`. Rule 2: after a stall longer
    /// than a quarter lease, judging starts over from `now`. Returns
    /// whether it did.
    pub(crate) fn wake(&mut self, now: Instant, lease: Duration) -> bool {
        let stalled = self
            .rested_at
            .is_some_and(|at| now.saturating_duration_since(at) > lease / 4);
        if stalled && self.judging_from.is_some() {
            self.judging_from = Some(now);
        }
        stalled
    }

    /// The driver finished a round at `now`.
    pub(crate) fn rest(&mut self, now: Instant) {
        self.rested_at = Some(now);
    }

    /// `agent` was heard at `now` (rule 1). Returns whether this heartbeat
    /// must be logged because a fence of the agent is being proposed (rule 3).
    pub(crate) fn heard(&mut self, agent: AgentId, now: Instant) -> bool {
        let at = self.heard.entry(agent).or_insert(now);
        *at = (*at).max(now);
        self.fencing.contains(&agent)
    }

    /// How long `agent` has been silent at `now`, as far as this node can
    /// tell (rules 1 and 2); zero while this node does not lead.
    pub(crate) fn silent_for(&self, agent: AgentId, now: Instant, lease: Duration) -> Duration {
        let Some(from) = self.judging_from else {
            return Duration::ZERO;
        };
        let floor = from.checked_sub(lease / 2).unwrap_or(from);
        let last = self.heard.get(&agent).map_or(floor, |h| (*h).max(floor));
        now.saturating_duration_since(last)
    }

    /// A fence of `agent` is about to be proposed (rule 3).
    pub(crate) fn fencing(&mut self, agent: AgentId) {
        self.fencing.insert(agent);
    }

    /// The proposal of `agent`'s fence returned: applied, refused, or
    /// failed. (Should a failed one apply later after all, the agent's
    /// next heartbeat finds it fenced and lifts the fence.)
    pub(crate) fn fence_settled(&mut self, agent: AgentId) {
        self.fencing.remove(&agent);
    }
}

#[cfg(test)]
#[path = "liveness_tests.rs"]
mod tests;
