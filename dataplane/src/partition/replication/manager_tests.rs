//! The replica manager against a real embedded metastore: which tasks it
//! rebuilds from object storage, and when.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use storage::tier::manifest::ManifestError;
use storage::tier::wal::{WalConfig, WalIndex, WalRecord, WalWriter};
use tokio::sync::{mpsc, watch};

use super::{Manager, ReplicationSettings};
use crate::backend::disk::DiskLogFactory;
use crate::partition::tests::partitions;
use crate::partition::{Acks, OffsetQuery};
use crate::testing::{batch_of, until, Backends, Logs};
use crate::topic_config::LogDefaults;
use storage::tier::PartitionKey;

/// A metastore that records write-ahead ranges only once released, and
/// counts the calls that wait.
struct HeldIndex {
    calls: AtomicUsize,
    open: watch::Receiver<bool>,
}

#[async_trait]
impl WalIndex for HeldIndex {
    async fn record(
        &self,
        ranges: Vec<WalRecord>,
    ) -> Result<Vec<Result<(), String>>, ManifestError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.clone();
        let _ = open.wait_for(|o| *o).await;
        Ok(ranges.iter().map(|_| Ok(())).collect())
    }
}

/// The `opened` event of the log a reconcile opened arrives after that
/// reconcile rebuilt the partition and told it to lead. It used to make
/// the manager forget what it told the task, so the next reconcile rebuilt
/// the partition a second time at the same leader epoch: an acks=all write
/// waiting for object storage meanwhile failed ("leadership moved"), and
/// its range, recorded after the second rebuild read the range list, no
/// longer followed the log. One rebuild per task and leader epoch now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opened_event_of_a_rebuilt_leader_does_not_rebuild_it_again() {
    let b = Backends::start(Logs::Disk, 1).await;
    let topic = b.create_durable_topic("durable").await;
    let part = topic.partition(0).expect("partition 0");
    assert_eq!(part.leader, Some(1), "the only agent leads");
    let key = PartitionKey::new(topic.id, 0);

    let p = partitions(Arc::new(
        DiskLogFactory::new(b.dir.path().join("replicas")).expect("factory"),
    ));
    let (opened_tx, mut opened) = mpsc::unbounded_channel();
    p.join_cluster(opened_tx);
    let (release, open) = watch::channel(false);
    let index = Arc::new(HeldIndex {
        calls: AtomicUsize::new(0),
        open,
    });
    p.set_wal_writer(WalWriter::start(
        cache::ObjectStoreHandle::in_memory(),
        index.clone(),
        WalConfig::default(),
    ));
    let (isr_tx, _isr) = mpsc::unbounded_channel();
    let mut m = Manager::new(
        1,
        b.meta.clone(),
        p.clone(),
        LogDefaults::default(),
        ReplicationSettings::default(),
        isr_tx,
    );

    // opens the log, rebuilds it from object storage (empty) and leads
    m.reconcile().await;
    let h = p.get_open(key).expect("the reconcile opened the log");
    h.offsets(OffsetQuery::Latest)
        .await
        .expect("the rebuilt partition leads");

    // an acks=all write waits for object storage
    let write = {
        let h = h.clone();
        let epoch = part.leader_epoch;
        tokio::spawn(async move { h.append(batch_of(&[b"kept"]), epoch, Acks::All).await })
    };
    until("the write reaches the write-ahead writer", || {
        index.calls.load(Ordering::SeqCst) > 0
    })
    .await;

    // what the run loop does next: the event of the open, then a reconcile
    let event = opened.try_recv().expect("the open was announced");
    assert_eq!(event, key);
    m.on_opened(event);
    m.reconcile().await;

    let _ = release.send(true);
    let written = tokio::time::timeout(Duration::from_secs(20), write)
        .await
        .expect("the write is answered")
        .expect("the writer task");
    let (appended, _) = written.expect("the write waiting meanwhile is acknowledged");
    assert_eq!(appended.base_offset, 0);
    assert_eq!(*h.log_end().borrow(), 1, "the log was not rebuilt again");
    assert_eq!(
        h.offsets(OffsetQuery::Latest)
            .await
            .expect("still leads")
            .map(|o| o.offset),
        Some(1)
    );
    drop(m);
    p.close_all().await;
    b.stop().await;
}
