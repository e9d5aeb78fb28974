//! ListOffsets, DeleteRecords and OffsetForLeaderEpoch against the real logs.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use metastore::{Manifests, Topics};

use super::test_support::*;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    list_offsets_finds_offsets_by_time,
    delete_records_raises_the_log_start_and_leader_epochs_end_at_the_log_end,
);

async fn list_offsets_finds_offsets_by_time(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "time", 1).await;
    produce(b, "time", batch(&["a", "b", "c"], None, Compression::None)).await;
    let q = |ts: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("time")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default().with_timestamp(ts),
                ])])
    };
    let latest: ListOffsetsResponse = call(b, ApiKey::ListOffsets, 7, &q(-1)).await;
    assert_eq!(latest.topics[0].partitions[0].offset, 3);
    let earliest: ListOffsetsResponse = call(b, ApiKey::ListOffsets, 7, &q(-2)).await;
    assert_eq!(earliest.topics[0].partitions[0].offset, 0);
    let late: ListOffsetsResponse = call(b, ApiKey::ListOffsets, 7, &q(2_000_000_000_000)).await;
    assert_eq!(late.topics[0].partitions[0].offset, -1, "nothing that late");
}
async fn delete_records_raises_the_log_start_and_leader_epochs_end_at_the_log_end(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "dr", 1).await;
    produce(b, "dr", batch(&["a", "b"], None, Compression::None)).await;
    produce(b, "dr", batch(&["c"], None, Compression::None)).await;
    let req = DeleteRecordsRequest::default().with_topics(vec![
        delete_records_request::DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("dr")))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(2),
            ]),
    ]);
    let resp: DeleteRecordsResponse = call(b, ApiKey::DeleteRecords, 2, &req).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, 2));
    let fetched: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("dr", 0, 0, 1)).await;
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
    let resp: DeleteRecordsResponse = call(b, ApiKey::DeleteRecords, 2, &beyond).await;
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
        call(b, ApiKey::OffsetForLeaderEpoch, 4, &epochs).await;
    let e = &resp.topics[0].partitions[0];
    assert_eq!((e.error_code, e.leader_epoch, e.end_offset), (0, 0, 3));
}

/// The floor DeleteRecords sets must outlive the local directory: with
/// object storage behind the log it is recorded in the metastore before the
/// local log applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_records_its_floor_in_the_metastore_before_answering() {
    let t = TestBroker::start(Logs::Tiered).await;
    let b = &t.broker;
    create(b, "floor", 1).await;
    produce(b, "floor", batch(&["a", "b", "c"], None, Compression::None)).await;
    let req = DeleteRecordsRequest::default().with_topics(vec![
        delete_records_request::DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("floor")))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(2),
            ]),
    ]);
    let resp: DeleteRecordsResponse = call(b, ApiKey::DeleteRecords, 2, &req).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    let id = b.node.catalog.topic("floor").expect("topic").id;
    assert_eq!(t.backends.meta.log_start(id, 0), Some(2));
}
