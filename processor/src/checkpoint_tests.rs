use std::collections::BTreeMap;
use std::time::Instant;

use super::*;
use crate::decode::Columns;
use crate::delta::MAX_DELTAS;
use crate::pipeline::Pipeline;
use crate::state::StateStore;
use crate::upload::{self, Job, Ledger, Target};
use crate::window::{WindowAcc, WindowId, WindowRow, Windows, WindowsSnapshot};
use arrow_array::{Float64Array, Int64Array, StringArray};
use cache::fault::{Fault, FaultInjectingStore, FaultRule, Op};
use object_store::memory::InMemory;

const PREFIX: &str = "out/counts";

fn store() -> CheckpointStore {
    CheckpointStore::new(Arc::new(InMemory::new()), Path::from(PREFIX), "memory://")
}

fn pipeline(window: &str) -> Pipeline {
    Pipeline::parse(&format!(
        r#"
name: counts
source: {{bootstrap: "b:9092", topic: events, format: json, event_time: ts, key: k}}
window: {window}
aggregates: [{{op: count, as: n}}, {{op: sum, field: x, as: s}}]
sink: {{type: parquet, url: "file:///tmp/x"}}
"#
    ))
    .unwrap()
}

/// Records of (key, event time), each with x = 1.5.
fn cols(rows: &[(&str, i64)]) -> Columns {
    Columns {
        keys: StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        event_times: Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        offsets: Int64Array::from((0..rows.len() as i64).collect::<Vec<_>>()),
        values: vec![Float64Array::from(vec![Some(1.5); rows.len()])],
        hashes: Vec::new(),
        filtered_by: Vec::new(),
        max_event_time: rows.iter().map(|r| r.1).max(),
    }
}

fn row(key: &str, start: i64, count: i64) -> WindowRow {
    WindowRow {
        key: key.into(),
        start,
        end: start + 1000,
        acc: WindowAcc {
            count,
            fields: Vec::new(),
            weighted: Vec::new(),
            distinct: Vec::new(),
            quantiles: Vec::new(),
        },
    }
}

/// A whole checkpoint, as written before checkpoints were incremental.
fn whole(epoch: u64, files: &[&str]) -> Checkpoint {
    Checkpoint {
        pipeline: "counts".into(),
        topic: "events".into(),
        epoch,
        offsets: BTreeMap::from([(0, 10 * epoch as i64), (1, 7)]),
        windows: WindowsSnapshot {
            watermark: Some(1000),
            max_event_time: BTreeMap::from([(0, 1500)]),
            open: vec![row("a", 1000, 3)],
        },
        files: files.iter().map(|f| f.to_string()).collect(),
        late_files: Vec::new(),
    }
}

async fn put_whole(s: &CheckpointStore, c: &Checkpoint) {
    let path = s.checkpoint_path(c.epoch, Kind::Delta);
    let bytes = serde_json::to_vec(c).unwrap();
    s.store.put(&path, Bytes::from(bytes).into()).await.unwrap();
}

/// A processor's loop without a broker: windows, the ledger, and
/// checkpoints uploaded to `store` (awaited in place).
struct Loop {
    pipeline: Pipeline,
    windows: Windows,
    ledger: Ledger,
    pending: Vec<WindowRow>,
    target: Target,
    offset: i64,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn new(store: CheckpointStore, window: &str) -> Loop {
        let pipeline = pipeline(window);
        let dir = tempfile::tempdir().unwrap();
        let state = StateStore::open(dir.path()).unwrap();
        Loop {
            windows: Windows::new(&pipeline, &[0], Instant::now()),
            ledger: Ledger::default(),
            pending: Vec::new(),
            target: Target {
                store,
                state: Arc::new(state),
                pipeline: Arc::new(pipeline.clone()),
            },
            pipeline,
            offset: 0,
            _dir: dir,
        }
    }

    fn add(&mut self, rows: &[(&str, i64)]) {
        self.windows.add(0, &cols(rows), Instant::now());
        self.offset += rows.len() as i64;
        let closed = self.windows.advance(Instant::now());
        self.pending.extend(closed);
    }

