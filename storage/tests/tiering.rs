//! Tiered storage end to end inside one process: a real partition log on
//! disk, the uploader driver, the cold reader over an in-memory object store
//! (wrapped in a fault injector), and an in-memory manifest.
#![allow(clippy::unwrap_used)]

mod common;

use common::tier::*;

use std::sync::Arc;
use std::time::Duration;

use cache::fault::{Fault, FaultInjectingStore, FaultRule, Op};
use cache::{CacheConfig, ColdCache, ObjectStoreExt, ObjectStoreHandle};
use futures::StreamExt;
use kafka_protocol::records::Compression;
use storage::tier::{
    Manifest, MemoryManifest, PartitionKey, Tier, TierConfig, TierError, TierRetention,
    TieredPartition,
};
use storage::{AppendOutcome, PartitionLog};

const TS: i64 = 1_700_000_000_000;

struct Rig {
    tier: Tier,
    manifest: Arc<MemoryManifest>,
    store: ObjectStoreHandle,
    faults: cache::fault::FaultController,
    key: PartitionKey,
    dir: tempfile::TempDir,
}

fn fast_config_limited(limit: Option<u64>) -> TierConfig {
    TierConfig {
        local_disk_limit: limit,
        ..fast_config()
    }
}

async fn rig_with(
    config: TierConfig,
    manifest: Arc<MemoryManifest>,
    inner: Option<ObjectStoreHandle>,
) -> Rig {
    let base = inner.unwrap_or_else(ObjectStoreHandle::in_memory);
    let faulty = FaultInjectingStore::new(Arc::clone(&base.store));
    let faults = faulty.controller();
    let store = base.with_store(Arc::new(faulty));
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .unwrap();
    let tier = Tier::start(
        config,
        store.clone(),
        cache,
        Arc::clone(&manifest) as Arc<dyn Manifest>,
    );
    Rig {
        tier,
        manifest,
        store: base,
        faults,
        key: PartitionKey::new(uuid::Uuid::new_v4(), 0),
        dir: tempfile::tempdir().unwrap(),
    }
}

async fn rig(limit: Option<u64>) -> Rig {
    rig_with(
        fast_config_limited(limit),
        Arc::new(MemoryManifest::new()),
        None,
    )
    .await
}

impl Rig {
    fn open(&self, retention: TierRetention) -> TieredPartition {
        let log = PartitionLog::open(self.dir.path(), common::small_segments()).unwrap();
        self.tier.open_partition(self.key, log, retention).unwrap()
    }
}

/// Appends `n` batches of 50 records (~10 KiB each); returns every appended batch's bytes.
fn fill(p: &mut TieredPartition, n: usize, tag: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut b = common::batch_with(
            50,
            200,
            TS + i as i64 * 100,
            Compression::None,
            None,
            tag + i as u64,
        );
        p.append(&mut b, 0, TS).unwrap();
        out.push(b);
    }
    out
}

async fn all_uploaded(p: &mut TieredPartition) {
    until("every sealed segment is committed", || {
        p.tick(TS).unwrap();
        let done = p.shared().deletable_below() >= sealed_end(p);
        async move { done }
    })
    .await;
}

