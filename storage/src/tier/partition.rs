//! [`TieredPartition`]: a partition log that is also a tier's source.
//!
//! It wraps the [`PartitionLog`] its owning task already holds and, on that
//! task, without any await:
//! - reports segments to the uploader as they are sealed;
//! - refuses appends (retriably) while the node's data not yet in object
//!   storage fills the local disk budget;
//! - deletes local segments under `local.retention.*` (or early, under
//!   disk pressure), but only below what the uploader says is committed;
//! - answers the partition's log start across both tiers, and keeps the
//!   DeleteRecords floor (recorded in the manifest by
//!   [`super::Tier::persist_log_start`] before it is applied, and in the
//!   partition directory) so tiered data below it is never served again,
//!   even after the local directory is lost.
//!
//! What it shares with the uploader lives in [`PartitionShared`]: the
//! manifest snapshot (written by the uploader), `deletable_below` (written
//! by the uploader), and the partition's own figures (written here).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::budget::{DiskBudget, Usage};
use super::driver::Link;
use super::engine::{Event, SealedSegment};
use super::error::TierError;
use super::manifest::TieredSegment;
use super::PartitionKey;
use crate::error::StorageError;
use crate::files;
use crate::log::{AppendOutcome, PartitionLog};
use crate::sync::{SyncDone, SyncPoint};

/// File in the partition directory holding the DeleteRecords floor.
const FLOOR_FILE: &str = "tiered-log-start";

/// Retention of one partition across both tiers, from its topic configs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierRetention {
    /// `retention.bytes`: total across tiers; `None` = unlimited.
    pub retention_bytes: Option<u64>,
    /// `retention.ms`; `None` = unlimited.
    pub retention_ms: Option<u64>,
    /// `local.retention.bytes` resolved (`-2` already replaced by
    /// `retention.bytes`); `None` = keep local copies without a size limit.
    pub local_retention_bytes: Option<u64>,
    /// `local.retention.ms` resolved likewise.
    pub local_retention_ms: Option<u64>,
}

/// State one partition shares with the uploader and cold readers.
#[derive(Debug)]
pub struct PartitionShared {
    key: PartitionKey,
    registration: u64,
    manifest: RwLock<Arc<Vec<TieredSegment>>>,
    deletable_below: AtomicI64,
    floor: AtomicI64,
    local_start: AtomicI64,
    log_end: AtomicI64,
    pending_bytes: AtomicU64,
    retention: Mutex<TierRetention>,
}

impl PartitionShared {
    pub(crate) fn new(
        key: PartitionKey,
        entries: Vec<TieredSegment>,
        floor: i64,
        registration: u64,
    ) -> Self {
        PartitionShared {
            key,
            registration,
            manifest: RwLock::new(Arc::new(entries)),
            deletable_below: AtomicI64::new(i64::MIN),
            floor: AtomicI64::new(floor),
            local_start: AtomicI64::new(0),
            log_end: AtomicI64::new(0),
            pending_bytes: AtomicU64::new(0),
            retention: Mutex::new(TierRetention::default()),
        }
    }

    pub fn key(&self) -> PartitionKey {
        self.key
    }

    pub(crate) fn registration(&self) -> u64 {
        self.registration
    }

    /// The partition's manifest entries as this node last saw them.
    pub fn manifest(&self) -> Arc<Vec<TieredSegment>> {
        Arc::clone(&self.manifest.read())
    }

    /// First tiered offset, if anything is tiered.
    pub fn tiered_start(&self) -> Option<i64> {
        self.manifest.read().first().map(|e| e.base_offset)
    }

    /// Last tiered offset (Kafka's LATEST_TIERED), if anything is tiered.
    pub fn tiered_last(&self) -> Option<i64> {
        self.manifest.read().last().map(|e| e.last_offset)
    }

    pub(crate) fn insert_entry(&self, entry: TieredSegment) {
        let mut m = self.manifest.write();
        if m.iter().any(|e| e.key == entry.key) {
            return;
        }
        let list = Arc::make_mut(&mut m);
        let at = list.partition_point(|e| e.base_offset < entry.base_offset);
        list.insert(at, entry);
    }

