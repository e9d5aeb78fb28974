//! Compaction of a compacted topic's log (`cleanup.policy=compact`): the
//! latest record of each key is kept, older records of the same key go.
//!
//! Kafka's rules, as this log applies them:
//! - Only sealed segments are compacted, and only below the first offset
//!   that is not settled yet: the active segment's base, the first
//!   unstable offset (an open transaction), what is not flushed yet, and a
//!   bound from the caller (a replicated partition's high watermark; for a
//!   tiered log, the end of what object storage already holds, so that an
//!   upload never reads a segment while it is being replaced).
//! - A segment whose largest timestamp is newer than `min.compaction.lag.ms`
//!   is not compacted yet, nor anything after it.
//! - A run starts when the bytes written since the last run are at least
//!   `min.cleanable.dirty.ratio` of the compactable bytes, or a segment
//!   waited `max.compaction.lag.ms` since its first record, or tombstones
//!   kept by an earlier run are due for removal.
//! - A record stays when no later record in the compacted range has the
//!   same key. A tombstone (key, no value) stays only while its segment's
//!   largest timestamp is within `delete.retention.ms`. Records without a
//!   key (written before the topic was compacted) go, as in Kafka.
//! - Records of aborted transactions go, and never count as the latest
//!   record of their key (an aborted write must not hide a committed one).
//!   Transaction markers stay.
//! - Offsets never change. A batch that lost some records is written again
//!   with the records left, keeping its base offset, last offset delta,
//!   timestamps, producer fields and codec (recompressed); a batch that
//!   lost every record goes. Readers see gaps, as Kafka's do.
//! - A merged segment's clock (its largest timestamp) is the newest of its
//!   group's: the tombstones it keeps may stay longer than
//!   `delete.retention.ms` after their own segment's newest record, never
//!   shorter.
//!
//! How a run goes, step by step:
//! 1. [`PartitionLog::plan_compaction`] (on the owning task, cheap) picks
//!    the segments and decides whether a run is due; it hands out a
//!    [`CompactionJob`] holding the segments' open files.
//! 2. [`CompactionJob::run`] (on the cleaner thread, in the idle
//!    scheduling class, see [`submit`]) reads every batch of the range twice: once
//!    to map each key to its latest offset (a 128-bit hash per key; at most
//!    [`MAX_KEYS`] keys per run, the range ends at the segment where that
//!    is passed), once to write the kept records of each group of
//!    consecutive segments (see `merge` for the grouping: their
//!    sizes summed fit in `segment.bytes`) into one new segment in
//!    `cleaning/` beside the log, with its indexes, fsynced. A group of one
//!    segment that loses no record is left alone.
//! 3. [`PartitionLog::install_compaction`] (on the owning task) checks that
//!    no truncation happened since the plan and that every segment of each
//!    group is still the one planned (same range and size), then installs
//!    the groups through a journal (the commit point): the new log file is
//!    renamed over the first segment's, the others are deleted. Readers
//!    holding an old file keep reading it. A crash at any point leaves the
//!    old segments or the new one, never both nor neither: an open that
//!    finds the journal completes the install (see `merge`);
//!    missing indexes are rebuilt, and a leftover `cleaning/` is removed.
//! 4. The checkpoint file `cleaner-checkpoint` records the offset below
//!    which the log was compacted and when kept tombstones fall due.
//! 5. On a tiered log's leader, each replaced segment whose offsets one
//!    manifest entry serves exactly is uploaded again under new keys and
//!    swapped into the manifest (see `crate::tier::TieredPartition::install_compaction`),
//!    so the bucket shrinks with the local log.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::oneshot;

use crate::batch::{self, BatchHeader, Compression, HEADER_LEN};
pub use crate::cleaner::CleanerTotals;
use crate::cleaner::{remove_cleaning_dir, write_checkpoint, CLEANING_DIR};
use crate::config::CompactionConfig;
use crate::error::{IoContext, StorageError};
use crate::files;
use crate::log::PartitionLog;
use crate::merge::{self, GroupLimits, Span};
use crate::records;
use crate::segment::Segment;

/// Distinct keys one run maps at most (about 80 MiB of map): a run over a
/// range with more keys stops at the segment where this is passed, and
/// the next run goes on from there.
pub const MAX_KEYS: usize = 1 << 21;

