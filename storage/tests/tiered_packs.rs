//! Packed objects end to end inside one process: real partition logs on
//! disk for several partitions, the uploader packing their sealed segments
//! into shared objects, cold reads of byte ranges of those objects, and
//! the sweep deleting a packed object once no partition reads from it.
#![allow(clippy::unwrap_used)]

mod common;

use common::tier::*;

use std::sync::Arc;
use std::time::Duration;

use cache::metered::RequestCounters;
use cache::ObjectStoreHandle;
use futures::StreamExt;
use kafka_protocol::records::Compression;
use storage::tier::{
    Manifest, MemoryManifest, PackConfig, PartitionKey, Tier, TierConfig, TierRetention,
    TieredPartition,
};
use storage::PartitionLog;

const TS: i64 = 1_700_000_000_000;

struct Rig {
    tier: Tier,
    manifest: Arc<MemoryManifest>,
    store: ObjectStoreHandle,
    requests: RequestCounters,
    dirs: Vec<tempfile::TempDir>,
    topic: uuid::Uuid,
}

async fn rig(partitions: usize, pack: PackConfig) -> Rig {
    let (store, requests) = ObjectStoreHandle::in_memory().metered();
    let config = TierConfig {
        pack: Some(pack),
        ..fast_config()
    };
    let (tier, manifest) = start_tier(config, &store).await;
    Rig {
        tier,
        manifest,
        store,
        requests,
        dirs: (0..partitions)
            .map(|_| tempfile::tempdir().unwrap())
            .collect(),
        topic: uuid::Uuid::new_v4(),
    }
}

fn packing() -> PackConfig {
    PackConfig {
        target_bytes: 8 << 20,
        floor_bytes: 2 << 20,
        linger: Duration::from_millis(300),
        max_wait: Duration::from_secs(2),
        // long enough for every commit (in memory: milliseconds) to land
        // well within half of it, as production's ten minutes are for Raft
        grace: Duration::from_secs(5),
        sweep_interval: Duration::from_millis(100),
        ..PackConfig::default()
    }
}

impl Rig {
    fn key(&self, i: usize) -> PartitionKey {
        PartitionKey::new(self.topic, i as i32)
    }

    fn open_all(&self) -> Vec<TieredPartition> {
        let keep_nothing = TierRetention {
            local_retention_bytes: Some(0),
            ..TierRetention::default()
        };
        self.dirs
            .iter()
            .enumerate()
            .map(|(i, dir)| {
                let log = PartitionLog::open(dir.path(), common::small_segments()).unwrap();
                self.tier
                    .open_partition(self.key(i), log, keep_nothing)
                    .unwrap()
            })
            .collect()
    }

    async fn object_keys(&self) -> Vec<String> {
        self.store
            .store
            .list(None)
            .map(|m| m.unwrap().location.to_string())
            .collect()
            .await
    }
}