    pub(crate) fn remove_below(&self, below_offset: i64) {
        let mut m = self.manifest.write();
        if m.first().is_some_and(|e| e.last_offset < below_offset) {
            Arc::make_mut(&mut m).retain(|e| e.last_offset >= below_offset);
        }
    }

    pub(crate) fn set_deletable_below(&self, offset: i64) {
        self.deletable_below.store(offset, Ordering::Release);
    }

    /// Local segments wholly below this are in object storage.
    pub fn deletable_below(&self) -> i64 {
        self.deletable_below.load(Ordering::Acquire)
    }

    /// The DeleteRecords floor (-1 if none).
    pub fn floor(&self) -> i64 {
        self.floor.load(Ordering::Acquire)
    }

    pub fn local_start(&self) -> i64 {
        self.local_start.load(Ordering::Relaxed)
    }

    pub fn log_end(&self) -> i64 {
        self.log_end.load(Ordering::Relaxed)
    }

    /// Local bytes of this partition not yet in object storage.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes.load(Ordering::Relaxed)
    }

    pub fn retention(&self) -> TierRetention {
        *self.retention.lock()
    }

    /// The log start across both tiers, given the local one.
    pub fn log_start(&self, local_start: i64) -> i64 {
        let start = match self.tiered_start() {
            Some(t) if t < local_start => t,
            _ => local_start,
        };
        start.max(self.floor())
    }
}

/// Unregisters the partition and withdraws its budget share when dropped.
#[derive(Debug)]
struct Registration {
    link: Link,
    shared: Arc<PartitionShared>,
    usage: Usage,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.link.budget.update(self.usage, Usage::default());
        self.link.unregister(self.shared.key());
    }
}

/// A partition log with tiering; owned by the partition's task.
#[derive(Debug)]
pub struct TieredPartition {
    log: PartitionLog,
    reg: Registration,
    retention: TierRetention,
    /// Offset after the newest sealed segment reported to the uploader.
    reported_end: i64,
    active_base: i64,
    /// The upload bound last reported: see [`TieredPartition::upload_bound`].
    reported_bound: i64,
}

impl TieredPartition {
    pub(crate) fn new(
        link: Link,
        shared: Arc<PartitionShared>,
        log: PartitionLog,
        retention: TierRetention,
    ) -> TieredPartition {
        *shared.retention.lock() = retention;
        let mut p = TieredPartition {
            active_base: log.segments.keys().next_back().copied().unwrap_or(0),
            reported_end: log.log_start_offset(),
            reported_bound: log.flushed_offset().min(log.log_end_offset()),
            log,
            reg: Registration {
                link,
                shared,
                usage: Usage::default(),
            },
            retention,
        };
        let sealed = p.sealed_since(i64::MIN);
        p.reported_end = p.active_base;
        let entries = p.reg.shared.manifest();
        p.reg.link.send(Event::Register {
            partition: p.reg.shared.key(),
            registration: p.reg.shared.registration(),
            committed: entries
                .iter()
                .map(|e| (e.base_offset, e.last_offset))
                .collect(),
            sealed,
            high_watermark: p.reported_bound,
        });
        if let Err(e) = p.expire_producers() {
            tracing::warn!(dir = %p.log.dir().display(), error = %e, "could not expire producer state below the log start");
        }
        p.recount();
        p
    }

    /// Reads the persisted DeleteRecords floor of a partition directory.
    pub(crate) fn read_floor(dir: &std::path::Path) -> Result<i64, StorageError> {
        Ok(files::read_optional(&dir.join(FLOOR_FILE))?
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(-1))
    }

    /// Persists the DeleteRecords floor in a partition directory.
    pub(crate) fn write_floor(dir: &std::path::Path, offset: i64) -> Result<(), StorageError> {
        files::write_atomic(dir, FLOOR_FILE, offset.to_string().as_bytes(), true)
    }

    /// The local log (reads, timestamps, epochs, subscriptions).
    pub fn log(&self) -> &PartitionLog {
        &self.log
    }

