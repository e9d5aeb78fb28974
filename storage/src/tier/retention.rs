//! Retention across tiers: which tiered entries have expired, and the pass
//! that trims manifests first and deletes objects second.
//!
//! Order matters: an entry leaves the manifest before its objects go, so a
//! reader never finds an entry whose object is missing (a read already in
//! flight with an older snapshot may still fail once and be retried). An
//! object whose deletion fails is retried on the next pass; if the process
//! stops first it stays as an orphan (see docs/tiering.md).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cache::layout;
use cache::object_store::path::Path;
use cache::{Backend, ColdCache, ObjectStoreExt, ObjectStoreHandle};
use futures::StreamExt;
use parking_lot::Mutex;

use super::cold::sibling_key;
use super::manifest::{Manifest, TieredSegment};
use super::metrics::{add, TierMetrics};
use super::shared::{PartitionShared, TierRetention};

/// How deleted objects leave the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeleteMode {
    /// Delete at once.
    #[default]
    Delete,
    /// Copy under `{prefix}/tombstones/` (expired by a bucket lifecycle
    /// rule), then delete. GCS deletes at once: its copy cannot be verified
    /// locally.
    Tombstone,
}

/// The offset below which tiered entries have expired, if any has: entries
/// wholly below the DeleteRecords `floor`, older than `retention.ms`, or
/// beyond `retention.bytes` (counted over tiered entries plus the local
/// bytes not yet tiered), oldest first, stopping at the first that stays.
/// An entry without timestamps (max timestamp -1) expires by time only
/// once the retention pass has put its upload time in its place.
pub fn expired_below(
    entries: &[TieredSegment],
    retention: TierRetention,
    floor: i64,
    local_pending_bytes: u64,
    now_ms: i64,
) -> Option<i64> {
    let first = entries.first()?;
    let mut total: u64 = entries.iter().map(|e| e.size).sum::<u64>() + local_pending_bytes;
    let mut below = floor;
    for e in entries {
        let by_floor = e.last_offset < floor;
        let by_size = retention
            .retention_bytes
            .is_some_and(|rb| total.saturating_sub(e.size) >= rb);
        let by_time = retention.retention_ms.is_some_and(|ms| {
            e.max_timestamp >= 0
                && now_ms.saturating_sub(e.max_timestamp) > i64::try_from(ms).unwrap_or(i64::MAX)
        });
        if !(by_floor || by_size || by_time) {
            break;
        }
        total = total.saturating_sub(e.size);
        below = below.max(e.next_offset());
    }
    (first.last_offset < below).then_some(below)
}

/// Deletes objects (retention, DeleteRecords, topic deletion, the objects
/// a compacted copy replaced), as the delete mode says; cheap to clone.
#[derive(Clone)]
pub(crate) struct ObjectDeleter {
    pub(crate) store: ObjectStoreHandle,
    pub(crate) metrics: Arc<TierMetrics>,
    pub(crate) cache: ColdCache,
    pub(crate) mode: DeleteMode,
    /// Deletions that failed, retried by the next retention pass.
    pub(crate) failed: Arc<Mutex<Vec<(Path, u64)>>>,
    /// Upload times of objects without timestamps, by `.seg` key.
    pub(crate) upload_times: Arc<Mutex<HashMap<String, i64>>>,
}

pub(crate) struct RetentionPass {
    pub(crate) deleter: ObjectDeleter,
    pub(crate) manifest: Arc<dyn Manifest>,
    pub(crate) partitions: Vec<Arc<PartitionShared>>,
    pub(crate) deadline: Duration,
}

