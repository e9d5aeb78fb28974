use super::*;
use crate::command::Command;
use crate::state::testkit::{apply, create, register, with_agents};
use crate::types::{AgentInfo, LeaderAndEpoch};

fn partition(s: &MetaState, topic: &str) -> PartitionInfo {
    s.topic(topic).expect("topic").partitions[0].clone()
}

fn move_to(s: &mut MetaState, topic: &str, target: Option<Vec<AgentId>>) -> CommandResult {
    let topic_id = s.topic(topic).expect("topic").id;
    apply(
        s,
        Command::AlterReassignment {
            topic_id,
            partition: 0,
            target,
            expected_partition_epoch: None,
        },
    )
}

fn complete(s: &mut MetaState, topic: &str) -> CommandResult {
    let t = s.topic(topic).expect("topic").clone();
    apply(
        s,
        Command::CompleteReassignment {
            topic_id: t.id,
            partition: 0,
            expected_partition_epoch: t.partitions[0].partition_epoch,
        },
    )
}

fn grow_isr(s: &mut MetaState, topic: &str, add: AgentId) {
    let t = s.topic(topic).expect("topic").clone();
    let p = &t.partitions[0];
    let mut isr = p.isr.clone();
    isr.push(add);
    apply(
        s,
        Command::AlterIsr {
            topic_id: t.id,
            partition: 0,
            leader: p.leader.expect("a leader"),
            leader_epoch: p.leader_epoch,
            isr,
            expected_partition_epoch: Some(p.partition_epoch),
        },
    )
    .expect("the leader adds a caught-up replica");
}

#[test]
fn a_reassignment_keeps_the_original_replicas_until_every_target_replica_is_in_sync() {
    let mut s = with_agents(4);
    create(&mut s, "t", 1, 3);
    let before = partition(&s, "t");
    assert_eq!(before.replicas, vec![1, 2, 3]);

    move_to(&mut s, "t", Some(vec![4, 2, 3])).expect("reassign");
    let during = partition(&s, "t");
    assert_eq!(
        during.replicas,
        vec![4, 2, 3, 1],
        "target first, then the leaving"
    );
    assert_eq!(
        (
            during.adding_replicas.clone(),
            during.removing_replicas.clone()
        ),
        (vec![4], vec![1])
    );
    assert_eq!(
        during.isr,
        vec![1, 2, 3],
        "the new replica joins once caught up"
    );
    assert_eq!(during.leader, Some(1));
    assert!(during.partition_epoch > before.partition_epoch);
    assert!(matches!(
        complete(&mut s, "t"),
        Err(MetaError::StaleRequest { .. })
    ));

    grow_isr(&mut s, "t", 4);
    let out = complete(&mut s, "t").expect("complete");
    let after = partition(&s, "t");
    assert_eq!(after.replicas, vec![4, 2, 3]);
    assert_eq!(after.isr, vec![2, 3, 4]);
    assert!(!after.is_reassigning());
    assert_eq!(
        out,
        CommandOutput::Leader(LeaderAndEpoch {
            leader: Some(4),
            leader_epoch: before.leader_epoch + 1
        }),
        "a leader outside the target hands over to the first target replica in sync"
    );
}

#[test]
fn cancelling_reverts_to_the_original_replicas() {
    let mut s = with_agents(4);
    create(&mut s, "t", 1, 3);
    move_to(&mut s, "t", Some(vec![4, 2, 3])).expect("reassign");
    grow_isr(&mut s, "t", 4);
    move_to(&mut s, "t", None).expect("cancel");
    let p = partition(&s, "t");
    // as in Kafka, the original replicas in their current order
    assert_eq!(
        (p.replicas.clone(), p.isr.clone()),
        (vec![2, 3, 1], vec![1, 2, 3])
    );
    assert!(!p.is_reassigning());
    assert_eq!(
        move_to(&mut s, "t", None),
        Err(MetaError::NoReassignmentInProgress {
            topic: "t".into(),
            partition: 0
        })
    );
}

