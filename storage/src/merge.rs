//! Merging of compacted segments, and the crash-safe install of a
//! compaction run's new segments (see [`crate::compaction`] for the run).
//!
//! Grouping ([`group`]): a run writes one new segment per group of
//! consecutive segments of its range, as Kafka's cleaner does, so that a
//! long-lived compacted log does not keep one ever smaller segment per
//! segment it ever rolled. A segment joins the group before it while
//! - the group's old sizes summed stay within `segment.bytes` (a
//!   conservative bound on the new size: compaction only removes bytes),
//! - the offsets from the group's base to the segment's end stay within a
//!   32-bit relative offset, as the active segment's do (its roll rule),
//! - and the offset index entries the bytes could need fit the index.
//!
//! The new segment takes the first segment's base offset; offsets never
//! change, and the last segment's end is the new segment's end.
//!
//! Install, step by step (the run already wrote each new segment with its
//! indexes into `cleaning/` and fsynced them and the directory):
//! 1. The journal `cleaner-install` is written (temporary file, fsync,
//!    rename, directory fsync): one line per group, `base end old-bases…`.
//!    This is the commit point: before it, the old segments stand and
//!    the next open removes `cleaning/`; from it on, the install is
//!    completed, by this process or by the next open.
//! 2. For each group of several segments, the aborted-transaction index
//!    of the first one is rewritten to hold the entries of the whole group.
//! 3. The first segment's index files are removed, the new log file is
//!    renamed over the first segment's (atomic), and the new indexes are
//!    moved in. Readers holding an old file keep reading it.
//! 4. The other segments of the group are deleted (log, indexes, aborted
//!    transactions).
//! 5. The partition directory is fsynced, then the journal is removed and
//!    the directory fsynced again: a journal never outlives its install,
//!    so it is never applied to a log that changed since.
//!
//! Recovery ([`finish_interrupted`], at open, before the directory is
//! listed) redoes steps 2 to 5 for every group of a journal it finds,
//! each step idempotent: whether the new log file was renamed yet shows by
//! its presence in `cleaning/`. A crash at any point thus leaves the old
//! segments or the merged one, never both overlapping and never neither.
//! A failure of the live install past step 1 takes the log offline; the
//! next open completes it.

use std::ops::Range;
use std::path::Path;

use crate::error::{IoContext, StorageError};
use crate::files::{self, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use crate::txn::{self, AbortedTxn, TXN_INDEX_EXT};

/// File in the partition directory naming the groups of an install under way.
pub(crate) const JOURNAL_FILE: &str = "cleaner-install";
const JOURNAL_VERSION: &str = "v1";

/// What bounds a group of segments merged into one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupLimits {
    /// `segment.bytes`.
    pub(crate) max_bytes: u64,
    pub(crate) index_interval: u32,
    /// Entries the new segment's offset index holds.
    pub(crate) index_capacity: usize,
}

/// A segment as grouping sees it: base offset, end offset (exclusive) and
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) base: i64,
    pub(crate) next: i64,
    pub(crate) size: u64,
}

