//! The REST admin API on the HTTP port of a real gateway (disk logs tiered
//! to an in-memory object store, embedded metastore), driven over real HTTP
//! and checked against what Kafka clients see over the wire: a topic made
//! over one is produced to and consumed through the other, groups and
//! their offsets read the same, errors are JSON with stable codes, and the
//! OpenAPI document matches the routes served and the answers given.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use dataplane::group::engine::GroupLimits;
use gateway::broker::BrokerConfig;
use gateway::http::HttpExtension;
use gateway::testing::{record_batch, Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use metastore::{Security, Topics};
use serde_json::{json, Value};
use storage::tier::{Tier, TierSnapshot};
use tokio::net::TcpStream;

use common::roundtrip;

/// The node's tiered storage, as the agent binary hands it to the listener.
struct Tiering(Tier);

impl HttpExtension for Tiering {
    fn metrics(&self) -> String {
        self.0.snapshot().render()
    }
    fn handle(&self, _target: &str) -> Option<(u16, String)> {
        None
    }
    fn tiering(&self) -> Option<TierSnapshot> {
        Some(self.0.snapshot())
    }
}

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let is_json = resp
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("application/json"));
        let text = resp.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            assert!(is_json, "{status} answer is not JSON: {text}");
            serde_json::from_str(&text).unwrap()
        };
        (status, body)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.call(
            self.http
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .body(body.to_string()),
        )
        .await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.call(self.http.delete(format!("{}{path}", self.base)))
            .await
    }
}

async fn start_with(tiering: bool) -> (Gateway, Backends, Api) {
    let backends = Backends::start(Logs::Tiered, 1).await;
    let mut http_extensions: Vec<Arc<dyn HttpExtension>> = Vec::new();
    if tiering {
        let tier = backends.tier.clone().unwrap();
        http_extensions.push(Arc::new(Tiering(tier)));
    }
    let opts = GatewayOptions {
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        broker: BrokerConfig {
            group: GroupLimits {
                initial_rebalance_delay_ms: 0,
                ..GroupLimits::default()
            },
            ..BrokerConfig::default()
        },
        http_extensions,
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    let api = Api {
        base: format!("http://{}", gw.http_addr().unwrap()),
        http: reqwest::Client::new(),
    };
    (gw, backends, api)
}

async fn start() -> (Gateway, Backends, Api) {
    start_with(true).await
}

fn name(n: &str) -> TopicName {
    TopicName(StrBytes::from_string(n.to_string()))
}

async fn kafka(gw: &Gateway) -> TcpStream {
    TcpStream::connect(gw.kafka_addr()).await.unwrap()
}

async fn produce(s: &mut TcpStream, topic: &str, partition: i32, records: Bytes) -> i64 {
    let produced: ProduceResponse = roundtrip(
        s,
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records))])]),
    )
    .await;
    let p = &produced.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "produce to {topic}/{partition}");
    p.base_offset
}

async fn values(n: usize) -> Bytes {
    let values: Vec<String> = (0..n).map(|i| format!("value-{i}")).collect();
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    record_batch(&values, true, None, Compression::Snappy)
}

/// The values of a partition as a Kafka consumer fetches them.
async fn fetch_values(s: &mut TcpStream, topic: &str, partition: i32) -> Vec<String> {
    let fetched: FetchResponse = roundtrip(
        s,
        ApiKey::Fetch,
        12,
        &FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_partition_max_bytes(1 << 20)])]),
    )
    .await;
    let p = &fetched.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut records = p.records.clone().unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut records)
        .unwrap()
        .into_iter()
        .flat_map(|s| s.records)
        .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
        .collect()
}

async fn metadata(s: &mut TcpStream, topic: &str) -> metadata_response::MetadataResponseTopic {
    let resp: MetadataResponse = roundtrip(
        s,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name(topic)))
            ])),
    )
    .await;
    resp.topics.into_iter().next().unwrap()
}

