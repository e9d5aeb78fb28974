use std::time::Duration;

use super::*;
use crate::command::CommandOutput;
use crate::state::testkit::{create, register, with_agents, T0};
use crate::types::{MetaEvent, TopicInfo};

const LEASE: Duration = Duration::from_millis(1_000);

/// The leader's view: the agents in `silent` have not been heard for two
/// leases, the others just now.
fn silence(silent: &[AgentId]) -> impl Fn(AgentId) -> Duration + '_ {
    move |a| {
        if silent.contains(&a) {
            2 * LEASE
        } else {
            Duration::ZERO
        }
    }
}

/// Runs the engine and applies its commands, as the driver does, until it is quiet.
fn settle(s: &mut MetaState, silent: &[AgentId]) -> Vec<MetaEvent> {
    let mut events = Vec::new();
    for _ in 0..4 {
        let cmds = plan(s, silence(silent), LEASE);
        if cmds.is_empty() {
            return events;
        }
        for c in cmds {
            s.apply(T0, c, &mut events)
                .expect("the engine proposes only valid commands");
        }
    }
    panic!("the lease engine did not settle");
}

/// A heartbeat the leader logged (a fenced agent is back), stamped `now_ms`
/// by the leader's wall clock.
fn logged_heartbeat(s: &mut MetaState, id: AgentId, now_ms: i64) {
    let mut ev = Vec::new();
    assert_eq!(
        s.apply(now_ms, Command::Heartbeat { agent_id: id }, &mut ev),
        Ok(CommandOutput::Done)
    );
}

fn topic(s: &MetaState) -> TopicInfo {
    TopicInfo::clone(s.topic("t").expect("topic t"))
}

#[test]
fn a_lease_lasts_exactly_the_lease_time_of_silence() {
    let mut s = with_agents(3);
    create(&mut s, "t", 3, 3);
    assert!(plan(&s, |_| LEASE, LEASE).is_empty());
    let generation = s.agent(1).expect("agent 1").lease_generation;
    let cmds = plan(
        &s,
        |a| {
            if a == 1 {
                LEASE + Duration::from_millis(1)
            } else {
                LEASE
            }
        },
        LEASE,
    );
    assert_eq!(
        cmds,
        vec![Command::FenceAgent {
            agent_id: 1,
            observed_generation: Some(generation),
            observed_heartbeat_ms: None,
        }]
    );
    assert_eq!(fenced_agents(&cmds), vec![1]);
}

/// A voter whose wall clock ran 60 s ahead led the metastore for a while
/// and logged the agent's heartbeats with its stamps; then it lost the
/// leadership to one whose clock is right (or the leader's clock was
/// stepped back). The stamps must not keep a silent agent's lease alive:
/// only the silence the current leader measured counts.
#[test]
fn heartbeats_stamped_by_a_clock_ahead_do_not_keep_a_silent_agent_alive() {
    let mut s = with_agents(2);
    create(&mut s, "t", 1, 2);
    let leader = topic(&s).partitions[0].leader.expect("a leader");
    logged_heartbeat(&mut s, leader, T0 + 60_000);
    assert_eq!(
        s.agent(leader).expect("agent").last_heartbeat_ms,
        T0 + 60_000
    );
    let events = settle(&mut s, &[leader]);
    assert!(events.contains(&MetaEvent::AgentFenced { agent_id: leader }));
    assert_ne!(
        topic(&s).partitions[0].leader,
        Some(leader),
        "its partition has a new leader"
    );
}

#[test]
fn a_silent_leader_is_replaced_by_the_next_in_sync_replica_with_a_new_epoch() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    let before = topic(&s).partitions[0].clone();
    let old = before.leader.unwrap();
    let events = settle(&mut s, &[old]);
    let after = topic(&s).partitions[0].clone();
    assert_eq!(
        after.leader,
        Some(before.replicas[1]),
        "next replica in assignment order"
    );
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert_eq!(
        after.isr,
        before.replicas[1..].to_vec(),
        "the fenced agent leaves the ISR"
    );
    assert!(s.agent(old).unwrap().fenced);
    assert!(events.contains(&MetaEvent::AgentFenced { agent_id: old }));
    assert!(events.iter().any(|e| matches!(
        e,
        MetaEvent::LeaderChanged {
            leader: Some(_),
            ..
        }
    )));
}

