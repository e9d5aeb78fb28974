//! [`PartitionShared`]: what one tiered partition shares with the uploader
//! and cold readers, and the partition's [`TierRetention`].
//!
//! Writers, one per field: the uploader writes the manifest snapshot and
//! `deletable_below`; the partition's owning task writes its own figures
//! (floor, local start, log end, pending bytes, retention); anyone reads.
//! The set of segments whose compacted copy is being re-uploaded is added
//! to by the owning task and emptied by the uploader.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::manifest::TieredSegment;
use super::PartitionKey;

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
    pub(crate) floor: AtomicI64,
    pub(crate) local_start: AtomicI64,
    pub(crate) log_end: AtomicI64,
    pub(crate) pending_bytes: AtomicU64,
    pub(crate) retention: Mutex<TierRetention>,
    /// Base offsets of local segments whose compacted copy is being
    /// uploaded: they are neither compacted again nor evicted meanwhile.
    reuploading: Mutex<BTreeSet<i64>>,
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
            reuploading: Mutex::new(BTreeSet::new()),
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

    /// First tiered offset served, if anything is tiered.
    pub fn tiered_start(&self) -> Option<i64> {
        self.manifest
            .read()
            .first()
            .map(TieredSegment::first_served)
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
        let at = list.partition_point(|e| e.first_served() < entry.first_served());
        list.insert(at, entry);
    }

    /// Replaces the snapshot with a fresh read of the manifest (entries
    /// other agents committed: earlier leaders of the partition). Returns
    /// whether it changed. Entries leave the manifest only at its start, so
    /// entries below the snapshot's first are stale (a retention pass
    /// removed them while the read was under way) and stay out: their
    /// objects may be going.
    pub(crate) fn replace_entries(&self, mut entries: Vec<TieredSegment>) -> bool {
        let mut m = self.manifest.write();
        if let Some(first) = m.first().map(TieredSegment::first_served) {
            entries.retain(|e| e.last_offset >= first);
        }
        if m.as_slice() == entries.as_slice() {
            return false;
        }
        *m = Arc::new(entries);
        true
    }

    /// Puts `entry` in place of the consecutive entries whose keys are
    /// `old_keys` (a compacted copy of the same offsets), if the snapshot
    /// still holds them all, one after the other.
    pub(crate) fn swap_entries(&self, old_keys: &[&str], entry: TieredSegment) {
        let mut m = self.manifest.write();
        let Some(first) = old_keys.first() else {
            return;
        };
        let Some(at) = m.iter().position(|e| e.key == *first) else {
            return;
        };
        let end = at + old_keys.len();
        let in_place = m
            .get(at..end)
            .is_some_and(|run| run.iter().zip(old_keys).all(|(e, k)| e.key == *k));
        if in_place {
            Arc::make_mut(&mut m).splice(at..end, [entry]);
        }
    }

    /// Notes that the local segment at `base` is being re-uploaded.
    pub(crate) fn mark_reuploading(&self, base: i64) {
        self.reuploading.lock().insert(base);
    }

    /// The re-upload of the segment at `base` is over.
    pub(crate) fn release_reupload(&self, base: i64) {
        self.reuploading.lock().remove(&base);
    }

    /// Whether the local segment at `base` is being re-uploaded.
    pub fn is_reuploading(&self, base: i64) -> bool {
        self.reuploading.lock().contains(&base)
    }

    /// The base offset of the first local segment being re-uploaded, if any:
    /// local compaction and eviction stop below it.
    pub fn first_reuploading(&self) -> Option<i64> {
        self.reuploading.lock().first().copied()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn e(base: i64, from: Option<i64>, last: i64) -> TieredSegment {
        TieredSegment {
            key: format!("k{base}-{last}"),
            base_offset: base,
            last_offset: last,
            served_from: from,
            pack: None,
            ..TieredSegment::default()
        }
    }

    #[test]
    fn a_fresh_manifest_read_never_brings_back_entries_retention_removed() {
        let key = PartitionKey::new(uuid::Uuid::from_u128(1), 0);
        let shared = PartitionShared::new(key, vec![e(0, None, 9), e(10, None, 19)], -1, 1);
        // a retention pass removed the first entry after a read had begun
        shared.remove_below(10);
        let stale_read = vec![e(0, None, 9), e(10, None, 19), e(15, Some(20), 30)];
        assert!(shared.replace_entries(stale_read));
        let served: Vec<_> = shared
            .manifest()
            .iter()
            .map(|e| (e.first_served(), e.last_offset))
            .collect();
        assert_eq!(served, vec![(10, 19), (20, 30)]);
        assert_eq!(shared.tiered_start(), Some(10));
        assert!(
            !shared.replace_entries(vec![e(10, None, 19), e(15, Some(20), 30)]),
            "the same entries again change nothing"
        );
    }
}
