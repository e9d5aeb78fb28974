//! Sparse offset index and time index of one segment, memory-mapped.
//!
//! Offset index entry (8 bytes): `relative offset u32 | file position u32`,
//! one every `index.interval.bytes` of log, pointing at a batch start.
//! Time index entry (12 bytes): `max timestamp i64 | relative offset u32`,
//! written next to an offset index entry when the segment's running max
//! timestamp grew; the offset is the base offset of the batch that holds
//! that maximum, so every batch before it has a smaller max timestamp.
//!
//! The active segment's index files are preallocated to their capacity
//! (sparse: disk blocks are reserved a chunk ahead of the entries written,
//! see [`RESERVE_CHUNK`]) and trimmed to the used size when the segment is
//! sealed or the log closed.
//! A sealed segment's index files are opened and mapped only while used
//! (see `MappedEntries`), and never resized or rewritten in place.
//! After an unclean stop the active segment's indexes are rebuilt from the
//! log (see `recovery`), so stale entries past the used size never matter.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::MmapMut;

use crate::error::{IoContext, StorageError};

const OFFSET_ENTRY: usize = 8;
const TIME_ENTRY: usize = 12;

/// A file of fixed-size entries, mapped read-write once loaded.
///
/// An active segment's indexes are loaded when opened. A sealed segment's
/// are loaded on first use and may be unloaded again ([`OffsetIndex::unload`]),
/// so a sealed segment nobody reads holds one descriptor (its log file) and
/// no mapping. A lookup whose load fails (out of descriptors, say) sees an
/// empty index and walks the segment from its start: slower, never wrong.
#[derive(Debug)]
struct MappedEntries {
    path: PathBuf,
    entry_len: usize,
    loaded: OnceLock<Loaded>,
}

/// An open, mapped index file.
#[derive(Debug)]
struct Loaded {
    file: File,
    mmap: Option<MmapMut>,
    entries: usize,
    capacity: usize,
    /// The file length was not a whole number of entries.
    ragged: bool,
    /// Bytes from the start of the file known to have disk blocks behind
    /// them (see [`RESERVE_CHUNK`]).
    reserved: usize,
}

/// How far ahead of the next entry an active index reserves disk blocks.
///
/// A preallocated index is sparse: its length covers its capacity, but
/// its blocks are taken only as entries are written through the mapping.
/// On a full disk such a write would kill the process with SIGBUS, so
/// blocks are reserved (`posix_fallocate`) a chunk at a time before
/// entries land in them; when that fails the entry is skipped, as a full
/// sparse index skips entries, and the log's own write reports the full
/// disk.
const RESERVE_CHUNK: usize = 64 * 1024;

impl MappedEntries {
    /// Opens the index at `path`: loaded at once, and grown to `capacity`
    /// entries, when `capacity` is above zero (an active segment); left to
    /// load on first use otherwise (a sealed segment).
    fn open(path: &Path, entry_len: usize, capacity: usize) -> Result<Self, StorageError> {
        let mut me = MappedEntries {
            path: path.to_path_buf(),
            entry_len,
            loaded: OnceLock::new(),
        };
        if capacity > 0 {
            let l = me.loaded_mut()?;
            if capacity > l.entries {
                me.resize(capacity)?;
            }
        }
        Ok(me)
    }

    /// Opens and maps the file as it is. Never resizes it: the file of a
    /// sealed segment may be a hard link to an uploaded object (a ragged
    /// one is rebuilt into a new file instead; see
    /// `Segment::rebuild_indexes_aside`).
    fn load(&self) -> Result<Loaded, StorageError> {
        let path = &self.path;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ctx(|| format!("open index {}", path.display()))?;
        let len = file
            .metadata()
            .ctx(|| format!("stat index {}", path.display()))?
            .len();
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let entries = len / self.entry_len;
        let mut l = Loaded {
            file,
            mmap: None,
            entries,
            capacity: entries,
            ragged: len % self.entry_len != 0,
            reserved: 0,
        };
        if len > 0 {
            l.map(path)?;
        }
        Ok(l)
    }

