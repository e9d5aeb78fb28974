use super::*;
use crate::window::WindowId;

const SINK: &str = "file:///out/counts";

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

fn restored(epoch: u64) -> Restored {
    Restored {
        checkpoint: Checkpoint {
            pipeline: "counts".into(),
            topic: "events".into(),
            epoch,
            offsets: BTreeMap::from([(0, 40), (1, 12)]),
            windows: WindowsSnapshot {
                watermark: Some(2000),
                max_event_time: BTreeMap::from([(0, 2100), (1, 2050)]),
                open: vec![row("a", 2000, 3), row("b", 2000, 1), row("b", 3000, 2)],
            },
            files: vec!["part-00000000000000000001.parquet".into()],
            late_files: vec!["late/part-00000000000000000002.parquet".into()],
        },
        chain: Some(Chain {
            base: 1,
            deltas: epoch - 1,
            delta_bytes: 300,
            base_bytes: 1000,
        }),
    }
}

fn wanted(epoch: u64, fingerprint: u64) -> Wanted<'static> {
    Wanted {
        pipeline: "counts",
        topic: "events",
        sink: SINK,
        epoch,
        fingerprint,
    }
}

#[test]
fn the_store_is_used_only_for_the_checkpoint_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::open(dir.path()).unwrap();
    assert_eq!(s.load(wanted(3, 77)).unwrap(), None, "empty");
    s.rebuild(&restored(3), SINK, 77).unwrap();
    assert_eq!(s.load(wanted(3, 77)).unwrap(), Some(restored(3)));
    assert_eq!(
        s.load(wanted(2, 77)).unwrap(),
        None,
        "ahead of object storage"
    );
    assert_eq!(
        s.load(wanted(4, 77)).unwrap(),
        None,
        "behind object storage"
    );
    assert_eq!(
        s.load(wanted(3, 78)).unwrap(),
        None,
        "epoch 3 of another run"
    );
    let other_sink = Wanted {
        sink: "file:///elsewhere",
        ..wanted(3, 77)
    };
    assert_eq!(s.load(other_sink).unwrap(), None);
    s.clear().unwrap();
    assert_eq!(s.load(wanted(3, 77)).unwrap(), None, "cleared");
}

#[test]
fn a_committed_delta_is_taken_up_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::open(dir.path()).unwrap();
    s.rebuild(&restored(3), SINK, 77).unwrap();
    let delta = Delta {
        pipeline: "counts".into(),
        topic: "events".into(),
        epoch: 4,
        base: 1,
        offsets: BTreeMap::from([(0, 50), (1, 12)]),
        watermark: Some(3000),
        max_event_time: BTreeMap::from([(0, 3100), (1, 3050)]),
        changed: vec![row("b", 3000, 5), row("c", 3000, 1)],
        removed: vec![
            WindowId {
                key: "a".into(),
                start: 2000,
            },
            WindowId {
                key: "b".into(),
                start: 2000,
            },
        ],
        files: vec!["part-00000000000000000004.parquet".into()],
        late_files: Vec::new(),
    };
    let chain = Chain {
        base: 1,
        deltas: 3,
        delta_bytes: 400,
        base_bytes: 1000,
    };
    s.apply(&Committed {
        delta: &delta,
        sink: SINK,
        fingerprint: 88,
        chain,
    })
    .unwrap();
    drop(s);
    let s = StateStore::open(dir.path()).unwrap();
    let base = restored(3);
    let expected = Restored {
        checkpoint: crate::delta::apply(base.checkpoint, std::slice::from_ref(&delta)).unwrap(),
        chain: Some(chain),
    };
    assert_eq!(s.load(wanted(4, 88)).unwrap(), Some(expected));
    assert_eq!(s.epoch().unwrap(), Some(4));
}
