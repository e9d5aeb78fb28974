//! The lease engine: decides when an agent's lease has run out and who takes
//! over the partitions it led.
//!
//! Pure: it reads a [`MetaState`] and how long each agent has been silent
//! (measured by the metastore leader on its own monotonic clock, see
//! [`crate::liveness`]), and returns commands. A small driver on the
//! metastore leader runs it every tick and proposes the commands through
//! Raft, where the state machine re-checks them (so a decision made on a
//! view that has since changed is refused, not applied).
//!
//! The rules, step by step:
//! 1. An agent's lease runs out once it has been silent for longer than
//!    `lease`. No wall clock takes part: the log's heartbeat stamps (from
//!    whichever voter led, on its clock) are not consulted.
//! 2. An agent whose lease ran out is fenced (one `FenceAgent` per agent,
//!    naming the agent's lease generation; refused if a renewal was logged
//!    in between).
//! 3. Partitions are judged against *fenced* agents only, so fencing and
//!    re-electing happen in two steps: the driver plans again right after a
//!    fence is applied. For each partition:
//!    - leader fenced or gone: the first replica (in assignment order) that is
//!      in the ISR and not fenced becomes leader, and the ISR shrinks to its
//!      unfenced members; with no such replica the partition goes offline
//!      (leader `None`) keeping its ISR, so the last leader can come back;
//!    - no leader (offline): as soon as an ISR member is unfenced it is elected;
//!    - leader fine but fenced followers in the ISR: they are removed;
//!    - leader fine, ISR fine, but the preferred replica (the first
//!      assigned; while that agent drains, the first in-sync replica that
//!      does not) is alive, in the ISR and does not lead: it leads again,
//!      so leadership returns to where placement spread it once an agent
//!      that failed is back in sync, and leaves an agent being drained;
//!    - nothing of the above, a reassignment under way, its leader alive
//!      and every target replica in the ISR: it completes
//!      (`CompleteReassignment`, see `state/reassign.rs`).
//!
//!    - a topic durable in object storage (`durability=object-store`) has
//!      no replica copies to be in sync with: its ISR is its live replicas
//!      (fenced ones leave it, returning ones rejoin it), and any of them
//!      may lead, rebuilding the log from object storage first.
//!
//!    Every change bumps the partition epoch; a leader change bumps the leader
//!    epoch, which fences the old leader's writes.

use std::time::Duration;

use crate::command::Command;
use crate::state::MetaState;
use crate::types::AgentId;

/// Commands that bring leases and leadership up to date, given how long
/// each agent has been silent.
pub fn plan(
    state: &MetaState,
    silent_for: impl Fn(AgentId) -> Duration,
    lease: Duration,
) -> Vec<Command> {
    let mut out = Vec::new();
    for a in state.agents().filter(|a| !a.fenced) {
        if silent_for(a.id) > lease {
            out.push(Command::FenceAgent {
                agent_id: a.id,
                observed_generation: Some(a.lease_generation),
                observed_heartbeat_ms: None,
            });
        }
    }
    let live = |a: &AgentId| state.agent(*a).is_some_and(|a| !a.fenced);
    let fencing = fenced_agents(&out);
    let draining = |a: &AgentId| state.agent(*a).is_some_and(|a| a.draining);
    for topic in state.topics() {
        let object_store = crate::topic_config::object_store_durable(&topic.configs);
        for p in &topic.partitions {
            if object_store && p.replicas.iter().any(|a| fencing.contains(a)) {
                // judged once the fence is applied, as the ISR of others is
                continue;
            }
            // a partition durable in object storage has no copies to be in
            // sync with: every live replica may lead it (and rebuilds the
            // log from object storage first), so its ISR is its live replicas
            let live_isr: Vec<AgentId> = if object_store {
                p.replicas.iter().copied().filter(live).collect()
            } else {
                p.isr.iter().copied().filter(live).collect()
            };
            let leader_ok = p.leader.is_some_and(|l| live(&l));
            let next = if leader_ok {
                if live_isr != p.isr {
                    Some((p.leader, live_isr))
                } else {
                    // leadership goes back to the preferred replica (the
                    // first assigned) once it is alive and in sync again,
                    // and leaves a draining agent for one that is not
                    let preferred = match p.replicas.first() {
                        Some(first) if !draining(first) => Some(*first),
                        _ => p
                            .replicas
                            .iter()
                            .copied()
                            .find(|a| live_isr.contains(a) && !draining(a)),
                    };
                    preferred
                        .filter(|&pref| Some(pref) != p.leader && live_isr.contains(&pref))
                        .map(|pref| (Some(pref), live_isr))
                }
            } else {
                let successor = p.replicas.iter().copied().find(|a| live_isr.contains(a));
                match successor {
                    Some(s) => Some((Some(s), live_isr)),
                    None if p.leader.is_some() => Some((None, p.isr.clone())),
                    None => None,
                }
            };
            if let Some((leader, isr)) = next {
                out.push(Command::ReassignLeadership {
                    topic_id: topic.id,
                    partition: p.index,
                    expected_partition_epoch: p.partition_epoch,
                    leader,
                    isr,
                });
            } else if leader_ok && p.is_reassigning() {
                let target = p.target_replicas();
                if target.iter().all(|r| p.isr.contains(r)) && target.iter().any(live) {
                    out.push(Command::CompleteReassignment {
                        topic_id: topic.id,
                        partition: p.index,
                        expected_partition_epoch: p.partition_epoch,
                    });
                }
            }
        }
    }
    out
}

