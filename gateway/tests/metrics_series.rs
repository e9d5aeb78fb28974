//! `/metrics` of a gateway on a real socket over the real backends: latency
//! histograms, per-partition series capped with the rest summed under
//! `topic="other"`, and consumer lag per group and topic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::Bytes;
use dataplane::telemetry::prometheus::{parse, Family};
use gateway::broker::BrokerConfig;
use gateway::testing::{record_batch, Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::roundtrip;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("traffic"))
}

async fn scrape(gw: &Gateway) -> Vec<Family> {
    let mut c = TcpStream::connect(gw.http_addr().unwrap()).await.unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).await.unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    parse(body)
}

/// The value of the sample of `name` whose labels include all of `labels`.
fn value(fams: &[Family], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    fams.iter()
        .flat_map(|f| &f.samples)
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|s| s.value)
}

fn series_count(fams: &[Family], name: &str) -> usize {
    fams.iter()
        .find(|f| f.name == name)
        .map_or(0, |f| f.samples.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_series_past_the_cap_are_summed_under_other_and_lag_is_per_group() {
    let broker = BrokerConfig {
        metrics_max_series: 2,
        ..BrokerConfig::default()
    };
    let backends = Backends::start(Logs::Disk, broker.node_id).await;
    let opts = GatewayOptions {
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        shards: 2,
        broker,
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let created: CreateTopicsResponse = roundtrip(
        &mut s,
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic())
            .with_num_partitions(3)
            .with_replication_factor(1)]),
    )
    .await;
    assert_eq!(created.topics[0].error_code, 0);
    // partition p gets p + 1 batches of 4 records
    let values: Vec<&[u8]> = vec![b"a", b"b", b"c", b"d"];
    for p in 0..3 {
        for _ in 0..=p {
            let batch: Bytes = record_batch(&values, false, None, Compression::None);
            let produced: ProduceResponse = roundtrip(
                &mut s,
                ApiKey::Produce,
                9,
                &ProduceRequest::default().with_acks(1).with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(topic())
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(p)
                            .with_records(Some(batch))]),
                ]),
            )
            .await;
            assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
        }
    }
    let fetched: FetchResponse = roundtrip(
        &mut s,
        ApiKey::Fetch,
        12,
        &FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic())
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(1 << 20)])]),
    )
    .await;
    assert_eq!(fetched.responses[0].partitions[0].error_code, 0);
    let committed: OffsetCommitResponse = roundtrip(
        &mut s,
        ApiKey::OffsetCommit,
        8,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("readers")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(2)
                            .with_committed_offset(5),
                    ]),
            ]),
    )
    .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    let fams = scrape(&gw).await;
    let records = "aerostream_partition_records_in_total";
    // two partitions have series of their own, the third is summed as "other"
    assert_eq!(series_count(&fams, records), 3, "{fams:?}");
    let own = |p: &str| value(&fams, records, &[("topic", "traffic"), ("partition", p)]);
    assert_eq!(own("0"), Some(4.0));
    assert_eq!(own("1"), Some(8.0));
    assert_eq!(own("2"), None);
    assert_eq!(
        value(
            &fams,
            records,
            &[("topic", "other"), ("partition", "other")]
        ),
        Some(12.0)
    );
    assert_eq!(
        value(&fams, "aerostream_partition_series_aggregated", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(
            &fams,
            "aerostream_partition_log_end_offset",
            &[("topic", "traffic"), ("partition", "1")]
        ),
        Some(8.0)
    );
    assert!(
        value(
            &fams,
            "aerostream_partition_bytes_out_total",
            &[("topic", "traffic"), ("partition", "0")]
        )
        .is_some_and(|b| b > 0.0),
        "the fetch of partition 0 is counted"
    );
    // 12 records in partition 2, committed up to 5
    assert_eq!(
        value(
            &fams,
            "aerostream_consumer_group_lag",
            &[("group", "readers"), ("topic", "traffic")]
        ),
        Some(7.0)
    );
    // the cross-zone bytes of the cost report are served too (a single
    // agent exchanges nothing with peers)
    for name in [
        "aerostream_cross_zone_sent_bytes_total",
        "aerostream_cross_zone_received_bytes_total",
    ] {
        assert_eq!(value(&fams, name, &[]), Some(0.0), "{name}");
    }
    // six produce requests and one fetch, each timed once
    assert_eq!(
        value(&fams, "aerostream_produce_latency_seconds_count", &[]),
        Some(6.0)
    );
    assert_eq!(
        value(
            &fams,
            "aerostream_produce_latency_seconds_bucket",
            &[("le", "+Inf")]
        ),
        Some(6.0)
    );
    assert_eq!(
        value(&fams, "aerostream_fetch_latency_seconds_count", &[]),
        Some(1.0)
    );
    gw.shutdown().await;
}
