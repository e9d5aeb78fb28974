//! The follower's side of a partition task: where its log stands, as its
//! leader may count it, and applying what the leader sent.
//!
//! Two rules keep a follower from counting toward its leader's high
//! watermark anything a failure could take back, step by step:
//! 1. Only durable data is reported. With `write.caching=false` a follower
//!    appends the leader's batches and then wants a durability point, as
//!    the leader does for produce: the task starts one once its queue is
//!    drained, on a blocking thread, covering every batch appended since
//!    the last one (group commit). Its position (the offset it fetches from
//!    next, which the leader counts as this replica's log end) is answered
//!    only once a durability point covers the log end. The fetcher asks for
//!    it after applying an answer, so each fetch round costs one fdatasync
//!    however many batches it brought, and the leader never counts records
//!    a power loss could cut from this replica (a correlated power loss
//!    keeps the ISR, and the first ISR member back leads). With write
//!    caching on, the position is the log end at once, as in Kafka.
//! 2. Only current answers are applied. Each append or truncation names
//!    the leader, leader epoch and fetch offset it was fetched under
//!    ([`FetchedAt`]) and is refused unless the task still follows that
//!    leader at that epoch and its log still ends at that offset. A late
//!    answer from a deposed leader (an out-of-range answer would cut back to
//!    its old high watermark) then never touches the log of a newer epoch.

use std::sync::Arc;

use super::{Role, Task};
use crate::backend::{LogError, NotDurable};
use crate::partition::command::{Cut, FetchedAt, ReplicaPosition, Reply};
use crate::partition::now_ms;

/// A position request waiting for a durability point.
pub(super) type PositionReply = Reply<Result<ReplicaPosition, LogError>>;

impl Task {
    /// The position this replica may report now: `None` while its log end
    /// is not yet durable and must be (a follower without write caching).
    fn reportable_position(&self) -> Option<ReplicaPosition> {
        let end = self.log.log_end_offset();
        let durable_only = !self.write_caching && matches!(self.role, Role::Follower { .. });
        if durable_only && self.log.flushed_offset() < end {
            return None;
        }
        Some(ReplicaPosition {
            log_end: end,
            latest_epoch: self.log.latest_epoch().unwrap_or(-1),
        })
    }

    /// Answers with the position now, or once a durability point covers
    /// the log end (see the module docs).
    pub(super) fn position(&mut self, reply: PositionReply) {
        match self.reportable_position() {
            Some(p) => {
                let _ = reply.send(Ok(p));
            }
            // nothing becomes durable any more: say so rather than start
            // a durability point that fails every round
            None if self.offline => {
                let _ = reply.send(Err(LogError::NotServing(
                    "the replica's log is offline: what it holds past its last durability point is not reported",
                )));
            }
            None => {
                self.position_waiting.push(reply);
                // one running now is followed by another if it falls short
                // (see `answer_positions`)
                if self.syncing.is_none() {
                    self.sync_wanted = true;
                }
            }
        }
    }

    /// Answers the position requests a durability point (or a truncation,
    /// a role or settings change) now allows; asks for another durability
    /// point while they still wait.
    pub(super) fn answer_positions(&mut self) {
        if self.position_waiting.is_empty() {
            return;
        }
        match self.reportable_position() {
            Some(p) => {
                for r in self.position_waiting.drain(..) {
                    let _ = r.send(Ok(p));
                }
            }
            // the one running, if any, is followed by another should it
            // fall short (this runs again when it completes)
            None if self.syncing.is_none() => self.sync_wanted = true,
            None => {}
        }
    }

    /// A durability point failed: the positions waiting for it get its error.
    pub(super) fn fail_positions(&mut self, e: &Arc<LogError>) {
        for r in self.position_waiting.drain(..) {
            let _ = r.send(Err(NotDurable::SyncFailed(e.clone()).into()));
        }
    }

    /// Refuses an answer fetched under another view than the task's now.
    fn check_current(&self, fetched: FetchedAt) -> Result<(), LogError> {
        match self.role {
            Role::Follower {
                leader,
                leader_epoch,
            } if leader == fetched.leader && leader_epoch == fetched.leader_epoch => {}
            Role::Follower { .. } => {
                return Err(LogError::NotServing(
                    "the replica fetch was answered under another leader or leader epoch than the replica follows now",
                ))
            }
            _ => {
                return Err(LogError::NotServing(
                    "this node does not follow the partition",
                ))
            }
        }
        if self.log.log_end_offset() != fetched.fetch_offset {
            return Err(LogError::NotServing(
                "the replica's log no longer ends where the fetch started",
            ));
        }
        Ok(())
    }

    /// A follower appends what its leader sent; its high watermark follows
    /// the leader's, up to what it holds.
    pub(super) fn replica_append(
        &mut self,
        fetched: FetchedAt,
        records: &[u8],
        leader_hw: i64,
    ) -> Result<(), LogError> {
        self.check_current(fetched)?;
        if !records.is_empty() {
            if let Err(e) = self.log.append_replicated(records, now_ms()) {
                if matches!(e, LogError::Storage(storage::StorageError::Offline { .. })) {
                    self.mark_offline(&e);
                }
                return Err(e);
            }
        }
        let end = self.log.log_end_offset();
        self.log_end
            .send_if_modified(|e| std::mem::replace(e, end) != end);
        if !self.write_caching && self.log.flushed_offset() < end {
            self.sync_wanted = true;
        }
        let hw = leader_hw.min(end);
        self.hw.send_if_modified(|h| {
            if hw > *h {
                *h = hw;
                true
            } else {
                false
            }
        });
        Ok(())
    }

    /// A follower cuts its log, or restarts it (with the producer state of
    /// the snapshot it was given, taken where it restarts).
    pub(super) fn truncate(&mut self, fetched: FetchedAt, cut: Cut) -> Result<(), LogError> {
        self.check_current(fetched)?;
        let (offset, fully) = match cut {
            Cut::To(offset) => {
                self.log.truncate_to(offset)?;
                (offset, false)
            }
            Cut::Restart { at, producers } => {
                self.log.truncate_fully_and_start_at(at)?;
                if let Some(snapshot) = producers {
                    match self.log.restore_producers(&snapshot) {
                        Ok(true) => tracing::info!(
                            topic_id = %self.key.topic_id,
                            partition = self.key.partition,
                            at,
                            "restored the idempotent producer state uploaded where the replica restarts"
                        ),
                        // said why; the state starts empty, as without a snapshot
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "restoring the idempotent producer state failed; it starts empty")
                        }
                    }
                }
                (at, true)
            }
        };
        let end = self.log.log_end_offset();
        self.log_end.send_replace(end);
        // what the leader committed is never cut, so this only matters for
        // a restart below the old start
        self.hw.send_if_modified(|h| {
            let was = *h;
            *h = (*h).min(end);
            *h != was
        });
        tracing::info!(
            topic_id = %self.key.topic_id,
            partition = self.key.partition,
            offset,
            fully,
            log_end = end,
            "follower truncated its log to the leader's"
        );
        self.answer_positions();
        Ok(())
    }
}
