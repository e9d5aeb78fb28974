//! Aborted transactions travel with tiered segments: each sealed segment's
//! aborted-transaction index goes up beside it, and another agent's tier
//! (a replica whose log began at the tiered end, with no local index of
//! those segments) names the aborted transactions a read_committed cold
//! read overlaps.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use cache::{CacheConfig, ColdCache, ObjectStoreExt, ObjectStoreHandle};
use kafka_protocol::records::Compression;
use storage::tier::{Manifest, MemoryManifest, PartitionKey, Tier, TierConfig, TierRetention};
use storage::{ControlType, PartitionLog};

const TS: i64 = 1_700_000_000_000;

async fn tier(store: &ObjectStoreHandle, manifest: &Arc<MemoryManifest>) -> Tier {
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .unwrap();
    Tier::start(
        TierConfig::default(),
        store.clone(),
        cache,
        Arc::clone(manifest) as Arc<dyn Manifest>,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agent_names_the_aborted_transactions_of_tiered_segments() {
    let store = ObjectStoreHandle::in_memory();
    let manifest = Arc::new(MemoryManifest::new());
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let dir = tempfile::tempdir().unwrap();
    let leader_tier = tier(&store, &manifest).await;
    let log = PartitionLog::open(dir.path(), common::small_segments()).unwrap();
    let mut p = leader_tier
        .open_partition(key, log, TierRetention::default())
        .unwrap();

    // producer 88 writes a transaction and aborts it; producer 89 commits one
    let aborted = p
        .append(&mut common::txn_batch(88, 0, 0, 5), 0, TS)
        .unwrap();
    let aborted_first = aborted.info().base_offset;
    p.append_marker(88, 0, ControlType::Abort, 0, 0, TS)
        .unwrap();
    let committed = p
        .append(&mut common::txn_batch(89, 0, 0, 5), 0, TS)
        .unwrap();
    p.append_marker(89, 0, ControlType::Commit, 0, 0, TS)
        .unwrap();
    let committed_first = committed.info().base_offset;
    // enough after them to seal their segments, then everything uploads
    for i in 0..300u64 {
        let mut b = common::batch_with(50, 200, TS, Compression::None, None, i);
        p.append(&mut b, 0, TS).unwrap();
    }
    let sealed_end = p
        .log()
        .segments()
        .iter()
        .filter(|s| s.sealed)
        .map(|s| s.last_offset + 1)
        .max()
        .unwrap();
    p.set_upload_limit(i64::MAX);
    for _ in 0..3000 {
        p.tick(TS).unwrap();
        if p.shared().deletable_below() >= sealed_end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let entries = manifest.segments(key);
    let indexes: Vec<_> = futures::future::join_all(entries.iter().map(|e| {
        let k = storage::tier::cold::sibling_key(&e.key, cache::layout::TXN_INDEX_EXT);
        let store = store.clone();
        async move {
            let path = cache::object_store::path::Path::parse(k).unwrap();
            store.store.head(&path).await.is_ok()
        }
    }))
    .await;
    assert_eq!(
        indexes.iter().filter(|x| **x).count(),
        1,
        "only the segment holding the ABORT marker has an index object"
    );

    // an agent with no local copy of these segments
    let other = tier(&store, &manifest).await;
    let named = other
        .aborted_transactions(key, 0, sealed_end)
        .await
        .unwrap();
    assert_eq!(named.len(), 1, "{named:?}");
    assert_eq!(
        (named[0].producer_id, named[0].first_offset),
        (88, aborted_first)
    );
    // a read starting after the aborted transaction ended names nothing
    let later = other
        .aborted_transactions(key, committed_first, sealed_end)
        .await
        .unwrap();
    assert!(later.is_empty(), "{later:?}");
    p.close().unwrap();
    leader_tier.shutdown().await;
    other.shutdown().await;
}
