//! `PartitionLog`: the append-only log of one partition.
//!
//! Concurrency: a log is owned by exactly one task (the partition's shard)
//! and mutated through `&mut self`; there are no locks on the append path.
//! Readers on the same shard call [`PartitionLog::read`] and get a
//! [`ReadSlice`] holding an `Arc<File>`, which stays valid (as an open
//! descriptor) even if the segment is later deleted by retention. Waiters on
//! other tasks use [`PartitionLog::subscribe`] to learn of new data.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use crate::batch::{self, BatchHeader, Compression, TimestampType, ValidBatch};
use crate::config::LogConfig;
use crate::epoch::LeaderEpochCache;
use crate::error::{IoContext, StorageError};
use crate::files;
use crate::flusher::{self, SealJob, Ticket};
use crate::health::Health;
use crate::pool::Gate;
use crate::producer::{ProducerStates, Staged};
use crate::recovery;
use crate::segment::{Placed, Segment, SegmentInfo};
use crate::txn::AbortedIndex;

/// Snapshots of producer state kept on disk (newest first).
const SNAPSHOTS_KEPT: usize = 2;

/// Result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The batches were written at the offsets in the info.
    Appended(AppendInfo),
    /// An idempotent producer retried a batch the log already holds; nothing
    /// was written and the info gives the original offsets.
    Duplicate(AppendInfo),
}

impl AppendOutcome {
    pub fn info(&self) -> &AppendInfo {
        match self {
            AppendOutcome::Appended(i) | AppendOutcome::Duplicate(i) => i,
        }
    }
}

/// Offsets and times assigned by an append (what a ProduceResponse needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The append time when the topic uses LogAppendTime, else -1 (Kafka's
    /// ProduceResponse `log_append_time_ms`).
    pub log_append_time_ms: i64,
    /// Largest batch max timestamp of the append (after stamping).
    pub max_timestamp: i64,
    pub record_count: u32,
    /// Bytes written (0 for a duplicate).
    pub bytes: usize,
}

/// A `(timestamp, offset)` answer for ListOffsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

/// Whole batches in one segment file, ready to be sent as a Fetch
/// response's `records`: with `sendfile(file, position, len)` on plain TCP,
/// or [`ReadSlice::read_to_bytes`] where bytes must pass through userspace.
#[derive(Debug, Clone)]
pub struct ReadSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: usize,
    /// Base offset of the first batch (may be below the requested offset:
    /// Kafka clients skip records before the one they asked for).
    pub first_offset: i64,
    /// Offset after the last batch included; the next fetch offset.
    pub next_offset: i64,
}

impl ReadSlice {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads the slice into memory with `pread`.
    pub fn read_to_bytes(&self) -> std::io::Result<Bytes> {
        let mut buf = vec![0u8; self.len];
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(Bytes::from(buf))
    }
}

/// The log of one partition. See the crate docs for the on-disk layout.
#[derive(Debug)]
pub struct PartitionLog {
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    /// By base offset; the last one is the active segment. Never empty.
    pub(crate) segments: BTreeMap<i64, Segment>,
    pub(crate) log_start: i64,
    /// Producer state is kept for batches down to this; below `log_start`
    /// only while local copies were evicted but the batches still exist
    /// elsewhere (see `retention`).
    pub(crate) producer_start: i64,
    pub(crate) epochs: LeaderEpochCache,
    pub(crate) producers: ProducerStates,
    pub(crate) end_tx: watch::Sender<i64>,
    pub(crate) unflushed_records: u64,
    pub(crate) first_unflushed_ms: Option<i64>,
    /// Every offset below this is durable (not counting `pending`).
    pub(crate) flushed_offset: i64,
    /// Background seal flushes in roll order.
    pub(crate) pending: VecDeque<PendingFlush>,
    /// Holds this log's background flushes while set (tests only).
    pub(crate) flush_gate: Option<Arc<Gate>>,
    /// Offline once a write, fsync or writeback failed; shared with the
    /// log's background jobs (see `health`).
    pub(crate) health: Arc<Health>,
    /// Truncations so far: a durability point started before one does not
    /// cover the offsets it rewrote (see `sync`).
    pub(crate) truncations: u64,
    /// Picks where each segment rolls within the jitter (a hash of the
    /// log's directory: a different point for each partition).
    pub(crate) roll_seed: u64,
    /// Producer snapshots at offsets above this are kept whatever their
    /// number: the sealed segments ending there still upload them (see
    /// `snapshots`). `i64::MAX` for a log without object storage.
    pub(crate) snapshots_needed_above: i64,
    /// Aborted transactions of the whole log (see `txn`).
    pub(crate) aborted: AbortedIndex,
    /// Where compaction stands (see `compaction`).
    pub(crate) cleaner: crate::cleaner::CleanerState,
}

