//! Compaction of tiered data end to end inside one process: a compacted
//! topic's partition log on disk, the uploader driver, a folder object store
//! (whose uploads hard-link the segment files), the cold reader, and an
//! in-memory manifest. A segment compacted locally goes up again under new
//! keys, replaces its manifest entry, and its old objects go after the
//! grace period; cold reads return exactly the compacted records.
#![allow(clippy::unwrap_used)]

mod common;

use common::tier::*;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cache::layout::{self, ObjectKind};
use cache::ObjectStoreHandle;
use futures::StreamExt;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use storage::tier::{
    ColdReader, Manifest, MemoryManifest, PartitionKey, Tier, TierConfig, TierRetention,
    TieredPartition, TieredSegment,
};
use storage::{CompactionConfig, LogConfig, PartitionLog};

const TS: i64 = 1_700_000_000_000;
const GRACE: Duration = Duration::from_millis(1_500);

struct Rig {
    tier: Tier,
    manifest: Arc<MemoryManifest>,
    store: ObjectStoreHandle,
    key: PartitionKey,
    dir: tempfile::TempDir,
    _objects: tempfile::TempDir,
}

async fn rig() -> Rig {
    let objects = tempfile::tempdir().unwrap();
    let store = ObjectStoreHandle::local_default(objects.path()).unwrap();
    let config = TierConfig {
        compaction_grace: GRACE,
        ..fast_config()
    };
    let (tier, manifest) = start_tier(config, &store).await;
    Rig {
        tier,
        manifest,
        store,
        key: PartitionKey::new(uuid::Uuid::new_v4(), 0),
        dir: tempfile::tempdir().unwrap(),
        _objects: objects,
    }
}

fn compacted_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 1024,
        compacted: true,
        compaction: CompactionConfig {
            min_dirty_ratio_ppm: 0,
            ..CompactionConfig::default()
        },
        ..LogConfig::default()
    }
}

impl Rig {
    fn open(&self) -> TieredPartition {
        let log = PartitionLog::open(self.dir.path(), compacted_config()).unwrap();
        self.tier
            .open_partition(self.key, log, TierRetention::default())
            .unwrap()
    }

    fn entries(&self) -> Vec<TieredSegment> {
        self.manifest.segments(self.key)
    }

    async fn keys(&self) -> Vec<String> {
        let listed: Vec<_> = self.store.store.list(None).collect().await;
        listed
            .into_iter()
            .map(|m| m.unwrap().location.to_string())
            .collect()
    }
}

/// Appends `n` batches whose records are keyed `k0..k{m}` with `m` varying
/// per batch, so compaction keeps some records of older batches and drops
/// others; then rolls, so every batch is in a sealed segment.
fn fill(p: &mut TieredPartition, n: usize) {
    for i in 0..n {
        let records = 10 + (i * 7) % 41;
        let mut b = common::batch_with(
            records,
            1000,
            TS + i as i64 * 100,
            Compression::None,
            None,
            i as u64,
        );
        p.append(&mut b, 0, TS).unwrap();
    }
    p.flush().unwrap();
}

async fn all_uploaded(p: &mut TieredPartition) {
    until("every sealed segment is committed", || {
        p.tick(TS).unwrap();
        let done = p.shared().deletable_below() >= sealed_end(p);
        async move { done }
    })
    .await;
}

/// Runs one compaction on this thread (the cleaner's work) and installs it.
fn compact(p: &mut TieredPartition) -> storage::CompactionReport {
    let now = TS + 3_600_000;
    let job = p
        .plan_compaction(now, i64::MAX)
        .expect("a compaction run is due");
    let done = job.run().unwrap();
    p.install_compaction(done, now).unwrap()
}

/// Every record the local log serves in `[from, end)`: offset -> (key, value).
fn local_records(log: &PartitionLog, from: i64, end: i64) -> BTreeMap<i64, (String, String)> {
    let mut out = BTreeMap::new();
    let mut offset = from;
    while offset < end {
        let slice = log.read(offset, 1 << 20, end).unwrap();
        if slice.is_empty() {
            break;
        }
        let next = slice.next_offset;
        decode_into(&mut out, slice.read_to_bytes().unwrap(), from, end);
        offset = next;
    }
    out
}

/// Every record cold reads serve in `[from, end)`.
async fn cold_records(
    tier: &Tier,
    key: PartitionKey,
    from: i64,
    end: i64,
) -> BTreeMap<i64, (String, String)> {
    let mut out = BTreeMap::new();
    let mut offset = from;
    while offset < end {
        let Some(read) = tier.read(key, offset, 64 << 10).await.unwrap() else {
            break;
        };
        assert!(read.next_offset > offset, "a cold read moves forward");
        offset = read.next_offset;
        decode_into(&mut out, read.bytes, from, end);
    }
    out
}

