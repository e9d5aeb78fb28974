use std::collections::{BTreeMap, BTreeSet};

use super::super::testkit::*;
use super::*;
use crate::command::Command;
use crate::types::{AgentAddrs, AgentRegistration, CommittedOffset, OffsetCommit, SegmentEntry};

fn create_cmd(spec: CreateTopic, validate_only: bool) -> Command {
    Command::CreateTopic {
        id: Uuid::new_v4(),
        spec,
        validate_only,
    }
}

#[test]
fn create_topic_places_replicas_round_robin_with_first_replica_leading() {
    let mut s = with_agents(3);
    let t = create(&mut s, "orders", 6, 2);
    assert_eq!(t.partitions.len(), 6);
    for (i, p) in t.partitions.iter().enumerate() {
        assert_eq!(p.index, i as i32);
        assert_eq!(p.replicas.len(), 2);
        assert_ne!(p.replicas[0], p.replicas[1]);
        assert_eq!(p.leader, Some(p.replicas[0]));
        assert_eq!(p.isr, p.replicas);
        assert_eq!((p.leader_epoch, p.high_watermark), (0, -1));
    }
    let mut leaders: BTreeMap<u64, usize> = BTreeMap::new();
    for p in &t.partitions {
        *leaders.entry(p.leader.unwrap()).or_default() += 1;
    }
    assert_eq!(
        leaders.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "leaders spread evenly"
    );
    assert_eq!(s.topic("orders").map(|t| &**t), Some(&t));
    assert_eq!(s.topic_by_id(t.id).map(|t| &**t), Some(&t));
}

/// Agents in zones: each partition's replicas are in as many zones as
/// there are (Kafka's rack-aware assignment), leaders still spread evenly;
/// agent ids that sort by zone would otherwise put replicas side by side.
#[test]
fn replicas_spread_over_racks_when_agents_name_theirs() {
    let mut s = MetaState::default();
    let racks = ["az-a", "az-a", "az-b", "az-b", "az-c", "az-c"];
    for (i, rack) in racks.iter().enumerate() {
        let registration = AgentRegistration {
            id: i as u64 + 1,
            addrs: AgentAddrs {
                kafka: Some(format!("127.0.0.1:{}", 9001 + i)),
                ..AgentAddrs::default()
            },
            rack: Some((*rack).to_owned()),
            instance: None,
        };
        apply(&mut s, Command::RegisterAgent { registration }).unwrap();
    }
    let rack = |id: u64| racks[id as usize - 1];
    let t = create(&mut s, "zoned", 12, 3);
    let mut leaders: BTreeMap<u64, usize> = BTreeMap::new();
    for p in &t.partitions {
        let zones: BTreeSet<&str> = p.replicas.iter().map(|r| rack(*r)).collect();
        assert_eq!(zones.len(), 3, "partition {} on {:?}", p.index, p.replicas);
        *leaders.entry(p.leader.unwrap()).or_default() += 1;
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2; 6]);
    // two zones for three replicas: both used, neither twice in a row
    let t = create(&mut s, "two-of-three", 4, 2);
    for p in &t.partitions {
        assert_ne!(rack(p.replicas[0]), rack(p.replicas[1]), "{:?}", p.replicas);
    }
}

#[test]
fn create_topic_defaults_for_minus_one() {
    let mut s = with_agents(1);
    let t = create(&mut s, "solo", -1, -1);
    assert_eq!(t.partitions.len(), 1);
    assert_eq!(t.partitions[0].replicas, vec![1]);
    let mut s = with_agents(5);
    let t = create(&mut s, "wide", 2, -1);
    assert_eq!(
        t.partitions[0].replicas.len(),
        3,
        "default replication factor is three"
    );
}

