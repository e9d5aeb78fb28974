use super::super::testkit::*;
use super::*;
use crate::command::Command;

fn seg(key: &str, base: i64, last: i64) -> SegmentEntry {
    SegmentEntry {
        key: key.into(),
        base_offset: base,
        last_offset: last,
        first_timestamp: base * 10,
        max_timestamp: last * 10,
        size: 100,
        checksum: 7,
        index_size: 16,
        time_index_size: 12,
    }
}

#[test]
fn manifest_keeps_entries_sorted_and_retries_are_harmless() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    let commit = |s: &mut MetaState, e: SegmentEntry| {
        apply_at(
            s,
            T0,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry: e,
            },
        )
    };
    let (r, ev) = commit(&mut s, seg("b", 100, 199));
    r.unwrap();
    assert_eq!(ev.len(), 1);
    commit(&mut s, seg("a", 0, 99)).0.unwrap();
    commit(&mut s, seg("c", 200, 299)).0.unwrap();
    let (r, ev) = commit(&mut s, seg("b", 100, 199));
    r.unwrap();
    assert!(ev.is_empty(), "a retried commit changes nothing");
    let keys: Vec<_> = s.segments(t.id, 0).iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"]);
}

#[test]
fn overlapping_or_malformed_segments_are_refused() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    let commit = |s: &mut MetaState, e: SegmentEntry| {
        apply(
            s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry: e,
            },
        )
    };
    commit(&mut s, seg("a", 0, 99)).unwrap();
    assert!(matches!(
        commit(&mut s, seg("x", 50, 150)),
        Err(MetaError::SegmentOverlap { .. })
    ));
    assert!(matches!(
        commit(&mut s, seg("x", 99, 99)),
        Err(MetaError::SegmentOverlap { .. })
    ));
    assert!(
        matches!(
            commit(&mut s, seg("a", 0, 98)),
            Err(MetaError::SegmentOverlap { .. })
        ),
        "same key, other content"
    );
    assert!(matches!(
        commit(&mut s, seg("", 100, 110)),
        Err(MetaError::InvalidRequest { .. })
    ));
    assert!(matches!(
        commit(&mut s, seg("x", 120, 110)),
        Err(MetaError::InvalidRequest { .. })
    ));
    assert!(matches!(
        commit(&mut s, seg("x", -1, 10)),
        Err(MetaError::InvalidRequest { .. })
    ));
    let bad_partition = apply(
        &mut s,
        Command::CommitSegment {
            topic_id: t.id,
            partition: 1,
            entry: seg("x", 100, 110),
        },
    );
    assert!(matches!(
        bad_partition,
        Err(MetaError::UnknownPartition { .. })
    ));
    let bad_topic = apply(
        &mut s,
        Command::CommitSegment {
            topic_id: Uuid::nil(),
            partition: 0,
            entry: seg("x", 100, 110),
        },
    );
    assert!(matches!(bad_topic, Err(MetaError::UnknownTopicId { .. })));
    assert_eq!(s.segments(t.id, 0).len(), 1);
}

#[test]
fn trim_removes_only_segments_wholly_below_the_offset() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    for (k, b, l) in [("a", 0, 99), ("b", 100, 199), ("c", 200, 299)] {
        apply(
            &mut s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry: seg(k, b, l),
            },
        )
        .unwrap();
    }
    let (r, ev) = apply_at(
        &mut s,
        T0,
        Command::TrimSegments {
            topic_id: t.id,
            partition: 0,
            below_offset: 150,
        },
    );
    assert_eq!(r.unwrap(), CommandOutput::Segments(vec![seg("a", 0, 99)]));
    assert_eq!(
        ev,
        vec![MetaEvent::SegmentsTrimmed {
            topic_id: t.id,
            partition: 0,
            removed: 1
        }]
    );
    let r = apply(
        &mut s,
        Command::TrimSegments {
            topic_id: t.id,
            partition: 0,
            below_offset: 300,
        },
    )
    .unwrap();
    assert_eq!(
        r,
        CommandOutput::Segments(vec![seg("b", 100, 199), seg("c", 200, 299)])
    );
    assert!(s.segments(t.id, 0).is_empty());
    let r = apply(
        &mut s,
        Command::TrimSegments {
            topic_id: t.id,
            partition: 0,
            below_offset: 300,
        },
    )
    .unwrap();
    assert_eq!(r, CommandOutput::Segments(vec![]));
}