    /// The loaded file, loading it if needed; `None` if that fails.
    fn get(&self) -> Option<&Loaded> {
        if let Some(l) = self.loaded.get() {
            return Some(l);
        }
        match self.load() {
            Ok(l) => {
                // Another reader may have won the race; either copy is fine.
                let _ = self.loaded.set(l);
                self.loaded.get()
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not load an index; lookups walk the segment instead");
                None
            }
        }
    }

    fn loaded_mut(&mut self) -> Result<&mut Loaded, StorageError> {
        if self.loaded.get().is_none() {
            let l = self.load()?;
            let _ = self.loaded.set(l);
        }
        match self.loaded.get_mut() {
            Some(l) => Ok(l),
            None => unreachable!("the index was loaded just above"),
        }
    }

    /// Closes the file and drops the mapping; the next use loads it again.
    fn unload(&mut self) {
        self.loaded.take();
    }

    fn entries(&self) -> usize {
        self.get().map_or(0, |l| l.entries)
    }

    fn ragged(&self) -> bool {
        self.get().is_some_and(|l| l.ragged)
    }

    fn capacity(&self) -> usize {
        self.get().map_or(0, |l| l.capacity)
    }

    fn set_entries(&mut self, n: usize) {
        if let Ok(l) = self.loaded_mut() {
            l.entries = n.min(l.capacity);
        }
    }

    /// Sets the file (and mapping) to hold exactly `capacity` entries.
    fn resize(&mut self, capacity: usize) -> Result<(), StorageError> {
        let entry_len = self.entry_len;
        let path = self.path.clone();
        let l = self.loaded_mut()?;
        l.mmap = None;
        let bytes = capacity.saturating_mul(entry_len) as u64;
        l.file
            .set_len(bytes)
            .ctx(|| format!("resize index {}", path.display()))?;
        l.capacity = capacity;
        l.entries = l.entries.min(capacity);
        l.ragged = false;
        l.reserved = l.reserved.min(usize::try_from(bytes).unwrap_or(usize::MAX));
        if capacity > 0 {
            l.map(&path)?;
        }
        Ok(())
    }

    fn entry(&self, i: usize) -> &[u8] {
        match self.get() {
            Some(Loaded {
                mmap: Some(m),
                entries,
                ..
            }) if i < *entries => &m[i * self.entry_len..(i + 1) * self.entry_len],
            _ => &[],
        }
    }

    fn push(&mut self, bytes: &[u8]) -> bool {
        let entry_len = self.entry_len;
        let Ok(l) = self.loaded_mut() else {
            return false;
        };
        if l.entries >= l.capacity {
            return false;
        }
        let at = l.entries * entry_len;
        if at + entry_len > l.reserved {
            let end = (at + RESERVE_CHUNK).min(l.capacity * entry_len);
            let (Ok(from), Ok(len)) = (i64::try_from(at), i64::try_from(end - at)) else {
                return false;
            };
            if let Err(e) = nix::fcntl::posix_fallocate(&l.file, from, len) {
                tracing::warn!(error = %e, "no disk space for an index entry; skipped");
                return false;
            }
            l.reserved = end;
        }
        if let Some(m) = l.mmap.as_mut() {
            m[at..at + entry_len].copy_from_slice(bytes);
            l.entries += 1;
            true
        } else {
            false
        }
    }

    fn is_full(&self) -> bool {
        self.get().is_none_or(|l| l.entries >= l.capacity)
    }

