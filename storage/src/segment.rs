//! One segment: `{base:020}.log` holding whole v2 batches back to back,
//! with its offset and time indexes.
//!
//! A segment is append-only while it is the active one; rolling seals it
//! (indexes trimmed, fsyncs handed to the background flusher) and it is
//! never written again except by follower truncation. Reads use `pread`, so any number of readers can
//! hold the segment's `Arc<File>` while the owner appends; an unlinked
//! segment stays readable through handles already given out.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{BatchHeader, HEADER_LEN};
use crate::config::LogConfig;
use crate::error::{IoContext, StorageError};
use crate::fault::{self, DeviceOp};
use crate::files::{self, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use crate::flusher::{SyncKind, SyncTarget};
use crate::health::Health;
use crate::index::{OffsetIndex, TimeIndex};
use crate::writeback::Pacer;

/// What tiering and operators see of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    pub base_offset: i64,
    /// Offset of the last record; `base_offset - 1` when empty.
    pub last_offset: i64,
    /// Bytes in the log file.
    pub size: u64,
    pub path: PathBuf,
    pub offset_index_path: PathBuf,
    pub time_index_path: PathBuf,
    /// Sealed segments are complete and never appended to again. Their
    /// fsync runs in the background after the roll: the segment is durable
    /// once [`crate::PartitionLog::flushed_offset`] reaches its end.
    pub sealed: bool,
    /// Base timestamp of the first batch.
    pub first_timestamp: Option<i64>,
    /// Largest batch max timestamp in the segment.
    pub max_timestamp: Option<i64>,
    /// CRC-32C of the log file's `size` bytes, kept as they were appended;
    /// `None` when this process did not write every byte of it (a segment
    /// reopened after a restart, or cut back by truncation), and the bytes
    /// must be read to know it.
    pub crc32c: Option<u32>,
}

/// One batch placed by an append: where it sits and what it holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed {
    pub(crate) position_in_buf: usize,
    pub(crate) len: usize,
    pub(crate) base_offset: i64,
    pub(crate) next_offset: i64,
    pub(crate) base_timestamp: i64,
    pub(crate) max_timestamp: i64,
}

/// A contiguous run of whole batches inside one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) position: u64,
    pub(crate) len: u64,
    pub(crate) first_offset: i64,
    pub(crate) next_offset: i64,
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: i64,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<File>,
    pub(crate) size: u64,
    pub(crate) next_offset: i64,
    pub(crate) offset_index: OffsetIndex,
    pub(crate) time_index: TimeIndex,
    pub(crate) max_timestamp: i64,
    pub(crate) offset_of_max_timestamp: i64,
    pub(crate) first_timestamp: Option<i64>,
    pub(crate) bytes_since_index: u64,
    /// Time of the first append, for `segment.ms`.
    pub(crate) created_ms: Option<i64>,
    pub(crate) sealed: bool,
    pub(crate) pacer: Pacer,
    /// Running CRC-32C of the file's bytes (see [`SegmentInfo::crc32c`]).
    pub(crate) crc32c: Option<u32>,
}

/// What a header scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScanEnd {
    /// Bytes of whole valid batches from the start of the file.
    pub(crate) valid_size: u64,
    /// Why the scan stopped early, if it did.
    pub(crate) stopped: Option<&'static str>,
}

impl Segment {
    fn open_files(
        dir: &Path,
        base_offset: i64,
        truncate: bool,
        index_capacity: usize,
    ) -> Result<Segment, StorageError> {
        let path = files::offset_path(dir, base_offset, LOG_EXT);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(&path)
            .ctx(|| format!("open segment {}", path.display()))?;
        let size = file
            .metadata()
            .ctx(|| format!("stat segment {}", path.display()))?
            .len();
        let ix_path = files::offset_path(dir, base_offset, INDEX_EXT);
        let tix_path = files::offset_path(dir, base_offset, TIME_INDEX_EXT);
        if truncate {
            files::remove_if_exists(&ix_path)?;
            files::remove_if_exists(&tix_path)?;
        }
        let offset_index = OffsetIndex::open(&ix_path, base_offset, index_capacity)?;
        let time_index = TimeIndex::open(&tix_path, base_offset, index_capacity)?;
        Ok(Segment {
            base_offset,
            path,
            file: Arc::new(file),
            size,
            next_offset: base_offset,
            offset_index,
            time_index,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_timestamp: None,
            bytes_since_index: 0,
            created_ms: None,
            sealed: false,
            pacer: Pacer::starting_at(size),
            crc32c: (size == 0).then_some(0),
        })
    }

