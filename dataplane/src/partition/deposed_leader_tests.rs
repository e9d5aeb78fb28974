//! A leader whose leadership the metastore moved on (and back to this
//! node at a newer epoch) before its replica manager told it: a write
//! naming the newer epoch waits for that leadership, as it would at a
//! follower, instead of being appended under the old one.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use storage::tier::manifest::ManifestError;
use storage::tier::wal::{WalConfig, WalIndex, WalRecord, WalWriter};
use uuid::Uuid;

use super::tests::{alone, leadership, object_store_durable, partitions, settings};
use super::*;
use crate::backend::disk::DiskLogFactory;
use crate::backend::LogError;
use crate::testing::{batch_of, scratch_dir};

/// A metastore that records every write-ahead range, and remembers the
/// leader epoch and offsets of each.
#[derive(Default)]
struct Ranges(Mutex<Vec<(i32, i64, i64)>>);

#[async_trait]
impl WalIndex for Ranges {
    async fn record(
        &self,
        ranges: Vec<WalRecord>,
    ) -> Result<Vec<Result<(), String>>, ManifestError> {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for r in &ranges {
            seen.push((r.leader_epoch, r.base_offset, r.last_offset));
        }
        Ok(ranges.iter().map(|_| Ok(())).collect())
    }
}

async fn clustered(dir: &tempfile::TempDir, index: Arc<Ranges>) -> Arc<Partitions> {
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let (opened, _) = tokio::sync::mpsc::unbounded_channel();
    p.join_cluster(opened);
    p.set_wal_writer(WalWriter::start(
        cache::ObjectStoreHandle::in_memory(),
        index,
        WalConfig::default(),
    ));
    p
}

/// Leading at epoch 0 of a partition durable in object storage, the task
/// gets a write the gateway tagged 2 (the metastore moved the leadership
/// away at 1 and back here at 2; the replica manager has not applied
/// either). It used to append it at once: its range went to the metastore
/// at epoch 2, where it is accepted, racing this agent's own rebuild for
/// epoch 2. It now waits; the rebuild's first step (following this node
/// at epoch 2) refuses it, retriably, and nothing was written for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_object_store_leader_does_not_append_a_write_of_a_newer_epoch() {
    let dir = scratch_dir();
    let index = Arc::new(Ranges::default());
    let p = clustered(&dir, index.clone()).await;
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, object_store_durable)
        .await
        .expect("open");
    h.lead(alone(0)).await.expect("lead");
    h.append(batch_of(&[b"a"]), 0, Acks::All)
        .await
        .expect("written at epoch 0");

    let newer = h.append(batch_of(&[b"b"]), 2, Acks::All);
    tokio::pin!(newer);
    assert!(futures::poll!(newer.as_mut()).is_pending());
    // commands are served in order: the write was taken
    h.position().await.expect("position");
    assert_eq!(*h.log_end().borrow(), 1, "nothing appended for epoch 2");
    assert!(
        futures::poll!(newer.as_mut()).is_pending(),
        "the write waits for the leadership it names"
    );

    // the rebuild for epoch 2 starts by following this node at epoch 2
    h.follow(1, 2).await.expect("follow");
    let refused = newer.await;
    assert!(
        matches!(refused, Err(LogError::NotServing(_))),
        "refused as by any follower (NOT_LEADER_OR_FOLLOWER, retried): {refused:?}"
    );
    assert_eq!(*h.log_end().borrow(), 1);
    let ranges = index.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        ranges,
        vec![(0, 0, 0)],
        "no range of the old leadership at epoch 2"
    );
    p.close_all().await;
}

/// A leader of a replicated topic likewise: the write tagged with the
/// newer epoch is appended once this node leads at that epoch (under that
/// leadership's replicas and ISR), not counted by the old one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leader_of_a_replicated_topic_writes_a_newer_epochs_write_once_it_leads_at_it() {
    let dir = scratch_dir();
    let p = clustered(&dir, Arc::new(Ranges::default())).await;
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, settings)
        .await
        .expect("open");
    h.lead(leadership(1, 0)).await.expect("lead");
    h.append(batch_of(&[b"a"]), 0, Acks::Leader)
        .await
        .expect("written at epoch 0");

    let newer = h.append(batch_of(&[b"b"]), 2, Acks::Leader);
    tokio::pin!(newer);
    assert!(futures::poll!(newer.as_mut()).is_pending());
    h.position().await.expect("position");
    assert_eq!(*h.log_end().borrow(), 1, "nothing appended for epoch 2");
    // a write of the current epoch queues behind it, in order
    let current = h.append(batch_of(&[b"c"]), 0, Acks::Leader);
    tokio::pin!(current);
    assert!(futures::poll!(current.as_mut()).is_pending());

    h.lead(leadership(1, 2)).await.expect("lead at 2");
    let (newer, current) = tokio::join!(newer, current);
    let (written, _) = newer.expect("written once this node leads at epoch 2");
    assert_eq!(written.base_offset, 1);
    assert!(
        matches!(current, Err(LogError::Storage(_))),
        "a write of the passed epoch is the log's to refuse: {current:?}"
    );
    assert_eq!(h.epoch_end(0).await.expect("epoch end"), Some((0, 1)));
    p.close_all().await;
}