/// Appends `n` batches of 50 records (~10 KiB each) to `p`; returns them.
fn fill(p: &mut TieredPartition, n: usize, tag: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut b = common::batch_with(
                50,
                200,
                TS + i as i64 * 100,
                Compression::None,
                None,
                tag + i as u64,
            );
            p.append(&mut b, 0, TS).unwrap();
            b
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_segments_of_many_partitions_share_objects_and_read_back_from_them() {
    let r = rig(6, packing()).await;
    let mut parts = r.open_all();
    // ~2.5 MiB per partition: two sealed 1 MiB segments each, twelve in all
    let sent: Vec<Vec<Vec<u8>>> = parts
        .iter_mut()
        .enumerate()
        .map(|(i, p)| fill(p, 250, i as u64 * 1000))
        .collect();
    until(
        "every partition's sealed segments are committed and gone locally",
        || {
            let mut done = true;
            for p in parts.iter_mut() {
                p.tick(TS).unwrap();
                done &=
                    p.shared().manifest().len() >= 2 && p.local_log_start_offset() >= sealed_end(p);
            }
            async move { done }
        },
    )
    .await;
    let segments: usize = parts.iter().map(|p| p.shared().manifest().len()).sum();
    assert!(segments >= 12, "{segments} segments tiered");
    let keys = r.object_keys().await;
    assert!(
        keys.iter()
            .all(|k| k.contains("/packs/") || k.starts_with("packs/")),
        "only packed objects: {keys:?}"
    );
    let requests = r.requests.snapshot();
    let uploads = requests.put + requests.create_multipart + requests.put_part;
    assert_eq!(
        uploads as usize,
        keys.len(),
        "one request per packed object"
    );
    assert!(
        keys.len() * 3 <= segments,
        "{} packed objects for {segments} segments",
        keys.len()
    );
    // Entries of different partitions share objects.
    let packs: Vec<String> = (0..parts.len())
        .flat_map(|i| r.manifest.segments(r.key(i)))
        .map(|e| e.pack.expect("a packed entry").key)
        .collect();
    let distinct: std::collections::BTreeSet<&String> = packs.iter().collect();
    assert!(distinct.len() < packs.len());

    for (i, p) in parts.iter().enumerate() {
        let local_start = p.local_log_start_offset();
        let mut all = cold_bytes(&r.tier, r.key(i), 0, local_start).await;
        all.extend(local_bytes(p.log(), local_start, p.log_end_offset()));
        assert_eq!(all, sent[i].concat(), "partition {i}, across tiers");
        // Timestamp lookups go through each entry's time index in the pack.
        let ts = TS + 10_000;
        let cold = r.tier.offset_for_timestamp(r.key(i), ts, 0).await.unwrap();
        assert_eq!(cold.map(|t| t.offset), Some(100 * 50), "partition {i}");
    }
    // A replica restarting where object storage ends reads the producer
    // snapshot packed with the last tiered segment.
    let end = parts[0].shared().tiered_last().unwrap() + 1;
    let snapshot = r.tier.producer_snapshot(r.key(0), end).await.unwrap();
    assert!(
        snapshot.is_some(),
        "the snapshot at offset {end} went up in the pack"
    );
    for p in parts {
        p.close().unwrap();
    }
    r.tier.shutdown().await;
}

/// Segments waiting for their pack do not hold their partition's upload
/// slots: one busy partition's backlog fills a pack together, where the
/// engine's per-partition limit (2 here) let only that many wait, below the
/// floor, so each pack waited out `max_wait` (a minute by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_partitions_backlog_fills_a_pack_without_waiting_out_max_wait() {
    let r = rig(
        1,
        PackConfig {
            floor_bytes: 4 << 20,
            // Packs of two segments (the per-partition limit) would each
            // wait this out: three of them take 90 s, past what `until`
            // waits (60 s). With the backlog waiting together, the floor
            // sends at least four up at once and whatever is left below it
            // waits this out once.
            max_wait: Duration::from_secs(30),
            ..packing()
        },
    )
    .await;
    let mut parts = r.open_all();
    // ~6.5 MiB: six sealed 1 MiB segments, three times the per-partition limit
    let sent = fill(&mut parts[0], 650, 0);
    until(
        "the backlog's sealed segments are committed and gone locally",
        || {
            parts[0].tick(TS).unwrap();
            let done = parts[0].shared().manifest().len() >= 6
                && parts[0].local_log_start_offset() >= sealed_end(&parts[0]);
            async move { done }
        },
    )
    .await;
    let segments = parts[0].shared().manifest().len();
    let keys = r.object_keys().await;
    assert!(
        keys.len() * 3 <= segments,
        "{} packed objects for {segments} segments",
        keys.len()
    );
    let local_start = parts[0].local_log_start_offset();
    let mut all = cold_bytes(&r.tier, r.key(0), 0, local_start).await;
    all.extend(local_bytes(
        parts[0].log(),
        local_start,
        parts[0].log_end_offset(),
    ));
    assert_eq!(all, sent.concat());
    for p in parts {
        p.close().unwrap();
    }
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packed_object_is_deleted_once_every_partition_reading_it_has_trimmed() {
    let r = rig(2, packing()).await;
    let mut parts = r.open_all();
    for (i, p) in parts.iter_mut().enumerate() {
        fill(p, 150, i as u64 * 1000);
    }
    until("both partitions' sealed segments are committed", || {
        let mut done = true;
        for p in parts.iter_mut() {
            p.tick(TS).unwrap();
            done &=
                !p.shared().manifest().is_empty() && p.local_log_start_offset() >= sealed_end(p);
        }
        async move { done }
    })
    .await;
    let keys = r.object_keys().await;
    assert_eq!(
        keys.len(),
        1,
        "one sealed segment each, in one pack: {keys:?}"
    );

    // Partition 0's records expire: its entry goes, the pack stays for 1.
    let end0 = parts[0].log_end_offset();
    parts[0].delete_records_before(end0).unwrap();
    until("partition 0's manifest is trimmed", || {
        parts[0].tick(TS).unwrap();
        let empty = r.manifest.segments(r.key(0)).is_empty();
        async move { empty }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        r.object_keys().await,
        keys,
        "partition 1 still reads the pack"
    );
    let tiered_end = parts[1].shared().tiered_last().unwrap() + 1;
    assert!(!cold_bytes(&r.tier, r.key(1), 0, tiered_end)
        .await
        .is_empty());

    let end1 = parts[1].log_end_offset();
    parts[1].delete_records_before(end1).unwrap();
    until("the pack no partition reads is deleted", || {
        parts[1].tick(TS).unwrap();
        let store = r.store.clone();
        async move { store.store.list(None).collect::<Vec<_>>().await.is_empty() }
    })
    .await;
    assert!(r.requests.snapshot().delete >= 1);
    for p in parts {
        p.close().unwrap();
    }
    r.tier.shutdown().await;
}
