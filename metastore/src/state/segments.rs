//! Tiered segment manifests: which sealed objects hold which offsets.
//!
//! Invariant: the offsets the entries of one partition *serve*
//! (`first_served..=last_offset`) never overlap, and entries are kept sorted
//! by them. An object may hold offsets below the first it serves (a new
//! leader's segment straddling the end of what an earlier leader committed);
//! those are served by the earlier entry, so no offset is ever answered from
//! two objects. Committing the same entry twice is a no-op, so an uploader
//! may retry after a timeout without checking first.
//!
//! An entry may give way to another serving exactly the same offsets (a
//! compacted copy of the segment under new keys): the swap is in place, so
//! the invariant holds throughout, and the caller deletes the old objects
//! once readers that looked up the old entry are done.
//!
//! Only the partition's current leader adds or replaces entries: a commit that names
//! a leader epoch the partition has passed is refused, and so is an entry
//! wholly below the partition's log start (where retention trimmed the
//! manifest, or DeleteRecords' floor), which a deposed leader's late commit
//! would otherwise put back, moving the log start down again.

use std::sync::Arc;

use uuid::Uuid;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{MetaEvent, SegmentEntry};

impl MetaState {
    pub(super) fn check_partition(&self, topic_id: Uuid, partition: i32) -> Result<(), MetaError> {
        let topic = self
            .topics
            .get(&topic_id)
            .ok_or(MetaError::UnknownTopicId { id: topic_id })?;
        if topic.partition(partition).is_none() {
            return Err(MetaError::UnknownPartition {
                topic: topic.name.clone(),
                partition,
            });
        }
        Ok(())
    }

    /// The offset below which a partition's manifest takes no entry: the
    /// higher of where retention trimmed it and the DeleteRecords floor.
    pub fn manifest_start(&self, topic_id: Uuid, partition: i32) -> Option<i64> {
        let trimmed = self
            .trimmed_below
            .get(&topic_id)
            .and_then(|p| p.get(&partition))
            .copied();
        trimmed.max(self.log_start(topic_id, partition))
    }

    /// The packed objects that entries of any partition read from.
    pub fn packed_objects(&self) -> std::collections::BTreeSet<String> {
        self.segments
            .values()
            .flat_map(|partitions| partitions.values())
            .flat_map(|list| list.iter())
            .filter_map(|e| e.pack.as_ref().map(|p| p.key.clone()))
            .collect()
    }

