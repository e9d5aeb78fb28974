//! The native protocol on a real socket over the real backends (disk logs,
//! and logs sealed to object storage), spoken frame by frame with the
//! protocol types: every operation, pipelining, interoperation with the
//! Kafka listener, and bad frames.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use gateway::broker::BrokerConfig;
use gateway::testing::{record_batch, Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use sdk::frame::{FrameHeader, HEADER_LEN};
use sdk::proto::{self, ErrorCode, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(kind: Logs) -> (Gateway, Backends) {
    let backends = Backends::start(kind, 1).await;
    let opts = GatewayOptions {
        native_addr: Some("127.0.0.1:0".parse().unwrap()),
        shards: 2,
        broker: BrokerConfig {
            max_request_bytes: 1 << 20,
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    (gw, backends)
}

async fn send<M: Message>(s: &mut TcpStream, m: &M) {
    s.write_all(&m.to_frame()).await.unwrap();
}

/// The next frame: its operation and body; `None` once the server closed.
async fn next_frame(s: &mut TcpStream) -> Option<(u8, Bytes)> {
    let mut head = [0u8; HEADER_LEN];
    tokio::time::timeout(Duration::from_secs(20), s.read_exact(&mut head))
        .await
        .expect("a frame or a close within 20 s")
        .ok()?;
    let h = FrameHeader::decode(&head, u32::MAX).unwrap();
    let mut body = vec![0u8; h.len as usize];
    s.read_exact(&mut body).await.unwrap();
    Some((h.op, Bytes::from(body)))
}

async fn recv<M: Message>(s: &mut TcpStream) -> M {
    let (op, body) = next_frame(s).await.expect("a response");
    if op == proto::op::ERROR {
        panic!("error frame: {:?}", proto::ErrorFrame::decode_body(body));
    }
    assert_eq!(op, M::OP, "operation of the response");
    M::decode_body(body).unwrap()
}

async fn call<Q: Message, R: Message>(s: &mut TcpStream, q: &Q) -> R {
    send(s, q).await;
    recv(s).await
}

async fn connect(gw: &Gateway) -> TcpStream {
    let mut s = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
    let hello: proto::HelloResponse = call(
        &mut s,
        &proto::Hello {
            correlation: 1,
            min_version: 1,
            max_version: 9,
            client_id: "native-test".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(hello.error, ErrorCode::NONE);
    assert_eq!(
        hello.version,
        proto::MAX_VERSION,
        "the highest common version"
    );
    assert_eq!(hello.node_id, 1);
    s
}

/// Expects an error frame with `code`, then the server closing.
async fn expect_closed_with(s: &mut TcpStream, code: ErrorCode) -> proto::ErrorFrame {
    let (op, body) = next_frame(s).await.expect("an error frame");
    assert_eq!(op, proto::op::ERROR);
    let e = proto::ErrorFrame::decode_body(body).unwrap();
    assert_eq!(e.error, code, "{e:?}");
    assert!(next_frame(s).await.is_none(), "the connection is closed");
    e
}

fn values_of(records: &Bytes) -> Vec<(i64, String)> {
    let mut buf = records.clone();
    let mut out = Vec::new();
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode(&mut buf).unwrap();
        for r in set.records {
            let v = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
            out.push((r.offset, v.unwrap_or_default()));
        }
    }
    out
}

fn produce_req(correlation: u32, topic: &str, parts: Vec<(u32, Bytes)>) -> proto::Produce {
    proto::Produce {
        correlation,
        acks: -1,
        timeout_ms: 10_000,
        topics: vec![proto::ProduceTopic {
            name: topic.into(),
            partitions: parts
                .into_iter()
                .map(|(partition, batch)| proto::ProducePartition { partition, batch })
                .collect(),
        }],
    }
}

fn fetch_req(
    correlation: u32,
    topic: &str,
    partition: u32,
    offset: i64,
    wait: u32,
) -> proto::Fetch {
    proto::Fetch {
        correlation,
        max_wait_ms: wait,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![proto::FetchTopic {
            name: topic.into(),
            partitions: vec![proto::FetchPartition {
                partition,
                offset,
                max_bytes: 1 << 20,
            }],
        }],
    }
}

async fn every_operation(kind: Logs) {
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

/// Creates `topic` with one partition and writes `batches` batches of one
/// record each; returns each batch's stored size.
async fn one_partition_with_batches(s: &mut TcpStream, topic: &str, batches: usize) -> Vec<usize> {
    let created: proto::CreateTopicResponse = call(
        s,
        &proto::CreateTopic {
            correlation: 2,
            name: topic.into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    assert_eq!(created.0.error, ErrorCode::NONE, "{:?}", created.0.message);
    let mut sizes = Vec::new();
    for i in 0..batches {
        let value = format!("record-{i}-{}", "x".repeat(i * 10));
        let batch = record_batch(&[value.as_bytes()], false, None, Compression::None);
        sizes.push(batch.len());
        let r: proto::ProduceResponse = call(s, &produce_req(3, topic, vec![(0, batch)])).await;
        assert_eq!(r.topics[0].partitions[0].error, ErrorCode::NONE);
        assert_eq!(r.topics[0].partitions[0].base_offset, i as i64);
    }
    sizes
}

/// Reads pushes until one arrives for the subscription (frames of other
/// operations are returned as they are); `None` when nothing comes
/// within `wait`.
async fn next_push(s: &mut TcpStream, wait: Duration) -> Option<proto::Push> {
    let (op, body) = tokio::time::timeout(wait, next_frame(s)).await.ok()??;
    assert_eq!(op, proto::op::PUSH | proto::RESPONSE, "a push");
    Some(proto::Push::decode_body(body).unwrap())
}

/// A subscriber is never sent more record bytes than it granted: a batch
/// that does not fit waits for credit, and each grant releases exactly
/// the batches it pays for.
async fn credit_bounds_pushes(kind: Logs) {
    let (gw, backends) = start(kind).await;
    let mut s = connect(&gw).await;
    let sizes = one_partition_with_batches(&mut s, "metered", 6).await;
    // credit for the first two batches and half of the third
    let credit = sizes[0] + sizes[1] + sizes[2] / 2;
    let opened: proto::SubscribeResponse = call(
        &mut s,
        &proto::Subscribe {
            correlation: 10,
            subscription: 7,
            topic: "metered".into(),
            partition: 0,
            start_kind: 1,
            start_value: 0,
            credit: credit as u32,
        },
    )
    .await;
    assert_eq!(opened.error, ErrorCode::NONE, "{}", opened.message);
    assert_eq!(
        (opened.subscription, opened.offset, opened.high_watermark),
        (7, 0, 6)
    );

    let mut got = Vec::new();
    let mut bytes = 0;
    while bytes < sizes[0] + sizes[1] {
        let p = next_push(&mut s, Duration::from_secs(20))
            .await
            .expect("a push");
        assert_eq!((p.subscription, p.error), (7, ErrorCode::NONE));
        bytes += p.records.len();
        got.extend(values_of(&p.records));
    }
    assert_eq!(
        bytes,
        sizes[0] + sizes[1],
        "whole batches, within the credit"
    );
    assert_eq!(got.iter().map(|(o, _)| *o).collect::<Vec<_>>(), vec![0, 1]);
    assert!(
        next_push(&mut s, Duration::from_millis(500))
            .await
            .is_none(),
        "the third batch does not fit in what is left"
    );

    // the rest of the third batch's price: exactly it arrives
    send(
        &mut s,
        &proto::Credit {
            subscription: 7,
            bytes: (sizes[2] - sizes[2] / 2) as u32,
        },
    )
    .await;
    let p = next_push(&mut s, Duration::from_secs(20))
        .await
        .expect("the third batch");
    assert_eq!(p.records.len(), sizes[2]);
    assert_eq!(values_of(&p.records)[0].0, 2);
    assert_eq!((p.next_offset, p.high_watermark), (3, 6));
    assert!(next_push(&mut s, Duration::from_millis(500))
        .await
        .is_none());

    // credit for everything; then new records are pushed as they come
    send(
        &mut s,
        &proto::Credit {
            subscription: 7,
            bytes: 1 << 20,
        },
    )
    .await;
    let mut offsets = Vec::new();
    while offsets.len() < 3 {
        let p = next_push(&mut s, Duration::from_secs(20))
            .await
            .expect("a push");
        offsets.extend(values_of(&p.records).into_iter().map(|(o, _)| o));
    }
    assert_eq!(offsets, vec![3, 4, 5]);
    let mut w = connect(&gw).await;
    let batch = record_batch(&[b"live"], false, None, Compression::None);
    let r: proto::ProduceResponse =
        call(&mut w, &produce_req(3, "metered", vec![(0, batch)])).await;
    assert_eq!(r.topics[0].partitions[0].base_offset, 6);
    let p = next_push(&mut s, Duration::from_secs(20))
        .await
        .expect("the new record, pushed");
    assert_eq!(values_of(&p.records), vec![(6, "live".to_string())]);

    // after the unsubscribe answer nothing more comes
    let done: proto::UnsubscribeResponse = call(
        &mut s,
        &proto::Unsubscribe {
            correlation: 11,
            subscription: 7,
        },
    )
    .await;
    assert_eq!(done.error, ErrorCode::NONE);
    let batch = record_batch(&[b"after"], false, None, Compression::None);
    let _: proto::ProduceResponse =
        call(&mut w, &produce_req(4, "metered", vec![(0, batch)])).await;
    assert!(next_push(&mut s, Duration::from_millis(500))
        .await
        .is_none());
    let again: proto::UnsubscribeResponse = call(
        &mut s,
        &proto::Unsubscribe {
            correlation: 12,
            subscription: 7,
        },
    )
    .await;
    assert_eq!(again.error, ErrorCode::UNKNOWN_SUBSCRIPTION);
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_receives_exactly_what_it_granted_on_disk_logs() {
    credit_bounds_pushes(Logs::Disk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_receives_exactly_what_it_granted_on_tiered_logs() {
    credit_bounds_pushes(Logs::Tiered).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_start_where_asked_and_end_with_an_error_push() {
    let (gw, backends) = start(Logs::Disk).await;
    let mut s = connect(&gw).await;
    one_partition_with_batches(&mut s, "starts", 4).await;
    let open = |correlation, subscription, kind, value| proto::Subscribe {
        correlation,
        subscription,
        topic: "starts".into(),
        partition: 0,
        start_kind: kind,
        start_value: value,
        credit: 1 << 20,
    };
    let at: proto::SubscribeResponse = call(&mut s, &open(20, 1, 0, 2)).await;
    assert_eq!((at.error, at.offset), (ErrorCode::NONE, 2));
    let p = next_push(&mut s, Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        values_of(&p.records).first().map(|(o, _)| *o),
        Some(2),
        "from the offset asked"
    );
    let latest: proto::SubscribeResponse = call(&mut s, &open(21, 2, 2, 0)).await;
    assert_eq!((latest.error, latest.offset), (ErrorCode::NONE, 4));
    let future: proto::SubscribeResponse = call(&mut s, &open(22, 3, 3, i64::MAX / 2)).await;
    assert_eq!(
        future.offset, 4,
        "a timestamp after every record starts at the end"
    );
    let dup: proto::SubscribeResponse = call(&mut s, &open(23, 1, 1, 0)).await;
    assert_eq!(dup.error, ErrorCode::DUPLICATE_SUBSCRIPTION);
    let bad: proto::SubscribeResponse = call(&mut s, &open(24, 4, 9, 0)).await;
    assert_eq!(bad.error, ErrorCode::INVALID_REQUEST);
    let mut unknown = open(25, 5, 1, 0);
    unknown.topic = "nowhere".into();
    let unknown: proto::SubscribeResponse = call(&mut s, &unknown).await;
    assert_eq!(unknown.error, ErrorCode::UNKNOWN_TOPIC);

    // an offset past the end: opened, then ended by an error push
    let past: proto::SubscribeResponse = call(&mut s, &open(26, 6, 0, 99)).await;
    assert_eq!(past.error, ErrorCode::NONE);
    let end = next_push(&mut s, Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        (end.subscription, end.error),
        (6, ErrorCode::OFFSET_OUT_OF_RANGE)
    );
    assert!(end.records.is_empty());
    assert_eq!(end.high_watermark, 4, "where the log ends, to go on from");
    // its id is free again once it ended
    let reopened: proto::SubscribeResponse = call(&mut s, &open(27, 6, 1, 0)).await;
    assert_eq!(reopened.error, ErrorCode::NONE);
    gw.shutdown().await;
    backends.stop().await;
}

/// The Rust client's subscriptions: every record once, in order, old ones
/// and new ones as they are produced, with credit granted back as the
/// application reads, across many more bytes than one window.
async fn sdk_subscription(kind: Logs) {
    use futures::StreamExt;
    use sdk::proto::Start;
    use sdk::{Client, NewTopic, ProducerConfig, Record, SubscriptionConfig};

    let (gw, backends) = start(kind).await;
    let url = format!("aero://{}", gw.native_addr().unwrap());
    let client = Client::connect(&url).await.unwrap();
    client
        .create_topic(NewTopic::new("pushed", 2))
        .await
        .unwrap();
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let value = |i: usize| format!("{i:06}-{}", "v".repeat(200));
    for i in 0..500 {
        producer
            .send_to("pushed", 1, Record::new(value(i)))
            .await
            .unwrap();
    }
    let window = 16 << 10;
    let mut sub = client
        .subscribe(
            "pushed",
            1,
            Start::Earliest,
            SubscriptionConfig {
                window,
                auto_credit: true,
            },
        )
        .await
        .unwrap();
    let late = tokio::spawn({
        let producer = producer.clone();
        async move {
            for i in 500..1000 {
                producer
                    .send_to("pushed", 1, Record::new(value(i)))
                    .await
                    .unwrap();
            }
        }
    });
    for i in 0..1000 {
        let r = tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .expect("records keep coming")
            .expect("the subscription goes on")
            .unwrap();
        assert_eq!(r.offset, i as i64);
        assert_eq!(r.value.as_deref(), Some(value(i).as_bytes()));
    }
    late.await.unwrap();
    assert_eq!(sub.position(), 1000);
    assert!(
        sub.received_bytes() > u64::from(window) * 8,
        "many windows' worth went through the credit"
    );
    sub.close().await.unwrap();
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_subscribes_on_disk_logs() {
    sdk_subscription(Logs::Disk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_subscribes_on_tiered_logs() {
    sdk_subscription(Logs::Tiered).await;
}

/// The Rust client against the real gateway: keyed records spread over
/// partitions as Kafka's partitioner puts them, every acknowledged record
/// is read back once at its offset, and committed positions are the
/// group's offsets.
async fn sdk_round_trip(kind: Logs, read_mode: sdk::ReadMode) {
    use futures::StreamExt;
    use sdk::{Client, ConsumerConfig, NewTopic, ProducerConfig, Record, StartAt};

    let (gw, backends) = start(kind).await;
    let url = format!("aero://{}", gw.native_addr().unwrap());
    let client = Client::connect(&url).await.unwrap();
    client
        .create_topic(NewTopic::new("events", 3))
        .await
        .unwrap();
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let sends: Vec<_> = (0..300)
        .map(|i| {
            producer.send(
                "events",
                Record::new(format!("value-{i}")).with_key(format!("key-{}", i % 17)),
            )
        })
        .collect();
    let mut delivered = std::collections::BTreeMap::new();
    for (i, send) in sends.into_iter().enumerate() {
        let d = send.await.unwrap();
        let expected = sdk::partitioner::partition_for_key(format!("key-{}", i % 17).as_bytes(), 3);
        assert_eq!(
            d.partition, expected,
            "record {i} went where Kafka clients put its key"
        );
        assert!(delivered
            .insert((d.partition, d.offset), format!("value-{i}"))
            .is_none());
    }
    producer.flush().await.unwrap();

    let mut consumer = client
        .consumer(ConsumerConfig {
            group: Some("readers".into()),
            read_mode,
            ..ConsumerConfig::default()
        })
        .unwrap();
    consumer
        .assign("events", None, StartAt::Earliest)
        .await
        .unwrap();
    let mut read = std::collections::BTreeMap::new();
    while read.len() < delivered.len() {
        let r = tokio::time::timeout(Duration::from_secs(20), consumer.next())
            .await
            .expect("records keep coming")
            .expect("the stream goes on")
            .unwrap();
        let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        assert!(
            read.insert((r.partition, r.offset), value).is_none(),
            "read once"
        );
    }
    assert_eq!(read, delivered);
    consumer.commit().await.unwrap();
    let committed = client
        .committed_offsets("readers", &[("events", 0), ("events", 1), ("events", 2)])
        .await
        .unwrap();
    for (p, c) in committed.iter().enumerate() {
        let count = delivered.keys().filter(|(q, _)| *q == p as u32).count() as i64;
        assert_eq!(*c, Some(count), "partition {p}: the next offset to read");
    }

    // a seek reads again from there, and nothing from before it
    consumer.seek("events", 0, 5).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(20), consumer.next())
        .await
        .expect("a record after the seek")
        .expect("the stream goes on")
        .unwrap();
    assert_eq!((r.partition, r.offset), (0, 5));
    assert_eq!(
        Some(String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).as_ref()),
        delivered.get(&(0, 5)).map(String::as_str)
    );
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_produces_and_consumes_on_disk_logs() {
    sdk_round_trip(Logs::Disk, sdk::ReadMode::Fetch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_consumes_pushed_records_on_disk_logs() {
    sdk_round_trip(Logs::Disk, sdk::ReadMode::Push { window: 64 << 10 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_consumes_pushed_records_on_tiered_logs() {
    sdk_round_trip(Logs::Tiered, sdk::ReadMode::Push { window: 64 << 10 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_produces_and_consumes_on_tiered_logs() {
    sdk_round_trip(Logs::Tiered, sdk::ReadMode::Fetch).await;
}
