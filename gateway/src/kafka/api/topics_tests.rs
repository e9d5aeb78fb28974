//! Metadata, CreateTopics, CreatePartitions and DeleteTopics against the
//! real metastore and logs.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use metastore::{ClusterControl, Topics};

use super::test_support::*;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    metadata_auto_creates_unknown_topics_unless_the_client_says_no,
    create_partitions_only_grows_a_topic,
    a_deleted_topic_is_gone_with_its_data_and_can_be_created_again,
    metadata_lists_live_agents_with_racks_and_offline_partitions_without_a_leader,
    create_topics_places_replicas_where_the_assignments_say,
    metadata_waits_for_the_fate_of_a_leader_the_metastore_no_longer_hears,
    metadata_by_topic_id_goes_by_the_id_when_the_name_is_empty,
);

async fn metadata_auto_creates_unknown_topics_unless_the_client_says_no(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("fresh"))))]))
        .with_allow_auto_topic_creation(true);
    let resp: MetadataResponse = call(b, ApiKey::Metadata, 9, &req).await;
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), 1);
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("other"))))]))
        .with_allow_auto_topic_creation(false);
    let resp: MetadataResponse = call(b, ApiKey::Metadata, 9, &req).await;
    assert_eq!(resp.topics[0].error_code, 3);
}
/// The Java client asks for topics by id with an empty name ("", its
/// default), not a null one: the id decides, as on Kafka's broker.
async fn metadata_by_topic_id_goes_by_the_id_when_the_name_is_empty(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "by-id", 2).await;
    let id = b.node.catalog.topic("by-id").expect("created").id;
    let unknown = uuid::Uuid::from_u128(42);
    let asked = |id| {
        metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str(""))))
            .with_topic_id(id)
    };
    let req = MetadataRequest::default()
        .with_topics(Some(vec![asked(id), asked(unknown)]))
        .with_allow_auto_topic_creation(false);
    let resp: MetadataResponse = call(b, ApiKey::Metadata, 12, &req).await;
    let got: Vec<(Option<String>, uuid::Uuid, i16, usize)> = resp
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.to_string()),
                t.topic_id,
                t.error_code,
                t.partitions.len(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (Some("by-id".to_string()), id, 0, 2),
            (None, unknown, 100, 0), // UNKNOWN_TOPIC_ID
        ]
    );
}

async fn create_partitions_only_grows_a_topic(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "grow", 1).await;
    let req = |n| {
        CreatePartitionsRequest::default().with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("grow")))
                .with_count(n),
        ])
    };
    let grown: CreatePartitionsResponse = call(b, ApiKey::CreatePartitions, 3, &req(3)).await;
    assert_eq!(grown.results[0].error_code, 0);
    assert_eq!(
        b.node.catalog.topic("grow").map(|t| t.partitions.len()),
        Some(3)
    );
    let shrink: CreatePartitionsResponse = call(b, ApiKey::CreatePartitions, 3, &req(2)).await;
    assert_eq!(shrink.results[0].error_code, 37, "INVALID_PARTITIONS");
    let resp: ProduceResponse = call(
        b,
        ApiKey::Produce,
        9,
        &produce_req("grow", 2, batch(&["x"], None, Compression::None), 1),
    )
    .await;
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code, 0,
        "the new partition takes writes"
    );
}

async fn a_deleted_topic_is_gone_with_its_data_and_can_be_created_again(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "gone", 2).await;
    produce(b, "gone", batch(&["old"], None, Compression::None)).await;
    let dir = t.backends.dir.path().join("log").join("gone-0");
    assert!(dir.is_dir());
    let req = DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(StrBytes::from_static_str("gone"))]);
    let resp: DeleteTopicsResponse = call(b, ApiKey::DeleteTopics, 5, &req).await;
    assert_eq!(resp.responses[0].error_code, 0);
    assert!(!dir.exists(), "the partition's files are removed");
    let refused = produce(b, "gone", batch(&["late"], None, Compression::None)).await;
    assert_eq!(refused.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    create(b, "gone", 1).await;
    let fresh = produce(b, "gone", batch(&["new"], None, Compression::None)).await;
    assert_eq!(
        (fresh.error_code, fresh.base_offset),
        (0, 0),
        "the new incarnation starts empty"
    );
}