/// A roll whose fsyncs run in the background: once its ticket succeeds,
/// every offset below `end` is durable.
#[derive(Debug)]
pub(crate) struct PendingFlush {
    pub(crate) end: i64,
    pub(crate) ticket: Arc<Ticket>,
}

impl PartitionLog {
    /// Opens the log in `dir`, creating it if needed, or recovering it
    /// (torn tail cut, indexes rebuilt, producer state reloaded).
    pub fn open(dir: &Path, config: LogConfig) -> Result<PartitionLog, StorageError> {
        config.validate()?;
        let r = recovery::recover(dir, &config)?;
        let log_end = r
            .segments
            .values()
            .next_back()
            .map_or(r.log_start, |s| s.next_offset);
        let (end_tx, _) = watch::channel(log_end);
        let cleaner = crate::cleaner::load(dir, log_end)?;
        let mut log = PartitionLog {
            dir: dir.to_path_buf(),
            config,
            segments: r.segments,
            log_start: r.log_start,
            producer_start: r.producer_start,
            epochs: r.epochs,
            producers: r.producers,
            aborted: r.aborted,
            end_tx,
            unflushed_records: 0,
            first_unflushed_ms: None,
            flushed_offset: log_end,
            pending: VecDeque::new(),
            flush_gate: None,
            health: Arc::new(Health::default()),
            truncations: 0,
            roll_seed: roll_seed(dir),
            snapshots_needed_above: i64::MAX,
            cleaner,
        };
        let config = log.config.clone();
        log.active_mut().unseal(&config)?;
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Replaces the settings; new sizes apply from the next segment.
    pub fn set_config(&mut self, config: LogConfig) -> Result<(), StorageError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// Every offset below this has been fsynced. Rolls fsync the sealed
    /// segment in the background; this moves past it only once that has
    /// completed (checked without blocking).
    pub fn flushed_offset(&self) -> i64 {
        let mut flushed = self.flushed_offset;
        for p in &self.pending {
            if !p.ticket.succeeded() {
                break;
            }
            flushed = flushed.max(p.end);
        }
        flushed
    }

    /// Latest partition leader epoch seen by the log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest().map(|e| e.epoch)
    }