#[test]
fn with_no_live_in_sync_replica_the_partition_goes_offline_and_comes_back() {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    settle(&mut s, &[1]);
    let p = topic(&s).partitions[0].clone();
    assert_eq!(
        (p.leader, p.leader_epoch, p.isr.clone()),
        (None, 1, vec![1])
    );
    assert!(
        plan(&s, silence(&[1]), LEASE).is_empty(),
        "offline and nobody alive: nothing to do"
    );

    logged_heartbeat(&mut s, 1, T0 + 5);
    settle(&mut s, &[]);
    let p = topic(&s).partitions[0].clone();
    assert_eq!(
        (p.leader, p.leader_epoch),
        (Some(1), 2),
        "the returning replica leads with a new epoch"
    );
}

#[test]
fn fenced_followers_leave_the_isr_but_the_leader_stays() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    let before = topic(&s).partitions[0].clone();
    let leader = before.leader.unwrap();
    let followers: Vec<AgentId> = before
        .replicas
        .iter()
        .copied()
        .filter(|a| *a != leader)
        .collect();
    settle(&mut s, &followers);
    let after = topic(&s).partitions[0].clone();
    assert_eq!((after.leader, after.leader_epoch), (Some(leader), 0));
    assert_eq!(after.isr, vec![leader]);
}

#[test]
fn out_of_sync_replicas_are_never_elected_by_leases() {
    let mut s = with_agents(2);
    create(&mut s, "t", 1, 2);
    let p = topic(&s).partitions[0].clone();
    let leader = p.replicas[0];
    let t = topic(&s);
    let mut ev = Vec::new();
    s.apply(
        T0,
        Command::AlterIsr {
            topic_id: t.id,
            partition: 0,
            leader,
            leader_epoch: 0,
            isr: vec![leader],
            expected_partition_epoch: None,
        },
        &mut ev,
    )
    .unwrap();
    settle(&mut s, &[leader]);
    let p = topic(&s).partitions[0].clone();
    assert_eq!(
        p.leader, None,
        "the follower was not in sync; unclean election is an explicit admin act"
    );
    assert_eq!(p.isr, vec![leader]);
}

#[test]
fn already_fenced_agents_are_not_fenced_again() {
    let mut s = with_agents(2);
    settle(&mut s, &[1, 2]);
    assert!(s.agents().all(|a| a.fenced));
    assert!(plan(&s, silence(&[1, 2]), LEASE).is_empty());
}

#[test]
fn leadership_returns_to_the_preferred_replica_once_it_is_in_sync_again() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    let preferred = topic(&s).partitions[0].replicas[0];
    // the preferred leader goes silent: another in-sync replica takes over
    settle(&mut s, &[preferred]);
    let p = topic(&s).partitions[0].clone();
    assert_ne!(p.leader, Some(preferred));
    assert!(!p.isr.contains(&preferred));
    // it comes back: while it is not in the ISR, nothing moves
    let later = T0 + 10;
    register(&mut s, preferred);
    logged_heartbeat(&mut s, preferred, later);
    let quiet = plan(&s, silence(&[]), LEASE);
    assert!(quiet.is_empty(), "not in sync yet: {quiet:?}");
    // the leader adds it to the ISR once it caught up; then it leads again
    let mut ev = Vec::new();
    let mut isr = p.isr.clone();
    isr.push(preferred);
    s.apply(
        later,
        Command::AlterIsr {
            topic_id: topic(&s).id,
            partition: 0,
            leader: p.leader.unwrap_or_default(),
            leader_epoch: p.leader_epoch,
            isr,
            expected_partition_epoch: Some(p.partition_epoch),
        },
        &mut ev,
    )
    .expect("the leader grows the ISR");
    settle(&mut s, &[]);
    let back = topic(&s).partitions[0].clone();
    assert_eq!(back.leader, Some(preferred));
    assert_eq!(
        back.leader_epoch,
        p.leader_epoch + 1,
        "a leader change bumps the epoch"
    );
    assert!(
        plan(&s, silence(&[]), LEASE).is_empty(),
        "and then all is quiet"
    );
}

