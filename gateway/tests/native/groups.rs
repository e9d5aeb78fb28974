//! Consumer groups over the native protocol: members split a topic and
//! rebalance on leave and session timeout, Kafka and native members do not
//! mix, and every record is read once across a rebalance.

use std::time::Duration;

use bytes::Bytes;
use dataplane::group::engine::GroupLimits;
use gateway::broker::BrokerConfig;
use gateway::testing::Logs;
use gateway::Gateway;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sdk::proto::{self, ErrorCode};
use tokio::net::TcpStream;

use super::support::*;
use crate::common;

/// Group settings that keep the membership tests short: sessions down to
/// 200 ms, and a new group waits 800 ms for its first members.
pub(crate) fn quick_groups() -> BrokerConfig {
    BrokerConfig {
        group: GroupLimits {
            min_session_timeout_ms: 200,
            initial_rebalance_delay_ms: 800,
            ..GroupLimits::default()
        },
        ..BrokerConfig::default()
    }
}

/// A native member as the test drives it, on its own connection.
pub(crate) struct Member {
    s: TcpStream,
    id: String,
    generation: i32,
    partitions: Vec<u32>,
}

pub(crate) const SESSION_MS: u32 = 1_500;

pub(crate) async fn join(
    mut s: TcpStream,
    group: &str,
    id: String,
) -> (TcpStream, proto::JoinGroupResponse) {
    let answer: proto::JoinGroupResponse = call(
        &mut s,
        &proto::JoinGroup {
            correlation: 7,
            group: group.into(),
            member_id: id,
            topics: vec!["six".into()],
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: 5_000,
        },
    )
    .await;
    (s, answer)
}

/// Joins (or rejoins) every member at once, as members of one generation do.
pub(crate) async fn join_all(group: &str, members: Vec<(TcpStream, String)>) -> Vec<Member> {
    let joins: Vec<_> = members
        .into_iter()
        .map(|(s, id)| {
            let group = group.to_string();
            tokio::spawn(async move { join(s, &group, id).await })
        })
        .collect();
    let mut out = Vec::new();
    for j in joins {
        let (s, answer) = j.await.unwrap();
        assert_eq!(answer.error, ErrorCode::NONE, "{answer:?}");
        assert!(!answer.member_id.is_empty());
        let mut partitions = Vec::new();
        for t in &answer.assignment {
            assert_eq!(t.topic, "six");
            partitions.extend(&t.partitions);
        }
        out.push(Member {
            s,
            id: answer.member_id,
            generation: answer.generation,
            partitions,
        });
    }
    out
}

/// Every member is of one generation, and their partitions cover the
/// topic's six exactly once.
pub(crate) fn assert_split(members: &[Member]) {
    let generation = members[0].generation;
    assert!(members.iter().all(|m| m.generation == generation));
    let mut all: Vec<u32> = members.iter().flat_map(|m| m.partitions.clone()).collect();
    all.sort_unstable();
    assert_eq!(all, (0..6).collect::<Vec<u32>>(), "disjoint and complete");
    for m in members {
        assert_eq!(
            m.partitions.len(),
            6 / members.len(),
            "range assignment is even here"
        );
    }
}

pub(crate) async fn heartbeat(m: &mut Member, group: &str) -> ErrorCode {
    let answer: proto::HeartbeatResponse = call(
        &mut m.s,
        &proto::Heartbeat {
            correlation: 8,
            group: group.into(),
            member_id: m.id.clone(),
            generation: m.generation,
        },
    )
    .await;
    answer.0.error
}

pub(crate) async fn commit_as(
    s: &mut TcpStream,
    group: &str,
    member: &str,
    generation: i32,
    partition: u32,
    offset: i64,
) -> ErrorCode {
    let answer: proto::CommitOffsetsResponse = call(
        s,
        &proto::CommitOffsets {
            correlation: 9,
            group: group.into(),
            offsets: vec![proto::CommittedOffset {
                topic: "six".into(),
                partition,
                offset,
                metadata: String::new(),
            }],
            generation,
            member_id: member.into(),
        },
    )
    .await;
    assert_eq!(answer.partitions.len(), 1);
    answer.partitions[0].2
}

pub(crate) async fn kafka_describe(
    gw: &Gateway,
    group: &str,
) -> describe_groups_response::DescribedGroup {
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let described: DescribeGroupsResponse = common::roundtrip(
        &mut k,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_string(group.into()))]),
    )
    .await;
    described.groups.into_iter().next().unwrap()
}

