//! Dispatcher tests: requests encoded as a client would, answers decoded as a
//! client would, against in-memory and on-disk backends.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;

use super::dispatch;
use crate::backend::memory::{MemoryCatalog, MemoryLogFactory};
use crate::backend::{Catalog, LogFactory};
use crate::broker::{Broker, BrokerConfig};
use crate::group::coordinator::Coordinator;
use crate::partition::Partitions;

fn broker_with(logs: Arc<dyn LogFactory>) -> Broker {
    let catalog: Arc<dyn Catalog> = Arc::new(MemoryCatalog::new(1));
    let partitions = Arc::new(Partitions::new(
        vec![tokio::runtime::Handle::current()],
        logs,
    ));
    let config = BrokerConfig::default();
    let groups = Coordinator::start(config.group.clone(), "test".into());
    Broker::new(config, catalog, partitions, groups)
}

fn broker() -> Broker {
    broker_with(Arc::new(MemoryLogFactory))
}

fn frame<R: Encodable>(api: ApiKey, version: i16, req: &R) -> Option<Bytes> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("test")))
        .encode(&mut buf, api.request_header_version(version))
        .ok()?;
    req.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}

/// Sends a request and decodes the response body (after checking the correlation id).
async fn call<Req: Encodable, Resp: Decodable>(
    b: &Broker,
    api: ApiKey,
    version: i16,
    req: &Req,
) -> Resp {
    let f = frame(api, version, req).expect("request encodes");
    let resp = dispatch(b, "/127.0.0.1", f)
        .await
        .expect("served")
        .expect("a response");
    let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
    let header =
        ResponseHeader::decode(&mut bytes, api.response_header_version(version)).expect("header");
    assert_eq!(header.correlation_id, 7);
    Resp::decode(&mut bytes, version).expect("response decodes")
}

fn batch(values: &[&str], producer: Option<(i64, i16, i32)>, compression: Compression) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if seq < 0 { -1 } else { seq + i as i32 },
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(v.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("batch encodes");
    buf.freeze()
}

