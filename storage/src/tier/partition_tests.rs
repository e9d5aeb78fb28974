//! The uploader sees a sealed segment only once the local log has fsynced it.

use std::sync::Arc;
use std::time::Duration;

use cache::{CacheConfig, ColdCache, ObjectStoreHandle};
use futures::StreamExt;

use crate::test_support::batch;
use crate::tier::{Manifest, MemoryManifest, PartitionKey, Tier, TierConfig, TierRetention};
use crate::{LogConfig, PartitionLog};

async fn objects(store: &ObjectStoreHandle) -> usize {
    store.store.list(None).collect::<Vec<_>>().await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_segment_is_uploaded_only_after_its_background_fsync() {
    let store = ObjectStoreHandle::in_memory();
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .expect("cache");
    let manifest = Arc::new(MemoryManifest::new());
    let tier = Tier::start(
        TierConfig::default(),
        store.clone(),
        cache,
        Arc::clone(&manifest) as Arc<dyn Manifest>,
    );
    let dir = tempfile::tempdir().expect("dir");
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config).expect("open");
    let gate = log.hold_flushes();
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let mut p = tier
        .open_partition(key, log, TierRetention::default())
        .expect("partition");
    // Rebound after the partition so that, should an assertion fail, the
    // gate opens before the partition's log waits for its held flushes.
    let gate = gate;

    while p.log().segments().len() < 2 {
        p.append(&mut batch(30_000), 0, 1_000).expect("append");
    }
    let sealed_end = p.log().segments()[1].base_offset;
    // With the seal's fsync held, ticking and waiting upload nothing.
    for _ in 0..10 {
        p.tick(1_001).expect("tick");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        objects(&store).await,
        0,
        "not durable locally, not uploaded"
    );
    assert!(p.shared().deletable_below() < sealed_end);

    gate.open();
    let mut uploaded = false;
    for _ in 0..1_500 {
        p.tick(1_002).expect("tick");
        if p.shared().deletable_below() >= sealed_end {
            uploaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        uploaded,
        "the segment is uploaded and committed once fsynced"
    );
    assert!(objects(&store).await > 0);
    p.close().expect("close");
    tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durability_point_through_the_tiered_partition_moves_its_flushed_offset() {
    let store = ObjectStoreHandle::in_memory();
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .expect("cache");
    let tier = Tier::start(
        TierConfig::default(),
        store,
        cache,
        Arc::new(MemoryManifest::new()),
    );
    let dir = tempfile::tempdir().expect("dir");
    let log = PartitionLog::open(dir.path(), LogConfig::default()).expect("open");
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let mut p = tier
        .open_partition(key, log, TierRetention::default())
        .expect("partition");
    p.append(&mut batch(100), 0, 1_000).expect("append");
    assert_eq!(p.flushed_offset(), 0);
    let sp = p.sync_point();
    let done = tokio::task::spawn_blocking(move || sp.run())
        .await
        .expect("join");
    assert_eq!(p.sync_done(done).expect("sync"), 4);
    assert_eq!(p.flushed_offset(), 4);
    p.close().expect("close");
    tier.shutdown().await;
}