    /// Number of idempotent producers the log remembers.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// A receiver of the log end offset, updated after every append and
    /// truncation. Long-polling fetches await `changed()` on it.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.end_tx.subscribe()
    }

    pub(crate) fn active(&self) -> &Segment {
        match self.segments.values().next_back() {
            Some(s) => s,
            None => unreachable!("a partition log always has an active segment"),
        }
    }

    pub(crate) fn active_mut(&mut self) -> &mut Segment {
        match self.segments.values_mut().next_back() {
            Some(s) => s,
            None => unreachable!("a partition log always has an active segment"),
        }
    }

    pub(crate) fn check_online(&self) -> Result<(), StorageError> {
        self.health.check(&self.dir)
    }

    /// Appends one or more v2 batches (a Produce partition's `records`).
    ///
    /// All batches are validated (framing, CRC-32C, sizes, record counts,
    /// producer id/epoch/sequence) before any byte is written; then base
    /// offsets and `leader_epoch` are stamped into `records` in place and
    /// the bytes are written unchanged otherwise. With LogAppendTime the max
    /// timestamp is set to `now_ms` and the CRC recomputed. A transactional
    /// batch opens its producer's transaction (see `txn`); control
    /// batches come only from [`PartitionLog::append_marker`]. If one batch is a retry of an idempotent producer's recent batch,
    /// nothing is written and [`AppendOutcome::Duplicate`] is returned.
    /// A follower appends what its leader stamped with
    /// [`PartitionLog::append_replicated`] instead.
    pub fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome, StorageError> {
        self.append_checked(records, leader_epoch, now_ms, None)
    }

    /// [`PartitionLog::append`] for a topic that validates schemas: the
    /// records' keys or values must carry ids of `schemas` (see
    /// [`crate::schema_ids`]), else nothing is written and
    /// [`StorageError::SchemaValidation`] names the records.
    pub fn append_checked(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
        schemas: Option<&crate::SchemaRule>,
    ) -> Result<AppendOutcome, StorageError> {
        let batches = self.validate_for_append(records, false, schemas)?;
        if let Some(latest) = self.epochs.latest() {
            if leader_epoch < latest.epoch {
                return Err(StorageError::StaleLeaderEpoch {
                    received: leader_epoch,
                    latest: latest.epoch,
                });
            }
        }

        let log_append = self.config.timestamp_type == TimestampType::LogAppendTime;
        let first_offset = self.log_end_offset();
        let mut next = first_offset;
        let mut staged = Staged::default();
        let mut placed = Vec::with_capacity(batches.len());
        for b in &batches {
            let h = &b.header;
            if h.has_producer_id() {
                if let Some(dup) = self
                    .producers
                    .check_and_stage(&mut staged, h, next, now_ms)?
                {
                    return Ok(AppendOutcome::Duplicate(AppendInfo {
                        base_offset: dup.first_offset,
                        last_offset: dup.last_offset,
                        log_append_time_ms: if log_append { dup.max_timestamp } else { -1 },
                        max_timestamp: dup.max_timestamp,
                        record_count: u32::try_from(dup.last_offset - dup.first_offset + 1)
                            .unwrap_or(u32::MAX),
                        bytes: 0,
                    }));
                }
            }
            let p = place(b, next, if log_append { now_ms } else { h.max_timestamp })?;
            next = p.next_offset;
            placed.push(p);
        }

        self.maybe_roll(records.len() as u64, next, now_ms)?;
        for p in &placed {
            let bytes = &mut records[p.position_in_buf..p.position_in_buf + p.len];
            batch::stamp(bytes, p.base_offset, leader_epoch);
            if log_append {
                batch::set_log_append_time(bytes, now_ms);
            }
        }
        if self.epochs.assign(leader_epoch, first_offset) {
            self.epochs.persist()?;
        }
        self.write_placed(records, &placed, now_ms)?;
        self.producers.commit(staged);
        let record_count = next - first_offset;
        Ok(AppendOutcome::Appended(AppendInfo {
            base_offset: first_offset,
            last_offset: next - 1,
            log_append_time_ms: if log_append { now_ms } else { -1 },
            max_timestamp: placed.iter().map(|p| p.max_timestamp).max().unwrap_or(-1),
            record_count: u32::try_from(record_count).unwrap_or(u32::MAX),
            bytes: records.len(),
        }))
    }

    /// The first step of every append, before any offset is looked at: the
    /// log is online and every batch of `records` is valid (see
    /// [`batch::validate_all`]), and none is a control batch unless
    /// `markers` (a leader's batches, replicated) allows them.
    pub(crate) fn validate_for_append(
        &mut self,
        records: &[u8],
        markers: bool,
        schemas: Option<&crate::SchemaRule>,
    ) -> Result<Vec<ValidBatch>, StorageError> {
        self.poll_flushes();
        self.check_online()?;
        let mut limits = self.config.batch_limits();
        // a leader's batches, replicated, were checked when it took them
        limits.require_keys = self.config.compacted && !markers;
        // and may come from a compacted part of its log
        limits.sparse_offsets = markers;
        // a leader's batches were checked against the registry when it took them
        let schemas = schemas.filter(|_| !markers);
        let batches = batch::validate_all_with(records, limits, schemas)?;
        for b in &batches {
            if b.header.is_control() && !markers {
                return Err(StorageError::InvalidRecord {
                    position: b.position,
                    reason: "control batches are written by the broker, not by producers".into(),
                });
            }
        }
        Ok(batches)
    }

    /// The last step of every append: writes `records`, whose batches are
    /// `placed` (in order, dense from the log end) and already hold their
    /// final bytes, at the end of the active segment (rolled beforehand by
    /// [`PartitionLog::maybe_roll`]); fsyncs if `flush.messages` asks for
    /// it; publishes the new log end. A failure cuts the bytes back out
    /// (see [`PartitionLog::undo_append`]) and is returned.
    pub(crate) fn write_placed(
        &mut self,
        records: &[u8],
        placed: &[Placed],
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let (Some(first), Some(last)) = (placed.first(), placed.last()) else {
            return Ok(());
        };
        let record_count = u64::try_from(last.next_offset - first.base_offset).unwrap_or(0);
        let config = self.config.clone();
        let health = Arc::clone(&self.health);
        let flush_due = self
            .config
            .flush_messages
            .is_some_and(|n| self.unflushed_records + record_count >= n);
        let old_size = self.active().size;
        let written = self
            .active_mut()
            .append(records, placed, &config, now_ms, &health);
        let result = match written {
            Ok(()) if flush_due => self.flush(),
            other => other,
        };
        if let Err(e) = result {
            self.undo_append(old_size, &e);
            return Err(e);
        }
        if !flush_due {
            self.unflushed_records += record_count;
            self.first_unflushed_ms.get_or_insert(now_ms);
        }
        self.end_tx.send_replace(last.next_offset);
        Ok(())
    }

    /// Undoes an append that failed at or after its write: cuts the active
    /// segment back to `old_size` and, if the append was indexed, rebuilds
    /// the segment's in-memory state, so that neither readers nor the next
    /// open see bytes whose append was answered with an error. A write that
    /// failed outright (a full disk, say) leaves the log online once cut
    /// back. A failure after the write (the start or wait of its writeback,
    /// or the fsync `flush.messages` asked for) takes the log offline:
    /// bytes appended before may not be durable either.
    fn undo_append(&mut self, old_size: u64, e: &StorageError) {
        let interval = self.config.index_interval_bytes;
        let seg = self.active_mut();
        let indexed = seg.size != old_size;
        let undone = seg.set_size(old_size).and_then(|()| {
            if indexed {
                seg.rebuild(false, interval, |_| {}).map(|_| ())
            } else {
                Ok(())
            }
        });
        match undone {
            Err(undo) => self
                .health
                .set_offline(format!("{e}; then could not cut the append back: {undo}")),
            Ok(()) if indexed => self
                .health
                .set_offline(format!("an append failed after its write: {e}")),
            Ok(()) => {}
        }
    }

    /// Rolls before an append of `bytes` ending at `next_offset` if the
    /// active segment would pass `segment.bytes`, its relative offsets would
    /// overflow, or its offset index is full.
    pub(crate) fn maybe_roll(
        &mut self,
        bytes: u64,
        next_offset: i64,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let seg = self.active();
        if seg.is_empty() {
            return Ok(());
        }
        let limit = self.config.segment_bytes
            - roll_jitter(
                self.roll_seed,
                seg.base_offset,
                self.config.segment_jitter_bytes,
            );
        let too_big = seg.size + bytes > limit;
        let offsets_overflow = next_offset - seg.base_offset > i64::from(i32::MAX);
        if too_big || offsets_overflow || seg.offset_index.is_full() {
            self.roll(now_ms)?;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one at the log end.
    pub(crate) fn roll(&mut self, now_ms: i64) -> Result<(), StorageError> {
        let log_end = self.log_end_offset();
        if self.active().is_empty() {
            return Ok(());
        }
        // Only cheap, non-blocking work here: the fsyncs that make the
        // sealed segment durable run on the flusher (see `flusher`).
        let progress = self.active().pacer.progress();
        let targets = self.active_mut().seal_deferred()?;
        self.unflushed_records = 0;
        self.first_unflushed_ms = None;
        if let Err(e) = self.producers.write_snapshot(&self.dir, log_end) {
            tracing::warn!(error = %e, "could not write producer snapshot; recovery will scan further");
        }
        self.prune_snapshots(SNAPSHOTS_KEPT)?;
        let mut seg = Segment::create_unsynced(&self.dir, log_end, &self.config)?;
        seg.created_ms = Some(now_ms);
        self.segments.insert(log_end, seg);
        let ticket = Arc::new(Ticket::default());
        flusher::submit(SealJob {
            dir: self.dir.clone(),
            targets,
            recovery_point: log_end,
            ticket: ticket.clone(),
            progress,
            health: Arc::clone(&self.health),
            gate: self.flush_gate.clone(),
        });
        self.pending.push_back(PendingFlush {
            end: log_end,
            ticket,
        });
        Ok(())
    }

    /// Retires finished background flushes without blocking. A failed one
    /// takes the log offline: bytes it acknowledged may not be durable.
    pub(crate) fn poll_flushes(&mut self) {
        while let Some(p) = self.pending.front() {
            match p.ticket.poll() {
                None => return,
                Some(Ok(())) => self.flushed_offset = self.flushed_offset.max(p.end),
                Some(Err(f)) => {
                    self.health
                        .set_offline(format!("background fsync failed: {}", f.to_error()));
                }
            }
            self.pending.pop_front();
        }
    }

    /// Waits for every background flush (the durability points).
    pub(crate) fn wait_flushes(&mut self) -> Result<(), StorageError> {
        while let Some(p) = self.pending.pop_front() {
            match p.ticket.wait() {
                Ok(()) => self.flushed_offset = self.flushed_offset.max(p.end),
                Err(f) => {
                    let e = f.to_error();
                    self.health
                        .set_offline(format!("background fsync failed: {e}"));
                    self.pending.clear();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Holds this log's background flushes until the returned guard is
    /// opened or dropped (so a failing test cannot wedge a shared worker).
    #[cfg(test)]
    pub(crate) fn hold_flushes(&mut self) -> crate::pool::GateGuard {
        let g = Gate::closed();
        self.flush_gate = Some(g.clone());
        crate::pool::GateGuard(g)
    }

    /// fsyncs everything appended so far: waits for the background
    /// flushes of earlier rolls, then fsyncs the active segment and checks
    /// that none of its writeback waits failed. A failure takes the log
    /// offline: bytes it acknowledged may not be durable.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        self.check_online()?;
        let r = self.flush_all();
        if let Err(e) = &r {
            self.health.set_offline(format!("flush failed: {e}"));
        }
        r
    }

    fn flush_all(&mut self) -> Result<(), StorageError> {
        self.wait_flushes()?;
        let end = self.log_end_offset();
        self.active().sync_durable()?;
        self.flushed_offset = end;
        self.unflushed_records = 0;
        self.first_unflushed_ms = None;
        Ok(())
    }

    /// Timers: `flush.ms`, `segment.ms`, producer id expiry.
    pub fn tick(&mut self, now_ms: i64) -> Result<(), StorageError> {
        self.poll_flushes();
        self.check_online()?;
        if let (Some(ms), Some(first)) = (self.config.flush_ms, self.first_unflushed_ms) {
            if now_ms.saturating_sub(first) >= ms as i64 {
                self.flush()?;
            }
        }
        if let Some(ms) = self.config.segment_ms {
            let seg = self.active_mut();
            if !seg.is_empty() {
                let created = *seg.created_ms.get_or_insert(now_ms);
                if now_ms.saturating_sub(created) >= ms as i64 {
                    self.roll(now_ms)?;
                }
            }
        }
        let expiry = i64::try_from(self.config.producer_id_expiration_ms).unwrap_or(i64::MAX);
        self.producers.expire(now_ms, expiry);
        Ok(())
    }

    /// Whole batches from the one holding `offset`, up to `max_bytes` (the
    /// first batch is returned whole even if larger, as Kafka does), none
    /// holding an offset `>= upper_bound` (e.g. the high watermark).
    /// Empty at the log end; `OffsetOutOfRange` outside `[start, end]`.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        upper_bound: i64,
    ) -> Result<ReadSlice, StorageError> {
        let log_end = self.log_end_offset();
        if offset < self.log_start || offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end,
            });
        }
        let bound = upper_bound.min(log_end);
        if offset < bound {
            let start = self
                .segments
                .range(..=offset)
                .next_back()
                .map_or(self.log_start, |(k, _)| *k);
            for seg in self.segments.range(start..).map(|(_, s)| s) {
                if let Some(span) = seg.read(offset, max_bytes as u64, bound)? {
                    return Ok(ReadSlice {
                        file: seg.file.clone(),
                        position: span.position,
                        len: span.len as usize,
                        first_offset: span.first_offset,
                        next_offset: if span.len == 0 {
                            offset
                        } else {
                            span.next_offset
                        },
                    });
                }
            }
        }
        let active = self.active();
        Ok(ReadSlice {
            file: active.file.clone(),
            position: active.size,
            len: 0,
            first_offset: offset,
            next_offset: offset,
        })
    }

    /// ListOffsets by timestamp: the first record at or after the log start
    /// whose timestamp is `>= ts`. Exact for uncompressed CreateTime
    /// batches; for compressed batches the batch's first offset (records are
    /// not decompressed), which never skips a matching record.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<TimestampOffset>, StorageError> {
        for seg in self.segments.values() {
            if seg.is_empty() || seg.max_timestamp < ts || seg.next_offset <= self.log_start {
                continue;
            }
            let mut found = seg.find_timestamp(ts)?;
            while let Some((pos, h)) = found {
                if h.last_offset() >= self.log_start {
                    return Ok(Some(self.refine_in_batch(seg, pos, &h, |t| t >= ts)?));
                }
                let next = pos + h.total_len().unwrap_or(0) as u64;
                found = next_batch_with(seg, next, ts)?;
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the largest timestamp and the first record
    /// carrying it (batch granularity for compressed batches).
    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        let seg = self
            .segments
            .values()
            .filter(|s| !s.is_empty() && s.max_timestamp >= 0)
            .max_by_key(|s| (s.max_timestamp, -s.base_offset))?;
        let max = seg.max_timestamp;
        let approx = TimestampOffset {
            timestamp: max,
            offset: seg.offset_of_max_timestamp.max(self.log_start),
        };
        let refined = seg
            .translate(seg.offset_of_max_timestamp)
            .ok()
            .flatten()
            .and_then(|(pos, h)| self.refine_in_batch(seg, pos, &h, |t| t >= max).ok());
        Some(refined.unwrap_or(approx))
    }

    /// Finds the first record of a batch (at or after log start) whose
    /// timestamp satisfies `hit`, reading the batch only when it is
    /// uncompressed and CreateTime.
    fn refine_in_batch(
        &self,
        seg: &Segment,
        pos: u64,
        h: &BatchHeader,
        hit: impl Fn(i64) -> bool,
    ) -> Result<TimestampOffset, StorageError> {
        let fallback = TimestampOffset {
            timestamp: h.max_timestamp,
            offset: h.base_offset.max(self.log_start),
        };
        if h.timestamp_type() == TimestampType::LogAppendTime
            || h.compression() != Ok(Compression::None)
        {
            return Ok(fallback);
        }
        let len = h.total_len().unwrap_or(0);
        let mut buf = vec![0u8; len];
        seg.file
            .read_exact_at(&mut buf, pos)
            .ctx(|| format!("read {} at {pos}", seg.path.display()))?;
        for (delta, t) in batch::RecordTimestamps::new(&buf) {
            let offset = h.base_offset + i64::from(delta);
            if offset >= self.log_start && hit(t) {
                return Ok(TimestampOffset {
                    timestamp: t,
                    offset,
                });
            }
        }
        Ok(fallback)
    }

    /// OffsetForLeaderEpoch: `(epoch, end offset)` for the largest epoch at
    /// or below `epoch`, or `None` if `epoch` is above every known epoch.
    pub fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)> {
        self.epochs.end_offset_for(epoch, self.log_end_offset())
    }

    /// Bytes of record data on local disk, over every segment (indexes
    /// not counted).
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size).sum()
    }

    /// Segments in offset order; the last one is the active segment.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.segments.values().map(Segment::info).collect()
    }

    /// Waits for background flushes, fsyncs, writes the producer
    /// snapshot, the recovery point at the log end and the clean-shutdown
    /// marker, so the next open can skip scanning the active segment.
    pub fn close(mut self) -> Result<(), StorageError> {
        self.check_online()?;
        self.wait_flushes()?;
        let log_end = self.log_end_offset();
        let seg = self.active_mut();
        seg.sync_durable()?;
        seg.finish_indexes()?;
        self.producers.write_snapshot(&self.dir, log_end)?;
        self.prune_snapshots(SNAPSHOTS_KEPT)?;
        flusher::write_recovery_point(&self.dir, log_end)?;
        files::write_atomic(&self.dir, files::CLEAN_SHUTDOWN_FILE, b"", true)
    }
}