    fn job(&mut self) -> Job {
        self.ledger
            .job(
                &self.pipeline,
                &mut self.windows,
                BTreeMap::from([(0, self.offset)]),
                &mut self.pending,
                &mut Vec::new(),
            )
            .unwrap()
            .expect("something changed")
    }

    /// Takes a checkpoint; whether it committed.
    async fn checkpoint(&mut self) -> bool {
        let job = self.job();
        self.run(job).await
    }

    /// Uploads `job`; whether it committed.
    async fn run(&mut self, job: Job) -> bool {
        let outcome = upload::upload(self.target.clone(), job, None).await;
        match outcome.result {
            Ok(chain) => {
                self.ledger.committed(outcome.job, chain);
                true
            }
            Err(_) => {
                self.ledger.failed(
                    outcome.job,
                    &mut self.windows,
                    &mut self.pending,
                    &mut Vec::new(),
                );
                false
            }
        }
    }

    /// The open windows as a restore from `checkpoint` makes them.
    fn restored_windows(&self, checkpoint: &Checkpoint) -> WindowsSnapshot {
        let mut w = Windows::new(&self.pipeline, &[0], Instant::now());
        w.restore(&checkpoint.windows);
        w.snapshot()
    }
}

#[test]
fn a_delta_reads_back_as_written_and_an_old_whole_checkpoint_as_whole() {
    let delta = Delta {
        pipeline: "counts".into(),
        topic: "events".into(),
        epoch: 7,
        base: 5,
        offsets: BTreeMap::from([(0, 70), (1, 12)]),
        watermark: Some(4000),
        max_event_time: BTreeMap::from([(0, 4100), (1, 4050)]),
        changed: vec![row("a", 4000, 2), row("b", 5000, 1)],
        removed: vec![WindowId {
            key: "a".into(),
            start: 3000,
        }],
        files: vec![data_file(7)],
        late_files: vec![late_file(7)],
    };
    let bytes = serde_json::to_vec(&delta).unwrap();
    assert_eq!(Stored::parse(&bytes).unwrap(), Stored::Delta(delta));
    let old = whole(3, &["part-1"]);
    let bytes = serde_json::to_vec(&old).unwrap();
    assert_eq!(Stored::parse(&bytes).unwrap(), Stored::Whole(old));
}

#[tokio::test]
async fn base_and_deltas_restore_the_windows_held_in_memory() {
    for window in [
        "{type: tumbling, size: 1s}",
        "{type: sliding, size: 3s, slide: 1s}",
        "{type: session, gap: 1s}",
    ] {
        let mut l = Loop::new(store(), window);
        for step in 0..6i64 {
            let t = step * 700;
            l.add(&[("a", t), ("b", t + 100), (&format!("k{step}"), t + 200)]);
            assert!(l.checkpoint().await, "{window}: checkpoint {step}");
            let r = l.target.store.latest().await.unwrap().unwrap();
            assert_eq!(r.checkpoint.epoch, step as u64 + 1);
            assert_eq!(
                l.restored_windows(&r.checkpoint),
                l.windows.snapshot(),
                "{window}: after checkpoint {step}"
            );
            assert_eq!(r.checkpoint.offsets, BTreeMap::from([(0, 3 * (step + 1))]));
            assert_eq!(r.checkpoint.files, l.ledger.files, "{window}");
            assert_eq!(r.chain, l.ledger.chain, "{window}");
        }
        assert!(
            l.ledger.files.len() > 1,
            "{window}: windows closed along the way"
        );
    }
}

