//! Cold-read benchmark against a real S3-compatible server (moto, started here).
//!
//! Reports, never asserts: upload throughput to the store, then sequential
//! read throughput through the ColdCache with the cache cold, warm in memory,
//! and warm on the disk tier, with hit ratios and GET counts.
//!
//! Run: `cargo bench -p cache --bench cold_read`
//! Size: `COLD_READ_BENCH_MIB=256` (default 128), objects of 16 MiB.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/servers.rs"]
mod servers;

use std::time::Instant;

use bytes::Bytes;
use cache::object_store::path::Path;
use cache::{
    store_from_url, upload_file, CacheConfig, CacheStats, ColdCache, DiskTierConfig,
    ObjectStoreHandle, StoreEnv, UploadOptions,
};

const OBJECT: u64 = 16 << 20;
const READ: u64 = 1 << 20;

fn mib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / secs
}

async fn pass(label: &str, cold: &ColdCache, keys: &[Path]) -> (f64, CacheStats) {
    let before = cold.stats();
    let start = Instant::now();
    let mut bytes = 0u64;
    for key in keys {
        let mut at = 0;
        while at < OBJECT {
            let end = (at + READ).min(OBJECT);
            bytes += cold.read_range(key, at..end, OBJECT).await.unwrap().len() as u64;
            at = end;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    cold.read_ahead_idle().await;
    let after = cold.stats();
    let delta = CacheStats {
        memory_hits: after.memory_hits - before.memory_hits,
        disk_hits: after.disk_hits - before.disk_hits,
        misses: after.misses - before.misses,
        gets: after.gets - before.gets,
        get_bytes: after.get_bytes - before.get_bytes,
        get_errors: after.get_errors - before.get_errors,
        read_ahead_issued: after.read_ahead_issued - before.read_ahead_issued,
        read_ahead_dropped: after.read_ahead_dropped - before.read_ahead_dropped,
        bytes_served: after.bytes_served - before.bytes_served,
    };
    println!(
        "{label:<34} {:>8.1} MiB/s  {:>7.3} s  hit ratio {:>5.1}% (memory {:>4}, disk {:>4}, miss {:>4})  GETs {:>4} ({} MiB)  read-ahead {}",
        mib_per_s(bytes, secs),
        secs,
        delta.hit_ratio() * 100.0,
        delta.memory_hits,
        delta.disk_hits,
        delta.misses,
        delta.gets,
        delta.get_bytes >> 20,
        delta.read_ahead_issued,
    );
    (mib_per_s(bytes, secs), delta)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not, and
    // must not start a server and move hundreds of MiB.
    if !std::env::args().any(|a| a == "--bench") {
        println!("cold_read: run with `cargo bench -p cache --bench cold_read`; skipped under cargo test");
        return;
    }
    let total_mib: u64 = std::env::var("COLD_READ_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    let objects = (total_mib << 20).div_ceil(OBJECT).max(1);
    println!("command: cargo bench -p cache --bench cold_read   (COLD_READ_BENCH_MIB={total_mib})");
    println!("store: moto_server (S3 API, in memory) on 127.0.0.1; {objects} objects x 16 MiB; reads of 1 MiB; blocks of 1 MiB");

    let server = servers::moto().unwrap();
    servers::create_bucket(&server, "bench").unwrap();
    let env = StoreEnv::from_pairs([
        ("AWS_ENDPOINT_URL", server.endpoint().as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "bench"),
        ("AWS_SECRET_ACCESS_KEY", "bench"),
        ("AWS_REGION", "us-east-1"),
    ]);
    let handle: ObjectStoreHandle = store_from_url("s3://bench/cold", &env).unwrap();

    let data: Bytes = (0..OBJECT)
        .map(|i| (i.wrapping_mul(31) >> 3) as u8)
        .collect::<Vec<u8>>()
        .into();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("segment.log");
    std::fs::write(&file, &data).unwrap();
    let keys: Vec<Path> = (0..objects)
        .map(|i| handle.prefix.clone().join(format!("{i:020}.seg")))
        .collect();
    let options = UploadOptions::default();
    let start = Instant::now();
    for key in &keys {
        upload_file(handle.store.as_ref(), key, &file, &options)
            .await
            .unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:<34} {:>8.1} MiB/s  {:>7.3} s  (upload_file: multipart, {} MiB parts, {} in flight, one file at a time)",
        "upload",
        mib_per_s(objects * OBJECT, secs),
        secs,
        options.part_size >> 20,
        options.max_concurrent_parts
    );

    let memory = CacheConfig {
        memory_bytes: ((objects * OBJECT) as usize) + (64 << 20),
        ..Default::default()
    };
    let no_read_ahead = ColdCache::open(
        CacheConfig {
            read_ahead_blocks: 0,
            ..memory.clone()
        },
        handle.clone(),
    )
    .await
    .unwrap();
    pass("cold, no read-ahead", &no_read_ahead, &keys).await;
    no_read_ahead.close().await.unwrap();
    drop(no_read_ahead);

    let cold = ColdCache::open(memory, handle.clone()).await.unwrap();
    pass("cold, read-ahead 4 blocks", &cold, &keys).await;
    pass("warm (memory tier)", &cold, &keys).await;
    cold.close().await.unwrap();
    drop(cold);

    let dir = tempfile::tempdir().unwrap();
    let disk = CacheConfig {
        memory_bytes: 32 << 20,
        disk: Some(DiskTierConfig {
            dir: dir.path().to_path_buf(),
            capacity_bytes: ((objects * OBJECT) as usize) * 2 + (256 << 20),
            recover: false,
        }),
        ..Default::default()
    };
    let tiered = ColdCache::open(disk, handle.clone()).await.unwrap();
    pass("cold, 32 MiB memory + disk tier", &tiered, &keys).await;
    pass("warm (mostly disk tier)", &tiered, &keys).await;
    tiered.close().await.unwrap();
}