/// The cleaner's figures of a log, for metrics and operators.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerFigures {
    /// Every offset below this was compacted at least once.
    pub compacted_below: i64,
    /// Bytes of sealed segments (what compaction may work on).
    pub compactable_bytes: u64,
    /// Bytes of sealed segments written since they were last compacted.
    pub dirty_bytes: u64,
    /// `dirty_bytes / compactable_bytes` (0 when there is nothing).
    pub dirty_ratio: f64,
    pub totals: CleanerTotals,
}

/// One segment a run reads: its open file and the range it covers.
#[derive(Debug)]
struct JobSegment {
    base: i64,
    next: i64,
    size: u64,
    file: Arc<File>,
    path: PathBuf,
    /// The segment's largest timestamp (tombstone and lag clocks).
    newest_ms: Option<i64>,
}

/// A compaction run planned on a log, to be run on the cleaner thread.
#[derive(Debug)]
pub struct CompactionJob {
    dir: PathBuf,
    segments: Vec<JobSegment>,
    aborted: HashMap<i64, Vec<(i64, i64)>>,
    now_ms: i64,
    settings: CompactionConfig,
    /// What bounds a group of segments written as one (see `merge`).
    limits: GroupLimits,
    decode_cap: u64,
    truncations: u64,
    /// Offsets from here on were written since the last run: only they are
    /// mapped (a record whose key is not mapped stays, as in Kafka).
    dirty_from: i64,
    /// Keep every tombstone: set for a tiered log whose older segments are
    /// only in object storage, which this run cannot compact, so that a
    /// delete never goes while a value it deleted survives there.
    keep_tombstones: bool,
    /// Batches ending at or past this stay whole: the log's last batch,
    /// when the range reaches the log end. A reader at an offset past the
    /// last record left would otherwise find nothing to fetch below the
    /// log end, and wait there for ever (Kafka never compacts its active
    /// segment, which holds the last batch; here a quiet partition's
    /// active segment rolls by `segment.ms` and may be empty).
    keep_from: i64,
}

/// A run's new segments, to be installed by the log's owner.
#[derive(Debug)]
pub struct Compacted {
    pub(crate) truncations: u64,
    /// Offset below which the run compacted the log.
    pub(crate) end: i64,
    pub(crate) replacements: Vec<Replacement>,
    pub(crate) tombstones_due_ms: Option<i64>,
    pub(crate) bytes_read: u64,
    pub(crate) records_removed: u64,
}

/// One new segment, written in place of a group of consecutive ones.
#[derive(Debug)]
pub(crate) struct Replacement {
    pub(crate) base: i64,
    pub(crate) next: i64,
    /// The segments it replaces, as planned, in offset order.
    pub(crate) olds: Vec<Span>,
    pub(crate) new: Segment,
}

/// What an installed run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionReport {
    /// Segments replaced.
    pub segments: usize,
    /// Segments written in their place (fewer where groups were merged).
    pub segments_after: usize,
    /// Bytes of the log before and after, over the segments replaced.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    /// Every offset below this is compacted now.
    pub compacted_below: i64,
}

