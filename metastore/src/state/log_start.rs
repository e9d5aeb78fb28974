//! Per-partition log start floors: the offset below which a partition's
//! records are gone for good (Kafka DeleteRecords, and retention).
//!
//! The floor lives here rather than only beside the local log because the
//! local log can be lost (a replaced disk, a set-aside directory) while tiered
//! objects below the floor survive: whoever opens the partition reads the
//! floor back from the metastore. It only rises: raising it to a lower offset
//! is a no-op, so retries and stale callers are harmless.

use std::sync::Arc;

use uuid::Uuid;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::MetaEvent;

impl MetaState {
    pub(super) fn set_log_start(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        self.check_partition(topic_id, partition)?;
        if offset < 0 {
            return Err(MetaError::invalid_request(format!(
                "a log start offset cannot be negative ({offset})"
            )));
        }
        let current = self.log_start(topic_id, partition);
        if current.is_some_and(|c| c >= offset) {
            return Ok(CommandOutput::LogStart(current.unwrap_or(offset)));
        }
        let floors = self.log_starts.entry(topic_id).or_default();
        Arc::make_mut(floors).insert(partition, offset);
        events.push(MetaEvent::LogStartRaised {
            topic_id,
            partition,
            log_start: offset,
        });
        Ok(CommandOutput::LogStart(offset))
    }

    /// The partition's log start floor, if one was ever set.
    pub fn log_start(&self, topic_id: Uuid, partition: i32) -> Option<i64> {
        self.log_starts
            .get(&topic_id)
            .and_then(|floors| floors.get(&partition))
            .copied()
    }
}

#[cfg(test)]
#[path = "log_start_tests.rs"]
mod tests;
