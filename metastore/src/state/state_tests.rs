use super::testkit::*;
use super::*;
use crate::acl::{AclOperation, AclPermission, PatternType, ResourceType};

#[test]
fn producer_id_blocks_never_overlap() {
    let mut s = MetaState::default();
    let a = apply(&mut s, Command::AllocateProducerIds { count: 1000 }).unwrap();
    let b = apply(&mut s, Command::AllocateProducerIds { count: 10 }).unwrap();
    assert_eq!(
        a,
        CommandOutput::ProducerIds {
            first: 0,
            count: 1000
        }
    );
    assert_eq!(
        b,
        CommandOutput::ProducerIds {
            first: 1000,
            count: 10
        }
    );
    assert_eq!(s.next_producer_id(), 1010);
}

#[test]
fn producer_id_block_size_is_bounded() {
    let mut s = MetaState::default();
    for count in [0, MAX_PRODUCER_ID_BLOCK + 1] {
        let err = apply(&mut s, Command::AllocateProducerIds { count }).unwrap_err();
        assert!(matches!(err, MetaError::InvalidRequest { .. }));
    }
    assert_eq!(s.next_producer_id(), 0, "a rejected request takes no ids");
}

#[test]
fn producer_id_space_exhaustion_is_reported_not_wrapped() {
    let mut s = MetaState {
        next_producer_id: i64::MAX - 5,
        ..MetaState::default()
    };
    let err = apply(&mut s, Command::AllocateProducerIds { count: 10 }).unwrap_err();
    assert_eq!(err, MetaError::ProducerIdsExhausted);
    assert_eq!(s.next_producer_id(), i64::MAX - 5);
}

#[test]
fn cluster_id_is_set_once_and_never_changes() {
    let mut s = MetaState::default();
    let (r, ev) = apply_at(
        &mut s,
        T0,
        Command::SetClusterId {
            cluster_id: "first".into(),
        },
    );
    r.unwrap();
    assert_eq!(
        ev,
        vec![MetaEvent::ClusterIdAssigned {
            cluster_id: "first".into()
        }]
    );
    let (r, ev) = apply_at(
        &mut s,
        T0,
        Command::SetClusterId {
            cluster_id: "second".into(),
        },
    );
    r.unwrap();
    assert!(ev.is_empty());
    assert_eq!(s.cluster_id(), Some("first"));
}

fn proposal(now_ms: i64, spans: Vec<Span>, commands: Vec<Command>) -> Proposal {
    Proposal {
        now_ms,
        commands,
        spans,
    }
}

#[test]
fn a_retried_request_is_applied_once_and_gets_the_first_answer() {
    let mut s = MetaState::default();
    let id = Uuid::new_v4();
    let span = vec![Span {
        request: Some(id),
        commands: 1,
    }];
    let mut ev = Vec::new();
    let first = s.apply_proposal(
        proposal(
            T0,
            span.clone(),
            vec![Command::AllocateProducerIds { count: 10 }],
        ),
        &mut ev,
    );
    let retry = s.apply_proposal(
        proposal(
            T0 + 5,
            span,
            vec![Command::AllocateProducerIds { count: 10 }],
        ),
        &mut ev,
    );
    assert_eq!(first, retry);
    assert_eq!(s.next_producer_id(), 10, "applied once");
    let other = vec![Span {
        request: Some(Uuid::new_v4()),
        commands: 1,
    }];
    s.apply_proposal(
        proposal(
            T0 + 6,
            other,
            vec![Command::AllocateProducerIds { count: 10 }],
        ),
        &mut ev,
    );
    assert_eq!(s.next_producer_id(), 20);
}

#[test]
fn requests_are_forgotten_after_the_retention_window() {
    let mut s = MetaState::default();
    let id = Uuid::new_v4();
    let span = vec![Span {
        request: Some(id),
        commands: 1,
    }];
    let mut ev = Vec::new();
    s.apply_proposal(
        proposal(
            T0,
            span.clone(),
            vec![Command::AllocateProducerIds { count: 1 }],
        ),
        &mut ev,
    );
    let later = T0 + dedup::RETAIN_MS + 1;
    s.apply_proposal(
        proposal(
            later,
            vec![Span {
                request: Some(Uuid::new_v4()),
                commands: 1,
            }],
            vec![Command::AllocateProducerIds { count: 1 }],
        ),
        &mut ev,
    );
    assert_eq!(s.recent_requests.len(), 1, "the old id was evicted");
    s.apply_proposal(
        proposal(later, span, vec![Command::AllocateProducerIds { count: 1 }]),
        &mut ev,
    );
    assert_eq!(s.next_producer_id(), 3);
}