fn config<'a>(topic: &'a Value, key: &str) -> &'a Value {
    topic["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == key)
        .unwrap_or_else(|| panic!("no config {key} in {topic}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_created_over_rest_is_produced_to_and_fetched_over_kafka() {
    let (gw, _backends, api) = start().await;
    let (status, created) = api
        .post(
            "/v1/topics",
            r#"{"name": "orders", "partitions": 2, "replication_factor": 1,
                "configs": {"retention.ms": "3600000"}}"#,
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "orders");
    assert_eq!(created["partitions"].as_array().unwrap().len(), 2);
    let retention = config(&created, "retention.ms");
    assert_eq!(retention["value"], "3600000");
    assert_eq!(retention["source"], "topic");
    assert_eq!(config(&created, "cleanup.policy")["source"], "default");

    let mut s = kafka(&gw).await;
    let meta = metadata(&mut s, "orders").await;
    assert_eq!(meta.error_code, 0);
    assert_eq!(meta.partitions.len(), 2);
    assert_eq!(meta.topic_id.to_string(), created["id"].as_str().unwrap());
    let described: DescribeConfigsResponse = roundtrip(
        &mut s,
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("orders"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]),
    )
    .await;
    let entry = &described.results[0].configs[0];
    assert_eq!(entry.value.as_deref(), Some("3600000"));

    assert_eq!(produce(&mut s, "orders", 1, values(5).await).await, 0);
    assert_eq!(
        fetch_values(&mut s, "orders", 1).await,
        (0..5).map(|i| format!("value-{i}")).collect::<Vec<_>>()
    );

    let (status, topic) = api.get("/v1/topics/orders").await;
    assert_eq!(status, 200, "{topic}");
    let p1 = &topic["partitions"][1];
    assert_eq!(p1["partition"], 1);
    assert_eq!(p1["leader"], 1);
    assert_eq!(p1["replicas"], json!([1]));
    assert_eq!(p1["isr"], json!([1]));
    assert_eq!(p1["log_start"], 0);
    assert_eq!(p1["local_log_start"], 0);
    assert_eq!(p1["log_end"], 5);
    assert_eq!(p1["high_watermark"], 5);
    assert_eq!(p1["offsets_from"], "leader");
    assert_eq!(topic["partitions"][0]["log_end"], 0);

    let (status, page) = api
        .get("/v1/topics/orders/records?partition=1&offset=2&limit=2")
        .await;
    assert_eq!(status, 200, "{page}");
    let records = page["records"].as_array().unwrap();
    let offsets: Vec<i64> = records
        .iter()
        .map(|r| r["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, [2, 3]);
    assert_eq!(
        records[0]["value"],
        json!({"encoding": "utf8", "data": "value-2"})
    );
    assert_eq!(records[0]["key"], json!({"encoding": "utf8", "data": "k2"}));
    assert_eq!(records[0]["timestamp"], 1_700_000_000_002i64);
    assert_eq!(page["next_offset"], 4);
    assert_eq!(page["high_watermark"], 5);

    let (_, rest) = api
        .get("/v1/topics/orders/records?partition=1&offset=4")
        .await;
    let offsets: Vec<i64> = rest["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, [4], "the page ends at the high watermark");
    assert_eq!(rest["next_offset"], 5);
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_created_over_kafka_is_listed_browsed_and_deleted_over_rest() {
    let (gw, _backends, api) = start().await;
    let mut s = kafka(&gw).await;
    let created: CreateTopicsResponse = roundtrip(
        &mut s,
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name("payments"))
            .with_num_partitions(3)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("cleanup.policy"))
                .with_value(Some(StrBytes::from_static_str("compact")))])]),
    )
    .await;
    assert_eq!(created.topics[0].error_code, 0);
    produce(&mut s, "payments", 2, values(3).await).await;

    let (status, list) = api.get("/v1/topics").await;
    assert_eq!(status, 200);
    let listed = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "payments")
        .unwrap_or_else(|| panic!("payments not in {list}"));
    assert_eq!(listed["partitions"], 3);
    assert_eq!(listed["replication_factor"], 1);

    let (_, topic) = api.get("/v1/topics/payments").await;
    assert_eq!(config(&topic, "cleanup.policy")["value"], "compact");
    let (_, page) = api.get("/v1/topics/payments/records?partition=2").await;
    let got: Vec<&str> = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"]["data"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["value-0", "value-1", "value-2"]);

    let (status, body) = api.delete("/v1/topics/payments").await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        metadata(&mut s, "payments").await.error_code,
        kafka_protocol::ResponseError::UnknownTopicOrPartition.code(),
        "Kafka clients see the topic gone"
    );
    let (status, err) = api.get("/v1/topics/payments").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (404, Some("topic_not_found"))
    );
    let (status, err) = api.delete("/v1/topics/payments").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (404, Some("topic_not_found"))
    );
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_are_not_utf8_come_back_as_base64_with_their_headers() {
    let (gw, _backends, api) = start().await;
    let (status, _) = api
        .post("/v1/topics", r#"{"name": "bin", "partitions": 1}"#)
        .await;
    assert_eq!(status, 201);
    let mut headers = indexmap::IndexMap::new();
    headers.insert(
        StrBytes::from_static_str("trace"),
        Some(Bytes::from_static(&[0x80, 0x81])),
    );
    headers.insert(StrBytes::from_static_str("empty"), None);
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: 0,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(&[0xff, 0x00, 0x01])),
        value: Some(Bytes::from_static("héllo".as_bytes())),
        headers,
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &[record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    let mut s = kafka(&gw).await;
    produce(&mut s, "bin", 0, buf.freeze()).await;
    let (status, page) = api.get("/v1/topics/bin/records").await;
    assert_eq!(status, 200, "{page}");
    let r = &page["records"][0];
    assert_eq!(r["key"], json!({"encoding": "base64", "data": "/wAB"}));
    assert_eq!(r["value"], json!({"encoding": "utf8", "data": "héllo"}));
    assert_eq!(
        r["headers"],
        json!([
            {"key": "trace", "value": {"encoding": "base64", "data": "gIE="}},
            {"key": "empty", "value": null}
        ])
    );
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_json_with_stable_codes_and_fitting_statuses() {
    let (gw, _backends, api) = start().await;
    let (status, _) = api
        .post("/v1/topics", r#"{"name": "taken", "partitions": 1}"#)
        .await;
    assert_eq!(status, 201);
    let mut s = kafka(&gw).await;
    produce(&mut s, "taken", 0, values(2).await).await;
    let cases: Vec<(&str, &str, Option<&str>, u16, &str)> = vec![
        (
            "POST",
            "/v1/topics",
            Some(r#"{"name": "taken"}"#),
            409,
            "topic_exists",
        ),
        (
            "POST",
            "/v1/topics",
            Some("{not json"),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/topics",
            Some(r#"{"name": "x", "partitons": 2}"#),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/topics",
            Some(r#"{"name": "bad/name"}"#),
            400,
            "invalid_topic_name",
        ),
        (
            "POST",
            "/v1/topics",
            Some(r#"{"name": "zero", "partitions": 0}"#),
            400,
            "invalid_partitions",
        ),
        (
            // the answer would list every partition: larger topics go
            // through Kafka's CreateTopics
            "POST",
            "/v1/topics",
            Some(r#"{"name": "huge", "partitions": 80528}"#),
            400,
            "invalid_partitions",
        ),
        (
            "POST",
            "/v1/topics",
            Some(r#"{"name": "rf", "replication_factor": 9}"#),
            400,
            "invalid_replication_factor",
        ),
        (
            "POST",
            "/v1/topics",
            Some(r#"{"name": "cfg", "configs": {"no.such.key": "1"}}"#),
            400,
            "invalid_config",
        ),
        ("GET", "/v1/topics/missing", None, 404, "topic_not_found"),
        (
            "GET",
            "/v1/topics/missing/records",
            None,
            404,
            "topic_not_found",
        ),
        (
            "GET",
            "/v1/topics/taken/records?partition=7",
            None,
            404,
            "partition_not_found",
        ),
        (
            "GET",
            "/v1/topics/taken/records?offset=3",
            None,
            416,
            "offset_out_of_range",
        ),
        (
            "GET",
            "/v1/topics/taken/records?limit=0",
            None,
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/topics/taken/records?partition=abc",
            None,
            400,
            "invalid_request",
        ),
        ("GET", "/v1/groups/nobody", None, 404, "group_not_found"),
        ("GET", "/v1/nothing-here", None, 404, "not_found"),
    ];
    for (method, path, body, want_status, want_code) in cases {
        let (status, err) = match body {
            Some(b) => api.post(path, b).await,
            None if method == "GET" => api.get(path).await,
            None => unreachable!(),
        };
        assert_eq!(status, want_status, "{method} {path} {body:?}: {err}");
        assert_eq!(err["code"], want_code, "{method} {path} {body:?}: {err}");
        assert!(
            !err["message"].as_str().unwrap().is_empty(),
            "{method} {path}: a message for humans"
        );
    }
    assert!(
        metadata(&mut s, "zero").await.error_code != 0,
        "a refused topic is not created"
    );
    gw.shutdown().await;
}

/// Kafka's consumer-protocol encoding of an assignment.
fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![TopicPartition::default()
            .with_topic(name(topic))
            .with_partitions(partitions.to_vec())])
        .encode(&mut buf, 0)
        .unwrap();
    buf.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_assignment_and_lag_read_as_kafka_sees_them() {
    let (gw, _backends, api) = start().await;
    let (status, _) = api
        .post("/v1/topics", r#"{"name": "events", "partitions": 2}"#)
        .await;
    assert_eq!(status, 201);
    let mut s = kafka(&gw).await;
    produce(&mut s, "events", 0, values(5).await).await;
    produce(&mut s, "events", 1, values(2).await).await;

    let group = GroupId(StrBytes::from_static_str("billing"));
    let joined: JoinGroupResponse = roundtrip(
        &mut s,
        ApiKey::JoinGroup,
        3,
        &JoinGroupRequest::default()
            .with_group_id(group.clone())
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(Bytes::new())]),
    )
    .await;
    assert_eq!(joined.error_code, 0);
    let member = joined.member_id.clone();
    let synced: SyncGroupResponse = roundtrip(
        &mut s,
        ApiKey::SyncGroup,
        3,
        &SyncGroupRequest::default()
            .with_group_id(group.clone())
            .with_generation_id(joined.generation_id)
            .with_member_id(member.clone())
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(member.clone())
                .with_assignment(assignment("events", &[0, 1]))]),
    )
    .await;
    assert_eq!(synced.error_code, 0);
    let committed: OffsetCommitResponse = roundtrip(
        &mut s,
        ApiKey::OffsetCommit,
        8,
        &OffsetCommitRequest::default()
            .with_group_id(group.clone())
            .with_generation_id_or_member_epoch(joined.generation_id)
            .with_member_id(member.clone())
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name("events"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(3)
                        .with_committed_metadata(Some(StrBytes::from_static_str("m"))),
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(2),
                ])]),
    )
    .await;
    assert!(committed.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 0));

    let (status, groups) = api.get("/v1/groups").await;
    assert_eq!(status, 200);
    assert_eq!(
        groups,
        json!([{"group_id": "billing", "state": "Stable", "protocol_type": "consumer"}])
    );
    let listed: ListGroupsResponse =
        roundtrip(&mut s, ApiKey::ListGroups, 4, &ListGroupsRequest::default()).await;
    assert_eq!(listed.groups[0].group_state.as_str(), "Stable");

    let (status, g) = api.get("/v1/groups/billing").await;
    assert_eq!(status, 200, "{g}");
    assert_eq!(g["state"], "Stable");
    assert_eq!(g["protocol"], "range");
    assert_eq!(g["coordinator"], 1);
    assert_eq!(g["members"][0]["member_id"], member.as_str());
    assert_eq!(g["members"][0]["client_id"], "it");
    assert_eq!(
        g["members"][0]["assignment"],
        json!([{"topic": "events", "partitions": [0, 1]}])
    );
    assert_eq!(
        g["offsets"],
        json!([
            {"topic": "events", "partition": 0, "committed_offset": 3, "metadata": "m",
             "high_watermark": 5, "lag": 2},
            {"topic": "events", "partition": 1, "committed_offset": 2, "metadata": "",
             "high_watermark": 2, "lag": 0}
        ])
    );
    assert_eq!(g["total_lag"], 2);

    // The member leaves: the group stays, Empty, with its offsets.
    let left: LeaveGroupResponse = roundtrip(
        &mut s,
        ApiKey::LeaveGroup,
        1,
        &LeaveGroupRequest::default()
            .with_group_id(group)
            .with_member_id(member),
    )
    .await;
    assert_eq!(left.error_code, 0);
    let (_, g) = api.get("/v1/groups/billing").await;
    assert_eq!(g["state"], "Empty");
    assert_eq!(g["members"], json!([]));
    assert_eq!(g["offsets"][0]["committed_offset"], 3);
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_shows_this_agent_live_with_its_partitions_and_the_metastore_leader() {
    let (gw, _backends, api) = start().await;
    let (status, _) = api
        .post("/v1/topics", r#"{"name": "a", "partitions": 3}"#)
        .await;
    assert_eq!(status, 201);
    let (status, c) = api.get("/v1/cluster").await;
    assert_eq!(status, 200, "{c}");
    let mut s = kafka(&gw).await;
    let meta: MetadataResponse =
        roundtrip(&mut s, ApiKey::Metadata, 12, &MetadataRequest::default()).await;
    assert_eq!(
        c["cluster_id"].as_str(),
        meta.cluster_id.as_deref(),
        "the cluster id Kafka clients see"
    );
    assert_eq!(c["node_id"], 1);
    assert_eq!(c["metastore_leader"], 1);
    assert_eq!(c["topics"], 1);
    assert_eq!(c["partitions"], 3);
    let agent = &c["agents"][0];
    assert_eq!(agent["id"], 1);
    assert_eq!(agent["live"], true);
    assert_eq!(agent["this_agent"], true);
    assert_eq!(agent["leader_of"], 3);
    assert_eq!(agent["follower_of"], 0);
    assert_eq!(agent["kafka_address"], "127.0.0.1:9092");
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiering_counts_segments_uploaded_to_object_storage() {
    let (gw, _backends, api) = start().await;
    let (status, created) = api
        .post(
            "/v1/topics",
            r#"{"name": "cold", "partitions": 1, "configs": {"segment.bytes": "1048576"}}"#,
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let mut s = kafka(&gw).await;
    // 2.4 MB in uncompressed batches: at least two sealed segments
    let big = vec![b'x'; 20_000];
    let batch = record_batch(&[&big[..]; 10], false, None, Compression::None);
    for _ in 0..12 {
        produce(&mut s, "cold", 0, batch.clone()).await;
    }
    // A hang guard, not a speed check: sealed segments go up in the background.
    let mut t = Value::Null;
    for _ in 0..600 {
        let (status, body) = api.get("/v1/tiering").await;
        assert_eq!(status, 200, "{body}");
        t = body;
        if t["uploaded_segments"].as_u64().unwrap() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(t["uploaded_segments"].as_u64().unwrap() > 0, "{t}");
    assert!(t["uploaded_bytes"].as_u64().unwrap() > 0, "{t}");
    assert!(t["cache"]["hit_ratio"].is_number(), "{t}");
    assert!(t["upload_lag_seconds"].is_number(), "{t}");

    // bytes per tier: the partition's segments in object storage once the
    // metastore recorded them, and what its local disk holds
    let mut p = Value::Null;
    for _ in 0..600 {
        let (_, topic) = api.get("/v1/topics/cold").await;
        p = topic["partitions"][0].clone();
        if p["tiered_bytes"].as_u64().unwrap() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // a sealed segment holds whole batches of 200 kB, up to segment.bytes
    let tiered = p["tiered_bytes"].as_u64().unwrap();
    assert!(tiered >= 200_000, "at least one sealed segment: {p}");
    assert!(p["local_bytes"].as_u64().unwrap() > 0, "{p}");
    let (_, m) = api.get("/v1/metrics").await;
    let cold = m["storage"]["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "cold")
        .unwrap_or_else(|| panic!("no topic cold in {m}"))
        .clone();
    // the second sealed segment may have gone up since
    let now_tiered = cold["tiered_bytes"].as_u64().unwrap();
    assert!(now_tiered >= tiered, "{m}");
    assert_eq!(cold["local_bytes"], p["local_bytes"], "{m}");
    assert_eq!(m["storage"]["tiered_bytes"], now_tiered, "{m}");
    gw.shutdown().await;

    let (gw, _backends, api) = start_with(false).await;
    let (status, err) = api.get("/v1/tiering").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (404, Some("tiering_disabled"))
    );
    gw.shutdown().await;
}

/// The leader records its high watermarks in the metastore, where agents
/// that do not lead a partition read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_records_high_watermarks_in_the_metastore() {
    let (gw, backends, api) = start().await;
    let (status, body) = api
        .post("/v1/topics", r#"{"name": "marks", "partitions": 2}"#)
        .await;
    assert_eq!(status, 201, "{body}");
    let mut s = kafka(&gw).await;
    produce(&mut s, "marks", 1, values(3).await).await;
    produce(&mut s, "marks", 1, values(2).await).await;
    let recorded = |p: usize| {
        backends
            .meta
            .topic("marks")
            .map_or(-2, |t| t.partitions[p].high_watermark)
    };
    // a hang guard, not a speed check: the leader writes every few seconds
    for _ in 0..300 {
        if recorded(1) == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(recorded(1), 5);
    assert!(
        [-1, 0].contains(&recorded(0)),
        "nothing written to partition 0: {}",
        recorded(0)
    );
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_seek_to_the_first_record_at_or_after_a_timestamp() {
    let (gw, _backends, api) = start().await;
    let (status, body) = api
        .post("/v1/topics", r#"{"name": "clock", "partitions": 1}"#)
        .await;
    assert_eq!(status, 201, "{body}");
    let mut s = kafka(&gw).await;
    // record i of each batch is stamped T0 + i ms
    const T0: i64 = 1_700_000_000_000;
    produce(&mut s, "clock", 0, values(3).await).await;
    produce(&mut s, "clock", 0, values(3).await).await;
    let offsets = |page: &Value| -> Vec<i64> {
        page["records"]
            .as_array()
            .unwrap_or_else(|| panic!("no records in {page}"))
            .iter()
            .map(|r| r["offset"].as_i64().unwrap())
            .collect()
    };
    let (status, page) = api
        .get(&format!(
            "/v1/topics/clock/records?timestamp={}&limit=2",
            T0 + 1
        ))
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(offsets(&page), [1, 2], "{page}");
    assert_eq!(page["next_offset"], 3);
    // nothing that late: an empty page at the high watermark
    let (_, page) = api
        .get(&format!("/v1/topics/clock/records?timestamp={}", T0 + 3))
        .await;
    assert_eq!(offsets(&page), Vec::<i64>::new(), "{page}");
    assert_eq!(page["next_offset"], 6);
    let (_, page) = api.get("/v1/topics/clock/records?timestamp=0").await;
    assert_eq!(offsets(&page), [0, 1, 2, 3, 4, 5], "{page}");
    for bad in ["timestamp=1&offset=0", "timestamp=-5", "timestamp=soon"] {
        let (status, err) = api.get(&format!("/v1/topics/clock/records?{bad}")).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (400, Some("invalid_request")),
            "{bad}: {err}"
        );
    }
    gw.shutdown().await;
}

fn counts(h: &Value) -> u64 {
    h["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum()
}

/// What the console's throughput and latency charts are drawn from: each
/// produce and each fetch answer is counted once, a long poll that re-read
/// the log as writes woke it included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_each_request_once_for_the_console_charts() {
    let (gw, _backends, api) = start().await;
    let (status, body) = api
        .post("/v1/topics", r#"{"name": "meter", "partitions": 1}"#)
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, before) = api.get("/v1/metrics").await;
    assert_eq!(status, 200, "{before}");
    let mut s = kafka(&gw).await;
    let batch = values(4).await;
    for _ in 0..3 {
        produce(&mut s, "meter", 0, batch.clone()).await;
    }
    // a long poll for more than there is, woken by a fourth write
    let mut poller = kafka(&gw).await;
    let long_poll = tokio::spawn(async move {
        let fetched: FetchResponse = roundtrip(
            &mut poller,
            ApiKey::Fetch,
            12,
            &FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(1500)
                .with_min_bytes(1 << 20)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(name("meter"))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20)])]),
        )
        .await;
        let p = &fetched.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        p.records.as_ref().map_or(0, |r| r.len()) as u64
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce(&mut s, "meter", 0, batch.clone()).await;
    let answered = long_poll.await.unwrap();
    assert_eq!(answered, 4 * batch.len() as u64, "the long poll's answer");

    let (_, after) = api.get("/v1/metrics").await;
    let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    assert_eq!(delta("produced_bytes"), 4 * batch.len() as u64, "{after}");
    assert_eq!(delta("produced_records"), 16, "{after}");
    assert_eq!(delta("fetched_bytes"), answered, "{after}");
    assert_eq!(
        counts(&after["produce_latency"]) - counts(&before["produce_latency"]),
        4
    );
    assert_eq!(
        counts(&after["fetch_latency"]) - counts(&before["fetch_latency"]),
        1
    );
    let h = &after["produce_latency"];
    assert_eq!(
        h["counts"].as_array().unwrap().len(),
        h["bounds_seconds"].as_array().unwrap().len() + 1
    );
    assert!(after["at_ms"].as_i64().unwrap() >= before["at_ms"].as_i64().unwrap());
    let meter = after["storage"]["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "meter")
        .unwrap_or_else(|| panic!("no topic meter in {after}"))
        .clone();
    assert_eq!(
        meter,
        json!({"topic": "meter", "local_bytes": 4 * batch.len(), "tiered_bytes": 0}),
        "the log stores the bytes produced, as sent"
    );
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metrics_and_extensions_keep_their_answers() {
    let (gw, _backends, api) = start().await;
    let resp = api
        .http
        .get(format!("{}/healthz", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.text().await.unwrap(), "ok\n");
    let resp = api
        .http
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/plain; version=0.0.4"
    );
    let text = resp.text().await.unwrap();
    assert!(text.contains("aerostream_open_partitions"), "{text}");
    assert!(
        text.contains("aerostream_tier_"),
        "the extension's figures are appended: {text}"
    );
    let resp = api
        .http
        .get(format!("{}/nowhere", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert_eq!(resp.text().await.unwrap(), "not found\n");
    gw.shutdown().await;
}

// --- the OpenAPI document ---------------------------------------------------

/// Resolves `#/components/schemas/X`.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let name = r.strip_prefix("#/components/schemas/").unwrap();
            let found = &doc["components"]["schemas"][name];
            assert!(!found.is_null(), "{r} is not in the document");
            resolve(doc, found)
        }
        None => schema,
    }
}

/// Whether `value` matches `schema` in what a client relies on: types,
/// required properties, array items; the problem as text if not.
fn check(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let schema = resolve(doc, schema);
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema[key].as_array() {
            return if options.iter().any(|o| check(doc, o, value, at).is_ok()) {
                Ok(())
            } else {
                Err(format!("{at}: {value} matches none of {key}"))
            };
        }
    }
    if let Some(all) = schema["allOf"].as_array() {
        for s in all {
            check(doc, s, value, at)?;
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
        _ => vec![],
    };
    let type_ok = |t: &str| match t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        other => panic!("unexpected type {other}"),
    };
    if !types.is_empty() && !types.iter().any(|t| type_ok(t)) {
        return Err(format!("{at}: {value} is not {types:?}"));
    }
    if let Some(obj) = value.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap();
            if !obj.contains_key(r) {
                return Err(format!("{at}: the documented field {r} is missing"));
            }
        }
        if let Some(props) = schema["properties"].as_object() {
            for (k, v) in obj {
                let Some(p) = props.get(k) else {
                    return Err(format!("{at}: the field {k} is not documented"));
                };
                check(doc, p, v, &format!("{at}.{k}"))?;
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
        for (i, v) in arr.iter().enumerate() {
            check(doc, items, v, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// The documented (method, path) pairs of the REST API as docs/rest-api.md
/// lists them (`### GET /v1/...` headings).
fn documented_in_markdown() -> BTreeSet<(String, String)> {
    let md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/rest-api.md"))
        .unwrap();
    md.lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .filter_map(|l| l.strip_suffix('`'))
        .map(|l| {
            let (m, p) = l.split_once(' ').unwrap();
            (m.to_lowercase(), p.to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_matches_the_routes_served_and_the_answers_given() {
    let (gw, _backends, api) = start().await;
    let (status, doc) = api.get("/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert_eq!(
        doc,
        serde_json::to_value(gateway::rest::openapi()).unwrap(),
        "the served document is the router's"
    );
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                documented.insert((method.clone(), path.clone()));
            }
        }
    }
    assert_eq!(
        documented,
        documented_in_markdown(),
        "docs/rest-api.md describes exactly the documented operations"
    );

    // Something to describe on every endpoint.
    let (status, _) = api
        .post("/v1/topics", r#"{"name": "doc-topic", "partitions": 1}"#)
        .await;
    assert_eq!(status, 201);
    let mut s = kafka(&gw).await;
    produce(&mut s, "doc-topic", 0, values(3).await).await;
    let committed: OffsetCommitResponse = roundtrip(
        &mut s,
        ApiKey::OffsetCommit,
        8,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("doc-group")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name("doc-topic"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)])]),
    )
    .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    let concrete = |path: &str| {
        path.replace("{name}", "doc-topic")
            .replace("{id}", "doc-group")
            .replace("{pipeline}", "doc-pipeline")
    };
    let mut served = BTreeSet::new();
    // Every documented operation is served and answers as documented,
    // on success and on a documented error.
    for (method, path) in &documented {
        let url = concrete(path);
        let mut answers = Vec::new();
        match method.as_str() {
            "get" => {
                answers.push(api.get(&url).await);
                if path.contains('{') {
                    answers.push(
                        api.get(&path.replace("{name}", "nope").replace("{id}", "nope"))
                            .await,
                    );
                }
            }
            "post" if path.ends_with("/heartbeat") => {
                let beat = r#"{"worker": "w", "ttl_ms": 6000, "partitions": [0, 1]}"#;
                answers.push(api.post(&url, beat).await);
                answers.push(api.post(&url, r#"{"worker": "w", "ttl_ms": 5}"#).await);
            }
            "post" if path.ends_with("/leave") => {
                answers.push(api.post(&url, r#"{"worker": "w"}"#).await);
                answers.push(api.post(&url, r#"{}"#).await);
            }
            "post" => {
                answers.push(
                    api.post(&url, r#"{"name": "doc-made", "partitions": 1}"#)
                        .await,
                );
                answers.push(api.post(&url, r#"{"name": "doc-made"}"#).await);
            }
            "delete" => {
                answers.push(api.delete(&url.replace("doc-topic", "doc-made")).await);
                answers.push(api.delete(&url.replace("doc-topic", "doc-made")).await);
            }
            other => panic!("unexpected method {other}"),
        }
        for (status, body) in answers {
            let op = &doc["paths"][path][method];
            let response = &op["responses"][status.to_string()];
            assert!(
                !response.is_null(),
                "{method} {path} answered {status}, which is not documented: {body}"
            );
            if let Some(schema) = response["content"]["application/json"].get("schema") {
                check(&doc, schema, &body, &format!("{method} {path} {status}")).unwrap();
            } else if path != "/v1/openapi.json" {
                assert!(
                    body.is_null(),
                    "{method} {path} {status}: an undocumented body {body}"
                );
            }
            served.insert((method.clone(), path.clone()));
        }
    }
    assert_eq!(served, documented);
    gw.shutdown().await;
}

/// `/v1/...` paths the console's script calls, with `${...}` parts as `{}`.
fn console_calls(js: &str) -> BTreeSet<(String, String)> {
    let mut calls = BTreeSet::new();
    for (i, _) in js.match_indices("api(\"") {
        let rest = &js[i + 5..];
        let (method, rest) = rest.split_once('"').unwrap();
        let rest = rest.trim_start_matches([',', ' ']);
        let path: String = rest[1..]
            .chars()
            .take_while(|c| !matches!(c, '"' | '`' | '?'))
            .collect();
        let mut normal = String::new();
        let mut depth = 0;
        for c in path.chars() {
            match c {
                '$' if depth == 0 => {}
                '{' => {
                    if depth == 0 {
                        normal.push_str("{}");
                    }
                    depth += 1;
                }
                '}' => depth -= 1,
                _ if depth == 0 => normal.push(c),
                _ => {}
            }
        }
        calls.insert((method.to_lowercase(), normal));
    }
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_is_served_from_the_binary_and_calls_only_documented_endpoints() {
    let (gw, _backends, api) = start().await;
    let resp = api
        .http
        .get(format!("{}/aerostream/console", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.url().path().ends_with("/aerostream/console/"));
    let html = resp.text().await.unwrap();
    assert!(html.contains(r#"src="app.js""#) && html.contains(r#"href="style.css""#));
    let mut assets = vec![html];
    for (file, kind) in [("app.js", "text/javascript"), ("style.css", "text/css")] {
        let resp = api
            .http
            .get(format!("{}/aerostream/console/{file}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{file}");
        let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ctype.starts_with(kind), "{file}: {ctype}");
        assets.push(resp.text().await.unwrap());
    }
    for a in &assets {
        // the SVG namespace is a name the browser never fetches
        let a = a.replace("\"http://www.w3.org/2000/svg\"", "");
        assert!(
            !a.contains("http://") && !a.contains("https://"),
            "the console loads nothing from elsewhere"
        );
    }
    let (_, doc) = api.get("/v1/openapi.json").await;
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            let normal = path.replace("{name}", "{}").replace("{id}", "{}");
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.clone(), normal.clone()))
        })
        .collect();
    let calls = console_calls(&assets[1]);
    assert!(calls.len() >= 8, "{calls:?}");
    // the schema registry's API (Confluent's, docs/schema-registry.md) is
    // not in the OpenAPI document: each call the console makes to it must
    // reach one of its endpoints, which answer in the registry's terms
    // (`error_code`) even for a subject that does not exist, where an
    // unknown path gets the listener's plain 404
    let (registry, rest): (Vec<_>, Vec<_>) = calls
        .iter()
        .partition(|(_, path)| path.starts_with("/schema-registry/"));
    assert!(registry.len() >= 4, "{registry:?}");
    for (method, path) in registry {
        assert_eq!(method, "get", "the console only reads the registry");
        let url = format!("{}{}", api.base, path.replace("{}", "1"));
        let resp = api.http.get(&url).send().await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap();
        assert!(
            status == 200 || body.contains("\"error_code\""),
            "the console calls {path}, which the registry does not serve ({status}: {body})"
        );
    }
    // Kafka Connect's API (docs/connect.md) is the agent's extension under
    // /connect, not the gateway's: the console's calls to it are checked
    // against the real binary (tests/js/console.test.js)
    let (connect, rest): (Vec<_>, Vec<_>) = rest
        .into_iter()
        .partition(|(_, path)| path.starts_with("/connect/"));
    assert!(connect.len() >= 3, "{connect:?}");
    for call in rest {
        assert!(
            documented.contains(call),
            "the console calls {call:?}, which the API does not document"
        );
    }
    gw.shutdown().await;
}

/// With security on, the REST API and the console need a Kafka user's
/// login (or a token), and the ACLs decide what it may do (in detail in
/// `rest_acls.rs`); the probes and /metrics stay open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_security_on_the_api_needs_a_login_the_acls_allow() {
    let backends = Backends::start(Logs::Tiered, 1).await;
    let opts = GatewayOptions {
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        broker: BrokerConfig {
            sasl_mechanisms: vec![gateway::sasl::Mechanism::Plain],
            authz: security::authz::AuthzConfig {
                enabled: true,
                superusers: vec!["User:admin".into()],
                allow_if_no_acl: false,
            },
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    common::add_users(&backends.meta, &["admin", "alice"], "pw").await;
    let base = format!("http://{}", gw.http_addr().unwrap());
    let http = reqwest::Client::new();
    let status = |r: reqwest::Response| r.status().as_u16();

    let anonymous = http.get(format!("{base}/v1/topics")).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    assert!(anonymous
        .headers()
        .get("www-authenticate")
        .is_some_and(|v| v.to_str().unwrap().starts_with("Basic")));
    let console = http
        .get(format!("{base}/aerostream/console/"))
        .send()
        .await
        .unwrap();
    assert_eq!(status(console), 401, "the console asks for a login");
    let wrong = http
        .get(format!("{base}/v1/topics"))
        .basic_auth("admin", Some("nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(status(wrong), 401);
    for open in ["/health", "/metrics"] {
        let r = http.get(format!("{base}{open}")).send().await.unwrap();
        assert_eq!(status(r), 200, "{open} stays open");
    }

    let as_admin = http
        .post(format!("{base}/v1/topics"))
        .basic_auth("admin", Some("pw"))
        .header("content-type", "application/json")
        .body(r#"{"name":"secured","partitions":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(status(as_admin), 201);
    let alice_reads = || {
        http.get(format!("{base}/v1/cluster"))
            .basic_auth("alice", Some("pw"))
            .send()
    };
    assert_eq!(status(alice_reads().await.unwrap()), 403, "no ACL yet");
    let grant = metastore::acl::AclBinding {
        resource_type: metastore::acl::ResourceType::Cluster,
        resource_name: "kafka-cluster".into(),
        pattern: metastore::acl::PatternType::Literal,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: metastore::acl::AclOperation::Describe,
        permission: metastore::acl::AclPermission::Allow,
    };
    backends.meta.create_acls(vec![grant]).await.unwrap();
    assert_eq!(status(alice_reads().await.unwrap()), 200);
    let alice_deletes = http
        .delete(format!("{base}/v1/topics/secured"))
        .basic_auth("alice", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        status(alice_deletes),
        403,
        "DESCRIBE does not allow changes"
    );
    gw.shutdown().await;
}
