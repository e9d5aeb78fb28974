//! Rebuilding a partition durable in object storage when its first
//! write-ahead range begins inside a sealed, uploaded segment.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use metastore::Manifests;
use storage::tier::wal::{WalConfig, WalWriter};

use super::{batches_from, rebuild};
use crate::backend::manifest::MetastoreManifest;
use crate::backend::LogSettings;
use crate::partition::tests::{alone, partitions, settings};
use crate::partition::Acks;
use crate::testing::{record_batch, until, Backends, Logs};

/// A batch of one record from producer `pid` at sequence `seq`.
fn produced(value: &[u8], pid: i64, seq: i32) -> BytesMut {
    BytesMut::from(
        &record_batch(
            &[value],
            false,
            Some((pid, 0, seq)),
            kafka_protocol::records::Compression::None,
        )[..],
    )
}

/// The write-ahead writer makes one range of a partition's consecutive
/// batches in one object, a segment may roll between two of them, and the
/// metastore keeps a range until the manifest serves all of it: here the
/// first range is [1..=3] while the uploaded segment holds 0..=2. The
/// rebuild restarted at 1: below the tiered end, with the local log
/// reaching past it, the restart was refused at every try (and with no
/// snapshot at 1, producer 1000's state, written at 0, would have been
/// lost). It restarts at 3 now, where the segment's producer snapshot is,
/// and replays the range from 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_whose_first_range_begins_inside_a_sealed_segment_restarts_where_it_ends() {
    let b = Backends::start(Logs::Tiered, 1).await;
    let topic = b.create_durable_topic("durable").await;
    let epoch = topic.partition(0).expect("partition 0").leader_epoch;

    let p = partitions(b.logs.clone());
    let (opened, _) = tokio::sync::mpsc::unbounded_channel();
    p.join_cluster(opened);
    // long enough a linger that the last three batches share an object
    let writer = WalWriter::start(
        cache::ObjectStoreHandle::in_memory(),
        Arc::new(MetastoreManifest::new(b.meta.clone())),
        WalConfig {
            linger: Duration::from_secs(2),
            ..WalConfig::default()
        },
    );
    p.set_wal_writer(writer.clone());
    let durable = || LogSettings {
        object_store_durable: true,
        segment_bytes: storage::config::MIN_SEGMENT_BYTES,
        ..settings()
    };
    let h = p
        .get_or_open("durable", topic.id, 0, durable)
        .await
        .expect("open");
    h.lead(alone(epoch)).await.expect("lead");

    // 0: producer 1000's only batch, in an object of its own
    h.append(produced(b"a", 1000, 0), epoch, Acks::All)
        .await
        .expect("a");
    // 1..=3: producer 2000, one object; 3 no longer fits segment 0
    let big = vec![7u8; 600 << 10];
    for (seq, value) in [(0, &b"b"[..]), (1, &big[..]), (2, &big[..])] {
        h.append(produced(value, 2000, seq), epoch, Acks::Leader)
            .await
            .expect("written");
    }
    let mut hw = h.high_watermark();
    tokio::time::timeout(Duration::from_secs(30), hw.wait_for(|hw| *hw == 4))
        .await
        .expect("object storage took the writes")
        .expect("hw");
    until("segment 0 (offsets 0..=2) is uploaded", || {
        b.meta
            .segments(topic.id, 0)
            .iter()
            .any(|e| e.last_offset == 2)
    })
    .await;
    let ranges = b.meta.wal_ranges(topic.id, 0);
    assert_eq!(
        ranges
            .iter()
            .map(|r| (r.base_offset, r.last_offset))
            .collect::<Vec<_>>(),
        vec![(1, 3)],
        "the one range left begins inside the uploaded segment"
    );
    let producers = h.producers().await.expect("producers");
    assert_eq!(producers.len(), 2);

    // this node takes the leadership again at a newer epoch (a preferred
    // replica taking it back): its local log reaches past the range's start
    let end = rebuild(&b.meta, &writer, &h, 1, epoch + 1)
        .await
        .expect("the rebuild finishes");
    assert_eq!(end, 4);
    assert_eq!(*h.log_end().borrow(), 4);
    assert_eq!(
        h.producers().await.expect("producers"),
        producers,
        "both producers' state, the sealed part's from the segment's snapshot"
    );
    h.lead(alone(epoch + 1)).await.expect("lead");
    let (again, _) = h
        .append(produced(b"a", 1000, 0), epoch + 1, Acks::Leader)
        .await
        .expect("a retried");
    assert!(
        again.duplicate,
        "a retry of the sealed part's batch is known"
    );
    assert_eq!(again.base_offset, 0);
    let (again, _) = h
        .append(produced(&big, 2000, 2), epoch + 1, Acks::Leader)
        .await
        .expect("the last batch retried");
    assert!(again.duplicate);
    assert_eq!(again.base_offset, 3);
    assert_eq!(*h.log_end().borrow(), 4);
    p.close_all().await;
    b.stop().await;
}

/// A range's batches from an offset on: whole batches skipped before it,
/// a batch holding offsets on both sides refused.
#[test]
fn a_ranges_batches_are_cut_at_batch_boundaries_only() {
    let mut bytes = BytesMut::new();
    for (base, values) in [(5i64, &[&b"x"[..], &b"y"[..]][..]), (7, &[&b"z"[..]][..])] {
        let mut batch = BytesMut::from(
            &record_batch(
                values,
                false,
                None,
                kafka_protocol::records::Compression::None,
            )[..],
        );
        batch[..8].copy_from_slice(&base.to_be_bytes());
        bytes.extend_from_slice(&batch);
    }
    let bytes = bytes.freeze();
    let second = storage::BatchHeader::decode(&bytes)
        .and_then(|h| h.total_len())
        .expect("first batch");
    assert_eq!(batches_from(bytes.clone(), 5).expect("all"), bytes);
    assert_eq!(
        batches_from(bytes.clone(), 7).expect("from 7"),
        bytes.slice(second..)
    );
    assert!(batches_from(bytes.clone(), 8).expect("none").is_empty());
    assert!(
        batches_from(bytes.clone(), 6).is_err(),
        "inside the first batch"
    );
    assert!(
        batches_from(bytes.slice(..second + 10), 7).is_err(),
        "cut short"
    );
}
