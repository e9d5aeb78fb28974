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
}

impl PartitionStats {
    pub fn new(topic: &str) -> Self {
        PartitionStats {
            topic: Arc::from(topic),
            bytes_in: AtomicU64::new(0),
            records_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
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