    /// The local log, for calls that do not change which offsets exist
    /// (flush). Appends, retention and DeleteRecords go through `self`.
    pub fn log_mut(&mut self) -> &mut PartitionLog {
        &mut self.log
    }

    pub fn shared(&self) -> &Arc<PartitionShared> {
        &self.reg.shared
    }

    /// The log start across both tiers (what Kafka clients call the log start offset).
    pub fn log_start_offset(&self) -> i64 {
        self.reg.shared.log_start(self.log.log_start_offset())
    }

    /// The first offset still on local disk.
    pub fn local_log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Every offset below this is on the device (see
    /// [`PartitionLog::flushed_offset`]).
    pub fn flushed_offset(&self) -> i64 {
        self.log.flushed_offset()
    }

    /// Starts a durability point at the log end: cheap, never blocks. Run
    /// it off the task and record the outcome with
    /// [`TieredPartition::sync_done`] (see [`SyncPoint`]).
    pub fn sync_point(&mut self) -> SyncPoint {
        self.log.sync_point()
    }

    /// Records the outcome of [`SyncPoint::run`]; returns the flushed
    /// offset afterwards (see [`PartitionLog::sync_done`]). Uploads follow
    /// the flushed offset, so they may move on too.
    pub fn sync_done(&mut self, done: SyncDone) -> Result<i64, TierError> {
        let flushed = self.log.sync_done(done);
        self.after_write();
        Ok(flushed?)
    }

    /// Appends unless the node's local disk budget is exhausted by data not
    /// yet in object storage; then refuses with [`TierError::Backpressure`].
    pub fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome, TierError> {
        let incoming = records.len() as u64;
        let budget = Arc::clone(&self.reg.link.budget);
        if budget.local_over(incoming) {
            self.evict_tiered(now_ms, &budget)?;
        }
        if let Some((pending, limit)) = budget.refuses(incoming) {
            budget.note_refusal();
            return Err(TierError::Backpressure {
                pending,
                incoming,
                limit,
            });
        }
        let outcome = self.log.append(records, leader_epoch, now_ms)?;
        if let AppendOutcome::Appended(info) = outcome {
            let mut usage = self.reg.usage;
            usage.local += info.bytes as u64;
            usage.pending += info.bytes as u64;
            self.publish(usage);
        }
        self.after_write();
        Ok(outcome)
    }

    /// Timers of the log, then local retention below what is committed.
    pub fn tick(&mut self, now_ms: i64) -> Result<(), TierError> {
        self.log.tick(now_ms)?;
        self.after_write();
        let deletable = self.reg.shared.deletable_below();
        if deletable > self.log.log_start_offset() {
            let budget = Arc::clone(&self.reg.link.budget);
            if budget.local_over(0) {
                self.evict_tiered(now_ms, &budget)?;
            } else {
                self.log.evict_local_copies(
                    now_ms,
                    self.retention.local_retention_bytes,
                    self.retention.local_retention_ms,
                    deletable,
                )?;
            }
        }
        self.expire_producers()?;
        self.recount();
        Ok(())
    }

    /// Forgets idempotent producers whose batches are below the log start
    /// across tiers (not the local one: evicted local copies are still
    /// readable, and retried, from object storage).
    fn expire_producers(&mut self) -> Result<(), TierError> {
        let start = self.log_start_offset();
        if start > self.log.producer_state_start() {
            self.log.expire_producers_below(start)?;
        }
        Ok(())
    }

    /// DeleteRecords across both tiers: raises the log start to `offset`
    /// (local segments below it go at once, tiered ones with the uploader's
    /// next retention pass). Returns the new log start. Record the floor in
    /// the manifest first ([`super::Tier::persist_log_start`]), so that it
    /// survives the loss of the local directory.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, TierError> {
        let end = self.log.log_end_offset();
        if offset < 0 || offset > end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset(),
                log_end: end,
            }
            .into());
        }
        if offset <= self.log_start_offset() {
            return Ok(self.log_start_offset());
        }
        if offset > self.log.log_start_offset() {
            self.log.delete_records_before(offset)?;
        }
        if offset > self.reg.shared.floor() {
            TieredPartition::write_floor(self.log.dir(), offset)?;
            self.reg.shared.floor.store(offset, Ordering::Release);
            let key = self.reg.shared.key();
            self.reg.link.send(Event::LogStartRaised {
                partition: key,
                log_start: offset,
            });
            self.reg.link.trim(key);
        }
        self.expire_producers()?;
        self.recount();
        Ok(self.log_start_offset())
    }

    /// New retention settings (topic config change).
    pub fn set_retention(&mut self, retention: TierRetention) {
        self.retention = retention;
        *self.reg.shared.retention.lock() = retention;
    }

    /// Closes the local log cleanly and leaves the uploader.
    pub fn close(self) -> Result<(), TierError> {
        let TieredPartition { log, reg, .. } = self;
        drop(reg);
        log.close()?;
        Ok(())
    }

    /// Deletes every local segment already in object storage (disk pressure).
    fn evict_tiered(&mut self, now_ms: i64, budget: &DiskBudget) -> Result<(), TierError> {
        let deletable = self.reg.shared.deletable_below();
        if deletable <= self.log.log_start_offset() {
            return Ok(());
        }
        let deleted = self
            .log
            .evict_local_copies(now_ms, Some(0), None, deletable)?;
        if !deleted.is_empty() {
            budget.note_early_eviction();
            self.recount();
        }
        Ok(())
    }

    /// Sealed, non-empty segments whose base offset is `>= from`.
    fn sealed_since(&self, from: i64) -> Vec<SealedSegment> {
        self.log
            .segments
            .range(from..)
            .filter(|(_, s)| s.sealed)
            .filter_map(|(_, s)| SealedSegment::from_info(&s.info()))
            .collect()
    }

    /// Offsets below this may be uploaded: the high watermark (the log end
    /// on a single node), but never past what the local log has fsynced. A
    /// roll fsyncs the sealed segment in the background; uploading it before
    /// that completes could put batches in object storage that a power loss
    /// then cuts from the local log, and the offsets would be handed out
    /// twice.
    fn upload_bound(&self) -> i64 {
        self.log.flushed_offset().min(self.log.log_end_offset())
    }

    /// Reports segments sealed since the last report, and the upload bound
    /// when it moved.
    fn after_write(&mut self) {
        let active = self.log.segments.keys().next_back().copied().unwrap_or(0);
        let end = self.log.log_end_offset();
        self.reg.shared.log_end.store(end, Ordering::Relaxed);
        let bound = self.upload_bound();
        let bound_moved = bound > self.reported_bound;
        if bound_moved {
            self.reported_bound = bound;
        }
        if active == self.active_base {
            if bound_moved {
                self.reg.link.send(Event::HighWatermark {
                    partition: self.reg.shared.key(),
                    high_watermark: bound,
                });
            }
            return;
        }
        self.active_base = active;
        let sealed = self.sealed_since(self.reported_end);
        self.reported_end = active;
        if !sealed.is_empty() || bound_moved {
            self.reg.link.send(Event::Sealed {
                partition: self.reg.shared.key(),
                segments: sealed,
                high_watermark: self.reported_bound,
            });
        }
    }

    /// Recomputes the partition's budget share from its segments.
    fn recount(&mut self) {
        let deletable = self.reg.shared.deletable_below();
        let mut usage = Usage::default();
        for s in self.log.segments.values() {
            usage.local += s.size;
            if s.next_offset > deletable || !s.sealed {
                usage.pending += s.size;
            }
        }
        self.reg
            .shared
            .local_start
            .store(self.log.log_start_offset(), Ordering::Relaxed);
        self.reg
            .shared
            .log_end
            .store(self.log.log_end_offset(), Ordering::Relaxed);
        self.publish(usage);
    }

    fn publish(&mut self, usage: Usage) {
        self.reg.link.budget.update(self.reg.usage, usage);
        self.reg.usage = usage;
        self.reg
            .shared
            .pending_bytes
            .store(usage.pending, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
