use super::*;
use crate::command::CommandOutput;
use crate::lease;
use crate::state::testkit::{apply, create, register, with_agents};
use crate::types::{AgentAddrs, AgentRegistration};

const LEASE: std::time::Duration = std::time::Duration::from_secs(1);

fn drain(s: &mut MetaState, agent_id: AgentId) {
    apply(
        s,
        Command::SetAgentDraining {
            agent_id,
            draining: true,
        },
    )
    .expect("drain");
}

fn all(s: &MetaState) -> Vec<PartitionInfo> {
    s.topics().flat_map(|t| t.partitions.clone()).collect()
}

/// Leaders add every caught-up adding replica to the ISR, as replication would.
fn catch_up(s: &mut MetaState) {
    let topics: Vec<TopicInfo> = s.topics().map(|t| TopicInfo::clone(t)).collect();
    for t in topics {
        for p in t
            .partitions
            .iter()
            .filter(|p| !p.adding_replicas.is_empty())
        {
            let mut isr = p.isr.clone();
            isr.extend(p.adding_replicas.iter().filter(|a| !p.isr.contains(a)));
            apply(
                s,
                Command::AlterIsr {
                    topic_id: t.id,
                    partition: p.index,
                    leader: p.leader.expect("leader"),
                    leader_epoch: p.leader_epoch,
                    isr,
                    expected_partition_epoch: Some(p.partition_epoch),
                },
            )
            .expect("grow the ISR");
        }
    }
}

/// Runs balancer, replication and lease engine until nothing moves; checks
/// at every step that no partition has fewer replicas or in-sync copies
/// than it started with and that moves stay within the limit.
fn settle(s: &mut MetaState, max_in_flight: usize) -> usize {
    let rf: Vec<usize> = all(s).iter().map(|p| p.replicas.len()).collect();
    let mut moves = 0;
    for _ in 0..200 {
        let cmds = plan(s, max_in_flight);
        moves += cmds.len();
        for c in cmds.clone() {
            apply(s, c).expect("the balancer proposes valid moves");
        }
        let in_flight = all(s).iter().filter(|p| p.is_reassigning()).count();
        assert!(in_flight <= max_in_flight, "{in_flight} moves under way");
        for (p, rf) in all(s).iter().zip(&rf) {
            assert!(p.target_replicas().len() == *rf && p.isr.len() >= (*rf).min(p.replicas.len()));
        }
        catch_up(s);
        let mut leased = false;
        for c in lease::plan(s, |_| std::time::Duration::ZERO, LEASE) {
            leased = true;
            apply(s, c).expect("the lease engine proposes valid commands");
        }
        for (p, rf) in all(s).iter().zip(&rf) {
            assert!(
                p.isr.len() >= *rf,
                "an in-sync copy left before its successor joined"
            );
        }
        if cmds.is_empty() && !leased {
            return moves;
        }
    }
    panic!("the balancer did not settle");
}

fn counts(s: &MetaState, agents: &[AgentId]) -> (Vec<usize>, Vec<usize>) {
    let ps = all(s);
    let replicas = agents
        .iter()
        .map(|a| ps.iter().filter(|p| p.replicas.contains(a)).count())
        .collect();
    let leaders = agents
        .iter()
        .map(|a| ps.iter().filter(|p| p.leader == Some(*a)).count())
        .collect();
    (replicas, leaders)
}

#[test]
fn a_new_agent_takes_a_fair_share_of_replicas_and_leaders() {
    let mut s = with_agents(3);
    create(&mut s, "a", 6, 3);
    create(&mut s, "b", 2, 2);
    assert!(plan(&s, 3).is_empty(), "a balanced cluster stays put");
    register(&mut s, 4);
    assert!(plan(&s, 0).is_empty(), "a limit of 0 turns balancing off");
    assert!(settle(&mut s, 2) > 0);
    let (replicas, leaders) = counts(&s, &[1, 2, 3, 4]);
    // 22 replicas and 8 leaders over four agents
    assert!(replicas.iter().all(|n| (5..=6).contains(n)), "{replicas:?}");
    assert!(leaders.iter().all(|n| *n == 2), "{leaders:?}");
    assert!(all(&s)
        .iter()
        .all(|p| p.leader == p.replicas.first().copied()));
    assert!(plan(&s, 3).is_empty(), "and stays put once balanced");
}

#[test]
fn draining_moves_every_replica_off_the_agent() {
    let mut s = with_agents(4);
    create(&mut s, "a", 8, 3);
    drain(&mut s, 2);
    settle(&mut s, 3);
    let (replicas, leaders) = counts(&s, &[1, 2, 3, 4]);
    assert_eq!((replicas[1], leaders[1]), (0, 0));
    assert_eq!(replicas.iter().sum::<usize>(), 24);
    assert!(all(&s)
        .iter()
        .all(|p| p.replicas.len() == 3 && p.isr.len() == 3));
}

#[test]
fn a_drain_with_nowhere_to_go_moves_only_leadership() {
    let mut s = with_agents(3);
    create(&mut s, "a", 3, 3);
    drain(&mut s, 1);
    assert!(plan(&s, 3).is_empty(), "three replicas need three agents");
    for c in lease::plan(&s, |_| std::time::Duration::ZERO, LEASE) {
        apply(&mut s, c).expect("valid");
    }
    assert!(all(&s).iter().all(|p| p.leader != Some(1)));
    assert!(all(&s).iter().all(|p| p.replicas.len() == 3));
}

