//! Uploading sealed segment files: single PUT or bounded multipart, clean failure.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use cache::fault::{Fault, FaultController, FaultInjectingStore, FaultRule, Op};
use cache::object_store::memory::InMemory;
use cache::object_store::path::Path;
use cache::{upload_file, upload_file_checked, CacheError, ObjectStoreExt, UploadOptions};
use common::conformance::{as_written, pattern};

fn store() -> (Arc<FaultInjectingStore>, FaultController) {
    let store = Arc::new(FaultInjectingStore::new(Arc::new(InMemory::new())));
    let faults = store.controller();
    (store, faults)
}

fn segment_file(dir: &tempfile::TempDir, len: usize) -> (std::path::PathBuf, bytes::Bytes) {
    let data = pattern(len, 9);
    let path = dir.path().join("00000000000000000000.log");
    std::fs::write(&path, &data).unwrap();
    (path, data)
}

const OPTIONS: UploadOptions = UploadOptions {
    multipart_threshold: 1 << 20,
    part_size: 256 << 10,
    max_concurrent_parts: 3,
};

#[tokio::test]
async fn small_segments_go_up_in_one_put_with_their_checksum() {
    let (store, faults) = store();
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = segment_file(&dir, 100_000);
    let key = Path::from("t/0/seg");
    let up = upload_file(store.as_ref(), &key, &file, &OPTIONS)
        .await
        .unwrap();
    assert_eq!(
        (up.size, up.parts, up.crc32c),
        (100_000, 1, crc32c::crc32c(&data))
    );
    assert_eq!(
        (faults.calls(Op::Put), faults.calls(Op::CreateMultipart)),
        (1, 0)
    );
    assert_eq!(store.get(&key).await.unwrap().bytes().await.unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_segments_go_up_in_parts_reassembled_in_order() {
    let (store, faults) = store();
    let dir = tempfile::tempdir().unwrap();
    let len = 10 * (256 << 10) + 777;
    let (file, data) = segment_file(&dir, len);
    let key = Path::from("t/0/big");
    let up = upload_file(store.as_ref(), &key, &file, &OPTIONS)
        .await
        .unwrap();
    assert_eq!(
        (up.size, up.parts, up.crc32c),
        (len as u64, 11, crc32c::crc32c(&data))
    );
    assert_eq!(faults.calls(Op::PutPart), 11);
    assert_eq!(faults.calls(Op::CompleteMultipart), 1);
    assert_eq!(store.get(&key).await.unwrap().bytes().await.unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_parts_than_the_limit_are_in_flight() {
    let (store, faults) = store();
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = segment_file(&dir, 12 * (256 << 10));
    let key = Path::from("t/0/bounded");
    faults.inject(FaultRule::new(Fault::Hang).on(&[Op::PutPart]));
    let uploader = {
        let store = Arc::clone(&store);
        let key = key.clone();
        tokio::spawn(async move { upload_file(store.as_ref(), &key, &file, &OPTIONS).await })
    };
    while faults.hanging() < 3 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Parts are held; the upload must not start a fourth.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(faults.hanging(), 3);
    assert_eq!(faults.calls(Op::PutPart), 3);
    faults.clear();
    uploader.await.unwrap().unwrap();
    assert_eq!(store.get(&key).await.unwrap().bytes().await.unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_multipart_upload_is_aborted_and_a_retry_succeeds() {
    let (store, faults) = store();
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = segment_file(&dir, 6 * (256 << 10));
    let key = Path::from("t/0/retry");
    faults.inject(
        FaultRule::new(Fault::Status(503))
            .on(&[Op::PutPart])
            .times(1),
    );
    let err = upload_file(store.as_ref(), &key, &file, &OPTIONS)
        .await
        .unwrap_err();
    assert!(err.is_retriable(), "{err}");
    assert_eq!(
        faults.calls(Op::AbortMultipart),
        1,
        "the failed upload was aborted"
    );
    assert!(
        store.head(&key).await.is_err(),
        "no partial object is visible"
    );

    let up = upload_file(store.as_ref(), &key, &file, &OPTIONS)
        .await
        .unwrap();
    assert_eq!(up.size, data.len() as u64);
    assert_eq!(store.get(&key).await.unwrap().bytes().await.unwrap(), data);
}

#[tokio::test]
async fn a_failed_single_put_leaves_nothing_behind() {
    let (store, faults) = store();
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = segment_file(&dir, 1000);
    let key = Path::from("t/0/small");
    faults.unreachable_for(std::time::Duration::from_secs(3600));
    let err = upload_file(store.as_ref(), &key, &file, &OPTIONS)
        .await
        .unwrap_err();
    assert!(err.is_retriable(), "{err}");
    faults.clear();
    assert!(store.head(&key).await.is_err());
}

#[tokio::test]
async fn a_missing_file_is_an_error_naming_it() {
    let (store, _) = store();
    let err = upload_file(
        store.as_ref(),
        &Path::from("k"),
        std::path::Path::new("/nonexistent/seg.log"),
        &OPTIONS,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/seg.log"), "{err}");
}

#[tokio::test]
async fn bytes_that_changed_on_disk_since_they_were_written_are_not_put() {
    let (store, faults) = store();
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = segment_file(&dir, 100_000);
    let key = Path::from("t/0/flipped");
    let written = as_written(&data);
    // One bit flips on the disk after the writer recorded the checksum.
    let mut on_disk = data.to_vec();
    on_disk[4242] ^= 0x10;
    std::fs::write(&file, &on_disk).unwrap();

    let err = upload_file_checked(store.as_ref(), &key, &file, &OPTIONS, Some(written))
        .await
        .unwrap_err();
    assert!(matches!(err, CacheError::ContentMismatch { .. }), "{err}");
    assert!(!err.is_retriable(), "{err}");
    assert!(
        err.to_string().contains("00000000000000000000.log"),
        "{err}"
    );
    assert_eq!(faults.calls(Op::Put), 0, "nothing was sent");
    assert!(store.head(&key).await.is_err());

    // The bytes as written go up, and the result carries their checksum.
    std::fs::write(&file, &data).unwrap();
    let up = upload_file_checked(store.as_ref(), &key, &file, &OPTIONS, Some(written))
        .await
        .unwrap();
    assert_eq!((up.size, up.crc32c), (written.size, written.crc32c));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multipart_upload_of_changed_bytes_is_aborted_not_completed() {
    let (store, faults) = store();
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = segment_file(&dir, 6 * (256 << 10) + 5);
    let key = Path::from("t/0/flipped-big");
    let written = as_written(&data);
    // The tail was cut after the writer recorded it.
    std::fs::write(&file, &data[..data.len() - 5]).unwrap();

    let err = upload_file_checked(store.as_ref(), &key, &file, &OPTIONS, Some(written))
        .await
        .unwrap_err();
    assert!(matches!(err, CacheError::ContentMismatch { .. }), "{err}");
    assert_eq!(
        faults.calls(Op::AbortMultipart),
        1,
        "the upload was aborted"
    );
    assert_eq!(faults.calls(Op::CompleteMultipart), 0);
    assert!(store.head(&key).await.is_err(), "no object is visible");
}
