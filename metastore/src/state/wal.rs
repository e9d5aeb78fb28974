//! Write-ahead ranges of partitions durable in object storage
//! (`durability=object-store`).
//!
//! The leader of such a partition acknowledges an acks=all write once the
//! write-ahead object holding its batches is in object storage and the
//! range is recorded here. A range is kept until manifest entries serve
//! its offsets (the leader's sealed segments went up), retention or
//! DeleteRecords passed it, or the topic is deleted; a new leader reads the
//! ranges above the manifest back to rebuild the log's tail.
//!
//! Invariant: one partition's ranges follow each other without gaps or
//! overlaps, in offset order. Only the partition's current leader appends
//! (a range naming a passed leader epoch is refused), and appending the
//! same range twice is a no-op, so a writer may retry after a timeout.

use std::sync::Arc;

use uuid::Uuid;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{WalAppend, WalRange};

impl MetaState {
    /// The write-ahead ranges recorded for a partition, in offset order.
    pub fn wal_ranges(&self, topic_id: Uuid, partition: i32) -> &[WalRange] {
        self.wal
            .get(&topic_id)
            .and_then(|p| p.get(&partition))
            .map(|ranges| ranges.as_slice())
            .unwrap_or(&[])
    }

    /// The write-ahead objects some recorded range reads from.
    pub fn wal_objects(&self) -> std::collections::BTreeSet<String> {
        self.wal
            .values()
            .flat_map(|partitions| partitions.values())
            .flat_map(|list| list.iter())
            .map(|r| r.key.clone())
            .collect()
    }

    /// Records each append on its own: one result per append, in order.
    pub(super) fn append_wal(&mut self, appends: Vec<WalAppend>) -> CommandResult {
        let results = appends
            .into_iter()
            .map(|a| self.append_wal_range(a.topic_id, a.partition, a.range))
            .collect();
        Ok(CommandOutput::WalResults(results))
    }

    fn append_wal_range(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        range: WalRange,
    ) -> Result<(), MetaError> {
        self.check_partition(topic_id, partition)?;
        if range.key.is_empty()
            || range.base_offset < 0
            || range.last_offset < range.base_offset
            || range.len == 0
        {
            return Err(MetaError::invalid_request(format!(
                "write-ahead range [{}..={}] of '{}' is malformed",
                range.base_offset, range.last_offset, range.key
            )));
        }
        let list = self.wal_ranges(topic_id, partition);
        if list.contains(&range) {
            return Ok(());
        }
        self.check_leader_epoch(topic_id, partition, Some(range.leader_epoch))?;
        if let Some(last) = list.last() {
            if range.base_offset != last.last_offset.saturating_add(1) {
                return Err(MetaError::StaleRequest {
                    reason: format!(
                        "write-ahead range [{}..={}] does not follow the recorded end {}",
                        range.base_offset, range.last_offset, last.last_offset
                    ),
                });
            }
        }
        let list = self
            .wal
            .entry(topic_id)
            .or_default()
            .entry(partition)
            .or_default();
        Arc::make_mut(list).push(range);
        self.prune_wal(topic_id, partition);
        Ok(())
    }

    /// Drops the partition's ranges whose offsets manifest entries now
    /// serve contiguously, or which lie below the manifest's start
    /// (retention, DeleteRecords).
    pub(super) fn prune_wal(&mut self, topic_id: Uuid, partition: i32) {
        let Some(first) = self.wal_ranges(topic_id, partition).first() else {
            return;
        };
        let mut covered = first.base_offset;
        for e in self.segments(topic_id, partition) {
            if e.first_served() <= covered && e.last_offset >= covered {
                covered = e.last_offset.saturating_add(1);
            }
        }
        if let Some(start) = self.manifest_start(topic_id, partition) {
            covered = covered.max(start);
        }
        let Some(partitions) = self.wal.get_mut(&topic_id) else {
            return;
        };
        if let Some(list) = partitions.get_mut(&partition) {
            let keep_from = list.partition_point(|r| r.last_offset < covered);
            if keep_from > 0 {
                Arc::make_mut(list).drain(..keep_from);
            }
            if list.is_empty() {
                partitions.remove(&partition);
            }
        }
        if partitions.is_empty() {
            self.wal.remove(&topic_id);
        }
    }
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