async fn create(b: &Broker, name: &str, partitions: i32) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]);
    let resp: CreateTopicsResponse = call(b, ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

fn produce_req(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

async fn produce(
    b: &Broker,
    topic: &str,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    let resp: ProduceResponse =
        call(b, ApiKey::Produce, 9, &produce_req(topic, 0, records, -1)).await;
    resp.responses[0].partition_responses[0].clone()
}

fn fetch_req(topic: &str, offset: i64, max_wait_ms: i32, min_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

fn values_of(records: Option<Bytes>) -> Vec<(i64, String)> {
    let mut bytes = records.unwrap_or_default();
    let mut out = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut bytes).expect("batches decode") {
        for r in set.records {
            out.push((
                r.offset,
                String::from_utf8_lossy(&r.value.unwrap_or_default()).to_string(),
            ));
        }
    }
    out
}

#[tokio::test]
async fn api_versions_advertises_every_api_and_answers_unknown_versions_in_v0() {
    let b = broker();
    let resp: ApiVersionsResponse =
        call(&b, ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).await;
    assert_eq!(resp.error_code, 0);
    assert_eq!(
        resp.api_keys.len(),
        crate::kafka::versions::supported().len()
    );
    // A client newer than us: the answer is v0-shaped with UNSUPPORTED_VERSION and our ranges.
    let mut f = BytesMut::new();
    f.extend_from_slice(&[0, 18, 0, 99, 0, 0, 0, 7, 0, 0]);
    let resp = dispatch(&b, "/127.0.0.1", f.freeze())
        .await
        .expect("served")
        .expect("response");
    let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
    let _ = ResponseHeader::decode(&mut bytes, 0).expect("header");
    let v0 = ApiVersionsResponse::decode(&mut bytes, 0).expect("v0 body");
    assert_eq!(v0.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(!v0.api_keys.is_empty());
}

#[tokio::test]
async fn every_advertised_version_of_every_api_answers_a_default_request() {
    let b = broker();
    create(&b, "t", 1).await;
    macro_rules! each_version {
        ($api:expr, $req:expr) => {{
            let (lo, hi) = crate::kafka::versions::range($api).expect("advertised");
            for v in lo..=hi {
                let Some(f) = frame($api, v, &$req) else {
                    continue;
                };
                match dispatch(&b, "/127.0.0.1", f).await {
                    Ok(_) => {}
                    Err(super::DispatchError::Malformed { .. }) => {}
                    Err(e) => panic!("{:?} v{v}: {e}", $api),
                }
            }
        }};
    }
    each_version!(ApiKey::Metadata, MetadataRequest::default());
    each_version!(
        ApiKey::Produce,
        produce_req("t", 0, batch(&["a"], None, Compression::None), 1)
    );
    each_version!(ApiKey::Fetch, fetch_req("t", 0, 0, 1));
    each_version!(
        ApiKey::ListOffsets,
        ListOffsetsRequest::default().with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1)
                ])
        ])
    );
    each_version!(ApiKey::FindCoordinator, FindCoordinatorRequest::default());
    each_version!(ApiKey::DescribeGroups, DescribeGroupsRequest::default());
    each_version!(ApiKey::ListGroups, ListGroupsRequest::default());
    each_version!(ApiKey::OffsetFetch, OffsetFetchRequest::default());
    each_version!(ApiKey::OffsetCommit, OffsetCommitRequest::default());
    each_version!(ApiKey::Heartbeat, HeartbeatRequest::default());
    each_version!(ApiKey::LeaveGroup, LeaveGroupRequest::default());
    each_version!(ApiKey::SyncGroup, SyncGroupRequest::default());
    each_version!(ApiKey::InitProducerId, InitProducerIdRequest::default());
    each_version!(ApiKey::DescribeConfigs, DescribeConfigsRequest::default());
    each_version!(ApiKey::DescribeCluster, DescribeClusterRequest::default());
    each_version!(ApiKey::DeleteRecords, DeleteRecordsRequest::default());
    each_version!(
        ApiKey::OffsetForLeaderEpoch,
        OffsetForLeaderEpochRequest::default()
    );
    each_version!(ApiKey::CreatePartitions, CreatePartitionsRequest::default());
    each_version!(ApiKey::DeleteTopics, DeleteTopicsRequest::default());
    each_version!(ApiKey::DeleteGroups, DeleteGroupsRequest::default());
    each_version!(ApiKey::OffsetDelete, OffsetDeleteRequest::default());
    each_version!(ApiKey::AlterConfigs, AlterConfigsRequest::default());
    each_version!(
        ApiKey::IncrementalAlterConfigs,
        IncrementalAlterConfigsRequest::default()
    );
    each_version!(ApiKey::CreateTopics, CreateTopicsRequest::default());
}

#[tokio::test]
async fn produced_batches_come_back_from_fetch_with_dense_offsets() {
    let b = broker();
    create(&b, "orders", 1).await;
    let first = produce(&b, "orders", batch(&["a", "b"], None, Compression::None)).await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    let second = produce(&b, "orders", batch(&["c"], None, Compression::Gzip)).await;
    assert_eq!((second.error_code, second.base_offset), (0, 2));
    let resp: FetchResponse = call(&b, ApiKey::Fetch, 12, &fetch_req("orders", 0, 0, 1)).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 3);
    let got = values_of(p.records.clone());
    assert_eq!(got, vec![(0, "a".into()), (1, "b".into()), (2, "c".into())]);
}