#[test]
fn a_new_target_replaces_the_one_under_way_from_the_same_original_replicas() {
    let mut s = with_agents(5);
    create(&mut s, "t", 1, 3);
    move_to(&mut s, "t", Some(vec![4, 2, 3])).expect("reassign");
    grow_isr(&mut s, "t", 4);
    move_to(&mut s, "t", Some(vec![5, 2, 3])).expect("reassign again");
    let p = partition(&s, "t");
    assert_eq!(p.replicas, vec![5, 2, 3, 1]);
    assert_eq!(
        (p.adding_replicas.clone(), p.removing_replicas.clone()),
        (vec![5], vec![1])
    );
    assert_eq!(p.isr, vec![1, 2, 3], "4 is no longer a replica");
}

#[test]
fn a_reordered_target_completes_at_once() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    move_to(&mut s, "t", Some(vec![3, 1, 2])).expect("reorder");
    let p = partition(&s, "t");
    assert_eq!(p.replicas, vec![3, 1, 2]);
    assert!(!p.is_reassigning());
    assert_eq!(
        p.leader,
        Some(1),
        "the lease engine moves leadership, not this command"
    );
}

#[test]
fn bad_targets_and_stale_moves_are_refused() {
    let mut s = with_agents(3);
    create(&mut s, "t", 1, 3);
    for bad in [vec![], vec![1, 1], vec![1, 9]] {
        assert!(
            matches!(
                move_to(&mut s, "t", Some(bad.clone())),
                Err(MetaError::InvalidReplicaAssignment { .. })
            ),
            "{bad:?}"
        );
    }
    let t = s.topic("t").expect("topic").clone();
    let stale = Command::AlterReassignment {
        topic_id: t.id,
        partition: 0,
        target: Some(vec![2, 3, 1]),
        expected_partition_epoch: Some(t.partitions[0].partition_epoch + 1),
    };
    assert!(matches!(
        apply(&mut s, stale),
        Err(MetaError::StaleRequest { .. })
    ));
    assert!(matches!(
        complete(&mut s, "t"),
        Err(MetaError::NoReassignmentInProgress { .. })
    ));
    assert_eq!(
        partition(&s, "t").replicas,
        vec![1, 2, 3],
        "nothing changed"
    );
}

#[test]
fn a_draining_agent_receives_no_new_replicas() {
    let mut s = with_agents(4);
    let out = apply(
        &mut s,
        Command::SetAgentDraining {
            agent_id: 2,
            draining: true,
        },
    );
    assert!(matches!(
        out,
        Ok(CommandOutput::Agent(AgentInfo { draining: true, .. }))
    ));
    let t = create(&mut s, "t", 8, 3);
    assert!(t.partitions.iter().all(|p| !p.replicas.contains(&2)));
    register(&mut s, 2);
    assert!(
        s.agent(2).expect("agent").draining,
        "a restart keeps draining"
    );
    assert!(matches!(
        apply(
            &mut s,
            Command::SetAgentDraining {
                agent_id: 9,
                draining: true
            }
        ),
        Err(MetaError::UnknownAgent { agent_id: 9 })
    ));
}

#[test]
fn state_written_before_reassignments_existed_reads_back() {
    let p: PartitionInfo = serde_json::from_str(
        r#"{"index":0,"leader":1,"leader_epoch":0,"partition_epoch":0,"replicas":[1,2],"isr":[1,2],"high_watermark":-1}"#,
    )
    .expect("old partition");
    assert!(!p.is_reassigning());
    let a: AgentInfo = serde_json::from_str(
        r#"{"id":1,"addrs":{"kafka":null},"rack":null,"registered_ms":0,"last_heartbeat_ms":0,"fenced":false,"incarnation":1}"#,
    )
    .expect("old agent");
    assert!(!a.draining);
}
