use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::*;
use crate::fault::{Fault, FaultInjectingStore, FaultRule, Op};

fn metered() -> (MeteredStore, RequestCounters) {
    let s = MeteredStore::new(Arc::new(InMemory::new()));
    let c = s.counters();
    (s, c)
}

fn bytes(n: usize) -> PutPayload {
    Bytes::from(vec![7u8; n]).into()
}

#[tokio::test]
async fn each_request_kind_is_counted_once() {
    let (s, c) = metered();
    let a = Path::from("t/a");
    s.put(&a, bytes(100)).await.unwrap();
    s.get(&a).await.unwrap().bytes().await.unwrap();
    s.get_range(&a, 10..30).await.unwrap();
    s.head(&a).await.unwrap();
    let listed: Vec<_> = s.list(Some(&Path::from("t"))).try_collect().await.unwrap();
    assert_eq!(listed.len(), 1);
    s.list_with_delimiter(None).await.unwrap();
    s.copy(&a, &Path::from("t/b")).await.unwrap();
    s.rename(&Path::from("t/b"), &Path::from("t/c"))
        .await
        .unwrap();
    s.delete(&a).await.unwrap();
    let n = c.snapshot();
    assert_eq!(
        n,
        RequestCounts {
            put: 1,
            get: 2,
            head: 1,
            list: 2,
            copy: 1,
            rename: 1,
            delete: 1,
            bytes_written: 100,
            // the whole object, then the 20-byte range
            bytes_read: 120,
            ..RequestCounts::default()
        }
    );
    // PUT, two LISTs, COPY, RENAME at the PUT rate; two GETs and a HEAD at the GET rate.
    assert_eq!((n.put_class(), n.get_class(), n.free_class()), (5, 3, 1));
}

#[tokio::test]
async fn every_multipart_step_is_a_request_of_its_own() {
    let (s, c) = metered();
    let p = Path::from("mp");
    let mut up = s.put_multipart(&p).await.unwrap();
    for _ in 0..3 {
        up.put_part(bytes(1000)).await.unwrap();
    }
    up.complete().await.unwrap();
    let mut aborted = s.put_multipart(&Path::from("gone")).await.unwrap();
    aborted.put_part(bytes(10)).await.unwrap();
    aborted.abort().await.unwrap();
    let n = c.snapshot();
    assert_eq!(
        (
            n.create_multipart,
            n.put_part,
            n.complete_multipart,
            n.abort_multipart
        ),
        (2, 4, 1, 1)
    );
    assert_eq!(n.bytes_written, 3010);
    // create, parts and completion are billed like PUTs; the abort is free
    assert_eq!(n.put_class(), 7);
    assert_eq!(n.free_class(), 1);
}

#[tokio::test]
async fn failed_requests_are_still_requests() {
    let faulty = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let faults = faulty.controller();
    let s = MeteredStore::new(Arc::new(faulty));
    let c = s.counters();
    faults.inject(FaultRule::new(Fault::Status(503)).on(&[
        Op::Put,
        Op::Get,
        Op::List,
        Op::PutPart,
    ]));
    assert!(s.put(&Path::from("x"), bytes(5)).await.is_err());
    assert!(s.get(&Path::from("x")).await.is_err());
    let listed: Vec<_> = s.list(None).collect().await;
    assert!(listed[0].is_err());
    let mut up = s.put_multipart(&Path::from("m")).await.unwrap();
    assert!(up.put_part(bytes(5)).await.is_err());
    // a missing object is an error the inner store answers, not a fault
    faults.clear();
    assert!(s.head(&Path::from("missing")).await.is_err());
    let n = c.snapshot();
    assert_eq!((n.put, n.get, n.list, n.put_part, n.head), (1, 1, 1, 1, 1));
    assert_eq!(n.errors, 5);
    // nothing was answered, so nothing was read
    assert_eq!(n.bytes_read, 0);
}

#[tokio::test]
async fn a_listing_counts_one_request_per_page_of_a_thousand() {
    let (s, c) = metered();
    for i in 0..2001 {
        s.put(&Path::from(format!("k/{i:05}")), bytes(1))
            .await
            .unwrap();
    }
    let before = c.snapshot().list;
    let n = s.list(Some(&Path::from("k"))).count().await;
    assert_eq!(n, 2001);
    assert_eq!(c.snapshot().list - before, 3);
    // an empty listing is one request
    let empty = s.list(Some(&Path::from("nothing"))).count().await;
    assert_eq!(empty, 0);
    assert_eq!(c.snapshot().list - before, 4);
    // a listing never polled sends nothing and counts nothing
    drop(s.list(None));
    assert_eq!(c.snapshot().list - before, 4);
}

#[tokio::test]
async fn batched_ranges_and_offset_reads_count_each_get() {
    let (s, c) = metered();
    let p = Path::from("r");
    s.put(&p, bytes(10 << 20)).await.unwrap();
    // far apart: two GETs; the default coalescing merges only close ranges
    let got = s
        .get_ranges(&p, &[0..10, (8 << 20)..(8 << 20) + 10])
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(c.snapshot().get, 2);
    let opts = GetOptions {
        range: Some(GetRange::Suffix(100)),
        ..GetOptions::default()
    };
    s.get_opts(&p, opts).await.unwrap();
    let n = c.snapshot();
    assert_eq!(n.get, 3);
    assert_eq!(n.bytes_read, 120);
}

#[tokio::test]
async fn deletions_count_each_object() {
    let (s, c) = metered();
    for k in ["a", "b", "c"] {
        s.put(&Path::from(k), bytes(1)).await.unwrap();
    }
    let paths = futures::stream::iter(["a", "b", "c"].map(|k| Ok(Path::from(k)))).boxed();
    let deleted: Vec<_> = s.delete_stream(paths).try_collect().await.unwrap();
    assert_eq!(deleted.len(), 3);
    assert_eq!(c.snapshot().delete, 3);
}