#[test]
fn a_removed_agents_replicas_are_placed_on_the_others() {
    let mut s = with_agents(4);
    create(&mut s, "a", 8, 3);
    apply(&mut s, Command::ShutdownAgent { agent_id: 2 }).expect("2 stops");
    assert!(plan(&s, 3).is_empty(), "a stopped agent keeps its replicas");
    apply(&mut s, Command::RemoveAgent { agent_id: 2 }).expect("2 is removed");
    let mut quiet = false;
    for _ in 0..100 {
        let cmds = plan(&s, 3);
        let mut busy = !cmds.is_empty();
        for c in cmds {
            apply(&mut s, c).expect("the balancer proposes valid moves");
        }
        catch_up(&mut s);
        for c in lease::plan(&s, |_| std::time::Duration::ZERO, LEASE) {
            busy = true;
            apply(&mut s, c).expect("the lease engine proposes valid commands");
        }
        if !busy {
            quiet = true;
            break;
        }
    }
    assert!(quiet, "the balancer did not settle");
    let (replicas, leaders) = counts(&s, &[1, 2, 3, 4]);
    assert_eq!((replicas[1], leaders[1]), (0, 0));
    assert_eq!(replicas.iter().sum::<usize>(), 24);
    assert!(all(&s)
        .iter()
        .all(|p| p.replicas.len() == 3 && p.isr.len() == 3 && !p.is_reassigning()));
}

#[test]
fn a_partition_with_a_lagging_replica_is_not_moved() {
    let mut s = with_agents(4);
    create(&mut s, "a", 1, 3);
    let t = s.topic("a").expect("topic").clone();
    let p = &t.partitions[0];
    assert_eq!(p.replicas, vec![1, 2, 3]);
    apply(
        &mut s,
        Command::AlterIsr {
            topic_id: t.id,
            partition: 0,
            leader: 1,
            leader_epoch: p.leader_epoch,
            isr: vec![1, 2],
            expected_partition_epoch: Some(p.partition_epoch),
        },
    )
    .expect("shrink");
    drain(&mut s, 2);
    assert!(
        plan(&s, 3).is_empty(),
        "3 lags: moving 2 away would rest on one copy"
    );
}

#[test]
fn moves_keep_replicas_spread_over_racks() {
    let mut s = MetaState::default();
    for (id, rack) in [(1, "a"), (2, "b"), (3, "c"), (4, "a")] {
        let registration = AgentRegistration {
            id,
            addrs: AgentAddrs::default(),
            rack: Some(rack.into()),
            instance: None,
        };
        let out = apply(&mut s, Command::RegisterAgent { registration });
        assert!(matches!(out, Ok(CommandOutput::Agent(_))));
        if id == 3 {
            create(&mut s, "t", 6, 3);
        }
    }
    settle(&mut s, 3);
    for p in all(&s) {
        let racks: BTreeSet<AgentId> = p
            .replicas
            .iter()
            .map(|r| if *r == 4 { 1 } else { *r })
            .collect();
        assert_eq!(
            racks.len(),
            3,
            "{:?} holds two replicas in one rack",
            p.replicas
        );
    }
    let (replicas, _) = counts(&s, &[1, 2, 3, 4]);
    assert!(
        replicas[3] > 0,
        "agent 4 shares rack a's load: {replicas:?}"
    );
}

#[test]
fn at_most_max_in_flight_moves_start() {
    let mut s = with_agents(3);
    create(&mut s, "a", 12, 1);
    register(&mut s, 4);
    register(&mut s, 5);
    let cmds = plan(&s, 2);
    assert_eq!(cmds.len(), 2);
    for c in cmds {
        apply(&mut s, c).expect("valid");
    }
    assert!(plan(&s, 2).is_empty(), "two under way already");
}

#[test]
fn a_pair_with_nothing_to_move_does_not_stop_the_others() {
    let mut s = with_agents(4);
    let spec = crate::types::CreateTopic {
        name: "a".into(),
        partitions: -1,
        replication_factor: -1,
        assignments: vec![vec![1, 2], vec![1, 2], vec![1, 2], vec![3, 4]],
        ..Default::default()
    };
    apply(
        &mut s,
        Command::CreateTopic {
            id: uuid::Uuid::new_v4(),
            spec,
            validate_only: false,
        },
    )
    .expect("create");
    // agent 2 lags on every partition it shares with agent 1: moving 1's
    // replicas away would rest on a lagging copy, moving 2's would not
    let t = s.topic("a").expect("topic").clone();
    for p in &t.partitions[..3] {
        apply(
            &mut s,
            Command::AlterIsr {
                topic_id: t.id,
                partition: p.index,
                leader: 1,
                leader_epoch: p.leader_epoch,
                isr: vec![1],
                expected_partition_epoch: Some(p.partition_epoch),
            },
        )
        .expect("shrink");
    }
    let moves = plan(&s, 1);
    assert_eq!(moves.len(), 1, "{moves:?}");
    let Command::AlterReassignment {
        target: Some(target),
        ..
    } = &moves[0]
    else {
        panic!("{moves:?}")
    };
    assert_eq!(
        target,
        &vec![1, 3],
        "2's replica moves to the least loaded agent"
    );
}