async fn object_count(store: &ObjectStoreHandle) -> usize {
    store.store.list(None).collect::<Vec<_>>().await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_reads_return_exactly_the_bytes_the_local_log_held() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 500, 0);
    all_uploaded(&mut p).await;
    let tiered_end = p.shared().tiered_last().unwrap() + 1;
    assert!(tiered_end > 0 && p.shared().manifest().len() >= 3);
    // Offset by offset (not only at batch starts) both tiers agree.
    for offset in (0..tiered_end).step_by(997) {
        let local = p.log().read(offset, 30_000, tiered_end).unwrap();
        let cold = r.tier.read(r.key, offset, 30_000).await.unwrap().unwrap();
        assert_eq!(
            cold.bytes,
            local.read_to_bytes().unwrap(),
            "offset {offset}"
        );
        assert_eq!(
            (cold.first_offset, cold.next_offset),
            (local.first_offset, local.next_offset)
        );
    }
    assert_eq!(
        cold_bytes(&r.tier, r.key, 0, tiered_end).await,
        local_bytes(p.log(), 0, tiered_end)
    );
    // ListOffsets by timestamp agrees too, to the record.
    for ts in [TS - 5, TS + 1_234, TS + 20_005, TS + 40_000] {
        let local = p.offset_for_timestamp(ts).unwrap();
        let cold = r.tier.offset_for_timestamp(r.key, ts, 0).await.unwrap();
        if local.is_some_and(|t| t.offset < tiered_end) {
            assert_eq!(cold, local, "timestamp {ts}");
        }
    }
    let stats = r.tier.snapshot();
    assert!(stats.uploaded_segments >= 3 && stats.cold_read_bytes > 0);
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_retention_deletes_only_what_object_storage_holds_and_reads_continue_cold() {
    let r = rig(None).await;
    let keep_nothing = TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    };
    let mut p = r.open(keep_nothing);
    let sent = fill(&mut p, 400, 0);
    all_uploaded(&mut p).await;
    p.tick(TS).unwrap();
    let local_start = p.local_log_start_offset();
    assert!(
        local_start > 0,
        "sealed, committed segments left local disk"
    );
    assert_eq!(
        p.log_start_offset(),
        0,
        "the log still starts at 0 across tiers"
    );
    assert_eq!(local_start, p.log().segments()[0].base_offset);
    let end = p.log_end_offset();
    let mut all = cold_bytes(&r.tier, r.key, 0, local_start).await;
    all.extend(local_bytes(p.log(), local_start, end));
    assert_eq!(
        all,
        sent.concat(),
        "every appended batch, in order, across tiers"
    );
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_retry_after_local_eviction_is_answered_as_a_duplicate() {
    let r = rig(None).await;
    let keep_nothing = TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    };
    let mut p = r.open(keep_nothing);
    let idem = |seq| {
        let producer = common::Idem {
            pid: 77,
            epoch: 0,
            seq,
        };
        common::batch_with(5, 100, TS, Compression::None, Some(producer), 1)
    };
    p.append(&mut idem(0), 0, TS).unwrap();
    let original = *p.append(&mut idem(5), 0, TS).unwrap().info();
    fill(&mut p, 400, 0);
    all_uploaded(&mut p).await;
    p.tick(TS).unwrap();
    assert!(
        p.local_log_start_offset() > original.last_offset,
        "the producer's batches left local disk"
    );
    assert_eq!(p.log_start_offset(), 0, "but not object storage");
    let is_original_duplicate = |o: AppendOutcome| {
        matches!(o, AppendOutcome::Duplicate(i)
            if (i.base_offset, i.last_offset) == (original.base_offset, original.last_offset))
    };
    // The acknowledgement was lost; the producer retries its last batch.
    let retry = p.append(&mut idem(5), 0, TS).unwrap();
    assert!(is_original_duplicate(retry), "{retry:?}");
    p.close().unwrap();

    let mut p = r.open(keep_nothing);
    let retry = p.append(&mut idem(5), 0, TS).unwrap();
    assert!(is_original_duplicate(retry), "after a restart: {retry:?}");

    // Once the records are gone from every tier, so is the producer.
    p.delete_records_before(original.last_offset + 1).unwrap();
    let again = p.append(&mut idem(5), 0, TS).unwrap();
    assert!(
        matches!(again, AppendOutcome::Appended(_)),
        "an unknown producer may start anywhere: {again:?}"
    );
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_delays_uploads_but_appends_continue_and_nothing_is_lost() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    r.faults.unreachable_for(Duration::from_secs(3600));
    let sent = fill(&mut p, 400, 7);
    until("uploads have failed a few times", || {
        // Ticks let the partition see its seal fsyncs finish and report the
        // upload bound, however slow the device is.
        p.tick(TS).unwrap();
        let failures = r.tier.snapshot().upload_failures;
        async move { failures >= 3 }
    })
    .await;
    p.tick(TS).unwrap();
    assert_eq!(
        p.local_log_start_offset(),
        0,
        "nothing uploaded, nothing deleted"
    );
    assert!(r.tier.snapshot().pending_segments >= 3);
    assert_eq!(object_count(&r.store).await, 0);
    r.faults.clear();
    all_uploaded(&mut p).await;
    p.tick(TS).unwrap();
    let local_start = p.local_log_start_offset();
    assert!(local_start > 0);
    let mut all = cold_bytes(&r.tier, r.key, 0, local_start).await;
    all.extend(local_bytes(p.log(), local_start, p.log_end_offset()));
    assert_eq!(
        all,
        sent.concat(),
        "appends are stamped in place, so these are the log's bytes"
    );
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_and_timeouts_are_retried_until_the_upload_succeeds() {
    let mut config = fast_config_limited(None);
    config.upload_timeout = Duration::from_millis(300);
    config.min_upload_bytes_per_sec = u64::MAX;
    let r = rig_with(config, Arc::new(MemoryManifest::new()), None).await;
    r.faults
        .inject(FaultRule::new(Fault::Status(503)).on(&[Op::Put]).times(4));
    r.faults
        .inject(FaultRule::new(Fault::Hang).on(&[Op::Put]).times(2));
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 250, 0);
    all_uploaded(&mut p).await;
    let s = r.tier.snapshot();
    assert!(s.upload_failures >= 2, "{s:?}");
    r.faults.clear();
    assert_entries_describe_their_objects(&r.store, &p).await;
    p.close().unwrap();
    r.tier.shutdown().await;
}

