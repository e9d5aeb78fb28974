//! Creating and deleting topics, through the Kafka admin handlers.

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, TopicName};
use sdk::proto::{self, ErrorCode};

use crate::broker::Broker;
use crate::kafka::api::{bridge, s, Client};
use crate::native::codes::from_kafka;

pub(super) async fn create_topic(
    b: &Broker,
    c: &Client,
    client_id: &str,
    t: proto::CreateTopic,
) -> proto::CreateTopicResponse {
    let topic = CreatableTopic::default()
        .with_name(TopicName(s(t.name)))
        .with_num_partitions(t.partitions)
        .with_replication_factor(t.replication_factor)
        .with_configs(
            t.configs
                .into_iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                })
                .collect(),
        );
    let resp = bridge::create_topics(
        b,
        c,
        client_id,
        CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(30_000),
    )
    .await;
    let (error, message) = resp
        .topics
        .first()
        .map(|r| {
            (
                from_kafka(r.error_code),
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .unwrap_or((ErrorCode::UNKNOWN_SERVER_ERROR, None));
    proto::CreateTopicResponse(proto::TopicResponse {
        correlation: t.correlation,
        error,
        message: message.unwrap_or_default(),
    })
}

pub(super) async fn delete_topic(
    b: &Broker,
    c: &Client,
    client_id: &str,
    t: proto::DeleteTopic,
) -> proto::DeleteTopicResponse {
    let resp = bridge::delete_topics(
        b,
        c,
        client_id,
        DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(s(t.name))])
            .with_timeout_ms(30_000),
    )
    .await;
    let (error, message) = resp
        .responses
        .first()
        .map(|r| {
            (
                from_kafka(r.error_code),
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .unwrap_or((ErrorCode::UNKNOWN_SERVER_ERROR, None));
    proto::DeleteTopicResponse(proto::TopicResponse {
        correlation: t.correlation,
        error,
        message: message.unwrap_or_default(),
    })
}