#[tokio::test]
async fn produce_reports_per_partition_errors() {
    let b = broker();
    create(&b, "t", 1).await;
    let missing = produce(&b, "nope", batch(&["x"], None, Compression::None)).await;
    assert_eq!(missing.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let mut corrupt = BytesMut::from(&batch(&["x"], None, Compression::None)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let bad = produce(&b, "t", corrupt.freeze()).await;
    assert_eq!(bad.error_code, 2, "CORRUPT_MESSAGE");
    let huge = "x".repeat(2_000_000);
    let too_big = produce(&b, "t", batch(&[&huge], None, Compression::None)).await;
    assert_eq!(too_big.error_code, 10, "MESSAGE_TOO_LARGE");
    let resp: ProduceResponse = call(
        &b,
        ApiKey::Produce,
        9,
        &produce_req("t", 3, batch(&["x"], None, Compression::None), 1),
    )
    .await;
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code, 3,
        "no partition 3"
    );
}

#[tokio::test]
async fn produce_with_acks_zero_gets_no_response() {
    let b = broker();
    create(&b, "t", 1).await;
    let f = frame(
        ApiKey::Produce,
        9,
        &produce_req("t", 0, batch(&["x"], None, Compression::None), 0),
    )
    .expect("frame");
    assert!(dispatch(&b, "/127.0.0.1", f)
        .await
        .expect("served")
        .is_none());
    let resp: FetchResponse = call(&b, ApiKey::Fetch, 12, &fetch_req("t", 0, 0, 1)).await;
    assert_eq!(
        resp.responses[0].partitions[0].high_watermark, 1,
        "the record was still appended"
    );
}

async fn idempotent_producer_retries_are_acknowledged_once(b: &Broker) {
    create(b, "idem", 1).await;
    let init: InitProducerIdResponse = call(
        b,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
    .await;
    assert_eq!(init.error_code, 0);
    let pid = init.producer_id.0;
    let first = produce(
        b,
        "idem",
        batch(&["a", "b"], Some((pid, 0, 0)), Compression::None),
    )
    .await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    let retry = produce(
        b,
        "idem",
        batch(&["a", "b"], Some((pid, 0, 0)), Compression::None),
    )
    .await;
    assert_eq!(
        (retry.error_code, retry.base_offset),
        (0, 0),
        "a retry is acknowledged with the original offset"
    );
    let gap = produce(
        b,
        "idem",
        batch(&["z"], Some((pid, 0, 5)), Compression::None),
    )
    .await;
    assert_eq!(gap.error_code, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER");
    let next = produce(
        b,
        "idem",
        batch(&["c"], Some((pid, 0, 2)), Compression::None),
    )
    .await;
    assert_eq!((next.error_code, next.base_offset), (0, 2));
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("idem", 0, 0, 1)).await;
    assert_eq!(
        values_of(resp.responses[0].partitions[0].records.clone()).len(),
        3,
        "nothing written twice"
    );
}

#[tokio::test]
async fn idempotent_producer_retries_are_acknowledged_once_in_memory() {
    idempotent_producer_retries_are_acknowledged_once(&broker()).await;
}

#[tokio::test]
async fn idempotent_producer_retries_are_acknowledged_once_on_disk() {
    let dir = tempfile::tempdir().expect("tmp");
    let logs = crate::backend::disk::DiskLogFactory::new(dir.path()).expect("log dir");
    idempotent_producer_retries_are_acknowledged_once(&broker_with(Arc::new(logs))).await;
}

#[tokio::test]
async fn fetch_waits_for_min_bytes_until_data_arrives() {
    let b = Arc::new(broker());
    create(&b, "lp", 1).await;
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let resp: FetchResponse =
                call(&b, ApiKey::Fetch, 12, &fetch_req("lp", 0, 30_000, 1)).await;
            resp
        })
    };
    tokio::task::yield_now().await;
    produce(&b, "lp", batch(&["late"], None, Compression::None)).await;
    let resp = waiter.await.expect("fetch task");
    assert_eq!(
        values_of(resp.responses[0].partitions[0].records.clone()),
        vec![(0, "late".into())]
    );
}

#[tokio::test]
async fn fetch_without_data_returns_empty_after_max_wait() {
    let b = broker();
    create(&b, "quiet", 1).await;
    let resp: FetchResponse = call(&b, ApiKey::Fetch, 12, &fetch_req("quiet", 0, 50, 1)).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert!(values_of(p.records.clone()).is_empty());
}

#[tokio::test]
async fn fetch_past_the_log_end_is_offset_out_of_range() {
    let b = broker();
    create(&b, "t", 1).await;
    let resp: FetchResponse = call(&b, ApiKey::Fetch, 12, &fetch_req("t", 10, 0, 1)).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
}

