//! The conformance suite on the in-process backends: memory and a local folder.
#![allow(clippy::unwrap_used)]

mod common;

use cache::{store_from_url, StoreEnv};
use common::conformance::{self, Caps};

#[tokio::test]
async fn memory_backend_passes_the_object_store_conformance_suite() {
    let handle = store_from_url("memory:///conformance", &StoreEnv::default()).unwrap();
    let seed = conformance::store_seeder(&handle);
    conformance::run(
        "memory",
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

#[tokio::test]
async fn local_folder_backend_passes_the_object_store_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("objects").display());
    let handle = store_from_url(&url, &StoreEnv::default()).unwrap();
    let seed = conformance::store_seeder(&handle);
    conformance::run(
        "local",
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