impl RetentionPass {
    pub(crate) async fn run(self) {
        let d = &self.deleter;
        let retry: Vec<(Path, u64)> = std::mem::take(&mut *d.failed.lock());
        for (key, size) in retry {
            d.delete_object(&key, size).await;
        }
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        for shared in &self.partitions {
            let entries = self
                .with_upload_times(shared.manifest(), shared.retention(), now_ms)
                .await;
            let Some(below) = expired_below(
                &entries,
                shared.retention(),
                shared.floor(),
                shared.pending_bytes(),
                now_ms,
            ) else {
                continue;
            };
            let trimmed =
                tokio::time::timeout(self.deadline, self.manifest.trim(shared.key(), below)).await;
            match trimmed {
                Ok(Ok(removed)) => {
                    shared.remove_below(below);
                    add(&d.metrics.trimmed_segments, removed.len() as u64);
                    for e in &removed {
                        d.delete_segment(e).await;
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(topic_id = %shared.key().topic_id, partition = shared.key().partition, error = %e, "trimming the manifest failed; retention will retry")
                }
                Err(_) => tracing::warn!("trimming the manifest timed out; retention will retry"),
            }
        }
        for topic in self.manifest.deleted_topics() {
            let mut clean = true;
            for e in topic.segments.values().flatten() {
                clean &= d.delete_segment(e).await;
            }
            clean &= d
                .delete_prefix(&layout::topic_prefix(&d.store.prefix, topic.topic_id))
                .await;
            if clean {
                if let Err(e) = self.manifest.forget_deleted_topic(topic.topic_id).await {
                    tracing::warn!(topic_id = %topic.topic_id, error = %e, "could not forget a deleted topic's manifest");
                }
            }
        }
    }

    /// Entries whose batches carry no timestamps (all -1) would never
    /// expire by `retention.ms`; for them the time of the `.seg` object's
    /// upload stands in (as the local log uses the file's modification
    /// time), looked up in the store once per entry and remembered. Only the
    /// oldest entries are looked up, up to the first that has not expired.
    async fn with_upload_times(
        &self,
        entries: Arc<Vec<TieredSegment>>,
        retention: TierRetention,
        now_ms: i64,
    ) -> Arc<Vec<TieredSegment>> {
        let Some(ms) = retention.retention_ms else {
            return entries;
        };
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        if entries.iter().all(|e| e.max_timestamp >= 0) {
            return entries;
        }
        let mut out = entries.as_ref().clone();
        for e in &mut out {
            if e.max_timestamp < 0 {
                match self.upload_time(&e.key).await {
                    Some(t) => e.max_timestamp = t,
                    None => break,
                }
            }
            if now_ms.saturating_sub(e.max_timestamp) <= ms {
                break;
            }
        }
        Arc::new(out)
    }

    async fn upload_time(&self, key: &str) -> Option<i64> {
        let d = &self.deleter;
        if let Some(t) = d.upload_times.lock().get(key) {
            return Some(*t);
        }
        let path = Path::parse(key).ok()?;
        match d.store.store.head(&path).await {
            Ok(meta) => {
                let t = meta.last_modified.timestamp_millis();
                d.upload_times.lock().insert(key.to_string(), t);
                Some(t)
            }
            Err(e) => {
                tracing::warn!(%key, error = %e, "could not read when an object without timestamps was uploaded");
                None
            }
        }
    }
}

impl ObjectDeleter {
    /// Deletes every object of a tiered entry; whether all went.
    /// A packed entry's bytes share their object with other entries: that
    /// object goes when none reads from it any more (`pack::sweep`).
    pub(crate) async fn delete_segment(&self, e: &TieredSegment) -> bool {
        if e.pack.is_some() {
            return true;
        }
        let objects = [
            (e.key.clone(), e.size),
            (sibling_key(&e.key, layout::INDEX_EXT), e.index_size),
            (
                sibling_key(&e.key, layout::TIME_INDEX_EXT),
                e.time_index_size,
            ),
            // optional (see `producers`): deleting a missing one succeeds
            (sibling_key(&e.key, layout::PRODUCER_SNAPSHOT_EXT), 0),
            (sibling_key(&e.key, layout::TXN_INDEX_EXT), 0),
        ];
        let mut ok = true;
        for (key, size) in objects {
            match Path::parse(&key) {
                Ok(path) => ok &= self.delete_object(&path, size).await,
                Err(err) => {
                    tracing::warn!(%key, error = %err, "skipping an unusable object key");
                }
            }
        }
        ok
    }

    /// Deletes every object under `prefix` (orphans of a deleted topic).
    async fn delete_prefix(&self, prefix: &Path) -> bool {
        let listed: Vec<_> = self.store.store.list(Some(prefix)).collect().await;
        let mut ok = true;
        for item in listed {
            match item {
                Ok(meta) => ok &= self.delete_object(&meta.location, meta.size).await,
                Err(e) => {
                    tracing::warn!(%prefix, error = %e, "listing a deleted topic's objects failed");
                    ok = false;
                }
            }
        }
        ok
    }

    pub(crate) async fn delete_object(&self, key: &Path, size: u64) -> bool {
        self.cache.remove_object(key, size);
        self.upload_times.lock().remove(key.as_ref());
        let store = self.store.store.as_ref();
        if self.mode == DeleteMode::Tombstone && self.store.backend != Backend::Gcs {
            if let Ok(dead) = layout::tombstone_key(&self.store.prefix, key) {
                match store.copy(key, &dead).await {
                    Ok(()) | Err(cache::object_store::Error::NotFound { .. }) => {}
                    Err(e) => {
                        tracing::warn!(%key, error = %e, "moving an object under the tombstone prefix failed");
                        add(&self.metrics.delete_failures, 1);
                        self.failed.lock().push((key.clone(), size));
                        return false;
                    }
                }
            }
        }
        match store.delete(key).await {
            Ok(()) | Err(cache::object_store::Error::NotFound { .. }) => {
                add(&self.metrics.deleted_objects, 1);
                true
            }
            Err(e) => {
                tracing::warn!(%key, error = %e, "deleting an object failed; will retry");
                add(&self.metrics.delete_failures, 1);
                self.failed.lock().push((key.clone(), size));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(base: i64, last: i64, max_ts: i64) -> TieredSegment {
        TieredSegment {
            key: format!("k{base}"),
            base_offset: base,
            last_offset: last,
            max_timestamp: max_ts,
            size: 100,
            ..TieredSegment::default()
        }
    }

    #[test]
    fn retention_expires_the_oldest_entries_by_time_size_and_floor() {
        let entries = vec![e(0, 9, 1_000), e(10, 19, 2_000), e(20, 29, 3_000)];
        let by_time = TierRetention {
            retention_ms: Some(1_500),
            ..TierRetention::default()
        };
        assert_eq!(expired_below(&entries, by_time, -1, 0, 3_600), Some(20));
        assert_eq!(expired_below(&entries, by_time, -1, 0, 2_000), None);
        let by_size = TierRetention {
            retention_bytes: Some(150),
            ..TierRetention::default()
        };
        assert_eq!(
            expired_below(&entries, by_size, -1, 0, 0),
            Some(10),
            "300 bytes tiered, at least 150 kept: only the oldest entry goes"
        );
        assert_eq!(
            expired_below(&entries, by_size, -1, 100, 0),
            Some(20),
            "local bytes not yet tiered count too"
        );
        assert_eq!(
            expired_below(&entries, TierRetention::default(), 15, 0, 0),
            Some(15),
            "the DeleteRecords floor removes entries wholly below it"
        );
        assert_eq!(
            expired_below(&entries, TierRetention::default(), 5, 0, 0),
            None
        );
        assert_eq!(expired_below(&[], by_size, 100, 0, 0), None);
    }
}