    pub(super) fn commit_segment(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        entry: SegmentEntry,
        leader_epoch: Option<i32>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        self.check_partition(topic_id, partition)?;
        let first = entry.first_served();
        if entry.key.is_empty()
            || entry.base_offset < 0
            || entry.last_offset < entry.base_offset
            || !(entry.base_offset..=entry.last_offset).contains(&first)
        {
            return Err(MetaError::invalid_request(format!(
                "segment entry '{}' [{}..={}] serving from {first} is malformed",
                entry.key, entry.base_offset, entry.last_offset
            )));
        }
        let overlap = |reason: String| MetaError::SegmentOverlap {
            key: entry.key.clone(),
            base_offset: entry.base_offset,
            last_offset: entry.last_offset,
            reason,
        };
        let list = self.segments(topic_id, partition);
        if let Some(existing) = list.iter().find(|e| e.key == entry.key) {
            // a retry whose first attempt landed: done, whoever leads now
            if *existing == entry {
                return Ok(CommandOutput::Done);
            }
            return Err(overlap("another entry with this key differs".to_owned()));
        }
        self.check_leader_epoch(topic_id, partition, leader_epoch)?;
        if let Some(start) = self
            .manifest_start(topic_id, partition)
            .filter(|start| entry.last_offset < *start)
        {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "segment '{}' [{}..={}] lies wholly below the partition's log start {start}",
                    entry.key, entry.base_offset, entry.last_offset
                ),
            });
        }
        let list = self.segments(topic_id, partition);
        if let Some(e) = list
            .iter()
            .find(|e| e.first_served() <= entry.last_offset && first <= e.last_offset)
        {
            return Err(overlap(format!(
                "'{}' serves [{}..={}]",
                e.key,
                e.first_served(),
                e.last_offset
            )));
        }
        let at = list.partition_point(|e| e.first_served() < first);
        let list = self
            .segments
            .entry(topic_id)
            .or_default()
            .entry(partition)
            .or_default();
        Arc::make_mut(list).insert(at, entry.clone());
        events.push(MetaEvent::SegmentCommitted {
            topic_id,
            partition,
            entry,
        });
        Ok(CommandOutput::Done)
    }

    /// Refuses a write from a leader whose epoch the partition has passed.
    pub(super) fn check_leader_epoch(
        &self,
        topic_id: Uuid,
        partition: i32,
        leader_epoch: Option<i32>,
    ) -> Result<(), MetaError> {
        let Some(given) = leader_epoch else {
            return Ok(());
        };
        let topic = self.topic_by_id(topic_id);
        let current = topic
            .and_then(|t| t.partition(partition))
            .map(|p| p.leader_epoch);
        if let (Some(topic), Some(current)) = (topic, current) {
            if given < current {
                return Err(MetaError::FencedLeaderEpoch {
                    topic: topic.name.clone(),
                    partition,
                    given,
                    current,
                });
            }
        }
        Ok(())
    }

    pub(super) fn replace_segment(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        old_keys: &[String],
        entry: SegmentEntry,
        leader_epoch: Option<i32>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        self.check_partition(topic_id, partition)?;
        let first = entry.first_served();
        let Some(old_key) = old_keys.first() else {
            return Err(MetaError::invalid_request(format!(
                "segment entry '{}' replaces no entry",
                entry.key
            )));
        };
        if entry.key.is_empty()
            || old_keys.contains(&entry.key)
            || entry.base_offset < 0
            || entry.last_offset < entry.base_offset
            || !(entry.base_offset..=entry.last_offset).contains(&first)
        {
            return Err(MetaError::invalid_request(format!(
                "segment entry '{}' [{}..={}] serving from {first} is malformed or replaces itself",
                entry.key, entry.base_offset, entry.last_offset
            )));
        }
        let list = self.segments(topic_id, partition);
        let found: Vec<Option<usize>> = old_keys
            .iter()
            .map(|k| list.iter().position(|e| e.key == *k))
            .collect();
        if let Some(existing) = list.iter().find(|e| e.key == entry.key) {
            // a retry whose first attempt landed: done, whoever leads now
            if *existing == entry && found.iter().all(Option::is_none) {
                return Ok(CommandOutput::Done);
            }
            return Err(MetaError::SegmentOverlap {
                key: entry.key.clone(),
                base_offset: entry.base_offset,
                last_offset: entry.last_offset,
                reason: "another entry with this key differs".to_owned(),
            });
        }
        self.check_leader_epoch(topic_id, partition, leader_epoch)?;
        let Some(at) = found.first().copied().flatten() else {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "segment '{old_key}' is not in the manifest of partition {partition} of topic {topic_id} (trimmed, or replaced already)"
                ),
            });
        };
        for (i, (key, f)) in old_keys.iter().zip(&found).enumerate() {
            match f {
                Some(p) if *p == at + i => {}
                None => {
                    return Err(MetaError::StaleRequest {
                        reason: format!(
                            "segment '{key}' is not in the manifest of partition {partition} of topic {topic_id} (trimmed, or replaced already)"
                        ),
                    })
                }
                Some(_) => {
                    return Err(MetaError::invalid_request(format!(
                        "segment '{key}' does not follow the entry before it"
                    )))
                }
            }
        }
        let olds = &list[at..at + old_keys.len()];
        if let Some(w) = olds
            .windows(2)
            .find(|w| w[1].first_served() != w[0].last_offset.saturating_add(1))
        {
            return Err(MetaError::invalid_request(format!(
                "segments '{}' and '{}' leave a gap",
                w[0].key, w[1].key
            )));
        }
        let (old_first, old_last) = (olds[0].first_served(), olds[olds.len() - 1].last_offset);
        if old_first != first || old_last != entry.last_offset {
            return Err(MetaError::invalid_request(format!(
                "segment '{}' serves [{first}..={}], not [{old_first}..={old_last}] as '{old_key}'.. do",
                entry.key, entry.last_offset,
            )));
        }
        let n = old_keys.len();
        let list = self
            .segments
            .entry(topic_id)
            .or_default()
            .entry(partition)
            .or_default();
        Arc::make_mut(list).splice(at..at + n, [entry.clone()]);
        events.push(MetaEvent::SegmentReplaced {
            topic_id,
            partition,
            old_key: old_key.clone(),
            merged_keys: old_keys[1..].to_vec(),
            entry,
        });
        Ok(CommandOutput::Done)
    }

    pub(super) fn trim_segments(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        below_offset: i64,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        self.check_partition(topic_id, partition)?;
        let trimmed = self.trimmed_below.entry(topic_id).or_default();
        if trimmed.get(&partition).is_none_or(|t| *t < below_offset) {
            Arc::make_mut(trimmed).insert(partition, below_offset);
        }
        let keep_from = self
            .segments(topic_id, partition)
            .partition_point(|e| e.last_offset < below_offset);
        let removed: Vec<SegmentEntry> = match self
            .segments
            .get_mut(&topic_id)
            .and_then(|p| p.get_mut(&partition))
        {
            Some(list) if keep_from > 0 => Arc::make_mut(list).drain(..keep_from).collect(),
            _ => Vec::new(),
        };
        if !removed.is_empty() {
            events.push(MetaEvent::SegmentsTrimmed {
                topic_id,
                partition,
                removed: removed.len(),
            });
        }
        Ok(CommandOutput::Segments(removed))
    }
}

#[cfg(test)]
#[path = "segments_tests.rs"]
mod tests;
