//! The partition registry and tasks on the real disk log: logs open once,
//! off the shard, never after shutdown began or while their topic is being
//! deleted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;
use uuid::Uuid;

use super::*;
use crate::backend::disk::DiskLogFactory;
use crate::backend::{LogError, LogFactory, LogSettings, Marker, OpenedLog};
use crate::testing::{batch_of, scratch_dir};
use crate::topic_config::{log_settings, LogDefaults};

/// The real disk factory, with opens of chosen partitions held at a gate
/// until the test opens it, as a long recovery would hold them.
struct HeldOpens {
    inner: DiskLogFactory,
    hold: Vec<i32>,
    open: Mutex<bool>,
    released: Condvar,
    waiting: AtomicUsize,
    opened: AtomicUsize,
}

impl HeldOpens {
    fn new(dir: &std::path::Path, hold: Vec<i32>) -> Arc<Self> {
        Arc::new(HeldOpens {
            inner: DiskLogFactory::new(dir).expect("factory"),
            hold,
            open: Mutex::new(false),
            released: Condvar::new(),
            waiting: AtomicUsize::new(0),
            opened: AtomicUsize::new(0),
        })
    }

    fn release(&self) {
        *self.open.lock().expect("gate") = true;
        self.released.notify_all();
    }

    async fn until_waiting(&self, n: usize) {
        while self.waiting.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl LogFactory for HeldOpens {
    fn open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<OpenedLog, LogError> {
        if self.hold.contains(&partition) {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.lock().expect("gate");
            while !*open {
                open = self.released.wait(open).expect("gate");
            }
        }
        self.opened.fetch_add(1, Ordering::SeqCst);
        self.inner.open(topic, topic_id, partition, settings)
    }

    fn remove(&self, topic: &str, topic_id: Uuid, partition: i32) -> Result<(), LogError> {
        self.inner.remove(topic, topic_id, partition)
    }
}

pub(super) fn settings() -> LogSettings {
    log_settings(&Default::default(), &LogDefaults::default())
}

pub(super) fn partitions(factory: Arc<dyn LogFactory>) -> Arc<Partitions> {
    Arc::new(Partitions::new(vec![Handle::current()], factory))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_racing_for_a_partition_open_its_log_once() {
    let dir = scratch_dir();
    let f = HeldOpens::new(dir.path(), vec![0]);
    let p = partitions(f.clone());
    let id = Uuid::new_v4();
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let p = p.clone();
            tokio::spawn(async move { p.get_or_open("t", id, 0, settings).await })
        })
        .collect();
    f.until_waiting(1).await;
    f.release();
    for r in racers {
        r.await.expect("task").expect("opened");
    }
    assert_eq!(f.opened.load(Ordering::SeqCst), 1);
    assert_eq!(p.counters().opens.load(Ordering::Relaxed), 1);
}

/// Recovery of one partition (a CRC scan of a large unclean segment) used to
/// run under the registry's lock on the requesting shard, stalling every
/// other partition's requests broker-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_recovery_does_not_hold_up_other_partitions() {
    let dir = scratch_dir();
    let f = HeldOpens::new(dir.path(), vec![0]);
    let p = partitions(f.clone());
    let id = Uuid::new_v4();
    let slow = {
        let p = p.clone();
        tokio::spawn(async move { p.get_or_open("t", id, 0, settings).await })
    };
    f.until_waiting(1).await;
    let other = tokio::time::timeout(Duration::from_secs(30), p.get_or_open("t", id, 1, settings))
        .await
        .expect("partition 1 opens while partition 0 recovers")
        .expect("opened");
    let mut one = batch_of(&[b"x"]);
    other
        .append(std::mem::take(&mut one), 0, Acks::All)
        .await
        .expect("append");
    f.release();
    slow.await.expect("task").expect("opened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_opens_once_shutdown_began() {
    let dir = scratch_dir();
    let f = HeldOpens::new(dir.path(), vec![]);
    let p = partitions(f.clone());
    let id = Uuid::new_v4();
    let h = p.get_or_open("t", id, 0, settings).await.expect("open");
    h.append(batch_of(&[b"a"]), 0, Acks::All)
        .await
        .expect("append");
    p.close_all().await;
    let late = p.get_or_open("t", id, 0, settings).await;
    assert!(
        matches!(late, Err(LogError::NotServing(_))),
        "a request after shutdown began must not open a second log"
    );
    assert_eq!(f.opened.load(Ordering::SeqCst), 1);
    assert!(
        dir.path().join("t-0").join("clean-shutdown").exists(),
        "the one log closed cleanly"
    );
}

/// Shutdown that begins while a log is being recovered waits for it, and
/// the recovered log is closed rather than served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_racing_shutdown_closes_its_log_instead_of_serving_it() {
    let dir = scratch_dir();
    let f = HeldOpens::new(dir.path(), vec![0]);
    let p = partitions(f.clone());
    let id = Uuid::new_v4();
    let opening = {
        let p = p.clone();
        tokio::spawn(async move { p.get_or_open("t", id, 0, settings).await })
    };
    f.until_waiting(1).await;
    let closing = {
        let p = p.clone();
        tokio::spawn(async move { p.close_all().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!closing.is_finished(), "shutdown waits for the open");
    f.release();
    let got = opening.await.expect("task");
    assert!(matches!(got, Err(LogError::NotServing(_))));
    closing.await.expect("shutdown");
    assert!(dir.path().join("t-0").join("clean-shutdown").exists());
    assert!(p.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_a_topic_being_deleted_do_not_open() {
    let dir = scratch_dir();
    let f = HeldOpens::new(dir.path(), vec![]);
    let p = partitions(f.clone());
    let id = Uuid::new_v4();
    let h = p.get_or_open("t", id, 0, settings).await.expect("open");
    h.append(batch_of(&[b"a"]), 0, Acks::All)
        .await
        .expect("append");
    p.remove_topic("t", id, 1).await;
    assert!(!dir.path().join("t-0").exists(), "data removed");
    let late = p.get_or_open("t", id, 0, settings).await;
    assert!(matches!(late, Err(LogError::NotServing(_))));
    assert!(
        !dir.path().join("t-0").exists(),
        "no zombie log recreated the directory"
    );
    assert!(h.append(batch_of(&[b"b"]), 0, Acks::All).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_high_watermark_moves_only_when_it_changes() {
    let dir = scratch_dir();
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, settings)
        .await
        .expect("open");
    let mut hw = h.high_watermark();
    hw.borrow_and_update();
    h.append(batch_of(&[b"a"]), 0, Acks::All)
        .await
        .expect("append");
    assert!(hw.has_changed().expect("open"), "an append moves it");
    assert_eq!(*hw.borrow_and_update(), 1);
    let _ = h
        .read(0, 1024, true, Isolation::ReadUncommitted)
        .await
        .expect("read");
    let _ = h.bounds().await.expect("bounds");
    assert!(
        !hw.has_changed().expect("open"),
        "reads do not wake watchers"
    );
}

pub(super) fn durable() -> LogSettings {
    LogSettings {
        write_caching: false,
        ..settings()
    }
}

async fn read_values(h: &PartitionHandle) -> (usize, i64) {
    let r = h
        .read(0, 1 << 20, true, Isolation::ReadUncommitted)
        .await
        .expect("read");
    (r.records.len(), r.high_watermark)
}

/// Without write caching, an acks=all write is answered only after a
/// durability point covers it, and until then consumers see nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_write_caching_data_is_visible_and_acknowledged_only_once_fsynced() {
    let dir = scratch_dir();
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let gate = p.hold_syncs();
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, durable)
        .await
        .expect("open");
    let (leader_ack, _) = h
        .append(batch_of(&[b"a"]), 0, Acks::Leader)
        .await
        .expect("acks=1 is answered after the local append");
    assert_eq!(leader_ack.base_offset, 0);
    assert_eq!(
        read_values(&h).await,
        (0, 0),
        "nothing visible before the fsync"
    );
    let waiting = {
        let h = h.clone();
        tokio::spawn(async move { h.append(batch_of(&[b"b"]), 0, Acks::All).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "acks=all waits for the durability point"
    );
    assert_eq!(read_values(&h).await.1, 0);
    gate.release();
    let (all_ack, _) = waiting.await.expect("task").expect("acknowledged");
    assert_eq!(all_ack.base_offset, 1);
    let (bytes, hw) = read_values(&h).await;
    assert_eq!(hw, 2, "both records are durable and visible");
    assert!(bytes > 0);
    assert!(p.counters().syncs.load(Ordering::Relaxed) >= 1);
}

/// Group commit: requests that arrive while a durability point runs share
/// the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_waiting_for_a_durability_point_share_one_fdatasync() {
    let dir = scratch_dir();
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let gate = p.hold_syncs();
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, durable)
        .await
        .expect("open");
    let first = {
        let h = h.clone();
        tokio::spawn(async move { h.append(batch_of(&[b"first"]), 0, Acks::All).await })
    };
    // The first append's durability point starts at once and is held at
    // the gate; twenty more writes arrive meanwhile.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!first.is_finished());
    let rest: Vec<_> = (0..20)
        .map(|i| {
            let h = h.clone();
            tokio::spawn(async move {
                h.append(batch_of(&[format!("v{i}").as_bytes()]), 0, Acks::All)
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.release();
    first.await.expect("task").expect("first");
    for r in rest {
        r.await.expect("task").expect("acknowledged");
    }
    let syncs = p.counters().syncs.load(Ordering::Relaxed);
    assert!(syncs <= 3, "21 writes took {syncs} fdatasyncs");
    assert_eq!(h.bounds().await.expect("bounds").1, 21);
}

/// A durability point that fails answers its waiting writes with an error
/// (KAFKA_STORAGE_ERROR) and takes the log offline: nothing is acknowledged
/// as durable that may not be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_durability_point_fails_its_writes_and_takes_the_log_offline() {
    let dir = scratch_dir();
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, durable)
        .await
        .expect("open");
    let segment = dir.path().join("t-0").join("00000000000000000000.log");
    storage::testing::fail_next(storage::testing::DeviceOp::Fsync, &segment, 1);
    let failed = h.append(batch_of(&[b"lost"]), 0, Acks::All).await;
    // gateway::codes answers NotDurable with KAFKA_STORAGE_ERROR
    assert!(matches!(failed, Err(LogError::NotDurable(_))), "{failed:?}");
    assert_eq!(h.bounds().await.expect("bounds").1, 0, "never made visible");
    let after = h.append(batch_of(&[b"next"]), 0, Acks::All).await;
    assert!(after.is_err(), "the log is offline after a failed fsync");
    assert_eq!(
        p.counters().offline.load(Ordering::Relaxed),
        1,
        "counted once"
    );
}

/// Settings of a partition durable in object storage.
pub(super) fn object_store_durable() -> LogSettings {
    LogSettings {
        object_store_durable: true,
        ..settings()
    }
}

/// This node leading alone (the replicas of a topic durable in object
/// storage copy nothing).
pub(super) fn alone(epoch: i32) -> Leadership {
    let mut l = leadership(1, epoch);
    l.assignment.replicas = vec![1];
    l.assignment.isr = vec![1];
    l
}

pub(super) fn leadership(me: u64, epoch: i32) -> Leadership {
    let (isr_requests, _) = tokio::sync::mpsc::unbounded_channel();
    Leadership {
        me,
        assignment: crate::partition::replication::replica_set::Assignment {
            leader_epoch: epoch,
            partition_epoch: epoch,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
        },
        min_insync: 1,
        lag_max_ms: 10_000,
        ineligible: Vec::new(),
        isr_requests,
    }
}

/// A partition opened in a cluster, before its replica manager assigned
/// this node a role.
async fn unassigned(dir: &tempfile::TempDir) -> (Arc<Partitions>, PartitionHandle) {
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let (opened, _) = tokio::sync::mpsc::unbounded_channel();
    p.join_cluster(opened);
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, settings)
        .await
        .expect("open");
    (p, h)
}

/// The metastore said this node leads before its replica manager applied
/// it: the first writes wait for the leadership and are written in the
/// order they came. (Refusing the first while accepting the next would
/// lose an idempotent producer's first batch for good.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_arrive_before_the_leadership_is_applied_wait_for_it_in_order() {
    let dir = scratch_dir();
    let (_p, h) = unassigned(&dir).await;
    // each write is polled once, which hands its command to the partition
    // task before the next is made: the order they arrive in is fixed
    let first = h.append(batch_of(&[b"first"]), 0, Acks::Leader);
    let second = h.append(batch_of(&[b"second"]), 0, Acks::Leader);
    tokio::pin!(first, second);
    assert!(
        futures::poll!(first.as_mut()).is_pending(),
        "the first waits"
    );
    assert!(
        futures::poll!(second.as_mut()).is_pending(),
        "the second waits"
    );
    // the task serves commands in order: a position answer means both were
    // taken, and neither was answered
    h.position().await.expect("position");
    assert!(
        futures::poll!(first.as_mut()).is_pending(),
        "the first waits"
    );
    h.lead(leadership(1, 0)).await.expect("lead");
    let (first, second) = tokio::join!(first, second);
    let first = first.expect("first written");
    let second = second.expect("second written");
    assert_eq!((first.0.base_offset, second.0.base_offset), (0, 1));
}

/// The leadership went elsewhere: the waiting write is refused as from
/// any follower, and nothing was written here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_write_is_refused_when_this_node_is_told_to_follow() {
    let dir = scratch_dir();
    let (_p, h) = unassigned(&dir).await;
    let write = h.append(batch_of(&[b"x"]), 3, Acks::Leader);
    tokio::pin!(write);
    assert!(
        futures::poll!(write.as_mut()).is_pending(),
        "the write waits"
    );
    h.follow(2, 3).await.expect("follow");
    let refused = write.await;
    assert!(
        matches!(refused, Err(LogError::NotServing(_))),
        "{refused:?}"
    );
    assert_eq!(h.position().await.expect("position").log_end, 0);
}

/// A leadership that never comes: the write is refused after the wait,
/// not held for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waits_for_a_leadership_only_so_long() {
    let dir = scratch_dir();
    let (_p, h) = unassigned(&dir).await;
    let refused = h.append(batch_of(&[b"x"]), 0, Acks::Leader).await;
    assert!(
        matches!(refused, Err(LogError::NotServing(_))),
        "{refused:?}"
    );
}

/// A batch of `values` from transactional producer `pid` (epoch 0,
/// sequences from `seq`).
fn txn_batch_of(values: &[&[u8]], pid: i64, seq: i32) -> bytes::BytesMut {
    let mut b = bytes::BytesMut::from(
        &crate::testing::record_batch(
            values,
            false,
            Some((pid, 0, seq)),
            kafka_protocol::records::Compression::None,
        )[..],
    );
    let attrs = i16::from_be_bytes([b[21], b[22]]) | 0x10;
    b[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// read_committed reads stop at the first offset of the oldest open
/// transaction, and once it ends with an abort they name it so the
/// consumer can drop its records; read_uncommitted reads see everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_stops_at_an_open_transaction_and_names_aborted_ones() {
    let dir = scratch_dir();
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, settings)
        .await
        .expect("open");
    h.append(batch_of(&[b"plain"]), 0, Acks::All)
        .await
        .expect("append");
    h.append(txn_batch_of(&[b"t1", b"t2"], 9, 0), 0, Acks::All)
        .await
        .expect("append");
    let committed = h
        .read(0, 1 << 20, true, Isolation::ReadCommitted)
        .await
        .expect("read");
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (3, 1)
    );
    let plain_only = committed.records.len();
    let uncommitted = h
        .read(0, 1 << 20, true, Isolation::ReadUncommitted)
        .await
        .expect("read");
    assert!(
        uncommitted.records.len() > plain_only,
        "read_uncommitted sees the open transaction"
    );
    assert!(
        h.read(1, 1 << 20, true, Isolation::ReadCommitted)
            .await
            .expect("read")
            .records
            .is_empty(),
        "nothing past the last stable offset"
    );
    assert_eq!(h.last_stable().await.expect("lso"), 1);

