//! Opening a partition directory: load what a clean shutdown left, or
//! repair what a crash left.
//!
//! Invariants this relies on (kept by `log` and `flusher`):
//! - `recovery-point-offset` holds an offset below which every segment is
//!   fsynced with its indexes trimmed and synced. A roll seals a segment
//!   at once but fsyncs it in the background, and only then raises the
//!   recovery point; truncation lowers it (durably) before cutting;
//! - `clean-shutdown` exists only between a successful `close` (which
//!   waits for every background flush) and the next `open`, which removes
//!   it (durably) before any write.
//!
//! After a crash every segment that ends above the recovery point, and
//! always the last one, is scanned batch by batch with CRC checks. A
//! segment that is cut short (torn, malformed or missing batches, or
//! ending before the next segment's base) is cut after its last whole,
//! valid batch and becomes the last segment: every later segment is
//! deleted, since nothing after a hole can be trusted as dense offsets.
//! Scanned segments are fsynced and the recovery point moved up to the
//! last segment. Without a recovery point (directories written before it
//! existed, or a damaged file) an unclean open scans every segment, which
//! reads the whole local log once.
//!
//! Index files of trusted sealed segments that fail a sanity check are
//! rebuilt from batch headers into new files renamed over the old ones,
//! never in place (they may be hard links to uploaded objects). The leader-epoch cache and producer state
//! are reloaded from their checkpoint and snapshot and brought up to the
//! log end from batch headers. Producer state is kept for batches down to
//! `producer-start-offset` when it exists (local copies below the log start
//! were evicted, but the batches still exist in object storage), else down
//! to the log start.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::batch::BatchHeader;
use crate::config::LogConfig;
use crate::epoch::LeaderEpochCache;
use crate::error::{IoContext, StorageError};
use crate::files::{
    self, CLEAN_SHUTDOWN_FILE, INDEX_EXT, LOG_EXT, LOG_START_FILE, PRODUCER_START_FILE,
    SNAPSHOT_EXT, TIME_INDEX_EXT,
};
use crate::flusher;
use crate::producer::ProducerStates;
use crate::segment::Segment;
use crate::txn::{AbortedIndex, AbortedTxn, ControlType};

pub(crate) struct Recovered {
    pub(crate) segments: BTreeMap<i64, Segment>,
    pub(crate) log_start: i64,
    /// Producer state is kept for batches down to this (see `retention`).
    pub(crate) producer_start: i64,
    pub(crate) epochs: LeaderEpochCache,
    pub(crate) producers: ProducerStates,
    pub(crate) aborted: AbortedIndex,
}

/// Reads the log-start checkpoint (a decimal offset).
fn read_log_start(dir: &Path) -> Result<Option<i64>, StorageError> {
    let Some(bytes) = files::read_optional(&dir.join(LOG_START_FILE))? else {
        return Ok(None);
    };
    let parsed = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|v| *v >= 0);
    if parsed.is_none() {
        tracing::warn!(dir = %dir.display(), "log start checkpoint unreadable; using the first segment");
    }
    Ok(parsed)
}

pub(crate) fn write_log_start(dir: &Path, offset: i64) -> Result<(), StorageError> {
    files::write_atomic(dir, LOG_START_FILE, format!("{offset}\n").as_bytes(), true)
}

/// Reads the producer-state start checkpoint; `None` if there is none (the
/// producer state then starts at the log start).
pub(crate) fn read_producer_start(dir: &Path) -> Result<Option<i64>, StorageError> {
    let Some(bytes) = files::read_optional(&dir.join(PRODUCER_START_FILE))? else {
        return Ok(None);
    };
    Ok(std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|v| *v >= 0))
}

pub(crate) fn write_producer_start(dir: &Path, offset: i64) -> Result<(), StorageError> {
    files::write_atomic(
        dir,
        PRODUCER_START_FILE,
        format!("{offset}\n").as_bytes(),
        true,
    )
}

