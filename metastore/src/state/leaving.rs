//! Agents that leave: a controlled shutdown hands leadership over before
//! the agent stops, and an operator removes an agent that failed for good.
//!
//! Controlled shutdown (Kafka's), step by step:
//! 1. The agent stops heartbeating, then proposes `ShutdownAgent`.
//! 2. Applying it fences the agent (so the lease engine neither elects it
//!    nor keeps it in an ISR, as if its lease had run out) and, in the same
//!    step, gives every partition it leads to the first replica, in
//!    assignment order, that is alive and in the ISR: a new leader epoch
//!    (which fences the old leader's writes) and the ISR without the agent.
//!    Only an in-sync replica leads, so the new leader holds every record
//!    the high watermark counted: nothing acknowledged is lost.
//! 3. It also leaves the ISR of the partitions it follows, so their leaders
//!    stop waiting for it before acknowledging acks=all writes.
//! 4. A partition whose ISR has no other live member stays led by the
//!    agent (Kafka does the same); it goes offline when the agent closes,
//!    and returns with it.
//!
//! The agent restarting registers (or heartbeats) and is unfenced as after
//! any fence; once back in sync the lease engine returns the leadership of
//! partitions that prefer it.
//!
//! Removal: a fenced agent leaves the agent list. Its replicas stay in the
//! partitions' assignments until the balancer replaces each of them in
//! place (`balance.rs`, as for a draining agent); the lease engine drops it
//! from ISRs whose leader is alive. A partition whose only in-sync replica
//! was the removed agent stays offline (unclean election is off).

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{AgentId, AgentRegistration, MetaEvent};

impl MetaState {
    /// Refuses `reg` when another process holds the lease of its id: the
    /// agent is registered, not fenced, and its last registration came
    /// from another instance. The same instance (a restart with the same
    /// data folder) and any registration after a fence pass.
    pub(super) fn check_not_duplicate(&self, reg: &AgentRegistration) -> Result<(), MetaError> {
        let Some(a) = self.agents.get(&reg.id) else {
            return Ok(());
        };
        match (a.instance, reg.instance) {
            (Some(running), Some(new)) if running != new && !a.fenced => {
                Err(MetaError::DuplicateAgent {
                    agent_id: reg.id,
                    addr: a
                        .addrs
                        .quic
                        .clone()
                        .or_else(|| a.addrs.kafka.clone())
                        .unwrap_or_else(|| "an unknown address".to_owned()),
                })
            }
            _ => Ok(()),
        }
    }

    pub(super) fn shutdown_agent(
        &mut self,
        agent_id: AgentId,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let a = self
            .agents
            .get_mut(&agent_id)
            .ok_or(MetaError::UnknownAgent { agent_id })?;
        a.shut_down = true;
        if !a.fenced {
            a.fenced = true;
            events.push(MetaEvent::AgentFenced { agent_id });
        }
        let mut changes = Vec::new();
        for topic in self.topics.values() {
            for p in &topic.partitions {
                if !p.isr.contains(&agent_id) && p.leader != Some(agent_id) {
                    continue;
                }
                let isr: Vec<AgentId> = p.isr.iter().copied().filter(|r| *r != agent_id).collect();
                let leader = if p.leader == Some(agent_id) {
                    let next = p
                        .replicas
                        .iter()
                        .copied()
                        .find(|r| isr.contains(r) && self.is_live(*r));
                    match next {
                        Some(n) => Some(n),
                        // no one to hand it to: it stays, and closes with the agent
                        None => continue,
                    }
                } else if p.leader.is_some_and(|l| self.is_live(l)) && !isr.is_empty() {
                    p.leader
                } else {
                    // offline, or its leader failed too: the lease engine
                    // decides, and keeps the ISR its members can come back to
                    continue;
                };
                changes.push((topic.id, p.index, leader, isr));
            }
        }
        let mut moved = 0;
        for (topic_id, partition, leader, isr) in changes {
            let (topic, p) = self.partition_mut(topic_id, partition)?;
            moved += usize::from(p.leader != leader);
            Self::set_leadership(topic_id, &topic, p, leader, isr, events);
        }
        Ok(CommandOutput::Count(moved))
    }

    pub(super) fn remove_agent(
        &mut self,
        agent_id: AgentId,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let a = self
            .agents
            .get(&agent_id)
            .ok_or(MetaError::UnknownAgent { agent_id })?;
        if !a.fenced {
            return Err(MetaError::AgentAlive { agent_id });
        }
        self.agents.remove(&agent_id);
        events.push(MetaEvent::AgentRemoved { agent_id });
        Ok(CommandOutput::Done)
    }
}

#[cfg(test)]
#[path = "leaving_tests.rs"]
mod tests;