#[test]
fn a_reassignment_completes_once_every_target_replica_is_in_sync() {
    let mut s = with_agents(4);
    create(&mut s, "t", 1, 3);
    let id = topic(&s).id;
    let mut ev = Vec::new();
    s.apply(
        T0,
        Command::AlterReassignment {
            topic_id: id,
            partition: 0,
            target: Some(vec![4, 2, 3]),
            expected_partition_epoch: None,
        },
        &mut ev,
    )
    .expect("reassign");
    assert!(
        plan(&s, silence(&[]), LEASE).is_empty(),
        "4 is not in sync yet"
    );
    let p = topic(&s).partitions[0].clone();
    s.apply(
        T0,
        Command::AlterIsr {
            topic_id: id,
            partition: 0,
            leader: 1,
            leader_epoch: p.leader_epoch,
            isr: vec![1, 2, 3, 4],
            expected_partition_epoch: Some(p.partition_epoch),
        },
        &mut ev,
    )
    .expect("4 caught up");
    // the preferred replica (4, first of the target) takes over first,
    // then the move completes
    settle(&mut s, &[]);
    let p = topic(&s).partitions[0].clone();
    assert_eq!((p.replicas.clone(), p.leader), (vec![4, 2, 3], Some(4)));
    assert!(!p.is_reassigning());
}

#[test]
fn leadership_leaves_a_draining_agent() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    let mut ev = Vec::new();
    s.apply(
        T0,
        Command::SetAgentDraining {
            agent_id: 1,
            draining: true,
        },
        &mut ev,
    )
    .expect("drain");
    settle(&mut s, &[]);
    assert_eq!(topic(&s).partitions[0].leader, Some(2));
}

/// Plans once and applies, returning each command's reason.
fn step(s: &mut MetaState, silent: &[AgentId]) -> Vec<String> {
    let cmds = plan(s, silence(silent), LEASE);
    let reasons = cmds
        .iter()
        .map(|c| reason(s, c, silence(silent), LEASE).expect("every planned command has a reason"))
        .collect();
    let mut events = Vec::new();
    for c in cmds {
        s.apply(T0, c, &mut events).expect("valid");
    }
    reasons
}

#[test]
fn every_lease_decision_says_why() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    let before = topic(&s).partitions[0].clone();
    let (old, next) = (before.replicas[0], before.replicas[1]);
    assert_eq!(
        step(&mut s, &[old]),
        [format!(
            "agent {old} fenced: silent for 2000 ms, longer than its 1000 ms lease"
        )]
    );
    let moved = step(&mut s, &[old]);
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(
        moved[0].starts_with(&format!(
            "partition t-0: leader {old} -> {next}, because agent {old} is fenced"
        )),
        "{moved:?}"
    );

    // a lone replica that falls silent takes its partition offline, and back
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    step(&mut s, &[1]);
    let offline = step(&mut s, &[1]);
    assert!(
        offline[0].starts_with("partition t-0 offline"),
        "{offline:?}"
    );
    logged_heartbeat(&mut s, 1, T0 + 5);
    let back = step(&mut s, &[]);
    assert!(
        back[0].contains("agent 1, in sync and live again, leads it"),
        "{back:?}"
    );
}

#[test]
fn a_partition_durable_in_object_storage_moves_to_any_live_replica_and_takes_returning_ones_back() {
    let mut s = with_agents(3);
    let mut spec = crate::types::CreateTopic::new("t", 1, 3);
    spec.configs
        .insert("durability".into(), "object-store".into());
    let mut ev = Vec::new();
    s.apply(
        T0,
        Command::CreateTopic {
            id: uuid::Uuid::new_v4(),
            spec,
            validate_only: false,
        },
        &mut ev,
    )
    .expect("created");
    let t = topic(&s);
    let first = t.partitions[0].leader.expect("a leader");
    // the followers copy nothing, so a leader would drop them from the ISR
    s.apply(
        T0,
        Command::AlterIsr {
            topic_id: t.id,
            partition: 0,
            leader: first,
            leader_epoch: 0,
            isr: vec![first],
            expected_partition_epoch: None,
        },
        &mut ev,
    )
    .expect("the ISR shrinks to the leader");
    settle(&mut s, &[first]);
    let p = topic(&s).partitions[0].clone();
    let next = p.leader.expect("another live replica leads");
    assert_ne!(next, first);
    assert_eq!(p.leader_epoch, 1);
    let mut isr = p.isr.clone();
    isr.sort_unstable();
    let mut live: Vec<AgentId> = p.replicas.iter().copied().filter(|a| *a != first).collect();
    live.sort_unstable();
    assert_eq!(isr, live, "the live replicas, not only the old ISR");

    logged_heartbeat(&mut s, first, T0 + 5);
    settle(&mut s, &[]);
    let p = topic(&s).partitions[0].clone();
    assert_eq!(p.isr.len(), 3, "the returning replica may lead again");
}
