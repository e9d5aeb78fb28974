//! Counters and gauges of tiered storage, rendered as Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use cache::CacheStats;

use super::budget::DiskBudget;
use super::engine::EngineStats;

/// Counters updated by the uploader and cold readers.
#[derive(Debug, Default)]
pub struct TierMetrics {
    pub uploaded_bytes: AtomicU64,
    pub uploaded_objects: AtomicU64,
    pub uploaded_segments: AtomicU64,
    pub upload_failures: AtomicU64,
    pub committed_segments: AtomicU64,
    pub commit_failures: AtomicU64,
    pub deleted_objects: AtomicU64,
    pub delete_failures: AtomicU64,
    pub trimmed_segments: AtomicU64,
    pub cold_reads: AtomicU64,
    pub cold_read_bytes: AtomicU64,
    pub cold_read_errors: AtomicU64,
    /// Compacted copies swapped into the manifest.
    pub replaced_segments: AtomicU64,
    /// Bytes of `.seg` objects those swaps took out of object storage.
    pub compacted_bytes_removed: AtomicU64,
    /// Re-uploads and manifest swaps that failed.
    pub reupload_failures: AtomicU64,
    // Gauges, refreshed by the uploader loop.
    pub pending_segments: AtomicU64,
    pub pending_bytes: AtomicU64,
    pub uploads_in_flight: AtomicU64,
    pub oldest_pending_ms: AtomicU64,
    pub reuploads_pending: AtomicU64,
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A point-in-time copy of every figure, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TierSnapshot {
    pub uploaded_bytes: u64,
    pub uploaded_objects: u64,
    pub uploaded_segments: u64,
    pub upload_failures: u64,
    pub committed_segments: u64,
    pub commit_failures: u64,
    pub deleted_objects: u64,
    pub delete_failures: u64,
    pub trimmed_segments: u64,
    pub cold_reads: u64,
    pub cold_read_bytes: u64,
    pub cold_read_errors: u64,
    pub replaced_segments: u64,
    pub compacted_bytes_removed: u64,
    pub reupload_failures: u64,
    /// Compacted segments waiting to replace their objects.
    pub reuploads_pending: u64,
    pub pending_segments: u64,
    pub pending_bytes: u64,
    pub uploads_in_flight: u64,
    /// Seconds since the oldest segment still waiting for upload was sealed.
    pub upload_lag_seconds: f64,
    /// Offsets on local disk not yet in object storage, over all partitions.
    pub upload_lag_offsets: u64,
    pub local_bytes: u64,
    pub local_pending_bytes: u64,
    pub local_disk_limit: Option<u64>,
    pub produce_refusals: u64,
    pub early_evictions: u64,
    pub cache: CacheStats,
}

impl TierMetrics {
    pub(crate) fn set_engine(&self, s: &EngineStats) {
        let set = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        set(&self.pending_segments, s.pending_segments as u64);
        set(&self.pending_bytes, s.pending_bytes);
        set(&self.uploads_in_flight, s.uploads_in_flight as u64);
        set(&self.oldest_pending_ms, s.oldest_pending_ms);
        set(&self.reuploads_pending, s.reuploads_pending as u64);
    }

    pub(crate) fn snapshot(
        &self,
        budget: &DiskBudget,
        lag_offsets: u64,
        cache: CacheStats,
    ) -> TierSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TierSnapshot {
            uploaded_bytes: g(&self.uploaded_bytes),
            uploaded_objects: g(&self.uploaded_objects),
            uploaded_segments: g(&self.uploaded_segments),
            upload_failures: g(&self.upload_failures),
            committed_segments: g(&self.committed_segments),
            commit_failures: g(&self.commit_failures),
            deleted_objects: g(&self.deleted_objects),
            delete_failures: g(&self.delete_failures),
            trimmed_segments: g(&self.trimmed_segments),
            cold_reads: g(&self.cold_reads),
            cold_read_bytes: g(&self.cold_read_bytes),
            cold_read_errors: g(&self.cold_read_errors),
            replaced_segments: g(&self.replaced_segments),
            compacted_bytes_removed: g(&self.compacted_bytes_removed),
            reupload_failures: g(&self.reupload_failures),
            reuploads_pending: g(&self.reuploads_pending),
            pending_segments: g(&self.pending_segments),
            pending_bytes: g(&self.pending_bytes),
            uploads_in_flight: g(&self.uploads_in_flight),
            upload_lag_seconds: g(&self.oldest_pending_ms) as f64 / 1000.0,
            upload_lag_offsets: lag_offsets,
            local_bytes: budget.local_bytes(),
            local_pending_bytes: budget.pending_bytes(),
            local_disk_limit: budget.limit(),
            produce_refusals: budget.refusals(),
            early_evictions: budget.early_evictions(),
            cache,
        }
    }
}