/// Why `cmd`, one of [`plan`]'s commands for `state`, changes what it
/// changes, for the log; `None` for a command `plan` does not make or a
/// partition `state` does not hold.
pub fn reason(
    state: &MetaState,
    cmd: &Command,
    silent_for: impl Fn(AgentId) -> Duration,
    lease: Duration,
) -> Option<String> {
    let partition = |topic_id, index| {
        let topic = state.topic_by_id(topic_id)?;
        let p = topic.partitions.iter().find(|p| p.index == index)?;
        Some((format!("{}-{index}", topic.name), p))
    };
    let fenced = |a: AgentId| state.agent(a).is_none_or(|a| a.fenced);
    let draining = |a: AgentId| state.agent(a).is_some_and(|a| a.draining);
    match cmd {
        Command::FenceAgent { agent_id, .. } => Some(format!(
            "agent {agent_id} fenced: silent for {} ms, longer than its {} ms lease",
            silent_for(*agent_id).as_millis(),
            lease.as_millis()
        )),
        Command::ReassignLeadership {
            topic_id,
            partition: index,
            leader,
            isr,
            ..
        } => {
            let (name, p) = partition(*topic_id, *index)?;
            let object_store = state
                .topic_by_id(*topic_id)
                .is_some_and(|t| crate::topic_config::object_store_durable(&t.configs));
            Some(match (p.leader, *leader) {
                (old, new) if old == new && object_store => format!(
                    "partition {name} (durable in object storage): its live replicas {isr:?} \
                     may lead it"
                ),
                (old, new) if old == new => {
                    let left: Vec<AgentId> =
                        p.isr.iter().copied().filter(|a| !isr.contains(a)).collect();
                    format!("partition {name}: fenced agents {left:?} leave the ISR, now {isr:?}")
                }
                (Some(old), None) => format!(
                    "partition {name} offline: its leader {old} is fenced and no other in-sync \
                     replica is live; the ISR {isr:?} is kept for the last leader to return"
                ),
                (None, Some(new)) => format!(
                    "partition {name}: agent {new}, in sync and live again, leads it after it \
                     was offline"
                ),
                (Some(old), Some(new)) if fenced(old) => format!(
                    "partition {name}: leader {old} -> {new}, because agent {old} is fenced; \
                     ISR now {isr:?}"
                ),
                (Some(old), Some(new)) if draining(old) => format!(
                    "partition {name}: leader {old} -> {new}, because agent {old} is draining"
                ),
                (Some(old), Some(new)) => format!(
                    "partition {name}: leader {old} -> {new}, its preferred replica, in sync \
                     again"
                ),
                (None, None) => return None,
            })
        }
        Command::CompleteReassignment {
            topic_id,
            partition: index,
            ..
        } => {
            let (name, p) = partition(*topic_id, *index)?;
            Some(format!(
                "partition {name}: its reassignment completes, every target replica {:?} \
                 being in sync",
                p.target_replicas()
            ))
        }
        _ => None,
    }
}

/// The agents a plan fences; when there are any, the driver plans again
/// once the fences are applied.
pub fn fenced_agents(plan: &[Command]) -> Vec<AgentId> {
    plan.iter()
        .filter_map(|c| match c {
            Command::FenceAgent { agent_id, .. } => Some(*agent_id),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
