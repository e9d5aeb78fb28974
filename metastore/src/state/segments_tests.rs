use super::super::testkit::*;
use super::*;
use crate::command::Command;
use crate::types::PackedObject;

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
        served_from: None,
        pack: None,
    }
}

/// An entry whose object starts at `base` but serves only `from..=last`.
fn straddling(key: &str, base: i64, from: i64, last: i64) -> SegmentEntry {
    SegmentEntry {
        served_from: Some(from),
        ..seg(key, base, last)
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
                leader_epoch: None,
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
                leader_epoch: None,
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
            leader_epoch: None,
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
            leader_epoch: None,
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
                leader_epoch: None,
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

#[test]
fn a_new_leaders_segment_straddling_the_manifest_end_serves_only_what_follows() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    let commit = |s: &mut MetaState, e: SegmentEntry| {
        apply(
            s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry: e,
                leader_epoch: None,
            },
        )
    };
    commit(&mut s, seg("old-a", 0, 99)).unwrap();
    commit(&mut s, seg("old-b", 100, 149)).unwrap();
    assert!(
        matches!(
            commit(&mut s, seg("new", 120, 260)),
            Err(MetaError::SegmentOverlap { .. })
        ),
        "served from its base, the object overlaps what old-b serves"
    );
    assert!(matches!(
        commit(&mut s, straddling("new", 120, 149, 260)),
        Err(MetaError::SegmentOverlap { .. })
    ));
    commit(&mut s, straddling("new", 120, 150, 260)).unwrap();
    commit(&mut s, straddling("new", 120, 150, 260)).expect("a retry is harmless");
    // a second failover: a segment of a third layout straddles again, even
    // with a base below both earlier entries' bases
    commit(&mut s, straddling("third", 90, 261, 400)).unwrap();
    assert!(matches!(
        commit(&mut s, straddling("again", 90, 300, 420)),
        Err(MetaError::SegmentOverlap { .. })
    ));
    let served: Vec<_> = s
        .segments(t.id, 0)
        .iter()
        .map(|e| (e.key.as_str(), e.first_served(), e.last_offset))
        .collect();
    assert_eq!(
        served,
        [
            ("old-a", 0, 99),
            ("old-b", 100, 149),
            ("new", 150, 260),
            ("third", 261, 400)
        ],
        "sorted by the offsets each entry serves"
    );
    let trimmed = apply(
        &mut s,
        Command::TrimSegments {
            topic_id: t.id,
            partition: 0,
            below_offset: 261,
        },
    )
    .unwrap();
    assert_eq!(
        trimmed,
        CommandOutput::Segments(vec![
            seg("old-a", 0, 99),
            seg("old-b", 100, 149),
            straddling("new", 120, 150, 260)
        ]),
        "trimming goes by last offsets, whatever the bases"
    );
    assert_eq!(s.segments(t.id, 0), [straddling("third", 90, 261, 400)]);
}

#[test]
fn an_entry_serving_from_outside_its_object_is_refused() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    for bad in [straddling("x", 10, 9, 20), straddling("x", 10, 21, 20)] {
        assert!(matches!(
            apply(
                &mut s,
                Command::CommitSegment {
                    topic_id: t.id,
                    partition: 0,
                    entry: bad,
                    leader_epoch: None,
                },
            ),
            Err(MetaError::InvalidRequest { .. })
        ));
    }
    assert!(s.segments(t.id, 0).is_empty());
}

#[test]
fn an_entry_from_before_served_from_existed_loads_serving_from_its_base() {
    let old = r#"{"key":"k","base_offset":5,"last_offset":9,"first_timestamp":1,
        "max_timestamp":2,"size":3,"checksum":4,"index_size":8,"time_index_size":12}"#;
    let e: SegmentEntry = serde_json::from_str(old).expect("an old entry loads");
    assert_eq!((e.served_from, e.first_served()), (None, 5));
    let written = serde_json::to_string(&seg("k", 5, 9)).expect("serialize");
    assert!(
        !written.contains("served_from"),
        "an entry serving from its base is written as before: {written}"
    );
}

