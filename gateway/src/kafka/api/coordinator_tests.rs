//! Group coordination as the coordinator slots decide it: only the slot's
//! holder serves a group, and a commit must come from the group's current
//! generation and members.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use metastore::{AgentAddrs, AgentRegistration, ClusterControl, Groups};

use super::test_support::*;
use crate::broker::{Broker, BrokerConfig};
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    a_group_whose_slot_moved_to_another_agent_is_answered_not_coordinator,
    commits_must_come_from_the_current_generation_and_its_members,
);

const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_INSTANCE_ID: i16 = 82;

fn gid(g: &str) -> GroupId {
    GroupId(StrBytes::from_string(g.into()))
}

async fn broker(logs: Logs) -> TestBroker {
    let mut config = BrokerConfig::default();
    config.group.initial_rebalance_delay_ms = 0;
    let t = TestBroker::start_with(logs, config).await;
    create(&t.broker, "t", 2).await;
    t
}

/// Joins `group` alone (as `instance`, when static) and syncs; returns the
/// member id, at generation 1.
async fn stable_member(b: &Broker, group: &str, instance: Option<&str>) -> StrBytes {
    let join = JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_group_instance_id(instance.map(|i| StrBytes::from_string(i.into())))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(StrBytes::from_static_str("range"))
        .with_metadata(Bytes::from_static(b"meta"))]);
    let mut joined: JoinGroupResponse = call(b, ApiKey::JoinGroup, 7, &join).await;
    if joined.error_code == 79 {
        // MEMBER_ID_REQUIRED: join again with the id handed out
        let again = join.with_member_id(joined.member_id.clone());
        joined = call(b, ApiKey::JoinGroup, 7, &again).await;
    }
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let synced: SyncGroupResponse = call(
        b,
        ApiKey::SyncGroup,
        5,
        &SyncGroupRequest::default()
            .with_group_id(gid(group))
            .with_generation_id(1)
            .with_member_id(joined.member_id.clone())
            .with_group_instance_id(instance.map(|i| StrBytes::from_string(i.into())))
            .with_assignments(vec![
                sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(joined.member_id.clone())
                    .with_assignment(Bytes::from_static(b"all")),
            ]),
    )
    .await;
    assert_eq!(synced.error_code, 0);
    joined.member_id
}

/// An OffsetCommit of partition 0 of `t`; its one error code.
async fn commit(
    b: &Broker,
    group: &str,
    generation: i32,
    member: &str,
    instance: Option<&str>,
    offset: i64,
) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(StrBytes::from_string(member.into()))
        .with_group_instance_id(instance.map(|i| StrBytes::from_string(i.into())))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    let resp: OffsetCommitResponse = call(b, ApiKey::OffsetCommit, 8, &req).await;
    resp.topics[0].partitions[0].error_code
}

fn committed(b: &Broker, group: &str) -> Option<i64> {
    let offsets = b.node.catalog.committed_offsets(group);
    offsets.get(&("t".to_string(), 0)).map(|o| o.offset)
}

/// A group id of the slot `taken` (or of any other, with `taken` false).
fn group_in(b: &Broker, slots: &[u32], taken: bool) -> String {
    (0..1000)
        .map(|i| format!("group-{i}"))
        .find(|g| {
            let slot = b.node.catalog.coordinator(g).map(|p| p.slot);
            slot.is_some_and(|s| slots.contains(&s) == taken)
        })
        .expect("a group id in such a slot")
}

