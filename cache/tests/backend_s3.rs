//! The conformance suite against a real S3-compatible server (moto), started by the test.
#![allow(clippy::unwrap_used)]

mod common;

use cache::{store_from_url, Backend, StoreEnv};
use common::conformance::{self, Caps};
use common::servers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_backend_passes_the_object_store_conformance_suite() {
    let server = servers::moto().unwrap();
    servers::create_bucket(&server, "aerostream").unwrap();
    let env = StoreEnv::from_pairs([
        ("AWS_ENDPOINT_URL", server.endpoint().as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ]);
    let handle = store_from_url("s3://aerostream/cluster-1", &env).unwrap();
    assert_eq!(handle.backend, Backend::S3);
    let seed = conformance::store_seeder(&handle);
    conformance::run(
        "s3 (moto)",
        handle,
        Caps {
            writes: true,
            conditional_create: true,
            server_side_copy: true,
        },
        seed,
    )
    .await
    .assert_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_reads_fail_retriably_while_the_s3_server_is_down_and_resume_after_restart() {
    use bytes::Bytes;
    use cache::{CacheConfig, ColdCache, ObjectStoreExt};

    let mut server = servers::moto().unwrap();
    let port = server.port;
    servers::create_bucket(&server, "aerostream").unwrap();
    let env = StoreEnv::from_pairs([
        ("AWS_ENDPOINT_URL", server.endpoint().as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ]);
    let handle = store_from_url("s3://aerostream/outage", &env).unwrap();
    let key = handle
        .prefix
        .clone()
        .join("00000000000000000000-00000000000000000099.seg");
    let data = conformance::pattern(300_000, 3);
    handle
        .store
        .put(&key, Bytes::clone(&data).into())
        .await
        .unwrap();
    let config = CacheConfig {
        block_size: 64 << 10,
        memory_bytes: 1 << 20,
        read_ahead_blocks: 0,
        ..Default::default()
    };
    let cold = ColdCache::open(config, handle.clone()).await.unwrap();
    assert_eq!(
        cold.read_range(&key, 0..1000, 300_000).await.unwrap(),
        data.slice(0..1000)
    );

    server.stop();
    let err = cold
        .read_range(&key, 200_000..201_000, 300_000)
        .await
        .unwrap_err();
    assert!(
        err.is_retriable(),
        "an unreachable server must be a retriable failure: {err}"
    );
    // Cached blocks are still served while the store is down.
    assert_eq!(
        cold.read_range(&key, 10..20, 300_000).await.unwrap(),
        data.slice(10..20)
    );

    // moto keeps objects in memory, so the restarted server is re-seeded first.
    let server = servers::moto_on(port).unwrap();
    servers::create_bucket(&server, "aerostream").unwrap();
    handle
        .store
        .put(&key, Bytes::clone(&data).into())
        .await
        .unwrap();
    assert_eq!(
        cold.read_range(&key, 200_000..201_000, 300_000)
            .await
            .unwrap(),
        data.slice(200_000..201_000)
    );
}
