//! Partition tasks: each partition's log is owned by one task on one shard,
//! picked by a hash of (topic id, partition). Everything that touches the log
//! goes through that task's bounded channel, so appends need no locks.
//!
//! The task also owns the partition's high watermark, the offset below which
//! consumers may read and acks=all producers are answered:
//! - with `write.caching=true` (the default) it is the log end, moved after
//!   every append: acknowledged means "in the page cache";
//! - with `write.caching=false` it is the log end as of the last completed
//!   durability point. An acks=all append waits in the task until the high
//!   watermark passes it. Whenever the task's queue is drained, data waits
//!   and no durability point runs, the task starts one
//!   (`storage::SyncPoint`): the fdatasync runs on a blocking thread and its
//!   outcome comes back to the task, so every produce request that arrives
//!   meanwhile waits for the next one, which covers them all (group commit).
//!   Consumers never see, or commit offsets of, data a power loss could take
//!   back. A failed durability point takes the log offline, and the writes
//!   waiting for it get KAFKA_STORAGE_ERROR.
//!
//! The high watermark never moves backwards, and watchers are woken only when
//! it moves, so long-polling fetches sleep until there is news.
//!
//! Opening a log recovers it (a CRC scan of unclean segments), which is
//! blocking file IO: it runs on a blocking thread, once per partition however
//! many requests ask at the same time, and the registry lock is held only to
//! look the partition up. Once shutdown begins, or while a topic is being
//! deleted, no log is opened: a request racing either gets
//! NOT_LEADER_OR_FOLLOWER and never a second log on a directory still in use.
//!
//! Reads below the local log start are answered by the task as "tiered" with
//! the bounds of that moment, and the handle then reads object storage off
//! the task ([`PartitionHandle::read`]); ListOffsets merges both tiers the
//! same way ([`PartitionHandle::offsets`]). This is the one place where the
//! two tiers meet on the read path.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use storage::tier::PartitionKey;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch, Notify, OnceCell};
use uuid::Uuid;

use crate::backend::{
    Appended, ColdLog, LocalRead, LogBackend, LogError, LogFactory, LogSettings, OpenedLog,
    Records, TimestampOffset,
};

/// Depth of each partition task's request queue.
const QUEUE_DEPTH: usize = 256;

/// Wall-clock milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What a producer asked to wait for (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=0: no answer is sent; the append still happens.
    None,
    /// acks=1: answered after the local append.
    Leader,
    /// acks=-1: answered once the high watermark passes the batch.
    All,
}

impl Acks {
    /// Kafka's `acks` field; `None` for values Kafka refuses.
    pub fn from_wire(acks: i16) -> Option<Acks> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// What a fetch read returns, with the partition's offsets at that moment.
#[derive(Debug)]
pub struct ReadResult {
    pub records: Records,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// A ListOffsets question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    Earliest,
    /// EARLIEST_LOCAL (-4): the first offset on local disk.
    EarliestLocal,
    Latest,
    /// LATEST_TIERED (-5): the last offset in object storage.
    LatestTiered,
    MaxTimestamp,
    Timestamp(i64),
}

type Reply<T> = oneshot::Sender<T>;
type AppendReply = Reply<Result<(Appended, i64), LogError>>;

/// The task's answer to a read.
enum TaskRead {
    Local(ReadResult),
    /// Below the local start: read object storage, within these bounds.
    Tiered {
        log_start: i64,
        high_watermark: i64,
    },
}

/// The task's answer to a ListOffsets question, before object storage is asked.
struct TaskOffsets {
    local: Option<TimestampOffset>,
    log_start: i64,
    /// Object storage holds offsets below the local start.
    tiered_below_local: bool,
}

enum Command {
    Append {
        records: BytesMut,
        leader_epoch: i32,
        acks: Acks,
        reply: AppendReply,
    },
    Read {
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        reply: Reply<Result<TaskRead, LogError>>,
    },
    Offsets {
        query: OffsetQuery,
        reply: Reply<Result<TaskOffsets, LogError>>,
    },
    Bounds {
        reply: Reply<(i64, i64)>,
    },
    DeleteBefore {
        offset: i64,
        reply: Reply<Result<i64, LogError>>,
    },
    EpochEnd {
        epoch: i32,
        reply: Reply<Option<(i32, i64)>>,
    },
    Settings(LogSettings),
    Close {
        reply: Reply<Result<(), LogError>>,
    },
}

/// Counters of the partition tasks, for `/metrics` and for tests that check
/// how much work a request caused.
#[derive(Debug, Default)]
pub struct PartitionCounters {
    /// Read commands served (fetches, including every long-poll re-read).
    pub reads: AtomicU64,
    /// Durability points (fdatasyncs) completed for `write.caching=false`.
    pub syncs: AtomicU64,
    /// Logs opened.
    pub opens: AtomicU64,
}

/// A cheap handle to a partition task.
#[derive(Clone)]
pub struct PartitionHandle {
    key: PartitionKey,
    tx: mpsc::Sender<Command>,
    hw: watch::Receiver<i64>,
    cold: Option<Arc<dyn ColdLog>>,
}

fn closed<T>(_: T) -> LogError {
    LogError::NotServing("the partition's task has stopped")
}

impl PartitionHandle {
    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, LogError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(closed)?;
        rx.await.map_err(closed)
    }

