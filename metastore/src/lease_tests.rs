use super::*;
use crate::command::CommandOutput;
use crate::state::testkit::{create, register, with_agents, T0};
use crate::types::{MetaEvent, TopicInfo};

const LEASE: u64 = 1_000;

/// Runs the engine and applies its commands, as the driver does, until it is quiet.
fn settle(s: &mut MetaState, now: i64, leader_since: i64) -> Vec<MetaEvent> {
    let mut events = Vec::new();
    for _ in 0..4 {
        let cmds = plan(s, now, leader_since, LEASE);
        if cmds.is_empty() {
            return events;
        }
        for c in cmds {
            s.apply(now, c, &mut events)
                .expect("the engine proposes only valid commands");
        }
    }
    panic!("the lease engine did not settle");
}

fn heartbeat(s: &mut MetaState, id: AgentId, now: i64) {
    let mut ev = Vec::new();
    assert_eq!(
        s.apply(now, Command::Heartbeat { agent_id: id }, &mut ev),
        Ok(CommandOutput::Done)
    );
}

fn topic(s: &MetaState) -> TopicInfo {
    TopicInfo::clone(s.topic("t").expect("topic t"))
}

#[test]
fn nothing_happens_while_leases_hold() {
    let mut s = with_agents(3);
    create(&mut s, "t", 3, 3);
    assert!(
        plan(&s, T0 + LEASE as i64, T0, LEASE).is_empty(),
        "a lease lasts exactly lease_ms"
    );
    assert!(!plan(&s, T0 + LEASE as i64 + 1, T0, LEASE).is_empty());
}

#[test]
fn a_new_metastore_leader_waits_half_a_lease_before_fencing_an_agent_silent_since_before() {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    let took_over = T0 + 10 * LEASE as i64;
    let half = LEASE as i64 / 2;
    assert!(plan(&s, took_over + 1, took_over, LEASE).is_empty());
    assert!(plan(&s, took_over + half, took_over, LEASE).is_empty());
    let cmds = plan(&s, took_over + half + 1, took_over, LEASE);
    assert_eq!(
        cmds,
        vec![Command::FenceAgent {
            agent_id: 1,
            observed_heartbeat_ms: T0
        }]
    );
    assert!(fences_agents(&cmds));
}

#[test]
fn a_new_metastore_leader_keeps_the_lease_an_agent_renewed_just_before_it_took_over() {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    let took_over = T0 + 10 * LEASE as i64;
    heartbeat(&mut s, 1, took_over - 100);
    let expires = took_over - 100 + LEASE as i64;
    assert!(plan(&s, expires, took_over, LEASE).is_empty());
    assert!(!plan(&s, expires + 1, took_over, LEASE).is_empty());
}

#[test]
fn a_silent_leader_is_replaced_by_the_next_in_sync_replica_with_a_new_epoch() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    let before = topic(&s).partitions[0].clone();
    let old = before.leader.unwrap();
    let now = T0 + 2 * LEASE as i64;
    for a in before.replicas.iter().filter(|a| **a != old) {
        heartbeat(&mut s, *a, now);
    }
    let events = settle(&mut s, now, T0);
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
    let now = T0 + 2 * LEASE as i64;
    settle(&mut s, now, T0);
    let p = topic(&s).partitions[0].clone();
    assert_eq!(
        (p.leader, p.leader_epoch, p.isr.clone()),
        (None, 1, vec![1])
    );
    assert!(
        plan(&s, now + 1, T0, LEASE).is_empty(),
        "offline and nobody alive: nothing to do"
    );

    heartbeat(&mut s, 1, now + 5);
    settle(&mut s, now + 5, T0);
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
    let now = T0 + 2 * LEASE as i64;
    heartbeat(&mut s, leader, now);
    settle(&mut s, now, T0);
    let after = topic(&s).partitions[0].clone();
    assert_eq!((after.leader, after.leader_epoch), (Some(leader), 0));
    assert_eq!(after.isr, vec![leader]);
}

#[test]
fn out_of_sync_replicas_are_never_elected_by_leases() {
    let mut s = with_agents(2);
    create(&mut s, "t", 1, 2);
    let p = topic(&s).partitions[0].clone();
    let (leader, follower) = (p.replicas[0], p.replicas[1]);
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
    let now = T0 + 2 * LEASE as i64;
    heartbeat(&mut s, follower, now);
    settle(&mut s, now, T0);
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
    let now = T0 + 2 * LEASE as i64;
    settle(&mut s, now, T0);
    assert!(s.agents().all(|a| a.fenced));
    assert!(plan(&s, now + 10 * LEASE as i64, T0, LEASE).is_empty());
    register(&mut s, 3);
    assert!(
        plan(&s, T0 + 1, T0, LEASE).is_empty(),
        "a fresh registration holds a lease"
    );
}

#[test]
fn leadership_returns_to_the_preferred_replica_once_it_is_in_sync_again() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    let preferred = topic(&s).partitions[0].replicas[0];
    // the preferred leader goes silent: another in-sync replica takes over
    let now = T0 + LEASE as i64 + 1;
    for a in [1, 2, 3] {
        if a != preferred {
            heartbeat(&mut s, a, now);
        }
    }
    settle(&mut s, now, T0);
    let p = topic(&s).partitions[0].clone();
    assert_ne!(p.leader, Some(preferred));
    assert!(!p.isr.contains(&preferred));
    // it comes back: while it is not in the ISR, nothing moves
    let later = now + 10;
    register(&mut s, preferred);
    heartbeat(&mut s, preferred, later);
    let quiet = plan(&s, later, T0, LEASE);
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
    settle(&mut s, later, T0);
    let back = topic(&s).partitions[0].clone();
    assert_eq!(back.leader, Some(preferred));
    assert_eq!(
        back.leader_epoch,
        p.leader_epoch + 1,
        "a leader change bumps the epoch"
    );
    assert!(
        plan(&s, later, T0, LEASE).is_empty(),
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
    assert!(plan(&s, T0, T0, LEASE).is_empty(), "4 is not in sync yet");
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
    settle(&mut s, T0, T0);
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
    settle(&mut s, T0, T0);
    assert_eq!(topic(&s).partitions[0].leader, Some(2));
}
