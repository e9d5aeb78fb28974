use super::super::testkit::*;
use super::*;
use crate::command::Command;
use crate::types::SegmentEntry;

fn range(key: &str, base: i64, last: i64, epoch: i32) -> WalRange {
    WalRange {
        base_offset: base,
        last_offset: last,
        leader_epoch: epoch,
        key: key.into(),
        offset: 0,
        len: 64,
    }
}

fn append(s: &mut MetaState, topic_id: Uuid, r: WalRange) -> Result<(), MetaError> {
    let out = apply(
        s,
        Command::AppendWal {
            appends: vec![WalAppend {
                topic_id,
                partition: 0,
                range: r,
            }],
        },
    );
    match out {
        Ok(CommandOutput::WalResults(mut results)) if results.len() == 1 => results.remove(0),
        other => panic!("unexpected answer {other:?}"),
    }
}

fn seg(key: &str, base: i64, last: i64) -> SegmentEntry {
    SegmentEntry {
        key: key.into(),
        base_offset: base,
        last_offset: last,
        size: 100,
        ..Default::default()
    }
}

fn commit(s: &mut MetaState, topic_id: Uuid, e: SegmentEntry) {
    apply(
        s,
        Command::CommitSegment {
            topic_id,
            partition: 0,
            entry: e,
            leader_epoch: None,
        },
    )
    .expect("committed");
}

fn bases(s: &MetaState, topic_id: Uuid) -> Vec<i64> {
    s.wal_ranges(topic_id, 0)
        .iter()
        .map(|r| r.base_offset)
        .collect()
}

#[test]
fn ranges_follow_each_other_and_a_retry_is_harmless() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    append(&mut s, t.id, range("w1", 0, 9, 0)).expect("first range");
    append(&mut s, t.id, range("w2", 10, 19, 0)).expect("next range");
    append(&mut s, t.id, range("w2", 10, 19, 0)).expect("a retry of what landed");
    assert_eq!(bases(&s, t.id), [0, 10]);
    assert!(
        matches!(
            append(&mut s, t.id, range("w3", 25, 30, 0)),
            Err(MetaError::StaleRequest { .. })
        ),
        "a gap would leave acknowledged offsets nowhere"
    );
    assert!(
        matches!(
            append(&mut s, t.id, range("w3", 15, 30, 0)),
            Err(MetaError::StaleRequest { .. })
        ),
        "an overlap would answer offsets from two objects"
    );
    assert!(
        matches!(
            append(&mut s, t.id, range("", 20, 30, 0)),
            Err(MetaError::InvalidRequest { .. })
        ),
        "a range needs an object"
    );
    assert_eq!(s.wal_objects().len(), 2);
}

#[test]
fn a_deposed_leader_records_nothing_more() {
    let mut s = with_agents(2);
    let t = create(&mut s, "t", 1, 2);
    let first = t.partitions[0].leader.expect("a leader");
    let next = t.partitions[0]
        .replicas
        .iter()
        .copied()
        .find(|r| *r != first)
        .expect("a second replica");
    append(&mut s, t.id, range("w1", 0, 9, 0)).expect("the leader at epoch 0");
    apply(
        &mut s,
        Command::ReassignLeadership {
            topic_id: t.id,
            partition: 0,
            expected_partition_epoch: 0,
            leader: Some(next),
            isr: vec![next, first],
        },
    )
    .expect("leadership moves (epoch 1)");
    assert!(matches!(
        append(&mut s, t.id, range("w2", 10, 19, 0)),
        Err(MetaError::FencedLeaderEpoch {
            given: 0,
            current: 1,
            ..
        })
    ));
    append(&mut s, t.id, range("w3", 10, 19, 1)).expect("the new leader appends");
    assert_eq!(bases(&s, t.id), [0, 10]);
}

#[test]
fn ranges_the_manifest_serves_or_retention_passed_are_dropped() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    for (i, base) in [0, 10, 20, 30].into_iter().enumerate() {
        append(&mut s, t.id, range(&format!("w{i}"), base, base + 9, 0)).expect("appended");
    }
    commit(&mut s, t.id, seg("a", 0, 14));
    assert_eq!(
        bases(&s, t.id),
        [10, 20, 30],
        "a range partly served stays until all of it is"
    );
    commit(&mut s, t.id, seg("c", 20, 24));
    assert_eq!(
        bases(&s, t.id),
        [10, 20, 30],
        "a gap in the manifest keeps the ranges after it"
    );
    commit(&mut s, t.id, seg("b", 15, 19));
    assert_eq!(bases(&s, t.id), [20, 30]);
    apply(
        &mut s,
        Command::SetLogStart {
            topic_id: t.id,
            partition: 0,
            offset: 30,
        },
    )
    .expect("DeleteRecords");
    assert_eq!(bases(&s, t.id), [30]);
    commit(&mut s, t.id, seg("d", 25, 39));
    assert!(s.wal_ranges(t.id, 0).is_empty());
    assert!(s.wal_objects().is_empty(), "no object is in use any more");
}

#[test]
fn a_deleted_topic_leaves_no_ranges() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    append(&mut s, t.id, range("w1", 0, 9, 0)).expect("appended");
    apply(&mut s, Command::DeleteTopic { name: "t".into() }).expect("deleted");
    assert!(s.wal_objects().is_empty());
}