    let at = h
        .write_marker(
            Marker {
                producer_id: 9,
                producer_epoch: 0,
                control: storage::ControlType::Abort,
                coordinator_epoch: 0,
            },
            0,
        )
        .await
        .expect("marker");
    assert_eq!(at, 3);
    let after = h
        .read(0, 1 << 20, true, Isolation::ReadCommitted)
        .await
        .expect("read");
    assert_eq!((after.high_watermark, after.last_stable_offset), (4, 4));
    assert_eq!(
        after.aborted,
        vec![storage::AbortedTxn {
            producer_id: 9,
            first_offset: 1,
            last_offset: 3
        }]
    );
    let uncommitted = h
        .read(0, 1 << 20, true, Isolation::ReadUncommitted)
        .await
        .expect("read");
    assert!(
        uncommitted.aborted.is_empty(),
        "only read_committed reads name them"
    );
}

/// KIP-890's guard: a transactional write verified before a marker for its
/// producer was written here is refused (it would open a transaction no
/// coordinator ends, and hold the last stable offset back for good); one
/// verified after the marker is written, as is another producer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_write_verified_before_its_producers_marker_is_refused() {
    use crate::partition::TxnGuard;
    let dir = scratch_dir();
    let p = partitions(Arc::new(DiskLogFactory::new(dir.path()).expect("factory")));
    let h = p
        .get_or_open("t", Uuid::new_v4(), 0, settings)
        .await
        .expect("open");
    let guard = |producer_id| TxnGuard {
        producer_id,
        verified_at: std::time::Instant::now(),
    };
    h.append_checked(
        txn_batch_of(&[b"t1"], 9, 0),
        0,
        Acks::All,
        None,
        Some(guard(9)),
    )
    .await
    .expect("a write verified in its transaction");
    let late = guard(9);
    let other = guard(10);
    h.write_marker(
        Marker {
            producer_id: 9,
            producer_epoch: 0,
            control: storage::ControlType::Abort,
            coordinator_epoch: 0,
        },
        0,
    )
    .await
    .expect("marker");
    let refused = h
        .append_checked(
            txn_batch_of(&[b"late"], 9, 1),
            0,
            Acks::All,
            None,
            Some(late),
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(LogError::Storage(storage::StorageError::InvalidTxnState {
                producer_id: 9,
                ..
            }))
        ),
        "{refused:?}"
    );
    assert_eq!(
        h.last_stable().await.expect("lso"),
        2,
        "nothing opened a transaction after the marker"
    );
    h.append_checked(
        txn_batch_of(&[b"o"], 10, 0),
        0,
        Acks::All,
        None,
        Some(other),
    )
    .await
    .expect("another producer's write is not its business");
    h.append_checked(
        txn_batch_of(&[b"next"], 9, 1),
        0,
        Acks::All,
        None,
        Some(guard(9)),
    )
    .await
    .expect("the producer's next transaction, verified after the marker");
}
