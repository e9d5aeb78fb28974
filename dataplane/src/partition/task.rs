//! The task that owns one partition log: appends, reads, the high
//! watermark, and durability points (see the module docs of `partition`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot, watch};

use super::command::{
    Acks, AppendReply, Command, FollowerFetch, FollowerFetchAnswer, Isolation, IsrProposal,
    Leadership, OffsetQuery, ReadResult, TaskOffsets, TaskRead,
};
use super::{monotonic_ms, now_ms, PartitionCounters};
use crate::backend::{
    Appended, LocalRead, LogBackend, LogError, LogSettings, Marker, NotDurable, TimestampOffset,
};
use crate::partition::replication::divergence::{self, LeaderLog};
use crate::partition::replication::replica_set::{IsrChange, ReplicaSet};
use crate::partition::replication::wire::Refusal;
use storage::tier::wal::{WalError, WalPiece, WalWriter};
use storage::tier::PartitionKey;

mod compaction;
mod follower;

/// An acks=all append waiting for the high watermark.
struct Waiter {
    end: i64,
    answer: (Appended, i64),
    reply: AppendReply,
}

/// How long a write waits here for the leadership the metastore already
/// gave this node (the replica manager applies it a moment later).
const PARK_MS: i64 = 2_000;

/// A write that arrived before this node took up a leadership the client
/// already saw in the metastore's metadata.
struct Parked {
    write: Write,
    reply: AppendReply,
    until_ms: i64,
}

/// A producer's write as it reaches the task.
struct Write {
    records: BytesMut,
    leader_epoch: i32,
    acks: Acks,
    /// The topic validates schemas: the ids the records must carry.
    schemas: Option<Box<storage::SchemaRule>>,
    /// A transactional batch: when its producer was verified.
    txn: Option<super::TxnGuard>,
}

/// What this node is for the partition.
pub(super) enum Role {
    /// Not part of a cluster: the node's own log is the partition.
    Standalone,
    /// In a cluster, before the replica manager said whether this node
    /// leads or follows: refuses writes.
    Unassigned,
    Leader(Box<LeaderState>),
    Follower {
        leader: u64,
        leader_epoch: i32,
    },
}

/// A partition durable in object storage (`durability=object-store`): what
/// it appends as leader goes to the agent's write-ahead writer, and its high
/// watermark never passes what object storage holds.
struct WalState {
    writer: WalWriter,
    answers_tx: mpsc::UnboundedSender<WalAnswer>,
    answers: mpsc::UnboundedReceiver<WalAnswer>,
    /// Offsets below this are in object storage (as far as this leadership
    /// knows: a new leadership starts from a log rebuilt from there).
    durable_end: i64,
    /// The writer refused a piece: what follows it can never be recorded,
    /// so this leadership takes no more writes.
    broken: Option<String>,
}

/// The writer's answer for one piece.
struct WalAnswer {
    leader_epoch: i32,
    end: i64,
    result: Result<(), WalError>,
}

/// A leader's replica bookkeeping and where its ISR proposals go.
pub(super) struct LeaderState {
    set: ReplicaSet,
    isr_requests: mpsc::UnboundedSender<IsrProposal>,
}

/// The state of one partition task.
pub(super) struct Task {
    key: PartitionKey,
    role: Role,
    log: Box<dyn LogBackend>,
    hw: watch::Sender<i64>,
    /// The log end, for followers' fetches waiting at the leader.
    log_end: watch::Sender<i64>,
    write_caching: bool,
    waiting: VecDeque<Waiter>,
    /// Writes that reached this node before its replica manager told it to
    /// lead (see [`Task::park`]), oldest first.
    parked: VecDeque<Parked>,
    /// Appended data waits for a durability point not yet started.
    sync_wanted: bool,
    /// A follower's position requests waiting for a durability point
    /// (see `follower`).
    position_waiting: Vec<follower::PositionReply>,
    /// The log refused work after a failed write or fsync (counted once).
    offline: bool,
    /// The durability point running on a blocking thread, if any.
    syncing: Option<oneshot::Receiver<storage::SyncDone>>,
    counters: Arc<PartitionCounters>,
    /// The partition's series on `/metrics` (the cleaner's figures).
    stats: Arc<crate::telemetry::stats::PartitionStats>,
    /// The compaction run on the cleaner thread, if any.
    compacting: Option<compaction::Running>,
    /// No compaction is planned before this (ms since the epoch).
    next_compaction_ms: i64,
    /// When a marker was last written for each producer.
    ended: super::txn_guard::EndedTransactions,
    /// Set for a topic durable in object storage.
    wal: Option<WalState>,
    /// Holds durability points until released (tests only).
    #[cfg(test)]
    sync_gate: Option<Arc<SyncGate>>,
}

