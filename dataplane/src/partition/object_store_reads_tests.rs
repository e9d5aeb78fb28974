//! A partition durable in object storage (`durability=object-store`)
//! serves consumers only while it leads: a new leader's log is emptied and
//! rebuilt from object storage after the metastore already names it (so the
//! gateway already routes consumers to it), and its followers copy nothing.

use std::sync::Arc;

use async_trait::async_trait;
use storage::tier::manifest::ManifestError;
use storage::tier::wal::{WalConfig, WalIndex, WalRecord, WalWriter};
use uuid::Uuid;

use super::tests::{alone, object_store_durable, partitions, settings};
use super::*;
use crate::backend::disk::DiskLogFactory;
use crate::backend::LogError;
use crate::testing::{batch_of, scratch_dir};

/// A metastore that records every write-ahead range.
struct RecordsAll;

#[async_trait]
impl WalIndex for RecordsAll {
    async fn record(
        &self,
        ranges: Vec<WalRecord>,
    ) -> Result<Vec<Result<(), String>>, ManifestError> {
        Ok(ranges.iter().map(|_| Ok(())).collect())
    }
}

async fn durable_partitions(dir: &tempfile::TempDir) -> Arc<Partitions> {
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let (opened, _) = tokio::sync::mpsc::unbounded_channel();
    p.join_cluster(opened);
    p.set_wal_writer(WalWriter::start(
        cache::ObjectStoreHandle::in_memory(),
        Arc::new(RecordsAll),
        WalConfig::default(),
    ));
    p
}

fn refused<T: std::fmt::Debug>(r: Result<T, LogError>) -> bool {
    matches!(r, Err(LogError::NotServing(_)))
}

/// The failover of the object-store durability test, step by step at the
/// new leader: a consumer that had read offsets 0..3 asks the agent the
/// metastore names as leader while that agent rebuilds its log (emptied,
/// nothing replayed yet). It used to be answered from the empty log:
/// OFFSET_OUT_OF_RANGE for its fetch, no end offset for its epoch, and
/// librdkafka then resets to `auto.offset.reset` (earliest) and reads
/// every record again. Refused, it retries once the log is rebuilt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilding_leader_refuses_reads_instead_of_sending_the_consumer_back() {
    let dir = scratch_dir();
    let p = durable_partitions(&dir).await;
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, object_store_durable)
        .await
        .expect("open");
    h.lead(alone(0)).await.expect("lead");
    for v in [b"a", b"b", b"c"] {
        h.append(batch_of(&[v]), 0, Acks::All)
            .await
            .expect("durable in object storage");
    }
    let before = h
        .read(0, 1 << 20, true, Isolation::ReadUncommitted)
        .await
        .expect("read as leader");
    assert_eq!(before.high_watermark, 3);
    let bytes = before.records.to_bytes().expect("bytes");
    assert_eq!(h.epoch_end(0).await.expect("epoch end"), Some((0, 3)));

    // leadership at epoch 1 (this node again, as a preferred replica taking
    // it back, or another agent): the rebuild follows this node itself and
    // empties the log where object storage's ranges start
    h.follow(1, 1).await.expect("follow");
    h.restart(
        FetchedAt {
            leader: 1,
            leader_epoch: 1,
            fetch_offset: 3,
        },
        0,
        None,
    )
    .await
    .expect("restart");
    let fetch = h
        .read(3, 1 << 20, true, Isolation::ReadUncommitted)
        .await
        .map(|r| r.high_watermark);
    assert!(
        matches!(fetch, Err(LogError::NotServing(_))),
        "a fetch past the emptied log: {fetch:?}"
    );
    assert!(
        refused(h.epoch_end(0).await),
        "no epoch is known before the ranges are replayed"
    );
    assert!(refused(h.offsets(OffsetQuery::Earliest).await));
    assert!(refused(h.offsets(OffsetQuery::Latest).await));

    // the ranges replayed, it leads: the consumer goes on where it was
    h.replica_append(
        FetchedAt {
            leader: 1,
            leader_epoch: 1,
            fetch_offset: 0,
        },
        bytes,
        i64::MAX,
    )
    .await
    .expect("replay");
    h.lead(alone(1)).await.expect("lead");
    let after = h
        .read(3, 1 << 20, true, Isolation::ReadUncommitted)
        .await
        .expect("read as leader");
    assert!(after.records.is_empty());
    assert_eq!(after.high_watermark, 3);
    assert_eq!(h.epoch_end(0).await.expect("epoch end"), Some((0, 3)));
    p.close_all().await;
}

/// A follower of such a topic holds nothing of what its leader wrote: a
/// consumer sent to it (stale metadata, the KIP-392 path) is refused, not
/// answered from its empty log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_of_a_partition_durable_in_object_storage_refuses_reads() {
    let dir = scratch_dir();
    let p = durable_partitions(&dir).await;
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, object_store_durable)
        .await
        .expect("open");
    h.follow(2, 0).await.expect("follow");
    assert!(refused(
        h.read(0, 1 << 20, true, Isolation::ReadUncommitted)
            .await
            .map(|r| r.high_watermark)
    ));
    assert!(refused(h.epoch_end(0).await));
    assert!(refused(h.offsets(OffsetQuery::Earliest).await));
    p.close_all().await;
}

/// Other topics' followers still serve consumers (KIP-392).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_of_a_replicated_topic_still_serves_reads() {
    let dir = scratch_dir();
    let p = durable_partitions(&dir).await;
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, settings)
        .await
        .expect("open");
    h.follow(2, 0).await.expect("follow");
    let r = h
        .read(0, 1 << 20, true, Isolation::ReadUncommitted)
        .await
        .expect("a follower's read");
    assert!(r.records.is_empty());
    assert_eq!(h.epoch_end(0).await.expect("epoch end"), None);
    p.close_all().await;
}
