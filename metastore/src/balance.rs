//! The balancer: decides which partitions to move between agents, so that
//! draining agents empty and every agent holds a fair share of replicas and
//! of preferred leaderships.
//!
//! Pure: it reads a [`MetaState`] and returns `AlterReassignment` commands,
//! each carrying the partition epoch it saw (so it never overrides a
//! reassignment an operator started meanwhile). The lease driver runs it on
//! the metastore leader after the lease engine, which completes the moves
//! (`lease.rs`, `state/reassign.rs`).
//!
//! The rules, in this order, within `max_in_flight` reassignments under way
//! in the whole cluster:
//! 1. Only agents that are alive and not draining receive replicas.
//!    Replicas on fenced agents are neither counted nor moved (as in Kafka,
//!    a failed agent keeps its replicas until it returns, is drained or is
//!    removed).
//! 2. A partition is only moved while it has a live leader, no
//!    reassignment under way, and every replica it keeps is in the ISR, so
//!    the move can complete and never rests on a lagging copy.
//! 3. Draining: each replica on a draining agent, or on an agent removed
//!    from the cluster (`RemoveAgent`), is replaced, in place (the
//!    replacement inherits its position, so preferred leadership moves with
//!    it), by the agent with the fewest replicas that keeps the partition's
//!    racks as spread as before.
//! 4. Replicas: while an agent holds two or more replicas more than
//!    another, one of its replicas (a follower's when it can) moves to the
//!    other, racks as in 3; the widest gap that has a movable partition
//!    goes first.
//! 5. Leaders: while an agent is the preferred leader of two or more
//!    partitions more than another, a partition it prefers and where the
//!    other is in sync is reordered to prefer the other; the lease engine
//!    then moves leadership there.
//!
//! Loads count every reassignment's target, so moves under way are not
//! planned twice and the plan converges.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::command::Command;
use crate::state::MetaState;
use crate::types::{AgentId, PartitionInfo, TopicInfo};

/// Reassignments the balancer keeps under way at once, by default.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 3;

struct View<'a> {
    state: &'a MetaState,
    /// Agents that receive replicas: alive and not draining.
    eligible: BTreeSet<AgentId>,
    replicas: BTreeMap<AgentId, usize>,
    preferred: BTreeMap<AgentId, usize>,
}

impl View<'_> {
    fn rack(&self, a: AgentId) -> Option<&str> {
        self.state.agent(a).and_then(|a| a.rack.as_deref())
    }

    fn racks(&self, replicas: &[AgentId]) -> usize {
        replicas
            .iter()
            .map(|r| {
                self.rack(*r)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("#{r}"))
            })
            .collect::<BTreeSet<_>>()
            .len()
    }

    fn live(&self, a: AgentId) -> bool {
        self.state.agent(a).is_some_and(|a| !a.fenced)
    }

    /// Rule 2, for a partition about to keep `kept` of its replicas.
    fn movable(&self, p: &PartitionInfo, kept: &[AgentId]) -> bool {
        p.leader.is_some_and(|l| self.live(l))
            && !p.is_reassigning()
            && kept.iter().all(|r| p.isr.contains(r) && self.live(*r))
    }

    /// `target` with `old` replaced by `new`, if the racks stay as spread.
    fn replace(&self, target: &[AgentId], old: AgentId, new: AgentId) -> Option<Vec<AgentId>> {
        let next: Vec<AgentId> = target
            .iter()
            .map(|r| if *r == old { new } else { *r })
            .collect();
        (self.racks(&next) >= self.racks(target)).then_some(next)
    }

    /// The eligible agent with the fewest replicas that may replace `old` in `target`.
    fn replacement(&self, target: &[AgentId], old: AgentId) -> Option<(AgentId, Vec<AgentId>)> {
        let mut candidates: Vec<AgentId> = self
            .eligible
            .iter()
            .copied()
            .filter(|a| !target.contains(a))
            .collect();
        candidates.sort_by_key(|a| (self.replicas.get(a).copied().unwrap_or(0), *a));
        candidates
            .into_iter()
            .find_map(|a| self.replace(target, old, a).map(|t| (a, t)))
    }

    fn moved(&mut self, from: &[AgentId], to: &[AgentId]) {
        for (list, add) in [(from, false), (to, true)] {
            for (i, r) in list.iter().enumerate() {
                let counts = [
                    Some(&mut self.replicas),
                    (i == 0).then_some(&mut self.preferred),
                ];
                for c in counts.into_iter().flatten() {
                    if let Some(n) = c.get_mut(r) {
                        *n = if add { *n + 1 } else { n.saturating_sub(1) };
                    }
                }
            }
        }
    }
}

fn reassign(topic: &TopicInfo, p: &PartitionInfo, target: Vec<AgentId>) -> Command {
    Command::AlterReassignment {
        topic_id: topic.id,
        partition: p.index,
        target: Some(target),
        expected_partition_epoch: Some(p.partition_epoch),
    }
}