/// The partitions of "six" a Kafka tool decodes from a member's assignment.
pub(crate) fn kafka_view_of_assignment(bytes: &Bytes) -> Vec<u32> {
    use kafka_protocol::protocol::Decodable;
    let mut b = bytes.clone();
    let version = bytes::Buf::get_i16(&mut b);
    let a = ConsumerProtocolAssignment::decode(&mut b, version).unwrap();
    let mut out: Vec<u32> = a
        .assigned_partitions
        .iter()
        .filter(|tp| tp.topic.as_str() == "six")
        .flat_map(|tp| tp.partitions.iter().map(|p| *p as u32))
        .collect();
    out.sort_unstable();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_members_split_a_topic_and_rebalance_on_leave_and_session_timeout() {
    let (gw, backends) = start_with(Logs::Disk, quick_groups()).await;
    let addr = gw.native_addr().unwrap();
    let mut admin = connect(&gw).await;
    let created: proto::CreateTopicResponse = call(
        &mut admin,
        &proto::CreateTopic {
            correlation: 2,
            name: "six".into(),
            partitions: 6,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    assert_eq!(created.0.error, ErrorCode::NONE);

    // the coordinator: this server, at its native address
    let found: proto::FindCoordinatorResponse = call(
        &mut admin,
        &proto::FindCoordinator {
            correlation: 3,
            group: "readers".into(),
        },
    )
    .await;
    assert_eq!(found.error, ErrorCode::NONE);
    assert_eq!((found.node_id, found.port), (1, addr.port()));
    assert_eq!(found.host, addr.ip().to_string());
    let empty: proto::FindCoordinatorResponse = call(
        &mut admin,
        &proto::FindCoordinator {
            correlation: 4,
            group: String::new(),
        },
    )
    .await;
    assert_eq!(empty.error, ErrorCode::INVALID_GROUP);

    // three members join at once and split the six partitions
    let mut fresh = Vec::new();
    for _ in 0..3 {
        fresh.push((connect_to(addr).await, String::new()));
    }
    let mut members = join_all("readers", fresh).await;
    assert_split(&members);
    let first_generation = members[0].generation;
    for m in &mut members {
        assert_eq!(heartbeat(m, "readers").await, ErrorCode::NONE);
    }

    // Kafka's DescribeGroups lists the native members and their partitions
    let described = kafka_describe(&gw, "readers").await;
    assert_eq!(described.error_code, 0);
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.protocol_type.as_str(), "consumer");
    assert_eq!(described.protocol_data.as_str(), "aerostream-range");
    assert_eq!(described.members.len(), 3);
    for d in &described.members {
        let m = members
            .iter()
            .find(|m| m.id == d.member_id.as_str())
            .expect("a native member");
        assert_eq!(d.client_id.as_str(), "native-test");
        let mut mine = m.partitions.clone();
        mine.sort_unstable();
        assert_eq!(kafka_view_of_assignment(&d.member_assignment), mine);
    }
    // ... and ListGroups the group
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let listed: ListGroupsResponse =
        common::roundtrip(&mut k, ApiKey::ListGroups, 4, &ListGroupsRequest::default()).await;
    assert!(listed
        .groups
        .iter()
        .any(|g| g.group_id.as_str() == "readers" && g.protocol_type.as_str() == "consumer"));
    // a Kafka consumer cannot join the native group
    let kafka_join: JoinGroupResponse = common::roundtrip(
        &mut k,
        ApiKey::JoinGroup,
        5,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("readers")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))]),
    )
    .await;
    assert_eq!(
        kafka_join.error_code,
        kafka_protocol::ResponseError::InconsistentGroupProtocol.code()
    );

    // a commit outside membership is refused while the group has members;
    // members commit with their generation
    assert_eq!(
        commit_as(&mut admin, "readers", "", -1, 0, 1).await,
        ErrorCode::GROUP_BUSY
    );
    let owner = members
        .iter()
        .position(|m| m.partitions.contains(&0))
        .unwrap();
    let (id, generation) = (members[owner].id.clone(), members[owner].generation);
    assert_eq!(
        commit_as(&mut admin, "readers", &id, generation, 0, 5).await,
        ErrorCode::NONE
    );
    assert_eq!(
        commit_as(&mut admin, "readers", "nobody", generation, 0, 5).await,
        ErrorCode::UNKNOWN_MEMBER
    );

    // one leaves (not the member whose stale commit is tried below): the
    // others are told to rejoin, and own all six
    let leaving = if owner == members.len() - 1 {
        0
    } else {
        members.len() - 1
    };
    let mut leaver = members.remove(leaving);
    let left: proto::LeaveGroupResponse = call(
        &mut leaver.s,
        &proto::LeaveGroup {
            correlation: 10,
            group: "readers".into(),
            member_id: leaver.id.clone(),
        },
    )
    .await;
    assert_eq!(left.0.error, ErrorCode::NONE);
    for m in &mut members {
        assert_eq!(
            heartbeat(m, "readers").await,
            ErrorCode::REBALANCE_IN_PROGRESS
        );
    }
    let rejoin = members.drain(..).map(|m| (m.s, m.id)).collect();
    let mut members = join_all("readers", rejoin).await;
    assert_split(&members);
    assert!(members[0].generation > first_generation);
    assert_eq!(kafka_describe(&gw, "readers").await.members.len(), 2);

    // a commit of the generation the group left is refused
    assert_eq!(
        commit_as(&mut admin, "readers", &id, generation, 0, 6).await,
        ErrorCode::ILLEGAL_GENERATION
    );
    let owner = members
        .iter()
        .position(|m| m.partitions.contains(&0))
        .unwrap();
    let (id, now) = (members[owner].id.clone(), members[owner].generation);
    assert_eq!(
        commit_as(&mut admin, "readers", &id, now, 0, 7).await,
        ErrorCode::NONE
    );
    let committed: proto::FetchOffsetsResponse = call(
        &mut admin,
        &proto::FetchOffsets {
            correlation: 11,
            group: "readers".into(),
            partitions: vec![("six".into(), 0)],
        },
    )
    .await;
    assert_eq!(committed.offsets[0].0.offset, 7);

    // one stops heartbeating: after its session the other is told to
    // rejoin, and owns all six
    let _silent = members.pop().unwrap();
    let mut survivor = members.pop().unwrap();
    let stopped = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        match heartbeat(&mut survivor, "readers").await {
            ErrorCode::NONE => {
                // a bound against a hang, not a timing claim
                assert!(
                    stopped.elapsed() < Duration::from_millis(u64::from(SESSION_MS) * 40),
                    "the silent member is removed after its session"
                );
            }
            ErrorCode::REBALANCE_IN_PROGRESS => break,
            other => panic!("heartbeat answered {other}"),
        }
    }
    assert!(
        stopped.elapsed() >= Duration::from_millis(u64::from(SESSION_MS) - 200),
        "not before the session timeout"
    );
    let alone = join_all("readers", vec![(survivor.s, survivor.id)]).await;
    assert_eq!(alone[0].partitions.len(), 6);
    assert_split(&alone);
    let described = kafka_describe(&gw, "readers").await;
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id.as_str(), alone[0].id);

    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_member_cannot_join_a_kafka_consumers_group_nor_bad_joins_be_made() {
    let (gw, backends) = start_with(Logs::Disk, quick_groups()).await;
    let mut s = connect(&gw).await;
    // a Kafka consumer's group
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let kafka_join: JoinGroupResponse = common::roundtrip(
        &mut k,
        ApiKey::JoinGroup,
        3,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("kafkas")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(1_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))]),
    )
    .await;
    assert_eq!(kafka_join.error_code, 0);
    let refused: proto::JoinGroupResponse = call(
        &mut s,
        &proto::JoinGroup {
            correlation: 2,
            group: "kafkas".into(),
            member_id: String::new(),
            topics: vec!["t".into()],
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 1_000,
        },
    )
    .await;
    assert_eq!(refused.error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(refused.generation, -1);

    let bad = |correlation, group: &str, topics: Vec<String>, session| proto::JoinGroup {
        correlation,
        group: group.into(),
        member_id: String::new(),
        topics,
        session_timeout_ms: session,
        rebalance_timeout_ms: 1_000,
    };
    let cases = [
        (
            bad(3, "", vec!["t".into()], 10_000),
            ErrorCode::INVALID_GROUP,
        ),
        (bad(4, "g", vec![], 10_000), ErrorCode::INVALID_REQUEST),
        (
            bad(5, "g", vec!["t".into()], 10),
            ErrorCode::INVALID_SESSION_TIMEOUT,
        ),
    ];
    for (join, code) in cases {
        let answer: proto::JoinGroupResponse = call(&mut s, &join).await;
        assert_eq!(answer.error, code, "{join:?}");
    }
    // heartbeats and leaves of members the group does not have
    let hb: proto::HeartbeatResponse = call(
        &mut s,
        &proto::Heartbeat {
            correlation: 6,
            group: "nobody-here".into(),
            member_id: "m".into(),
            generation: 1,
        },
    )
    .await;
    assert_eq!(hb.0.error, ErrorCode::UNKNOWN_MEMBER);
    let left: proto::LeaveGroupResponse = call(
        &mut s,
        &proto::LeaveGroup {
            correlation: 7,
            group: "nobody-here".into(),
            member_id: "m".into(),
        },
    )
    .await;
    assert_eq!(left.0.error, ErrorCode::UNKNOWN_MEMBER);
    gw.shutdown().await;
    backends.stop().await;
}