#[test]
fn create_topic_errors() {
    let mut s = with_agents(2);
    create(&mut s, "orders", 1, 1);
    type Expect = fn(&MetaError) -> bool;
    let cases: Vec<(CreateTopic, Expect)> = vec![
        (CreateTopic::new("orders", 1, 1), |e| {
            matches!(e, MetaError::TopicAlreadyExists { .. })
        }),
        (CreateTopic::new("bad name", 1, 1), |e| {
            matches!(e, MetaError::InvalidTopicName { .. })
        }),
        (CreateTopic::new("zero", 0, 1), |e| {
            matches!(e, MetaError::InvalidPartitions { .. })
        }),
        (CreateTopic::new("neg", -5, 1), |e| {
            matches!(e, MetaError::InvalidPartitions { .. })
        }),
        (
            CreateTopic::new("huge", MAX_PARTITIONS_PER_TOPIC + 1, 1),
            |e| matches!(e, MetaError::InvalidPartitions { .. }),
        ),
        (CreateTopic::new("rf3", 1, 3), |e| {
            matches!(e, MetaError::InvalidReplicationFactor { .. })
        }),
        (CreateTopic::new("rf0", 1, 0), |e| {
            matches!(e, MetaError::InvalidReplicationFactor { .. })
        }),
        (
            CreateTopic::new("cfg", 1, 1).with_config("retention.ms", "soon"),
            |e| matches!(e, MetaError::InvalidConfig { .. }),
        ),
        (
            CreateTopic::new("cfg2", 1, 1).with_config("no.such.config", "1"),
            |e| matches!(e, MetaError::InvalidConfig { .. }),
        ),
    ];
    for (spec, expected) in cases {
        let name = spec.name.clone();
        let err = apply(&mut s, create_cmd(spec, false)).unwrap_err();
        assert!(expected(&err), "{name}: {err:?}");
        if name != "orders" {
            assert!(
                s.topic(&name).is_none(),
                "{name} must not exist after an error"
            );
        }
    }
    assert_eq!(s.topics().count(), 1);
}

#[test]
fn create_topic_needs_live_agents() {
    let mut s = MetaState::default();
    let err = apply(&mut s, create_cmd(CreateTopic::new("t", 1, -1), false)).unwrap_err();
    assert!(
        matches!(err, MetaError::InvalidReplicationFactor { .. }),
        "{err:?}"
    );
}

#[test]
fn topics_differing_only_in_dot_and_underscore_collide() {
    let mut s = with_agents(1);
    create(&mut s, "a.b", 1, 1);
    let err = apply(&mut s, create_cmd(CreateTopic::new("a_b", 1, 1), false)).unwrap_err();
    assert!(
        matches!(err, MetaError::InvalidTopicName { ref reason, .. } if reason.contains("a.b"))
    );
}

#[test]
fn validate_only_create_changes_nothing() {
    let mut s = with_agents(1);
    let (r, events) = apply_at(&mut s, T0, create_cmd(CreateTopic::new("dry", 3, 1), true));
    let CommandOutput::Topic(t) = r.unwrap() else {
        panic!("expected a topic")
    };
    assert_eq!(t.partitions.len(), 3);
    assert!(events.is_empty());
    assert!(s.topic("dry").is_none());
    assert_eq!(s.assignment_cursor, 0);
}

#[test]
fn explicit_assignments_are_checked_and_used() {
    let mut s = with_agents(3);
    let mut spec = CreateTopic::new("manual", -1, -1);
    spec.assignments = vec![vec![3, 1], vec![2, 3]];
    let CommandOutput::Topic(t) = apply(&mut s, create_cmd(spec, false)).unwrap() else {
        panic!()
    };
    assert_eq!(t.partitions[0].replicas, vec![3, 1]);
    assert_eq!(t.partitions[0].leader, Some(3));
    assert_eq!(t.partitions[1].leader, Some(2));

    for (assignments, partitions) in [
        (vec![vec![1, 1]], -1),
        (vec![vec![1], vec![1, 2]], -1),
        (vec![vec![9]], -1),
        (vec![vec![]], -1),
    ] {
        let mut spec = CreateTopic::new("bad", partitions, -1);
        spec.assignments = assignments;
        let err = apply(&mut s, create_cmd(spec, false)).unwrap_err();
        assert!(
            matches!(err, MetaError::InvalidReplicaAssignment { .. }),
            "{err:?}"
        );
    }
    let mut spec = CreateTopic::new("both", 2, -1);
    spec.assignments = vec![vec![1]];
    assert!(matches!(
        apply(&mut s, create_cmd(spec, false)),
        Err(MetaError::InvalidRequest { .. })
    ));
}