    pub fn key(&self) -> PartitionKey {
        self.key
    }

    fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Appends batches; returns where they landed and the log start offset,
    /// once `acks` is satisfied.
    pub async fn append(
        &self,
        records: BytesMut,
        leader_epoch: i32,
        acks: Acks,
    ) -> Result<(Appended, i64), LogError> {
        self.ask(|reply| Command::Append {
            records,
            leader_epoch,
            acks,
            reply,
        })
        .await?
    }

    /// Whole batches from the one holding `offset`, across both tiers, up to
    /// the high watermark. `min_one`: the first batch comes whole even when
    /// larger than `max_bytes`; otherwise nothing larger than `max_bytes` comes.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<ReadResult, LogError> {
        let read = self
            .ask(|reply| Command::Read {
                offset,
                max_bytes,
                min_one,
                reply,
            })
            .await??;
        let (log_start, high_watermark) = match read {
            TaskRead::Local(r) => return Ok(r),
            TaskRead::Tiered {
                log_start,
                high_watermark,
            } => (log_start, high_watermark),
        };
        let out_of_range = || {
            LogError::Storage(storage::StorageError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: high_watermark,
            })
        };
        let cold = self.cold.as_ref().ok_or_else(out_of_range)?;
        match cold.read(offset, max_bytes).await? {
            Some(bytes) => {
                let records = if !min_one && bytes.len() > max_bytes {
                    Records::empty()
                } else {
                    Records::Bytes(bytes)
                };
                Ok(ReadResult {
                    records,
                    high_watermark,
                    log_start_offset: log_start,
                })
            }
            None => Err(out_of_range()),
        }
    }

    /// A ListOffsets answer across both tiers.
    pub async fn offsets(&self, query: OffsetQuery) -> Result<Option<TimestampOffset>, LogError> {
        let a = self
            .ask(|reply| Command::Offsets { query, reply })
            .await??;
        let cold = match &self.cold {
            Some(c) if a.tiered_below_local => c,
            _ => return Ok(a.local),
        };
        match query {
            // The first match in offset order: nothing local can come before it.
            OffsetQuery::Timestamp(ts) => match cold.offset_for_timestamp(ts, a.log_start).await? {
                Some(found) => Ok(Some(found)),
                None => Ok(a.local),
            },
            OffsetQuery::MaxTimestamp => {
                let tiered = cold.max_timestamp(a.log_start).await?;
                Ok(storage::tier::latest_max_timestamp(tiered, a.local))
            }
            OffsetQuery::Earliest
            | OffsetQuery::EarliestLocal
            | OffsetQuery::Latest
            | OffsetQuery::LatestTiered => Ok(a.local),
        }
    }

    /// (log start offset across tiers, high watermark).
    pub async fn bounds(&self) -> Result<(i64, i64), LogError> {
        self.ask(|reply| Command::Bounds { reply }).await
    }

    /// DeleteRecords: raises the log start to `offset` (at most the high
    /// watermark) and returns the new log start. With object storage behind
    /// the log, the floor is recorded in the metastore first.
    pub async fn delete_before(&self, offset: i64) -> Result<i64, LogError> {
        let (log_start, high_watermark) = self.bounds().await?;
        if offset > high_watermark {
            return Err(LogError::Storage(storage::StorageError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: high_watermark,
            }));
        }
        if let Some(cold) = &self.cold {
            if offset > log_start {
                cold.persist_log_start(offset).await?;
            }
        }
        self.ask(|reply| Command::DeleteBefore { offset, reply })
            .await?
    }

    pub async fn epoch_end(&self, epoch: i32) -> Result<Option<(i32, i64)>, LogError> {
        self.ask(|reply| Command::EpochEnd { epoch, reply }).await
    }

    pub async fn set_settings(&self, settings: LogSettings) -> Result<(), LogError> {
        self.tx
            .send(Command::Settings(settings))
            .await
            .map_err(closed)
    }

    /// A watch of the high watermark; long-polling fetches wait on it.
    pub fn high_watermark(&self) -> watch::Receiver<i64> {
        self.hw.clone()
    }

    async fn close(&self) -> Result<(), LogError> {
        self.ask(|reply| Command::Close { reply }).await?
    }
}