fn decode_into(
    out: &mut BTreeMap<i64, (String, String)>,
    bytes: bytes::Bytes,
    from: i64,
    end: i64,
) {
    let mut bytes = bytes;
    for set in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
        for r in set.records {
            if (from..end).contains(&r.offset) {
                let k = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                let v = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                out.insert(r.offset, (k, v));
            }
        }
    }
}

/// The `.seg` keys of the manifest's entries.
fn seg_keys(entries: &[TieredSegment]) -> Vec<String> {
    entries.iter().map(|e| e.key.clone()).collect()
}

fn generation(key: &str) -> u64 {
    layout::generation_of(key).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_tiered_segment_replaces_its_objects_and_cold_reads_serve_the_compacted_records(
) {
    let r = rig().await;
    let mut p = r.open();
    fill(&mut p, 150);
    all_uploaded(&mut p).await;
    let before = r.entries();
    assert!(
        before.len() >= 4,
        "several tiered segments: {}",
        before.len()
    );
    assert!(before.iter().all(|e| generation(&e.key) == 0));
    let bytes_before: u64 = before.iter().map(|e| e.size).sum();
    let end = before.last().unwrap().next_offset();
    let uncompacted = local_records(p.log(), 0, end);
    let old_snapshot = p.shared().manifest();

    // the manifest refuses for a while: the re-uploads stay pending
    r.manifest.set_failing(true);
    let report = compact(&mut p);
    assert!(report.segments >= 2, "segments rewritten: {report:?}");
    assert!(
        p.shared().first_reuploading().is_some(),
        "the rewritten segments wait for their re-upload"
    );
    assert!(
        p.plan_compaction(TS + 3_600_000, i64::MAX).is_none(),
        "nothing is compacted again while a re-upload is pending"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    p.set_retention(TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    p.tick(TS).unwrap();
    assert!(
        p.local_log_start_offset() <= p.shared().first_reuploading().unwrap(),
        "nor evicted"
    );
    p.set_retention(TierRetention::default());
    assert_eq!(r.entries(), before, "nothing swapped in yet");
    r.manifest.set_failing(false);
    let compacted = local_records(p.log(), 0, end);
    assert!(compacted.len() < uncompacted.len());
    // every key's latest record stays, at its offset
    let mut latest: BTreeMap<String, i64> = BTreeMap::new();
    for (offset, (k, _)) in &uncompacted {
        latest.insert(k.clone(), *offset);
    }
    for (k, offset) in &latest {
        assert_eq!(compacted.get(offset).map(|r| &r.0), Some(k));
    }

    // the leader uploads each rewritten segment again and swaps it in
    let local: BTreeMap<i64, u64> = p
        .log()
        .segments()
        .iter()
        .map(|s| (s.base_offset, s.size))
        .collect();
    until("every compacted segment replaced its tiered entry", || {
        p.tick(TS).unwrap();
        let done = r
            .entries()
            .iter()
            .all(|e| local.get(&e.base_offset) == Some(&e.size));
        async move { done }
    })
    .await;
    let after = r.entries();
    let served = |es: &[TieredSegment]| -> Vec<(i64, i64)> {
        es.iter()
            .map(|e| (e.first_served(), e.last_offset))
            .collect()
    };
    assert_eq!(
        served(&after),
        served(&before),
        "the same offsets, the same entries"
    );
    let replaced: Vec<(&TieredSegment, &TieredSegment)> = before
        .iter()
        .zip(after.iter())
        .filter(|(b, a)| b.key != a.key)
        .collect();
    assert_eq!(replaced.len(), report.segments);
    for (b, a) in &replaced {
        assert!(generation(&a.key) > 0, "new keys: {}", a.key);
        assert!(a.size < b.size);
    }
    let bytes_after: u64 = after.iter().map(|e| e.size).sum();
    assert!(
        bytes_after < bytes_before,
        "the bucket shrinks: {bytes_before} -> {bytes_after}"
    );
    until("the re-uploads are released", || {
        let done = p.shared().first_reuploading().is_none();
        async move { done }
    })
    .await;
    assert_eq!(p.shared().manifest().as_slice(), after.as_slice());

    // within the grace period, a reader that looked up the old entries
    // still reads the old objects, whole
    let keys = r.keys().await;
    for (b, _) in &replaced {
        assert!(keys.contains(&b.key), "{} is still there", b.key);
    }
    let reader = ColdReader::new(r.tier.cache().clone());
    let mut offset = 0;
    let mut old_records = BTreeMap::new();
    while offset < end {
        let read = reader
            .read(&old_snapshot, offset, 64 << 10)
            .await
            .unwrap()
            .unwrap();
        offset = read.next_offset;
        decode_into(&mut old_records, read.bytes, 0, end);
    }
    assert_eq!(old_records, uncompacted, "the old objects are untouched");

    // local copies go; cold reads return exactly the compacted records
    p.set_retention(TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    p.tick(TS).unwrap();
    assert!(p.local_log_start_offset() >= end, "evicted locally");
    assert_eq!(cold_records(&r.tier, r.key, 0, end).await, compacted);
    // a read at an offset compaction removed returns the next record kept,
    // in this entry or a later one
    let mut gaps = 0;
    for (_, a) in &replaced {
        for offset in [a.base_offset, a.last_offset] {
            if compacted.contains_key(&offset) {
                continue;
            }
            gaps += 1;
            let expected = compacted.range(offset..end).next();
            // as a consumer does: from `offset`, one batch at a time
            let mut got = BTreeMap::new();
            let mut at = offset;
            while got.is_empty() && at < end {
                let Some(read) = r.tier.read(r.key, at, 1).await.unwrap() else {
                    break;
                };
                at = read.next_offset;
                decode_into(&mut got, read.bytes, offset, end);
            }
            assert_eq!(got.iter().next(), expected, "a read at {offset}");
        }
    }
    assert!(gaps > 0, "some reads land in gaps");

    // after the grace period the old objects are gone, the new ones stay
    tokio::time::sleep(GRACE).await;
    until("the replaced objects are deleted", || async {
        let keys = r.keys().await;
        replaced.iter().all(|(b, _)| {
            [
                ObjectKind::Segment,
                ObjectKind::Index,
                ObjectKind::TimeIndex,
            ]
            .iter()
            .all(|kind| {
                let k = storage::tier::cold::sibling_key(&b.key, kind.extension());
                !keys.contains(&k)
            })
        })
    })
    .await;
    let keys = r.keys().await;
    for e in &after {
        assert!(keys.contains(&e.key), "{} stays", e.key);
    }
    assert_eq!(cold_records(&r.tier, r.key, 0, end).await, compacted);
    assert_eq!(r.tier.snapshot().replaced_segments, report.segments as u64);
    assert_eq!(r.tier.snapshot().cold_read_errors, 0);
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_compacts_locally_but_uploads_nothing() {
    let r = rig().await;
    let mut p = r.open();
    fill(&mut p, 80);
    all_uploaded(&mut p).await;
    let before = r.entries();
    // reopened as a follower: nothing uploadable
    let log = {
        p.close().unwrap();
        PartitionLog::open(r.dir.path(), compacted_config()).unwrap()
    };
    r.tier.hold_uploads_until_limited();
    let mut p = r
        .tier
        .open_partition(r.key, log, TierRetention::default())
        .unwrap();
    until("the follower learns what is tiered", || {
        p.tick(TS).unwrap();
        let done = p.shared().deletable_below() >= before.last().unwrap().next_offset();
        async move { done }
    })
    .await;
    let report = compact(&mut p);
    assert!(report.segments >= 1);
    assert_eq!(p.shared().first_reuploading(), None, "nothing to re-upload");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        r.entries(),
        before,
        "the manifest is the leader's to change"
    );
    p.close().unwrap();
    r.tier.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_copy_not_yet_swapped_in_before_a_restart_is_swapped_in_after_it() {
    let r = rig().await;
    let mut p = r.open();
    fill(&mut p, 80);
    all_uploaded(&mut p).await;
    let before = r.entries();
    r.manifest.set_failing(true);
    let report = compact(&mut p);
    assert!(report.segments >= 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.entries(), before, "the manifest refuses for now");
    p.close().unwrap();
    r.manifest.set_failing(false);
    let mut p = r.open();
    let local: BTreeMap<i64, u64> = p
        .log()
        .segments()
        .iter()
        .map(|s| (s.base_offset, s.size))
        .collect();
    until("the reopened leader swaps its compacted copies in", || {
        p.tick(TS).unwrap();
        let done = r
            .entries()
            .iter()
            .all(|e| local.get(&e.base_offset) == Some(&e.size));
        async move { done }
    })
    .await;
    let changed = seg_keys(&r.entries())
        .iter()
        .filter(|k| generation(k) > 0)
        .count();
    assert_eq!(changed, report.segments);
    p.close().unwrap();
    r.tier.shutdown().await;
}

/// Waits until every manifest entry is the local sealed segment of its
/// base (same end, same size) and no re-upload is pending.
async fn swapped_in(r: &Rig, p: &mut TieredPartition) {
    let local: BTreeMap<i64, (i64, u64)> = p
        .log()
        .segments()
        .iter()
        .filter(|s| s.sealed)
        .map(|s| (s.base_offset, (s.last_offset, s.size)))
        .collect();
    until(
        "every compacted segment replaced its tiered entries",
        || {
            p.tick(TS).unwrap();
            let done = p.shared().first_reuploading().is_none()
                && r.entries()
                    .iter()
                    .all(|e| local.get(&e.base_offset) == Some(&(e.last_offset, e.size)));
            async move { done }
        },
    )
    .await;
}

/// Waits until the bucket holds the objects of the manifest's entries
/// only (the replaced ones are deleted after the grace period); returns
/// the number of objects.
async fn only_live_objects(r: &Rig) -> usize {
    tokio::time::sleep(GRACE).await;
    until("the replaced objects are deleted", || async {
        let live: Vec<String> = r
            .entries()
            .iter()
            .map(|e| e.key.trim_end_matches(".seg").to_owned())
            .collect();
        r.keys().await.iter().all(|k| {
            k.rsplit_once('.')
                .is_some_and(|(stem, _)| live.iter().any(|l| l == stem))
        })
    })
    .await;
    r.keys().await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_compacted_segments_merge_and_so_do_their_entries_and_objects() {
    let r = rig().await;
    let mut p = r.open();
    fill(&mut p, 150);
    all_uploaded(&mut p).await;
    // the first run finds full segments: each is rewritten on its own
    let first = compact(&mut p);
    assert!(first.segments >= 4, "{first:?}");
    assert_eq!(first.segments, first.segments_after, "{first:?}");
    swapped_in(&r, &mut p).await;
    only_live_objects(&r).await;

    // more writes, then a run over small compacted segments and a full one
    fill(&mut p, 40);
    all_uploaded(&mut p).await;
    let before = r.entries();
    let objects_before = only_live_objects(&r).await;
    let end = before.last().unwrap().next_offset();
    let records = local_records(p.log(), 0, end);
    let local_before = p.log().segments().len();
    // (now: segments the first run emptied take their clock from their
    // file, written just now)
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let job = p.plan_compaction(now, i64::MAX).expect("a run is due");
    let second = p.install_compaction(job.run().unwrap(), now).unwrap();
    let merged_away = second.segments - second.segments_after;
    assert!(merged_away >= 3, "small segments merged: {second:?}");
    assert_eq!(p.log().segments().len(), local_before - merged_away);
    let compacted = local_records(p.log(), 0, end);
    assert!(compacted.iter().all(|(o, rec)| records.get(o) == Some(rec)));

    // the leader uploads the merged segment once and swaps it in for the
    // entries it covers, in one manifest write
    swapped_in(&r, &mut p).await;
    let after = r.entries();
    assert_eq!(
        after.len(),
        before.len() - merged_away,
        "{} entries became {}",
        before.len(),
        after.len()
    );
    assert_eq!(after.first().unwrap().first_served(), 0);
    assert_eq!(after.last().unwrap().next_offset(), end);
    for w in after.windows(2) {
        assert_eq!(
            w[1].first_served(),
            w[0].next_offset(),
            "no gap, no overlap"
        );
    }
    assert!(after.iter().any(|e| generation(&e.key) > 0));
    assert_eq!(
        r.tier.snapshot().replaced_segments,
        (first.segments + second.segments) as u64,
        "every old entry replaced once"
    );

    // after the grace period the bucket holds fewer objects
    let objects_after = only_live_objects(&r).await;
    assert!(
        objects_after < objects_before,
        "objects in the bucket: {objects_before} -> {objects_after}"
    );
    assert_eq!(
        r.keys()
            .await
            .iter()
            .filter(|k| k.ends_with(".seg"))
            .count(),
        after.len()
    );

    // local copies go; cold reads serve the compacted records from the
    // merged object
    p.set_retention(TierRetention {
        local_retention_bytes: Some(0),
        ..TierRetention::default()
    });
    p.tick(TS).unwrap();
    assert!(p.local_log_start_offset() >= end, "evicted locally");
    assert_eq!(cold_records(&r.tier, r.key, 0, end).await, compacted);
    assert_eq!(r.tier.snapshot().cold_read_errors, 0);
    p.close().unwrap();
    r.tier.shutdown().await;
}