async fn a_group_whose_slot_moved_to_another_agent_is_answered_not_coordinator(logs: Logs) {
    let t = broker(logs).await;
    let b = &t.broker;
    let me = b.node.agent_id();
    // the slots agent 1 hands over when a second agent joins: its highest
    let moving: Vec<u32> = (32..64).collect();
    let leaving = group_in(b, &moving, true);
    let staying = group_in(b, &moving, false);
    let member = stable_member(b, &leaving, None).await;
    let stayer = stable_member(b, &staying, None).await;
    assert_eq!(commit(b, &leaving, 1, &member, None, 5).await, 0);

    let registration = AgentRegistration {
        id: 2,
        addrs: AgentAddrs {
            kafka: Some("10.0.0.2:9092".into()),
            ..Default::default()
        },
        rack: None,
        instance: None,
    };
    b.node
        .catalog
        .register_agent(registration.clone())
        .await
        .expect("agent 2 registers");
    let _alive = b
        .node
        .catalog
        .keep_agent_alive(registration, Duration::from_millis(200));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while b.node.catalog.coordinator(&leaving).map(|p| p.holder.agent) != Some(2) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "agent 2 never took its share of the slots"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        b.node.catalog.coordinator(&staying).map(|p| p.holder.agent),
        Some(me),
        "a slot that does not move keeps its holder"
    );

    // FindCoordinator names agent 2; this agent refuses everything else
    let found: FindCoordinatorResponse = call(
        b,
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest::default()
            .with_coordinator_keys(vec![StrBytes::from_string(leaving.clone())]),
    )
    .await;
    let c = &found.coordinators[0];
    assert_eq!(
        (c.error_code, c.node_id.0, c.host.as_str(), c.port),
        (0, 2, "10.0.0.2", 9092)
    );
    let hb: HeartbeatResponse = call(
        b,
        ApiKey::Heartbeat,
        4,
        &HeartbeatRequest::default()
            .with_group_id(gid(&leaving))
            .with_generation_id(1)
            .with_member_id(member.clone()),
    )
    .await;
    assert_eq!(hb.error_code, NOT_COORDINATOR);
    assert_eq!(
        commit(b, &leaving, 1, &member, None, 3).await,
        NOT_COORDINATOR
    );
    assert_eq!(commit(b, &leaving, -1, "", None, 3).await, NOT_COORDINATOR);
    assert_eq!(committed(b, &leaving), Some(5), "nothing moved backwards");
    let fetched: OffsetFetchResponse = call(
        b,
        ApiKey::OffsetFetch,
        8,
        &OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(gid(&leaving)),
        ]),
    )
    .await;
    assert_eq!(fetched.groups[0].error_code, NOT_COORDINATOR);
    let described: DescribeGroupsResponse = call(
        b,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default().with_groups(vec![gid(&leaving), gid(&staying)]),
    )
    .await;
    assert_eq!(described.groups[0].error_code, NOT_COORDINATOR);
    assert_eq!(
        (
            described.groups[1].error_code,
            described.groups[1].group_state.as_str()
        ),
        (0, "Stable")
    );
    let deleted: DeleteGroupsResponse = call(
        b,
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![gid(&leaving)]),
    )
    .await;
    assert_eq!(deleted.results[0].error_code, NOT_COORDINATOR);
    let listed: ListGroupsResponse =
        call(b, ApiKey::ListGroups, 4, &ListGroupsRequest::default()).await;
    let names: Vec<&str> = listed.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(
        names,
        vec![staying.as_str()],
        "only the groups coordinated here"
    );
    // the group that stayed is served as before
    assert_eq!(commit(b, &staying, 1, &stayer, None, 7).await, 0);
}

async fn commits_must_come_from_the_current_generation_and_its_members(logs: Logs) {
    let t = broker(logs).await;
    let b = &t.broker;
    let member = stable_member(b, "g", Some("instance-a")).await;
    assert_eq!(
        commit(b, "g", 2, &member, Some("instance-a"), 1).await,
        ILLEGAL_GENERATION
    );
    assert_eq!(
        commit(b, "g", 1, "stranger", None, 1).await,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        commit(b, "g", 1, "stranger", Some("instance-a"), 1).await,
        FENCED_INSTANCE_ID
    );
    assert_eq!(
        commit(b, "g", -1, "", None, 1).await,
        UNKNOWN_MEMBER_ID,
        "no commit outside membership while the group has members"
    );
    assert_eq!(committed(b, "g"), None);
    assert_eq!(commit(b, "g", 1, &member, Some("instance-a"), 4).await, 0);
    let left: LeaveGroupResponse = call(
        b,
        ApiKey::LeaveGroup,
        3,
        &LeaveGroupRequest::default()
            .with_group_id(gid("g"))
            .with_members(vec![leave_group_request::MemberIdentity::default()
                .with_member_id(member.clone())
                .with_group_instance_id(Some(StrBytes::from_static_str(
                    "instance-a",
                )))]),
    )
    .await;
    assert_eq!(left.error_code, 0);
    assert_eq!(
        commit(b, "g", -1, "", None, 9).await,
        0,
        "an admin commit to a group without members"
    );
    assert_eq!(committed(b, "g"), Some(9));
}
