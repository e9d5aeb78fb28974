//! Idempotent producer state travels with tiered segments, as KIP-405 has
//! it: the producer snapshot taken when a segment was sealed is uploaded
//! with it, and a replica whose log starts where object storage ends (it
//! fell behind its leader's local start, or its local log is new or lost)
//! restores it. Promoted later, it answers a producer's retry of a batch
//! written before the seal as a duplicate instead of storing it twice.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use cache::{CacheConfig, ColdCache, ObjectStoreExt, ObjectStoreHandle};
use kafka_protocol::records::Compression;
use storage::tier::{
    Manifest, MemoryManifest, PartitionKey, Tier, TierConfig, TierRetention, TieredPartition,
};
use storage::{AppendInfo, AppendOutcome, PartitionLog};

const TS: i64 = 1_700_000_000_000;

/// One agent: its own tier over the object store and manifest all share.
async fn tier(store: &ObjectStoreHandle, manifest: &Arc<MemoryManifest>) -> Tier {
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .unwrap();
    let config = TierConfig {
        retention_interval: Duration::from_millis(100),
        ..TierConfig::default()
    };
    Tier::start(
        config,
        store.clone(),
        cache,
        Arc::clone(manifest) as Arc<dyn Manifest>,
    )
}

fn open(tier: &Tier, key: PartitionKey, dir: &std::path::Path) -> TieredPartition {
    let log = PartitionLog::open(dir, common::small_segments()).unwrap();
    tier.open_partition(key, log, TierRetention::default())
        .unwrap()
}

/// Producer 77's batch of five records starting at `seq`.
fn idem(seq: i32) -> Vec<u8> {
    let producer = common::Idem {
        pid: 77,
        epoch: 0,
        seq,
    };
    common::batch_with(5, 100, TS, Compression::None, Some(producer), 1)
}