    /// Number of leading entries for which `pred` holds (entries must be
    /// partitioned by `pred`).
    fn partition_point(&self, pred: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0usize, self.entries());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.entry(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Trims the file to the used entries and makes it durable.
    fn seal(&mut self) -> Result<(), StorageError> {
        let n = self.loaded_mut()?.entries;
        self.resize(n)?;
        let path = self.path.clone();
        self.loaded_mut()?
            .file
            .sync_all()
            .ctx(|| format!("fsync index {}", path.display()))
    }

    /// Trims the file to the used entries and returns a second handle to
    /// it, so the fsync can happen elsewhere.
    fn trim(&mut self) -> Result<File, StorageError> {
        let n = self.loaded_mut()?.entries;
        self.resize(n)?;
        let path = self.path.clone();
        self.loaded_mut()?
            .file
            .try_clone()
            .ctx(|| format!("duplicate index handle {}", path.display()))
    }
}

impl Loaded {
    fn map(&mut self, path: &Path) -> Result<(), StorageError> {
        // SAFETY: the file is owned by this segment; nothing else in the
        // process maps or truncates it while the map is alive (the map is
        // dropped before every set_len, and the file is never resized
        // unless it belongs to the active segment or is a fresh rebuild).
        #[expect(unsafe_code, reason = "memmap2 exposes mapping only as unsafe")]
        let map = unsafe { MmapMut::map_mut(&self.file) }
            .ctx(|| format!("map index {}", path.display()))?;
        self.mmap = Some(map);
        Ok(())
    }
}

fn rd_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .unwrap_or(0)
}
fn rd_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    i64::from_be_bytes(a)
}

/// Sparse map from offset to the file position of the batch holding it.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    base_offset: i64,
    m: MappedEntries,
}

impl OffsetIndex {
    pub(crate) fn open(
        path: &Path,
        base_offset: i64,
        capacity: usize,
    ) -> Result<Self, StorageError> {
        Ok(OffsetIndex {
            base_offset,
            m: MappedEntries::open(path, OFFSET_ENTRY, capacity)?,
        })
    }

    fn decode(&self, e: &[u8]) -> (i64, u64) {
        (
            self.base_offset + i64::from(rd_u32(e, 0)),
            u64::from(rd_u32(e, 4)),
        )
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.m.entries()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.m.is_full()
    }

    pub(crate) fn last(&self) -> Option<(i64, u64)> {
        self.m
            .entries()
            .checked_sub(1)
            .map(|i| self.decode(self.m.entry(i)))
    }

    /// Adds an entry; ignored when the index is full or the entry would not
    /// be strictly after the last one (a sparse index may skip entries).
    pub(crate) fn append(&mut self, offset: i64, position: u64) -> bool {
        let rel = offset - self.base_offset;
        let (Ok(rel), Ok(pos)) = (u32::try_from(rel), u32::try_from(position)) else {
            return false;
        };
        if let Some((lo, lp)) = self.last() {
            if offset <= lo || position <= lp {
                return false;
            }
        }
        let mut e = [0u8; OFFSET_ENTRY];
        e[..4].copy_from_slice(&rel.to_be_bytes());
        e[4..].copy_from_slice(&pos.to_be_bytes());
        self.m.push(&e)
    }

    /// The last entry at or below `offset`, or the segment start.
    pub(crate) fn lookup(&self, offset: i64) -> (i64, u64) {
        let n = self.m.partition_point(|e| self.decode(e).0 <= offset);
        match n.checked_sub(1) {
            Some(i) => self.decode(self.m.entry(i)),
            None => (self.base_offset, 0),
        }
    }

    /// The last entry whose position is at or below `position`.
    pub(crate) fn lookup_position(&self, position: u64) -> Option<(i64, u64)> {
        let n = self.m.partition_point(|e| self.decode(e).1 <= position);
        n.checked_sub(1).map(|i| self.decode(self.m.entry(i)))
    }

    pub(crate) fn clear(&mut self) {
        self.m.set_entries(0);
    }