    /// Creates an empty active segment (replacing any leftover files).
    pub(crate) fn create(
        dir: &Path,
        base_offset: i64,
        cfg: &LogConfig,
    ) -> Result<Segment, StorageError> {
        let s = Segment::open_files(dir, base_offset, true, cfg.index_capacity())?;
        files::sync_dir(dir)?;
        Ok(s)
    }

    /// Creates an empty active segment without fsyncing the directory (a
    /// roll: the flusher's directory fsync makes the entry durable, and
    /// `flush` waits for it before it counts anything in this segment as
    /// durable).
    pub(crate) fn create_unsynced(
        dir: &Path,
        base_offset: i64,
        cfg: &LogConfig,
    ) -> Result<Segment, StorageError> {
        Segment::open_files(dir, base_offset, true, cfg.index_capacity())
    }

    /// Opens an existing segment. Its `next_offset`, timestamps and index
    /// trust are settled by recovery afterwards.
    pub(crate) fn open(
        dir: &Path,
        base_offset: i64,
        index_capacity: usize,
    ) -> Result<Segment, StorageError> {
        Segment::open_files(dir, base_offset, false, index_capacity)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Reads and checks the framing of the batch header at `pos`.
    pub(crate) fn read_header(&self, pos: u64) -> Result<BatchHeader, StorageError> {
        let corrupt = |reason: String| StorageError::Corrupt {
            path: self.path.clone(),
            position: pos,
            reason,
        };
        if pos.saturating_add(HEADER_LEN as u64) > self.size {
            return Err(corrupt(format!(
                "a batch header at {pos} would run past the end ({})",
                self.size
            )));
        }
        let mut buf = [0u8; HEADER_LEN];
        self.file
            .read_exact_at(&mut buf, pos)
            .ctx(|| format!("read {} at {pos}", self.path.display()))?;
        let h = BatchHeader::decode(&buf).ok_or_else(|| corrupt("short header".into()))?;
        if h.magic != 2 {
            return Err(corrupt(format!(
                "magic {} where a batch should start",
                h.magic
            )));
        }
        match h.total_len() {
            Some(len) if pos + len as u64 <= self.size => Ok(h),
            _ => Err(corrupt(format!(
                "batch length {} runs past the end ({})",
                h.batch_length, self.size
            ))),
        }
    }

    /// Reads the marker of the control batch `h` found at `pos` (`None`
    /// if it does not parse; a marker is a few dozen bytes).
    pub(crate) fn read_marker(
        &self,
        pos: u64,
        h: &BatchHeader,
    ) -> Result<Option<(crate::txn::ControlType, i32)>, StorageError> {
        let len = h.total_len().unwrap_or(HEADER_LEN).min(4096);
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, pos)
            .ctx(|| format!("read {} at {pos}", self.path.display()))?;
        Ok(crate::txn::read_marker(h, &buf))
    }

    fn header_len(h: &BatchHeader) -> u64 {
        h.total_len().unwrap_or(HEADER_LEN) as u64
    }

    /// Writes an append's bytes at the end and indexes its batches. On an
    /// error nothing in memory changed; the caller truncates the file back.
    pub(crate) fn append(
        &mut self,
        buf: &[u8],
        placed: &[Placed],
        cfg: &LogConfig,
        now_ms: i64,
        health: &Arc<Health>,
    ) -> Result<(), StorageError> {
        let start = self.size;
        self.file
            .write_all_at(buf, start)
            .ctx(|| format!("write {} bytes to {}", buf.len(), self.path.display()))?;
        for p in placed {
            self.note_batch(
                start + p.position_in_buf as u64,
                p.len as u64,
                p.base_offset,
                p.next_offset,
                p.base_timestamp,
                p.max_timestamp,
                cfg.index_interval_bytes,
            );
        }
        self.size = start + buf.len() as u64;
        // The bytes are in cache now; tiering takes the checksum from here
        // instead of reading the sealed segment back.
        self.crc32c = self.crc32c.map(|crc| crc32c::crc32c_append(crc, buf));
        if self.created_ms.is_none() {
            self.created_ms = Some(now_ms);
        }
        self.pacer
            .after_append(&self.file, &self.path, self.size, &cfg.writeback, health)
            .ctx(|| format!("paced writeback of {}", self.path.display()))
    }

