//! Helpers of the tiered-storage tests: waiting for the uploader, and
//! reading a partition back through either tier.

use std::future::Future;
use std::time::Duration;

use std::sync::Arc;

use cache::{CacheConfig, ColdCache, ObjectStoreHandle};
use storage::tier::{Manifest, MemoryManifest, PartitionKey, Tier, TierConfig, TieredPartition};
use storage::PartitionLog;

/// Tiering settings for tests: retention every 100 ms, retries after 20 ms
/// growing to 200 ms.
pub fn fast_config() -> TierConfig {
    let mut c = TierConfig {
        retention_interval: Duration::from_millis(100),
        ..TierConfig::default()
    };
    c.engine.retry = cache::RetrySchedule {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
        multiplier: 2.0,
    };
    c
}

/// The tiering service over `store` with a fresh in-memory manifest.
pub async fn start_tier(
    config: TierConfig,
    store: &ObjectStoreHandle,
) -> (Tier, Arc<MemoryManifest>) {
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .unwrap();
    let manifest = Arc::new(MemoryManifest::new());
    let tier = Tier::start(
        config,
        store.clone(),
        cache,
        Arc::clone(&manifest) as Arc<dyn Manifest>,
    );
    (tier, manifest)
}

/// Waits (polling) for `cond`; fails with `what` rather than hanging.
pub async fn until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..3000 {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

/// The offset after the partition's last sealed local segment (0: none).
pub fn sealed_end(p: &TieredPartition) -> i64 {
    p.log()
        .segments()
        .iter()
        .filter(|s| s.sealed)
        .map(|s| s.last_offset + 1)
        .max()
        .unwrap_or(0)
}

/// Every batch of `key` from `from` to `end`, read through the tier, concatenated.
pub async fn cold_bytes(tier: &Tier, key: PartitionKey, from: i64, end: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from;
    while offset < end {
        let r = tier
            .read(key, offset, 64 << 10)
            .await
            .unwrap()
            .expect("tiered data");
        assert!(r.next_offset > offset, "a cold read makes progress");
        for batch in storage::batch::BatchIter::new(&r.bytes) {
            let (h, bytes) = batch.unwrap();
            if h.base_offset < end {
                out.extend_from_slice(bytes);
            }
        }
        offset = r.next_offset;
    }
    out
}

/// Every batch of the local log from `from` to `end`, concatenated.
pub fn local_bytes(log: &PartitionLog, from: i64, end: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from;
    while offset < end {
        let s = log.read(offset, 64 << 10, end).unwrap();
        out.extend_from_slice(&s.read_to_bytes().unwrap());
        offset = s.next_offset;
    }
    out
}