    /// True when entries are strictly increasing and inside the log file.
    pub(crate) fn is_sane(&self, log_size: u64) -> bool {
        if self.m.ragged() {
            return false;
        }
        let mut prev: Option<(i64, u64)> = None;
        for i in 0..self.m.entries() {
            let (o, p) = self.decode(self.m.entry(i));
            if p >= log_size {
                return false;
            }
            if let Some((po, pp)) = prev {
                if o <= po || p <= pp {
                    return false;
                }
            }
            prev = Some((o, p));
        }
        true
    }

    pub(crate) fn grow_to(&mut self, capacity: usize) -> Result<(), StorageError> {
        if capacity > self.m.capacity() {
            self.m.resize(capacity)?;
        }
        Ok(())
    }

    pub(crate) fn seal(&mut self) -> Result<(), StorageError> {
        self.m.seal()
    }

    /// Trims to the used entries without fsync; returns a handle to sync.
    pub(crate) fn trim(&mut self) -> Result<File, StorageError> {
        self.m.trim()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.m.path
    }

    /// Records that the file was renamed to `path` (the handle and mapping
    /// stay valid).
    pub(crate) fn renamed(&mut self, path: PathBuf) {
        self.m.path = path;
    }

    /// Closes the file and unmaps it; the next use loads it again (a
    /// sealed segment nobody reads keeps no descriptor or mapping for it).
    pub(crate) fn unload(&mut self) {
        self.m.unload();
    }
}

/// Sparse map from max timestamp to the batch that reached it.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    base_offset: i64,
    m: MappedEntries,
}

impl TimeIndex {
    pub(crate) fn open(
        path: &Path,
        base_offset: i64,
        capacity: usize,
    ) -> Result<Self, StorageError> {
        Ok(TimeIndex {
            base_offset,
            m: MappedEntries::open(path, TIME_ENTRY, capacity)?,
        })
    }

    fn decode(&self, e: &[u8]) -> (i64, i64) {
        (rd_i64(e, 0), self.base_offset + i64::from(rd_u32(e, 8)))
    }

    pub(crate) fn last(&self) -> Option<(i64, i64)> {
        self.m
            .entries()
            .checked_sub(1)
            .map(|i| self.decode(self.m.entry(i)))
    }

