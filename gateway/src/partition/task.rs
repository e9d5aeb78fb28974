//! The task that owns one partition log: appends, reads, the high
//! watermark, and durability points (see the module docs of `partition`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot, watch};

use super::command::{Acks, AppendReply, Command, OffsetQuery, ReadResult, TaskOffsets, TaskRead};
use super::{now_ms, PartitionCounters};
use crate::backend::{Appended, LocalRead, LogBackend, LogError, LogSettings, TimestampOffset};

/// An acks=all append waiting for the high watermark.
struct Waiter {
    end: i64,
    answer: (Appended, i64),
    reply: AppendReply,
}

/// The state of one partition task.
pub(super) struct Task {
    log: Box<dyn LogBackend>,
    hw: watch::Sender<i64>,
    write_caching: bool,
    waiting: VecDeque<Waiter>,
    /// Appended data waits for a durability point not yet started.
    sync_wanted: bool,
    /// The log refused work after a failed write or fsync (counted once).
    offline: bool,
    /// The durability point running on a blocking thread, if any.
    syncing: Option<oneshot::Receiver<storage::SyncDone>>,
    counters: Arc<PartitionCounters>,
    /// Holds durability points until released (tests only).
    #[cfg(test)]
    sync_gate: Option<Arc<SyncGate>>,
}

impl Task {
    pub(super) fn new(
        log: Box<dyn LogBackend>,
        hw: watch::Sender<i64>,
        write_caching: bool,
        counters: Arc<PartitionCounters>,
    ) -> Task {
        Task {
            log,
            hw,
            write_caching,
            waiting: VecDeque::new(),
            sync_wanted: false,
            offline: false,
            syncing: None,
            counters,
            #[cfg(test)]
            sync_gate: None,
        }
    }

    /// Holds this task's durability points at `gate` (tests of group commit).
    #[cfg(test)]
    pub(super) fn with_sync_gate(mut self, gate: Option<Arc<SyncGate>>) -> Task {
        self.sync_gate = gate;
        self
    }
    /// The high watermark the log allows now; never below the current one.
    fn advance_hw(&mut self) {
        let end = self.log.log_end_offset();
        let allowed = if self.write_caching {
            end
        } else {
            self.log.flushed_offset().min(end)
        };
        self.hw.send_if_modified(|hw| {
            if allowed > *hw {
                *hw = allowed;
                true
            } else {
                false
            }
        });
        let hw = *self.hw.borrow();
        while self.waiting.front().is_some_and(|w| w.end <= hw) {
            if let Some(w) = self.waiting.pop_front() {
                let _ = w.reply.send(Ok(w.answer));
            }
        }
    }

    fn append(&mut self, mut records: BytesMut, leader_epoch: i32, acks: Acks, reply: AppendReply) {
        let result = self
            .log
            .append(&mut records, leader_epoch, now_ms())
            .map(|a| (a, self.log.log_start_offset()));
        if let Err(e @ LogError::Storage(storage::StorageError::Offline { .. })) = &result {
            self.mark_offline(e);
        }
        self.advance_hw();
        // Without write caching, appended data becomes visible (and acks=all
        // writes are answered) only at the next durability point.
        if *self.hw.borrow() < self.log.log_end_offset() {
            self.sync_wanted = true;
        }
        match result {
            Ok(answer) if acks == Acks::All && answer.0.last_offset >= *self.hw.borrow() => {
                self.waiting.push_back(Waiter {
                    end: answer.0.last_offset + 1,
                    answer,
                    reply,
                });
            }
            other => {
                let _ = reply.send(other);
            }
        }
    }

    /// Starts a durability point for everything appended so far, on a
    /// blocking thread so the fdatasync never stalls the shard.
    fn start_sync(&mut self) {
        self.sync_wanted = false;
        let point = self.log.sync_point();
        let (tx, rx) = oneshot::channel();
        #[cfg(test)]
        let gate = self.sync_gate.clone();
        tokio::task::spawn_blocking(move || {
            #[cfg(test)]
            if let Some(g) = gate {
                g.wait();
            }
            let _ = tx.send(point.run());
        });
        self.syncing = Some(rx);
    }

    /// Records a finished durability point and answers the writes it covers.
    fn finish_sync(&mut self, done: Result<storage::SyncDone, oneshot::error::RecvError>) {
        self.syncing = None;
        let recorded = match done {
            Ok(done) => self.log.sync_done(done),
            Err(_) => Err(LogError::NotDurable("the fdatasync thread stopped".into())),
        };
        match recorded {
            Ok(_) => {
                self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                self.advance_hw();
            }
            Err(e) => {
                // A failed durability point takes the log offline (storage's
                // contract): acknowledged bytes may not be durable.
                self.mark_offline(&e);
                self.fail_waiting(&e);
            }
        }
    }

    /// Logs a failure of the log's own work; once the log is offline (a
    /// failed write or fsync), says so once and counts it instead of
    /// logging every timer tick.
    fn note_failure(&mut self, e: &LogError) {
        let offline = matches!(
            e,
            LogError::Storage(storage::StorageError::Offline { .. }) | LogError::NotDurable(_)
        );
        if offline {
            self.mark_offline(e);
        } else {
            tracing::warn!(error = %e, "partition log timer work failed");
        }
    }

