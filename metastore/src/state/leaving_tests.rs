use super::super::testkit::*;
use super::*;
use crate::command::Command;
use crate::lease;
use crate::types::{AgentAddrs, PartitionInfo};

const LEASE: std::time::Duration = std::time::Duration::from_secs(3);

fn partitions(s: &MetaState, topic: &str) -> Vec<PartitionInfo> {
    s.topic(topic).expect("topic").partitions.clone()
}

fn registration(id: AgentId, instance: Option<uuid::Uuid>, port: u16) -> AgentRegistration {
    AgentRegistration {
        id,
        addrs: AgentAddrs {
            connect: None,
            quic: Some(format!("10.0.0.{id}:{port}")),
            ..AgentAddrs::default()
        },
        rack: None,
        instance,
    }
}

#[test]
fn shutdown_hands_every_leadership_to_an_in_sync_replica_in_one_step() {
    let mut s = with_agents(3);
    create(&mut s, "t", 6, 3);
    let before = partitions(&s, "t");
    let leaving = before[0].leader.expect("a leader");
    let led = before.iter().filter(|p| p.leader == Some(leaving)).count();
    let (r, events) = apply_at(&mut s, T0 + 1, Command::ShutdownAgent { agent_id: leaving });
    assert_eq!(r.expect("applied"), CommandOutput::Count(led));
    let info = s.agent(leaving).expect("still registered");
    assert!(info.fenced && info.shut_down, "{info:?}");
    assert_eq!(events[0], MetaEvent::AgentFenced { agent_id: leaving });
    for (old, new) in before.iter().zip(partitions(&s, "t")) {
        assert!(!new.isr.contains(&leaving), "{new:?}");
        assert_eq!(new.isr.len(), 2);
        if old.leader == Some(leaving) {
            let next = new.leader.expect("a new leader");
            assert!(next != leaving && old.isr.contains(&next));
            // the first other in-sync replica in assignment order
            assert_eq!(
                Some(next),
                old.replicas.iter().copied().find(|r| *r != leaving)
            );
            assert_eq!(new.leader_epoch, old.leader_epoch + 1);
        } else {
            assert_eq!(
                (new.leader, new.leader_epoch),
                (old.leader, old.leader_epoch)
            );
            assert_eq!(new.partition_epoch, old.partition_epoch + 1);
        }
    }
    // the lease engine does not give anything back while the agent is away
    let plan = lease::plan(&s, |_| std::time::Duration::ZERO, LEASE);
    assert!(plan.is_empty(), "{plan:?}");
}

#[test]
fn a_partition_with_no_other_in_sync_replica_stays_with_the_agent() {
    let mut s = with_agents(2);
    create(&mut s, "single", 2, 1);
    let before = partitions(&s, "single");
    let leaving = before[0].leader.expect("a leader");
    let r = apply(&mut s, Command::ShutdownAgent { agent_id: leaving });
    assert_eq!(r.expect("applied"), CommandOutput::Count(0));
    let after = partitions(&s, "single");
    assert_eq!(after[0], before[0], "closes with the agent, as in Kafka");
    assert_eq!(after[1], before[1]);
}

