//! Fetch: a long poll over the Kafka fetch handler, records spliced in.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use sdk::proto::{self};
use sdk::wire::WireWrite;

use super::shared::{partition_index, refine};
use crate::broker::Broker;
use crate::kafka::api::{bridge, s, Client};
use crate::kafka::response::ResponseFrame;

/// The Kafka Fetch v12 a native fetch stands for (isolation level 0:
/// read_uncommitted, 1: read_committed).
fn kafka_fetch(
    topics: Vec<proto::FetchTopic>,
    max_wait_ms: u32,
    min_bytes: u32,
    max_bytes: u32,
    isolation: proto::Isolation,
) -> FetchRequest {
    let topics = topics
        .into_iter()
        .map(|t| {
            FetchTopic::default()
                .with_topic(TopicName(s(t.name)))
                .with_partitions(
                    t.partitions
                        .into_iter()
                        .map(|q| {
                            FetchPartition::default()
                                .with_partition(partition_index(q.partition))
                                .with_fetch_offset(q.offset)
                                .with_current_leader_epoch(-1)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(
                                    i32::try_from(q.max_bytes).unwrap_or(i32::MAX),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(i32::try_from(max_wait_ms).unwrap_or(i32::MAX))
        .with_min_bytes(i32::try_from(min_bytes).unwrap_or(i32::MAX))
        .with_max_bytes(i32::try_from(max_bytes).unwrap_or(i32::MAX))
        .with_isolation_level(i8::try_from(isolation.to_wire()).unwrap_or(0))
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
}

pub(super) async fn fetch(
    b: &Broker,
    c: &Client,
    client_id: &str,
    f: proto::Fetch,
) -> ResponseFrame {
    let req = kafka_fetch(
        f.topics,
        f.max_wait_ms,
        f.min_bytes,
        f.max_bytes,
        proto::Isolation::ReadUncommitted,
    );
    let (resp, records, wait) = bridge::fetch(b, c, client_id, req).await;
    // over a consumer quota: the stream stays unread for the wait
    c.throttle
        .fetch_max(wait, std::sync::atomic::Ordering::Relaxed);
    // Everything but the records is encoded here; each partition's records
    // are spliced in after its head, from the log.
    let mut frame = ResponseFrame::native(proto::op::FETCH | proto::RESPONSE);
    let mut head = BytesMut::with_capacity(64);
    head.put_u32(f.correlation);
    head.put_count(resp.responses.len());
    let mut records = records.into_iter();
    for t in &resp.responses {
        let name = t.topic.as_str();
        head.put_string(name);
        head.put_count(t.partitions.len());
        for p in &t.partitions {
            let r = records
                .next()
                .unwrap_or_else(dataplane::backend::Records::empty);
            let part = proto::PartitionFetched {
                partition: u32::try_from(p.partition_index).unwrap_or(u32::MAX),
                error: refine(b, name, p.error_code),
                high_watermark: p.high_watermark,
                log_start_offset: p.log_start_offset,
                records: Bytes::new(),
            };
            proto::FetchResponse::put_partition_head(&mut head, &part, r.len());
            if !r.is_empty() {
                frame.push_bytes(std::mem::take(&mut head).freeze());
                frame.push_records(r);
            }
        }
    }
    frame.push_bytes(head.freeze());
    frame
}

/// A fetch with an isolation level. read_committed stops at the last
/// stable offset and lists the range's aborted transactions (from the
/// log's aborted-transaction index); the records themselves are the log's
/// bytes, spliced in unchanged, and the reader skips the aborted ones. So
/// the zero-copy path stays, and a reader advances past an aborted
/// transaction the way it advances past any batch it does not return.
pub(super) async fn fetch_isolated(
    b: &Broker,
    c: &Client,
    client_id: &str,
    f: proto::FetchIsolated,
) -> ResponseFrame {
    let req = kafka_fetch(
        f.topics,
        f.max_wait_ms,
        f.min_bytes,
        f.max_bytes,
        f.isolation,
    );
    let (resp, records, wait) = bridge::fetch(b, c, client_id, req).await;
    c.throttle
        .fetch_max(wait, std::sync::atomic::Ordering::Relaxed);
    let mut frame = ResponseFrame::native(proto::op::FETCH_ISOLATED | proto::RESPONSE);
    let mut head = BytesMut::with_capacity(64);
    head.put_u32(f.correlation);
    head.put_count(resp.responses.len());
    let mut records = records.into_iter();
    for t in &resp.responses {
        let name = t.topic.as_str();
        head.put_string(name);
        head.put_count(t.partitions.len());
        for p in &t.partitions {
            let r = records
                .next()
                .unwrap_or_else(dataplane::backend::Records::empty);
            let aborted = p
                .aborted_transactions
                .iter()
                .flatten()
                .map(|a| proto::AbortedTxn {
                    producer_id: a.producer_id.0,
                    first_offset: a.first_offset,
                })
                .collect();
            let part = proto::PartitionFetchedIsolated {
                partition: u32::try_from(p.partition_index).unwrap_or(u32::MAX),
                error: refine(b, name, p.error_code),
                high_watermark: p.high_watermark,
                last_stable_offset: p.last_stable_offset,
                log_start_offset: p.log_start_offset,
                aborted,
                records: Bytes::new(),
            };
            proto::FetchIsolatedResponse::put_partition_head(&mut head, &part, r.len());
            if !r.is_empty() {
                frame.push_bytes(std::mem::take(&mut head).freeze());
                frame.push_records(r);
            }
        }
    }
    frame.push_bytes(head.freeze());
    frame
}
