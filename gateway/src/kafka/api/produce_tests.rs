//! Produce against the real logs: offsets, per-partition errors, acks,
//! idempotent retries, Kafka's one-batch rule and leadership.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;

use super::dispatch;
use super::test_support::*;
use crate::broker::BrokerConfig;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    produced_batches_come_back_from_fetch_with_dense_offsets,
    produce_reports_per_partition_errors,
    produce_with_acks_zero_gets_no_response,
    idempotent_producer_retries_are_acknowledged_once,
    two_batches_for_one_partition_are_refused_and_nothing_is_written,
    a_partition_this_node_does_not_lead_refuses_produce_and_fetch,
    a_transactional_batch_without_a_transactional_producer_is_refused_and_not_written,
    a_compacted_topic_refuses_records_without_keys_naming_the_record,
);

/// The log accepts transactional batches (they open a transaction that
/// only a coordinator's marker ends); a client that sends one outside a
/// transactional producer gets Kafka's answer and nothing is written, so
/// no transaction is left open that nothing would ever end.
async fn a_transactional_batch_without_a_transactional_producer_is_refused_and_not_written(
    logs: Logs,
) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "t", 1).await;
    let mut txn = BytesMut::from(&batch(&["x"], Some((7, 0, 0)), Compression::None)[..]);
    let attrs = i16::from_be_bytes([txn[21], txn[22]]) | 0x10;
    txn[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = storage::batch::compute_crc(&txn);
    txn[17..21].copy_from_slice(&crc.to_be_bytes());
    let refused = produce(b, "t", txn.freeze()).await;
    assert_eq!(
        refused.error_code, 53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    );
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("t", 0, 0, 1)).await;
    assert_eq!(
        resp.responses[0].partitions[0].high_watermark, 0,
        "nothing written"
    );
}

async fn produced_batches_come_back_from_fetch_with_dense_offsets(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "orders", 1).await;
    let first = produce(b, "orders", batch(&["a", "b"], None, Compression::None)).await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    let second = produce(b, "orders", batch(&["c"], None, Compression::Gzip)).await;
    assert_eq!((second.error_code, second.base_offset), (0, 2));
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("orders", 0, 0, 1)).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 3);
    let got = values_of(p.records.clone());
    assert_eq!(got, vec![(0, "a".into()), (1, "b".into()), (2, "c".into())]);
}

async fn produce_reports_per_partition_errors(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "t", 1).await;
    let missing = produce(b, "nope", batch(&["x"], None, Compression::None)).await;
    assert_eq!(missing.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let mut corrupt = BytesMut::from(&batch(&["x"], None, Compression::None)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let bad = produce(b, "t", corrupt.freeze()).await;
    assert_eq!(bad.error_code, 2, "CORRUPT_MESSAGE");
    let huge = "x".repeat(2_000_000);
    let too_big = produce(b, "t", batch(&[&huge], None, Compression::None)).await;
    assert_eq!(too_big.error_code, 10, "MESSAGE_TOO_LARGE");
    let resp: ProduceResponse = call(
        b,
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

async fn produce_with_acks_zero_gets_no_response(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "t", 1).await;
    let f = frame(
        ApiKey::Produce,
        9,
        &produce_req("t", 0, batch(&["x"], None, Compression::None), 0),
    )
    .expect("frame");
    assert!(dispatch(b, &client(), f).await.expect("served").is_none());
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("t", 0, 0, 1)).await;
    assert_eq!(
        resp.responses[0].partitions[0].high_watermark, 1,
        "the record was still appended"
    );
}

async fn idempotent_producer_retries_are_acknowledged_once(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
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

/// Kafka refuses Produce v3+ partitions carrying more than one batch. With
/// several, an idempotent retry among them would be answered as a duplicate
/// while the new batches before it were silently dropped.
async fn two_batches_for_one_partition_are_refused_and_nothing_is_written(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "two", 1).await;
    let pid = 4242;
    let retried = batch(&["a"], Some((pid, 0, 0)), Compression::None);
    assert_eq!(produce(b, "two", retried.clone()).await.error_code, 0);
    let fresh = batch(&["b"], Some((pid, 0, 1)), Compression::None);
    let both = Bytes::from([&fresh[..], &retried[..]].concat());
    let resp = produce(b, "two", both).await;
    assert_eq!(
        resp.error_code, 87,
        "INVALID_RECORD: {:?}",
        resp.error_message
    );
    let fetched: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("two", 0, 0, 1)).await;
    assert_eq!(
        values_of(fetched.responses[0].partitions[0].records.clone()),
        vec![(0, "a".into())],
        "the refused request wrote nothing"
    );
    // The producer's next batch is still in sequence.
    let next = produce(b, "two", fresh).await;
    assert_eq!((next.error_code, next.base_offset), (0, 1));
}

/// An agent whose lease lapsed, or that never led a partition, must not
/// accept writes for it: once agents replicate, that would split the log.
async fn a_partition_this_node_does_not_lead_refuses_produce_and_fetch(logs: Logs) {
    let t = TestBroker::start(logs).await;
    create(&t.broker, "led", 1).await;
    let other = crate::testing::broker(
        &t.backends,
        BrokerConfig {
            node_id: 2,
            ..BrokerConfig::default()
        },
    );
    let resp = produce(&other, "led", batch(&["x"], None, Compression::None)).await;
    assert_eq!(resp.error_code, 6, "NOT_LEADER_OR_FOLLOWER");
    let fetched: FetchResponse = call(&other, ApiKey::Fetch, 12, &fetch_req("led", 0, 0, 1)).await;
    assert_eq!(fetched.responses[0].partitions[0].error_code, 6);
    assert_eq!(
        produce(&t.broker, "led", batch(&["x"], None, Compression::None))
            .await
            .error_code,
        0,
        "the leader still takes writes"
    );
}

/// Compaction keeps the latest record per key, so a compacted topic takes
/// only records with keys: Kafka answers INVALID_RECORD and names the
/// record (KIP-467), and nothing of the batch is written.
async fn a_compacted_topic_refuses_records_without_keys_naming_the_record(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    for policy in ["compact", "compact,delete"] {
        let name = format!("table-{}", policy.replace(',', "-"));
        let req = CreateTopicsRequest::default().with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.clone())))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                    .with_name(StrBytes::from_static_str("cleanup.policy"))
                    .with_value(Some(StrBytes::from_string(policy.into())))]),
        ]);
        let created: CreateTopicsResponse = call(b, ApiKey::CreateTopics, 5, &req).await;
        assert_eq!(created.topics[0].error_code, 0, "{policy}");

        let keyless = crate::testing::record_batch(&[b"a", b"b"], false, None, Compression::Gzip);
        let refused = produce(b, &name, keyless).await;
        assert_eq!(
            refused.error_code,
            ResponseError::InvalidRecord.code(),
            "{policy}"
        );
        let named: Vec<i32> = refused
            .record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect();
        assert_eq!(named, vec![0, 1], "{policy}: each record is named");
        let keyed = crate::testing::record_batch(&[b"a", b"b"], true, None, Compression::Gzip);
        let taken = produce(b, &name, keyed).await;
        assert_eq!(
            (taken.error_code, taken.base_offset),
            (0, 0),
            "{policy}: the refused batch left nothing behind"
        );
    }
    // other topics take records without keys
    create(b, "plain", 1).await;
    let keyless = crate::testing::record_batch(&[b"a"], false, None, Compression::None);
    let taken = produce(b, "plain", keyless).await;
    assert_eq!(taken.error_code, 0);
}