/// A retry whose backoff ends while the driver is woken by something else
/// (here a retention timer firing every millisecond) must still start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_not_lost_when_another_timer_wakes_the_uploader_first() {
    let mut config = fast_config_limited(None);
    config.retention_interval = Duration::from_millis(1);
    let r = rig_with(config, Arc::new(MemoryManifest::new()), None).await;
    r.faults
        .inject(FaultRule::new(Fault::Status(503)).on(&[Op::Put]).times(12));
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 250, 0);
    all_uploaded(&mut p).await;
    assert!(r.tier.snapshot().upload_failures >= 4);
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_local_disk_budget_refuses_appends_retriably_until_uploads_catch_up() {
    let limit = 3 << 20;
    let r = rig(Some(limit)).await;
    let mut p = r.open(TierRetention::default());
    r.faults.unreachable_for(Duration::from_secs(3600));
    let mut accepted = Vec::new();
    let refused = loop {
        let mut b = common::batch_with(50, 200, TS, Compression::None, None, accepted.len() as u64);
        match p.append(&mut b, 0, TS) {
            Ok(_) => accepted.push(b),
            Err(e) => break e,
        }
        assert!(accepted.len() < 10_000, "the budget must stop appends");
    };
    assert!(
        matches!(refused, TierError::Backpressure { .. }),
        "{refused}"
    );
    assert!(refused.is_retriable());
    assert!(r.tier.budget().pending_bytes() <= limit);
    assert_eq!(r.tier.snapshot().produce_refusals, 1);
    r.faults.clear();
    let b = common::batch_with(50, 200, TS, Compression::None, None, 99_999);
    until("appends are accepted again", || {
        p.tick(TS).unwrap();
        let ok = p.append(&mut b.clone(), 0, TS).is_ok();
        async move { ok }
    })
    .await;
    // Everything accepted before the refusal is still there, in order.
    let end = accepted.iter().map(|_| 50).sum::<i64>();
    let mut back = cold_bytes(&r.tier, r.key, 0, p.local_log_start_offset().min(end)).await;
    back.extend(local_bytes(
        p.log(),
        p.local_log_start_offset().min(end),
        end,
    ));
    assert_eq!(back, accepted.concat());
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_sealed_but_not_committed_before_a_restart_are_uploaded_after_it() {
    let manifest = Arc::new(MemoryManifest::new());
    let r = rig_with(fast_config_limited(None), Arc::clone(&manifest), None).await;
    manifest.set_failing(true);
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 300, 0);
    until("uploads ran and commits failed", || {
        p.tick(TS).unwrap();
        let s = r.tier.snapshot();
        async move { s.uploaded_segments >= 2 && s.commit_failures >= 2 }
    })
    .await;
    assert!(manifest.segments(r.key).is_empty());
    p.close().unwrap();
    r.tier.shutdown().await;
    // A new process: same disk, same bucket, manifest working again.
    manifest.set_failing(false);
    let again = rig_with(
        fast_config_limited(None),
        Arc::clone(&manifest),
        Some(r.store.clone()),
    )
    .await;
    let again = Rig {
        key: r.key,
        dir: r.dir,
        ..again
    };
    let mut p = again.open(TierRetention::default());
    all_uploaded(&mut p).await;
    let sealed: Vec<(i64, i64)> = p
        .log()
        .segments()
        .iter()
        .filter(|s| s.sealed)
        .map(|s| (s.base_offset, s.last_offset))
        .collect();
    let committed: Vec<(i64, i64)> = manifest
        .segments(again.key)
        .iter()
        .map(|e| (e.base_offset, e.last_offset))
        .collect();
    assert_eq!(committed, sealed);
    p.close().unwrap();
    again.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_local_log_restarts_at_the_tiered_end_and_older_offsets_come_from_objects() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention::default());
    let sent = fill(&mut p, 400, 3);
    all_uploaded(&mut p).await;
    let tiered_end = p.shared().tiered_last().unwrap() + 1;
    p.close().unwrap();
    std::fs::remove_dir_all(r.dir.path()).unwrap();
    let p = r.open(TierRetention::default());
    assert_eq!(
        p.log_end_offset(),
        tiered_end,
        "new appends continue after the tiered offsets"
    );
    assert_eq!(p.local_log_start_offset(), tiered_end);
    assert_eq!(p.log_start_offset(), 0);
    let back = cold_bytes(&r.tier, r.key, 0, tiered_end).await;
    assert_eq!(back.as_slice(), &sent.concat()[..back.len()]);
    assert!(!back.is_empty());
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_trims_the_manifest_then_deletes_its_objects() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 400, 0);
    all_uploaded(&mut p).await;
    let before = p.shared().manifest().len();
    // data, offset index, time index and producer snapshot of each segment
    assert_eq!(object_count(&r.store).await, 4 * before);
    p.set_retention(TierRetention {
        retention_bytes: Some(2 << 20),
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    r.tier.run_retention();
    until("old entries are trimmed", || {
        let n = p.shared().manifest().len();
        async move { n < before }
    })
    .await;
    let kept = p.shared().manifest();
    let tiered: u64 = kept.iter().map(|e| e.size).sum();
    assert!(
        tiered + p.shared().pending_bytes() >= 2 << 20,
        "no more than needed is deleted"
    );
    until("the trimmed entries' objects are gone", || {
        let store = r.store.clone();
        let want = 4 * kept.len();
        async move { object_count(&store).await == want }
    })
    .await;
    p.tick(TS).unwrap();
    assert!(p.local_log_start_offset() > kept[0].base_offset);
    assert_eq!(
        p.log_start_offset(),
        kept[0].base_offset,
        "the log now starts at the oldest kept object"
    );
    assert!(r
        .tier
        .read(r.key, kept[0].base_offset, 1000)
        .await
        .unwrap()
        .is_some());
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_raises_the_log_start_across_tiers_durably() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    fill(&mut p, 400, 0);
    all_uploaded(&mut p).await;
    p.tick(TS).unwrap();
    let local_start = p.local_log_start_offset();
    let target = p.shared().manifest()[1].base_offset + 10;
    assert!(target < local_start);
    assert_eq!(p.delete_records_before(target).unwrap(), target);
    assert_eq!(p.log_start_offset(), target);
    assert!(r
        .tier
        .read(r.key, target - 1, 1000)
        .await
        .unwrap()
        .is_none());
    assert!(r.tier.read(r.key, target, 1000).await.unwrap().is_some());
    until("entries wholly below the new start are trimmed", || {
        let first = p.shared().manifest()[0].base_offset;
        async move { first > 0 }
    })
    .await;
    p.close().unwrap();
    let p = r.open(TierRetention::default());
    assert_eq!(
        p.log_start_offset(),
        target,
        "the new log start survives a restart"
    );
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_records_floor_survives_losing_the_local_directory() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 400, 0);
    all_uploaded(&mut p).await;
    // A floor inside the first tiered entry: the entry straddles it and stays.
    let first = p.shared().manifest()[0].clone();
    let floor = first.base_offset + 10;
    assert!(floor < first.last_offset);
    r.tier.persist_log_start(r.key, floor).await.unwrap();
    assert_eq!(p.delete_records_before(floor).unwrap(), floor);
    p.close().unwrap();

    // The disk is replaced: the partition directory is gone.
    std::fs::remove_dir_all(r.dir.path()).unwrap();
    std::fs::create_dir(r.dir.path()).unwrap();
    let p = r.open(TierRetention::default());
    assert_eq!(
        p.log_start_offset(),
        floor,
        "the floor came from the manifest"
    );
    assert!(
        r.tier.read(r.key, floor - 1, 1000).await.unwrap().is_none(),
        "records below the floor are never served again"
    );
    let read = r.tier.read(r.key, floor, 1000).await.unwrap().unwrap();
    assert!(read.first_offset <= floor && read.next_offset > floor);
    let found = r
        .tier
        .offset_for_timestamp(r.key, 0, 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        found.offset, floor,
        "timestamp lookups skip what lies below the floor"
    );
    let max = r.tier.max_timestamp(r.key, 0).await.unwrap().unwrap();
    assert!(max.offset >= floor);
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_start_past_the_log_end_is_not_recorded() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 10, 0);
    let end = p.log_end_offset();
    assert!(r.tier.persist_log_start(r.key, end + 1).await.is_err());
    assert_eq!(r.manifest.log_start(r.key), None);
    r.tier.persist_log_start(r.key, end).await.unwrap();
    assert_eq!(r.manifest.log_start(r.key), Some(end));
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiered_segments_without_timestamps_expire_by_their_upload_time() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention {
        retention_ms: Some(1_000),
        ..TierRetention::default()
    });
    for i in 0..300 {
        p.append(&mut common::untimed_batch(50, 200, i), 0, TS)
            .unwrap();
    }
    all_uploaded(&mut p).await;
    let uploaded = r.manifest.segments(r.key);
    assert!(uploaded.len() >= 2);
    assert!(uploaded.iter().all(|e| e.max_timestamp == -1));
    until(
        "entries without timestamps expire a second after upload",
        || {
            let left = r.manifest.segments(r.key).len();
            async move { left == 0 }
        },
    )
    .await;
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_tiered_object_gives_a_retriable_error_not_bad_bytes() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention::default());
    let sent = fill(&mut p, 300, 0);
    all_uploaded(&mut p).await;
    let first = p.shared().manifest()[0].clone();
    let key = cache::object_store::path::Path::parse(&first.key).unwrap();
    let good = r
        .store
        .store
        .get(&key)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    // Bit rot inside the first batch's records: sizes still match.
    let mut bad = good.to_vec();
    bad[200] ^= 0x01;
    r.store.store.put(&key, bad.into()).await.unwrap();
    let err = r
        .tier
        .read(r.key, 0, 1000)
        .await
        .expect_err("a batch failing its CRC is never served");
    assert!(
        matches!(err, TierError::CorruptObject { .. }) && err.is_retriable(),
        "{err}"
    );
    // Repaired (or a transient fault gone): the retry reads it afresh.
    r.store.store.put(&key, good.into()).await.unwrap();
    let read = r.tier.read(r.key, 0, 1000).await.unwrap().unwrap();
    assert_eq!(&read.bytes[..], &sent[0][..]);
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_loses_every_object_and_its_manifest() {
    let r = rig(None).await;
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 300, 0);
    all_uploaded(&mut p).await;
    assert!(object_count(&r.store).await > 0);
    p.close().unwrap();
    // An orphan: uploaded by a crashed process, never committed.
    let orphan = cache::layout::SegmentId::new(r.key.topic_id, 0, 1_000_000, 1_000_010).unwrap();
    r.store
        .store
        .put(
            &orphan.segment_key(&r.store.prefix),
            bytes::Bytes::from_static(b"x").into(),
        )
        .await
        .unwrap();
    r.manifest.delete_topic(r.key.topic_id);
    r.tier.run_retention();
    until("the deleted topic's objects are gone", || {
        let store = r.store.clone();
        async move { object_count(&store).await == 0 }
    })
    .await;
    until("the deleted topic is forgotten", || {
        let n = r.manifest.deleted_topics().len();
        async move { n == 0 }
    })
    .await;
    r.tier.shutdown().await;
}