#[tokio::test]
async fn deltas_are_compacted_into_a_new_base_and_the_old_chains_deleted() {
    let mut l = Loop::new(store(), "{type: tumbling, size: 1s}");
    // many keys in one long-open window make a large base, so the small
    // deltas that follow reach MAX_DELTAS before outweighing it
    let keys: Vec<String> = (0..200).map(|k| format!("key{k}")).collect();
    let first: Vec<(&str, i64)> = keys.iter().map(|k| (k.as_str(), 1_000_000)).collect();
    l.add(&first);
    assert!(l.checkpoint().await);
    // a base at 1, then one every MAX_DELTAS + 1 epochs; two deltas after
    // the third
    let total = 2 * (MAX_DELTAS + 1) + 3;
    for step in 1..total {
        l.add(&[("key1", 1_000_000 + step as i64)]);
        assert!(l.checkpoint().await);
    }
    let epoch = total;
    let chain = l.ledger.chain.unwrap();
    assert_eq!(chain.base, 2 * (MAX_DELTAS + 1) + 1, "{chain:?}");
    assert_eq!(chain.deltas, 2);
    let objects = l.target.store.all().await;
    let path = |e: u64, suffix: &str| format!("{PREFIX}/_checkpoints/{e:020}{suffix}");
    let previous = MAX_DELTAS + 2;
    let mut expected = vec![path(previous, BASE_SUFFIX)];
    for e in previous..=epoch {
        if e == chain.base {
            expected.push(path(e, BASE_SUFFIX));
        }
        expected.push(path(e, DELTA_SUFFIX));
    }
    expected.sort();
    assert_eq!(
        objects, expected,
        "the first base's chain went once the third base committed; the second's stays"
    );
    let r = l.target.store.latest().await.unwrap().unwrap();
    assert_eq!(l.restored_windows(&r.checkpoint), l.windows.snapshot());
    // the checkpoint before the latest base (a topic sink may resume
    // from it) restores from the previous chain
    let before = l.target.store.head(chain.base - 1).await.unwrap();
    let r = l.target.store.restore(&before).await.unwrap();
    assert_eq!(r.chain.map(|c| c.base), Some(previous));
    assert_eq!(r.checkpoint.epoch, chain.base - 1);
}

#[tokio::test]
async fn a_failed_upload_is_retried_with_everything_since_the_last_commit() {
    let faulty = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let faults = faulty.controller();
    let s = CheckpointStore::new(Arc::new(faulty), Path::from(PREFIX), "memory://");
    let mut l = Loop::new(s, "{type: tumbling, size: 1s}");
    l.add(&[("a", 100), ("b", 200)]);
    assert!(l.checkpoint().await);
    // windows a@0 closes into epoch 2's data file; c opens; the delta's PUT fails
    l.add(&[("a", 1100), ("c", 1200)]);
    faults.inject(
        FaultRule::new(Fault::Status(503))
            .on(&[Op::Put])
            .on_paths_containing("_checkpoints")
            .times(1),
    );
    assert!(!l.checkpoint().await);
    assert_eq!(l.ledger.epoch, 1);
    assert_eq!(l.pending.len(), 2, "the closed windows came back");
    // then more changes; the retry, under epoch 2, holds both steps
    l.add(&[("d", 1300)]);
    let job = l.job();
    assert_eq!(job.epoch, 2);
    let d = job.delta.clone();
    let mut changed: Vec<(&str, i64)> = d
        .changed
        .iter()
        .map(|w| (w.key.as_str(), w.start))
        .collect();
    changed.sort();
    assert_eq!(changed, [("a", 1000), ("c", 1000), ("d", 1000)]);
    let mut removed: Vec<(&str, i64)> = d
        .removed
        .iter()
        .map(|w| (w.key.as_str(), w.start))
        .collect();
    removed.sort();
    assert_eq!(removed, [("a", 0), ("b", 0)]);
    assert_eq!(d.files, [data_file(2)]);
    assert_eq!(
        job.rows.len(),
        2,
        "the windows closed in the failed attempt"
    );
    assert!(l.run(job).await);
    assert_eq!(l.ledger.epoch, 2);
    let r = l.target.store.latest().await.unwrap().unwrap();
    assert_eq!(l.restored_windows(&r.checkpoint), l.windows.snapshot());
    assert_eq!(r.checkpoint.offsets, BTreeMap::from([(0, 5)]));
}

#[tokio::test]
async fn a_large_base_goes_up_in_parts() {
    let faulty = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let faults = faulty.controller();
    let s = CheckpointStore::new(Arc::new(faulty), Path::from(PREFIX), "memory://");
    let big = Bytes::from(vec![b' '; MULTIPART_ABOVE + 1]);
    let delta = Bytes::from_static(b"{}");
    s.commit(1, delta, Some(big)).await.unwrap();
    assert_eq!(faults.calls(Op::CreateMultipart), 1);
    assert_eq!(faults.calls(Op::Put), 1, "the delta in one PUT");
}

