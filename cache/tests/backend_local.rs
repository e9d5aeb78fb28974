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

/// The agent meters its store where it builds it: the wrapper must be
/// invisible to every caller, including hard-linked uploads to a folder.
#[tokio::test]
async fn a_metered_local_folder_passes_the_object_store_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("objects").display());
    let (handle, counters) = store_from_url(&url, &StoreEnv::default())
        .unwrap()
        .metered();
    assert!(
        handle.local.is_some(),
        "a metered folder still links uploads"
    );
    let seed = conformance::store_seeder(&handle);
    conformance::run(
        "metered local",
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
    let n = counters.snapshot();
    assert!(n.get > 0 && n.list > 0, "{n:?}");
}