impl PartitionLog {
    /// A compaction run worth starting now on a compacted log, or `None`
    /// (see the module docs for the range and the triggers). `upper_bound`
    /// is the caller's own limit (high watermark, end of the tiered log).
    pub fn plan_compaction(&self, now_ms: i64, upper_bound: i64) -> Option<CompactionJob> {
        if !self.config.compacted || self.check_online().is_err() {
            return None;
        }
        let settings = self.config.compaction;
        let active_base = self.active().base_offset;
        let bound = upper_bound
            .min(active_base)
            .min(self.flushed_offset)
            .min(self.first_unstable_offset().unwrap_or(i64::MAX));
        let min_lag = i64::try_from(settings.min_lag_ms).unwrap_or(i64::MAX);
        let mut picked = Vec::new();
        for (&base, seg) in self.segments.range(..active_base) {
            if seg.next_offset > bound {
                break;
            }
            let newest = seg.retention_time();
            if newest.is_some_and(|t| now_ms.saturating_sub(t) < min_lag) {
                break;
            }
            if seg.next_offset <= self.log_start {
                continue;
            }
            picked.push(JobSegment {
                base,
                next: seg.next_offset,
                size: seg.size,
                file: seg.file.clone(),
                path: seg.path.clone(),
                newest_ms: newest,
            });
        }
        let total: u64 = picked.iter().map(|s| s.size).sum();
        let dirty: Vec<&JobSegment> = picked
            .iter()
            .filter(|s| s.next > self.cleaner.compacted_below)
            .collect();
        let dirty_bytes: u64 = dirty.iter().map(|s| s.size).sum();
        let ratio_due = dirty_bytes > 0
            && (dirty_bytes as u128) * 1_000_000
                >= (total as u128) * u128::from(settings.min_dirty_ratio_ppm);
        let lag_due = settings.max_lag_ms.is_some_and(|max| {
            let max = i64::try_from(max).unwrap_or(i64::MAX);
            dirty.first().is_some_and(|s| {
                self.segments
                    .get(&s.base)
                    .and_then(|seg| seg.first_timestamp)
                    .is_some_and(|first| now_ms.saturating_sub(first) >= max)
            })
        });
        let tombstones_due = self
            .cleaner
            .tombstones_due_ms
            .is_some_and(|due| now_ms >= due);
        if picked.is_empty() || !(ratio_due || lag_due || tombstones_due) {
            return None;
        }
        let from = picked.first().map_or(0, |s| s.base);
        let to = picked.last().map_or(0, |s| s.next);
        let mut aborted: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for t in self.aborted.overlapping(from, to) {
            aborted
                .entry(t.producer_id)
                .or_default()
                .push((t.first_offset, t.last_offset));
        }
        Some(CompactionJob {
            dir: self.dir.clone(),
            segments: picked,
            aborted,
            now_ms,
            settings,
            limits: GroupLimits {
                max_bytes: self.config.segment_bytes,
                index_interval: self.config.index_interval_bytes,
                index_capacity: self.config.index_capacity(),
            },
            decode_cap: self.config.uncompressed_batch_limit(),
            truncations: self.truncations,
            dirty_from: self.cleaner.compacted_below,
            keep_tombstones: false,
            keep_from: if to >= self.log_end_offset() {
                self.last_batch_base(to)
            } else {
                i64::MAX
            },
        })
    }

    /// Base offset of the batch ending at `end` (the log's last batch), or
    /// `end` when it cannot be read.
    fn last_batch_base(&self, end: i64) -> i64 {
        let Some((_, seg)) = self.segments.range(..end).next_back() else {
            return end;
        };
        seg.translate(end - 1)
            .ok()
            .flatten()
            .map_or(end, |(_, h)| h.base_offset)
    }

    /// The cleaner's figures of this log (all zero for a log that is not
    /// compacted and never was).
    pub fn cleaner_figures(&self) -> CleanerFigures {
        let sealed = self.segments.len().saturating_sub(1);
        let mut compactable = 0u64;
        let mut dirty = 0u64;
        for seg in self.segments.values().take(sealed) {
            compactable += seg.size;
            if seg.next_offset > self.cleaner.compacted_below {
                dirty += seg.size;
            }
        }
        CleanerFigures {
            compacted_below: self.cleaner.compacted_below,
            compactable_bytes: compactable,
            dirty_bytes: dirty,
            dirty_ratio: if compactable == 0 {
                0.0
            } else {
                dirty as f64 / compactable as f64
            },
            totals: self.cleaner.totals,
        }
    }

    /// A truncation or a restart at `log_end` moves the compacted mark
    /// down with it.
    pub(crate) fn cleaner_truncated(&mut self, log_end: i64) -> Result<(), StorageError> {
        if self.cleaner.compacted_below > log_end {
            self.cleaner.compacted_below = log_end;
            write_checkpoint(&self.dir, &self.cleaner)?;
        }
        Ok(())
    }
}

impl CompactionJob {
    /// Keeps every tombstone in this run (see the field).
    pub fn keeping_tombstones(mut self) -> Self {
        self.keep_tombstones = true;
        self
    }

    /// Merges groups of at most `max_bytes` of old segments (tests: 0
    /// writes each segment on its own, as before merging existed).
    #[cfg(test)]
    pub(crate) fn merging_at_most(mut self, max_bytes: u64) -> Self {
        self.limits.max_bytes = max_bytes;
        self
    }