#[tokio::test]
async fn incremental_fetch_session_lists_only_partitions_with_news() {
    let b = broker();
    create(&b, "s", 1).await;
    produce(&b, "s", batch(&["a"], None, Compression::None)).await;
    let mut req = fetch_req("s", 0, 0, 1)
        .with_session_id(0)
        .with_session_epoch(0);
    let first: FetchResponse = call(&b, ApiKey::Fetch, 12, &req).await;
    assert_ne!(first.session_id, 0, "a session was created");
    assert_eq!(first.responses.len(), 1);
    // Next epoch: the client moved to offset 1 and nothing new arrived, so the partition is left out.
    req = fetch_req("s", 1, 0, 0)
        .with_session_id(first.session_id)
        .with_session_epoch(1);
    let quiet: FetchResponse = call(&b, ApiKey::Fetch, 12, &req).await;
    assert_eq!(quiet.error_code, 0);
    assert!(quiet.responses.is_empty(), "{quiet:?}");
    let stale: FetchResponse = call(&b, ApiKey::Fetch, 12, &req).await;
    assert_eq!(stale.error_code, 71, "INVALID_FETCH_SESSION_EPOCH");
}

#[tokio::test]
async fn metadata_auto_creates_unknown_topics_unless_the_client_says_no() {
    let b = broker();
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("fresh"))))]))
        .with_allow_auto_topic_creation(true);
    let resp: MetadataResponse = call(&b, ApiKey::Metadata, 9, &req).await;
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), 1);
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("other"))))]))
        .with_allow_auto_topic_creation(false);
    let resp: MetadataResponse = call(&b, ApiKey::Metadata, 9, &req).await;
    assert_eq!(resp.topics[0].error_code, 3);
}

#[tokio::test]
async fn list_offsets_finds_offsets_by_time() {
    let b = broker();
    create(&b, "time", 1).await;
    produce(&b, "time", batch(&["a", "b", "c"], None, Compression::None)).await;
    let q = |ts: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("time")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default().with_timestamp(ts),
                ])])
    };
    let latest: ListOffsetsResponse = call(&b, ApiKey::ListOffsets, 7, &q(-1)).await;
    assert_eq!(latest.topics[0].partitions[0].offset, 3);
    let earliest: ListOffsetsResponse = call(&b, ApiKey::ListOffsets, 7, &q(-2)).await;
    assert_eq!(earliest.topics[0].partitions[0].offset, 0);
    let late: ListOffsetsResponse = call(&b, ApiKey::ListOffsets, 7, &q(2_000_000_000_000)).await;
    assert_eq!(late.topics[0].partitions[0].offset, -1, "nothing that late");
}

#[tokio::test]
async fn malformed_frames_close_the_connection_without_panicking() {
    let b = broker();
    for bad in [
        vec![0u8, 1],
        vec![0x7f, 0x7f, 0, 0, 0, 0, 0, 1],
        vec![0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff],
        vec![0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0],
    ] {
        assert!(dispatch(&b, "/127.0.0.1", Bytes::from(bad)).await.is_err());
    }
}

#[tokio::test]
async fn frames_declaring_billions_of_array_elements_fail_without_aborting() {
    // A few bytes that claim i32::MAX topics: the decoder reserves for the
    // claim before it reads an element (see `crate::alloc`), then fails on
    // the short buffer. The process must survive and the broker keep serving.
    let b = broker();
    let classic = [
        &[0u8, 3, 0, 0, 0, 0, 0, 1, 0, 0][..],
        &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1],
    ]
    .concat();
    // Flexible versions use a compact array: unsigned varint of count + 1.
    let compact = [
        &[0u8, 3, 0, 12, 0, 0, 0, 2, 0, 0, 0][..],
        &[0xff, 0xff, 0xff, 0xff, 0x07, 0, 0],
    ]
    .concat();
    for bad in [classic, compact] {
        assert!(dispatch(&b, "/127.0.0.1", Bytes::from(bad)).await.is_err());
    }
    let ok: MetadataResponse = call(&b, ApiKey::Metadata, 12, &MetadataRequest::default()).await;
    assert_eq!(
        ok.brokers.len(),
        1,
        "the broker still answers after the hostile frames"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
    ))]

    #[test]
    fn random_frames_never_panic_the_dispatcher(
        api in 0i16..80,
        version in 0i16..20,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let b = broker();
            let mut f = BytesMut::new();
            f.extend_from_slice(&api.to_be_bytes());
            f.extend_from_slice(&version.to_be_bytes());
            f.extend_from_slice(&1i32.to_be_bytes());
            f.extend_from_slice(&body);
            // Any outcome but a panic is fine; bounded waits keep fetches short.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), dispatch(&b, "/127.0.0.1", f.freeze())).await;
        });
    }
}