#[test]
fn delete_topic_removes_it_its_offsets_and_keeps_its_manifest_for_cleanup() {
    let mut s = with_agents(1);
    let t = create(&mut s, "gone", 2, 1);
    create(&mut s, "kept", 1, 1);
    let entry = SegmentEntry {
        key: "obj".into(),
        base_offset: 0,
        last_offset: 4,
        size: 5,
        ..Default::default()
    };
    apply(
        &mut s,
        Command::CommitSegment {
            topic_id: t.id,
            partition: 0,
            entry: entry.clone(),
            leader_epoch: None,
        },
    )
    .unwrap();
    let commit = |topic: &str| OffsetCommit {
        topic: topic.into(),
        partition: 0,
        offset: 3,
        leader_epoch: -1,
        metadata: None,
        commit_time_ms: 1,
    };
    apply(
        &mut s,
        Command::CommitOffsets {
            group: "g1".into(),
            offsets: vec![commit("gone"), commit("kept")],
            coordinator: None,
        },
    )
    .unwrap();
    apply(
        &mut s,
        Command::CommitOffsets {
            group: "g2".into(),
            offsets: vec![commit("gone")],
            coordinator: None,
        },
    )
    .unwrap();

    let (r, events) = apply_at(
        &mut s,
        T0 + 5,
        Command::DeleteTopic {
            name: "gone".into(),
        },
    );
    assert!(matches!(r, Ok(CommandOutput::Topic(ref info)) if info.id == t.id));
    assert_eq!(
        events,
        vec![MetaEvent::TopicDeleted {
            id: t.id,
            name: "gone".into()
        }]
    );
    assert!(s.topic("gone").is_none() && s.topic_by_id(t.id).is_none());
    assert!(s.segments(t.id, 0).is_empty());
    let deleted: Vec<_> = s.deleted_topics().collect();
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].segments.get(&0), Some(&vec![entry]));
    assert_eq!(deleted[0].deleted_ms, T0 + 5);
    let g1 = s.group("g1").unwrap();
    assert!(g1.get("gone").is_none());
    assert_eq!(
        g1.get("kept").and_then(|p| p.get(&0)),
        Some(&CommittedOffset {
            offset: 3,
            leader_epoch: -1,
            metadata: None,
            commit_time_ms: 1
        })
    );
    assert!(
        s.group("g2").is_none(),
        "a group left without offsets disappears"
    );

    let err = apply(
        &mut s,
        Command::DeleteTopic {
            name: "gone".into(),
        },
    )
    .unwrap_err();
    assert!(matches!(err, MetaError::UnknownTopic { .. }));
    apply(&mut s, Command::ForgetDeletedTopic { topic_id: t.id }).unwrap();
    assert_eq!(s.deleted_topics().count(), 0);
    // the name is free again
    create(&mut s, "gone", 1, 1);
}

#[test]
fn create_partitions_only_grows() {
    let mut s = with_agents(2);
    let t = create(&mut s, "grow", 2, 2);
    let (r, events) = apply_at(
        &mut s,
        T0,
        Command::CreatePartitions {
            name: "grow".into(),
            total: 5,
            validate_only: false,
        },
    );
    let CommandOutput::Topic(info) = r.unwrap() else {
        panic!()
    };
    assert_eq!(info.partitions.len(), 5);
    assert_eq!(info.id, t.id);
    assert!(info
        .partitions
        .iter()
        .all(|p| p.replicas.len() == 2 && p.leader == Some(p.replicas[0])));
    assert_eq!(info.partitions[4].index, 4);
    assert_eq!(
        events,
        vec![MetaEvent::PartitionsCreated {
            id: t.id,
            name: "grow".into(),
            total: 5
        }]
    );
    for total in [5, 3, MAX_PARTITIONS_PER_TOPIC + 1] {
        let err = apply(
            &mut s,
            Command::CreatePartitions {
                name: "grow".into(),
                total,
                validate_only: false,
            },
        );
        assert!(
            matches!(err, Err(MetaError::InvalidPartitions { .. })),
            "{total}"
        );
    }
    let err = apply(
        &mut s,
        Command::CreatePartitions {
            name: "nope".into(),
            total: 3,
            validate_only: false,
        },
    );
    assert!(matches!(err, Err(MetaError::UnknownTopic { .. })));
    let dry = apply(
        &mut s,
        Command::CreatePartitions {
            name: "grow".into(),
            total: 9,
            validate_only: true,
        },
    );
    assert!(dry.is_ok());
    assert_eq!(s.topic("grow").unwrap().partitions.len(), 5);
}

