//! Agents and partition leadership: registration, heartbeats, fencing,
//! elections and ISR changes.
//!
//! A partition's lease is its leader agent's lease: one heartbeat keeps all
//! of an agent's partitions (as KRaft's broker session does). Deciding *when*
//! a lease ran out needs a clock and lives in [`crate::lease`]; this module
//! only checks that the decision is still valid when it is applied (no
//! renewal was logged since: the agent's `lease_generation`).

use std::collections::BTreeSet;

use uuid::Uuid;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{
    AgentId, AgentInfo, AgentRegistration, ElectionType, LeaderAndEpoch, MetaEvent, PartitionInfo,
};

/// Kafka clients carry broker ids as `i32`.
pub const MAX_AGENT_ID: AgentId = i32::MAX as AgentId;

impl MetaState {
    pub(crate) fn is_live(&self, agent: AgentId) -> bool {
        self.agents.get(&agent).is_some_and(|a| !a.fenced)
    }

    pub(super) fn register_agent(
        &mut self,
        now_ms: i64,
        reg: AgentRegistration,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        if reg.id > MAX_AGENT_ID {
            return Err(MetaError::invalid_request(format!(
                "agent id {} does not fit a Kafka broker id",
                reg.id
            )));
        }
        self.check_not_duplicate(&reg)?;
        let info = match self.agents.get_mut(&reg.id) {
            Some(a) => {
                a.instance = reg.instance;
                a.addrs = reg.addrs;
                a.rack = reg.rack;
                a.registered_ms = now_ms;
                a.last_heartbeat_ms = now_ms;
                a.fenced = false;
                a.shut_down = false;
                a.incarnation += 1;
                a.lease_generation += 1;
                a.clone()
            }
            None => {
                let a = AgentInfo {
                    id: reg.id,
                    addrs: reg.addrs,
                    rack: reg.rack,
                    registered_ms: now_ms,
                    last_heartbeat_ms: now_ms,
                    fenced: false,
                    incarnation: 1,
                    draining: false,
                    instance: reg.instance,
                    lease_generation: 1,
                    shut_down: false,
                };
                self.agents.insert(reg.id, a.clone());
                a
            }
        };
        events.push(MetaEvent::AgentRegistered { agent_id: info.id });
        Ok(CommandOutput::Agent(info))
    }

    pub(super) fn heartbeat(
        &mut self,
        now_ms: i64,
        agent_id: AgentId,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let a = self
            .agents
            .get_mut(&agent_id)
            .ok_or(MetaError::UnknownAgent { agent_id })?;
        a.last_heartbeat_ms = a.last_heartbeat_ms.max(now_ms);
        a.lease_generation += 1;
        if a.fenced {
            a.fenced = false;
            a.shut_down = false;
            events.push(MetaEvent::AgentUnfenced { agent_id });
        }
        Ok(CommandOutput::Done)
    }

    /// `observed` is the lease generation the decision saw, or in entries
    /// logged before generations the heartbeat stamp it saw.
    pub(super) fn fence_agent(
        &mut self,
        agent_id: AgentId,
        observed: (Option<u64>, Option<i64>),
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let a = self
            .agents
            .get_mut(&agent_id)
            .ok_or(MetaError::UnknownAgent { agent_id })?;
        let renewed_since = match observed {
            (Some(generation), _) => a.lease_generation != generation,
            (None, Some(stamp)) => a.last_heartbeat_ms != stamp,
            (None, None) => {
                return Err(MetaError::invalid_request(format!(
                    "a fence of agent {agent_id} must name the lease generation it judged"
                )))
            }
        };
        if renewed_since {
            return Err(MetaError::StaleRequest {
                reason: format!("agent {agent_id} renewed its lease after it was judged expired"),
            });
        }
        if !a.fenced {
            a.fenced = true;
            events.push(MetaEvent::AgentFenced { agent_id });
        }
        Ok(CommandOutput::Done)
    }

    pub(super) fn partition_mut(
        &mut self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<(String, &mut PartitionInfo), MetaError> {
        let topic = self.topic_mut_by_id(topic_id)?;
        let name = topic.name.clone();
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| topic.partitions.get_mut(i));
        match p {
            Some(p) => Ok((name, p)),
            None => Err(MetaError::UnknownPartition {
                topic: name,
                partition,
            }),
        }
    }

    /// Validates an ISR against a partition's replicas; returns it unchanged.
    fn check_isr(&self, topic: &str, p: &PartitionInfo, isr: &[AgentId]) -> Result<(), MetaError> {
        let bad = |reason: String| {
            Err(MetaError::IneligibleReplica {
                topic: topic.to_owned(),
                partition: p.index,
                reason,
            })
        };
        if isr.is_empty() {
            return bad("the ISR may not be empty".to_owned());
        }
        let distinct: BTreeSet<_> = isr.iter().collect();
        if distinct.len() != isr.len() {
            return bad("the ISR lists an agent twice".to_owned());
        }
        if let Some(a) = isr.iter().find(|a| !p.replicas.contains(a)) {
            return bad(format!("agent {a} is not a replica"));
        }
        Ok(())
    }

    pub(super) fn set_leadership(
        topic_id: Uuid,
        topic: &str,
        p: &mut PartitionInfo,
        leader: Option<AgentId>,
        isr: Vec<AgentId>,
        events: &mut Vec<MetaEvent>,
    ) -> LeaderAndEpoch {
        let leader_changed = p.leader != leader;
        let isr_changed = p.isr != isr;
        if leader_changed {
            p.leader = leader;
            p.leader_epoch += 1;
            events.push(MetaEvent::LeaderChanged {
                topic_id,
                topic: topic.to_owned(),
                partition: p.index,
                leader,
                leader_epoch: p.leader_epoch,
            });
        }
        if isr_changed {
            p.isr = isr;
            events.push(MetaEvent::IsrChanged {
                topic_id,
                topic: topic.to_owned(),
                partition: p.index,
                isr: p.isr.clone(),
            });
        }
        if leader_changed || isr_changed {
            p.partition_epoch += 1;
        }
        LeaderAndEpoch {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
        }
    }

