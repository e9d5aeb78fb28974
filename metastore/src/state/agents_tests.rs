use super::super::testkit::*;
use super::*;
use crate::command::Command;
use crate::types::AgentAddrs;

fn fence(s: &mut MetaState, id: AgentId) {
    let generation = s.agent(id).unwrap().lease_generation;
    apply(
        s,
        Command::FenceAgent {
            agent_id: id,
            observed_generation: Some(generation),
            observed_heartbeat_ms: None,
        },
    )
    .unwrap();
}

#[test]
fn registering_again_updates_addresses_and_bumps_incarnation() {
    let mut s = with_agents(1);
    assert_eq!(s.agent(1).unwrap().incarnation, 1);
    let reg = AgentRegistration {
        id: 1,
        addrs: AgentAddrs {
            kafka: Some("10.0.0.1:9092".into()),
            ..Default::default()
        },
        rack: Some("az-1".into()),
        instance: None,
    };
    let (r, ev) = apply_at(
        &mut s,
        T0 + 10,
        Command::RegisterAgent { registration: reg },
    );
    let CommandOutput::Agent(a) = r.unwrap() else {
        panic!()
    };
    assert_eq!(
        (a.incarnation, a.rack.as_deref(), a.last_heartbeat_ms),
        (2, Some("az-1"), T0 + 10)
    );
    assert_eq!(a.addrs.kafka.as_deref(), Some("10.0.0.1:9092"));
    assert_eq!(ev, vec![MetaEvent::AgentRegistered { agent_id: 1 }]);
    let big = AgentRegistration {
        id: MAX_AGENT_ID + 1,
        ..Default::default()
    };
    assert!(matches!(
        apply(&mut s, Command::RegisterAgent { registration: big }),
        Err(MetaError::InvalidRequest { .. })
    ));
}

#[test]
fn heartbeat_renews_and_unfences() {
    let mut s = with_agents(1);
    assert!(matches!(
        apply(&mut s, Command::Heartbeat { agent_id: 7 }),
        Err(MetaError::UnknownAgent { agent_id: 7 })
    ));
    fence(&mut s, 1);
    assert!(s.agent(1).unwrap().fenced);
    let (r, ev) = apply_at(&mut s, T0 + 50, Command::Heartbeat { agent_id: 1 });
    r.unwrap();
    assert_eq!(ev, vec![MetaEvent::AgentUnfenced { agent_id: 1 }]);
    let a = s.agent(1).unwrap();
    assert!(!a.fenced);
    assert_eq!(a.last_heartbeat_ms, T0 + 50);
}

#[test]
fn fencing_is_refused_when_a_logged_renewal_raced_it() {
    let mut s = with_agents(1);
    let judged = s.agent(1).unwrap().lease_generation;
    let fence = Command::FenceAgent {
        agent_id: 1,
        observed_generation: Some(judged),
        observed_heartbeat_ms: None,
    };
    // the leader logs a heartbeat that reached it while the fence was proposed
    let (r, _) = apply_at(&mut s, T0 - 5_000, Command::Heartbeat { agent_id: 1 });
    r.unwrap();
    let err = apply(&mut s, fence.clone()).unwrap_err();
    assert!(matches!(err, MetaError::StaleRequest { .. }), "{err}");
    assert!(!s.agent(1).unwrap().fenced);
    // a registration renews the lease too
    let judged = s.agent(1).unwrap().lease_generation;
    register(&mut s, 1);
    let err = apply(
        &mut s,
        Command::FenceAgent {
            agent_id: 1,
            observed_generation: Some(judged),
            observed_heartbeat_ms: None,
        },
    )
    .unwrap_err();
    assert!(matches!(err, MetaError::StaleRequest { .. }), "{err}");
    // a fence that names neither generation nor stamp is malformed
    assert!(matches!(
        apply(
            &mut s,
            Command::FenceAgent {
                agent_id: 1,
                observed_generation: None,
                observed_heartbeat_ms: None,
            }
        ),
        Err(MetaError::InvalidRequest { .. })
    ));
}

#[test]
fn fences_logged_before_lease_generations_replay_on_the_heartbeat_stamp() {
    let mut s = with_agents(1);
    let old = r#"{"FenceAgent":{"agent_id":1,"observed_heartbeat_ms":1}}"#;
    let stale: Command = serde_json::from_str(old).expect("an old FenceAgent entry");
    assert!(matches!(
        apply(&mut s, stale),
        Err(MetaError::StaleRequest { .. })
    ));
    let stamp = s.agent(1).unwrap().last_heartbeat_ms;
    let current: Command = serde_json::from_str(&format!(
        r#"{{"FenceAgent":{{"agent_id":1,"observed_heartbeat_ms":{stamp}}}}}"#
    ))
    .expect("an old FenceAgent entry");
    apply(&mut s, current).expect("applies as it did");
    assert!(s.agent(1).unwrap().fenced);
}

