use super::super::testkit::*;
use super::*;
use crate::command::Command;

fn oc(topic: &str, partition: i32, offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: 3,
        metadata: Some("m".into()),
        commit_time_ms: 0,
    }
}

#[test]
fn commits_are_stored_per_partition_with_per_entry_errors() {
    let mut s = with_agents(1);
    create(&mut s, "t", 2, 1);
    let mut too_big = oc("t", 1, 9);
    too_big.metadata = Some("x".repeat(MAX_OFFSET_METADATA_BYTES + 1));
    let offsets = vec![oc("t", 0, 5), oc("nope", 0, 1), oc("t", 7, 1), too_big];
    let (r, ev) = apply_at(
        &mut s,
        T0,
        Command::CommitOffsets {
            group: "g".into(),
            offsets,
            coordinator: None,
        },
    );
    let CommandOutput::OffsetResults(results) = r.unwrap() else {
        panic!()
    };
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(MetaError::UnknownTopic { .. })));
    assert!(matches!(
        results[2],
        Err(MetaError::UnknownPartition { partition: 7, .. })
    ));
    assert!(matches!(
        results[3],
        Err(MetaError::OffsetMetadataTooLarge { .. })
    ));
    assert_eq!(ev, vec![MetaEvent::OffsetsCommitted { group: "g".into() }]);
    let stored = s.group("g").unwrap().get("t").unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored.get(&0),
        Some(&CommittedOffset {
            offset: 5,
            leader_epoch: 3,
            metadata: Some("m".into()),
            commit_time_ms: T0
        })
    );
    // a later commit overwrites
    apply(
        &mut s,
        Command::CommitOffsets {
            group: "g".into(),
            offsets: vec![oc("t", 0, 8)],
            coordinator: None,
        },
    )
    .unwrap();
    assert_eq!(s.group("g").unwrap()["t"][&0].offset, 8);
}

#[test]
fn a_commit_where_everything_fails_creates_no_group() {
    let mut s = with_agents(1);
    let (r, ev) = apply_at(
        &mut s,
        T0,
        Command::CommitOffsets {
            group: "g".into(),
            offsets: vec![oc("nope", 0, 1)],
            coordinator: None,
        },
    );
    assert!(r.is_ok());
    assert!(ev.is_empty());
    assert!(s.group("g").is_none());
    let err = apply(
        &mut s,
        Command::CommitOffsets {
            group: String::new(),
            offsets: vec![],
            coordinator: None,
        },
    )
    .unwrap_err();
    assert!(matches!(err, MetaError::InvalidGroupId { .. }));
}

#[test]
fn groups_and_single_offsets_can_be_deleted() {
    let mut s = with_agents(1);
    create(&mut s, "t", 2, 1);
    apply(
        &mut s,
        Command::CommitOffsets {
            group: "g".into(),
            offsets: vec![oc("t", 0, 1), oc("t", 1, 2)],
            coordinator: None,
        },
    )
    .unwrap();
    let r = apply(
        &mut s,
        Command::DeleteOffsets {
            group: "g".into(),
            partitions: vec![("t".into(), 0), ("x".into(), 0)],
            coordinator: None,
        },
    );
    assert_eq!(r.unwrap(), CommandOutput::Count(1));
    assert_eq!(s.group("g").unwrap()["t"].len(), 1);
    apply(
        &mut s,
        Command::DeleteOffsets {
            group: "g".into(),
            partitions: vec![("t".into(), 1)],
            coordinator: None,
        },
    )
    .unwrap();
    assert!(s.group("g").is_none(), "no offsets left, no group");
    apply(
        &mut s,
        Command::CommitOffsets {
            group: "g".into(),
            offsets: vec![oc("t", 0, 1)],
            coordinator: None,
        },
    )
    .unwrap();
    let (r, ev) = apply_at(
        &mut s,
        T0,
        Command::DeleteGroup {
            group: "g".into(),
            coordinator: None,
        },
    );
    r.unwrap();
    assert_eq!(ev, vec![MetaEvent::GroupDeleted { group: "g".into() }]);
    assert!(matches!(
        apply(
            &mut s,
            Command::DeleteGroup {
                group: "g".into(),
                coordinator: None,
            }
        ),
        Err(MetaError::GroupIdNotFound { .. })
    ));
    assert!(matches!(
        apply(
            &mut s,
            Command::DeleteOffsets {
                group: "g".into(),
                partitions: vec![],
                coordinator: None,
            }
        ),
        Err(MetaError::GroupIdNotFound { .. })
    ));
}