#[test]
fn an_agent_that_shut_down_registers_again_and_leads_once_back_in_sync() {
    let mut s = with_agents(3);
    let t = create(&mut s, "t", 1, 3);
    let preferred = t.partitions[0].replicas[0];
    apply(
        &mut s,
        Command::ShutdownAgent {
            agent_id: preferred,
        },
    )
    .expect("shut down");
    assert_ne!(partitions(&s, "t")[0].leader, Some(preferred));
    let mut again = registration(preferred, Some(uuid::Uuid::new_v4()), 9093);
    again.addrs.kafka = Some("127.0.0.1:9092".into());
    apply(
        &mut s,
        Command::RegisterAgent {
            registration: again,
        },
    )
    .expect("a restart after a controlled shutdown registers");
    let info = s.agent(preferred).expect("agent");
    assert!(!info.fenced && !info.shut_down, "{info:?}");
    // caught up: the leader adds it back, then the lease engine returns leadership
    let p = partitions(&s, "t")[0].clone();
    let mut isr = p.isr.clone();
    isr.push(preferred);
    apply(
        &mut s,
        Command::AlterIsr {
            topic_id: t.id,
            partition: 0,
            leader: p.leader.expect("leader"),
            leader_epoch: p.leader_epoch,
            isr,
            expected_partition_epoch: Some(p.partition_epoch),
        },
    )
    .expect("back in the ISR");
    let plan = lease::plan(&s, |_| std::time::Duration::ZERO, LEASE);
    assert!(
        matches!(plan.as_slice(), [Command::ReassignLeadership { leader: Some(l), .. }] if *l == preferred),
        "{plan:?}"
    );
}

#[test]
fn shutdown_of_an_unknown_agent_is_refused() {
    let mut s = with_agents(1);
    assert!(matches!(
        apply(&mut s, Command::ShutdownAgent { agent_id: 9 }),
        Err(MetaError::UnknownAgent { agent_id: 9 })
    ));
}

#[test]
fn a_second_process_with_a_live_agents_id_is_refused() {
    let mut s = MetaState::default();
    let first = uuid::Uuid::new_v4();
    let register = |s: &mut MetaState, instance, port| {
        apply(
            s,
            Command::RegisterAgent {
                registration: registration(1, instance, port),
            },
        )
    };
    register(&mut s, Some(first), 9093).expect("the first registers");
    let err = register(&mut s, Some(uuid::Uuid::new_v4()), 9094).unwrap_err();
    assert!(
        matches!(&err, MetaError::DuplicateAgent { agent_id: 1, addr } if addr == "10.0.0.1:9093"),
        "{err:?}"
    );
    assert_eq!(
        s.agent(1).expect("agent").addrs.quic.as_deref(),
        Some("10.0.0.1:9093"),
        "the running agent's record is untouched"
    );
    // the same agent restarted (same data folder) is not a duplicate
    register(&mut s, Some(first), 9093).expect("a restart of the same instance");
    // an agent of a version without instances is not judged
    register(&mut s, None, 9093).expect("no instance: accepted");
    register(&mut s, Some(first), 9093).expect("records the instance again");
    // once its lease ran out (fenced), another process may take the id over
    let generation = s.agent(1).expect("agent").lease_generation;
    apply(
        &mut s,
        Command::FenceAgent {
            agent_id: 1,
            observed_generation: Some(generation),
            observed_heartbeat_ms: None,
        },
    )
    .expect("fenced");
    let second = uuid::Uuid::new_v4();
    register(&mut s, Some(second), 9094).expect("a replacement after the lease ran out");
    assert_eq!(s.agent(1).expect("agent").instance, Some(second));
}

#[test]
fn only_a_fenced_agent_can_be_removed() {
    let mut s = with_agents(3);
    create(&mut s, "t", 3, 3);
    assert!(matches!(
        apply(&mut s, Command::RemoveAgent { agent_id: 2 }),
        Err(MetaError::AgentAlive { agent_id: 2 })
    ));
    assert!(matches!(
        apply(&mut s, Command::RemoveAgent { agent_id: 7 }),
        Err(MetaError::UnknownAgent { agent_id: 7 })
    ));
    apply(&mut s, Command::ShutdownAgent { agent_id: 2 }).expect("stopped");
    let (r, events) = apply_at(&mut s, T0, Command::RemoveAgent { agent_id: 2 });
    assert_eq!(r.expect("removed"), CommandOutput::Done);
    assert_eq!(events, vec![MetaEvent::AgentRemoved { agent_id: 2 }]);
    assert!(s.agent(2).is_none());
    assert!(partitions(&s, "t").iter().all(|p| !p.isr.contains(&2)));
}
