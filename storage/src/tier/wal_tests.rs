use std::sync::Mutex;

use cache::fault::{Fault, FaultInjectingStore, FaultRule, Op};
use cache::object_store::memory::InMemory;
use cache::object_store::ObjectStore;
use tokio::sync::oneshot;

use super::*;

/// Records what it is asked, refusing the partitions named in `refuse`
/// and failing the first `fail_first` calls.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<Vec<WalRecord>>>,
    refuse: Mutex<Vec<PartitionKey>>,
    fail_first: AtomicU64,
}

#[async_trait]
impl WalIndex for Recorder {
    async fn record(
        &self,
        ranges: Vec<WalRecord>,
    ) -> Result<Vec<Result<(), String>>, ManifestError> {
        if self
            .fail_first
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(ManifestError {
                operation: "record",
                reason: "no metastore leader".into(),
                retriable: true,
            });
        }
        let refuse = self.refuse.lock().map(|r| r.clone()).unwrap_or_default();
        let answers = ranges
            .iter()
            .map(|r| {
                if refuse.contains(&r.partition) {
                    Err("fenced".to_owned())
                } else {
                    Ok(())
                }
            })
            .collect();
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(ranges);
        }
        Ok(answers)
    }
}

fn piece(partition: PartitionKey, base: i64, last: i64, fill: u8, len: usize) -> WalPiece {
    WalPiece {
        partition,
        leader_epoch: 3,
        base_offset: base,
        last_offset: last,
        records: Bytes::from(vec![fill; len]),
    }
}

fn submit(w: &WalWriter, p: WalPiece) -> oneshot::Receiver<Result<(), WalError>> {
    let (tx, rx) = oneshot::channel();
    w.submit(
        p,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    )
    .expect("taken");
    rx
}

fn config() -> WalConfig {
    WalConfig {
        linger: Duration::from_millis(20),
        ..WalConfig::default()
    }
}

#[test]
fn consecutive_pieces_of_a_partition_make_one_range() {
    let a = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let b = PartitionKey::new(uuid::Uuid::new_v4(), 1);
    let pieces = [
        piece(a, 0, 4, 1, 10),
        piece(b, 7, 7, 2, 5),
        piece(a, 5, 9, 3, 20),
        piece(a, 12, 12, 4, 1),
    ];
    let (ranges, of_piece) = ranges("k", &pieces);
    let spans: Vec<_> = ranges
        .iter()
        .map(|r| (r.partition, r.base_offset, r.last_offset, r.offset, r.len))
        .collect();
    // a's second piece follows its first in offsets but not in bytes (b's
    // piece lies between): its own range; its third skips offsets: another
    assert_eq!(
        spans,
        [
            (a, 0, 4, 0, 10),
            (b, 7, 7, 10, 5),
            (a, 5, 9, 15, 20),
            (a, 12, 12, 35, 1)
        ]
    );
    assert_eq!(of_piece, [0, 1, 2, 3]);
    let joined = [piece(a, 0, 4, 1, 10), piece(a, 5, 9, 3, 20)];
    let (ranges, of_piece) = super::ranges("k", &joined);
    assert_eq!(ranges.len(), 1);
    assert_eq!(
        (ranges[0].base_offset, ranges[0].last_offset, ranges[0].len),
        (0, 9, 30)
    );
    assert_eq!(of_piece, [0, 0]);
}

