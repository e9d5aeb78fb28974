//! Consumer group committed offsets.
//!
//! Group membership and rebalancing live in the data plane's coordinator;
//! the metastore keeps only what must survive it: the committed positions.
//! A coordinator's writes carry the fence of the group's coordinator slot,
//! checked before these run (`state/coordinators.rs`).

use std::sync::Arc;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{CommittedOffset, MetaEvent, OffsetCommit};

/// Kafka's default `offset.metadata.max.bytes`.
pub const MAX_OFFSET_METADATA_BYTES: usize = 4096;

impl MetaState {
    pub(super) fn check_offset(&self, c: &OffsetCommit) -> Result<(), MetaError> {
        let topic = self
            .topic(&c.topic)
            .ok_or_else(|| MetaError::UnknownTopic {
                name: c.topic.clone(),
            })?;
        if topic.partition(c.partition).is_none() {
            return Err(MetaError::UnknownPartition {
                topic: c.topic.clone(),
                partition: c.partition,
            });
        }
        let len = c.metadata.as_ref().map_or(0, String::len);
        if len > MAX_OFFSET_METADATA_BYTES {
            return Err(MetaError::OffsetMetadataTooLarge {
                len,
                max: MAX_OFFSET_METADATA_BYTES,
            });
        }
        Ok(())
    }

    pub(super) fn commit_offsets(
        &mut self,
        now_ms: i64,
        group: String,
        offsets: Vec<OffsetCommit>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        if group.is_empty() {
            return Err(MetaError::InvalidGroupId {
                reason: "the group id is empty".to_owned(),
            });
        }
        let checks: Vec<Result<(), MetaError>> =
            offsets.iter().map(|c| self.check_offset(c)).collect();
        if checks.iter().any(Result::is_ok) {
            let entry = Arc::make_mut(self.groups.entry(group.clone()).or_default());
            for (c, check) in offsets.into_iter().zip(&checks) {
                if check.is_ok() {
                    let commit_time_ms = if c.commit_time_ms <= 0 {
                        now_ms
                    } else {
                        c.commit_time_ms
                    };
                    entry.entry(c.topic).or_default().insert(
                        c.partition,
                        CommittedOffset {
                            offset: c.offset,
                            leader_epoch: c.leader_epoch,
                            metadata: c.metadata,
                            commit_time_ms,
                        },
                    );
                }
            }
            events.push(MetaEvent::OffsetsCommitted { group });
        }
        Ok(CommandOutput::OffsetResults(checks))
    }

    pub(super) fn delete_group(
        &mut self,
        group: &str,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        if self.groups.remove(group).is_none() {
            return Err(MetaError::GroupIdNotFound {
                group: group.to_owned(),
            });
        }
        events.push(MetaEvent::GroupDeleted {
            group: group.to_owned(),
        });
        Ok(CommandOutput::Done)
    }

    pub(super) fn delete_offsets(
        &mut self,
        group: &str,
        partitions: &[(String, i32)],
    ) -> CommandResult {
        let offsets = self
            .groups
            .get_mut(group)
            .map(Arc::make_mut)
            .ok_or_else(|| MetaError::GroupIdNotFound {
                group: group.to_owned(),
            })?;
        let mut removed = 0;
        for (topic, partition) in partitions {
            if let Some(parts) = offsets.get_mut(topic) {
                removed += usize::from(parts.remove(partition).is_some());
                if parts.is_empty() {
                    offsets.remove(topic);
                }
            }
        }
        if offsets.is_empty() {
            self.groups.remove(group);
        }
        Ok(CommandOutput::Count(removed))
    }
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