/// Pairs of (less loaded, more loaded) agents by `load` that differ by two
/// or more, the widest gaps first (a pair with no partition to move
/// between them must not stop the others).
fn imbalances(load: &BTreeMap<AgentId, usize>) -> Vec<(AgentId, AgentId)> {
    let mut pairs: Vec<(usize, AgentId, AgentId)> = Vec::new();
    for (min, lo) in load {
        for (max, hi) in load {
            if *hi >= lo + 2 {
                pairs.push((hi - lo, *min, *max));
            }
        }
    }
    pairs.sort_by_key(|(gap, min, max)| (std::cmp::Reverse(*gap), *max, *min));
    pairs.into_iter().map(|(_, min, max)| (min, max)).collect()
}

/// Reassignments to start now, at most `max_in_flight` under way in all.
pub fn plan(state: &MetaState, max_in_flight: usize) -> Vec<Command> {
    let eligible: BTreeSet<AgentId> = state
        .agents()
        .filter(|a| !a.fenced && !a.draining)
        .map(|a| a.id)
        .collect();
    let topics: Vec<&Arc<TopicInfo>> = state.topics().collect();
    let partitions = || {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.as_ref(), p)))
    };
    let in_flight = partitions().filter(|(_, p)| p.is_reassigning()).count();
    let mut budget = max_in_flight.saturating_sub(in_flight);
    if budget == 0 || eligible.is_empty() {
        return Vec::new();
    }
    let mut view = View {
        state,
        replicas: eligible.iter().map(|a| (*a, 0)).collect(),
        preferred: eligible.iter().map(|a| (*a, 0)).collect(),
        eligible,
    };
    for (_, p) in partitions() {
        let target = p.target_replicas();
        view.moved(&[], &target);
    }
    let mut out = Vec::new();
    let mut touched: BTreeSet<(uuid::Uuid, i32)> = BTreeSet::new();
    // an agent removed from the cluster is not registered any more
    let draining = |a: &AgentId| state.agent(*a).is_none_or(|a| a.draining);

    // rule 3: empty draining and removed agents
    for (topic, p) in partitions() {
        if budget == 0 {
            break;
        }
        let leaving: Vec<AgentId> = p.replicas.iter().copied().filter(draining).collect();
        let kept: Vec<AgentId> = p
            .replicas
            .iter()
            .copied()
            .filter(|r| !draining(r))
            .collect();
        if leaving.is_empty() || !view.movable(p, &kept) {
            continue;
        }
        let mut target = p.replicas.clone();
        for old in leaving {
            if let Some((_, next)) = view.replacement(&target, old) {
                target = next;
            }
        }
        if target == p.replicas {
            continue;
        }
        view.moved(&p.replicas, &target);
        touched.insert((topic.id, p.index));
        out.push(reassign(topic, p, target));
        budget -= 1;
    }

    // rule 4: even out replicas
    while budget > 0 {
        let mut found = None;
        for (min, max) in imbalances(&view.replicas) {
            let mut pick: Option<(bool, &TopicInfo, &PartitionInfo, Vec<AgentId>)> = None;
            for (topic, p) in partitions() {
                if touched.contains(&(topic.id, p.index))
                    || !p.replicas.contains(&max)
                    || p.replicas.contains(&min)
                    || p.replicas.iter().any(draining)
                {
                    continue;
                }
                let kept: Vec<AgentId> = p.replicas.iter().copied().filter(|r| *r != max).collect();
                if !view.movable(p, &kept) {
                    continue;
                }
                let Some(target) = view.replace(&p.replicas, max, min) else {
                    continue;
                };
                let follower = p.leader != Some(max);
                if pick.as_ref().is_none_or(|(f, ..)| follower && !*f) {
                    pick = Some((follower, topic, p, target));
                }
                if follower {
                    break;
                }
            }
            if let Some((_, topic, p, target)) = pick {
                found = Some((topic, p, target));
                break;
            }
        }
        let Some((topic, p, target)) = found else {
            break;
        };
        view.moved(&p.replicas, &target);
        touched.insert((topic.id, p.index));
        out.push(reassign(topic, p, target));
        budget -= 1;
    }

    // rule 5: even out preferred leaders
    while budget > 0 {
        let pick = imbalances(&view.preferred)
            .into_iter()
            .find_map(|(min, max)| {
                partitions()
                    .find(|(topic, p)| {
                        !touched.contains(&(topic.id, p.index))
                            && p.replicas.first() == Some(&max)
                            && p.isr.contains(&min)
                            && view.movable(p, &p.replicas)
                    })
                    .map(|(topic, p)| (min, topic, p))
            });
        let Some((min, topic, p)) = pick else {
            break;
        };
        let mut target = vec![min];
        target.extend(p.replicas.iter().copied().filter(|r| *r != min));
        view.moved(&p.replicas, &target);
        touched.insert((topic.id, p.index));
        out.push(reassign(topic, p, target));
        budget -= 1;
    }
    out
}

#[cfg(test)]
#[path = "balance_tests.rs"]
mod tests;