/// A leader uploaded `a` and lost its leadership before committing it; the
/// next leader committed `a` and `b`, and retention trimmed both. The
/// deposed leader's late commit must not put `a` back (the log start would
/// move back below the trim), nor may any commit from its epoch land.
#[test]
fn a_deposed_leaders_late_commit_is_refused_and_cannot_undo_a_trim() {
    let mut s = with_agents(2);
    let t = create(&mut s, "t", 1, 2);
    let first = t.partitions[0].leader.expect("a leader");
    let next = t.partitions[0]
        .replicas
        .iter()
        .copied()
        .find(|r| *r != first)
        .expect("a second replica");
    let commit = |s: &mut MetaState, e: SegmentEntry, epoch: Option<i32>| {
        apply(
            s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry: e,
                leader_epoch: epoch,
            },
        )
    };
    commit(&mut s, seg("a", 0, 99), Some(0)).expect("the leader at epoch 0 commits");
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
    assert!(
        matches!(
            commit(&mut s, seg("b", 100, 199), Some(0)),
            Err(MetaError::FencedLeaderEpoch {
                given: 0,
                current: 1,
                ..
            })
        ),
        "the deposed leader commits nothing more"
    );
    commit(&mut s, seg("a", 0, 99), Some(0)).expect("a retry of what landed is a no-op");
    commit(&mut s, seg("b2", 100, 149), Some(1)).expect("the new leader commits");
    commit(&mut s, seg("c2", 150, 249), Some(1)).expect("the new leader commits");
    apply(
        &mut s,
        Command::TrimSegments {
            topic_id: t.id,
            partition: 0,
            below_offset: 150,
        },
    )
    .expect("retention trims");
    assert_eq!(s.manifest_start(t.id, 0), Some(150));
    // even unfenced by epoch (the current leader, or a caller that leads
    // nothing), an entry wholly below the trim stays out
    for (entry, epoch) in [(seg("a", 0, 99), None), (seg("b2", 100, 149), Some(1))] {
        assert!(
            matches!(
                commit(&mut s, entry, epoch),
                Err(MetaError::StaleRequest { .. })
            ),
            "an entry wholly below the trim stays out"
        );
    }
    let keys: Vec<_> = s.segments(t.id, 0).iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["c2"], "the log start did not move back");
    // DeleteRecords' floor counts too
    apply(
        &mut s,
        Command::SetLogStart {
            topic_id: t.id,
            partition: 0,
            offset: 300,
        },
    )
    .expect("DeleteRecords");
    assert!(matches!(
        commit(&mut s, seg("d", 250, 299), Some(1)),
        Err(MetaError::StaleRequest { .. })
    ));
    commit(&mut s, seg("e", 250, 349), Some(1)).expect("straddling the floor is fine");
}

/// A compacted copy replaces an entry in place, once; retries are no-ops;
/// a replace of an entry that is not there, serving other offsets, or from
/// a deposed leader changes nothing.
#[test]
fn an_entry_gives_way_to_a_compacted_copy_of_the_same_offsets() {
    let mut s = with_agents(2);
    let t = create(&mut s, "t", 1, 2);
    let first = t.partitions[0].leader.expect("a leader");
    let next = t.partitions[0]
        .replicas
        .iter()
        .copied()
        .find(|r| *r != first)
        .expect("a second replica");
    for e in [seg("a", 0, 99), seg("b", 100, 199), seg("c", 200, 299)] {
        apply(
            &mut s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry: e,
                leader_epoch: Some(0),
            },
        )
        .expect("commit");
    }
    let replace = |s: &mut MetaState, old: &str, e: SegmentEntry, epoch: Option<i32>| {
        apply_at(
            s,
            T0,
            Command::ReplaceSegment {
                topic_id: t.id,
                partition: 0,
                old_key: old.into(),
                merged_keys: Vec::new(),
                entry: e,
                leader_epoch: epoch,
            },
        )
    };
    let compacted = SegmentEntry {
        size: 40,
        checksum: 9,
        ..seg("b.c1", 100, 199)
    };
    let (r, ev) = replace(&mut s, "b", compacted.clone(), Some(0));
    r.expect("replace");
    assert!(
        matches!(ev.as_slice(), [MetaEvent::SegmentReplaced { old_key, .. }] if old_key == "b")
    );
    let keys = |s: &MetaState| -> Vec<String> {
        s.segments(t.id, 0).iter().map(|e| e.key.clone()).collect()
    };
    assert_eq!(keys(&s), ["a", "b.c1", "c"], "in place");
    assert_eq!(s.segments(t.id, 0)[1], compacted);
    let (r, ev) = replace(&mut s, "b", compacted.clone(), Some(0));
    r.expect("a retry once landed is a no-op");
    assert!(ev.is_empty());
    for (old, e, why) in [
        ("zz", seg("z.c1", 100, 199), "no such entry"),
        ("c", seg("c.c1", 200, 298), "fewer offsets"),
        (
            "c",
            straddling("c.c1", 200, 201, 299),
            "serving from elsewhere",
        ),
        ("c", seg("c", 200, 299), "its own key"),
        ("c", seg("a", 200, 299), "another entry's key"),
    ] {
        let (r, ev) = replace(&mut s, old, e, Some(0));
        assert!(r.is_err(), "{why}");
        assert!(ev.is_empty(), "{why}");
    }
    assert!(matches!(
        replace(&mut s, "zz", seg("z.c1", 100, 199), Some(0)).0,
        Err(MetaError::StaleRequest { .. })
    ));
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
        replace(&mut s, "c", seg("c.c1", 200, 299), Some(0)).0,
        Err(MetaError::FencedLeaderEpoch { .. })
    ));
    replace(&mut s, "b", compacted, Some(0))
        .0
        .expect("a retry of what landed is a no-op, whoever leads now");
    replace(&mut s, "c", seg("c.c1", 200, 299), Some(1))
        .0
        .expect("the new leader replaces");
    assert_eq!(keys(&s), ["a", "b.c1", "c.c1"]);
}