/// An acks=all append waiting for the high watermark.
struct Waiter {
    end: i64,
    answer: (Appended, i64),
    reply: AppendReply,
}

/// The state of one partition task.
struct Task {
    log: Box<dyn LogBackend>,
    hw: watch::Sender<i64>,
    write_caching: bool,
    waiting: VecDeque<Waiter>,
    /// Appended data waits for a durability point not yet started.
    sync_wanted: bool,
    /// The durability point running on a blocking thread, if any.
    syncing: Option<oneshot::Receiver<storage::SyncDone>>,
    counters: Arc<PartitionCounters>,
    /// Holds durability points until released (tests only).
    #[cfg(test)]
    sync_gate: Option<Arc<SyncGate>>,
}

impl Task {
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
            Err(e) => self.fail_waiting(&e),
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
async fn run(mut t: Task, mut rx: mpsc::Receiver<Command>) {
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
                    tracing::warn!(error = %e, "partition log timer work failed");
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
    open: Mutex<bool>,
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

/// Which partitions are open, and whether new ones may open.
#[derive(Default)]
struct Registry {
    open: HashMap<PartitionKey, Arc<OnceCell<PartitionHandle>>>,
    /// Shutdown has begun: nothing opens any more.
    closing: bool,
    /// Topics being deleted: their partitions do not open.
    deleting: HashSet<Uuid>,
    /// Opens running on blocking threads now.
    opening: usize,
}

/// The set of open partitions and the shards that own them.
pub struct Partitions {
    shards: Vec<Handle>,
    factory: Arc<dyn LogFactory>,
    registry: Mutex<Registry>,
    /// Woken when no open is running any more.
    idle: Notify,
    counters: Arc<PartitionCounters>,
    /// Held durability points of logs opened from now on (tests only).
    #[cfg(test)]
    sync_gate: Mutex<Option<Arc<SyncGate>>>,
}

/// Counts an open running on a blocking thread, until dropped.
struct OpeningGuard<'a>(&'a Partitions);

impl Drop for OpeningGuard<'_> {
    fn drop(&mut self) {
        let mut r = self.0.lock();
        r.opening -= 1;
        if r.opening == 0 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Partitions {
    pub fn new(shards: Vec<Handle>, factory: Arc<dyn LogFactory>) -> Self {
        Partitions {
            shards,
            factory,
            registry: Mutex::new(Registry::default()),
            idle: Notify::new(),
            counters: Arc::new(PartitionCounters::default()),
            #[cfg(test)]
            sync_gate: Mutex::new(None),
        }
    }

    /// Holds the durability points of logs opened from now on until the
    /// returned gate is released.
    #[cfg(test)]
    pub(crate) fn hold_syncs(&self) -> Arc<SyncGate> {
        let gate = Arc::new(SyncGate::default());
        *self.sync_gate.lock().unwrap_or_else(|p| p.into_inner()) = Some(gate.clone());
        gate
    }

    pub fn counters(&self) -> &PartitionCounters {
        &self.counters
    }

    /// The shard that owns a partition.
    pub fn shard_of(&self, topic_id: Uuid, partition: i32) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (topic_id, partition).hash(&mut h);
        (h.finish() % self.shards.len().max(1) as u64) as usize
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The partition's task, opening its log on first use. `settings` is
    /// called only when the log must be opened.
    pub async fn get_or_open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: impl FnOnce() -> LogSettings,
    ) -> Result<PartitionHandle, LogError> {
        let key = PartitionKey::new(topic_id, partition);
        let cell = {
            let mut r = self.lock();
            if r.closing {
                return Err(LogError::NotServing("the broker is shutting down"));
            }
            if r.deleting.contains(&topic_id) {
                return Err(LogError::NotServing("the topic is being deleted"));
            }
            let cell = r.open.entry(key).or_default();
            match cell.get() {
                Some(h) if !h.is_closed() => return Ok(h.clone()),
                // The task stopped (its log failed to close or panicked): open afresh.
                Some(_) => {
                    *cell = Arc::default();
                    cell.clone()
                }
                None => cell.clone(),
            }
        };
        let h = cell
            .get_or_try_init(|| self.open(topic, key, settings()))
            .await?;
        Ok(h.clone())
    }

    async fn open(
        &self,
        topic: &str,
        key: PartitionKey,
        settings: LogSettings,
    ) -> Result<PartitionHandle, LogError> {
        {
            let mut r = self.lock();
            if r.closing {
                return Err(LogError::NotServing("the broker is shutting down"));
            }
            if r.deleting.contains(&key.topic_id) {
                return Err(LogError::NotServing("the topic is being deleted"));
            }
            r.opening += 1;
        }
        let _opening = OpeningGuard(self);
        let factory = self.factory.clone();
        let topic_name = topic.to_string();
        let write_caching = settings.write_caching;
        let opened = tokio::task::spawn_blocking(move || {
            factory.open(&topic_name, key.topic_id, key.partition, &settings)
        })
        .await
        .map_err(|_| LogError::NotServing("opening the log panicked"))??;
        self.counters.opens.fetch_add(1, Ordering::Relaxed);
        let refused = {
            let r = self.lock();
            if r.closing {
                Some("the broker is shutting down")
            } else if r.deleting.contains(&key.topic_id) {
                Some("the topic is being deleted")
            } else {
                None
            }
        };
        if let Some(reason) = refused {
            // Shutdown or a delete began while recovery ran: give the log back.
            let OpenedLog { log, .. } = opened;
            let _ = tokio::task::spawn_blocking(move || log.close()).await;
            return Err(LogError::NotServing(reason));
        }
        let OpenedLog { log, cold } = opened;
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let start = if write_caching {
            log.log_end_offset()
        } else {
            log.flushed_offset().min(log.log_end_offset())
        };
        let (hw_tx, hw_rx) = watch::channel(start);
        let task = Task {
            log,
            hw: hw_tx,
            write_caching,
            waiting: VecDeque::new(),
            sync_wanted: false,
            syncing: None,
            counters: self.counters.clone(),
            #[cfg(test)]
            sync_gate: self
                .sync_gate
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        };
        let shard = self.shard_of(key.topic_id, key.partition);
        let handle = match self.shards.get(shard) {
            Some(h) => h.clone(),
            None => Handle::current(),
        };
        handle.spawn(run(task, rx));
        Ok(PartitionHandle {
            key,
            tx,
            hw: hw_rx,
            cold,
        })
    }

    /// Waits until no log is being opened.
    async fn wait_for_opens(&self) {
        loop {
            let idle = self.idle.notified();
            if self.lock().opening == 0 {
                return;
            }
            idle.await;
        }
    }

    fn take_open(&self, keep: impl Fn(&PartitionKey) -> bool) -> Vec<PartitionHandle> {
        let mut r = self.lock();
        let keys: Vec<PartitionKey> = r.open.keys().filter(|k| keep(k)).copied().collect();
        keys.into_iter()
            .filter_map(|k| r.open.remove(&k))
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }

    /// Closes a deleted topic's partitions and removes their local data. No
    /// partition of the topic opens while this runs, or after.
    pub async fn remove_topic(&self, topic: &str, topic_id: Uuid, partitions: i32) {
        self.lock().deleting.insert(topic_id);
        self.wait_for_opens().await;
        for h in self.take_open(|k| k.topic_id == topic_id) {
            if let Err(e) = h.close().await {
                tracing::warn!(topic, partition = h.key.partition, error = %e, "closing deleted partition failed");
            }
        }
        for p in 0..partitions {
            let factory = self.factory.clone();
            let name = topic.to_string();
            let removed =
                tokio::task::spawn_blocking(move || factory.remove(&name, topic_id, p)).await;
            match removed {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(topic, partition = p, error = %e, "removing deleted partition data failed")
                }
                Err(_) => {
                    tracing::warn!(
                        topic,
                        partition = p,
                        "removing deleted partition data panicked"
                    )
                }
            }
        }
    }

    /// Pushes new settings to a topic's open partitions.
    pub async fn update_settings(&self, topic_id: Uuid, settings: &LogSettings) {
        let handles: Vec<PartitionHandle> = self
            .lock()
            .open
            .iter()
            .filter(|(k, _)| k.topic_id == topic_id)
            .filter_map(|(_, cell)| cell.get().cloned())
            .collect();
        for h in handles {
            let _ = h.set_settings(settings.clone()).await;
        }
    }

    /// Stops opening logs, waits for opens under way, then closes every
    /// partition (flush and clean-shutdown marker), all at once.
    pub async fn close_all(&self) {
        self.lock().closing = true;
        self.wait_for_opens().await;
        let all = self.take_open(|_| true);
        let closes = all.iter().map(|h| async move {
            match h.close().await {
                Ok(()) => {}
                Err(LogError::NotServing(_)) => {}
                Err(e) => {
                    tracing::error!(topic_id = %h.key.topic_id, partition = h.key.partition, error = %e, "closing partition failed")
                }
            }
        });
        futures::future::join_all(closes).await;
    }

    /// Number of open partitions.
    pub fn len(&self) -> usize {
        self.lock()
            .open
            .values()
            .filter(|c| c.get().is_some_and(|h| !h.is_closed()))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
