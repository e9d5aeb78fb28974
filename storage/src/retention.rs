//! Removing data from either end of a partition log: DeleteRecords and
//! retention at the start, follower truncation at the end.
//!
//! Ordering for crash safety: the new log start is checkpointed (fsynced)
//! before any segment file is unlinked, so a crash in between leaves files
//! below the log start that the next open deletes, never a log start that
//! points into deleted data.
//!
//! Removing records (DeleteRecords, retention) also forgets idempotent
//! producers whose last batch was removed. Evicting only local copies of
//! records that object storage holds does not: producer state is kept down
//! to `producer-start-offset` (checkpointed before the log start moves) and
//! expired when the log start across tiers passes it, as Kafka expires it
//! by the global log start (KIP-405). Otherwise a producer whose
//! acknowledgement was lost could retry after eviction and be stored twice. Truncation at the end first waits for the
//! background flushes of earlier rolls and lowers the recovery point
//! (durably) to the segment it cuts into, so a crash mid-way leaves that
//! segment and everything after it to be scanned on the next open.

use crate::error::StorageError;
use crate::files::{self, SNAPSHOT_EXT};
use crate::flusher;
use crate::log::PartitionLog;
use crate::recovery;
use crate::segment::{Segment, SegmentInfo};

/// What raising the local log start means for the records below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    /// The records are gone (DeleteRecords, retention of a plain log):
    /// idempotent producers whose last batch was among them are forgotten.
    Records,
    /// Only the local copies go; the records stay readable from object
    /// storage, so producer state is kept (Kafka expires it by the log start
    /// across tiers, KIP-405) until [`PartitionLog::expire_producers_below`]
    /// is told the start across tiers has passed it.
    LocalCopies,
}

impl PartitionLog {
    fn raise_log_start(&mut self, offset: i64, removal: Removal) -> Result<(), StorageError> {
        if removal == Removal::LocalCopies && self.producer_start < offset {
            // Before the log start moves, so a crash in between cannot lose
            // producer state that is still needed.
            recovery::write_producer_start(&self.dir, self.producer_start)?;
        }
        recovery::write_log_start(&self.dir, offset)?;
        self.log_start = offset;
        if self.epochs.truncate_from_start(offset) {
            self.epochs.persist()?;
        }
        if removal == Removal::Records {
            self.forget_producers_below(offset)?;
        }
        Ok(())
    }

    fn forget_producers_below(&mut self, offset: i64) -> Result<(), StorageError> {
        self.producers.remove_below(offset);
        // their records are gone: no fetch can need these entries again
        self.aborted.remove_below(offset);
        let kept_below_start = self.producer_start < self.log_start;
        self.producer_start = self.producer_start.max(offset);
        if offset >= self.log_start {
            files::remove_if_exists(&self.dir.join(files::PRODUCER_START_FILE))?;
        } else if kept_below_start {
            recovery::write_producer_start(&self.dir, self.producer_start)?;
        }
        Ok(())
    }

    /// Forgets idempotent producers whose last batch lies wholly below
    /// `offset`, the log start across tiers, when local copies below the
    /// local log start were evicted but their records still existed in
    /// object storage. Never raises the producer start past the local log
    /// start. Durable when it returns.
    pub fn expire_producers_below(&mut self, offset: i64) -> Result<(), StorageError> {
        let offset = offset.min(self.log_start);
        if offset <= self.producer_start {
            return Ok(());
        }
        self.forget_producers_below(offset)
    }

    /// Where idempotent producer state starts (the log start, or lower
    /// while evicted local copies are still held in object storage).
    pub fn producer_state_start(&self) -> i64 {
        self.producer_start
    }

    /// Deletes sealed segments whose every offset is below the log start.
    fn drop_segments_below_start(&mut self) -> Result<Vec<SegmentInfo>, StorageError> {
        let mut out = Vec::new();
        while self.segments.len() > 1 {
            let below = self
                .segments
                .first_key_value()
                .is_some_and(|(_, s)| s.next_offset <= self.log_start);
            if !below {
                break;
            }
            if let Some((_, s)) = self.segments.pop_first() {
                out.push(s.delete()?);
            }
        }
        Ok(out)
    }

