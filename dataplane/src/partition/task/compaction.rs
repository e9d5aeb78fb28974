//! Compaction of a compacted topic's partition, driven by its task: every
//! [`CHECK_MS`] the task asks its log whether a run is due (a cheap walk
//! over the segment list), hands a due run to the storage crate's cleaner
//! thread (lowest CPU priority, off the shard), and installs the result on
//! its own turn. Leaders and followers compact their own copies, each below
//! its high watermark; a standalone log below what it flushed.

use tokio::sync::oneshot;

use super::{Role, Task};
use storage::compaction::Compacted;
use storage::StorageError;

/// How often a task asks its log whether compaction is due.
pub(super) const CHECK_MS: i64 = 2_000;
/// How long a task waits after a failed run before it plans another.
const RETRY_MS: i64 = 60_000;

pub(super) type Running = oneshot::Receiver<Result<Compacted, StorageError>>;
pub(super) type Outcome = Result<Result<Compacted, StorageError>, oneshot::error::RecvError>;

impl Task {
    /// Starts a compaction run when one is due and none is running.
    pub(super) fn maybe_compact(&mut self, now_ms: i64) {
        if self.compacting.is_some() || self.offline || now_ms < self.next_compaction_ms {
            return;
        }
        self.next_compaction_ms = now_ms + CHECK_MS;
        let bound = match &self.role {
            Role::Standalone => i64::MAX,
            Role::Leader(_) | Role::Follower { .. } => *self.hw.borrow(),
            Role::Unassigned => return,
        };
        if let Some(job) = self.log.plan_compaction(now_ms, bound) {
            let (from, to) = job.range();
            tracing::debug!(partition = ?self.key, from, to, "compaction run starts");
            self.compacting = Some(storage::compaction::submit(job));
        }
        self.stats.cleaner.publish(&self.log.cleaner_figures());
    }

    /// Installs a finished compaction run.
    pub(super) fn compaction_done(&mut self, outcome: Outcome) {
        self.compacting = None;
        let now = super::now_ms();
        match outcome {
            Ok(Ok(done)) => match self.log.install_compaction(done, now) {
                Ok(report) => {
                    tracing::info!(
                        partition = ?self.key,
                        segments = report.segments,
                        segments_after = report.segments_after,
                        bytes_before = report.bytes_before,
                        bytes_after = report.bytes_after,
                        records_removed = report.records_removed,
                        compacted_below = report.compacted_below,
                        "compacted"
                    );
                }
                Err(e) => {
                    self.next_compaction_ms = now + RETRY_MS;
                    self.note_failure(&e);
                }
            },
            Ok(Err(e)) => {
                self.next_compaction_ms = now + RETRY_MS;
                tracing::warn!(partition = ?self.key, error = %e, "a compaction run failed; the log is unchanged and the run is retried in a minute");
            }
            Err(_) => {
                self.next_compaction_ms = now + RETRY_MS;
                tracing::warn!(partition = ?self.key, "the log cleaner thread dropped a compaction run");
            }
        }
        self.stats.cleaner.publish(&self.log.cleaner_figures());
    }
}