    /// Adds `(timestamp, offset)` if the timestamp is a new maximum.
    pub(crate) fn append(&mut self, timestamp: i64, offset: i64) -> bool {
        let Ok(rel) = u32::try_from(offset - self.base_offset) else {
            return false;
        };
        if let Some((lt, lo)) = self.last() {
            if timestamp <= lt || offset < lo {
                return false;
            }
            if offset == lo {
                // Same batch reached a higher max: replace the entry.
                let n = self.m.entries();
                self.m.set_entries(n - 1);
            }
        }
        let mut e = [0u8; TIME_ENTRY];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&rel.to_be_bytes());
        self.m.push(&e)
    }

    /// The last entry whose timestamp is at or below `timestamp`.
    pub(crate) fn lookup(&self, timestamp: i64) -> Option<(i64, i64)> {
        let n = self.m.partition_point(|e| self.decode(e).0 <= timestamp);
        n.checked_sub(1).map(|i| self.decode(self.m.entry(i)))
    }

    pub(crate) fn clear(&mut self) {
        self.m.set_entries(0);
    }

    pub(crate) fn is_sane(&self, next_offset: i64) -> bool {
        if self.m.ragged() {
            return false;
        }
        let mut prev: Option<(i64, i64)> = None;
        for i in 0..self.m.entries() {
            let (t, o) = self.decode(self.m.entry(i));
            if o >= next_offset {
                return false;
            }
            if let Some((pt, po)) = prev {
                if t <= pt || o < po {
                    return false;
                }
            }
            prev = Some((t, o));
        }
        true
    }

    pub(crate) fn grow_to(&mut self, capacity: usize) -> Result<(), StorageError> {
        if capacity > self.m.capacity() {
            self.m.resize(capacity)?;
        }
        Ok(())
    }

    pub(crate) fn seal(&mut self) -> Result<(), StorageError> {
        self.m.seal()
    }

    /// Trims to the used entries without fsync; returns a handle to sync.
    pub(crate) fn trim(&mut self) -> Result<File, StorageError> {
        self.m.trim()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.m.path
    }

    /// Records that the file was renamed to `path` (the handle and mapping
    /// stay valid).
    pub(crate) fn renamed(&mut self, path: PathBuf) {
        self.m.path = path;
    }

    /// Closes the file and unmaps it; the next use loads it again (a
    /// sealed segment nobody reads keeps no descriptor or mapping for it).
    pub(crate) fn unload(&mut self) {
        self.m.unload();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_lookup_returns_the_floor_entry_or_segment_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = OffsetIndex::open(&dir.path().join("a.index"), 100, 16).unwrap();
        assert_eq!(ix.lookup(150), (100, 0));
        assert!(ix.append(110, 4096));
        assert!(ix.append(130, 8192));
        assert!(!ix.append(130, 9000), "entries must strictly increase");
        assert_eq!(ix.lookup(105), (100, 0));
        assert_eq!(ix.lookup(110), (110, 4096));
        assert_eq!(ix.lookup(129), (110, 4096));
        assert_eq!(ix.lookup(1_000), (130, 8192));
        assert_eq!(ix.lookup_position(8191), Some((110, 4096)));
        assert_eq!(ix.lookup_position(100), None);
    }

    #[test]
    fn full_offset_index_skips_entries_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = OffsetIndex::open(&dir.path().join("a.index"), 0, 1).unwrap();
        assert!(ix.append(1, 10));
        assert!(ix.is_full());
        assert!(!ix.append(2, 20));
        assert_eq!(ix.lookup(5), (1, 10));
    }

    #[test]
    fn sealed_index_reopens_with_its_entries_and_passes_sanity() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.index");
        let mut ix = OffsetIndex::open(&p, 0, 64).unwrap();
        ix.append(3, 100);
        ix.append(9, 300);
        ix.seal().unwrap();
        drop(ix);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 16);
        let ix = OffsetIndex::open(&p, 0, 0).unwrap();
        assert_eq!(ix.len(), 2);
        assert!(ix.is_sane(301));
        assert!(!ix.is_sane(300), "an entry at the end of the log is stale");
    }

    #[test]
    fn ragged_or_unordered_index_fails_sanity() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.index");
        std::fs::write(&p, [0u8; 12]).unwrap();
        let ix = OffsetIndex::open(&p, 0, 0).unwrap();
        assert!(!ix.is_sane(1 << 20));
        let mut bytes = Vec::new();
        for (o, pos) in [(5u32, 50u32), (4, 60)] {
            bytes.extend_from_slice(&o.to_be_bytes());
            bytes.extend_from_slice(&pos.to_be_bytes());
        }
        std::fs::write(&p, &bytes).unwrap();
        let ix = OffsetIndex::open(&p, 0, 0).unwrap();
        assert!(!ix.is_sane(1 << 20));
    }

    #[test]
    fn time_index_keeps_only_new_maxima_and_finds_the_floor() {
        let dir = tempfile::tempdir().unwrap();
        let mut ix = TimeIndex::open(&dir.path().join("a.timeindex"), 0, 16).unwrap();
        assert!(ix.append(1_000, 0));
        assert!(
            !ix.append(900, 5),
            "an older timestamp is not a new maximum"
        );
        assert!(ix.append(2_000, 10));
        assert!(ix.append(2_500, 10), "same batch, higher max replaces");
        assert_eq!(ix.last(), Some((2_500, 10)));
        assert_eq!(ix.lookup(999), None);
        assert_eq!(ix.lookup(1_999), Some((1_000, 0)));
        assert_eq!(ix.lookup(3_000), Some((2_500, 10)));
        assert!(ix.is_sane(11));
        assert!(!ix.is_sane(10), "an entry at or past the log end is stale");
    }
}