    /// DeleteRecords: makes `offset` the new log start (persisted) and
    /// deletes whole segments below it. Returns the log start afterwards.
    /// `offset` may not exceed the log end (the caller checks it against
    /// the high watermark).
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, StorageError> {
        let log_end = self.log_end_offset();
        if offset > log_end || offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end,
            });
        }
        if offset <= self.log_start {
            return Ok(self.log_start);
        }
        self.raise_log_start(offset, Removal::Records)?;
        if offset == log_end && !self.active().is_empty() {
            // Everything is deleted: seal the active segment so it can go.
            let now = self.active().created_ms.unwrap_or(0);
            self.roll(now)?;
        }
        self.drop_segments_below_start()?;
        self.prune_snapshots(usize::MAX)?;
        Ok(self.log_start)
    }

    /// Deletes the oldest sealed segments while the log is larger than
    /// `retention_bytes` or their newest timestamp is older than
    /// `retention_ms`, but only segments wholly below `deletable_below`
    /// (e.g. the end of what tiering has committed to object storage).
    /// The active segment is never deleted. Returns what was deleted.
    pub fn enforce_retention(
        &mut self,
        now_ms: i64,
        retention_bytes: Option<u64>,
        retention_ms: Option<u64>,
        deletable_below: i64,
    ) -> Result<Vec<SegmentInfo>, StorageError> {
        self.remove_old_segments(
            now_ms,
            retention_bytes,
            retention_ms,
            deletable_below,
            Removal::Records,
        )
    }

    /// Retention of local copies only, as [`PartitionLog::enforce_retention`]
    /// but below `deletable_below` the records live on in object storage, so
    /// idempotent producer state is kept (see [`Removal::LocalCopies`]).
    pub(crate) fn evict_local_copies(
        &mut self,
        now_ms: i64,
        retention_bytes: Option<u64>,
        retention_ms: Option<u64>,
        deletable_below: i64,
    ) -> Result<Vec<SegmentInfo>, StorageError> {
        self.remove_old_segments(
            now_ms,
            retention_bytes,
            retention_ms,
            deletable_below,
            Removal::LocalCopies,
        )
    }

    fn remove_old_segments(
        &mut self,
        now_ms: i64,
        retention_bytes: Option<u64>,
        retention_ms: Option<u64>,
        deletable_below: i64,
        removal: Removal,
    ) -> Result<Vec<SegmentInfo>, StorageError> {
        self.remove_old_segments_inner(
            now_ms,
            retention_bytes,
            retention_ms,
            deletable_below,
            removal,
        )
        .map_err(|e| {
            tracing::warn!(dir = %self.dir.display(), error = %e, "retention failed");
            e
        })
    }

    fn remove_old_segments_inner(
        &mut self,
        now_ms: i64,
        retention_bytes: Option<u64>,
        retention_ms: Option<u64>,
        deletable_below: i64,
        removal: Removal,
    ) -> Result<Vec<SegmentInfo>, StorageError> {
        let mut total: u64 = self.segments.values().map(|s| s.size).sum();
        let mut new_start = None;
        let sealed: Vec<&Segment> = self.segments.values().filter(|s| s.sealed).collect();
        for seg in sealed {
            if seg.next_offset > deletable_below {
                break;
            }
            let by_size = retention_bytes.is_some_and(|rb| total - seg.size >= rb);
            let by_time = retention_ms.is_some_and(|ms| {
                seg.retention_time().is_some_and(|t| {
                    now_ms.saturating_sub(t) > i64::try_from(ms).unwrap_or(i64::MAX)
                })
            });
            if !(by_size || by_time) {
                break;
            }
            total -= seg.size;
            new_start = Some(seg.next_offset);
        }
        let Some(start) = new_start else {
            return Ok(Vec::new());
        };
        if start > self.log_start {
            self.raise_log_start(start, removal)?;
        }
        let deleted = self.drop_segments_below_start()?;
        self.prune_snapshots(usize::MAX)?;
        Ok(deleted)
    }

    /// Follower truncation: removes every batch holding an offset
    /// `>= offset`. A batch that straddles `offset` goes whole, so the log
    /// end afterwards may be below `offset`. Below the log start, the log is
    /// emptied and restarted at `offset`. The segment cut into is never
    /// modified in place when one of its files is hard-linked elsewhere
    /// (an uploaded segment in the local object store): it is cut in a
    /// copy. Leader epochs and producer state starting at or after the new
    /// end are forgotten.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        if offset < self.log_start {
            return self.truncate_fully_and_start_at(offset);
        }
        let keep_key = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(self.log_start, |(k, _)| *k);
        self.wait_flushes()?;
        flusher::write_recovery_point(&self.dir, keep_key)?;
        // Cut first, then delete the segments after it: a crash in between
        // leaves the cut segment ending before the next one begins, which
        // the next open takes for the log end (see `recovery`). Deleting
        // first could leave a sealed segment whose file is shared with
        // object storage as the last one, to be appended to.
        let config = self.config.clone();
        if let Some(seg) = self.segments.get_mut(&keep_key) {
            seg.truncate_to(offset, &config)?;
        }
        let doomed: Vec<i64> = self
            .segments
            .range(keep_key + 1..)
            .map(|(k, _)| *k)
            .collect();
        for k in doomed {
            if let Some(s) = self.segments.remove(&k) {
                s.delete()?;
            }
        }
        self.active_mut().unseal(&config)?;
        let log_end = self.log_end_offset();
        if self.epochs.truncate_from_end(log_end) {
            self.epochs.persist()?;
        }
        self.after_truncation(log_end)
    }

    /// Empties the log and restarts it at `offset` (a replica that must
    /// start where the leader's or the tiered log begins).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        if offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end: self.log_end_offset(),
            });
        }
        self.wait_flushes()?;
        recovery::write_log_start(&self.dir, offset)?;
        files::remove_if_exists(&self.dir.join(files::PRODUCER_START_FILE))?;
        flusher::write_recovery_point(&self.dir, offset)?;
        for (_, s) in std::mem::take(&mut self.segments) {
            s.delete()?;
        }
        let seg = Segment::create(&self.dir, offset, &self.config)?;
        self.segments.insert(offset, seg);
        self.log_start = offset;
        self.producer_start = offset;
        self.epochs.clear();
        self.epochs.persist()?;
        self.aborted = crate::txn::AbortedIndex::default();
        self.after_truncation(offset)
    }

    fn after_truncation(&mut self, log_end: i64) -> Result<(), StorageError> {
        self.truncations += 1;
        self.cleaner_truncated(log_end)?;
        // Producer state: drop snapshots past the new end and rebuild.
        for e in
            std::fs::read_dir(&self.dir).map_err(|e| StorageError::io("list log directory", e))?
        {
            let e = e.map_err(|e| StorageError::io("list log directory", e))?;
            if let Some((o, SNAPSHOT_EXT)) =
                e.file_name().to_str().and_then(files::parse_offset_name)
            {
                if o > log_end || o < self.log_start {
                    files::remove_if_exists(&e.path())?;
                }
            }
        }
        let (producers, refound) = recovery::reload_producers(
            &self.dir,
            &self.segments,
            self.log_start,
            self.producer_start,
            log_end,
        )?;
        self.producers = producers;
        // the cut segment's index loses the markers past the new end
        self.aborted.truncate_from(log_end);
        if let Some((base, seg)) = self.segments.iter().next_back() {
            self.aborted
                .persist_segment(&self.dir, *base, seg.next_offset)?;
        }
        recovery::settle_aborted(&self.dir, &self.segments, &mut self.aborted, refound)?;
        let sealed = self.segments.len().saturating_sub(1);
        for seg in self.segments.values_mut().take(sealed) {
            seg.unload_indexes();
        }
        self.flushed_offset = self.flushed_offset.min(log_end);
        self.unflushed_records = 0;
        self.first_unflushed_ms = None;
        self.end_tx.send_replace(log_end);
        Ok(())
    }
}
