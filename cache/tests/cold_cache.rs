//! Behaviour of the cold-read cache over a counting, fault-injecting store.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cache::fault::{Fault, FaultController, FaultInjectingStore, FaultRule, Op};
use cache::object_store::memory::InMemory;
use cache::object_store::path::Path;
use cache::{
    Backend, CacheConfig, CacheError, ColdCache, DiskTierConfig, ObjectStoreExt, ObjectStoreHandle,
};
use common::conformance::pattern;
use proptest::prelude::*;

const BLOCK: u64 = 64 << 10;

struct Fixture {
    handle: ObjectStoreHandle,
    faults: FaultController,
}

fn fixture() -> Fixture {
    let store = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let faults = store.controller();
    Fixture {
        handle: ObjectStoreHandle::new(Arc::new(store), Path::default(), Backend::Memory),
        faults,
    }
}

fn config() -> CacheConfig {
    CacheConfig {
        block_size: BLOCK,
        memory_bytes: 8 << 20,
        read_ahead_blocks: 0,
        ..Default::default()
    }
}

async fn put(fx: &Fixture, key: &str, data: &Bytes) -> Path {
    let path = Path::from(key);
    fx.handle
        .store
        .put(&path, data.clone().into())
        .await
        .unwrap();
    fx.faults.reset_counts();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_of_a_cold_block_cause_exactly_one_get() {
    let fx = fixture();
    let data = pattern(3 * BLOCK as usize, 1);
    let key = put(&fx, "seg", &data).await;
    let cold = ColdCache::open(config(), fx.handle.clone()).await.unwrap();

    // Hold the first GET open so that every reader arrives while it is in flight.
    fx.faults.inject(FaultRule::new(Fault::Hang).on(&[Op::Get]));
    let readers: Vec<_> = (0..32u64)
        .map(|i| {
            let cold = cold.clone();
            let key = key.clone();
            tokio::spawn(async move {
                cold.read_range(&key, BLOCK + i * 100..BLOCK + i * 100 + 50, 3 * BLOCK)
                    .await
            })
        })
        .collect();
    while fx.faults.hanging() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Give every reader time to reach the cache; none may start a second GET.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fx.faults.calls(Op::Get), 1);
    fx.faults.clear();

    for (i, reader) in readers.into_iter().enumerate() {
        let start = BLOCK as usize + i * 100;
        assert_eq!(
            reader.await.unwrap().unwrap(),
            data.slice(start..start + 50)
        );
    }
    assert_eq!(fx.faults.calls(Op::Get), 1, "one block, one GET");
    let stats = cold.stats();
    assert_eq!(stats.gets, 1);
    assert_eq!(stats.misses + stats.memory_hits, 32);
    assert_eq!(stats.get_bytes, BLOCK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_readers_get_the_next_blocks_fetched_ahead() {
    let fx = fixture();
    let blocks = 12u64;
    let data = pattern((blocks * BLOCK) as usize, 2);
    let size = data.len() as u64;
    let key = put(&fx, "seq", &data).await;
    let cold = ColdCache::open(
        CacheConfig {
            read_ahead_blocks: 4,
            ..config()
        },
        fx.handle.clone(),
    )
    .await
    .unwrap();

    // Two reads in a row: the second continues the first, so blocks 2..6 are fetched ahead.
    cold.read_range(&key, 0..1000, size).await.unwrap();
    cold.read_range(&key, BLOCK..BLOCK + 1000, size)
        .await
        .unwrap();
    cold.read_ahead_idle().await;
    assert_eq!(cold.stats().read_ahead_issued, 4);
    let fetched: Vec<u64> = fx
        .faults
        .history()
        .iter()
        .filter(|c| c.op == Op::Get)
        .map(|c| c.range.clone().unwrap().start / BLOCK)
        .collect();
    let mut sorted = fetched.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 1, 2, 3, 4, 5]);

    // The consumer now finds those blocks in memory without new GETs.
    let before = cold.stats();
    for b in 2..6 {
        let got = cold
            .read_range(&key, b * BLOCK..(b + 1) * BLOCK, size)
            .await
            .unwrap();
        assert_eq!(
            got,
            data.slice((b * BLOCK) as usize..((b + 1) * BLOCK) as usize)
        );
    }
    let after = cold.stats();
    assert_eq!(after.memory_hits - before.memory_hits, 4);
    assert_eq!(after.misses, before.misses);

    // Reading to the end never fetches past it.
    for b in 6..blocks {
        cold.read_range(&key, b * BLOCK..(b + 1) * BLOCK, size)
            .await
            .unwrap();
    }
    cold.read_ahead_idle().await;
    assert_eq!(
        fx.faults.calls(Op::Get),
        blocks,
        "every block fetched exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_readers_cause_no_read_ahead() {
    let fx = fixture();
    let data = pattern((16 * BLOCK) as usize, 3);
    let size = data.len() as u64;
    let key = put(&fx, "rand", &data).await;
    let cold = ColdCache::open(
        CacheConfig {
            read_ahead_blocks: 4,
            ..config()
        },
        fx.handle.clone(),
    )
    .await
    .unwrap();
    for b in [9u64, 2, 14, 5, 11] {
        cold.read_range(&key, b * BLOCK + 10..b * BLOCK + 20, size)
            .await
            .unwrap();
    }
    cold.read_ahead_idle().await;
    assert_eq!(cold.stats().read_ahead_issued, 0);
    assert_eq!(fx.faults.calls(Op::Get), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_ahead_is_dropped_rather_than_queued_at_its_in_flight_limit() {
    let fx = fixture();
    let data = pattern((16 * BLOCK) as usize, 4);
    let size = data.len() as u64;
    let key = put(&fx, "limit", &data).await;
    let cfg = CacheConfig {
        read_ahead_blocks: 8,
        read_ahead_in_flight: 2,
        ..config()
    };
    let cold = ColdCache::open(cfg, fx.handle.clone()).await.unwrap();
    cold.read_range(&key, 0..10, size).await.unwrap();
    // Read-ahead GETs hang, so the two permits stay taken.
    fx.faults.inject(FaultRule::new(Fault::Hang).on(&[Op::Get]));
    cold.read_range(&key, 10..20, size).await.unwrap();
    let stats = cold.stats();
    assert_eq!(stats.read_ahead_issued, 2);
    assert_eq!(stats.read_ahead_dropped, 6);
    fx.faults.clear();
    cold.read_ahead_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_fails_reads_retriably_and_recovers_without_poisoning_the_cache() {
    let fx = fixture();
    let data = pattern((2 * BLOCK) as usize, 5);
    let size = data.len() as u64;
    let key = put(&fx, "flaky", &data).await;
    let cold = ColdCache::open(config(), fx.handle.clone()).await.unwrap();

    for fault in [
        Fault::Status(503),
        Fault::Status(500),
        Fault::Unreachable,
        Fault::Timeout {
            after: Duration::from_millis(20),
        },
    ] {
        fx.faults.inject(FaultRule::new(fault).on(&[Op::Get]));
        let err = cold.read_range(&key, 0..100, size).await.unwrap_err();
        assert!(
            err.is_retriable(),
            "{fault:?} gave a non-retriable error: {err}"
        );
        fx.faults.clear();
    }
    assert_eq!(cold.stats().get_errors, 4);
    assert_eq!(
        cold.read_range(&key, 0..100, size).await.unwrap(),
        data.slice(0..100)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_object_size_is_reported_not_cached() {
    let fx = fixture();
    let data = pattern(1000, 6);
    let key = put(&fx, "short", &data).await;
    let cold = ColdCache::open(config(), fx.handle.clone()).await.unwrap();
    let err = cold.read_range(&key, 0..10, 5000).await.unwrap_err();
    assert!(matches!(err, CacheError::SizeMismatch { .. }), "{err}");
    // With the right size the same block is fetched again and served.
    assert_eq!(
        cold.read_range(&key, 0..10, 1000).await.unwrap(),
        data.slice(0..10)
    );
    assert_eq!(fx.faults.calls(Op::Get), 2);
}

#[tokio::test]
async fn ranges_outside_the_object_are_rejected_without_a_get() {
    let fx = fixture();
    let key = put(&fx, "bounds", &pattern(100, 0)).await;
    let cold = ColdCache::open(config(), fx.handle.clone()).await.unwrap();
    assert!(matches!(
        cold.read_range(&key, 50..101, 100).await,
        Err(CacheError::RangeOutOfBounds { .. })
    ));
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 60..50;
    assert!(matches!(
        cold.read_range(&key, backwards, 100).await,
        Err(CacheError::RangeOutOfBounds { .. })
    ));
    assert!(cold
        .read_range(&key, 100..100, 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(fx.faults.calls(Op::Get), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_objects_are_not_found_and_not_retriable() {
    let fx = fixture();
    let cold = ColdCache::open(config(), fx.handle.clone()).await.unwrap();
    let err = cold
        .read_range(&Path::from("nope"), 0..10, 100)
        .await
        .unwrap_err();
    assert!(err.is_not_found() && !err.is_retriable(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_evicted_from_memory_are_served_from_the_disk_tier() {
    let fx = fixture();
    let dir = tempfile::tempdir().unwrap();
    let blocks = 24u64;
    let data = pattern((blocks * BLOCK) as usize, 7);
    let size = data.len() as u64;
    let key = put(&fx, "disk", &data).await;
    let cfg = CacheConfig {
        memory_bytes: (4 * BLOCK) as usize,
        disk: Some(DiskTierConfig {
            dir: dir.path().to_path_buf(),
            capacity_bytes: 128 << 20,
            recover: false,
        }),
        ..config()
    };
    let cold = ColdCache::open(cfg, fx.handle.clone()).await.unwrap();
    for b in 0..blocks {
        cold.read_range(&key, b * BLOCK..(b + 1) * BLOCK, size)
            .await
            .unwrap();
    }
    assert_eq!(fx.faults.calls(Op::Get), blocks);
    // Evicted blocks are written to disk in the background; read them again until all have landed.
    let mut disk_hits = 0;
    for _ in 0..200 {
        let before = cold.stats();
        let got = cold.read_range(&key, 0..BLOCK, size).await.unwrap();
        assert_eq!(got, data.slice(0..BLOCK as usize));
        disk_hits = cold.stats().disk_hits - before.disk_hits;
        if disk_hits == 1 {
            break;
        }
        // Push block 0 out of memory again by touching others.
        for b in 1..6 {
            cold.read_range(&key, b * BLOCK..b * BLOCK + 1, size)
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        disk_hits,
        1,
        "block 0 never came from disk: {:?}",
        cold.stats()
    );
    cold.close().await.unwrap();
}

#[test]
fn bytes_equal_the_objects_bytes_for_arbitrary_ranges() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let block = 4096u64;
    let cfg = CacheConfig {
        block_size: block,
        memory_bytes: 16 * block as usize,
        disk: Some(DiskTierConfig {
            dir: dir.path().to_path_buf(),
            capacity_bytes: 64 << 20,
            recover: false,
        }),
        read_ahead_blocks: 2,
        ..Default::default()
    };
    let objects: Vec<(Path, Bytes)> = [0usize, 1, 4095, 4096, 4097, 10_000, 65_537]
        .iter()
        .enumerate()
        .map(|(i, &len)| (Path::from(format!("obj-{i}")), pattern(len, i as u8)))
        .collect();
    let cold = rt.block_on(async {
        for (path, data) in &objects {
            fx.handle
                .store
                .put(path, data.clone().into())
                .await
                .unwrap();
        }
        ColdCache::open(cfg, fx.handle.clone()).await.unwrap()
    });
    let strategy = (0..objects.len(), any::<u64>(), any::<u64>());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    });
    runner
        .run(&strategy, |(i, a, b)| {
            let (path, data) = &objects[i];
            let size = data.len() as u64;
            let (a, b) = (a % (size + 1), b % (size + 1));
            let range = a.min(b)..a.max(b);
            let got = rt
                .block_on(cold.read_range(path, range.clone(), size))
                .unwrap();
            prop_assert_eq!(got, data.slice(range.start as usize..range.end as usize));
            Ok(())
        })
        .unwrap();
    rt.block_on(cold.close()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovered_disk_tier_serves_blocks_cached_by_the_previous_run() {
    let fx = fixture();
    let dir = tempfile::tempdir().unwrap();
    let data = pattern((8 * BLOCK) as usize, 8);
    let size = data.len() as u64;
    let key = put(&fx, "persist", &data).await;
    let cfg = || CacheConfig {
        memory_bytes: (2 * BLOCK) as usize,
        disk: Some(DiskTierConfig {
            dir: dir.path().to_path_buf(),
            capacity_bytes: 128 << 20,
            recover: true,
        }),
        ..config()
    };
    let cold = ColdCache::open(cfg(), fx.handle.clone()).await.unwrap();
    cold.read_range(&key, 0..size, size).await.unwrap();
    cold.close().await.unwrap();
    drop(cold);
    let gets = fx.faults.calls(Op::Get);

    let reopened = ColdCache::open(cfg(), fx.handle.clone()).await.unwrap();
    assert_eq!(
        reopened.read_range(&key, 0..size, size).await.unwrap(),
        data
    );
    let stats = reopened.stats();
    assert!(
        stats.disk_hits > 0,
        "nothing recovered from disk: {stats:?}"
    );
    assert_eq!(
        fx.faults.calls(Op::Get) - gets,
        stats.misses,
        "only blocks missing from disk were fetched"
    );
    reopened.close().await.unwrap();
}