#[test]
fn preferred_election_moves_leadership_back_and_bumps_epoch() {
    let mut s = with_agents(2);
    let t = create(&mut s, "t", 1, 2);
    let preferred = t.partitions[0].replicas[0];
    let other = t.partitions[0].replicas[1];
    // move leadership away first
    let epoch = s.topic("t").unwrap().partitions[0].partition_epoch;
    apply(
        &mut s,
        Command::ReassignLeadership {
            topic_id: t.id,
            partition: 0,
            expected_partition_epoch: epoch,
            leader: Some(other),
            isr: vec![preferred, other],
        },
    )
    .unwrap();
    let (r, ev) = apply_at(
        &mut s,
        T0,
        Command::ElectLeader {
            topic_id: t.id,
            partition: 0,
            election: ElectionType::Preferred,
        },
    );
    assert_eq!(
        r.unwrap(),
        CommandOutput::Leader(LeaderAndEpoch {
            leader: Some(preferred),
            leader_epoch: 2
        })
    );
    assert!(
        matches!(ev[0], MetaEvent::LeaderChanged { leader: Some(l), leader_epoch: 2, .. } if l == preferred)
    );
    let again = apply(
        &mut s,
        Command::ElectLeader {
            topic_id: t.id,
            partition: 0,
            election: ElectionType::Preferred,
        },
    );
    assert!(matches!(again, Err(MetaError::ElectionNotNeeded { .. })));
}

#[test]
fn unclean_election_prefers_in_sync_then_any_live_replica() {
    let mut s = with_agents(3);
    let t = create(&mut s, "t", 1, 3);
    let r = t.partitions[0].replicas.clone();
    let elect = |s: &mut MetaState| {
        apply(
            s,
            Command::ElectLeader {
                topic_id: t.id,
                partition: 0,
                election: ElectionType::Unclean,
            },
        )
    };
    assert!(
        matches!(elect(&mut s), Err(MetaError::ElectionNotNeeded { .. })),
        "a live leader needs no election"
    );
    // shrink ISR to the leader, then fence it: the live out-of-sync replicas are the only choice
    apply(
        &mut s,
        Command::AlterIsr {
            topic_id: t.id,
            partition: 0,
            leader: r[0],
            leader_epoch: 0,
            isr: vec![r[0]],
            expected_partition_epoch: None,
        },
    )
    .unwrap();
    fence(&mut s, r[0]);
    let out = elect(&mut s).unwrap();
    assert_eq!(
        out,
        CommandOutput::Leader(LeaderAndEpoch {
            leader: Some(r[1]),
            leader_epoch: 1
        })
    );
    assert_eq!(s.topic("t").unwrap().partitions[0].isr, vec![r[1]]);
    fence(&mut s, r[1]);
    fence(&mut s, r[2]);
    assert!(matches!(
        elect(&mut s),
        Err(MetaError::EligibleLeadersNotAvailable { .. })
    ));
    let bad = apply(
        &mut s,
        Command::ElectLeader {
            topic_id: t.id,
            partition: 3,
            election: ElectionType::Unclean,
        },
    );
    assert!(matches!(
        bad,
        Err(MetaError::UnknownPartition { partition: 3, .. })
    ));
    let bad = apply(
        &mut s,
        Command::ElectLeader {
            topic_id: Uuid::nil(),
            partition: 0,
            election: ElectionType::Unclean,
        },
    );
    assert!(matches!(bad, Err(MetaError::UnknownTopicId { .. })));
}

#[test]
fn reassignment_is_fenced_by_partition_epoch_and_checks_the_new_leader() {
    let mut s = with_agents(3);
    let t = create(&mut s, "t", 1, 3);
    let r = t.partitions[0].replicas.clone();
    let cmd =
        |epoch: i32, leader: Option<AgentId>, isr: Vec<AgentId>| Command::ReassignLeadership {
            topic_id: t.id,
            partition: 0,
            expected_partition_epoch: epoch,
            leader,
            isr,
        };
    assert!(matches!(
        apply(&mut s, cmd(5, Some(r[1]), r.clone())),
        Err(MetaError::StaleRequest { .. })
    ));
    fence(&mut s, r[1]);
    assert!(matches!(
        apply(&mut s, cmd(0, Some(r[1]), r.clone())),
        Err(MetaError::IneligibleReplica { .. })
    ));
    assert!(matches!(
        apply(&mut s, cmd(0, Some(r[2]), vec![r[0]])),
        Err(MetaError::IneligibleReplica { .. })
    ));
    assert!(matches!(
        apply(&mut s, cmd(0, Some(r[2]), vec![r[2], 99])),
        Err(MetaError::IneligibleReplica { .. })
    ));
    assert!(matches!(
        apply(&mut s, cmd(0, Some(r[2]), vec![])),
        Err(MetaError::IneligibleReplica { .. })
    ));
    let (res, ev) = apply_at(&mut s, T0, cmd(0, Some(r[2]), vec![r[2], r[0]]));
    assert_eq!(
        res.unwrap(),
        CommandOutput::Leader(LeaderAndEpoch {
            leader: Some(r[2]),
            leader_epoch: 1
        })
    );
    assert_eq!(ev.len(), 2, "leader and ISR both changed: {ev:?}");
    let p = &s.topic("t").unwrap().partitions[0];
    assert_eq!((p.partition_epoch, p.isr.clone()), (1, vec![r[2], r[0]]));
    // no live ISR member: the partition goes offline, the epoch still moves
    let (res, _) = apply_at(&mut s, T0, cmd(1, None, vec![r[2]]));
    assert_eq!(
        res.unwrap(),
        CommandOutput::Leader(LeaderAndEpoch {
            leader: None,
            leader_epoch: 2
        })
    );
}