#[test]
fn spans_split_a_batch_between_requests() {
    let mut s = MetaState::default();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let spans = vec![
        Span {
            request: Some(a),
            commands: 2,
        },
        Span {
            request: None,
            commands: 1,
        },
        Span {
            request: Some(b),
            commands: 1,
        },
    ];
    let cmds = vec![
        Command::AllocateProducerIds { count: 1 },
        Command::AllocateProducerIds { count: 0 },
        Command::AllocateProducerIds { count: 1 },
        Command::AllocateProducerIds { count: 1 },
    ];
    let mut ev = Vec::new();
    let out = s.apply_proposal(proposal(T0, spans, cmds), &mut ev);
    assert_eq!(out.len(), 4);
    assert!(out[0].is_ok() && out[1].is_err() && out[2].is_ok() && out[3].is_ok());
    assert_eq!(s.recent_requests.get(&a).map(Vec::len), Some(2));
    let short = vec![Span {
        request: None,
        commands: 1,
    }];
    let out = s.apply_proposal(
        proposal(
            T0,
            short,
            vec![
                Command::AllocateProducerIds { count: 1 },
                Command::AllocateProducerIds { count: 1 },
            ],
        ),
        &mut ev,
    );
    assert!(out[0].is_ok() && matches!(out[1], Err(MetaError::InvalidRequest { .. })));
}

#[test]
fn a_clone_for_a_snapshot_shares_topics_manifests_and_offsets() {
    let mut s = with_agents(1);
    let t = create(&mut s, "orders", 2, 1);
    let entry = SegmentEntry {
        key: "k".into(),
        base_offset: 0,
        last_offset: 9,
        size: 10,
        ..Default::default()
    };
    apply(
        &mut s,
        Command::CommitSegment {
            topic_id: t.id,
            partition: 0,
            entry,
            leader_epoch: None,
        },
    )
    .unwrap();
    let commit = crate::types::OffsetCommit {
        topic: "orders".into(),
        partition: 0,
        offset: 5,
        leader_epoch: 0,
        metadata: None,
        commit_time_ms: 0,
    };
    apply(
        &mut s,
        Command::CommitOffsets {
            group: "g".into(),
            offsets: vec![commit],
            coordinator: None,
        },
    )
    .unwrap();
    let copy = s.clone();
    assert!(Arc::ptr_eq(&s.topics[&t.id], &copy.topics[&t.id]));
    assert!(Arc::ptr_eq(
        &s.segments[&t.id][&0],
        &copy.segments[&t.id][&0]
    ));
    assert!(Arc::ptr_eq(&s.groups["g"], &copy.groups["g"]));
}

#[test]
fn a_topic_handed_out_is_never_changed_by_later_writes() {
    let mut s = with_agents(2);
    let t = create(&mut s, "orders", 1, 2);
    let held = Arc::clone(s.topic("orders").unwrap());
    apply(
        &mut s,
        Command::AlterTopicConfigs {
            name: "orders".into(),
            ops: vec![crate::types::ConfigOp::Set(
                "retention.ms".into(),
                "1000".into(),
            )],
            replace_all: false,
            validate_only: false,
        },
    )
    .unwrap();
    apply(
        &mut s,
        Command::AlterIsr {
            topic_id: t.id,
            partition: 0,
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            expected_partition_epoch: None,
        },
    )
    .unwrap();
    assert_eq!(*held, t, "the copy handed out kept its content");
    let now = s.topic("orders").unwrap();
    assert_eq!(now.config("retention.ms"), Some("1000"));
    assert_eq!(now.partitions[0].isr, vec![1]);
}

#[test]
fn state_survives_a_snapshot_round_trip() {
    let mut s = with_agents(3);
    let t = create(&mut s, "orders", 3, 2);
    apply(
        &mut s,
        Command::CommitSegment {
            topic_id: t.id,
            partition: 1,
            entry: SegmentEntry {
                key: "k".into(),
                base_offset: 0,
                last_offset: 9,
                size: 10,
                ..Default::default()
            },
            leader_epoch: None,
        },
    )
    .unwrap();
    let commit = crate::types::OffsetCommit {
        topic: "orders".into(),
        partition: 2,
        offset: 5,
        leader_epoch: 0,
        metadata: None,
        commit_time_ms: 0,
    };
    apply(
        &mut s,
        Command::CommitOffsets {
            group: "g".into(),
            offsets: vec![commit],
            coordinator: None,
        },
    )
    .unwrap();
    let bytes = serde_json::to_vec(&s).unwrap();
    let back: MetaState = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, s);
}

fn credential(m: ScramMechanism, iterations: u32) -> ScramCredential {
    ScramCredential {
        salt: b"salt".to_vec(),
        stored_key: vec![1; m.hash_len()],
        server_key: vec![2; m.hash_len()],
        iterations,
    }
}

