//! AlterPartitionReassignments, ListPartitionReassignments and draining an
//! agent through IncrementalAlterConfigs, against the real metastore.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use metastore::{ClusterControl, Topics};

use super::test_support::*;
use crate::testing::{Logs, TestBroker};

on_every_backend!(reassignments_are_started_listed_and_cancelled_with_kafka_error_codes);

fn alter(topic: &str, replicas: Option<Vec<i32>>) -> AlterPartitionReassignmentsRequest {
    AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![
            alter_partition_reassignments_request::ReassignableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    alter_partition_reassignments_request::ReassignablePartition::default()
                        .with_partition_index(0)
                        .with_replicas(replicas.map(|r| r.into_iter().map(BrokerId).collect())),
                ]),
        ])
}

async fn alter_code(
    b: &crate::broker::Broker,
    version: i16,
    req: &AlterPartitionReassignmentsRequest,
) -> i16 {
    let resp: AlterPartitionReassignmentsResponse =
        call(b, ApiKey::AlterPartitionReassignments, version, req).await;
    assert_eq!(resp.error_code, 0);
    resp.responses[0].partitions[0].error_code
}

async fn listed(b: &crate::broker::Broker) -> Vec<(String, i32, Vec<i32>, Vec<i32>, Vec<i32>)> {
    let resp: ListPartitionReassignmentsResponse = call(
        b,
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default().with_topics(None),
    )
    .await;
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas),
                )
            })
        })
        .collect()
}

fn drain(agent: &str, key: &str, value: &str) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_string(agent.into()))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.into()))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(value.into()))),
            ]),
    ])
}

async fn reassignments_are_started_listed_and_cancelled_with_kafka_error_codes(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "moving", 1).await;
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
    assert!(listed(b).await.is_empty());
    assert_eq!(
        alter_code(b, 0, &alter("moving", None)).await,
        85,
        "NO_REASSIGNMENT_IN_PROGRESS"
    );
    assert_eq!(alter_code(b, 0, &alter("absent", Some(vec![2]))).await, 3);
    assert_eq!(
        alter_code(b, 0, &alter("moving", Some(vec![1, 1]))).await,
        39
    );
    assert_eq!(alter_code(b, 0, &alter("moving", Some(vec![-4]))).await, 39);
    let grow = alter("moving", Some(vec![1, 2])).with_allow_replication_factor_change(false);
    assert_eq!(
        alter_code(b, 1, &grow).await,
        38,
        "INVALID_REPLICATION_FACTOR"
    );

    assert_eq!(alter_code(b, 1, &alter("moving", Some(vec![2]))).await, 0);
    assert_eq!(
        listed(b).await,
        vec![("moving".to_owned(), 0, vec![2, 1], vec![2], vec![1])],
        "agent 2 is added and agent 1 stays until 2 is in sync"
    );
    let p = b.node.catalog.topic("moving").expect("topic").partitions[0].clone();
    assert_eq!((p.leader, p.isr.clone()), (Some(1), vec![1]));

    assert_eq!(alter_code(b, 0, &alter("moving", None)).await, 0, "cancel");
    assert!(listed(b).await.is_empty());
    assert_eq!(
        b.node.catalog.topic("moving").expect("topic").partitions[0].replicas,
        vec![1]
    );

    let resp: IncrementalAlterConfigsResponse = call(
        b,
        ApiKey::IncrementalAlterConfigs,
        1,
        &drain("2", "aerostream.draining", "true"),
    )
    .await;
    assert_eq!(resp.responses[0].error_code, 0);
    assert!(b
        .node
        .catalog
        .agents()
        .iter()
        .any(|a| a.id == 2 && a.draining));
    for (agent, key, value, code) in [
        ("2", "log.retention.ms", "1", 40),
        ("2", "aerostream.draining", "soon", 40),
        ("9", "aerostream.draining", "true", 42),
    ] {
        let resp: IncrementalAlterConfigsResponse = call(
            b,
            ApiKey::IncrementalAlterConfigs,
            1,
            &drain(agent, key, value),
        )
        .await;
        assert_eq!(resp.responses[0].error_code, code, "{agent} {key}={value}");
    }
}
