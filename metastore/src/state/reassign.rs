//! Partition reassignment (Kafka's KIP-455) and draining agents.
//!
//! A reassignment moves a partition from its original replicas to a target
//! list without ever holding fewer copies than before:
//! 1. It begins with replicas = target ∪ original (target first, so the
//!    first target replica is the preferred leader). The replicas the target
//!    adds follow the leader, outside the ISR, and the leader adds each to
//!    the ISR (AlterIsr) once it has caught up.
//! 2. Once every target replica is in the ISR, the lease driver completes it
//!    (`CompleteReassignment`): replicas = target, ISR = ISR ∩ target, and a
//!    leader outside the target hands over to the first target replica in
//!    the ISR that is alive, with a new leader epoch.
//! 3. Cancelling reverts to the original replicas (as in Kafka, in their
//!    current order: the leaving ones after the kept ones); a new target
//!    replaces one under way, measured from the same original replicas.
//!
//! So the last in-sync copy never leaves before its successor is in sync.
//! Deciding *when* to complete needs no clock but a view of many
//! partitions, and lives in [`crate::lease`]; this module checks each step
//! when it is applied.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{AgentId, MetaEvent, PartitionInfo};

/// Most replicas a target may list (a bound on what a client can ask).
pub const MAX_TARGET_REPLICAS: usize = 64;

/// Replicas, adding and removing lists for moving from `original` to `target`.
fn layout(original: &[AgentId], target: &[AgentId]) -> (Vec<AgentId>, Vec<AgentId>, Vec<AgentId>) {
    let adding: Vec<AgentId> = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let removing: Vec<AgentId> = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let mut replicas = target.to_vec();
    replicas.extend(removing.iter().copied());
    (replicas, adding, removing)
}

impl MetaState {
    fn partition(
        &self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<(String, PartitionInfo), MetaError> {
        let topic = self
            .topics
            .get(&topic_id)
            .ok_or(MetaError::UnknownTopicId { id: topic_id })?;
        match topic.partition(partition) {
            Some(p) => Ok((topic.name.clone(), p.clone())),
            None => Err(MetaError::UnknownPartition {
                topic: topic.name.clone(),
                partition,
            }),
        }
    }

    fn check_target(&self, target: &[AgentId]) -> Result<(), MetaError> {
        let bad = |reason: String| Err(MetaError::InvalidReplicaAssignment { reason });
        if target.is_empty() {
            return bad("a reassignment needs at least one replica".to_owned());
        }
        if target.len() > MAX_TARGET_REPLICAS {
            return bad(format!("more than {MAX_TARGET_REPLICAS} replicas"));
        }
        let distinct: BTreeSet<_> = target.iter().collect();
        if distinct.len() != target.len() {
            return bad("the target lists an agent twice".to_owned());
        }
        if let Some(unknown) = target.iter().find(|a| !self.agents.contains_key(a)) {
            return bad(format!("agent {unknown} is not registered"));
        }
        Ok(())
    }

    pub(super) fn alter_reassignment(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        target: Option<Vec<AgentId>>,
        expected_partition_epoch: Option<i32>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let (topic, p) = self.partition(topic_id, partition)?;
        if let Some(expected) = expected_partition_epoch {
            if p.partition_epoch != expected {
                return Err(MetaError::StaleRequest {
                    reason: format!(
                        "{topic}-{partition} moved to partition epoch {} since epoch {expected} was observed",
                        p.partition_epoch
                    ),
                });
            }
        }
        let original = p.original_replicas();
        let target = match target {
            Some(t) => {
                self.check_target(&t)?;
                t
            }
            None if p.is_reassigning() => original.clone(),
            None => return Err(MetaError::NoReassignmentInProgress { topic, partition }),
        };
        let (replicas, adding, removing) = layout(&original, &target);
        self.set_replicas(topic_id, partition, replicas, adding, removing, events)
    }

    pub(super) fn complete_reassignment(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        expected_partition_epoch: i32,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let (topic, p) = self.partition(topic_id, partition)?;
        if p.partition_epoch != expected_partition_epoch {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "{topic}-{partition} moved to partition epoch {} since epoch {expected_partition_epoch} was observed",
                    p.partition_epoch
                ),
            });
        }
        if !p.is_reassigning() {
            return Err(MetaError::NoReassignmentInProgress { topic, partition });
        }
        let target = p.target_replicas();
        if let Some(r) = target.iter().find(|r| !p.isr.contains(r)) {
            return Err(MetaError::StaleRequest {
                reason: format!("{topic}-{partition}: target replica {r} is not in sync yet"),
            });
        }
        self.set_replicas(topic_id, partition, target, Vec::new(), Vec::new(), events)
    }

    /// Sets a partition's replicas; the ISR keeps only its members still
    /// assigned, and a leader no longer assigned hands over to the first
    /// assigned in-sync replica that is alive. Refused when that would
    /// leave the ISR empty or take away the only live leader.
    fn set_replicas(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        replicas: Vec<AgentId>,
        adding: Vec<AgentId>,
        removing: Vec<AgentId>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let (topic, current) = self.partition(topic_id, partition)?;
        let isr: Vec<AgentId> = current
            .isr
            .iter()
            .copied()
            .filter(|r| replicas.contains(r))
            .collect();
        if isr.is_empty() {
            return Err(MetaError::InvalidReplicaAssignment {
                reason: format!("{topic}-{partition}: no replica of the new assignment is in sync"),
            });
        }
        let leader = match current.leader {
            Some(l) if replicas.contains(&l) => Some(l),
            old => {
                let next = replicas
                    .iter()
                    .copied()
                    .find(|r| isr.contains(r) && self.is_live(*r));
                if next.is_none() && old.is_some() {
                    return Err(MetaError::InvalidReplicaAssignment {
                        reason: format!(
                            "{topic}-{partition}: no replica of the new assignment is alive and in sync to lead"
                        ),
                    });
                }
                next
            }
        };
        let (topic, p) = self.partition_mut(topic_id, partition)?;
        let replicas_changed = p.replicas != replicas;
        p.adding_replicas = adding;
        p.removing_replicas = removing;
        if replicas_changed {
            p.replicas = replicas;
            events.push(MetaEvent::ReplicasChanged {
                topic_id,
                topic: topic.clone(),
                partition,
                replicas: p.replicas.clone(),
            });
        }
        let epoch = p.partition_epoch;
        let out = Self::set_leadership(topic_id, &topic, p, leader, isr, events);
        if replicas_changed && p.partition_epoch == epoch {
            // followers and the leader tell assignments apart by this epoch
            p.partition_epoch += 1;
        }
        Ok(CommandOutput::Leader(out))
    }

    pub(super) fn set_agent_draining(
        &mut self,
        agent_id: AgentId,
        draining: bool,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let a = self
            .agents
            .get_mut(&agent_id)
            .ok_or(MetaError::UnknownAgent { agent_id })?;
        if a.draining != draining {
            a.draining = draining;
            events.push(MetaEvent::AgentDraining { agent_id, draining });
        }
        Ok(CommandOutput::Agent(a.clone()))
    }
}

#[cfg(test)]
#[path = "reassign_tests.rs"]
mod tests;
