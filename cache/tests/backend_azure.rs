//! The conformance suite against Azurite (Azure Blob emulator), started by the test.
#![allow(clippy::unwrap_used)]

mod common;

use cache::{store_from_url, Backend, StoreEnv};
use common::conformance::{self, Caps};
use common::servers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_backend_passes_the_object_store_conformance_suite() {
    let server = servers::azurite().unwrap();
    servers::create_container(&server, "aerostream").unwrap();
    let endpoint = format!("{}/{}", server.endpoint(), servers::AZURITE_ACCOUNT);
    let env = StoreEnv::from_pairs([
        ("AZURE_STORAGE_ACCOUNT_NAME", servers::AZURITE_ACCOUNT),
        ("AZURE_STORAGE_ACCOUNT_KEY", servers::AZURITE_KEY),
        ("AZURE_STORAGE_ENDPOINT", endpoint.as_str()),
        ("AZURE_ALLOW_HTTP", "true"),
    ]);
    let handle = store_from_url("az://aerostream/cluster-1", &env).unwrap();
    assert_eq!(handle.backend, Backend::Azure);
    let seed = conformance::store_seeder(&handle);
    conformance::run(
        "azure (azurite)",
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
