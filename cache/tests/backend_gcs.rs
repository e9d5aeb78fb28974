//! The conformance suite with object_store's GCS client.
//!
//! No local emulator accepts every call of that client (it speaks GCS's XML
//! API). So the suite runs twice:
//! - against moto, whose S3 server also answers the GCS XML API: every check
//!   except create-only (conditional) puts, which moto refuses on that API,
//!   and server-side copy (the tombstone move), where moto ignores the
//!   `x-goog-copy-source` header and stores an empty object;
//! - against fake-gcs-server, which holds objects uploaded through its JSON
//!   API and serves object_store's reads (get, ranges, head, list, delete) but
//!   refuses its uploads.
//!
//! Together they exercise every GCS call AeroStream makes except conditional
//! creates (which AeroStream therefore does not depend on) and server-side
//! copy (so on GCS deletion should delete rather than move to tombstones,
//! until copy is verified against the real service).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use cache::{store_from_url, Backend, StoreEnv};
use common::conformance::{self, Caps, Seeder};
use common::servers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_client_passes_the_conformance_suite_against_an_xml_api_server() {
    let server = servers::moto().unwrap();
    servers::create_bucket(&server, "aerostream").unwrap();
    let env = StoreEnv::from_pairs([(
        "STORAGE_EMULATOR_HOST",
        format!("127.0.0.1:{}", server.port),
    )]);
    let handle = store_from_url("gs://aerostream/cluster-1", &env).unwrap();
    assert_eq!(handle.backend, Backend::Gcs);
    let seed = conformance::store_seeder(&handle);
    conformance::run(
        "gcs client (moto XML API)",
        handle,
        Caps {
            writes: true,
            conditional_create: false,
            server_side_copy: false,
        },
        seed,
    )
    .await
    .assert_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_client_reads_pass_the_conformance_suite_against_fake_gcs_server() {
    let server = Arc::new(servers::fake_gcs().unwrap());
    servers::fake_gcs_create_bucket(&server, "aerostream").unwrap();
    let env = StoreEnv::from_pairs([(
        "STORAGE_EMULATOR_HOST",
        format!("127.0.0.1:{}", server.port),
    )]);
    let handle = store_from_url("gs://aerostream/cluster-1", &env).unwrap();
    let uploader = Arc::clone(&server);
    let seed: Seeder = Arc::new(move |path, data| {
        let server = Arc::clone(&uploader);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                servers::fake_gcs_upload(&server, "aerostream", path.as_ref(), &data)
            })
            .await?
        })
    });
    conformance::run(
        "gcs client (fake-gcs-server)",
        handle,
        Caps {
            writes: false,
            conditional_create: false,
            server_side_copy: false,
        },
        seed,
    )
    .await
    .assert_passed();
}