async fn metadata_lists_live_agents_with_racks_and_offline_partitions_without_a_leader(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    b.node
        .catalog
        .register_agent(metastore::AgentRegistration {
            id: 2,
            addrs: metastore::AgentAddrs {
                kafka: Some("10.0.0.2:9092".into()),
                ..Default::default()
            },
            rack: Some("rack-b".into()),
            instance: None,
        })
        .await
        .expect("agent 2 registers");
    b.node
        .catalog
        .create_topic(
            metastore::CreateTopic {
                name: "spread".into(),
                partitions: -1,
                replication_factor: -1,
                configs: Default::default(),
                assignments: vec![vec![2], vec![1]],
            },
            false,
        )
        .await
        .expect("created");
    let all = MetadataRequest::default().with_topics(None);
    let brokers = |resp: &MetadataResponse| -> Vec<(i32, String, i32, Option<String>)> {
        resp.brokers
            .iter()
            .map(|x| {
                (
                    x.node_id.0,
                    x.host.to_string(),
                    x.port,
                    x.rack.as_ref().map(|r| r.to_string()),
                )
            })
            .collect()
    };
    let resp: MetadataResponse = call(b, ApiKey::Metadata, 9, &all).await;
    assert_eq!(
        brokers(&resp),
        vec![
            (1, "127.0.0.1".into(), 9092, None),
            (2, "10.0.0.2".into(), 9092, Some("rack-b".into()))
        ]
    );
    assert_eq!(resp.controller_id.0, 1, "the metastore leader");
    // agent 2 never heartbeats: when its lease runs out it is fenced, and
    // its partition, with no other replica, has no leader
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let resp: MetadataResponse = call(b, ApiKey::Metadata, 9, &all).await;
        let parts = &resp.topics[0].partitions;
        let view: Vec<(i16, i32)> = parts
            .iter()
            .map(|p| (p.error_code, p.leader_id.0))
            .collect();
        if view == vec![(5, -1), (0, 1)] {
            // a crashed agent stays listed a few seconds (clients move its
            // partitions in one metadata update), then leaves
            assert_eq!(brokers(&resp).len(), 2, "listed a little longer");
            let gone = std::time::Instant::now() + crate::brokers::CRASHED_LISTING * 3;
            loop {
                let resp: MetadataResponse = call(b, ApiKey::Metadata, 9, &all).await;
                if brokers(&resp).len() == 1 {
                    break;
                }
                assert!(
                    std::time::Instant::now() < gone,
                    "the fenced agent is still listed"
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "agent 2's partition never went offline: {view:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn create_topics_places_replicas_where_the_assignments_say(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    let agent2 = metastore::AgentRegistration {
        id: 2,
        ..Default::default()
    };
    b.node
        .catalog
        .register_agent(agent2.clone())
        .await
        .expect("agent 2 registers");
    // it holds its lease for the rest of the test
    let _agent2 = b
        .node
        .catalog
        .keep_agent_alive(agent2, std::time::Duration::from_millis(100));
    let req = |name: &str, partitions: i32, assignments: &[(i32, &[i32])]| {
        CreateTopicsRequest::default().with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)
                .with_assignments(
                    assignments
                        .iter()
                        .map(|(p, ids)| {
                            create_topics_request::CreatableReplicaAssignment::default()
                                .with_partition_index(*p)
                                .with_broker_ids(ids.iter().map(|i| BrokerId(*i)).collect())
                        })
                        .collect(),
                ),
        ])
    };
    // listed out of order, as a client may
    let resp: CreateTopicsResponse = call(
        b,
        ApiKey::CreateTopics,
        7,
        &req("placed", -1, &[(1, &[1, 2]), (0, &[2, 1])]),
    )
    .await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
    let placed = b.node.catalog.topic("placed").expect("created");
    let replicas: Vec<Vec<u64>> = placed
        .partitions
        .iter()
        .map(|p| p.replicas.clone())
        .collect();
    assert_eq!(replicas, vec![vec![2, 1], vec![1, 2]]);
    for (name, partitions, assignments) in [
        ("twice", -1, &[(0, &[1][..]), (0, &[2][..])][..]),
        ("gap", -1, &[(0, &[1][..]), (2, &[2][..])][..]),
        ("count", 3, &[(0, &[1][..])][..]),
    ] {
        let resp: CreateTopicsResponse = call(
            b,
            ApiKey::CreateTopics,
            7,
            &req(name, partitions, assignments),
        )
        .await;
        assert_eq!(
            resp.topics[0].error_code, 39,
            "{name}: INVALID_REPLICA_ASSIGNMENT"
        );
        assert!(b.node.catalog.topic(name).is_none());
    }
}

/// A client that asks for metadata while its partition's leader has gone
/// silent but still holds its lease gets the answer once the new leader is
/// elected, not the silent agent's name (librdkafka would ask again only a
/// second later).
async fn metadata_waits_for_the_fate_of_a_leader_the_metastore_no_longer_hears(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    let me = u64::try_from(b.config.node_id).expect("a positive node id");
    b.node
        .catalog
        .register_agent(metastore::AgentRegistration {
            id: 2,
            addrs: metastore::AgentAddrs {
                kafka: Some("10.0.0.2:9092".into()),
                ..Default::default()
            },
            rack: None,
            instance: None,
        })
        .await
        .expect("agent 2 registers");
    b.node
        .catalog
        .create_topic(
            metastore::CreateTopic {
                name: "in-doubt".into(),
                partitions: -1,
                replication_factor: -1,
                configs: Default::default(),
                assignments: vec![vec![2, me]],
            },
            false,
        )
        .await
        .expect("created");
    let leader = |resp: &MetadataResponse| resp.topics[0].partitions[0].leader_id.0;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("in-doubt"))))]));
    let resp: MetadataResponse = call(b, ApiKey::Metadata, 9, &req).await;
    assert_eq!(leader(&resp), 2, "agent 2 leads, as assigned");

    // agent 2 never heartbeats: the metastore leader soon says it does not
    // hear it, well before its lease runs out
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !b.node.catalog.suspected_agents().contains(&2) {
        assert!(
            std::time::Instant::now() < deadline,
            "agent 2 never suspected"
        );
        b.node
            .catalog
            .heartbeat(me)
            .await
            .expect("this agent heartbeats");
    }
    let fenced = |b: &crate::broker::Broker| {
        b.node
            .catalog
            .agents()
            .iter()
            .any(|a| a.id == 2 && a.fenced)
    };
    assert!(!fenced(b), "suspected, not fenced yet");
    let resp: MetadataResponse = call(b, ApiKey::Metadata, 9, &req).await;
    assert!(fenced(b), "the answer waited for the lease to run out");
    assert_eq!(
        (resp.topics[0].partitions[0].error_code, leader(&resp)),
        (0, b.config.node_id),
        "and names the new leader, the in-sync follower"
    );
}