    /// Offsets the job covers, `[first, end)`.
    pub fn range(&self) -> (i64, i64) {
        (
            self.segments.first().map_or(0, |s| s.base),
            self.segments.last().map_or(0, |s| s.next),
        )
    }

    /// Maps the keys, then writes the segments that lose records into
    /// `cleaning/` (blocking file I/O: run it on the cleaner thread).
    pub fn run(mut self) -> Result<Compacted, StorageError> {
        let mut latest: HashMap<u128, i64> = HashMap::new();
        let mut mapped = 0usize;
        let mut bytes_read = 0u64;
        for seg in &self.segments {
            if latest.len() > MAX_KEYS {
                break;
            }
            mapped += 1;
            // the part compacted before holds no key newer than its own
            if seg.next <= self.dirty_from {
                continue;
            }
            for_each_batch(seg, |h, bytes| {
                if h.is_control() || self.is_aborted(h) {
                    return Ok(());
                }
                let plain = decode(h, bytes, self.decode_cap, &seg.path)?;
                for r in parse(&plain, h, &seg.path)? {
                    if let Some(key) = r.key {
                        latest.insert(key_hash(key), h.base_offset + r.offset_delta);
                    }
                }
                Ok(())
            })?;
            bytes_read += seg.size;
        }
        self.segments.truncate(mapped);
        let end = self.segments.last().map_or(0, |s| s.next);
        let cleaning = self.dir.join(CLEANING_DIR);
        remove_cleaning_dir(&cleaning)?;
        // (not create_dir_all: a partition deleted meanwhile fails the run)
        std::fs::create_dir(&cleaning).ctx(|| format!("create {}", cleaning.display()))?;
        let spans: Vec<Span> = self
            .segments
            .iter()
            .map(|s| Span {
                base: s.base,
                next: s.next,
                size: s.size,
            })
            .collect();
        let mut replacements = Vec::new();
        let mut records_removed = 0u64;
        let mut tombstones_due_ms: Option<i64> = None;
        let delete_retention = i64::try_from(self.settings.delete_retention_ms).unwrap_or(i64::MAX);
        for range in merge::group(&spans, self.limits) {
            let group = &self.segments[range];
            let (Some(first), Some(last)) = (group.first(), group.last()) else {
                continue;
            };
            let out_path = files::offset_path(&cleaning, first.base, files::LOG_EXT);
            let out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&out_path)
                .ctx(|| format!("create {}", out_path.display()))?;
            let mut w = BufWriter::new(out);
            // a group of several segments is written as one even when no
            // record goes: that is the merge
            let mut changed = group.len() > 1;
            for seg in group {
                let newest = seg.newest_ms.unwrap_or(self.now_ms);
                let tombstones_kept =
                    self.keep_tombstones || self.now_ms.saturating_sub(newest) < delete_retention;
                let mut kept_tombstone = false;
                for_each_batch(seg, |h, bytes| {
                    if h.is_control() || h.base_offset >= self.keep_from {
                        return w
                            .write_all(bytes)
                            .ctx(|| format!("write {}", out_path.display()));
                    }
                    if self.is_aborted(h) {
                        changed = true;
                        records_removed += u64::try_from(h.records_count).unwrap_or(0);
                        return Ok(());
                    }
                    let plain = decode(h, bytes, self.decode_cap, &seg.path)?;
                    let recs = parse(&plain, h, &seg.path)?;
                    let mut kept: Vec<&Record> = Vec::with_capacity(recs.len());
                    for r in &recs {
                        let offset = h.base_offset + r.offset_delta;
                        let keep = match r.key {
                            None => false,
                            Some(key) => {
                                let newest_for_key = latest
                                    .get(&key_hash(key))
                                    .is_none_or(|&latest_offset| latest_offset <= offset);
                                newest_for_key && (r.has_value || tombstones_kept)
                            }
                        };
                        if keep {
                            kept_tombstone |= !r.has_value;
                            kept.push(r);
                        }
                    }
                    records_removed += (recs.len() - kept.len()) as u64;
                    if kept.len() == recs.len() {
                        return w
                            .write_all(bytes)
                            .ctx(|| format!("write {}", out_path.display()));
                    }
                    changed = true;
                    if kept.is_empty() {
                        return Ok(());
                    }
                    let rebuilt = rebuild_batch(h, bytes, &kept).map_err(|e| {
                        StorageError::io(format!("compress a batch of {}", seg.path.display()), e)
                    })?;
                    w.write_all(&rebuilt)
                        .ctx(|| format!("write {}", out_path.display()))
                })?;
                if kept_tombstone && !self.keep_tombstones {
                    let due = newest.saturating_add(delete_retention);
                    tombstones_due_ms = Some(tombstones_due_ms.map_or(due, |d| d.min(due)));
                }
            }
            let out = w.into_inner().map_err(|e| {
                StorageError::io(format!("write {}", out_path.display()), e.into_error())
            })?;
            if !changed {
                drop(out);
                files::remove_if_exists(&out_path)?;
                continue;
            }
            out.sync_all()
                .ctx(|| format!("fsync {}", out_path.display()))?;
            drop(out);
            let mut new = Segment::open(&cleaning, first.base, self.limits.index_capacity)?;
            let scan = new.rebuild(false, self.limits.index_interval, |_| {})?;
            if let Some(reason) = scan.stopped {
                return Err(StorageError::Corrupt {
                    path: out_path,
                    position: scan.valid_size,
                    reason: format!("the compacted segment does not read back: {reason}"),
                });
            }
            new.finish_indexes()?;
            for p in [new.offset_index.path(), new.time_index.path()] {
                File::open(p)
                    .and_then(|f| f.sync_all())
                    .ctx(|| format!("fsync {}", p.display()))?;
            }
            new.unload_indexes();
            replacements.push(Replacement {
                base: first.base,
                next: last.next,
                olds: spans_of(group),
                new,
            });
        }
        files::sync_dir(&cleaning)?;
        Ok(Compacted {
            truncations: self.truncations,
            end,
            replacements,
            tombstones_due_ms,
            bytes_read,
            records_removed,
        })
    }

    fn is_aborted(&self, h: &BatchHeader) -> bool {
        h.is_transactional()
            && self.aborted.get(&h.producer_id).is_some_and(|ranges| {
                ranges
                    .iter()
                    .any(|&(first, last)| (first..=last).contains(&h.base_offset))
            })
    }
}