#[test]
fn scram_credentials_are_kept_per_user_and_mechanism_and_survive_a_snapshot() {
    let mut s = MetaState::default();
    for m in ScramMechanism::ALL {
        apply(
            &mut s,
            Command::UpsertScramCredential {
                user: "alice".into(),
                mechanism: m,
                credential: credential(m, 8192),
            },
        )
        .unwrap();
    }
    let restored: MetaState = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
    assert_eq!(restored, s);
    assert_eq!(
        s.scram_credential("alice", ScramMechanism::Sha512),
        Some(&credential(ScramMechanism::Sha512, 8192))
    );
    assert_eq!(s.scram_credential("bob", ScramMechanism::Sha512), None);
    let delete = |user: &str| Command::DeleteScramCredential {
        user: user.into(),
        mechanism: ScramMechanism::Sha256,
    };
    assert_eq!(apply(&mut s, delete("alice")), Ok(CommandOutput::Count(1)));
    assert_eq!(apply(&mut s, delete("alice")), Ok(CommandOutput::Count(0)));
    let users: Vec<_> = s.scram_users().map(|(u, m)| (u.clone(), m)).collect();
    assert_eq!(
        users,
        vec![("alice".to_string(), vec![(ScramMechanism::Sha512, 8192)])]
    );
}

#[test]
fn scram_credentials_kafka_would_refuse_are_refused() {
    let mut s = MetaState::default();
    let m = ScramMechanism::Sha256;
    let short = ScramCredential {
        stored_key: vec![1; 10],
        ..credential(m, 4096)
    };
    for (user, c) in [
        ("", credential(m, 4096)),
        ("u", credential(m, 4095)),
        ("u", credential(m, 16385)),
        ("u", short),
    ] {
        let err = apply(
            &mut s,
            Command::UpsertScramCredential {
                user: user.into(),
                mechanism: m,
                credential: c,
            },
        )
        .unwrap_err();
        assert!(matches!(err, MetaError::InvalidRequest { .. }), "{err:?}");
    }
    assert_eq!(s.scram_users().count(), 0);
}

fn acl(name: &str, op: AclOperation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.into(),
        pattern: PatternType::Literal,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: op,
        permission: AclPermission::Allow,
    }
}

#[test]
fn acls_are_kept_once_deleted_by_filter_and_survive_a_snapshot() {
    let mut s = MetaState::default();
    for b in [
        acl("orders", AclOperation::Read),
        acl("orders", AclOperation::Read),
        acl("orders", AclOperation::Write),
        acl("audit", AclOperation::Read),
    ] {
        assert_eq!(
            apply(&mut s, Command::CreateAcl { binding: b }),
            Ok(CommandOutput::Done)
        );
    }
    assert_eq!(s.acls().count(), 3);
    let restored: MetaState = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
    assert_eq!(restored, s);
    let reads_of_orders = AclFilter {
        resource_name: Some("orders".into()),
        operation: Some(AclOperation::Read),
        ..AclFilter::any()
    };
    assert_eq!(
        apply(
            &mut s,
            Command::DeleteAcls {
                filter: reads_of_orders.clone()
            }
        ),
        Ok(CommandOutput::Acls(vec![acl("orders", AclOperation::Read)]))
    );
    assert_eq!(
        apply(
            &mut s,
            Command::DeleteAcls {
                filter: reads_of_orders
            }
        ),
        Ok(CommandOutput::Acls(vec![]))
    );
    let left: Vec<_> = s.acls().cloned().collect();
    assert_eq!(
        left,
        vec![
            acl("audit", AclOperation::Read),
            acl("orders", AclOperation::Write)
        ]
    );
}

#[test]
fn an_acl_kafka_would_refuse_is_refused_and_not_kept() {
    let mut s = MetaState::default();
    let bad = AclBinding {
        principal: "alice".into(),
        ..acl("orders", AclOperation::Read)
    };
    let err = apply(&mut s, Command::CreateAcl { binding: bad }).unwrap_err();
    assert!(matches!(err, MetaError::InvalidRequest { .. }), "{err:?}");
    assert_eq!(s.acls().count(), 0);
}

#[test]
fn client_quotas_are_set_and_removed_per_entity_and_refused_whole() {
    use crate::quota::{EntityName, QuotaEntity, QuotaValue, PRODUCER_BYTE_RATE};
    let mut s = MetaState::default();
    let alice = QuotaEntity {
        user: Some(EntityName::Named("alice".into())),
        client_id: None,
    };
    let set = |v: Option<f64>| Command::AlterClientQuota {
        entity: alice.clone(),
        ops: vec![(PRODUCER_BYTE_RATE.into(), v.map(QuotaValue))],
    };
    assert_eq!(apply(&mut s, set(Some(1024.0))), Ok(CommandOutput::Done));
    let restored: MetaState = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
    assert_eq!(restored, s);
    assert_eq!(
        s.client_quotas()[&alice][PRODUCER_BYTE_RATE],
        QuotaValue(1024.0)
    );
    // one bad op refuses the whole entry
    let mixed = Command::AlterClientQuota {
        entity: alice.clone(),
        ops: vec![
            (PRODUCER_BYTE_RATE.into(), Some(QuotaValue(1.0))),
            ("connection_creation_rate".into(), Some(QuotaValue(5.0))),
        ],
    };
    assert!(apply(&mut s, mixed).is_err());
    assert_eq!(
        s.client_quotas()[&alice][PRODUCER_BYTE_RATE],
        QuotaValue(1024.0)
    );
    assert_eq!(apply(&mut s, set(None)), Ok(CommandOutput::Done));
    assert!(s.client_quotas().is_empty());
}
