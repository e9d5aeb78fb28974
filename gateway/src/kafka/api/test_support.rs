//! Helpers of the dispatcher tests: requests encoded as a client would,
//! answers decoded as a client would, against a broker on the real backends
//! ([`crate::testing`]). Scenarios take the log backend as an argument and
//! run on each through [`on_every_backend!`].

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::{dispatch, Client};
use crate::broker::Broker;

/// Runs each named scenario (an `async fn(Logs)`) once per log backend.
macro_rules! on_every_backend {
    ($($scenario:ident),* $(,)?) => {
        mod disk {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(crate::testing::Logs::Disk).await
                }
            )*
        }
        mod tiered {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(crate::testing::Logs::Tiered).await
                }
            )*
        }
    };
}
pub(crate) use on_every_backend;

/// The connection every test request comes from.
pub fn client() -> Client {
    Client::direct("/127.0.0.1".into(), 1)
}

pub fn frame<R: Encodable>(api: ApiKey, version: i16, req: &R) -> Option<Bytes> {
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
pub async fn call<Req: Encodable, Resp: Decodable>(
    b: &Broker,
    api: ApiKey,
    version: i16,
    req: &Req,
) -> Resp {
    call_from(b, &client(), api, version, req).await
}

/// [`call`] from a client that authenticated as `principal`.
pub async fn call_as<Req: Encodable, Resp: Decodable>(
    b: &Broker,
    principal: &str,
    api: ApiKey,
    version: i16,
    req: &Req,
) -> Resp {
    let mut c = client();
    c.principal = principal.into();
    call_from(b, &c, api, version, req).await
}

async fn call_from<Req: Encodable, Resp: Decodable>(
    b: &Broker,
    client: &Client,
    api: ApiKey,
    version: i16,
    req: &Req,
) -> Resp {
    let f = frame(api, version, req).expect("request encodes");
    let resp = dispatch(b, client, f)
        .await
        .expect("served")
        .expect("a response");
    let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
    let header =
        ResponseHeader::decode(&mut bytes, api.response_header_version(version)).expect("header");
    assert_eq!(header.correlation_id, 7);
    Resp::decode(&mut bytes, version).expect("response decodes")
}

pub fn batch(
    values: &[&str],
    producer: Option<(i64, i16, i32)>,
    compression: Compression,
) -> Bytes {
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    crate::testing::record_batch(&values, true, producer, compression)
}

pub async fn create(b: &Broker, name: &str, partitions: i32) {
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

pub fn produce_req(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

pub async fn produce(
    b: &Broker,
    topic: &str,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    let resp: ProduceResponse =
        call(b, ApiKey::Produce, 9, &produce_req(topic, 0, records, -1)).await;
    resp.responses[0].partition_responses[0].clone()
}

pub fn fetch_req(topic: &str, offset: i64, max_wait_ms: i32, min_bytes: i32) -> FetchRequest {
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

pub fn values_of(records: Option<Bytes>) -> Vec<(i64, String)> {
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