impl Task {
    pub(super) fn new(
        key: PartitionKey,
        role: Role,
        log: Box<dyn LogBackend>,
        channels: (watch::Sender<i64>, watch::Sender<i64>),
        write_caching: bool,
        counters: Arc<PartitionCounters>,
    ) -> Task {
        let (hw, log_end) = channels;
        Task {
            key,
            role,
            log,
            hw,
            log_end,
            write_caching,
            waiting: VecDeque::new(),
            parked: VecDeque::new(),
            sync_wanted: false,
            position_waiting: Vec::new(),
            offline: false,
            syncing: None,
            counters,
            stats: Arc::new(crate::telemetry::stats::PartitionStats::new(
                &key.topic_id.to_string(),
            )),
            compacting: None,
            next_compaction_ms: 0,
            ended: Default::default(),
            wal: None,
            #[cfg(test)]
            sync_gate: None,
        }
    }

    /// Reports the cleaner's figures on `stats` (the partition's series).
    pub(super) fn with_stats(
        mut self,
        stats: Arc<crate::telemetry::stats::PartitionStats>,
    ) -> Task {
        self.stats = stats;
        self
    }

    /// Makes this partition durable in object storage through `writer`.
    pub(super) fn with_wal(mut self, writer: WalWriter) -> Task {
        let (answers_tx, answers) = mpsc::unbounded_channel();
        self.wal = Some(WalState {
            writer,
            answers_tx,
            answers,
            durable_end: self.log.log_end_offset(),
            broken: None,
        });
        self
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
        self.log_end
            .send_if_modified(|e| std::mem::replace(e, end) != end);
        let visible = if self.write_caching {
            end
        } else {
            self.log.flushed_offset().min(end)
        };
        let allowed = match &self.role {
            Role::Standalone => visible,
            Role::Leader(l) => l.set.high_watermark(visible),
            // a follower's high watermark comes from its leader's fetch answers
            Role::Unassigned | Role::Follower { .. } => return,
        };
        // consumers see, and acks=all writers hear of, only what object
        // storage holds
        let allowed = match &self.wal {
            Some(w) => allowed.min(w.durable_end),
            None => allowed,
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
        if matches!(self.role, Role::Leader(_)) {
            // object storage gets only what no failover can take back, and
            // no open transaction (Kafka tiers only below the last stable
            // offset): read_committed reads of it need no trimming
            let stable = self.log.first_unstable_offset().map_or(hw, |f| f.min(hw));
            self.log.set_upload_limit(stable);
        }
        while self.waiting.front().is_some_and(|w| w.end <= hw) {
            if let Some(w) = self.waiting.pop_front() {
                let answer = match &self.role {
                    Role::Leader(l) => l
                        .set
                        .check_acks_all_after_append()
                        .map(|()| w.answer)
                        .map_err(LogError::from),
                    _ => Ok(w.answer),
                };
                let _ = w.reply.send(answer);
            }
        }
    }

    /// Whether a write naming `leader_epoch` waits for a leadership this
    /// node does not hold yet: it has no role, or its role is of an older
    /// leader epoch. A leader of an older epoch was deposed meanwhile (the
    /// epoch moved past it, and back to this node): appended now, the
    /// write would be stamped with the new epoch but counted by the old
    /// leadership's replica set, and for a partition durable in object
    /// storage its range recorded at the new epoch before this node rebuilt
    /// its log for it.
    fn awaits_leadership(&self, leader_epoch: i32) -> bool {
        match &self.role {
            Role::Unassigned => true,
            Role::Follower {
                leader_epoch: following,
                ..
            } => leader_epoch > *following,
            Role::Leader(l) => leader_epoch > l.set.leader_epoch(),
            Role::Standalone => false,
        }
    }

    fn append(&mut self, write: Write, reply: AppendReply) {
        let leader_epoch = write.leader_epoch;
        let acks = write.acks;
        if self.awaits_leadership(leader_epoch) || !self.parked.is_empty() {
            self.park(write, reply);
            return;
        }
        match &self.role {
            Role::Unassigned | Role::Follower { .. } => {
                let _ = reply.send(Err(LogError::NotServing(
                    "this node does not lead the partition",
                )));
                return;
            }
            Role::Leader(l) if acks == Acks::All => {
                if let Err(e) = l.set.check_acks_all() {
                    let _ = reply.send(Err(e.into()));
                    return;
                }
            }
            Role::Leader(_) | Role::Standalone => {}
        }
        if let Some(w) = &self.wal {
            if let Some(why) = &w.broken {
                tracing::debug!(reason = %why, "refusing a write after object storage refused one");
                let _ = reply.send(Err(LogError::NotServing(
                    "object storage refused an earlier write of this leadership",
                )));
                return;
            }
            if let Err(e) = w.writer.has_room(write.records.len()) {
                let _ = reply.send(Err(e.into()));
                return;
            }
        }
        let Write {
            mut records,
            schemas,
            txn,
            ..
        } = write;
        if let Some(reason) = txn.as_ref().and_then(|g| self.ended.refusal(g)) {
            let producer_id = txn.map_or(-1, |g| g.producer_id);
            let _ = reply.send(Err(LogError::Storage(
                storage::StorageError::InvalidTxnState {
                    producer_id,
                    reason,
                },
            )));
            return;
        }
        let result = self
            .log
            .append(&mut records, leader_epoch, now_ms(), schemas.as_deref())
            .map(|a| (a, self.log.log_start_offset()));
        if let Ok((a, _)) = &result {
            if !a.duplicate {
                self.send_to_wal(leader_epoch, a.base_offset, a.last_offset, records.freeze());
            }
        }
        self.answer_write(result, acks, reply);
    }

    /// Hands what the leader appended to the write-ahead writer.
    fn send_to_wal(
        &mut self,
        leader_epoch: i32,
        base_offset: i64,
        last_offset: i64,
        records: bytes::Bytes,
    ) {
        let Some(w) = &mut self.wal else {
            return;
        };
        let piece = WalPiece {
            partition: self.key,
            leader_epoch,
            base_offset,
            last_offset,
            records,
        };
        let answers = w.answers_tx.clone();
        let end = last_offset.saturating_add(1);
        let done = Box::new(move |result| {
            let _ = answers.send(WalAnswer {
                leader_epoch,
                end,
                result,
            });
        });
        if let Err(e) = w.writer.submit(piece, done) {
            // appended here but never to be in object storage: nothing
            // after it may be acknowledged either
            tracing::error!(topic_id = %self.key.topic_id, partition = self.key.partition, error = %e, "an appended batch could not be handed to the write-ahead writer; the partition takes no more writes until its leadership is rebuilt");
            w.broken = Some(e.to_string());
        }
    }

    /// The write-ahead writer's answer: the high watermark may move, or
    /// this leadership is over for writes.
    fn wal_answered(&mut self, a: WalAnswer) {
        let current = match &self.role {
            Role::Leader(l) => Some(l.set.leader_epoch()),
            Role::Standalone => Some(a.leader_epoch),
            _ => None,
        };
        let Some(w) = &mut self.wal else {
            return;
        };
        if current != Some(a.leader_epoch) {
            return;
        }
        match a.result {
            Ok(()) => {
                w.durable_end = w.durable_end.max(a.end);
                self.advance_hw();
            }
            Err(e) => {
                tracing::warn!(topic_id = %self.key.topic_id, partition = self.key.partition, error = %e, "object storage did not take a write of this leadership; waiting acks=all writes fail");
                w.broken = Some(e.to_string());
                self.fail_waiting_with("object storage did not take the write");
            }
        }
    }

    /// Answers a write the log took (or refused): at once, or for acks=all
    /// once the in-sync replicas (and, without write caching, a durability
    /// point) cover it.
    fn answer_write(
        &mut self,
        result: Result<(Appended, i64), LogError>,
        acks: Acks,
        reply: AppendReply,
    ) {
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

    /// Holds a write that names a leader epoch newer than this node's role,
    /// leader or follower (or any write while this node has no role yet),
    /// see [`Task::awaits_leadership`]: the produce path
    /// routed it here because the metastore already says this node leads,
    /// and the replica manager applies that a moment later. Refusing it
    /// would let the producer's next write in first, and an idempotent
    /// producer the partition has never seen may start at any sequence, so
    /// the refused first batch could never be written again. Parked writes
    /// keep their order and are appended when this node leads at their
    /// epoch or later, refused when it follows at their epoch or later, or
    /// after [`PARK_MS`] (NOT_LEADER_OR_FOLLOWER, which producers retry).
    fn park(&mut self, write: Write, reply: AppendReply) {
        self.parked.push_back(Parked {
            write,
            reply,
            until_ms: now_ms() + PARK_MS,
        });
    }

    /// Appends (as leader) or refuses the parked writes, in order; those
    /// still waiting for a leadership, and everything after them, stay.
    fn unpark(&mut self) {
        let mut parked = std::mem::take(&mut self.parked);
        while let Some(p) = parked.pop_front() {
            let waits = self.awaits_leadership(p.write.leader_epoch);
            if waits && p.until_ms > now_ms() {
                parked.push_front(p);
                self.parked = parked;
                return;
            }
            if waits {
                let _ = p.reply.send(Err(LogError::NotServing(
                    "this node does not lead the partition",
                )));
            } else {
                // as leader: written; as a follower at its epoch: refused
                self.append(p.write, p.reply);
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
            Err(_) => Err(NotDurable::SyncThreadStopped.into()),
        };
        match recorded {
            Ok(_) => {
                self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                self.advance_hw();
                self.answer_positions();
            }
            Err(e) => {
                // A failed durability point takes the log offline (storage's
                // contract): acknowledged bytes may not be durable.
                self.mark_offline(&e);
                let e = Arc::new(e);
                self.fail_positions(&e);
                self.fail_waiting(e);
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

    fn fail_waiting(&mut self, e: Arc<LogError>) {
        if self.waiting.is_empty() {
            tracing::error!(error = %e, "making appended data durable failed");
            return;
        }
        tracing::error!(error = %e, waiting = self.waiting.len(), "making appended data durable failed; waiting acks=all producers get an error");
        for w in self.waiting.drain(..) {
            let _ = w.reply.send(Err(NotDurable::SyncFailed(e.clone()).into()));
        }
    }

    /// Closes the log (which fsyncs everything) and answers the writes still
    /// waiting. The close makes the local log durable, and that is all it
    /// can promise: a standalone log's waiting writes are then acknowledged,
    /// but a leader's only up to what its in-sync followers also hold (the
    /// high watermark the close would allow). The rest get
    /// NOT_LEADER_OR_FOLLOWER, which producers retry at the next leader: a
    /// write acknowledged here and missing from the followers would be lost
    /// when one of them takes over.
    async fn close(mut self) -> Result<(), LogError> {
        if self.offline {
            self.counters.offline.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(rx) = self.syncing.take() {
            let done = rx.await;
            self.finish_sync(done);
        }
        let waiting = std::mem::take(&mut self.waiting);
        let durable_end = self.log.log_end_offset();
        let committed_after_close = match &self.role {
            Role::Standalone => durable_end,
            Role::Leader(l) => l.set.high_watermark(durable_end),
            // writes parked for a leadership never applied
            Role::Unassigned | Role::Follower { .. } => i64::MIN,
        };
        match self.log.close() {
            Ok(()) => {
                for w in waiting {
                    let _ = w.reply.send(if w.end <= committed_after_close {
                        Ok(w.answer)
                    } else {
                        Err(LogError::NotServing(
                            "the agent shut down before the in-sync replicas had the write",
                        ))
                    });
                }
                Ok(())
            }
            Err(e) => {
                let e = Arc::new(e);
                for w in waiting {
                    let _ = w.reply.send(Err(NotDurable::CloseFailed(e.clone()).into()));
                }
                Err(NotDurable::CloseFailed(e).into())
            }
        }
    }

    /// The high watermark, or the first offset of the oldest ongoing
    /// transaction if lower.
    fn last_stable_offset(&self) -> i64 {
        let hw = *self.hw.borrow();
        self.log.first_unstable_offset().map_or(hw, |f| f.min(hw))
    }

    /// A partition durable in object storage answers clients' reads
    /// (Fetch, ListOffsets, OffsetForLeaderEpoch) only while it leads.
    /// Its followers copy nothing, and a new leader's log is rebuilt from
    /// object storage after the metastore already names it (the gateway
    /// routes by the metastore): until then the local log is empty, stale
    /// or partly rebuilt, so a read past its end would answer
    /// OFFSET_OUT_OF_RANGE, or an epoch's end offset would fall below the
    /// consumer's position, and the consumer would reset (to the earliest
    /// offset with `auto.offset.reset=earliest`, reading everything again).
    /// Refused, the consumer refreshes its metadata and retries instead.
    fn check_serves_reads(&self) -> Result<(), LogError> {
        if self.wal.is_some() && !matches!(self.role, Role::Leader(_) | Role::Standalone) {
            return Err(LogError::NotServing(
                "the partition is durable in object storage and this replica does not lead it (yet): its log is not the partition's",
            ));
        }
        Ok(())
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        isolation: Isolation,
    ) -> Result<TaskRead, LogError> {
        self.check_serves_reads()?;
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let high_watermark = *self.hw.borrow();
        let last_stable = self.last_stable_offset();
        let upper = match isolation {
            Isolation::ReadUncommitted => high_watermark,
            Isolation::ReadCommitted => last_stable,
        };
        let aborted_upto = |upto: i64| match isolation {
            Isolation::ReadCommitted => self.log.aborted_transactions(offset, upto),
            Isolation::ReadUncommitted => Vec::new(),
        };
        let log_start = self.log.log_start_offset();
        Ok(match self.log.read(offset, max_bytes, min_one, upper)? {
            LocalRead::Records(records) => {
                let aborted = if records.is_empty() {
                    Vec::new()
                } else {
                    aborted_upto(upper)
                };
                TaskRead::Local(ReadResult {
                    records,
                    high_watermark,
                    log_start_offset: log_start,
                    last_stable_offset: last_stable,
                    aborted,
                })
            }
            // object storage holds only stable offsets (see advance_hw)
            LocalRead::Tiered => TaskRead::Tiered {
                log_start,
                high_watermark,
                last_stable_offset: last_stable,
                aborted: aborted_upto(upper),
            },
        })
    }

    /// Writes a transaction marker as the leader; answered like an
    /// acks=all append.
    fn write_marker(&mut self, marker: Marker, leader_epoch: i32, reply: AppendReply) {
        match &self.role {
            Role::Leader(l) if l.set.leader_epoch() == leader_epoch => {
                if let Err(e) = l.set.check_acks_all() {
                    let _ = reply.send(Err(e.into()));
                    return;
                }
            }
            Role::Standalone => {}
            _ => {
                let _ = reply.send(Err(LogError::NotServing(
                    "this node does not lead the partition at that epoch",
                )));
                return;
            }
        }
        if let Some(w) = &self.wal {
            if w.broken.is_some() {
                let _ = reply.send(Err(LogError::NotServing(
                    "object storage refused an earlier write of this leadership",
                )));
                return;
            }
        }
        let result = self.log.append_marker(marker, leader_epoch, now_ms());
        if let Ok(offset) = result {
            self.ended
                .ended(marker.producer_id, std::time::Instant::now());
            if self.wal.is_some() {
                match self.log.read(offset, usize::MAX, true, offset + 1) {
                    Ok(LocalRead::Records(r)) => match r.to_bytes() {
                        Ok(bytes) => self.send_to_wal(leader_epoch, offset, offset, bytes),
                        Err(e) => self.wal_unreadable(&e.to_string()),
                    },
                    Ok(LocalRead::Tiered) => {
                        self.wal_unreadable("the marker is not in the local log")
                    }
                    Err(e) => self.wal_unreadable(&e.to_string()),
                }
            }
        }
        let result = result.map(|offset| {
            let appended = Appended {
                base_offset: offset,
                last_offset: offset,
                log_append_time_ms: -1,
                duplicate: false,
            };
            (appended, self.log.log_start_offset())
        });
        self.answer_write(result, Acks::All, reply);
    }

    /// A marker just written could not be read back for the write-ahead
    /// writer: as a refused piece, this leadership takes no more writes.
    fn wal_unreadable(&mut self, why: &str) {
        tracing::error!(topic_id = %self.key.topic_id, partition = self.key.partition, error = why, "a transaction marker could not be read back for object storage");
        if let Some(w) = &mut self.wal {
            w.broken = Some(why.to_owned());
        }
    }

    fn offsets(&self, query: OffsetQuery) -> Result<TaskOffsets, LogError> {
        self.check_serves_reads()?;
        // a leader that took over answers what depends on its high
        // watermark only once that has reached the log end it took over
        // with (before, it may still be the lower one it had followed
        // with, below writes already acknowledged): Kafka's KIP-207
        if let Role::Leader(l) = &self.role {
            let depends_on_hw = matches!(
                query,
                OffsetQuery::Latest
                    | OffsetQuery::LastStable
                    | OffsetQuery::MaxTimestamp
                    | OffsetQuery::Timestamp(_)
            );
            if depends_on_hw && *self.hw.borrow() < l.set.epoch_start_offset() {
                return Err(LogError::OffsetNotAvailable(
                    "its followers have not yet confirmed the log it took over",
                ));
            }
        }
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
            OffsetQuery::LastStable => at(self.last_stable_offset()),
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

    // ---- replication ---------------------------------------------------------

    /// This node leads the partition at `l.assignment.leader_epoch`.
    fn lead(&mut self, l: Leadership) {
        let now = monotonic_ms(); // replica lag: a wall-clock step must not move it
        match &mut self.role {
            Role::Leader(state) if state.set.leader_epoch() == l.assignment.leader_epoch => {
                state.set.on_assignment(l.assignment);
                state.set.set_min_insync(l.min_insync);
                state.set.set_lag_max_ms(l.lag_max_ms);
                state.set.set_ineligible(l.ineligible);
                state.isr_requests = l.isr_requests;
            }
            _ => {
                tracing::info!(
                    topic_id = %self.key.topic_id,
                    partition = self.key.partition,
                    leader_epoch = l.assignment.leader_epoch,
                    log_end = self.log.log_end_offset(),
                    "leading the partition"
                );
                self.fail_waiting_with("leadership changed");
                let mut set = ReplicaSet::new(
                    l.me,
                    l.assignment,
                    self.log.log_end_offset(),
                    l.min_insync,
                    l.lag_max_ms,
                    now,
                );
                set.set_ineligible(l.ineligible);
                self.role = Role::Leader(Box::new(LeaderState {
                    set,
                    isr_requests: l.isr_requests,
                }));
                // the replica manager rebuilt the log from object storage
                // before telling this node to lead: all of it is there
                let end = self.log.log_end_offset();
                if let Some(w) = &mut self.wal {
                    w.durable_end = end;
                    w.broken = None;
                }
            }
        }
        self.advance_hw();
        self.propose_isr_change(now);
        self.unpark();
        self.answer_positions();
    }

    /// Another agent leads the partition now; writes waiting here fail.
    fn follow(&mut self, leader: u64, leader_epoch: i32) {
        if !matches!(self.role, Role::Follower { leader: l, leader_epoch: e } if l == leader && e == leader_epoch)
        {
            tracing::info!(
                topic_id = %self.key.topic_id,
                partition = self.key.partition,
                leader,
                leader_epoch,
                "following the partition's leader"
            );
        }
        self.fail_waiting_with("leadership moved to another agent");
        // only the leader uploads
        self.log.set_upload_limit(i64::MIN);
        self.role = Role::Follower {
            leader,
            leader_epoch,
        };
        self.unpark();
        self.answer_positions();
    }

    fn fail_waiting_with(&mut self, why: &'static str) {
        for w in self.waiting.drain(..) {
            let _ = w.reply.send(Err(LogError::NotServing(why)));
        }
    }

    fn propose_isr_change(&mut self, now: i64) {
        let hw = *self.hw.borrow();
        if let Role::Leader(l) = &mut self.role {
            if let Some(change) = l.set.propose_isr_change(hw, now) {
                let proposal = IsrProposal {
                    key: self.key,
                    change,
                };
                if let Err(unsent) = l.isr_requests.send(proposal) {
                    l.set.isr_change_failed(&unsent.0.change);
                }
            }
        }
    }

    /// The metastore's answer to an ISR change this node proposed, when
    /// it was not applied (or may not have been: `outcome_unknown`).
    fn isr_change_failed(&mut self, change: &IsrChange, outcome_unknown: bool) {
        if let Role::Leader(l) = &mut self.role {
            if outcome_unknown {
                l.set.isr_change_unknown(change, monotonic_ms());
            } else {
                l.set.isr_change_failed(change);
            }
        }
    }

    /// The leader's side of a follower's fetch (see `replication::replica_set`).
    fn follower_fetch(&mut self, f: FollowerFetch) -> FollowerFetchAnswer {
        let local_start = self.log.local_start_offset();
        let log_end = self.log.log_end_offset();
        let mut answer = FollowerFetchAnswer {
            error: 0,
            high_watermark: *self.hw.borrow(),
            local_start_offset: local_start,
            log_end_offset: log_end,
            diverging: None,
            records: bytes::Bytes::new(),
        };
        let refuse = |mut a: FollowerFetchAnswer, e: Refusal| {
            a.error = e.code();
            a
        };
        let epoch = match &self.role {
            Role::Leader(l) => l.set.leader_epoch(),
            _ => return refuse(answer, Refusal::NotLeaderOrFollower),
        };
        if f.leader_epoch < epoch {
            return refuse(answer, Refusal::FencedLeaderEpoch);
        }
        if f.leader_epoch > epoch {
            return refuse(answer, Refusal::UnknownLeaderEpoch);
        }
        let leader_log = LeaderLog {
            epoch_end: self.log.epoch_end_offset(f.last_fetched_epoch),
            latest_epoch: self.log.latest_epoch(),
            log_end,
            local_start,
        };
        if let Some(d) = divergence::diverging(leader_log, f.last_fetched_epoch, f.fetch_offset) {
            answer.diverging = Some(d);
            return answer;
        }
        if f.fetch_offset < local_start || f.fetch_offset > log_end {
            return refuse(answer, Refusal::OffsetOutOfRange);
        }
        let now = monotonic_ms();
        if let Role::Leader(l) = &mut self.role {
            if l.set
                .on_fetch(f.follower, f.fetch_offset, log_end, now)
                .is_err()
            {
                return refuse(answer, Refusal::NotLeaderOrFollower);
            }
        }
        self.advance_hw();
        self.propose_isr_change(now);
        answer.high_watermark = *self.hw.borrow();
        let read = self
            .log
            .read(f.fetch_offset, f.max_bytes, true, log_end)
            .and_then(|r| match r {
                LocalRead::Records(r) => r.to_bytes().map_err(LogError::Read),
                LocalRead::Tiered => Ok(bytes::Bytes::new()),
            });
        match read {
            Ok(records) => answer.records = records,
            Err(e) => {
                tracing::warn!(error = %e, "reading for a follower failed");
                return refuse(answer, Refusal::KafkaStorageError);
            }
        }
        answer
    }

    fn set_settings(&mut self, s: &LogSettings) {
        self.log.set_settings(s);
        // Whatever the old setting exposed stays exposed; with write caching
        // turned off, appends from now on wait for a durability point.
        self.write_caching = s.write_caching;
        self.advance_hw();
        self.answer_positions();
    }
}

/// What woke a partition task.
enum Event {
    Command(Option<Command>),
    Tick,
    Synced(Result<storage::SyncDone, oneshot::error::RecvError>),
    Compacted(compaction::Outcome),
    Wal(WalAnswer),
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
            // a finished compaction run before new commands: on a busy
            // partition it would otherwise wait behind them
            done = async {
                match t.compacting.as_mut() {
                    Some(rx) => rx.await,
                    None => std::future::pending().await,
                }
            } => Event::Compacted(done),
            answer = async {
                match t.wal.as_mut() {
                    Some(w) => w.answers.recv().await,
                    None => None,
                }
            }, if t.wal.is_some() => match answer {
                Some(a) => Event::Wal(a),
                None => continue,
            },
            cmd = rx.recv() => Event::Command(cmd),
            _ = ticker.tick() => Event::Tick,
        };
        match event {
            Event::Synced(done) => t.finish_sync(done),
            Event::Compacted(done) => t.compaction_done(done),
            Event::Wal(answer) => t.wal_answered(answer),
            Event::Tick => {
                if let Err(e) = t.log.tick(now_ms()) {
                    t.note_failure(&e);
                }
                // flush.ms, retention and rolls may have made more data durable.
                t.advance_hw();
                // followers that stopped fetching leave the ISR
                t.propose_isr_change(monotonic_ms());
                // writes parked for a leadership that never came are refused
                t.unpark();
                // flush.ms or a roll may have made a follower's log durable
                t.answer_positions();
                t.maybe_compact(now_ms());
            }
            Event::Command(None) => break,
            Event::Command(Some(cmd)) => match cmd {
                Command::Append {
                    records,
                    leader_epoch,
                    acks,
                    schemas,
                    txn,
                    reply,
                } => t.append(
                    Write {
                        records,
                        leader_epoch,
                        acks,
                        schemas,
                        txn,
                    },
                    reply,
                ),
                Command::Read {
                    offset,
                    max_bytes,
                    min_one,
                    isolation,
                    reply,
                } => {
                    let _ = reply.send(t.read(offset, max_bytes, min_one, isolation));
                }
                Command::Marker {
                    marker,
                    leader_epoch,
                    reply,
                } => t.write_marker(marker, leader_epoch, reply),
                Command::Offsets { query, reply } => {
                    let _ = reply.send(t.offsets(query));
                }
                Command::Bounds { reply } => {
                    let _ = reply.send((t.log.log_start_offset(), *t.hw.borrow()));
                }
                Command::LastStable { reply } => {
                    let _ = reply.send(t.last_stable_offset());
                }
                Command::Producers { reply } => {
                    let _ = reply.send(t.log.producers());
                }
                Command::LocalBytes { reply } => {
                    let _ = reply.send(t.log.local_bytes());
                }
                Command::DeleteBefore { offset, reply } => {
                    let _ = reply.send(t.log.delete_records_before(offset));
                }
                Command::EpochEnd { epoch, reply } => {
                    let _ = reply.send(
                        t.check_serves_reads()
                            .map(|()| t.log.epoch_end_offset(epoch)),
                    );
                }
                Command::Settings(s) => t.set_settings(&s),
                Command::Lead(l) => t.lead(l),
                Command::Follow {
                    leader,
                    leader_epoch,
                } => t.follow(leader, leader_epoch),
                Command::IsrChangeFailed {
                    change,
                    outcome_unknown,
                } => t.isr_change_failed(&change, outcome_unknown),
                Command::FollowerFetch { fetch, reply } => {
                    let _ = reply.send(t.follower_fetch(fetch));
                }
                Command::ReplicaAppend {
                    fetched,
                    records,
                    leader_high_watermark,
                    reply,
                } => {
                    let _ = reply.send(t.replica_append(fetched, &records, leader_high_watermark));
                }
                Command::Truncate {
                    fetched,
                    cut,
                    reply,
                } => {
                    let _ = reply.send(t.truncate(fetched, cut));
                }
                Command::Position { reply } => t.position(reply),
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