#[test]
fn alter_configs_validates_and_reports_changes() {
    let mut s = with_agents(1);
    let t = create(&mut s, "cfg", 1, 1);
    let set = |k: &str, v: &str| ConfigOp::Set(k.into(), v.into());
    let (r, events) = apply_at(
        &mut s,
        T0,
        Command::AlterTopicConfigs {
            name: "cfg".into(),
            ops: vec![set("retention.ms", "1000")],
            replace_all: false,
            validate_only: false,
        },
    );
    r.unwrap();
    assert_eq!(
        events,
        vec![MetaEvent::ConfigChanged {
            id: t.id,
            name: "cfg".into()
        }]
    );
    assert_eq!(s.topic("cfg").unwrap().config("retention.ms"), Some("1000"));
    assert_eq!(
        s.topic("cfg").unwrap().config("segment.ms"),
        Some("604800000")
    );

    let err = apply(
        &mut s,
        Command::AlterTopicConfigs {
            name: "cfg".into(),
            ops: vec![set("retention.ms", "2000"), set("segment.bytes", "12")],
            replace_all: false,
            validate_only: false,
        },
    )
    .unwrap_err();
    assert!(matches!(err, MetaError::InvalidConfig { ref key, .. } if key == "segment.bytes"));
    assert_eq!(
        s.topic("cfg").unwrap().config("retention.ms"),
        Some("1000"),
        "all or nothing"
    );

    let dry = Command::AlterTopicConfigs {
        name: "cfg".into(),
        ops: vec![set("retention.ms", "5")],
        replace_all: false,
        validate_only: true,
    };
    apply(&mut s, dry).unwrap();
    assert_eq!(s.topic("cfg").unwrap().config("retention.ms"), Some("1000"));

    let missing = Command::AlterTopicConfigs {
        name: "nope".into(),
        ops: vec![],
        replace_all: false,
        validate_only: false,
    };
    assert!(matches!(
        apply(&mut s, missing),
        Err(MetaError::UnknownTopic { .. })
    ));
}

#[test]
fn durability_is_chosen_at_creation_and_cannot_change() {
    let mut s = with_agents(1);
    create(&mut s, "replicated", 1, 1);
    let alter = |name: &str, ops: Vec<ConfigOp>, replace_all: bool| Command::AlterTopicConfigs {
        name: name.into(),
        ops,
        replace_all,
        validate_only: false,
    };
    let set = |v: &str| ConfigOp::Set("durability".into(), v.into());
    let err = apply(
        &mut s,
        alter("replicated", vec![set("object-store")], false),
    )
    .expect_err("a replicated topic stays replicated");
    assert!(matches!(err, MetaError::InvalidConfig { ref key, .. } if key == "durability"));
    apply(&mut s, alter("replicated", vec![set("replicas")], false))
        .expect("naming the current durability changes nothing");
    apply(
        &mut s,
        alter("replicated", vec![set("object-store")], false),
    )
    .expect_err("still refused");
    let err = apply(&mut s, alter("replicated", vec![set("fast")], false))
        .expect_err("an unknown durability");
    assert!(matches!(err, MetaError::InvalidConfig { ref key, .. } if key == "durability"));
}
