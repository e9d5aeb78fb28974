//! The coordinator slot planner: decides which coordinator slots
//! ([`crate::coordinators`]) change holder.
//!
//! Pure, like the lease engine: it reads a [`MetaState`] and a `now_ms`
//! handed in and returns `MoveCoordinatorSlot` commands, each naming the
//! epoch it planned at; the lease driver proposes them after the lease
//! engine's decisions, and the state machine refuses any that a change in
//! between made stale.
//!
//! Every move makes the groups of the slot rebalance once (their members
//! meet NOT_COORDINATOR and look the coordinator up again), so stability
//! comes before balance. A slot moves only:
//! 1. when its holder is fenced or gone: at once, to a live agent: one
//!    that may take slots for balance (below) if there is one, else one
//!    back from a failure, else a draining one; among those the one that
//!    holds fewest slots (counting this plan's earlier moves), the lowest
//!    id on a tie. With no live agent the slot stays where it is, and its
//!    holder serves it again when it returns;
//! 2. when its holder is draining, to an agent that is not, as above (a
//!    drained agent is about to leave);
//! 3. to even out a difference of two or more: while an agent that may
//!    take slots holds at least two fewer than the fullest live holder, the
//!    fullest hands one over (its highest slot not moved by this plan). An
//!    agent may take slots when it is live, not draining, and not back from
//!    a failure for less than [`rejoin_hold_ms`] (ten leases, at least
//!    30 s): an agent that lost slots because it was fenced takes none this
//!    way until that long after the loss and after its last registration (a restart),
//!    so one that keeps failing does not drag groups back and forth. A new agent takes its share at once, in one
//!    plan: each group of the slots concerned rebalances once, as when
//!    Kafka moves its coordinators with a preferred leader election, and a
//!    new cluster, whose first agent got every slot, is even a tick after
//!    its last agent registered.
//!
//! A slot that does not move keeps its holder and its epoch, whoever else
//! joins or leaves: a group's coordinator never changes because of an
//! agent that does not coordinate it.

use std::collections::{BTreeMap, BTreeSet};

use crate::command::Command;
use crate::coordinators::SlotHolder;
use crate::state::MetaState;
use crate::types::{AgentId, AgentInfo};

/// How many leases an agent back from a failure waits before balancing
/// gives it slots again, unless that is shorter than [`REJOIN_HOLD_MIN_MS`].
pub const REJOIN_HOLD_LEASES: i64 = 10;

/// The shortest wait of an agent back from a failure: with sub-second
/// leases ten of them would let an agent that keeps failing drag its
/// groups through a rebalance every few seconds.
pub const REJOIN_HOLD_MIN_MS: i64 = 30_000;

/// How long an agent back from a failure waits before balancing gives it
/// slots again, for a lease of `lease_ms`.
pub fn rejoin_hold_ms(lease_ms: u64) -> i64 {
    i64::try_from(lease_ms)
        .unwrap_or(i64::MAX)
        .saturating_mul(REJOIN_HOLD_LEASES)
        .max(REJOIN_HOLD_MIN_MS)
}

/// How willing an agent is to take slots; lower is preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Standing {
    /// Takes slots for balance and on failover.
    Settled,
    /// Back from a failure lately: takes slots only on failover.
    Returning,
    /// Being drained: takes slots only when no other agent is live.
    Draining,
}

fn standing(state: &MetaState, a: &AgentInfo, now_ms: i64, hold_ms: i64) -> Standing {
    if a.draining {
        return Standing::Draining;
    }
    // counted from the later of the loss and its last registration (a
    // restart); an agent restarted within its lease lost nothing, and
    // registrations alone say nothing (an agent registers twice as it starts)
    let back_since = state
        .coordinator_slots()
        .lost_ms(a.id)
        .map(|lost| lost.max(a.registered_ms));
    match back_since {
        Some(t) if now_ms.saturating_sub(t) < hold_ms => Standing::Returning,
        _ => Standing::Settled,
    }
}

/// The slot moves that bring the table up to date at `now_ms`.
pub fn plan(state: &MetaState, now_ms: i64, lease_ms: u64) -> Vec<Command> {
    let table = state.coordinator_slots();
    let hold_ms = rejoin_hold_ms(lease_ms);
    let live: BTreeMap<AgentId, Standing> = state
        .agents()
        .filter(|a| !a.fenced)
        .map(|a| (a.id, standing(state, a, now_ms, hold_ms)))
        .collect();
    if table.count() == 0 || live.is_empty() {
        return Vec::new();
    }
    let mut p = Moves::new(table.iter().map(|(_, h)| h).collect(), &live);
    // 1 and 2: slots of failed and draining holders
    for (slot, h) in table.iter() {
        let acceptable = match live.get(&h.agent) {
            None => Standing::Draining, // fenced or gone: any live agent will do
            Some(Standing::Draining) => Standing::Returning, // one that stays
            Some(_) => continue,
        };
        let target = p
            .counts
            .iter()
            .filter(|(a, _)| **a != h.agent)
            .filter_map(|(a, c)| live.get(a).map(|s| (*s, *c, *a)))
            .filter(|(s, _, _)| *s <= acceptable)
            .min();
        if let Some((_, _, to)) = target {
            p.give(slot, to);
        }
    }
    // 3: even out differences of two or more
    for _ in 0..p.holders.len() {
        let emptiest = p
            .counts
            .iter()
            .filter(|(a, _)| live.get(a) == Some(&Standing::Settled))
            .map(|(a, c)| (*c, *a))
            .min();
        let fullest = p
            .counts
            .iter()
            .filter(|(a, _)| live.get(a) != Some(&Standing::Draining))
            .map(|(a, c)| (*c, *a))
            .max();
        let (Some((low, to)), Some((high, from))) = (emptiest, fullest) else {
            break;
        };
        if high < low + 2 {
            break;
        }
        let slot = (0u32..)
            .zip(&p.holders)
            .filter(|(s, h)| h.agent == from && !p.moved.contains(s))
            .map(|(s, _)| s)
            .last();
        match slot {
            Some(slot) => p.give(slot, to),
            None => break,
        }
    }
    p.out
}

/// A plan being made: the table as the moves so far leave it.
struct Moves {
    holders: Vec<SlotHolder>,
    /// Slots held by each live agent.
    counts: BTreeMap<AgentId, usize>,
    moved: BTreeSet<u32>,
    out: Vec<Command>,
}

impl Moves {
    fn new(holders: Vec<SlotHolder>, live: &BTreeMap<AgentId, Standing>) -> Moves {
        let mut counts: BTreeMap<AgentId, usize> = live.keys().map(|&a| (a, 0)).collect();
        for h in &holders {
            if let Some(c) = counts.get_mut(&h.agent) {
                *c += 1;
            }
        }
        Moves {
            holders,
            counts,
            moved: BTreeSet::new(),
            out: Vec::new(),
        }
    }

    /// Moves `slot` to `to`, at the epoch the state has it.
    fn give(&mut self, slot: u32, to: AgentId) {
        let Some(h) = usize::try_from(slot)
            .ok()
            .and_then(|i| self.holders.get_mut(i))
        else {
            return;
        };
        if let Some(c) = self.counts.get_mut(&h.agent) {
            *c = c.saturating_sub(1);
        }
        if let Some(c) = self.counts.get_mut(&to) {
            *c += 1;
        }
        self.out.push(Command::MoveCoordinatorSlot {
            slot,
            expected_epoch: h.epoch,
            holder: to,
        });
        h.agent = to;
        self.moved.insert(slot);
    }
}

#[cfg(test)]
#[path = "coordinator_plan_tests.rs"]
mod tests;