/// Three Rust consumers of one group read every record exactly once
/// between them, across the rebalance that follows one of them leaving:
/// each gives its partitions up at the position it reached, committed, and
/// the next owner starts there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_consumers_of_a_group_read_every_record_once_across_a_rebalance() {
    use futures::StreamExt;
    use sdk::{Client, ConsumerConfig, GroupOptions, Membership, NewTopic, ProducerConfig, Record};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    let (gw, backends) = start_with(Logs::Disk, quick_groups()).await;
    let url = format!("aero://{}", gw.native_addr().unwrap());
    let client = Client::connect(&url).await.unwrap();
    client.create_topic(NewTopic::new("six", 6)).await.unwrap();
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let produce = |from: usize, to: usize| {
        let sends: Vec<_> = (from..to)
            .map(|i| {
                producer.send(
                    "six",
                    Record::new(format!("v{i}")).with_key(format!("k{i}")),
                )
            })
            .collect();
        async move {
            for send in sends {
                send.await.unwrap();
            }
        }
    };
    produce(0, 300).await;

    // (partition, offset) → how many times it was read
    let read: Arc<Mutex<BTreeMap<(u32, i64), usize>>> = Arc::default();
    let config = ConsumerConfig {
        group: Some("exactly-once".into()),
        membership: Membership::Group(GroupOptions {
            session_timeout: Duration::from_millis(1_500),
            rebalance_timeout: Duration::from_secs(5),
            ..GroupOptions::default()
        }),
        max_wait: Duration::from_millis(100),
        ..ConsumerConfig::default()
    };
    let mut stops = Vec::new();
    let mut readers = Vec::new();
    for n in 0..3 {
        let member_client = Client::builder(&url)
            .client_id(format!("reader-{n}"))
            .connect()
            .await
            .unwrap();
        let mut consumer = member_client.consumer(config.clone()).unwrap();
        consumer.subscribe(&["six"]).unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let read = Arc::clone(&read);
        stops.push(stop);
        readers.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    r = consumer.next() => {
                        let r = r.expect("the stream goes on while subscribed").unwrap();
                        *read.lock().unwrap().entry((r.partition, r.offset)).or_default() += 1;
                    }
                }
            }
            // commits the positions reached and leaves the group
            consumer.close().await.unwrap();
        }));
    }
    let count = |read: &Arc<Mutex<BTreeMap<(u32, i64), usize>>>| read.lock().unwrap().len();
    let wait_for = |n: usize| {
        let read = Arc::clone(&read);
        async move {
            tokio::time::timeout(Duration::from_secs(60), async {
                while count(&read) < n {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("{} of {n} records read", count(&read)));
        }
    };
    wait_for(300).await;
    // the group's three members share the six partitions
    let described = kafka_describe(&gw, "exactly-once").await;
    assert_eq!(described.members.len(), 3, "{described:?}");

    // one leaves while the others go on reading newer records
    stops.pop().unwrap().send(()).unwrap();
    readers.pop().unwrap().await.unwrap();
    produce(300, 600).await;
    wait_for(600).await;
    let described = kafka_describe(&gw, "exactly-once").await;
    assert_eq!(described.members.len(), 2);
    // time for any record read twice to show up
    tokio::time::sleep(Duration::from_millis(500)).await;
    for stop in stops {
        stop.send(()).unwrap();
    }
    for r in readers {
        r.await.unwrap();
    }
    let read = read.lock().unwrap().clone();
    assert_eq!(read.len(), 600, "no record is lost");
    let twice: Vec<_> = read.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "records read twice: {twice:?}");
    // the closing members committed where they stopped: the group has
    // nothing left to read
    let pairs: Vec<(&str, u32)> = (0..6).map(|p| ("six", p)).collect();
    let committed = client
        .committed_offsets("exactly-once", &pairs)
        .await
        .unwrap();
    for (p, c) in committed.iter().enumerate() {
        let count = read.keys().filter(|(q, _)| *q == p as u32).count() as i64;
        assert_eq!(*c, Some(count), "partition {p}");
    }
    gw.shutdown().await;
    backends.stop().await;
}