/// Splits consecutive segments into groups, each written as one new
/// segment (see the module docs for the rules). Every group holds at least
/// one segment; a segment too large to share stays alone.
pub(crate) fn group(segments: &[Span], limits: GroupLimits) -> Vec<Range<usize>> {
    let interval = u64::from(limits.index_interval.max(1));
    let capacity = u64::try_from(limits.index_capacity).unwrap_or(u64::MAX);
    let mut groups = Vec::new();
    let mut start = 0;
    while let Some(first) = segments.get(start) {
        let mut bytes = first.size;
        let mut end = start + 1;
        while let Some(s) = segments.get(end) {
            let total = bytes.saturating_add(s.size);
            let fits = total <= limits.max_bytes
                && s.next - first.base <= i64::from(i32::MAX)
                && total / interval < capacity;
            if !fits {
                break;
            }
            bytes = total;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// One group of an install: the new segment's base (the first old
/// segment's) and end, and every old segment's base, the first included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) base: i64,
    pub(crate) end: i64,
    pub(crate) olds: Vec<i64>,
}

impl Group {
    fn is_valid(&self) -> bool {
        self.olds.first() == Some(&self.base)
            && self.olds.windows(2).all(|w| w[0] < w[1])
            && self.olds.last().is_some_and(|&last| last < self.end)
    }
}

fn encode_journal(groups: &[Group]) -> String {
    let mut text = format!("{JOURNAL_VERSION}\n");
    for g in groups {
        text.push_str(&format!("{} {}", g.base, g.end));
        for b in &g.olds {
            text.push_str(&format!(" {b}"));
        }
        text.push('\n');
    }
    text
}

/// The groups of a journal; `None` if it does not parse or a group does
/// not hold together.
fn decode_journal(bytes: &[u8]) -> Option<Vec<Group>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != JOURNAL_VERSION {
        return None;
    }
    let mut groups = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let numbers: Option<Vec<i64>> = line.split_whitespace().map(|f| f.parse().ok()).collect();
        let numbers = numbers?;
        let (&base, rest) = numbers.split_first()?;
        let (&end, olds) = rest.split_first()?;
        let g = Group {
            base,
            end,
            olds: olds.to_vec(),
        };
        if !g.is_valid() {
            return None;
        }
        groups.push(g);
    }
    Some(groups)
}

/// Step 1: the commit point of an install.
pub(crate) fn write_journal(dir: &Path, groups: &[Group]) -> Result<(), StorageError> {
    files::write_atomic(dir, JOURNAL_FILE, encode_journal(groups).as_bytes(), true)
}

/// Step 5: the install is complete and durable; the journal goes.
pub(crate) fn remove_journal(dir: &Path) -> Result<(), StorageError> {
    files::sync_dir(dir)?;
    crash_point(Step::Synced)?;
    files::remove_if_exists(&dir.join(JOURNAL_FILE))?;
    files::sync_dir(dir)
}

/// Steps 2 to 4 for one group, idempotent: `write_txn_index` rewrites the
/// first segment's aborted-transaction index for the whole group (called
/// only for a group of several segments). Returns `false`, having changed
/// nothing, when neither a new log file nor the first old one is there
/// (a journal that does not match the directory).
pub(crate) fn swap_in(
    dir: &Path,
    cleaning: &Path,
    g: &Group,
    write_txn_index: impl FnOnce() -> Result<(), StorageError>,
) -> Result<bool, StorageError> {
    let new_log = files::offset_path(cleaning, g.base, LOG_EXT);
    let log = files::offset_path(dir, g.base, LOG_EXT);
    let renamed = !exists(&new_log)?;
    if renamed && !exists(&log)? {
        return Ok(false);
    }
    if g.olds.len() > 1 {
        write_txn_index()?;
        crash_point(Step::TxnIndex)?;
    }
    if !renamed {
        // indexes first: an open that finds the new log file under the
        // old name never maps the old indexes with it
        files::remove_if_exists(&files::offset_path(dir, g.base, INDEX_EXT))?;
        files::remove_if_exists(&files::offset_path(dir, g.base, TIME_INDEX_EXT))?;
        crash_point(Step::IndexesRemoved)?;
        rename(&new_log, &log)?;
        crash_point(Step::LogRenamed)?;
    }
    for ext in [INDEX_EXT, TIME_INDEX_EXT] {
        let from = files::offset_path(cleaning, g.base, ext);
        if exists(&from)? {
            rename(&from, &files::offset_path(dir, g.base, ext))?;
            crash_point(Step::IndexMoved)?;
        }
    }
    for &old in &g.olds[1..] {
        for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT, TXN_INDEX_EXT] {
            files::remove_if_exists(&files::offset_path(dir, old, ext))?;
            crash_point(Step::OldFileDeleted)?;
        }
    }
    Ok(true)
}