#[tokio::test]
async fn pieces_of_many_partitions_go_up_in_one_object_and_read_back_from_their_ranges() {
    let store = ObjectStoreHandle::in_memory();
    let index = Arc::new(Recorder::default());
    let w = WalWriter::start(store.clone(), index.clone(), config());
    let keys: Vec<_> = (0..5)
        .map(|i| PartitionKey::new(uuid::Uuid::new_v4(), i))
        .collect();
    let waits: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| submit(&w, piece(*k, 0, 9, i as u8 + 1, 100 + i)))
        .collect();
    for rx in waits {
        rx.await.expect("answered").expect("durable");
    }
    let calls = index.calls.lock().expect("calls").clone();
    assert_eq!(calls.len(), 1, "one metastore write for the object");
    let ranges = &calls[0];
    assert_eq!(ranges.len(), 5);
    let objects: Vec<_> = ranges.iter().map(|r| r.key.clone()).collect();
    assert!(objects.iter().all(|k| *k == objects[0]), "one object");
    assert!(objects[0].starts_with("packs/") && objects[0].ends_with(".wal"));
    for (i, r) in ranges.iter().enumerate() {
        let got = store
            .store
            .get_range(&Path::from(r.key.as_str()), r.offset..r.offset + r.len)
            .await
            .expect("range");
        assert_eq!(got.len(), 100 + i);
        assert!(
            got.iter().all(|b| *b == i as u8 + 1),
            "piece {i} reads back"
        );
    }
    assert_eq!(w.counters().objects.load(Ordering::Relaxed), 1);
    assert_eq!(w.counters().backlog_bytes.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_failing_store_and_metastore_delay_the_answer_and_lose_nothing() {
    let faulty = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let faults = faulty.controller();
    faults.inject(FaultRule::new(Fault::Status(503)).on(&[Op::Put]).times(2));
    let store = ObjectStoreHandle::in_memory().with_store(Arc::new(faulty));
    let index = Arc::new(Recorder {
        fail_first: AtomicU64::new(2),
        ..Recorder::default()
    });
    let w = WalWriter::start(store.clone(), index.clone(), config());
    let k = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let first = submit(&w, piece(k, 0, 0, 1, 10));
    first
        .await
        .expect("answered")
        .expect("durable after retries");
    let second = submit(&w, piece(k, 1, 1, 2, 10));
    second.await.expect("answered").expect("durable");
    assert_eq!(w.counters().put_failures.load(Ordering::Relaxed), 2);
    assert_eq!(w.counters().record_failures.load(Ordering::Relaxed), 2);
    let calls = index.calls.lock().expect("calls").clone();
    let recorded: Vec<_> = calls
        .iter()
        .flatten()
        .map(|r| (r.base_offset, r.last_offset))
        .collect();
    assert_eq!(recorded, [(0, 0), (1, 1)], "in order, each once");
    let listed: Vec<_> = futures::StreamExt::collect::<Vec<_>>(store.store.list(None)).await;
    assert_eq!(listed.len(), 2, "each object went up once it could");
}

#[tokio::test]
async fn a_refused_partition_hears_why_and_the_others_are_durable() {
    let store = ObjectStoreHandle::in_memory();
    let index = Arc::new(Recorder::default());
    let deposed = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let fine = PartitionKey::new(uuid::Uuid::new_v4(), 1);
    if let Ok(mut r) = index.refuse.lock() {
        r.push(deposed);
    }
    let w = WalWriter::start(store, index, config());
    let a = submit(&w, piece(deposed, 0, 0, 1, 10));
    let b = submit(&w, piece(fine, 0, 0, 2, 10));
    assert_eq!(
        a.await.expect("answered"),
        Err(WalError::Refused("fenced".into()))
    );
    b.await.expect("answered").expect("durable");
    assert_eq!(w.counters().refused.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_full_backlog_refuses_new_pieces_at_once() {
    let faulty = FaultInjectingStore::new(Arc::new(InMemory::new()));
    faulty.controller().inject(
        FaultRule::new(Fault::Status(503))
            .on(&[Op::Put])
            .times(1_000),
    );
    let store = ObjectStoreHandle::in_memory().with_store(Arc::new(faulty));
    let w = WalWriter::start(
        store,
        Arc::new(Recorder::default()),
        WalConfig {
            max_backlog_bytes: 100,
            ..config()
        },
    );
    let k = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let _waiting = submit(&w, piece(k, 0, 0, 1, 80));
    let refused = w.submit(piece(k, 1, 1, 1, 80), Box::new(|_| {}));
    assert_eq!(refused.err(), Some(WalError::Backlog(80)));
}

#[tokio::test]
async fn an_object_that_goes_up_first_is_recorded_only_after_the_ones_gathered_before_it() {
    let faulty = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let faults = faulty.controller();
    faults.inject(FaultRule::new(Fault::Hang).on(&[Op::Put]).times(1));
    let store = ObjectStoreHandle::in_memory().with_store(Arc::new(faulty));
    let index = Arc::new(Recorder::default());
    let w = WalWriter::start(store, index.clone(), config());
    let k = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let mut first = submit(&w, piece(k, 0, 0, 1, 10));
    // the first object's PUT hangs; the second is gathered after its linger
    tokio::time::sleep(Duration::from_millis(60)).await;
    let mut second = submit(&w, piece(k, 1, 1, 2, 10));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        first.try_recv().is_err() && second.try_recv().is_err(),
        "nothing answered while the first object is not up"
    );
    assert!(
        index.calls.lock().expect("calls").is_empty(),
        "nothing recorded out of order"
    );
    faults.release_hung();
    first.await.expect("answered").expect("durable");
    second.await.expect("answered").expect("durable");
    let recorded: Vec<_> = index
        .calls
        .lock()
        .expect("calls")
        .iter()
        .flatten()
        .map(|r| r.base_offset)
        .collect();
    assert_eq!(recorded, [0, 1], "in the order the objects were gathered");
}