impl TierSnapshot {
    /// Prometheus text exposition of every figure.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, lines: &[(&str, String)]| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in lines {
                let _ = writeln!(s, "{name}{labels} {value}");
            }
        };
        let c = &self.cache;
        metric(
            "aerostream_tier_uploaded_bytes_total",
            "counter",
            "Bytes uploaded to object storage (segments and indexes)",
            &[("", self.uploaded_bytes.to_string())],
        );
        metric(
            "aerostream_tier_uploaded_objects_total",
            "counter",
            "Objects uploaded to object storage",
            &[("", self.uploaded_objects.to_string())],
        );
        metric(
            "aerostream_tier_uploaded_segments_total",
            "counter",
            "Sealed segments uploaded (all their objects)",
            &[("", self.uploaded_segments.to_string())],
        );
        metric(
            "aerostream_tier_upload_failures_total",
            "counter",
            "Segment uploads that failed and will be retried",
            &[("", self.upload_failures.to_string())],
        );
        metric(
            "aerostream_tier_committed_segments_total",
            "counter",
            "Segments committed to the manifest",
            &[("", self.committed_segments.to_string())],
        );
        metric(
            "aerostream_tier_commit_failures_total",
            "counter",
            "Manifest commits that failed and will be retried",
            &[("", self.commit_failures.to_string())],
        );
        metric(
            "aerostream_tier_deleted_objects_total",
            "counter",
            "Objects deleted by retention, DeleteRecords and topic deletion",
            &[("", self.deleted_objects.to_string())],
        );
        metric(
            "aerostream_tier_delete_failures_total",
            "counter",
            "Object deletions that failed",
            &[("", self.delete_failures.to_string())],
        );
        metric(
            "aerostream_tier_replaced_segments_total",
            "counter",
            "Tiered segments replaced in the manifest by a compacted copy",
            &[("", self.replaced_segments.to_string())],
        );
        metric(
            "aerostream_tier_compacted_bytes_removed_total",
            "counter",
            "Bytes of segment objects that compacted copies made unnecessary",
            &[("", self.compacted_bytes_removed.to_string())],
        );
        metric(
            "aerostream_tier_reupload_failures_total",
            "counter",
            "Uploads of compacted copies, and manifest swaps, that failed",
            &[("", self.reupload_failures.to_string())],
        );
        metric(
            "aerostream_tier_reuploads_pending",
            "gauge",
            "Compacted segments waiting to replace their objects in object storage",
            &[("", self.reuploads_pending.to_string())],
        );
        metric(
            "aerostream_tier_pending_segments",
            "gauge",
            "Sealed segments waiting for upload or commit",
            &[("", self.pending_segments.to_string())],
        );
        metric(
            "aerostream_tier_pending_bytes",
            "gauge",
            "Bytes of sealed segments waiting for upload or commit",
            &[("", self.pending_bytes.to_string())],
        );
        metric(
            "aerostream_tier_uploads_in_flight",
            "gauge",
            "Segment uploads running now",
            &[("", self.uploads_in_flight.to_string())],
        );
        metric(
            "aerostream_tier_upload_lag_seconds",
            "gauge",
            "Age of the oldest sealed segment not yet in object storage",
            &[("", format!("{:.3}", self.upload_lag_seconds))],
        );
        metric(
            "aerostream_tier_upload_lag_offsets",
            "gauge",
            "Offsets behind the log end not yet in object storage, summed over partitions",
            &[("", self.upload_lag_offsets.to_string())],
        );
        metric(
            "aerostream_local_disk_bytes",
            "gauge",
            "Partition data on local disk",
            &[("", self.local_bytes.to_string())],
        );
        metric(
            "aerostream_local_unuploaded_bytes",
            "gauge",
            "Partition data on local disk not yet in object storage",
            &[("", self.local_pending_bytes.to_string())],
        );
        metric(
            "aerostream_local_disk_limit_bytes",
            "gauge",
            "Local disk limit for partition data (0: none)",
            &[("", self.local_disk_limit.unwrap_or(0).to_string())],
        );
        metric(
            "aerostream_produce_backpressure_total",
            "counter",
            "Appends refused (retriably) because data not yet uploaded filled the local disk limit",
            &[("", self.produce_refusals.to_string())],
        );
        metric(
            "aerostream_local_early_evictions_total",
            "counter",
            "Times tiered segments left local disk early under disk pressure",
            &[("", self.early_evictions.to_string())],
        );
        metric(
            "aerostream_cold_reads_total",
            "counter",
            "Fetch reads served from object storage",
            &[("", self.cold_reads.to_string())],
        );
        metric(
            "aerostream_cold_read_bytes_total",
            "counter",
            "Record bytes served from object storage",
            &[("", self.cold_read_bytes.to_string())],
        );
        metric(
            "aerostream_cold_read_errors_total",
            "counter",
            "Cold reads that failed",
            &[("", self.cold_read_errors.to_string())],
        );
        metric(
            "aerostream_cold_cache_lookups_total",
            "counter",
            "Block lookups of cold readers by where the block was found",
            &[
                ("{result=\"memory_hit\"}", c.memory_hits.to_string()),
                ("{result=\"disk_hit\"}", c.disk_hits.to_string()),
                ("{result=\"miss\"}", c.misses.to_string()),
            ],
        );
        let total = (c.memory_hits + c.disk_hits + c.misses).max(1) as f64;
        metric(
            "aerostream_cold_cache_hit_ratio",
            "gauge",
            "Share of block lookups served by each cache tier since start",
            &[
                (
                    "{tier=\"memory\"}",
                    format!("{:.4}", c.memory_hits as f64 / total),
                ),
                (
                    "{tier=\"disk\"}",
                    format!("{:.4}", c.disk_hits as f64 / total),
                ),
                ("{tier=\"any\"}", format!("{:.4}", c.hit_ratio())),
            ],
        );
        metric(
            "aerostream_object_store_gets_total",
            "counter",
            "Ranged GETs sent to object storage (reads and read-ahead)",
            &[("", c.gets.to_string())],
        );
        metric(
            "aerostream_object_store_get_bytes_total",
            "counter",
            "Bytes received by those GETs",
            &[("", c.get_bytes.to_string())],
        );
        metric(
            "aerostream_object_store_get_errors_total",
            "counter",
            "GETs that failed",
            &[("", c.get_errors.to_string())],
        );
        s
    }
}