/// Completes an install a crash interrupted (see the module docs); run at
/// open, before the directory is listed. Missing index files are rebuilt
/// by the open that follows, and `cleaning/` is removed by it.
pub(crate) fn finish_interrupted(dir: &Path) -> Result<(), StorageError> {
    let path = dir.join(JOURNAL_FILE);
    let Some(bytes) = files::read_optional(&path)? else {
        return Ok(());
    };
    let Some(groups) = decode_journal(&bytes) else {
        tracing::error!(journal = %path.display(), "ignoring an unreadable compaction install journal; segments it named may overlap");
        return remove_journal(dir);
    };
    let cleaning = dir.join(crate::cleaner::CLEANING_DIR);
    for g in &groups {
        let done = swap_in(dir, &cleaning, g, || merge_txn_indexes(dir, g))?;
        if done {
            tracing::info!(dir = %dir.display(), base = g.base, end = g.end, segments = g.olds.len(), "completed a compaction install a crash interrupted");
        } else {
            tracing::error!(dir = %dir.display(), base = g.base, "a compaction install journal names a segment that is not there; left as found");
        }
    }
    remove_journal(dir)
}

/// The entries of the group's aborted-transaction index files, written as
/// the first segment's (a damaged file is left out with a warning).
fn merge_txn_indexes(dir: &Path, g: &Group) -> Result<(), StorageError> {
    let mut entries: Vec<AbortedTxn> = Vec::new();
    for &base in &g.olds {
        let path = files::offset_path(dir, base, TXN_INDEX_EXT);
        let Some(bytes) = files::read_optional(&path)? else {
            continue;
        };
        match txn::decode_entries(&bytes) {
            Some(found) => entries.extend(
                found
                    .into_iter()
                    .filter(|t| (g.base..g.end).contains(&t.last_offset)),
            ),
            None => {
                tracing::warn!(file = %path.display(), "ignoring a damaged aborted-transaction index")
            }
        }
    }
    entries.sort_by_key(|t| t.last_offset);
    entries.dedup();
    let name = format!("{:020}.{TXN_INDEX_EXT}", g.base);
    if entries.is_empty() {
        return files::remove_if_exists(&dir.join(name));
    }
    files::write_atomic(dir, &name, &txn::encode_entries(&entries), true)
}

/// The points of an install where tests stop it as a crash would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The journal is written (the commit point).
    Journal,
    /// The first segment's aborted-transaction index covers the group.
    TxnIndex,
    /// The first segment's index files are removed.
    IndexesRemoved,
    /// The new log file is under the first segment's name.
    LogRenamed,
    /// One new index file is moved in (each one).
    IndexMoved,
    /// One file of a merged-away segment is removed (each one).
    OldFileDeleted,
    /// Everything is in place and fsynced; the journal is still there.
    Synced,
}

#[cfg(test)]
thread_local! {
    /// Stop at the n-th time (0: the first) this step is reached.
    pub(crate) static CRASH_AT: std::cell::Cell<Option<(Step, usize)>> =
        const { std::cell::Cell::new(None) };
}

/// Fails as a crash would at `step` when a test asked for it (once);
/// nothing outside tests.
#[cfg_attr(not(test), inline(always))]
pub(crate) fn crash_point(step: Step) -> Result<(), StorageError> {
    #[cfg(test)]
    {
        let hit = CRASH_AT.with(|c| match c.get() {
            Some((s, 0)) if s == step => {
                c.set(None);
                true
            }
            Some((s, n)) if s == step => {
                c.set(Some((s, n - 1)));
                false
            }
            _ => false,
        });
        if hit {
            return Err(StorageError::io(
                format!("install step {step:?}"),
                std::io::Error::other("simulated crash"),
            ));
        }
    }
    #[cfg(not(test))]
    let _ = step;
    Ok(())
}

fn exists(path: &Path) -> Result<bool, StorageError> {
    path.try_exists()
        .ctx(|| format!("look for {}", path.display()))
}

fn rename(from: &Path, to: &Path) -> Result<(), StorageError> {
    std::fs::rename(from, to).ctx(|| format!("rename {} to {}", from.display(), to.display()))
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
