//! WriteTxnMarkers against the real logs, and what read_committed
//! consumers see before and after a transaction's marker.

use bytes::BytesMut;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use super::test_support::*;
use crate::broker::{Broker, BrokerConfig};
use crate::testing::{Logs, TestBroker};
use dataplane::partition::Acks;
use metastore::Topics;
use security::authz::AuthzConfig;

on_every_backend!(
    a_marker_ends_a_transaction_for_read_committed_consumers,
    only_a_principal_with_cluster_action_writes_markers,
);

const PID: i64 = 4_242;

/// Appends a transactional batch of `values` straight to the partition's
/// log, as a transactional producer's Produce will.
async fn append_transactional(b: &Broker, topic: &str, values: &[&str]) {
    let mut txn = BytesMut::from(&batch(values, Some((PID, 0, 0)), Compression::None)[..]);
    let attrs = i16::from_be_bytes([txn[21], txn[22]]) | 0x10;
    txn[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = storage::batch::compute_crc(&txn);
    txn[17..21].copy_from_slice(&crc.to_be_bytes());
    let info = b.node.catalog.topic(topic).expect("topic");
    let h = b.node.partition(&info, 0).await.expect("partition");
    h.append(txn, 0, Acks::All).await.expect("append");
}

fn abort_request(topic: &'static str) -> WriteTxnMarkersRequest {
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(PID))
        .with_producer_epoch(0)
        .with_transaction_result(false)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partition_indexes(vec![0])])])
}

/// Markers end other producers' transactions: as in Kafka, only brokers
/// (here: principals with CLUSTER_ACTION on the cluster) may write them.
async fn only_a_principal_with_cluster_action_writes_markers(logs: Logs) {
    let config = BrokerConfig {
        authz: AuthzConfig {
            enabled: true,
            superusers: vec!["User:admin".into()],
            allow_if_no_acl: false,
        },
        ..BrokerConfig::default()
    };
    let t = TestBroker::start_with(logs, config).await;
    let b = &t.broker;
    let req = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("tx")))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let created: CreateTopicsResponse =
        call_as(b, "User:admin", ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(created.topics[0].error_code, 0);
    append_transactional(b, "tx", &["t1"]).await;
    let refused: WriteTxnMarkersResponse = call_as(
        b,
        "User:mallory",
        ApiKey::WriteTxnMarkers,
        1,
        &abort_request("tx"),
    )
    .await;
    assert_eq!(
        refused.markers[0].topics[0].partitions[0].error_code, 31,
        "CLUSTER_AUTHORIZATION_FAILED"
    );
    let h = b
        .node
        .partition(&b.node.catalog.topic("tx").expect("topic"), 0)
        .await
        .expect("partition");
    assert_eq!(
        h.last_stable().await.expect("lso"),
        0,
        "the transaction is still open"
    );
    let written: WriteTxnMarkersResponse = call_as(
        b,
        "User:admin",
        ApiKey::WriteTxnMarkers,
        1,
        &abort_request("tx"),
    )
    .await;
    assert_eq!(written.markers[0].topics[0].partitions[0].error_code, 0);
    assert_eq!(
        h.last_stable().await.expect("lso"),
        2,
        "ended by the marker"
    );
}

async fn fetch_committed(b: &Broker, topic: &str) -> fetch_response::PartitionData {
    let req = fetch_req(topic, 0, 0, 1).with_isolation_level(1);
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    resp.responses[0].partitions[0].clone()
}

async fn latest_committed(b: &Broker, topic: &str) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let resp: ListOffsetsResponse = call(b, ApiKey::ListOffsets, 7, &req).await;
    resp.topics[0].partitions[0].offset
}

async fn a_marker_ends_a_transaction_for_read_committed_consumers(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "tx", 1).await;
    let plain = produce(b, "tx", batch(&["a"], None, Compression::None)).await;
    assert_eq!(plain.error_code, 0);
    append_transactional(b, "tx", &["t1", "t2"]).await;

    let open = fetch_committed(b, "tx").await;
    assert_eq!((open.high_watermark, open.last_stable_offset), (3, 1));
    assert_eq!(values_of(open.records.clone()), vec![(0, "a".to_string())]);
    assert_eq!(latest_committed(b, "tx").await, 1);

    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(PID))
        .with_producer_epoch(0)
        .with_transaction_result(false)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("tx")))
            .with_partition_indexes(vec![0, 7])])]);
    let resp: WriteTxnMarkersResponse = call(b, ApiKey::WriteTxnMarkers, 1, &req).await;
    let parts = &resp.markers[0].topics[0].partitions;
    assert_eq!(parts[0].error_code, 0, "the marker was written");
    assert_eq!(
        parts[1].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION for a partition that is not there"
    );

    let ended = fetch_committed(b, "tx").await;
    assert_eq!(
        (ended.high_watermark, ended.last_stable_offset),
        (4, 4),
        "the marker takes an offset"
    );
    let aborted = ended.aborted_transactions.clone().unwrap_or_default();
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (aborted[0].producer_id.0, aborted[0].first_offset),
        (PID, 1)
    );
    assert_eq!(latest_committed(b, "tx").await, 4);
    // the records and the marker are returned; the consumer drops the
    // aborted records and the marker
    assert_eq!(values_of(ended.records).len(), 4);
}