#[tokio::test]
async fn populated_group_and_offset_answers_encode_in_every_advertised_version() {
    let catalog: Arc<dyn Catalog> = Arc::new(MemoryCatalog::new(1));
    let partitions = Arc::new(Partitions::new(
        vec![tokio::runtime::Handle::current()],
        Arc::new(MemoryLogFactory),
    ));
    let mut config = BrokerConfig::default();
    config.group.initial_rebalance_delay_ms = 0;
    let groups = Coordinator::start(config.group.clone(), "test".into());
    let b = Broker::new(config, catalog, partitions, groups);
    create(&b, "t", 2).await;
    produce(&b, "t", batch(&["a", "b"], None, Compression::Lz4)).await;
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(StrBytes::from_static_str("range"))
        .with_metadata(Bytes::from_static(b"meta"))]);
    let first: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 7, &join).await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let joined: JoinGroupResponse = call(
        &b,
        ApiKey::JoinGroup,
        7,
        &join.clone().with_member_id(first.member_id.clone()),
    )
    .await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let synced: SyncGroupResponse = call(
        &b,
        ApiKey::SyncGroup,
        5,
        &SyncGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_generation_id(1)
            .with_member_id(joined.member_id.clone())
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(Some(StrBytes::from_static_str("range")))
            .with_assignments(vec![
                sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(joined.member_id.clone())
                    .with_assignment(Bytes::from_static(b"assigned")),
            ]),
    )
    .await;
    assert_eq!(
        (synced.error_code, &synced.assignment[..]),
        (0, &b"assigned"[..])
    );
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id_or_member_epoch(1)
        .with_member_id(joined.member_id.clone())
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(2),
                ]),
        ]);
    let committed: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    let g = || GroupId(StrBytes::from_static_str("g"));
    let t = || TopicName(StrBytes::from_static_str("t"));
    type MakeFrame = Box<dyn Fn(i16) -> Option<Bytes>>;
    let requests: Vec<(ApiKey, MakeFrame)> = vec![
        (
            ApiKey::DescribeGroups,
            Box::new(move |v| {
                frame(
                    ApiKey::DescribeGroups,
                    v,
                    &DescribeGroupsRequest::default().with_groups(vec![g()]),
                )
            }),
        ),
        (
            ApiKey::ListGroups,
            Box::new(|v| frame(ApiKey::ListGroups, v, &ListGroupsRequest::default())),
        ),
        (
            ApiKey::OffsetFetch,
            Box::new(move |v| {
                let req = if v >= 8 {
                    OffsetFetchRequest::default().with_groups(vec![
                        offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(g()),
                    ])
                } else {
                    OffsetFetchRequest::default()
                        .with_group_id(g())
                        .with_topics(Some(vec![
                            offset_fetch_request::OffsetFetchRequestTopic::default()
                                .with_name(t())
                                .with_partition_indexes(vec![0, 1]),
                        ]))
                };
                frame(ApiKey::OffsetFetch, v, &req)
            }),
        ),
        (
            ApiKey::Metadata,
            Box::new(move |v| {
                frame(
                    ApiKey::Metadata,
                    v,
                    &MetadataRequest::default().with_topics(Some(vec![
                        metadata_request::MetadataRequestTopic::default().with_name(Some(t())),
                    ])),
                )
            }),
        ),
        (
            ApiKey::Fetch,
            Box::new(|v| frame(ApiKey::Fetch, v, &fetch_req("t", 0, 0, 1))),
        ),
        (
            ApiKey::DescribeConfigs,
            Box::new(|v| {
                frame(
                    ApiKey::DescribeConfigs,
                    v,
                    &DescribeConfigsRequest::default().with_resources(vec![
                        describe_configs_request::DescribeConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t")),
                    ]),
                )
            }),
        ),
    ];
    for (api, make) in requests {
        let (lo, hi) = crate::kafka::versions::range(api).expect("advertised");
        for v in lo..=hi {
            let Some(f) = make(v) else { continue };
            let resp = dispatch(&b, "/127.0.0.1", f)
                .await
                .unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"))
                .expect("response");
            let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
            ResponseHeader::decode(&mut bytes, api.response_header_version(v)).expect("header");
            ResponseKind::decode(api, &mut bytes, v)
                .unwrap_or_else(|e| panic!("{api:?} v{v} decodes: {e}"));
        }
    }
    let d: DescribeGroupsResponse = call(
        &b,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_static_str("g"))]),
    )
    .await;
    assert_eq!(d.groups[0].group_state.as_str(), "Stable");
    assert_eq!(&d.groups[0].members[0].member_assignment[..], b"assigned");
}