/// The leader (its tier holding uploads): producer 77 writes two batches,
/// then enough other data to seal several segments after them, and only
/// then may they upload. Returns the second batch's offsets and the end of
/// what object storage holds once every sealed segment is committed, each
/// with its producer snapshot.
async fn leader_writes_and_uploads(
    p: &mut TieredPartition,
    store: &ObjectStoreHandle,
    manifest: &MemoryManifest,
    key: PartitionKey,
) -> (AppendInfo, i64) {
    p.append(&mut idem(0), 0, TS).unwrap();
    let original = *p.append(&mut idem(5), 0, TS).unwrap().info();
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
    // the oldest segments' snapshots outlive more rolls than a log keeps
    // for its own recovery: their segments still upload them
    p.set_upload_limit(i64::MAX);
    for _ in 0..3000 {
        p.tick(TS).unwrap();
        if p.shared().deletable_below() >= sealed_end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tiered_end = p.shared().tiered_last().unwrap() + 1;
    assert_eq!(tiered_end, sealed_end, "every sealed segment is committed");
    assert!(tiered_end > original.last_offset + 1);
    let entries = manifest.segments(key);
    assert!(entries.len() >= 3, "{} segments", entries.len());
    for e in entries {
        let snapshot =
            storage::tier::cold::sibling_key(&e.key, cache::layout::PRODUCER_SNAPSHOT_EXT);
        let path = cache::object_store::path::Path::parse(snapshot).unwrap();
        assert!(
            store.store.head(&path).await.is_ok(),
            "segment {} went up with its producer snapshot",
            e.key
        );
    }
    (original, tiered_end)
}

fn is_duplicate_of(o: &AppendOutcome, original: &AppendInfo) -> bool {
    matches!(o, AppendOutcome::Duplicate(i)
        if (i.base_offset, i.last_offset) == (original.base_offset, original.last_offset))
}

/// A follower that fell below its leader's local start restarts at the end
/// of object storage (the fetcher's restart) and restores the snapshot
/// uploaded with the last tiered segment: once it leads, producer 77's retry
/// of its batch from before the seal is a duplicate, also after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_restarted_at_the_tiered_end_recognises_a_retry_from_before_the_seal() {
    let store = ObjectStoreHandle::in_memory();
    let manifest = Arc::new(MemoryManifest::new());
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let (leader_dir, follower_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader_tier = tier(&store, &manifest).await;
    leader_tier.hold_uploads_until_limited();
    let follower_tier = tier(&store, &manifest).await;
    let mut follower = open(&follower_tier, key, follower_dir.path());
    let mut leader = open(&leader_tier, key, leader_dir.path());
    let (original, at) = leader_writes_and_uploads(&mut leader, &store, &manifest, key).await;

    let snapshot = follower_tier.producer_snapshot(key, at).await.unwrap();
    let snapshot = snapshot.expect("a snapshot was uploaded with the last tiered segment");
    follower.truncate_fully_and_start_at(at).unwrap();
    assert!(follower.restore_producers(&snapshot).unwrap());
    assert_eq!(follower.log_end_offset(), at);

    // the follower leads now; the producer retries its last batch
    let retry = follower.append(&mut idem(5), 1, TS).unwrap();
    assert!(is_duplicate_of(&retry, &original), "{retry:?}");
    let next = follower.append(&mut idem(10), 1, TS).unwrap();
    assert!(
        matches!(next, AppendOutcome::Appended(i) if i.base_offset == at),
        "the producer's next sequence continues the log: {next:?}"
    );
    follower.close().unwrap();

    // the restored state survives a restart of the replica
    let mut follower = open(&follower_tier, key, follower_dir.path());
    let retry = follower.append(&mut idem(10), 1, TS).unwrap();
    assert!(
        matches!(retry, AppendOutcome::Duplicate(i) if i.base_offset == at),
        "{retry:?}"
    );
    let older = follower.append(&mut idem(5), 1, TS).unwrap();
    assert!(is_duplicate_of(&older, &original), "{older:?}");
    follower.close().unwrap();
    leader.close().unwrap();
    leader_tier.shutdown().await;
    follower_tier.shutdown().await;
}

/// A replica whose local log is new (a moved replica) or lost opens at the
/// end of object storage and restores the producer state there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_opened_at_the_tiered_end_restores_the_producers() {
    let store = ObjectStoreHandle::in_memory();
    let manifest = Arc::new(MemoryManifest::new());
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let (leader_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader_tier = tier(&store, &manifest).await;
    leader_tier.hold_uploads_until_limited();
    let mut leader = open(&leader_tier, key, leader_dir.path());
    let (original, at) = leader_writes_and_uploads(&mut leader, &store, &manifest, key).await;
    leader.close().unwrap();
    leader_tier.shutdown().await;

    let replica_tier = tier(&store, &manifest).await;
    let opening = {
        let (tier, dir) = (replica_tier.clone(), replica_dir.path().to_path_buf());
        // opening may fetch the snapshot: blocking, so off the async threads
        tokio::task::spawn_blocking(move || {
            let log = PartitionLog::open(&dir, common::small_segments()).unwrap();
            tier.open_partition_restoring(key, log, TierRetention::default())
                .unwrap()
        })
    };
    let mut replica = opening.await.unwrap();
    assert_eq!(replica.log_end_offset(), at);
    let retry = replica.append(&mut idem(5), 1, TS).unwrap();
    assert!(is_duplicate_of(&retry, &original), "{retry:?}");
    replica.close().unwrap();
    replica_tier.shutdown().await;
}

/// Segments tiered before snapshots were uploaded have none: a replica
/// restarting there starts with no producer state, as it always did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_segment_without_a_snapshot_restores_nothing() {
    let store = ObjectStoreHandle::in_memory();
    let manifest = Arc::new(MemoryManifest::new());
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let dir = tempfile::tempdir().unwrap();
    let leader_tier = tier(&store, &manifest).await;
    leader_tier.hold_uploads_until_limited();
    let mut leader = open(&leader_tier, key, dir.path());
    let (_, at) = leader_writes_and_uploads(&mut leader, &store, &manifest, key).await;
    let entry = manifest.segments(key).last().cloned().unwrap();
    let snapshot_key =
        storage::tier::cold::sibling_key(&entry.key, cache::layout::PRODUCER_SNAPSHOT_EXT);
    store
        .store
        .delete(&cache::object_store::path::Path::parse(snapshot_key).unwrap())
        .await
        .unwrap();
    assert_eq!(leader_tier.producer_snapshot(key, at).await.unwrap(), None);
    assert_eq!(
        leader_tier.producer_snapshot(key, at - 1).await.unwrap(),
        None,
        "no segment ends there"
    );
    leader.close().unwrap();
    leader_tier.shutdown().await;
}