/// Runs `job` on the process's cleaner thread (started on first use, in the
/// idle scheduling class so compaction takes only what appends leave idle).
pub fn submit(job: CompactionJob) -> oneshot::Receiver<Result<Compacted, StorageError>> {
    type Work = Box<dyn FnOnce() + Send>;
    static CLEANER: OnceLock<Mutex<mpsc::Sender<Work>>> = OnceLock::new();
    let (tx, rx) = oneshot::channel();
    let work: Work = Box::new(move || {
        // a panic fails this run only, never the cleaner thread
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()))
            .unwrap_or_else(|_| {
                Err(StorageError::io(
                    "compaction run",
                    std::io::Error::other("the compaction run panicked"),
                ))
            });
        let _ = tx.send(done);
    });
    let sender = CLEANER.get_or_init(|| {
        let (send, recv) = mpsc::channel::<Work>();
        let spawned = std::thread::Builder::new()
            .name("log-cleaner".into())
            .spawn(move || {
                lower_priority();
                while let Ok(work) = recv.recv() {
                    work();
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start the log cleaner thread; compaction stays off");
        }
        Mutex::new(send)
    });
    if let Ok(s) = sender.lock() {
        // a cleaner that never started drops the work: the receiver then
        // sees its sender gone, and the caller tries again later
        let _ = s.send(work);
    }
    rx
}

/// Puts the calling thread in Linux's idle scheduling class (SCHED_IDLE):
/// it runs only on CPU time no other thread wants, and a shard that wakes
/// on the same core takes the core back at once (nice 19 alone still gets
/// a time slice, which showed as produce latency on a shared core). Falls
/// back to nice 19 where the idle class is refused.
fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` outlives the call; pid 0 names the calling thread.
    #[expect(unsafe_code, reason = "nix has no sched_setscheduler wrapper")]
    let idle = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if idle == 0 {
        return;
    }
    // SAFETY: two plain syscalls with integer arguments, on the calling
    // thread's own id; no memory is shared with the kernel.
    #[expect(unsafe_code, reason = "nix has no setpriority wrapper")]
    let rc = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19)
    };
    if rc != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "could not lower the log cleaner's priority");
    }
}

fn spans_of(group: &[JobSegment]) -> Vec<Span> {
    group
        .iter()
        .map(|s| Span {
            base: s.base,
            next: s.next,
            size: s.size,
        })
        .collect()
}

/// Calls `f` with each batch of a segment (header and whole bytes).
fn for_each_batch(
    seg: &JobSegment,
    mut f: impl FnMut(&BatchHeader, &[u8]) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let corrupt = |position: u64, reason: String| StorageError::Corrupt {
        path: seg.path.clone(),
        position,
        reason,
    };
    let mut pos = 0u64;
    let mut buf = Vec::new();
    let mut header = [0u8; HEADER_LEN];
    while pos < seg.size {
        if pos + HEADER_LEN as u64 > seg.size {
            return Err(corrupt(pos, "a batch header runs past the end".into()));
        }
        seg.file
            .read_exact_at(&mut header, pos)
            .ctx(|| format!("read {} at {pos}", seg.path.display()))?;
        let Some(h) = BatchHeader::decode(&header) else {
            return Err(corrupt(pos, "short header".into()));
        };
        let len = match h.total_len() {
            Some(len) if pos + len as u64 <= seg.size => len,
            _ => return Err(corrupt(pos, format!("batch length {}", h.batch_length))),
        };
        buf.resize(len, 0);
        seg.file
            .read_exact_at(&mut buf, pos)
            .ctx(|| format!("read {} at {pos}", seg.path.display()))?;
        f(&h, &buf)?;
        pos += len as u64;
    }
    Ok(())
}

/// The records of a batch, decompressed.
fn decode(h: &BatchHeader, bytes: &[u8], cap: u64, path: &Path) -> Result<Vec<u8>, StorageError> {
    let codec = h.compression().map_err(|c| StorageError::Corrupt {
        path: path.to_path_buf(),
        position: 0,
        reason: format!("unknown codec {c} in the batch at offset {}", h.base_offset),
    })?;
    records::decode(codec, &bytes[HEADER_LEN..], cap).map_err(|refusal| StorageError::Corrupt {
        path: path.to_path_buf(),
        position: 0,
        reason: format!("the batch at offset {}: {refusal}", h.base_offset),
    })
}

type Record<'a> = records::RecordRef<'a>;

fn parse<'a>(
    plain: &'a [u8],
    h: &BatchHeader,
    path: &Path,
) -> Result<Vec<Record<'a>>, StorageError> {
    records::split(plain).map_err(|reason| StorageError::Corrupt {
        path: path.to_path_buf(),
        position: 0,
        reason: format!("the batch at offset {}: {reason}", h.base_offset),
    })
}

/// A batch holding only `kept` of its records: the same header fields
/// (base offset, last offset delta, timestamps, producer, codec), a new
/// record count, length and CRC.
fn rebuild_batch(h: &BatchHeader, bytes: &[u8], kept: &[&Record]) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::with_capacity(kept.iter().map(|r| r.raw.len()).sum());
    for r in kept {
        plain.extend_from_slice(r.raw);
    }
    let codec = h.compression().unwrap_or(Compression::None);
    let body = if codec == Compression::None {
        plain
    } else {
        records::encode(codec, &plain, records::is_xerial(&bytes[HEADER_LEN..]))?
    };
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&bytes[..HEADER_LEN]);
    out.extend_from_slice(&body);
    let length = i32::try_from(out.len() - batch::LOG_OVERHEAD)
        .map_err(|_| std::io::Error::other("the rebuilt batch is too large"))?;
    let count = i32::try_from(kept.len()).unwrap_or(i32::MAX);
    batch::set_length_and_count(&mut out, length, count);
    Ok(out)
}

/// A 128-bit hash of a key (two SipHash passes with different prefixes):
/// two different keys in one run share it with negligible probability.
fn key_hash(key: &[u8]) -> u128 {
    let mut a = DefaultHasher::new();
    a.write_u8(0xa5);
    a.write(key);
    let mut b = DefaultHasher::new();
    b.write_u8(0x5a);
    b.write(key);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
pub(crate) mod tests;