    fn mark_offline(&mut self, e: &LogError) {
        if !self.offline {
            self.offline = true;
            self.counters.offline.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "partition log is offline: it refuses writes until the broker restarts and recovers it");
        }
    }

    fn fail_waiting(&mut self, e: &LogError) {
        if self.waiting.is_empty() {
            tracing::error!(error = %e, "making appended data durable failed");
            return;
        }
        tracing::error!(error = %e, waiting = self.waiting.len(), "making appended data durable failed; waiting acks=all producers get an error");
        let reason = e.to_string();
        for w in self.waiting.drain(..) {
            let _ = w.reply.send(Err(LogError::NotDurable(reason.clone())));
        }
    }

    /// Closes the log (which fsyncs everything) and answers the writes still
    /// waiting for a durability point from its outcome.
    async fn close(mut self) -> Result<(), LogError> {
        if self.offline {
            self.counters.offline.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(rx) = self.syncing.take() {
            let done = rx.await;
            self.finish_sync(done);
        }
        let waiting = std::mem::take(&mut self.waiting);
        let closed = self.log.close();
        for w in waiting {
            let _ = w.reply.send(match &closed {
                Ok(()) => Ok(w.answer),
                Err(e) => Err(LogError::NotDurable(e.to_string())),
            });
        }
        closed
    }

    fn read(&self, offset: i64, max_bytes: usize, min_one: bool) -> Result<TaskRead, LogError> {
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let high_watermark = *self.hw.borrow();
        let log_start = self.log.log_start_offset();
        Ok(
            match self.log.read(offset, max_bytes, min_one, high_watermark)? {
                LocalRead::Records(records) => TaskRead::Local(ReadResult {
                    records,
                    high_watermark,
                    log_start_offset: log_start,
                }),
                LocalRead::Tiered => TaskRead::Tiered {
                    log_start,
                    high_watermark,
                },
            },
        )
    }

    fn offsets(&self, query: OffsetQuery) -> Result<TaskOffsets, LogError> {
        let log_start = self.log.log_start_offset();
        let at = |offset: i64| {
            Some(TimestampOffset {
                timestamp: -1,
                offset,
            })
        };
        let local = match query {
            OffsetQuery::Earliest => at(log_start),
            OffsetQuery::EarliestLocal => at(self.log.local_start_offset()),
            OffsetQuery::Latest => at(*self.hw.borrow()),
            OffsetQuery::LatestTiered => at(self.log.latest_tiered_offset().unwrap_or(-1)),
            OffsetQuery::MaxTimestamp => self.log.max_timestamp(),
            OffsetQuery::Timestamp(ts) => self.log.offset_for_timestamp(ts)?,
        };
        Ok(TaskOffsets {
            local,
            log_start,
            tiered_below_local: log_start < self.log.local_start_offset(),
        })
    }

    fn set_settings(&mut self, s: &LogSettings) {
        self.log.set_settings(s);
        // Whatever the old setting exposed stays exposed; with write caching
        // turned off, appends from now on wait for a durability point.
        self.write_caching = s.write_caching;
        self.advance_hw();
    }
}

/// What woke a partition task.
enum Event {
    Command(Option<Command>),
    Tick,
    Synced(Result<storage::SyncDone, oneshot::error::RecvError>),
}

/// The task that owns one partition log.
pub(super) async fn run(mut t: Task, mut rx: mpsc::Receiver<Command>) {
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            biased;
            done = async {
                match t.syncing.as_mut() {
                    Some(rx) => rx.await,
                    None => std::future::pending().await,
                }
            } => Event::Synced(done),
            cmd = rx.recv() => Event::Command(cmd),
            _ = ticker.tick() => Event::Tick,
        };
        match event {
            Event::Synced(done) => t.finish_sync(done),
            Event::Tick => {
                if let Err(e) = t.log.tick(now_ms()) {
                    t.note_failure(&e);
                }
                // flush.ms, retention and rolls may have made more data durable.
                t.advance_hw();
            }
            Event::Command(None) => break,
            Event::Command(Some(cmd)) => match cmd {
                Command::Append {
                    records,
                    leader_epoch,
                    acks,
                    reply,
                } => t.append(records, leader_epoch, acks, reply),
                Command::Read {
                    offset,
                    max_bytes,
                    min_one,
                    reply,
                } => {
                    let _ = reply.send(t.read(offset, max_bytes, min_one));
                }
                Command::Offsets { query, reply } => {
                    let _ = reply.send(t.offsets(query));
                }
                Command::Bounds { reply } => {
                    let _ = reply.send((t.log.log_start_offset(), *t.hw.borrow()));
                }
                Command::DeleteBefore { offset, reply } => {
                    let _ = reply.send(t.log.delete_records_before(offset));
                }
                Command::EpochEnd { epoch, reply } => {
                    let _ = reply.send(t.log.epoch_end_offset(epoch));
                }
                Command::Settings(s) => t.set_settings(&s),
                Command::Close { reply } => {
                    let _ = reply.send(t.close().await);
                    return;
                }
            },
        }
        // Group commit: one durability point at a time, started once the
        // queue is drained, covers every append that arrived meanwhile.
        if t.sync_wanted && t.syncing.is_none() && rx.is_empty() {
            t.start_sync();
        }
    }
    if let Err(e) = t.close().await {
        tracing::error!(error = %e, "closing partition log failed");
    }
}

/// Holds durability points until opened (tests of group commit).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct SyncGate {
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

#[cfg(test)]
impl SyncGate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        while !*open {
            open = self.opened.wait(open).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub(crate) fn release(&self) {
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.opened.notify_all();
    }
}