    pub(super) fn elect_leader(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        election: ElectionType,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let live: BTreeSet<AgentId> = self.live_agents().into_iter().collect();
        let (topic, p) = self.partition_mut(topic_id, partition)?;
        let not_needed = || {
            Err(MetaError::ElectionNotNeeded {
                topic: topic.clone(),
                partition,
            })
        };
        let unavailable = |reason: String| {
            Err(MetaError::EligibleLeadersNotAvailable {
                topic: topic.clone(),
                partition,
                reason,
            })
        };
        let (leader, isr) = match election {
            ElectionType::Preferred => {
                let preferred = p.replicas[0];
                if p.leader == Some(preferred) {
                    return not_needed();
                }
                if !live.contains(&preferred) || !p.isr.contains(&preferred) {
                    return unavailable(format!(
                        "preferred replica {preferred} is not alive and in sync"
                    ));
                }
                (preferred, p.isr.clone())
            }
            ElectionType::Unclean => {
                if p.leader.is_some_and(|l| live.contains(&l)) {
                    return not_needed();
                }
                let in_sync = p
                    .replicas
                    .iter()
                    .copied()
                    .find(|a| live.contains(a) && p.isr.contains(a));
                match in_sync {
                    Some(a) => (a, p.isr.clone()),
                    None => match p.replicas.iter().copied().find(|a| live.contains(a)) {
                        Some(a) => (a, vec![a]),
                        None => return unavailable("no replica is alive".to_owned()),
                    },
                }
            }
        };
        let out = Self::set_leadership(topic_id, &topic, p, Some(leader), isr, events);
        Ok(CommandOutput::Leader(out))
    }

    pub(super) fn reassign_leadership(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        expected_partition_epoch: i32,
        leader: Option<AgentId>,
        isr: Vec<AgentId>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let leader_live = leader.is_none_or(|l| self.is_live(l));
        let snapshot = {
            let (topic, p) = self.partition_mut(topic_id, partition)?;
            (topic, p.clone())
        };
        let (topic, current) = snapshot;
        if current.partition_epoch != expected_partition_epoch {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "{topic}-{partition} moved to partition epoch {} since epoch {expected_partition_epoch} was observed",
                    current.partition_epoch
                ),
            });
        }
        self.check_isr(&topic, &current, &isr)?;
        if let Some(l) = leader {
            if !isr.contains(&l) || !leader_live {
                return Err(MetaError::IneligibleReplica {
                    topic,
                    partition,
                    reason: format!("new leader {l} must be alive and in the ISR"),
                });
            }
        }
        let (topic, p) = self.partition_mut(topic_id, partition)?;
        let out = Self::set_leadership(topic_id, &topic, p, leader, isr, events);
        Ok(CommandOutput::Leader(out))
    }

    /// `by` is the proposing leader, its leader epoch and the partition
    /// epoch it last saw (`None` in log entries from before that was sent).
    pub(super) fn alter_isr(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        by: (AgentId, i32, Option<i32>),
        isr: Vec<AgentId>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let (leader, leader_epoch, expected_partition_epoch) = by;
        let live: BTreeSet<AgentId> = self.live_agents().into_iter().collect();
        let (topic, current) = {
            let (topic, p) = self.partition_mut(topic_id, partition)?;
            (topic, p.clone())
        };
        if current.leader != Some(leader) {
            return Err(MetaError::NotPartitionLeader {
                topic,
                partition,
                agent_id: leader,
            });
        }
        if leader_epoch != current.leader_epoch {
            return Err(MetaError::FencedLeaderEpoch {
                topic,
                partition,
                given: leader_epoch,
                current: current.leader_epoch,
            });
        }
        // the leader counted the ISR of this epoch (plus its own pending
        // change); any change since, such as the lease engine dropping a
        // fenced follower, makes its proposal stale
        if let Some(seen) = expected_partition_epoch {
            if seen != current.partition_epoch {
                return Err(MetaError::StaleRequest {
                    reason: format!(
                        "{topic}-{partition} moved to partition epoch {} since the leader proposed its ISR at epoch {seen}",
                        current.partition_epoch
                    ),
                });
            }
        }
        self.check_isr(&topic, &current, &isr)?;
        if !isr.contains(&leader) {
            return Err(MetaError::IneligibleReplica {
                topic,
                partition,
                reason: "the leader must stay in the ISR".into(),
            });
        }
        if let Some(a) = isr
            .iter()
            .find(|a| !current.isr.contains(a) && !live.contains(a))
        {
            return Err(MetaError::IneligibleReplica {
                topic,
                partition,
                reason: format!("agent {a} holds no lease and cannot join the ISR"),
            });
        }
        let (topic, p) = self.partition_mut(topic_id, partition)?;
        let out = Self::set_leadership(topic_id, &topic, p, Some(leader), isr, events);
        Ok(CommandOutput::Leader(out))
    }

    pub(super) fn checkpoint_high_watermarks(
        &mut self,
        entries: &[(Uuid, i32, i64)],
    ) -> CommandOutput {
        let mut changed = 0;
        for &(topic_id, partition, hw) in entries {
            if let Ok((_, p)) = self.partition_mut(topic_id, partition) {
                if hw > p.high_watermark {
                    p.high_watermark = hw;
                    changed += 1;
                }
            }
        }
        CommandOutput::Count(changed)
    }
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;
