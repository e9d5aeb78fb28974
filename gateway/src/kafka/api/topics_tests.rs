//! Metadata, CreateTopics, CreatePartitions and DeleteTopics against the
//! real metastore and logs.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use super::test_support::*;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    metadata_auto_creates_unknown_topics_unless_the_client_says_no,
    create_partitions_only_grows_a_topic,
    a_deleted_topic_is_gone_with_its_data_and_can_be_created_again,
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
    assert_eq!(b.catalog.topic("grow").map(|t| t.partitions.len()), Some(3));
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