impl Drop for PartitionLog {
    /// A log dropped without `close` still lets its background flushes
    /// finish first: a reopen of the same directory must not see a stale
    /// recovery point land after its own.
    fn drop(&mut self) {
        for p in self.pending.drain(..) {
            if let Err(f) = p.ticket.wait() {
                tracing::warn!(dir = %self.dir.display(), error = %f.to_error(), "background flush failed before the log was dropped");
            }
        }
    }
}

/// Where batch `b` of an append goes: from `base_offset` on, with
/// `max_timestamp` as the time index will know it.
pub(crate) fn place(
    b: &ValidBatch,
    base_offset: i64,
    max_timestamp: i64,
) -> Result<Placed, StorageError> {
    let h = &b.header;
    let next_offset = base_offset
        .checked_add(i64::from(h.records_count))
        .ok_or_else(|| StorageError::InvalidRecord {
            position: b.position,
            reason: "offsets would overflow".into(),
        })?;
    Ok(Placed {
        position_in_buf: b.position,
        len: b.len,
        base_offset,
        next_offset,
        base_timestamp: h.base_timestamp,
        max_timestamp,
    })
}

fn next_batch_with(
    seg: &Segment,
    mut pos: u64,
    ts: i64,
) -> Result<Option<(u64, BatchHeader)>, StorageError> {
    while pos < seg.size {
        let h = seg.read_header(pos)?;
        if h.max_timestamp >= ts {
            return Ok(Some((pos, h)));
        }
        pos += h.total_len().unwrap_or(0) as u64;
    }
    Ok(None)
}

/// FNV-1a of the directory's path: stable across restarts, different for
/// each partition.
fn roll_seed(dir: &Path) -> u64 {
    dir.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

/// How many bytes before `segment.bytes` the segment starting at
/// `base_offset` rolls: a value in `0..=jitter` spread by a SplitMix64 step
/// over the log's seed and the segment's base offset.
fn roll_jitter(seed: u64, base_offset: i64, jitter: u64) -> u64 {
    if jitter == 0 {
        return 0;
    }
    let mut z = (seed ^ base_offset as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z % (jitter + 1)
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
