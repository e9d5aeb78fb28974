//! Traffic counters of one open partition, added to by the produce and
//! fetch paths and read by the `/metrics` series.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Traffic counters of one open partition.
#[derive(Debug)]
pub struct PartitionStats {
    pub topic: Arc<str>,
    pub bytes_in: AtomicU64,
    pub records_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Compaction of a compacted topic's partition (zero for others).
    pub cleaner: CleanerStats,
}

/// What the log cleaner reports of one partition (set by its task).
#[derive(Debug, Default)]
pub struct CleanerStats {
    /// Bytes of sealed segments written since they were last compacted.
    pub dirty_bytes: AtomicU64,
    /// Bytes of sealed segments.
    pub compactable_bytes: AtomicU64,
    /// Compaction runs installed.
    pub runs: AtomicU64,
    /// Bytes the runs removed from the log.
    pub bytes_removed: AtomicU64,
    /// Records the runs removed.
    pub records_removed: AtomicU64,
    /// Every offset below this was compacted at least once.
    pub compacted_below: AtomicU64,
}

impl CleanerStats {
    /// Publishes the log's own figures.
    pub fn publish(&self, f: &storage::CleanerFigures) {
        self.dirty_bytes.store(f.dirty_bytes, Ordering::Relaxed);
        self.compactable_bytes
            .store(f.compactable_bytes, Ordering::Relaxed);
        self.runs.store(f.totals.runs, Ordering::Relaxed);
        self.bytes_removed
            .store(f.totals.bytes_removed, Ordering::Relaxed);
        self.records_removed
            .store(f.totals.records_removed, Ordering::Relaxed);
        self.compacted_below.store(
            u64::try_from(f.compacted_below).unwrap_or(0),
            Ordering::Relaxed,
        );
    }
}

impl PartitionStats {
    pub fn new(topic: &str) -> Self {
        PartitionStats {
            topic: Arc::from(topic),
            bytes_in: AtomicU64::new(0),
            records_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            cleaner: CleanerStats::default(),
        }
    }

    pub fn appended(&self, bytes: u64, records: u64) {
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.records_in.fetch_add(records, Ordering::Relaxed);
    }

    pub fn sent(&self, bytes: u64) {
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }
}