pub(crate) fn recover(dir: &Path, cfg: &LogConfig) -> Result<Recovered, StorageError> {
    fs::create_dir_all(dir).ctx(|| format!("create log directory {}", dir.display()))?;
    // a compaction install a crash interrupted is completed first (see
    // `merge`): the listing below then finds no overlapping segments
    crate::merge::finish_interrupted(dir)?;
    let marker = dir.join(CLEAN_SHUTDOWN_FILE);
    let clean = marker.exists();
    if clean {
        files::remove_if_exists(&marker)?;
        files::sync_dir(dir)?;
    }

    let mut bases = Vec::new();
    let mut snapshots = Vec::new();
    let mut index_files = Vec::new();
    for entry in fs::read_dir(dir).ctx(|| format!("list {}", dir.display()))? {
        let entry = entry.ctx(|| format!("list {}", dir.display()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if files::is_tmp(name) {
            files::remove_if_exists(&entry.path())?;
            continue;
        }
        match files::parse_offset_name(name) {
            Some((base, LOG_EXT)) => bases.push(base),
            Some((off, SNAPSHOT_EXT)) => snapshots.push(off),
            Some((base, _)) => index_files.push((base, entry.path())),
            None => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in index_files {
        if bases.binary_search(&base).is_err() {
            files::remove_if_exists(&path)?;
        }
    }

    let recovery_point = flusher::read_recovery_point(dir)?;
    let mut segments = BTreeMap::new();
    for (i, &base) in bases.iter().enumerate() {
        let last = i + 1 == bases.len();
        let capacity = if last { cfg.index_capacity() } else { 0 };
        let mut seg = Segment::open(dir, base, capacity)?;
        if last {
            settle_active(&mut seg, clean, cfg)?;
            segments.insert(base, seg);
            break;
        }
        let next_base = bases[i + 1];
        let durable = clean || recovery_point.is_some_and(|rp| next_base <= rp);
        if durable {
            // (the first one stays: it holds the log start where compaction
            // removed every record of it)
            if seg.is_empty() && !segments.is_empty() {
                seg.delete()?;
                continue;
            }
            settle_sealed(&mut seg, next_base, cfg)?;
        } else if !repair_unflushed(&mut seg, next_base, cfg)? {
            // A hole: this segment is the new end of the log.
            for &later in &bases[i + 1..] {
                tracing::warn!(
                    dir = %dir.display(),
                    segment = later,
                    "deleting a segment that follows a torn one"
                );
                for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
                    files::remove_if_exists(&files::offset_path(dir, later, ext))?;
                }
            }
            files::sync_dir(dir)?;
            segments.insert(base, seg);
            break;
        }
        segments.insert(base, seg);
    }

    let checkpoint = read_log_start(dir)?;
    let first_base = segments.keys().next().copied();
    let mut log_start = match (checkpoint, first_base) {
        (Some(c), Some(f)) => c.max(f),
        (Some(c), None) => c,
        (None, Some(f)) => f,
        (None, None) => 0,
    };
    let log_end = segments
        .values()
        .next_back()
        .map_or(log_start, |s| s.next_offset);
    if log_start > log_end {
        // The log start was raised past everything on disk (a crash right
        // after DeleteRecords at the log end): start afresh there.
        for (_, s) in std::mem::take(&mut segments) {
            s.delete()?;
        }
    } else {
        // Drop segments wholly below the log start (their deletion may
        // have been interrupted), always keeping the last one.
        while segments.len() > 1 {
            let Some(first) = segments.first_key_value().map(|(_, s)| s.next_offset) else {
                break;
            };
            if first > log_start {
                break;
            }
            if let Some((_, s)) = segments.pop_first() {
                s.delete()?;
            }
        }
    }
    if segments.is_empty() {
        let s = Segment::create(dir, log_start, cfg)?;
        segments.insert(log_start, s);
    }
    if let Some((_, s)) = segments.first_key_value() {
        log_start = log_start.max(s.base_offset);
    }
    let log_end = segments
        .values()
        .next_back()
        .map_or(log_start, |s| s.next_offset);
    if !clean || recovery_point.is_none() {
        // Everything below the last segment is now fsynced (trusted, or
        // scanned and synced above).
        if let Some(&last_base) = segments.keys().next_back() {
            flusher::write_recovery_point(dir, last_base)?;
        }
    }

    let epochs = recover_epochs(dir, &segments, log_start, log_end)?;
    let producer_start = read_producer_start(dir)?.map_or(log_start, |p| p.min(log_start));
    let mut aborted = AbortedIndex::load(dir, segments.keys().copied())?;
    aborted.truncate_from(log_end);
    let (producers, refound) = recover_producers(
        dir,
        &segments,
        &mut snapshots,
        log_start,
        producer_start,
        log_end,
    )?;
    settle_aborted(dir, &segments, &mut aborted, refound)?;
    // The header walks above loaded indexes; sealed segments keep them
    // closed until a read needs them.
    let sealed = segments.len().saturating_sub(1);
    for seg in segments.values_mut().take(sealed) {
        seg.unload_indexes();
    }
    Ok(Recovered {
        segments,
        log_start,
        producer_start,
        epochs,
        producers,
        aborted,
    })
}

/// Adds the aborted transactions found again by the replay of markers
/// after the producer snapshot to `aborted`, and rewrites the index files
/// of the segments that lacked one.
pub(crate) fn settle_aborted(
    dir: &Path,
    segments: &BTreeMap<i64, Segment>,
    aborted: &mut AbortedIndex,
    refound: Vec<AbortedTxn>,
) -> Result<(), StorageError> {
    let mut touched = Vec::new();
    for t in refound {
        if aborted.in_range(t.last_offset, t.last_offset + 1) == [t] {
            continue;
        }
        aborted.insert(t);
        if let Some((base, seg)) = segments.range(..=t.last_offset).next_back() {
            touched.push((*base, seg.next_offset));
        }
    }
    touched.sort_unstable();
    touched.dedup();
    for (base, end) in touched {
        aborted.persist_segment(dir, base, end)?;
    }
    Ok(())
}

/// The last segment: trust it after a clean close, else scan and repair.
fn settle_active(seg: &mut Segment, clean: bool, cfg: &LogConfig) -> Result<(), StorageError> {
    if clean && seg.offset_index.is_sane(seg.size) && first_batch_ok(seg) {
        // Walk only the tail after the last index entry to find the end.
        let (o, p) = seg.offset_index.last().unwrap_or((seg.base_offset, 0));
        let mut pos = p;
        let mut next = o;
        let mut tail_ok = true;
        while pos < seg.size {
            match seg.read_header(pos) {
                Ok(h) if h.base_offset >= next => {
                    next = h.next_offset();
                    pos += h.total_len().unwrap_or(0) as u64;
                }
                _ => {
                    tail_ok = false;
                    break;
                }
            }
        }
        if tail_ok && seg.time_index.is_sane(next.max(seg.base_offset + 1)) {
            seg.next_offset = next;
            seg.bytes_since_index = seg.size - p;
            if let Some((t, off)) = seg.time_index.last() {
                seg.max_timestamp = t;
                seg.offset_of_max_timestamp = off;
            }
            seg.first_timestamp = first_timestamp(seg);
            seg.pacer = crate::writeback::Pacer::starting_at(seg.size);
            return Ok(());
        }
        tracing::warn!(segment = %seg.path.display(), "active segment inconsistent after a clean close; scanning it");
    }
    let end = seg.rebuild(true, cfg.index_interval_bytes, |_| {})?;
    if end.valid_size < seg.size {
        tracing::warn!(
            segment = %seg.path.display(),
            kept = end.valid_size,
            dropped = seg.size - end.valid_size,
            reason = end.stopped.unwrap_or("unknown"),
            "truncating torn tail of the active segment"
        );
        seg.set_size(end.valid_size)?;
    }
    // What survived a process kill may still be only in the page cache;
    // the log reports everything it opened with as flushed.
    seg.sync_data()?;
    seg.pacer = crate::writeback::Pacer::starting_at(seg.size);
    Ok(())
}

/// A segment below the last one that may not have reached the device
/// before the crash (it ends above the recovery point): scan it with CRC
/// checks. Whole and ending at `next_base`: fsync it, finish its indexes
/// and return true. Otherwise cut it after its last valid batch, leave it
/// unsealed to become the last segment, and return false.
fn repair_unflushed(
    seg: &mut Segment,
    next_base: i64,
    cfg: &LogConfig,
) -> Result<bool, StorageError> {
    seg.offset_index.grow_to(cfg.index_capacity())?;
    seg.time_index.grow_to(cfg.index_capacity())?;
    let end = seg.rebuild(true, cfg.index_interval_bytes, |_| {})?;
    if end.valid_size == seg.size && seg.next_offset == next_base {
        seg.sync_data()?;
        seg.finish_indexes()?;
        seg.sealed = true;
        seg.unload_indexes();
        return Ok(true);
    }
    tracing::warn!(
        segment = %seg.path.display(),
        kept = end.valid_size,
        dropped = seg.size - end.valid_size,
        ends_at = seg.next_offset,
        next_segment = next_base,
        reason = end.stopped.unwrap_or("segment ends before the next one begins"),
        "truncating a torn segment that was sealed but not yet flushed; later segments are dropped"
    );
    seg.set_size(end.valid_size)?;
    seg.sync_data()?;
    seg.pacer = crate::writeback::Pacer::starting_at(seg.size);
    Ok(false)
}

/// A segment below the active one: its end is the next segment's base.
fn settle_sealed(seg: &mut Segment, next_base: i64, cfg: &LogConfig) -> Result<(), StorageError> {
    seg.sealed = true;
    let sane = seg.offset_index.is_sane(seg.size)
        && seg.time_index.is_sane(next_base)
        && first_batch_ok(seg)
        && seg.time_index.last().is_some();
    if sane {
        seg.next_offset = next_base;
        if let Some((t, o)) = seg.time_index.last() {
            seg.max_timestamp = t;
            seg.offset_of_max_timestamp = o;
        }
        seg.first_timestamp = first_timestamp(seg);
        seg.unload_indexes();
        return Ok(());
    }
    tracing::warn!(segment = %seg.path.display(), "rebuilding indexes of a sealed segment into new files");
    let end = seg.rebuild_indexes_aside(next_base, cfg)?;
    seg.unload_indexes();
    if end.stopped.is_some() {
        tracing::error!(
            segment = %seg.path.display(),
            valid_bytes = end.valid_size,
            "sealed segment is damaged; reads past the damage will fail"
        );
    }
    Ok(())
}

fn first_batch_ok(seg: &Segment) -> bool {
    seg.is_empty()
        || seg
            .read_header(0)
            // past it when compaction removed the first records
            .is_ok_and(|h| h.base_offset >= seg.base_offset)
}

fn first_timestamp(seg: &Segment) -> Option<i64> {
    seg.read_header(0).ok().map(|h| h.base_timestamp)
}

/// Calls `f` for every batch header with offsets in `[from, to)`.
pub(crate) fn for_each_header(
    segments: &BTreeMap<i64, Segment>,
    from: i64,
    to: i64,
    mut f: impl FnMut(&BatchHeader),
) -> Result<(), StorageError> {
    walk_batches(segments, from, to, false, |h, _| f(h))
}

/// As [`for_each_header`], with the marker of each control batch.
pub(crate) fn for_each_batch(
    segments: &BTreeMap<i64, Segment>,
    from: i64,
    to: i64,
    f: impl FnMut(&BatchHeader, Option<(ControlType, i32)>),
) -> Result<(), StorageError> {
    walk_batches(segments, from, to, true, f)
}

fn walk_batches(
    segments: &BTreeMap<i64, Segment>,
    from: i64,
    to: i64,
    markers: bool,
    mut f: impl FnMut(&BatchHeader, Option<(ControlType, i32)>),
) -> Result<(), StorageError> {
    let start_key = segments
        .range(..=from)
        .next_back()
        .map(|(k, _)| *k)
        .unwrap_or(from);
    for seg in segments.range(start_key..).map(|(_, s)| s) {
        if seg.base_offset >= to {
            break;
        }
        let Some((mut pos, _)) = seg.translate(from)? else {
            continue;
        };
        while pos < seg.size {
            let h = seg.read_header(pos)?;
            if h.base_offset >= to {
                return Ok(());
            }
            let marker = if markers && h.is_control() {
                seg.read_marker(pos, &h)?
            } else {
                None
            };
            f(&h, marker);
            pos += h.total_len().unwrap_or(0) as u64;
        }
    }
    Ok(())
}

fn recover_epochs(
    dir: &Path,
    segments: &BTreeMap<i64, Segment>,
    log_start: i64,
    log_end: i64,
) -> Result<LeaderEpochCache, StorageError> {
    let (mut epochs, loaded) = LeaderEpochCache::load(dir)?;
    let mut changed = epochs.truncate_from_end(log_end);
    // Epochs are stamped into every batch; refresh from the headers the
    // checkpoint may not cover (all of them if it was lost).
    let from = match (loaded, epochs.latest()) {
        (true, Some(l)) => l.start_offset.max(log_start),
        _ => log_start,
    };
    if !loaded {
        epochs.clear();
    }
    for_each_header(segments, from, log_end, |h| {
        changed |= epochs.assign(h.partition_leader_epoch, h.base_offset);
    })?;
    changed |= epochs.truncate_from_start(log_start);
    if changed || !loaded {
        epochs.persist()?;
    }
    Ok(epochs)
}

/// Rebuilds producer state from the newest usable snapshot on disk.
pub(crate) fn reload_producers(
    dir: &Path,
    segments: &BTreeMap<i64, Segment>,
    log_start: i64,
    producer_start: i64,
    log_end: i64,
) -> Result<(ProducerStates, Vec<AbortedTxn>), StorageError> {
    let mut snapshots = Vec::new();
    for e in fs::read_dir(dir).ctx(|| format!("list {}", dir.display()))? {
        let e = e.ctx(|| format!("list {}", dir.display()))?;
        if let Some((o, SNAPSHOT_EXT)) = e.file_name().to_str().and_then(files::parse_offset_name) {
            snapshots.push(o);
        }
    }
    recover_producers(
        dir,
        segments,
        &mut snapshots,
        log_start,
        producer_start,
        log_end,
    )
}

fn recover_producers(
    dir: &Path,
    segments: &BTreeMap<i64, Segment>,
    snapshots: &mut [i64],
    log_start: i64,
    producer_start: i64,
    log_end: i64,
) -> Result<(ProducerStates, Vec<AbortedTxn>), StorageError> {
    snapshots.sort_unstable_by(|a, b| b.cmp(a));
    let mut state = None;
    for &off in snapshots.iter() {
        let path = files::offset_path(dir, off, SNAPSHOT_EXT);
        if off > log_end {
            files::remove_if_exists(&path)?;
            continue;
        }
        if state.is_some() || off < log_start {
            continue;
        }
        if let Some(bytes) = files::read_optional(&path)? {
            match ProducerStates::decode_snapshot(&bytes) {
                Some((o, s)) if o == off => state = Some((o, s)),
                _ => {
                    tracing::warn!(snapshot = %path.display(), "ignoring damaged producer snapshot");
                    files::remove_if_exists(&path)?;
                }
            }
        }
    }
    let (from, mut producers) = state.unwrap_or((log_start, ProducerStates::default()));
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut refound = Vec::new();
    for_each_batch(segments, from, log_end, |h, marker| match marker {
        Some((control, coordinator_epoch)) => {
            refound.extend(producers.replay_marker(h, control, coordinator_epoch, now_ms))
        }
        None if !h.is_control() => producers.replay(h, now_ms),
        None => {}
    })?;
    producers.remove_below(producer_start);
    Ok((producers, refound))
}