#[tokio::test]
async fn an_old_whole_checkpoint_restores_and_the_next_one_writes_a_base() {
    let s = store();
    put_whole(&s, &whole(4, &["part-1"])).await;
    let r = s.latest().await.unwrap().unwrap();
    assert_eq!(r.checkpoint, whole(4, &["part-1"]));
    assert_eq!(r.chain, None);
    let mut l = Loop::new(s.clone(), "{type: tumbling, size: 1s}");
    l.windows.restore(&r.checkpoint.windows);
    l.ledger = Ledger::restored(&r.checkpoint, r.chain);
    l.add(&[("a", 1500)]);
    assert!(l.checkpoint().await);
    assert_eq!(l.ledger.chain.map(|c| c.base), Some(5));
    let r = s.latest().await.unwrap().unwrap();
    assert_eq!(r.checkpoint.files, ["part-1"]);
    assert_eq!(l.restored_windows(&r.checkpoint), l.windows.snapshot());
}

#[tokio::test]
async fn uncommitted_checkpoints_and_data_files_are_removed() {
    let mut l = Loop::new(store(), "{type: tumbling, size: 1s}");
    l.add(&[("a", 100)]);
    assert!(l.checkpoint().await);
    l.add(&[("a", 1100)]);
    assert!(l.checkpoint().await);
    let s = l.target.store.clone();
    // a processor that died after its data file and base, before its delta
    s.put_data(&data_file(3), b"three".to_vec()).await.unwrap();
    s.put(&s.checkpoint_path(3, Kind::Base), Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert_eq!(s.epochs().await.unwrap(), [1, 2]);
    assert_eq!(s.remove_after(Some(2)).await.unwrap(), [3]);
    let latest = s.latest().await.unwrap().unwrap().checkpoint;
    assert_eq!(latest.files, [data_file(2)]);
    let removed = s.remove_uncommitted(&latest.files).await.unwrap();
    assert_eq!(removed, [data_file(3)]);
    let path = |e: u64, suffix: &str| format!("{PREFIX}/_checkpoints/{e:020}{suffix}");
    let mut expected = vec![path(1, BASE_SUFFIX), path(1, DELTA_SUFFIX)];
    // epoch 2 wrote a base too when its delta outweighed epoch 1's
    if l.ledger.chain.map(|c| c.base) == Some(2) {
        expected.push(path(2, BASE_SUFFIX));
    }
    expected.push(path(2, DELTA_SUFFIX));
    expected.push(format!("{PREFIX}/{}", data_file(2)));
    assert_eq!(s.all().await, expected);
}

#[tokio::test]
async fn a_file_url_works_and_an_empty_folder_has_no_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/counts", dir.path().display());
    let s = CheckpointStore::open(&url).unwrap();
    assert_eq!(s.latest().await.unwrap(), None);
    assert!(s.remove_uncommitted(&[]).await.unwrap().is_empty());
    s.put_data(&late_file(1), b"x".to_vec()).await.unwrap();
    put_whole(&s, &whole(1, &[])).await;
    assert_eq!(s.latest().await.unwrap().unwrap().checkpoint.epoch, 1);
    assert!(dir.path().join("counts").join(late_file(1)).exists());
    assert_eq!(
        s.remove_uncommitted(&[]).await.unwrap(),
        [late_file(1)],
        "late files no checkpoint lists go too"
    );
}