/// A plain leader log beside the rig's tiered follower: `n` ~10 KiB batches
/// at `epoch`, tagged from `tag`.
fn lead(log: &mut PartitionLog, n: usize, epoch: i32, tag: u64) {
    for i in 0..n {
        let mut b = common::batch_with(
            50,
            200,
            TS + i as i64,
            Compression::None,
            None,
            tag + i as u64,
        );
        log.append(&mut b, epoch, TS).unwrap();
    }
}

/// Fetches from `leader` into the tiered follower until it has caught up.
fn follow(leader: &PartitionLog, p: &mut TieredPartition) {
    while p.log_end_offset() < leader.log_end_offset() {
        let s = leader
            .read(p.log_end_offset(), 64 << 10, leader.log_end_offset())
            .unwrap();
        p.append_replicated(&s.read_to_bytes().unwrap(), TS)
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_follower_uploads_exactly_the_batches_its_leader_holds() {
    let r = rig(None).await;
    let ld = tempfile::tempdir().unwrap();
    let mut leader = PartitionLog::open(ld.path(), common::small_segments()).unwrap();
    lead(&mut leader, 300, 2, 0);
    let mut p = r.open(TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    follow(&leader, &mut p);
    all_uploaded(&mut p).await;
    p.tick(TS).unwrap();
    let local_start = p.local_log_start_offset();
    assert!(local_start > 0, "uploaded segments left local disk");
    let mut all = cold_bytes(&r.tier, r.key, 0, local_start).await;
    all.extend(local_bytes(p.log(), local_start, p.log_end_offset()));
    assert_eq!(all, local_bytes(&leader, 0, leader.log_end_offset()));
    assert_eq!(p.epoch_end_offset(2), leader.epoch_end_offset(2));

    // Committed data cannot be truncated away.
    let e = p.truncate_to(local_start - 1).unwrap_err();
    assert!(matches!(e, TierError::TruncationBelowTiered { .. }), "{e}");
    let e = p.truncate_fully_and_start_at(0).unwrap_err();
    assert!(matches!(e, TierError::TruncationBelowTiered { .. }), "{e}");
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_segment_truncated_before_its_upload_is_uploaded_only_with_the_new_leaders_bytes()
{
    let r = rig(None).await;
    let (ad, bd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut old_leader = PartitionLog::open(ad.path(), common::small_segments()).unwrap();
    lead(&mut old_leader, 300, 1, 0);
    let mut p = r.open(TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    // Nothing reaches object storage while the follower diverges.
    r.faults.unreachable_for(Duration::from_secs(3600));
    follow(&old_leader, &mut p);
    p.flush().unwrap();
    let sealed: Vec<_> = p
        .log()
        .segments()
        .into_iter()
        .filter(|s| s.sealed)
        .collect();
    assert!(sealed.len() >= 2);
    until("an upload of the sealed segments has failed", || {
        p.tick(TS).unwrap();
        let failures = r.tier.snapshot().upload_failures;
        async move { failures >= 2 }
    })
    .await;

    // The new leader kept the old one's batches only up to the middle of
    // the first sealed segment, then wrote its own at epoch 2.
    let diverge = (sealed[0].base_offset + sealed[0].last_offset) / 2 / 50 * 50;
    let mut new_leader = PartitionLog::open(bd.path(), common::small_segments()).unwrap();
    while new_leader.log_end_offset() < diverge {
        let s = old_leader
            .read(new_leader.log_end_offset(), 64 << 10, diverge)
            .unwrap();
        new_leader
            .append_replicated(&s.read_to_bytes().unwrap(), TS)
            .unwrap();
    }
    lead(&mut new_leader, 250, 2, 10_000);

    p.truncate_to(diverge).unwrap();
    assert_eq!(p.log_end_offset(), diverge);
    follow(&new_leader, &mut p);
    p.flush().unwrap();

    r.faults.clear();
    all_uploaded(&mut p).await;
    p.tick(TS).unwrap();
    let local_start = p.local_log_start_offset();
    assert!(
        local_start > diverge,
        "the re-sealed segments were uploaded"
    );
    let mut all = cold_bytes(&r.tier, r.key, 0, local_start).await;
    all.extend(local_bytes(p.log(), local_start, p.log_end_offset()));
    assert_eq!(
        all,
        local_bytes(&new_leader, 0, new_leader.log_end_offset()),
        "object storage holds the new leader's batches, never the truncated ones"
    );
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_local_disk_budget_refuses_replicated_appends_retriably_too() {
    let limit = 3 << 20;
    let r = rig(Some(limit)).await;
    let ld = tempfile::tempdir().unwrap();
    let mut leader = PartitionLog::open(ld.path(), common::small_segments()).unwrap();
    lead(&mut leader, 600, 0, 0);
    let mut p = r.open(TierRetention::default());
    r.faults.unreachable_for(Duration::from_secs(3600));
    let refused = loop {
        let s = leader
            .read(p.log_end_offset(), 64 << 10, leader.log_end_offset())
            .unwrap();
        assert!(!s.is_empty(), "the budget must stop replication first");
        if let Err(e) = p.append_replicated(&s.read_to_bytes().unwrap(), TS) {
            break e;
        }
    };
    assert!(
        matches!(refused, TierError::Backpressure { .. }),
        "{refused}"
    );
    assert!(refused.is_retriable());
    r.faults.clear();
    until("replication catches up once uploads do", || {
        p.tick(TS).unwrap();
        let s = leader
            .read(p.log_end_offset(), 64 << 10, leader.log_end_offset())
            .unwrap();
        if !s.is_empty() {
            let _ = p.append_replicated(&s.read_to_bytes().unwrap(), TS);
        }
        let done = p.log_end_offset() == leader.log_end_offset();
        async move { done }
    })
    .await;
    p.close().unwrap();
    r.tier.shutdown().await;
}

/// In a cluster only a partition's leader uploads, and only below its
/// high watermark: nothing a failover could take back reaches object storage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_partition_uploads_nothing_until_its_limit_and_nothing_past_it() {
    let r = rig(None).await;
    r.tier.hold_uploads_until_limited();
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 250, 0);
    let sealed: Vec<(i64, i64)> = p
        .log()
        .segments()
        .iter()
        .filter(|s| s.sealed)
        .map(|s| (s.base_offset, s.last_offset + 1))
        .collect();
    assert!(!sealed.is_empty(), "{sealed:?}");
    for _ in 0..20 {
        p.tick(TS).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        r.tier.snapshot().uploaded_segments,
        0,
        "held: nothing uploads"
    );
    // the limit ends inside the second sealed segment: only the first goes up
    let limit = sealed[1].0 + 1;
    p.set_upload_limit(limit);
    until("the first sealed segment is committed", || {
        p.tick(TS).unwrap();
        let done = p.shared().deletable_below() >= sealed[0].1;
        async move { done }
    })
    .await;
    for _ in 0..20 {
        p.tick(TS).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        p.shared().manifest().iter().all(|e| e.last_offset < limit),
        "nothing at or past the limit is uploaded"
    );
    p.set_upload_limit(i64::MAX);
    all_uploaded(&mut p).await;
    p.close().unwrap();
    r.tier.shutdown().await;
}

/// One agent of a cluster in one process: its own tier (uploader, cold
/// reader) over the object store and manifest all agents share, and its own
/// replica of the partition, rolled at its own segment size.
struct Agent {
    tier: Tier,
    p: TieredPartition,
    _dir: tempfile::TempDir,
}

async fn agent(r: &Rig, segment_bytes: u64) -> Agent {
    let other = rig_with(
        fast_config_limited(None),
        Arc::clone(&r.manifest),
        Some(r.store.clone()),
    )
    .await;
    other.tier.hold_uploads_until_limited();
    let config = storage::LogConfig {
        segment_bytes,
        ..common::small_segments()
    };
    let log = PartitionLog::open(other.dir.path(), config).unwrap();
    let p = other
        .tier
        .open_partition(
            r.key,
            log,
            TierRetention {
                local_retention_bytes: Some(0),
                ..TierRetention::default()
            },
        )
        .unwrap();
    Agent {
        tier: other.tier,
        p,
        _dir: other.dir,
    }
}

/// Appends `n` ~10 KiB batches as the leader at `epoch`; returns their bytes
/// as stored (offsets stamped).
fn lead_tiered(p: &mut TieredPartition, n: usize, epoch: i32, tag: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut b = common::batch_with(
            50,
            200,
            TS + i as i64,
            Compression::None,
            None,
            tag + i as u64,
        );
        p.append(&mut b, epoch, TS).unwrap();
        out.extend_from_slice(&b);
    }
    out
}

/// Ticks `p` (local retention) until the manifest serves every sealed
/// segment below `end` and they have left local disk.
async fn follower_drops_what_is_tiered(p: &mut TieredPartition, end: i64) {
    until(
        "the follower deleted its local copies of uploaded offsets",
        || {
            p.tick(TS).unwrap();
            let done = p.local_log_start_offset() >= end;
            async move { done }
        },
    )
    .await;
}

/// The manifest's entries as `(object base, first served, last)`.
fn served(m: &MemoryManifest, key: PartitionKey) -> Vec<(i64, i64, i64)> {
    m.segments(key)
        .iter()
        .map(|e| (e.base_offset, e.first_served(), e.last_offset))
        .collect()
}

/// Failover twice between replicas whose segment boundaries all differ:
/// each new leader uploads only what the manifest lacks, its first segment
/// straddling the manifest's end is committed serving only what follows,
/// followers delete their local copies of what their leader uploaded, and
/// every offset reads back from object storage, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_leaders_with_other_segment_boundaries_continue_the_manifest_and_lose_no_offset() {
    let r = rig(None).await;
    let mut a = agent(&r, 1 << 20).await;
    let mut b = agent(&r, (1 << 20) + (300 << 10)).await;
    let mut c = agent(&r, (1 << 20) + (700 << 10)).await;
    a.p.set_upload_limit(i64::MAX);
    let mut expected = lead_tiered(&mut a.p, 300, 1, 0);
    follow(a.p.log(), &mut b.p);
    follow(a.p.log(), &mut c.p);
    all_uploaded(&mut a.p).await;
    let first_end = a.p.shared().deletable_below();
    assert!(first_end > 0);
    // followers upload nothing, yet drop what their leader uploaded
    for f in [&mut b, &mut c] {
        let covered =
            f.p.log()
                .segments()
                .iter()
                .filter(|s| s.sealed && s.last_offset < first_end)
                .map(|s| s.last_offset + 1)
                .max()
                .expect("a follower segment wholly uploaded by the leader");
        follower_drops_what_is_tiered(&mut f.p, covered).await;
        assert_eq!(f.tier.snapshot().uploaded_segments, 0);
    }

    // A dies with sealed data not yet uploaded; B leads at epoch 2.
    expected.extend(lead_tiered(&mut a.p, 40, 1, 1_000));
    follow(a.p.log(), &mut b.p);
    follow(a.p.log(), &mut c.p);
    let a_end = a.p.log_end_offset();
    a.p.close().unwrap();
    a.tier.shutdown().await;
    let tiered_by_a = served(&r.manifest, r.key);
    b.p.set_upload_limit(i64::MAX);
    expected.extend(lead_tiered(&mut b.p, 200, 2, 2_000));
    follow(b.p.log(), &mut c.p);
    all_uploaded(&mut b.p).await;
    let after_b = served(&r.manifest, r.key);
    assert_eq!(after_b[..tiered_by_a.len()], tiered_by_a[..]);
    let (base, first, _) = after_b[tiered_by_a.len()];
    assert!(
        base < first && first == tiered_by_a.last().unwrap().2 + 1,
        "B's first upload straddles A's last entry and serves what follows: {after_b:?}"
    );
    assert!(
        after_b.last().unwrap().2 >= a_end,
        "B uploaded past A's end"
    );
    follower_drops_what_is_tiered(&mut c.p, tiered_by_a.last().unwrap().2 + 1).await;
    assert_eq!(c.tier.snapshot().uploaded_segments, 0);
    // C has read B's last commit before it leads (agents re-read manifests
    // on a timer; a leader whose view is older has its first overlapping
    // commit refused, re-reads and retries, which this test does not cover)
    let b_end = after_b.last().unwrap().2;
    until("C has read the manifest up to B's last commit", || {
        c.p.tick(TS).unwrap();
        let seen = c.p.shared().manifest().last().map(|e| e.last_offset) == Some(b_end);
        async move { seen }
    })
    .await;

    // B dies; C, whose boundaries match neither, leads at epoch 3.
    b.p.close().unwrap();
    b.tier.shutdown().await;
    c.p.set_upload_limit(i64::MAX);
    expected.extend(lead_tiered(&mut c.p, 200, 3, 3_000));
    all_uploaded(&mut c.p).await;
    c.p.tick(TS).unwrap();
    let after_c = served(&r.manifest, r.key);
    assert_eq!(after_c[..after_b.len()], after_b[..]);
    assert!(after_c.len() > after_b.len(), "C uploaded too");
    for w in after_c.windows(2) {
        assert_eq!(w[0].2 + 1, w[1].1, "no gap and no overlap: {after_c:?}");
    }
    assert_eq!(after_c[0].1, 0);
    assert_eq!(
        r.tier.snapshot().commit_failures + c.tier.snapshot().commit_failures,
        0,
        "no commit was refused"
    );

    // every offset, from object storage: through the new leader's tier and
    // through an agent that holds no replica at all
    let tiered_end = after_c.last().unwrap().2 + 1;
    let local_start = c.p.local_log_start_offset();
    assert!(local_start <= tiered_end && local_start > a_end);
    let mut all = cold_bytes(&c.tier, r.key, 0, local_start).await;
    all.extend(local_bytes(c.p.log(), local_start, c.p.log_end_offset()));
    assert_eq!(all.len(), expected.len());
    assert!(all == expected, "C's view differs from what was written");
    let fresh = cold_bytes(&r.tier, r.key, 0, tiered_end).await;
    assert!(
        fresh[..] == expected[..fresh.len()],
        "a reader without a replica sees the same history"
    );
    // timestamp lookups over overlapping objects answer as one log would
    let rd = tempfile::tempdir().unwrap();
    let mut reference = PartitionLog::open(rd.path(), common::small_segments()).unwrap();
    for batch in storage::batch::BatchIter::new(&expected) {
        reference.append_replicated(batch.unwrap().1, TS).unwrap();
    }
    let max = reference.max_timestamp().unwrap();
    assert!(max.offset < tiered_end);
    assert_eq!(c.tier.max_timestamp(r.key, 0).await.unwrap(), Some(max));
    for ts in [TS, TS + 40, TS + 100, TS + 250, TS + 300] {
        let want = reference.offset_for_timestamp(ts).unwrap().unwrap();
        assert_eq!(
            c.tier.offset_for_timestamp(r.key, ts, 0).await.unwrap(),
            Some(want),
            "first record at or after {ts}"
        );
    }
    c.p.close().unwrap();
    c.tier.shutdown().await;
    r.tier.shutdown().await;
}

/// A follower that fell below its new leader's local start restarts there
/// even when that start lies inside tiered offsets (the leader's segment
/// straddling its predecessor's last entry is not uploaded yet); moving
/// back into what it holds stays refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_follower_may_restart_inside_tiered_offsets_but_never_move_back_into_them() {
    let r = rig(None).await;
    let mut a = agent(&r, 1 << 20).await;
    let mut b = agent(&r, (1 << 20) + (300 << 10)).await;
    // the current leader still holds everything locally
    let ld = tempfile::tempdir().unwrap();
    let mut leader = PartitionLog::open(ld.path(), common::small_segments()).unwrap();
    lead(&mut leader, 300, 1, 0);
    follow(&leader, &mut a.p);
    a.p.set_upload_limit(i64::MAX);
    all_uploaded(&mut a.p).await;
    let entries = r.manifest.segments(r.key);
    let last = entries.last().unwrap();
    until("the follower's agent saw the leader's commits", || {
        let seen = b.p.shared().tiered_last() == Some(last.last_offset);
        async move { seen }
    })
    .await;
    assert_eq!(b.p.log_end_offset(), 0, "the follower has fetched nothing");
    // a batch boundary inside the last tiered entry, as a leader's local start is
    let start = last.base_offset + 50;
    assert!(start <= last.last_offset);
    b.p.truncate_fully_and_start_at(start)
        .expect("a restart ahead of the local log end, inside tiered offsets");
    follow(&leader, &mut b.p);
    assert_eq!(b.p.log_end_offset(), leader.log_end_offset());
    let e = b.p.truncate_fully_and_start_at(start - 50).unwrap_err();
    assert!(matches!(e, TierError::TruncationBelowTiered { .. }), "{e}");
    a.p.close().unwrap();
    b.p.close().unwrap();
    a.tier.shutdown().await;
    b.tier.shutdown().await;
    r.tier.shutdown().await;
}

async fn started(
    config: TierConfig,
    store: &ObjectStoreHandle,
    manifest: &Arc<MemoryManifest>,
) -> Tier {
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .unwrap();
    Tier::start(
        config,
        store.clone(),
        cache,
        Arc::clone(manifest) as Arc<dyn Manifest>,
    )
}

/// Every committed entry names an object holding exactly the bytes its
/// checksum and size describe.
async fn assert_entries_describe_their_objects(store: &ObjectStoreHandle, p: &TieredPartition) {
    let entries = p.shared().manifest();
    assert!(!entries.is_empty());
    for e in entries.iter() {
        let data = store
            .store
            .get(&cache::object_store::path::Path::parse(&e.key).unwrap())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(
            crc32c::crc32c(&data),
            e.checksum,
            "{} holds what was committed",
            e.key
        );
        assert_eq!(data.len() as u64, e.size, "{}", e.key);
    }
}

/// The local folder store links sealed segments instead of copying them,
/// and takes the checksum kept while a segment was appended; a segment
/// reopened after a restart has none and is read back instead. Both
/// must commit the checksum of the object's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linked_segments_commit_their_checksums_whether_written_before_or_after_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let store = ObjectStoreHandle::local_default(data.path()).unwrap();
    let manifest = Arc::new(MemoryManifest::new());
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let log_dir = data.path().join("log");
    let open = |tier: &Tier| {
        let log = PartitionLog::open(&log_dir, common::small_segments()).unwrap();
        tier.open_partition(key, log, TierRetention::default())
            .unwrap()
    };

    let tier = started(fast_config_limited(None), &store, &manifest).await;
    tier.hold_uploads_until_limited();
    let mut p = open(&tier);
    let mut sent = fill(&mut p, 250, 0);
    let before_restart = sealed_end(&p);
    assert!(
        before_restart > 0,
        "segments were sealed before the restart"
    );
    p.close().unwrap();
    tier.shutdown().await;

    let tier = started(fast_config_limited(None), &store, &manifest).await;
    let mut p = open(&tier);
    sent.extend(fill(&mut p, 250, 1000));
    all_uploaded(&mut p).await;
    assert!(sealed_end(&p) > before_restart + 1);
    assert_entries_describe_their_objects(&store, &p).await;
    let linked = p
        .log()
        .segments()
        .iter()
        .filter(|s| s.sealed)
        .filter(|s| {
            std::os::unix::fs::MetadataExt::nlink(&std::fs::metadata(&s.path).unwrap()) == 2
        })
        .count();
    assert!(linked > 0, "objects share the segments' bytes");
    let tiered_end = sealed_end(&p);
    let cold = cold_bytes(&tier, key, 0, tiered_end).await;
    assert_eq!(cold, local_bytes(p.log(), 0, tiered_end));
    assert!(
        sent.concat().starts_with(&cold),
        "the objects hold what was sent"
    );
    p.close().unwrap();
    tier.shutdown().await;
}

/// A byte of a sealed segment that changes on the local disk after it was
/// appended is caught before the segment reaches the object store: the
/// segment stays local (retried, never committed) instead of becoming a
/// corrupt object the local copy is then deleted in favour of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_segment_changed_on_disk_after_it_was_written_is_not_committed() {
    use std::os::unix::fs::FileExt;
    let r = rig(None).await;
    r.tier.hold_uploads_until_limited();
    let mut p = r.open(TierRetention::default());
    fill(&mut p, 120, 0);
    let sealed: Vec<_> = p
        .log()
        .segments()
        .into_iter()
        .filter(|s| s.sealed)
        .collect();
    assert!(!sealed.is_empty(), "{sealed:?}");
    let first = &sealed[0];
    assert!(first.crc32c.is_some(), "kept while it was appended");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&first.path)
        .unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, first.size / 2).unwrap();
    file.write_all_at(&[byte[0] ^ 0x40], first.size / 2)
        .unwrap();

    let end = p.log_end_offset();
    p.set_upload_limit(end);
    until("the upload of the changed segment has failed twice", || {
        p.tick(TS).unwrap();
        let failures = r.tier.snapshot().upload_failures;
        async move { failures >= 2 }
    })
    .await;
    assert!(
        p.shared()
            .manifest()
            .iter()
            .all(|e| e.base_offset != first.base_offset),
        "the changed segment was never committed"
    );
    assert!(first.path.exists(), "it stays on local disk");
    p.close().unwrap();
    r.tier.shutdown().await;
}
