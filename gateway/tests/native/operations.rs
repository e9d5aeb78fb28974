//! Every operation round-trips, records cross between the native and the
//! Kafka protocol, requests are answered as they complete while a fetch
//! long-polls, and a bad frame closes only its own connection.

use bytes::{BufMut, Bytes, BytesMut};
use gateway::testing::{record_batch, Logs};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use sdk::frame::FrameHeader;
use sdk::proto::{self, ErrorCode};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::support::*;
use crate::common;

pub(crate) async fn every_operation(kind: Logs) {
    let (gw, backends) = start(kind).await;
    let mut s = connect(&gw).await;

    let pong: proto::Pong = call(
        &mut s,
        &proto::Ping {
            correlation: 2,
            nonce: 77,
        },
    )
    .await;
    assert_eq!((pong.correlation, pong.nonce), (2, 77));

    let created: proto::CreateTopicResponse = call(
        &mut s,
        &proto::CreateTopic {
            correlation: 3,
            name: "orders".into(),
            partitions: 3,
            replication_factor: -1,
            configs: vec![("retention.ms".into(), "86400000".into())],
        },
    )
    .await;
    assert_eq!(created.0.error, ErrorCode::NONE, "{:?}", created.0.message);
    let again: proto::CreateTopicResponse = call(
        &mut s,
        &proto::CreateTopic {
            correlation: 4,
            name: "orders".into(),
            partitions: 3,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    assert_eq!(again.0.error, ErrorCode::TOPIC_ALREADY_EXISTS);
    assert!(!again.0.message.is_empty(), "errors say why");
    let bad_config: proto::CreateTopicResponse = call(
        &mut s,
        &proto::CreateTopic {
            correlation: 5,
            name: "bad".into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![("retention.ms".into(), "soon".into())],
        },
    )
    .await;
    assert_eq!(bad_config.0.error, ErrorCode::INVALID_CONFIG);

    let meta: proto::MetadataResponse = call(
        &mut s,
        &proto::Metadata {
            correlation: 6,
            topics: vec!["orders".into()],
        },
    )
    .await;
    let native = gw.native_addr().unwrap();
    assert_eq!(
        meta.nodes,
        vec![proto::Node {
            id: 1,
            host: native.ip().to_string(),
            port: native.port(),
            rack: String::new(),
        }]
    );
    assert_eq!(meta.topics.len(), 1);
    let t = &meta.topics[0];
    assert_eq!((t.name.as_str(), t.error), ("orders", ErrorCode::NONE));
    assert_eq!(t.partitions.len(), 3);
    assert!(t.partitions.iter().all(|p| p.leader == 1));

    let pid: proto::InitProducerResponse =
        call(&mut s, &proto::InitProducer { correlation: 7 }).await;
    assert_eq!(pid.error, ErrorCode::NONE);
    assert!(pid.producer_id >= 0);

    // one frame, two partitions, an idempotent producer's batches
    let b0 = record_batch(
        &[b"a0", b"a1"],
        true,
        Some((pid.producer_id, pid.producer_epoch, 0)),
        Compression::None,
    );
    let b2 = record_batch(
        &[b"c0"],
        false,
        Some((pid.producer_id, pid.producer_epoch, 0)),
        Compression::None,
    );
    let produced: proto::ProduceResponse = call(
        &mut s,
        &produce_req(8, "orders", vec![(0, b0.clone()), (2, b2)]),
    )
    .await;
    assert_eq!(produced.correlation, 8);
    let parts = &produced.topics[0].partitions;
    assert_eq!(
        parts
            .iter()
            .map(|p| (p.partition, p.error, p.base_offset))
            .collect::<Vec<_>>(),
        vec![(0, ErrorCode::NONE, 0), (2, ErrorCode::NONE, 0)]
    );
    // the same batch again is a duplicate: its first write's offset, nothing new
    let retried: proto::ProduceResponse =
        call(&mut s, &produce_req(9, "orders", vec![(0, b0)])).await;
    assert_eq!(retried.topics[0].partitions[0].error, ErrorCode::NONE);
    assert_eq!(retried.topics[0].partitions[0].base_offset, 0);
    let more = record_batch(
        &[b"a2"],
        false,
        Some((pid.producer_id, pid.producer_epoch, 2)),
        Compression::Gzip,
    );
    let next: proto::ProduceResponse =
        call(&mut s, &produce_req(10, "orders", vec![(0, more)])).await;
    assert_eq!(next.topics[0].partitions[0].base_offset, 2);
    // a gap in the producer's sequence is refused
    let gap = record_batch(
        &[b"x"],
        false,
        Some((pid.producer_id, pid.producer_epoch, 9)),
        Compression::None,
    );
    let refused: proto::ProduceResponse =
        call(&mut s, &produce_req(11, "orders", vec![(0, gap)])).await;
    assert_eq!(
        refused.topics[0].partitions[0].error,
        ErrorCode::OUT_OF_ORDER_SEQUENCE
    );
    let nowhere: proto::ProduceResponse = call(
        &mut s,
        &produce_req(
            12,
            "orders",
            vec![(7, record_batch(&[b"x"], false, None, Compression::None))],
        ),
    )
    .await;
    assert_eq!(
        nowhere.topics[0].partitions[0].error,
        ErrorCode::UNKNOWN_PARTITION
    );
    let garbage: proto::ProduceResponse = call(
        &mut s,
        &produce_req(
            13,
            "orders",
            vec![(1, Bytes::from_static(b"not a record batch at all, sorry"))],
        ),
    )
    .await;
    assert_eq!(
        garbage.topics[0].partitions[0].error,
        ErrorCode::INVALID_RECORDS
    );
    let mut bad_acks = produce_req(
        14,
        "orders",
        vec![(1, record_batch(&[b"x"], false, None, Compression::None))],
    );
    bad_acks.acks = 2;
    let bad_acks: proto::ProduceResponse = call(&mut s, &bad_acks).await;
    assert_eq!(
        bad_acks.topics[0].partitions[0].error,
        ErrorCode::INVALID_ACKS
    );

    let fetched: proto::FetchResponse = call(&mut s, &fetch_req(15, "orders", 0, 1, 100)).await;
    let p = &fetched.topics[0].partitions[0];
    assert_eq!(
        (p.error, p.high_watermark, p.log_start_offset),
        (ErrorCode::NONE, 3, 0)
    );
    // whole batches: the first starts before the offset asked for
    assert_eq!(
        values_of(&p.records),
        vec![(0, "a0".into()), (1, "a1".into()), (2, "a2".into())]
    );
    let past: proto::FetchResponse = call(&mut s, &fetch_req(16, "orders", 0, 99, 0)).await;
    assert_eq!(
        past.topics[0].partitions[0].error,
        ErrorCode::OFFSET_OUT_OF_RANGE
    );

    let offsets: proto::ListOffsetsResponse = call(
        &mut s,
        &proto::ListOffsets {
            correlation: 17,
            partitions: vec![
                ("orders".into(), 0, -2),
                ("orders".into(), 0, -1),
                ("orders".into(), 0, 0),
                ("orders".into(), 0, -9),
                ("missing-topic".into(), 0, -1),
            ],
        },
    )
    .await;
    let got: Vec<_> = offsets
        .partitions
        .iter()
        .map(|o| (o.topic.as_str(), o.error, o.offset))
        .collect();
    assert_eq!(
        got,
        vec![
            ("orders", ErrorCode::NONE, 0),
            ("orders", ErrorCode::NONE, 3),
            ("orders", ErrorCode::NONE, 0),
            ("orders", ErrorCode::INVALID_REQUEST, -1),
            ("missing-topic", ErrorCode::UNKNOWN_TOPIC, -1),
        ]
    );

    let committed: proto::CommitOffsetsResponse = call(
        &mut s,
        &proto::CommitOffsets {
            correlation: 18,
            group: "billing".into(),
            offsets: vec![proto::CommittedOffset {
                topic: "orders".into(),
                partition: 0,
                offset: 2,
                metadata: "native".into(),
            }],
            ..proto::CommitOffsets::default()
        },
    )
    .await;
    assert_eq!(
        committed.partitions,
        vec![("orders".into(), 0, ErrorCode::NONE)]
    );
    let read_back: proto::FetchOffsetsResponse = call(
        &mut s,
        &proto::FetchOffsets {
            correlation: 19,
            group: "billing".into(),
            partitions: vec![("orders".into(), 0), ("orders".into(), 1)],
        },
    )
    .await;
    let got: Vec<_> = read_back
        .offsets
        .iter()
        .map(|(o, e)| (o.partition, o.offset, o.metadata.as_str(), *e))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 2, "native", ErrorCode::NONE),
            (1, -1, "", ErrorCode::NONE)
        ]
    );

    // a Kafka client of the group sees the same committed offset
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let kafka_view: OffsetFetchResponse = common::roundtrip(
        &mut k,
        ApiKey::OffsetFetch,
        7,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("billing")))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("orders")))
                .with_partition_indexes(vec![0])])),
    )
    .await;
    assert_eq!(kafka_view.topics[0].partitions[0].committed_offset, 2);

    let deleted: proto::DeleteTopicResponse = call(
        &mut s,
        &proto::DeleteTopic {
            correlation: 20,
            name: "orders".into(),
        },
    )
    .await;
    assert_eq!(deleted.0.error, ErrorCode::NONE);
    let gone: proto::DeleteTopicResponse = call(
        &mut s,
        &proto::DeleteTopic {
            correlation: 21,
            name: "orders".into(),
        },
    )
    .await;
    assert_eq!(gone.0.error, ErrorCode::UNKNOWN_TOPIC);
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_round_trips_on_disk_logs() {
    every_operation(Logs::Disk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_round_trips_on_tiered_logs() {
    every_operation(Logs::Tiered).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_written_by_either_protocol_are_read_by_the_other() {
    let (gw, backends) = start(Logs::Disk).await;
    let mut s = connect(&gw).await;
    let _: proto::CreateTopicResponse = call(
        &mut s,
        &proto::CreateTopic {
            correlation: 2,
            name: "both".into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    let native_batch = record_batch(&[b"from-native"], true, None, Compression::Lz4);
    let _: proto::ProduceResponse = call(
        &mut s,
        &produce_req(3, "both", vec![(0, native_batch.clone())]),
    )
    .await;
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let kafka_batch = record_batch(&[b"from-kafka"], false, None, Compression::Snappy);
    let produced: ProduceResponse = common::roundtrip(
        &mut k,
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("both")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(kafka_batch))])]),
    )
    .await;
    assert_eq!(produced.responses[0].partition_responses[0].base_offset, 1);

    let native_view: proto::FetchResponse = call(&mut s, &fetch_req(4, "both", 0, 0, 100)).await;
    assert_eq!(
        values_of(&native_view.topics[0].partitions[0].records),
        vec![(0, "from-native".into()), (1, "from-kafka".into())]
    );
    let kafka_view: FetchResponse = common::roundtrip(
        &mut k,
        ApiKey::Fetch,
        12,
        &FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("both")))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)])]),
    )
    .await;
    let records = kafka_view.responses[0].partitions[0]
        .records
        .clone()
        .unwrap();
    // the same bytes the native client wrote, as stored (offset stamped in)
    assert_eq!(
        values_of(&records),
        vec![(0, "from-native".into()), (1, "from-kafka".into())]
    );
    assert_eq!(
        records.len(),
        native_view.topics[0].partitions[0].records.len()
    );
    assert_eq!(records, native_view.topics[0].partitions[0].records);
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_as_they_complete_while_a_fetch_long_polls() {
    let (gw, backends) = start(Logs::Disk).await;
    let mut s = connect(&gw).await;
    let _: proto::CreateTopicResponse = call(
        &mut s,
        &proto::CreateTopic {
            correlation: 2,
            name: "waiting".into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    // a fetch that waits up to 10 s for data, then a ping behind it
    send(&mut s, &fetch_req(100, "waiting", 0, 0, 10_000)).await;
    send(
        &mut s,
        &proto::Ping {
            correlation: 101,
            nonce: 5,
        },
    )
    .await;
    let pong: proto::Pong = recv(&mut s).await;
    assert_eq!(
        pong.correlation, 101,
        "the ping is not held up by the long poll"
    );
    // data from another connection ends the long poll
    let mut other = connect(&gw).await;
    let _: proto::ProduceResponse = call(
        &mut other,
        &produce_req(
            2,
            "waiting",
            vec![(0, record_batch(&[b"wake"], false, None, Compression::None))],
        ),
    )
    .await;
    let fetched: proto::FetchResponse = recv(&mut s).await;
    assert_eq!(fetched.correlation, 100);
    assert_eq!(
        values_of(&fetched.topics[0].partitions[0].records),
        vec![(0, "wake".into())]
    );
    // acks 0: no answer at all, the next request's answer comes next
    let mut fire_and_forget = produce_req(
        102,
        "waiting",
        vec![(0, record_batch(&[b"quiet"], false, None, Compression::None))],
    );
    fire_and_forget.acks = 0;
    send(&mut s, &fire_and_forget).await;
    let pong: proto::Pong = call(
        &mut s,
        &proto::Ping {
            correlation: 103,
            nonce: 6,
        },
    )
    .await;
    assert_eq!(pong.correlation, 103);
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_frame_gets_an_error_frame_and_closes_only_its_connection() {
    let (gw, backends) = start(Logs::Disk).await;
    let addr = gw.native_addr().unwrap();
    let healthy = connect(&gw).await;

    // wrong magic
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&[0x00, 0x01, 0x02, 0, 0, 0, 0]).await.unwrap();
    expect_closed_with(&mut s, ErrorCode::BAD_FRAME).await;
    // a framing version from the future
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&[0xAE, 0x07, 0x02, 0, 0, 0, 0]).await.unwrap();
    expect_closed_with(&mut s, ErrorCode::BAD_FRAME).await;
    // a length over the limit: refused from the header, the body never sent
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        &FrameHeader {
            op: proto::op::HELLO,
            len: u32::MAX,
        }
        .encode(),
    )
    .await
    .unwrap();
    let e = expect_closed_with(&mut s, ErrorCode::FRAME_TOO_LARGE).await;
    assert!(e.message.contains("exceeds"), "{}", e.message);
    // anything before the hello
    let mut s = TcpStream::connect(addr).await.unwrap();
    send(
        &mut s,
        &proto::Ping {
            correlation: 9,
            nonce: 1,
        },
    )
    .await;
    let e = expect_closed_with(&mut s, ErrorCode::HELLO_REQUIRED).await;
    assert_eq!(e.correlation, 9);
    // a hello no version of which this server speaks
    let mut s = TcpStream::connect(addr).await.unwrap();
    send(
        &mut s,
        &proto::Hello {
            correlation: 1,
            min_version: 50,
            max_version: 60,
            ..Default::default()
        },
    )
    .await;
    expect_closed_with(&mut s, ErrorCode::UNSUPPORTED_VERSION).await;
    // an operation nobody defined, after a good hello
    let mut s = connect(&gw).await;
    let mut frame = BytesMut::new();
    frame.put_slice(&FrameHeader { op: 0x3C, len: 4 }.encode());
    frame.put_u32(55);
    s.write_all(&frame).await.unwrap();
    let e = expect_closed_with(&mut s, ErrorCode::UNKNOWN_OPERATION).await;
    assert_eq!(e.correlation, 55);
    // a body that does not decode (a count past its end)
    let mut s = connect(&gw).await;
    let mut frame = BytesMut::new();
    frame.put_slice(
        &FrameHeader {
            op: proto::op::METADATA,
            len: 8,
        }
        .encode(),
    );
    frame.put_u32(56);
    frame.put_u32(1_000_000);
    s.write_all(&frame).await.unwrap();
    let e = expect_closed_with(&mut s, ErrorCode::INVALID_REQUEST).await;
    assert_eq!(e.correlation, 56);

    // the first connection never noticed
    let mut healthy = healthy;
    let pong: proto::Pong = call(
        &mut healthy,
        &proto::Ping {
            correlation: 3,
            nonce: 3,
        },
    )
    .await;
    assert_eq!(pong.nonce, 3);
    gw.shutdown().await;
    backends.stop().await;
}
