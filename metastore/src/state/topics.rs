//! Topics: create, delete, add partitions, change configs, assign replicas.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::topic_config::{self, validate_topic_name};
use crate::types::{
    AgentId, ConfigOp, CreateTopic, DeletedTopic, MetaEvent, PartitionInfo, SegmentEntry, TopicInfo,
};

/// Upper bound on partitions per topic: keeps a single request from making
/// the metastore allocate without limit.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 100_000;

/// Replication factor used for `-1` when enough agents are alive.
const DEFAULT_REPLICATION_FACTOR: usize = 3;

/// Kafka metric names turn '.' into '_', so two topics differing only there collide.
fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

fn new_partition(index: i32, replicas: Vec<AgentId>, leader: Option<AgentId>) -> PartitionInfo {
    PartitionInfo {
        index,
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        isr: replicas.clone(),
        replicas,
        high_watermark: -1,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}

impl MetaState {
    /// Agents that hold a lease, by id.
    pub(crate) fn live_agents(&self) -> Vec<AgentId> {
        self.agents
            .values()
            .filter(|a| !a.fenced)
            .map(|a| a.id)
            .collect()
    }

    /// Agents that take new replicas: live and not draining, by id.
    pub(crate) fn placeable_agents(&self) -> Vec<AgentId> {
        self.agents
            .values()
            .filter(|a| !a.fenced && !a.draining)
            .map(|a| a.id)
            .collect()
    }

    /// The placeable agents in the order replicas are handed out: by id,
    /// or, when agents name their racks (zones), taking one agent of each
    /// rack in turn (racks by name, agents by id within a rack), so that
    /// consecutive agents, and so a partition's replicas, sit in different
    /// racks as far as there are racks (Kafka's rack-aware assignment).
    fn placement_order(&self) -> Vec<AgentId> {
        let live = self.placeable_agents();
        let rack_of = |id: &AgentId| self.agents.get(id).and_then(|a| a.rack.clone());
        if live.iter().all(|id| rack_of(id).is_none()) {
            return live;
        }
        let mut by_rack: BTreeMap<String, std::collections::VecDeque<AgentId>> = BTreeMap::new();
        for id in &live {
            by_rack
                .entry(rack_of(id).unwrap_or_default())
                .or_default()
                .push_back(*id);
        }
        let mut order = Vec::with_capacity(live.len());
        while order.len() < live.len() {
            for agents in by_rack.values_mut() {
                if let Some(id) = agents.pop_front() {
                    order.push(id);
                }
            }
        }
        order
    }

    /// Round-robin placement over live agents (in [`Self::placement_order`]),
    /// continuing from the cursor so that leaders spread across topics.
    fn assign(
        &self,
        partitions: std::ops::Range<i32>,
        rf: usize,
    ) -> Result<Vec<Vec<AgentId>>, MetaError> {
        let live = self.placement_order();
        if rf == 0 || rf > live.len() {
            return Err(MetaError::InvalidReplicationFactor {
                reason: format!(
                    "replication factor {rf} needs that many live agents that are not draining; there are {}",
                    live.len()
                ),
            });
        }
        let n = live.len();
        let start = usize::try_from(self.assignment_cursor % n as u64).unwrap_or(0);
        Ok(partitions
            .map(|p| {
                let p = usize::try_from(p).unwrap_or(0);
                (0..rf).map(|j| live[(start + p + j) % n]).collect()
            })
            .collect())
    }

    fn check_assignments(&self, assignments: &[Vec<AgentId>]) -> Result<(), MetaError> {
        let bad = |reason: String| Err(MetaError::InvalidReplicaAssignment { reason });
        if assignments.len() > MAX_PARTITIONS_PER_TOPIC as usize {
            return bad(format!("more than {MAX_PARTITIONS_PER_TOPIC} partitions"));
        }
        let rf = assignments[0].len();
        for (p, replicas) in assignments.iter().enumerate() {
            if replicas.is_empty() {
                return bad(format!("partition {p} has no replicas"));
            }
            if replicas.len() != rf {
                return bad("all partitions must have the same number of replicas".to_owned());
            }
            let distinct: BTreeSet<_> = replicas.iter().collect();
            if distinct.len() != replicas.len() {
                return bad(format!("partition {p} lists an agent twice"));
            }
            if let Some(unknown) = replicas.iter().find(|a| !self.agents.contains_key(a)) {
                return bad(format!("agent {unknown} is not registered"));
            }
        }
        Ok(())
    }

    pub(super) fn create_topic(
        &mut self,
        now_ms: i64,
        id: Uuid,
        spec: CreateTopic,
        validate_only: bool,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        validate_topic_name(&spec.name)?;
        if self.topic_names.contains_key(&spec.name) {
            return Err(MetaError::TopicAlreadyExists { name: spec.name });
        }
        let key = collision_key(&spec.name);
        if let Some(other) = self.topic_names.keys().find(|n| collision_key(n) == key) {
            return Err(MetaError::InvalidTopicName {
                name: spec.name.clone(),
                reason: format!(
                    "collides with topic '{other}' ('.' and '_' are the same in metric names)"
                ),
            });
        }
        if self.topics.contains_key(&id) || self.deleted_topics.contains_key(&id) {
            return Err(MetaError::invalid_request(format!(
                "topic id {id} is already used"
            )));
        }
        topic_config::validate_all(&spec.configs)?;

        let assignments = if spec.assignments.is_empty() {
            let count = match spec.partitions {
                -1 => 1,
                n if n < 1 => {
                    return Err(MetaError::InvalidPartitions {
                        reason: format!("a topic needs at least one partition, not {n}"),
                    })
                }
                n if n > MAX_PARTITIONS_PER_TOPIC => {
                    return Err(MetaError::InvalidPartitions {
                        reason: format!(
                            "{n} partitions is more than the limit of {MAX_PARTITIONS_PER_TOPIC}"
                        ),
                    })
                }
                n => n,
            };
            let rf = match spec.replication_factor {
                -1 => self
                    .placeable_agents()
                    .len()
                    .clamp(1, DEFAULT_REPLICATION_FACTOR),
                n if n < 1 => {
                    return Err(MetaError::InvalidReplicationFactor {
                        reason: format!("replication factor must be at least 1, not {n}"),
                    })
                }
                n => usize::try_from(n).unwrap_or(0),
            };
            self.assign(0..count, rf)?
        } else {
            if spec.partitions != -1 || spec.replication_factor != -1 {
                return Err(MetaError::invalid_request(
                    "explicit replica assignments require partitions and replication factor of -1",
                ));
            }
            self.check_assignments(&spec.assignments)?;
            spec.assignments.clone()
        };

        let partitions = assignments
            .into_iter()
            .enumerate()
            .map(|(i, replicas)| {
                let leader = replicas
                    .iter()
                    .copied()
                    .find(|a| self.agents.get(a).is_some_and(|a| !a.fenced));
                new_partition(i32::try_from(i).unwrap_or(i32::MAX), replicas, leader)
            })
            .collect();
        let info = TopicInfo {
            id,
            name: spec.name,
            partitions,
            configs: spec.configs,
            created_ms: now_ms,
        };
        if validate_only {
            return Ok(CommandOutput::Topic(info));
        }
        self.assignment_cursor = self.assignment_cursor.wrapping_add(1);
        self.topic_names.insert(info.name.clone(), id);
        self.topics.insert(id, Arc::new(info.clone()));
        events.push(MetaEvent::TopicCreated {
            id,
            name: info.name.clone(),
        });
        Ok(CommandOutput::Topic(info))
    }

    pub(super) fn delete_topic(
        &mut self,
        now_ms: i64,
        name: &str,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let id = self.topic_id(name)?;
        self.topic_names.remove(name);
        let info = self
            .topics
            .remove(&id)
            .ok_or(MetaError::UnknownTopicId { id })?;
        self.log_starts.remove(&id);
        self.trimmed_below.remove(&id);
        self.wal.remove(&id);
        let segments: BTreeMap<i32, Vec<SegmentEntry>> = self
            .segments
            .remove(&id)
            .unwrap_or_default()
            .into_iter()
            .map(|(p, entries)| (p, Arc::unwrap_or_clone(entries)))
            .collect();
        if segments.values().any(|s| !s.is_empty()) {
            self.deleted_topics.insert(
                id,
                Arc::new(DeletedTopic {
                    id,
                    name: name.to_owned(),
                    deleted_ms: now_ms,
                    segments,
                }),
            );
        }
        // Kafka drops committed offsets of a deleted topic. Only groups that
        // hold some are touched (and copied if a snapshot shares them).
        self.groups.retain(|_, topics| {
            if topics.contains_key(name) {
                Arc::make_mut(topics).remove(name);
            }
            !topics.is_empty()
        });
        events.push(MetaEvent::TopicDeleted {
            id,
            name: name.to_owned(),
        });
        Ok(CommandOutput::Topic(Arc::unwrap_or_clone(info)))
    }

    pub(super) fn create_partitions(
        &mut self,
        name: &str,
        total: i32,
        validate_only: bool,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let id = self.topic_id(name)?;
        let topic = self
            .topics
            .get(&id)
            .ok_or(MetaError::UnknownTopicId { id })?;
        let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        if total <= current {
            let reason = if total == current {
                format!("topic already has {current} partitions")
            } else {
                format!("topic has {current} partitions; partitions cannot be removed (asked for {total})")
            };
            return Err(MetaError::InvalidPartitions { reason });
        }
        if total > MAX_PARTITIONS_PER_TOPIC {
            return Err(MetaError::InvalidPartitions {
                reason: format!(
                    "{total} partitions is more than the limit of {MAX_PARTITIONS_PER_TOPIC}"
                ),
            });
        }
        let rf = topic
            .partitions
            .first()
            .map(|p| p.replicas.len())
            .unwrap_or(1);
        let assignments = self.assign(current..total, rf)?;
        let mut info = TopicInfo::clone(topic);
        for (i, replicas) in (current..total).zip(assignments) {
            let leader = replicas.first().copied();
            info.partitions.push(new_partition(i, replicas, leader));
        }
        if validate_only {
            return Ok(CommandOutput::Topic(info));
        }
        self.assignment_cursor = self.assignment_cursor.wrapping_add(1);
        self.topics.insert(id, Arc::new(info.clone()));
        events.push(MetaEvent::PartitionsCreated {
            id,
            name: name.to_owned(),
            total,
        });
        Ok(CommandOutput::Topic(info))
    }

    pub(super) fn alter_configs(
        &mut self,
        name: &str,
        ops: &[ConfigOp],
        replace_all: bool,
        validate_only: bool,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let id = self.topic_id(name)?;
        let current = self
            .topics
            .get(&id)
            .ok_or(MetaError::UnknownTopicId { id })?;
        let next = topic_config::apply_ops(&current.configs, ops, replace_all)?;
        if topic_config::object_store_durable(&next)
            != topic_config::object_store_durable(&current.configs)
        {
            // the other replicas of a replicated topic hold what object
            // storage does not, and those of an object-store one hold nothing
            return Err(MetaError::InvalidConfig {
                key: "durability".to_owned(),
                reason: "durability is chosen when the topic is created and cannot change"
                    .to_owned(),
            });
        }
        if validate_only || next == current.configs {
            let mut preview = TopicInfo::clone(current);
            preview.configs = next;
            return Ok(CommandOutput::Topic(preview));
        }
        let topic = self.topic_mut_by_id(id)?;
        topic.configs = next;
        events.push(MetaEvent::ConfigChanged {
            id,
            name: name.to_owned(),
        });
        Ok(CommandOutput::Topic(topic.clone()))
    }
}

#[cfg(test)]
#[path = "topics_tests.rs"]
mod tests;