#[tokio::test]
async fn delete_records_raises_the_log_start_and_leader_epochs_end_at_the_log_end() {
    let b = broker();
    create(&b, "dr", 1).await;
    produce(&b, "dr", batch(&["a", "b"], None, Compression::None)).await;
    produce(&b, "dr", batch(&["c"], None, Compression::None)).await;
    let req = DeleteRecordsRequest::default().with_topics(vec![
        delete_records_request::DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("dr")))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(2),
            ]),
    ]);
    let resp: DeleteRecordsResponse = call(&b, ApiKey::DeleteRecords, 2, &req).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, 2));
    let fetched: FetchResponse = call(&b, ApiKey::Fetch, 12, &fetch_req("dr", 0, 0, 1)).await;
    assert_eq!(
        fetched.responses[0].partitions[0].error_code, 1,
        "offset 0 is gone: OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(fetched.responses[0].partitions[0].log_start_offset, 2);
    let beyond = DeleteRecordsRequest::default().with_topics(vec![
        delete_records_request::DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("dr")))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(99),
            ]),
    ]);
    let resp: DeleteRecordsResponse = call(&b, ApiKey::DeleteRecords, 2, &beyond).await;
    assert_eq!(
        resp.topics[0].partitions[0].error_code, 1,
        "cannot delete past the end"
    );

    let epochs = OffsetForLeaderEpochRequest::default().with_topics(vec![
        offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("dr")))
            .with_partitions(vec![
                offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(0)
                    .with_leader_epoch(0),
            ]),
    ]);
    let resp: OffsetForLeaderEpochResponse =
        call(&b, ApiKey::OffsetForLeaderEpoch, 4, &epochs).await;
    let e = &resp.topics[0].partitions[0];
    assert_eq!((e.error_code, e.leader_epoch, e.end_offset), (0, 0, 3));
}

#[tokio::test]
async fn create_partitions_only_grows_a_topic() {
    let b = broker();
    create(&b, "grow", 1).await;
    let req = |n| {
        CreatePartitionsRequest::default().with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("grow")))
                .with_count(n),
        ])
    };
    let grown: CreatePartitionsResponse = call(&b, ApiKey::CreatePartitions, 3, &req(3)).await;
    assert_eq!(grown.results[0].error_code, 0);
    assert_eq!(b.catalog.topic("grow").map(|t| t.partitions.len()), Some(3));
    let shrink: CreatePartitionsResponse = call(&b, ApiKey::CreatePartitions, 3, &req(2)).await;
    assert_eq!(shrink.results[0].error_code, 37, "INVALID_PARTITIONS");
    let resp: ProduceResponse = call(
        &b,
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