    /// Indexing bookkeeping for one batch at `pos` (append and rebuild).
    #[allow(clippy::too_many_arguments)]
    fn note_batch(
        &mut self,
        pos: u64,
        len: u64,
        base_offset: i64,
        next_offset: i64,
        base_timestamp: i64,
        max_timestamp: i64,
        interval: u32,
    ) {
        if max_timestamp > self.max_timestamp {
            self.max_timestamp = max_timestamp;
            self.offset_of_max_timestamp = base_offset;
        }
        if self.bytes_since_index >= u64::from(interval)
            && self.offset_index.append(base_offset, pos)
        {
            self.time_index
                .append(self.max_timestamp, self.offset_of_max_timestamp);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += len;
        if self.first_timestamp.is_none() {
            self.first_timestamp = Some(base_timestamp);
        }
        self.next_offset = next_offset;
    }

    /// Walks the batches from the start, rebuilding indexes and in-memory
    /// state, and stops at the first batch that is torn, malformed, out of
    /// offset order or (with `verify_crc`) fails its CRC. `visit` sees every
    /// valid header. The file is not modified.
    pub(crate) fn rebuild(
        &mut self,
        verify_crc: bool,
        interval: u32,
        mut visit: impl FnMut(&BatchHeader),
    ) -> Result<ScanEnd, StorageError> {
        self.offset_index.clear();
        self.time_index.clear();
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.first_timestamp = None;
        self.bytes_since_index = 0;
        self.next_offset = self.base_offset;
        let mut pos = 0u64;
        let mut buf = Vec::new();
        let stopped = loop {
            if pos == self.size {
                break None;
            }
            let h = match self.read_header(pos) {
                Ok(h) => h,
                Err(StorageError::Corrupt { .. }) => break Some("torn or malformed batch"),
                Err(e) => return Err(e),
            };
            // Offsets only go up; compaction may leave gaps between batches.
            if h.base_offset < self.next_offset || h.records_count <= 0 || h.last_offset_delta < 0 {
                break Some("batch offsets do not continue the segment");
            }
            // The index holds offsets relative to the segment's base in 32
            // bits, so no batch of the segment lies further out (the base
            // offset is outside the batch's CRC: a damaged one shows here)
            if u32::try_from(h.last_offset().saturating_sub(self.base_offset)).is_err() {
                break Some("batch offsets lie beyond what the segment indexes");
            }
            let len = Segment::header_len(&h);
            if verify_crc && !self.crc_matches(pos, len, h.crc, &mut buf)? {
                break Some("CRC mismatch");
            }
            self.note_batch(
                pos,
                len,
                h.base_offset,
                h.next_offset(),
                h.base_timestamp,
                h.max_timestamp,
                interval,
            );
            visit(&h);
            pos += len;
        };
        Ok(ScanEnd {
            valid_size: pos,
            stopped,
        })
    }

    /// Rebuilds the indexes of a sealed segment that ends at `next_base`
    /// from its batch headers into new files, then renames them over the
    /// old names. The old index files are never written: once uploaded, a
    /// sealed segment's files may be hard links to its objects (the local
    /// object store links instead of copying), and rewriting them would
    /// change a committed object under its manifest entry.
    pub(crate) fn rebuild_indexes_aside(
        &mut self,
        next_base: i64,
        cfg: &LogConfig,
    ) -> Result<ScanEnd, StorageError> {
        let ix_path = self.offset_index.path().to_path_buf();
        let tix_path = self.time_index.path().to_path_buf();
        let ix_tmp = files::tmp_path(&ix_path);
        let tix_tmp = files::tmp_path(&tix_path);
        files::remove_if_exists(&ix_tmp)?;
        files::remove_if_exists(&tix_tmp)?;
        let capacity = cfg.index_capacity();
        self.offset_index = OffsetIndex::open(&ix_tmp, self.base_offset, capacity)?;
        self.time_index = TimeIndex::open(&tix_tmp, self.base_offset, capacity)?;
        let mut end = self.rebuild(false, cfg.index_interval_bytes, |_| {})?;
        // (a compacted segment may end before it: its last records were removed)
        if self.next_offset > next_base {
            end.stopped
                .get_or_insert("the segment runs into the next one");
        }
        self.next_offset = next_base;
        self.finish_indexes()?;
        for (from, to) in [(&ix_tmp, &ix_path), (&tix_tmp, &tix_path)] {
            std::fs::rename(from, to)
                .ctx(|| format!("rename {} to {}", from.display(), to.display()))?;
        }
        self.offset_index.renamed(ix_path);
        self.time_index.renamed(tix_path);
        if let Some(dir) = self.path.parent() {
            files::sync_dir(dir)?;
        }
        Ok(end)
    }

    fn crc_matches(
        &self,
        pos: u64,
        len: u64,
        expected: u32,
        buf: &mut Vec<u8>,
    ) -> Result<bool, StorageError> {
        const CHUNK: u64 = 1 << 20;
        let mut crc = 0u32;
        let mut at = pos + 21;
        let end = pos + len;
        while at < end {
            let n = (end - at).min(CHUNK) as usize;
            buf.resize(n, 0);
            self.file
                .read_exact_at(&mut buf[..n], at)
                .ctx(|| format!("read {} at {at}", self.path.display()))?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            at += n as u64;
        }
        Ok(crc == expected)
    }

    /// Position and header of the first batch whose last offset is
    /// `>= offset`, or `None` if the segment ends before `offset`.
    pub(crate) fn translate(
        &self,
        offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>, StorageError> {
        let (_, mut pos) = self.offset_index.lookup(offset);
        while pos < self.size {
            let h = self.read_header(pos)?;
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += Segment::header_len(&h);
        }
        Ok(None)
    }

    /// Whole batches from the one holding `offset`, at most `max_bytes`
    /// (but always the first batch), none with an offset `>= upper_bound`.
    pub(crate) fn read(
        &self,
        offset: i64,
        max_bytes: u64,
        upper_bound: i64,
    ) -> Result<Option<Span>, StorageError> {
        let Some((pos, h)) = self.translate(offset)? else {
            return Ok(None);
        };
        if h.last_offset() >= upper_bound {
            return Ok(Some(Span {
                position: pos,
                len: 0,
                first_offset: h.base_offset,
                next_offset: h.base_offset,
            }));
        }
        let first_len = Segment::header_len(&h);
        let limit = pos.saturating_add(max_bytes.max(first_len)).min(self.size);
        let mut end = pos + first_len;
        let mut next = h.next_offset();
        if limit == self.size && upper_bound >= self.next_offset {
            return Ok(Some(Span {
                position: pos,
                len: self.size - pos,
                first_offset: h.base_offset,
                next_offset: self.next_offset,
            }));
        }
        // Jump over whole batches with the index, then walk the rest.
        let by_bytes = self.offset_index.lookup_position(limit);
        let by_offset = self.offset_index.lookup(upper_bound);
        let jump = match by_bytes {
            Some(b) if b.1 <= by_offset.1 => Some(b),
            _ => Some(by_offset),
        };
        if let Some((o, p)) = jump {
            if p > end && p <= limit && o <= upper_bound {
                end = p;
                next = o;
            }
        }
        while end < self.size {
            let h = self.read_header(end)?;
            let len = Segment::header_len(&h);
            if h.last_offset() >= upper_bound || end + len > limit {
                break;
            }
            end += len;
            next = h.next_offset();
        }
        Ok(Some(Span {
            position: pos,
            len: end - pos,
            first_offset: h.base_offset,
            next_offset: next,
        }))
    }

    /// The first batch whose max timestamp is `>= ts`, with its position.
    pub(crate) fn find_timestamp(
        &self,
        ts: i64,
    ) -> Result<Option<(u64, BatchHeader)>, StorageError> {
        if self.max_timestamp < ts || self.is_empty() {
            return Ok(None);
        }
        let mut pos = match self.time_index.lookup(ts) {
            Some((_, o)) => self.translate(o)?.map(|(p, _)| p).unwrap_or(self.size),
            None => 0,
        };
        while pos < self.size {
            let h = self.read_header(pos)?;
            if h.max_timestamp >= ts {
                return Ok(Some((pos, h)));
            }
            pos += Segment::header_len(&h);
        }
        Ok(None)
    }

    /// Removes every batch from the one holding `offset` on; returns the
    /// new next offset. Indexes are rebuilt from what remains. Files shared
    /// with the local object store are never cut in place (see
    /// [`Segment::unshare_files`]).
    pub(crate) fn truncate_to(
        &mut self,
        offset: i64,
        cfg: &LogConfig,
    ) -> Result<i64, StorageError> {
        let Some((pos, _)) = self.translate(offset)? else {
            return Ok(self.next_offset);
        };
        self.unshare_files(pos, cfg)?;
        self.set_size(pos)?;
        self.rebuild(false, cfg.index_interval_bytes, |_| {})?;
        self.sync_data()?;
        Ok(self.next_offset)
    }

    /// Before truncation writes to the segment's files: any of them with
    /// more than one link (an uploaded segment whose objects the local
    /// object store hard-linked to these files) is replaced by a file of
    /// its own, so the committed object keeps its bytes. The log file's
    /// first `keep` bytes are copied to a temporary file, fsynced and
    /// renamed over the old name; a shared index file is unlinked and
    /// started afresh (truncation rebuilds it anyway), before the log file
    /// so that no open after a crash maps a shared index of a segment it
    /// rebuilds. Readers holding the old log file go on reading the old
    /// bytes. A crash mid-way leaves the old file or the copy under the
    /// segment's name, and a temporary file that the next open removes.
    fn unshare_files(&mut self, keep: u64, cfg: &LogConfig) -> Result<(), StorageError> {
        let capacity = cfg.index_capacity();
        let mut replaced = false;
        let ix_path = self.offset_index.path().to_path_buf();
        if links(&ix_path)? > 1 {
            replaced = true;
            self.offset_index.unload();
            files::remove_if_exists(&ix_path)?;
            self.offset_index = OffsetIndex::open(&ix_path, self.base_offset, capacity)?;
        }
        let tix_path = self.time_index.path().to_path_buf();
        if links(&tix_path)? > 1 {
            replaced = true;
            self.time_index.unload();
            files::remove_if_exists(&tix_path)?;
            self.time_index = TimeIndex::open(&tix_path, self.base_offset, capacity)?;
        }
        if links(&self.path)? > 1 {
            replaced = true;
            let tmp = files::tmp_path(&self.path);
            files::remove_if_exists(&tmp)?;
            let copy = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .ctx(|| format!("create {}", tmp.display()))?;
            copy_prefix(&self.file, &self.path, &copy, &tmp, keep)?;
            fault::check(DeviceOp::Fsync, &tmp)
                .and_then(|()| copy.sync_data())
                .ctx(|| format!("fsync {}", tmp.display()))?;
            std::fs::rename(&tmp, &self.path)
                .ctx(|| format!("rename {} to {}", tmp.display(), self.path.display()))?;
            self.file = Arc::new(copy);
            self.pacer = Pacer::starting_at(keep);
            tracing::info!(segment = %self.path.display(), "truncating a copy of a segment shared with object storage");
        }
        if let Some(dir) = self.path.parent().filter(|_| replaced) {
            files::sync_dir(dir)?;
        }
        Ok(())
    }

    /// Cuts the file to `size` bytes (recovery of a torn tail, truncation).
    pub(crate) fn set_size(&mut self, size: u64) -> Result<(), StorageError> {
        self.file
            .set_len(size)
            .ctx(|| format!("truncate {} to {size}", self.path.display()))?;
        if size != self.size {
            // Undoing the checksum of the cut bytes needs them: read back
            // when needed instead.
            self.crc32c = (size == 0).then_some(0);
        }
        self.size = size;
        self.pacer.truncated(size);
        Ok(())
    }

    /// Prepares a sealed segment for appends again (after truncation made
    /// it the last one).
    pub(crate) fn unseal(&mut self, cfg: &LogConfig) -> Result<(), StorageError> {
        self.offset_index.grow_to(cfg.index_capacity())?;
        self.time_index.grow_to(cfg.index_capacity())?;
        self.sealed = false;
        self.pacer = Pacer::starting_at(self.size);
        Ok(())
    }

    /// Makes the segment read-only without waiting for the device: final
    /// time index entry, index files trimmed, marked sealed. Returns the
    /// handles whose fsync makes the seal durable (log data first, then the
    /// trimmed indexes), for the background flusher.
    pub(crate) fn seal_deferred(&mut self) -> Result<Vec<SyncTarget>, StorageError> {
        self.append_final_time_entry();
        let ix = self.offset_index.trim()?;
        let tix = self.time_index.trim()?;
        self.sealed = true;
        self.unload_indexes();
        Ok(vec![
            SyncTarget {
                file: self.file.clone(),
                path: self.path.clone(),
                kind: SyncKind::Data,
            },
            SyncTarget {
                file: Arc::new(ix),
                path: self.offset_index.path().to_path_buf(),
                kind: SyncKind::All,
            },
            SyncTarget {
                file: Arc::new(tix),
                path: self.time_index.path().to_path_buf(),
                kind: SyncKind::All,
            },
        ])
    }

    /// Closes the index files until a read needs them again: a sealed
    /// segment nobody reads then holds one descriptor (its log file) and no
    /// memory map.
    pub(crate) fn unload_indexes(&mut self) {
        self.offset_index.unload();
        self.time_index.unload();
    }

    fn append_final_time_entry(&mut self) {
        if self.max_timestamp >= 0 || self.next_offset > self.base_offset {
            self.time_index
                .append(self.max_timestamp, self.offset_of_max_timestamp);
        }
    }

    /// Records the final max timestamp and trims index files to their use
    /// (done at seal and at clean close).
    pub(crate) fn finish_indexes(&mut self) -> Result<(), StorageError> {
        self.append_final_time_entry();
        self.offset_index.seal()?;
        self.time_index.seal()
    }

    /// The time `retention.ms` counts from: the largest timestamp in the
    /// segment, or, when its batches carry none (all -1, as old clients
    /// send), the time the file was last written (Kafka falls back to the
    /// file's modification time too). `None` if neither is known.
    pub(crate) fn retention_time(&self) -> Option<i64> {
        if self.max_timestamp >= 0 {
            return Some(self.max_timestamp);
        }
        let modified = self.file.metadata().and_then(|m| m.modified()).ok()?;
        let ms = modified
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_millis();
        i64::try_from(ms).ok()
    }

    /// `fdatasync`, then a check that no writeback wait of the segment
    /// handed out so far failed (one that did consumed the error the
    /// fdatasync would otherwise report; see `writeback`).
    pub(crate) fn sync_durable(&self) -> Result<(), StorageError> {
        self.sync_data()?;
        self.pacer
            .progress()
            .wait_for_submitted()
            .ctx(|| format!("paced writeback of {}", self.path.display()))
    }

    pub(crate) fn sync_data(&self) -> Result<(), StorageError> {
        fault::check(DeviceOp::Fsync, &self.path)
            .and_then(|()| self.file.sync_data())
            .ctx(|| format!("fsync {}", self.path.display()))
    }

    /// Removes the segment's files (open handles stay readable).
    pub(crate) fn delete(self) -> Result<SegmentInfo, StorageError> {
        let info = self.info();
        files::remove_if_exists(&info.path)?;
        files::remove_if_exists(&info.offset_index_path)?;
        files::remove_if_exists(&info.time_index_path)?;
        files::remove_if_exists(&info.path.with_extension(crate::txn::TXN_INDEX_EXT))?;
        Ok(info)
    }

    /// Bytes in the log file.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn info(&self) -> SegmentInfo {
        SegmentInfo {
            base_offset: self.base_offset,
            last_offset: self.next_offset - 1,
            size: self.size,
            path: self.path.clone(),
            offset_index_path: self.offset_index.path().to_path_buf(),
            time_index_path: self.time_index.path().to_path_buf(),
            sealed: self.sealed,
            first_timestamp: self.first_timestamp,
            max_timestamp: (self.next_offset > self.base_offset).then_some(self.max_timestamp),
            crc32c: self.crc32c,
        }
    }
}

/// Hard links to `path` (0 if it does not exist).
fn links(path: &Path) -> Result<u64, StorageError> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(std::os::unix::fs::MetadataExt::nlink(&m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StorageError::io(format!("stat {}", path.display()), e)),
    }
}

/// Copies the first `len` bytes of `from` into `to` with `pread`/`pwrite`.
fn copy_prefix(
    from: &File,
    from_path: &Path,
    to: &File,
    to_path: &Path,
    len: u64,
) -> Result<(), StorageError> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = vec![0u8; CHUNK.min(len) as usize];
    let mut at = 0u64;
    while at < len {
        let n = (len - at).min(CHUNK) as usize;
        from.read_exact_at(&mut buf[..n], at)
            .ctx(|| format!("read {} at {at}", from_path.display()))?;
        to.write_all_at(&buf[..n], at)
            .ctx(|| format!("write {} at {at}", to_path.display()))?;
        at += n as u64;
    }
    Ok(())
}
