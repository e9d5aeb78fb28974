//! [`TieredPartition`]: a partition log that is also a tier's source.
//!
//! It wraps the [`PartitionLog`] its owning task already holds and, on that
//! task, without any await:
//! - reports segments to the uploader as they are sealed;
//! - refuses appends (retriably) while the node's data not yet in object
//!   storage fills the local disk budget;
//! - deletes local segments under `local.retention.*` (or early, under
//!   disk pressure), but only below what the uploader says is committed;
//! - on a leader, hands segments its local compaction rewrote to the
//!   uploader when one manifest entry, or several consecutive ones, serve
//!   exactly their offsets, so the compacted copy replaces the objects (see [`TieredPartition::install_compaction`]);
//! - answers the partition's log start across both tiers, and keeps the
//!   DeleteRecords floor (recorded in the manifest by
//!   [`super::Tier::persist_log_start`] before it is applied, and in the
//!   partition directory) so tiered data below it is never served again,
//!   even after the local directory is lost.
//!
//! What it shares with the uploader lives in [`PartitionShared`]: the
//! manifest snapshot (written by the uploader), `deletable_below` (written
//! by the uploader), and the partition's own figures (written here).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::watch;

use super::budget::{DiskBudget, Usage};
use super::engine::{Event, SealedSegment};
use super::error::TierError;
use super::link::Link;
use super::shared::{PartitionShared, TierRetention};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::files;
use crate::log::{AppendInfo, AppendOutcome, PartitionLog, ReadSlice, TimestampOffset};
use crate::replica::ReplicaAppend;
use crate::sync::{SyncDone, SyncPoint};

/// File in the partition directory holding the DeleteRecords floor.
const FLOOR_FILE: &str = "tiered-log-start";

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
    /// Nothing at or past this offset is uploaded (a replicated partition's
    /// high watermark; `i64::MAX` on a single node).
    upload_limit: i64,
}

impl TieredPartition {
    pub(crate) fn new(
        link: Link,
        shared: Arc<PartitionShared>,
        log: PartitionLog,
        retention: TierRetention,
        upload_limit: i64,
    ) -> TieredPartition {
        *shared.retention.lock() = retention;
        let mut p = TieredPartition {
            active_base: log.segments.keys().next_back().copied().unwrap_or(0),
            reported_end: log.log_start_offset(),
            reported_bound: log
                .flushed_offset()
                .min(log.log_end_offset())
                .min(upload_limit),
            upload_limit,
            log,
            reg: Registration {
                link,
                shared,
                usage: Usage::default(),
            },
            retention,
        };
        p.log.keep_snapshots_above(p.reg.shared.deletable_below());
        let sealed = p.sealed_since(i64::MIN);
        p.reported_end = p.active_base;
        let entries = p.reg.shared.manifest();
        p.reg.link.send(Event::Register {
            partition: p.reg.shared.key(),
            registration: p.reg.shared.registration(),
            committed: entries
                .iter()
                .map(|e| (e.first_served(), e.last_offset))
                .collect(),
            sealed,
            high_watermark: p.reported_bound,
        });
        if let Err(e) = p.expire_producers() {
            tracing::warn!(dir = %p.log.dir().display(), error = %e, "could not expire producer state below the log start");
        }
        p.recount();
        p.offer_compacted_copies(None, now_wall_ms());
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

    /// The local log, read-only (its segments, its configuration). Every
    /// call the partition's owner makes has its own method here.
    pub fn log(&self) -> &PartitionLog {
        &self.log
    }

    /// Local data only (see [`PartitionLog::read`]): offsets below the
    /// local start fail with `OffsetOutOfRange` carrying the local start;
    /// read those with [`super::Tier::read`].
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        upper_bound: i64,
    ) -> Result<ReadSlice, StorageError> {
        self.log.read(offset, max_bytes, upper_bound)
    }

    /// ListOffsets by timestamp over local data (see
    /// [`PartitionLog::offset_for_timestamp`]); tiered data below the local
    /// start is searched by [`super::Tier::offset_for_timestamp`].
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<TimestampOffset>, StorageError> {
        self.log.offset_for_timestamp(ts)
    }