/// Consecutive entries give way to one compacted copy of their offsets
/// together (local compaction merged their segments) in one command; the
/// old entries must follow each other, serve adjacent offsets, and the new
/// one exactly their span.
#[test]
fn consecutive_entries_give_way_to_one_merged_copy() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    for e in [
        seg("a", 0, 99),
        seg("b", 100, 199),
        seg("c", 200, 299),
        seg("e", 400, 499),
        seg("f", 500, 599),
    ] {
        apply(
            &mut s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry: e,
                leader_epoch: Some(0),
            },
        )
        .expect("commit");
    }
    let replace = |s: &mut MetaState, olds: &[&str], e: SegmentEntry| {
        apply_at(
            s,
            T0,
            Command::ReplaceSegment {
                topic_id: t.id,
                partition: 0,
                old_key: olds[0].into(),
                merged_keys: olds[1..].iter().map(|k| (*k).to_owned()).collect(),
                entry: e,
                leader_epoch: Some(0),
            },
        )
    };
    let keys = |s: &MetaState| -> Vec<String> {
        s.segments(t.id, 0).iter().map(|e| e.key.clone()).collect()
    };
    for (olds, e, why) in [
        (&["a", "c"][..], seg("m", 0, 299), "not consecutive"),
        (&["b", "a"][..], seg("m", 0, 199), "out of order"),
        (&["c", "e"][..], seg("m", 200, 499), "a gap between them"),
        (&["a", "b"][..], seg("m", 0, 198), "fewer offsets"),
        (&["a", "b"][..], seg("m", 0, 200), "more offsets"),
        (&["a", "zz"][..], seg("m", 0, 199), "one is not recorded"),
    ] {
        let (r, ev) = replace(&mut s, olds, e);
        assert!(r.is_err(), "{why}");
        assert!(ev.is_empty(), "{why}");
        assert_eq!(keys(&s), ["a", "b", "c", "e", "f"], "{why}");
    }
    let merged = SegmentEntry {
        size: 10,
        ..seg("a.c1", 0, 299)
    };
    let (r, ev) = replace(&mut s, &["a", "b", "c"], merged.clone());
    r.expect("replace");
    assert!(matches!(
        ev.as_slice(),
        [MetaEvent::SegmentReplaced { old_key, merged_keys, .. }]
            if old_key == "a" && merged_keys == &["b".to_owned(), "c".to_owned()]
    ));
    assert_eq!(keys(&s), ["a.c1", "e", "f"]);
    let (r, ev) = replace(&mut s, &["a", "b", "c"], merged);
    r.expect("a retry once landed is a no-op");
    assert!(ev.is_empty());
    assert_eq!(keys(&s), ["a.c1", "e", "f"]);
}

/// Entries of two partitions in one packed object: the object stays in use
/// until the last entry reading from it is trimmed, and its place in the
/// object survives the round trip through the state machine.
#[test]
fn a_packed_object_is_in_use_while_any_partitions_entry_reads_from_it() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 2, 1);
    let packed = |key: &str, base: i64, last: i64, pack: &str, offset: u64| SegmentEntry {
        pack: Some(PackedObject {
            key: pack.into(),
            offset,
            object_size: 1000,
            producers_size: 4,
            txn_index_size: 0,
        }),
        ..seg(key, base, last)
    };
    let entries = [
        (0, packed("p0-a", 0, 99, "packs/1", 0)),
        (1, packed("p1-a", 0, 49, "packs/1", 132)),
        (0, packed("p0-b", 100, 199, "packs/2", 0)),
        (1, seg("p1-b", 50, 99)),
    ];
    for (partition, entry) in entries {
        apply(
            &mut s,
            Command::CommitSegment {
                topic_id: t.id,
                partition,
                entry,
                leader_epoch: None,
            },
        )
        .unwrap();
    }
    assert_eq!(
        s.segments(t.id, 1)[0],
        packed("p1-a", 0, 49, "packs/1", 132)
    );
    let in_use = |s: &MetaState| s.packed_objects().into_iter().collect::<Vec<_>>();
    assert_eq!(in_use(&s), ["packs/1", "packs/2"]);
    let trim = |s: &mut MetaState, partition: i32, below_offset: i64| {
        apply(
            s,
            Command::TrimSegments {
                topic_id: t.id,
                partition,
                below_offset,
            },
        )
        .unwrap();
    };
    trim(&mut s, 0, 100);
    assert_eq!(
        in_use(&s),
        ["packs/1", "packs/2"],
        "partition 1 still reads packs/1"
    );
    trim(&mut s, 1, 50);
    assert_eq!(in_use(&s), ["packs/2"]);
    trim(&mut s, 0, 200);
    assert!(in_use(&s).is_empty());
}