#[tokio::test]
async fn a_restart_uses_the_local_store_only_when_it_holds_the_latest_checkpoint() {
    let counting = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let calls = counting.controller();
    let s = CheckpointStore::new(Arc::new(counting), Path::from(PREFIX), "memory://");
    let mut l = Loop::new(s.clone(), "{type: tumbling, size: 1s}");
    for t in [100, 600, 1100] {
        l.add(&[("a", t), ("b", t + 50)]);
        assert!(l.checkpoint().await);
    }
    let pipeline = l.pipeline.clone();
    let restart = |state: Arc<StateStore>| {
        let (s, pipeline, calls) = (s.clone(), pipeline.clone(), calls.clone());
        async move {
            let epoch = s.epochs().await.unwrap().last().copied();
            let head = s.head(epoch.unwrap()).await.unwrap();
            calls.reset_counts();
            let (r, local) = crate::state::restore(&s, &state, Some(&head), &pipeline)
                .await
                .unwrap();
            (r.unwrap(), local, calls.calls(Op::Get))
        }
    };
    let truth = s.latest().await.unwrap().unwrap();
    // the same host: the store the loop wrote holds epoch 3
    let (r, local, gets) = restart(l.target.state.clone()).await;
    assert_eq!((r.clone(), local, gets), (truth.clone(), true, 0));
    // another host: nothing local, so base and deltas are downloaded and
    // the store rebuilt from them
    let dir = tempfile::tempdir().unwrap();
    let other = Arc::new(StateStore::open(dir.path()).unwrap());
    let (r, local, gets) = restart(other.clone()).await;
    assert_eq!((r, local), (truth.clone(), false));
    assert!(gets >= 1);
    let (r, local, _) = restart(other.clone()).await;
    assert_eq!((r, local), (truth, true), "rebuilt");
    // object storage moves ahead of the first store (another host took a
    // checkpoint): it is not trusted any more
    let mut ahead = Loop::new(s.clone(), "{type: tumbling, size: 1s}");
    ahead.windows.restore(&l.windows.snapshot());
    ahead.ledger = l.ledger.clone();
    ahead.add(&[("c", 1700)]);
    assert!(ahead.checkpoint().await);
    let (r, local, _) = restart(l.target.state.clone()).await;
    assert!(!local);
    assert_eq!(r.checkpoint.epoch, 4);
    assert_eq!(
        ahead.restored_windows(&r.checkpoint),
        ahead.windows.snapshot()
    );
}

#[tokio::test]
async fn a_window_opened_and_closed_between_two_commits_is_not_a_deletion() {
    let faulty = FaultInjectingStore::new(Arc::new(InMemory::new()));
    let faults = faulty.controller();
    let s = CheckpointStore::new(Arc::new(faulty), Path::from(PREFIX), "memory://");
    let mut l = Loop::new(s, "{type: tumbling, size: 1s}");
    l.add(&[("a", 100)]);
    assert!(l.checkpoint().await);
    // a@0 (committed) closes; a@1000 and b@1000 open, in an attempt that fails
    l.add(&[("b", 1100), ("a", 1200)]);
    faults.inject(
        FaultRule::new(Fault::Status(503))
            .on(&[Op::Put])
            .on_paths_containing("_checkpoints")
            .times(1),
    );
    assert!(!l.checkpoint().await);
    // they close before the retry, c@1000 opens and closes too
    l.add(&[("c", 1300), ("x", 2500)]);
    let job = l.job();
    let ids = |rows: &[WindowId]| -> Vec<(String, i64)> {
        let mut v: Vec<_> = rows.iter().map(|w| (w.key.clone(), w.start)).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&job.delta.removed), [("a".to_owned(), 0)]);
    let changed: Vec<(&str, i64)> = job
        .delta
        .changed
        .iter()
        .map(|w| (w.key.as_str(), w.start))
        .collect();
    assert_eq!(changed, [("x", 2000)]);
    assert_eq!(job.rows.len(), 4, "a@0, then a, b and c at 1000");
    assert!(l.run(job).await);
    let r = l.target.store.latest().await.unwrap().unwrap();
    assert_eq!(l.restored_windows(&r.checkpoint), l.windows.snapshot());
}

/// With `sink.partition_by` data files sit in `dt=` folders: the ones no
/// checkpoint lists go at start, in any folder, the committed ones stay.
#[tokio::test]
async fn uncommitted_files_in_partition_folders_are_removed_too() {
    let s = store();
    let committed = format!("dt=2026-12-07/hour=09/{}", data_file(1));
    let uncommitted = [
        format!("dt=2026-12-07/hour=10/{}", data_file(2)),
        format!("dt=2026-12-08/hour=00/{}", data_file(2)),
    ];
    s.put_data(&committed, b"one".to_vec()).await.unwrap();
    for name in &uncommitted {
        s.put_data(name, b"two".to_vec()).await.unwrap();
    }
    let mut removed = s
        .remove_uncommitted(std::slice::from_ref(&committed))
        .await
        .unwrap();
    removed.sort();
    assert_eq!(removed, uncommitted);
    assert_eq!(s.all().await, [format!("{PREFIX}/{committed}")]);
}