    /// ListOffsets MAX_TIMESTAMP over local data; merge it with
    /// [`super::Tier::max_timestamp`] by [`super::latest_max_timestamp`].
    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.log.max_timestamp()
    }

    /// OffsetForLeaderEpoch (see [`PartitionLog::epoch_end_offset`]).
    pub fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)> {
        self.log.epoch_end_offset(epoch)
    }

    /// A receiver of the log end offset (see [`PartitionLog::subscribe`]).
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.log.subscribe()
    }

    /// New log settings (topic config change); sizes apply from the next
    /// segment.
    pub fn set_config(&mut self, config: LogConfig) -> Result<(), StorageError> {
        self.log.set_config(config)
    }

    /// fsyncs everything appended so far (see [`PartitionLog::flush`]);
    /// uploads may then move on to what it made durable.
    pub fn flush(&mut self) -> Result<(), TierError> {
        let flushed = self.log.flush();
        self.after_write();
        Ok(flushed?)
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
        self.append_checked(records, leader_epoch, now_ms, None)
    }

    /// [`TieredPartition::append`] for a topic that validates schemas (see
    /// [`PartitionLog::append_checked`]).
    pub fn append_checked(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
        schemas: Option<&crate::SchemaRule>,
    ) -> Result<AppendOutcome, TierError> {
        self.admit(records.len() as u64, now_ms)?;
        let outcome = self
            .log
            .append_checked(records, leader_epoch, now_ms, schemas)?;
        if let AppendOutcome::Appended(info) = outcome {
            let mut usage = self.reg.usage;
            usage.local += info.bytes as u64;
            usage.pending += info.bytes as u64;
            self.publish(usage);
        }
        self.after_write();
        Ok(outcome)
    }

    /// Writes a transaction marker (see [`PartitionLog::append_marker`]);
    /// a marker is a few dozen bytes and is never refused for the disk
    /// budget: refusing it would keep the transaction open.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        control: crate::ControlType,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, TierError> {
        let info = self.log.append_marker(
            producer_id,
            producer_epoch,
            control,
            coordinator_epoch,
            leader_epoch,
            now_ms,
        )?;
        let mut usage = self.reg.usage;
        usage.local += info.bytes as u64;
        usage.pending += info.bytes as u64;
        self.publish(usage);
        self.after_write();
        Ok(info)
    }

    /// A follower's append of its leader's batches (see
    /// [`PartitionLog::append_replicated`]), refused like
    /// [`TieredPartition::append`] with [`TierError::Backpressure`] while
    /// the node's local disk budget is exhausted by data not yet in object
    /// storage.
    pub fn append_replicated(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<ReplicaAppend, TierError> {
        let incoming = records.len() as u64;
        self.admit(incoming, now_ms)?;
        let appended = self.log.append_replicated(records, now_ms)?;
        if appended.bytes > 0 {
            let mut usage = self.reg.usage;
            usage.local += appended.bytes as u64;
            usage.pending += appended.bytes as u64;
            self.publish(usage);
        }
        self.after_write();
        Ok(appended)
    }

    /// Follower truncation (see [`PartitionLog::truncate_to`]), keeping the
    /// uploader's view right: sealed segments it was told about that the
    /// truncation cut or deleted are withdrawn before they are uploaded (an
    /// upload already running completes into nothing), and the segments
    /// sealed afterwards are reported anew. Refused with
    /// [`TierError::TruncationBelowTiered`] below the end of what object
    /// storage has committed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), TierError> {
        if offset >= self.log.log_end_offset() {
            return Ok(());
        }
        self.refuse_below_tiered(offset)?;
        let from = if offset < self.log.log_start_offset() {
            i64::MIN
        } else {
            self.log
                .segments
                .range(..=offset)
                .next_back()
                .map_or(i64::MIN, |(base, _)| *base)
        };
        let truncated = self.log.truncate_to(offset);
        self.after_truncation(from);
        Ok(truncated?)
    }

    /// Empties the local log and restarts it at `offset` (see
    /// [`PartitionLog::truncate_fully_and_start_at`]); every sealed segment
    /// reported to the uploader and not yet committed is withdrawn.
    /// Refused with [`TierError::TruncationBelowTiered`] below the end of
    /// what object storage has committed, unless `offset` is at or past
    /// the local log end: a follower that fell below its leader's local
    /// start restarts there, and that start may lie inside tiered offsets
    /// (a new leader's segment straddling its predecessor's last entry);
    /// such a restart gives up no local batch and takes the leader's
    /// batches, which object storage holds too.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), TierError> {
        if offset < self.log.log_end_offset() {
            self.refuse_below_tiered(offset)?;
        }
        let truncated = self.log.truncate_fully_and_start_at(offset);
        self.after_truncation(i64::MIN);
        Ok(truncated?)
    }

    /// Restores idempotent producer state from the snapshot uploaded with
    /// the tiered segment that ends where this empty log starts (see
    /// [`PartitionLog::restore_producers`] and
    /// [`super::Tier::producer_snapshot`]); whether it was restored.
    pub fn restore_producers(&mut self, snapshot: &[u8]) -> Result<bool, TierError> {
        Ok(self.log.restore_producers(snapshot)?)
    }

    fn refuse_below_tiered(&self, offset: i64) -> Result<(), TierError> {
        match self.reg.shared.tiered_last() {
            Some(last) if offset <= last => Err(TierError::TruncationBelowTiered {
                offset,
                tiered_end: last.saturating_add(1),
            }),
            _ => Ok(()),
        }
    }

    /// After a truncation, even one that failed part-way: withdraws the
    /// sealed segments from `from` on, lowers the upload bound, and reports
    /// from the new active segment on. (Segments a failed truncation left
    /// in place are withdrawn too: they stay on local disk, never deletable
    /// before an upload, and are reported again when the partition is next
    /// opened.)
    fn after_truncation(&mut self, from: i64) {
        let active = self.log.segments.keys().next_back().copied().unwrap_or(0);
        self.active_base = active;
        self.reported_end = active;
        self.reported_bound = self.upload_bound();
        self.reg.link.send(Event::Truncated {
            partition: self.reg.shared.key(),
            from,
            high_watermark: self.reported_bound,
        });
        self.recount();
    }

    /// A compaction run due now (see [`crate::compaction`]), only over
    /// segments object storage already holds, and below the first segment
    /// whose compacted copy is being uploaded: an upload reads a segment's
    /// files by name, and must never read one while it is being replaced.
    pub fn plan_compaction(
        &self,
        now_ms: i64,
        upper_bound: i64,
    ) -> Option<crate::compaction::CompactionJob> {
        let job = self
            .log
            .plan_compaction(now_ms, upper_bound.min(self.evictable_below()))?;
        // Older offsets only in object storage are not compacted by this
        // run: a tombstone removed here could leave a value it deleted
        // readable there. Keep them all while any local copy was evicted.
        let evicted = self.local_log_start_offset() > self.log_start_offset();
        Some(if evicted {
            job.keeping_tombstones()
        } else {
            job
        })
    }

    /// Installs a finished compaction run (see
    /// [`PartitionLog::install_compaction`]) and counts the bytes it freed.
    /// On a leader (a partition whose upload limit is past the segment),
    /// each new segment whose offsets one manifest entry serves exactly,
    /// with a larger object, or several consecutive entries serve together
    /// (local compaction merged their segments), goes to the uploader,
    /// which uploads it under new keys and swaps it into the manifest in
    /// place of those entries; until that is
    /// over the segment is neither compacted again nor evicted. A follower
    /// only compacts its own copy: its leader uploads.
    pub fn install_compaction(
        &mut self,
        done: crate::compaction::Compacted,
        now_ms: i64,
    ) -> Result<crate::compaction::CompactionReport, TierError> {
        // a run planned before a segment's re-upload began leaves it alone
        let shared = Arc::clone(&self.reg.shared);
        let (report, installed) = self
            .log
            .install_compaction_segments(done, now_ms, |base| shared.is_reuploading(base))?;
        self.recount();
        self.offer_compacted_copies(Some(&installed), now_ms);
        Ok(report)
    }

    /// Hands the uploader the sealed segments among `bases` (every sealed
    /// segment when `None`: a leader's opening, a follower becoming
    /// leader) that are smaller than the manifest entry serving exactly
    /// their offsets (compacted since that entry was uploaded), or whose
    /// offsets several consecutive entries serve together (merged since).
    fn offer_compacted_copies(&mut self, bases: Option<&[i64]>, now_ms: i64) {
        let entries = self.reg.shared.manifest();
        if entries.is_empty() || (bases.is_some_and(<[i64]>::is_empty)) {
            return;
        }
        let candidates: Vec<&crate::segment::Segment> = match bases {
            Some(bases) => bases
                .iter()
                .filter_map(|b| self.log.segments.get(b))
                .collect(),
            None => self.log.segments.values().collect(),
        };
        let mut offered = Vec::new();
        for seg in candidates {
            let last = seg.next_offset - 1;
            if !seg.sealed || last < seg.base_offset || last >= self.upload_limit {
                continue;
            }
            if super::manifest::replaced_by(&entries, seg.base_offset, last, seg.size).is_none() {
                continue;
            }
            if let Some(s) = SealedSegment::from_info(&seg.info()) {
                offered.push(s);
            }
        }
        if offered.is_empty() {
            return;
        }
        for s in &offered {
            self.reg.shared.mark_reuploading(s.base_offset);
        }
        self.reg.link.send(Event::Recompacted {
            partition: self.reg.shared.key(),
            registration: self.reg.shared.registration(),
            segments: offered,
            generation: u64::try_from(now_ms).unwrap_or(0).max(1),
        });
    }

    /// Local segments wholly below this may be evicted or compacted: what
    /// object storage holds, up to the first segment being re-uploaded.
    fn evictable_below(&self) -> i64 {
        let deletable = self.reg.shared.deletable_below();
        self.reg
            .shared
            .first_reuploading()
            .map_or(deletable, |base| deletable.min(base))
    }

    /// Timers of the log, then local retention below what is committed.
    pub fn tick(&mut self, now_ms: i64) -> Result<(), TierError> {
        self.log.tick(now_ms)?;
        self.after_write();
        let deletable = self.reg.shared.deletable_below();
        // sealed segments above it upload their producer snapshots
        self.log.keep_snapshots_above(deletable);
        let evictable = self.evictable_below();
        if evictable > self.log.log_start_offset() {
            let budget = Arc::clone(&self.reg.link.budget);
            if budget.local_over(0) {
                self.evict_tiered(now_ms, &budget)?;
            } else {
                self.log.evict_local_copies(
                    now_ms,
                    self.retention.local_retention_bytes,
                    self.retention.local_retention_ms,
                    evictable,
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

    /// Makes room for an append of `incoming` bytes under the local disk
    /// budget, or refuses it with [`TierError::Backpressure`].
    fn admit(&mut self, incoming: u64, now_ms: i64) -> Result<(), TierError> {
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
        Ok(())
    }

    /// Deletes every local segment already in object storage (disk pressure).
    fn evict_tiered(&mut self, now_ms: i64, budget: &DiskBudget) -> Result<(), TierError> {
        let deletable = self.evictable_below();
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
        self.log
            .flushed_offset()
            .min(self.log.log_end_offset())
            .min(self.upload_limit)
    }

    /// Uploads only offsets below `limit` from now on: a replicated
    /// partition's leader passes its high watermark (data its in-sync
    /// replicas hold, which no failover takes back); a follower passes
    /// `i64::MIN` and uploads nothing. A bound already reported to the
    /// uploader is not taken back.
    pub fn set_upload_limit(&mut self, limit: i64) {
        if limit != self.upload_limit {
            let was_follower = self.upload_limit == i64::MIN;
            self.upload_limit = limit;
            self.after_write();
            if was_follower && limit > i64::MIN {
                // a new leader: copies it compacted as a follower go up now
                self.offer_compacted_copies(None, now_wall_ms());
            }
        }
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

/// Milliseconds since the epoch (compaction generations of re-uploads
/// opened without a caller's clock).
fn now_wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
