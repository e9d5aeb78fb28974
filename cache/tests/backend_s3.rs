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