#[test]
fn alter_isr_only_from_the_current_leader_at_its_epoch() {
    let mut s = with_agents(3);
    let t = create(&mut s, "t", 1, 3);
    let r = t.partitions[0].replicas.clone();
    let alter = |s: &mut MetaState, leader, epoch, isr: Vec<AgentId>| {
        apply(
            s,
            Command::AlterIsr {
                topic_id: t.id,
                partition: 0,
                leader,
                leader_epoch: epoch,
                isr,
                expected_partition_epoch: None,
            },
        )
    };
    assert!(matches!(
        alter(&mut s, r[1], 0, vec![r[1]]),
        Err(MetaError::NotPartitionLeader { .. })
    ));
    assert!(matches!(
        alter(&mut s, r[0], -1, vec![r[0]]),
        Err(MetaError::FencedLeaderEpoch {
            given: -1,
            current: 0,
            ..
        })
    ));
    assert!(matches!(
        alter(&mut s, r[0], 0, vec![r[1]]),
        Err(MetaError::IneligibleReplica { .. })
    ));
    alter(&mut s, r[0], 0, vec![r[0]]).unwrap();
    assert_eq!(s.topic("t").unwrap().partitions[0].isr, vec![r[0]]);
    fence(&mut s, r[2]);
    assert!(
        matches!(
            alter(&mut s, r[0], 0, vec![r[0], r[2]]),
            Err(MetaError::IneligibleReplica { .. })
        ),
        "fenced agents cannot rejoin"
    );
    alter(&mut s, r[0], 0, vec![r[0], r[1]]).unwrap();
    let p = &s.topic("t").unwrap().partitions[0];
    assert_eq!(
        (p.leader_epoch, p.partition_epoch),
        (0, 2),
        "ISR changes do not bump the leader epoch"
    );
}

#[test]
fn high_watermark_checkpoints_only_move_forward() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 2, 1);
    let out = apply(
        &mut s,
        Command::CheckpointHighWatermarks {
            entries: vec![(t.id, 0, 10), (t.id, 1, 5), (Uuid::nil(), 0, 3)],
        },
    );
    assert_eq!(out.unwrap(), CommandOutput::Count(2));
    let out = apply(
        &mut s,
        Command::CheckpointHighWatermarks {
            entries: vec![(t.id, 0, 7), (t.id, 5, 1)],
        },
    );
    assert_eq!(out.unwrap(), CommandOutput::Count(0));
    assert_eq!(s.topic("t").unwrap().partitions[0].high_watermark, 10);
}

#[test]
fn alter_isr_from_an_earlier_partition_epoch_is_refused() {
    let mut s = with_agents(3);
    let t = create(&mut s, "t", 1, 3);
    let r = t.partitions[0].replicas.clone();
    let alter = |s: &mut MetaState, isr: Vec<AgentId>, seen: Option<i32>| {
        apply(
            s,
            Command::AlterIsr {
                topic_id: t.id,
                partition: 0,
                leader: r[0],
                leader_epoch: 0,
                isr,
                expected_partition_epoch: seen,
            },
        )
    };
    alter(&mut s, vec![r[0], r[1]], Some(0)).expect("shrink at the current epoch");
    // the leader, at partition epoch 1, proposes to add r[2] back; before
    // that lands, the lease engine drops the fenced r[1] (epoch 2)
    fence(&mut s, r[1]);
    apply(
        &mut s,
        Command::ReassignLeadership {
            topic_id: t.id,
            partition: 0,
            expected_partition_epoch: 1,
            leader: Some(r[0]),
            isr: vec![r[0]],
        },
    )
    .expect("the lease engine shrinks the ISR");
    let p = &s.topic("t").unwrap().partitions[0];
    assert_eq!((p.leader_epoch, p.partition_epoch), (0, 2));
    assert!(
        matches!(
            alter(&mut s, vec![r[0], r[2]], Some(1)),
            Err(MetaError::StaleRequest { .. })
        ),
        "a proposal from partition epoch 1 is stale at epoch 2"
    );
    assert_eq!(s.topic("t").unwrap().partitions[0].isr, vec![r[0]]);
    alter(&mut s, vec![r[0], r[2]], Some(2)).expect("proposed again at the current epoch");
    // entries logged before the epoch was sent replay unchecked
    alter(&mut s, vec![r[0]], None).expect("a legacy entry applies");
    assert_eq!(s.topic("t").unwrap().partitions[0].partition_epoch, 4);
}
