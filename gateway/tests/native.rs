//! The native protocol on a real socket over the real backends (disk logs,
//! and logs sealed to object storage), spoken frame by frame with the
//! protocol types: every operation, pipelining, interoperation with the
//! Kafka listener, and bad frames; over TCP and over QUIC (the same
//! scenario on both, streams, TLS trust, connection limits).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use dataplane::group::engine::GroupLimits;
use gateway::broker::BrokerConfig;
use gateway::native::quic::NativeCa;
use gateway::testing::{record_batch, Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use metastore::Security;
use sdk::frame::{FrameHeader, HEADER_LEN};
use sdk::proto::{self, ErrorCode, Message};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The CA of every test gateway's QUIC certificate.
fn ca() -> &'static NativeCa {
    static CA: OnceLock<NativeCa> = OnceLock::new();
    CA.get_or_init(|| NativeCa::generate().unwrap())
}

async fn start(kind: Logs) -> (Gateway, Backends) {
    start_with(kind, BrokerConfig::default()).await
}

/// A gateway with the native protocol on TCP and QUIC (same port number).
async fn start_with(kind: Logs, broker: BrokerConfig) -> (Gateway, Backends) {
    let backends = Backends::start(kind, 1).await;
    let opts = GatewayOptions {
        native_addr: Some("127.0.0.1:0".parse().unwrap()),
        native_tls: Some(
            ca().issue(&["localhost".into(), "127.0.0.1".into()])
                .unwrap(),
        ),
        shards: 2,
        broker: BrokerConfig {
            max_request_bytes: 1 << 20,
            ..broker
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    assert_eq!(
        gw.native_quic_addr().unwrap(),
        gw.native_addr().unwrap(),
        "QUIC on the UDP port of the TCP listener's number"
    );
    (gw, backends)
}

async fn send<S: AsyncWrite + Unpin, M: Message>(s: &mut S, m: &M) {
    s.write_all(&m.to_frame()).await.unwrap();
}

/// The next frame: its operation and body; `None` once the server closed.
async fn next_frame<S: AsyncRead + Unpin>(s: &mut S) -> Option<(u8, Bytes)> {
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

async fn recv<S: AsyncRead + Unpin, M: Message>(s: &mut S) -> M {
    let (op, body) = next_frame(s).await.expect("a response");
    if op == proto::op::ERROR {
        panic!("error frame: {:?}", proto::ErrorFrame::decode_body(body));
    }
    assert_eq!(op, M::OP, "operation of the response");
    M::decode_body(body).unwrap()
}

async fn call<S: AsyncRead + AsyncWrite + Unpin, Q: Message, R: Message>(s: &mut S, q: &Q) -> R {
    send(s, q).await;
    recv(s).await
}

async fn connect(gw: &Gateway) -> TcpStream {
    connect_to(gw.native_addr().unwrap()).await
}

async fn connect_to(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    say_hello(&mut s).await;
    s
}

async fn say_hello<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) {
    let hello: proto::HelloResponse = call(
        s,
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
}

/// Expects an error frame with `code`, then the server closing.
async fn expect_closed_with<S: AsyncRead + Unpin>(s: &mut S, code: ErrorCode) -> proto::ErrorFrame {
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
async fn sdk_round_trip(kind: Logs, read_mode: sdk::ReadMode, quic: bool) {
    use futures::StreamExt;
    use sdk::{Client, ConsumerConfig, NewTopic, ProducerConfig, Record, StartAt};

    let (gw, backends) = start(kind).await;
    let client = if quic {
        let url = format!("aero+quic://{}", gw.native_quic_addr().unwrap());
        Client::builder(&url)
            .tls_ca_pem(ca().cert_pem())
            .connect()
            .await
            .unwrap()
    } else {
        let url = format!("aero://{}", gw.native_addr().unwrap());
        Client::connect(&url).await.unwrap()
    };
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
    sdk_round_trip(Logs::Disk, sdk::ReadMode::Fetch, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_consumes_pushed_records_on_disk_logs() {
    sdk_round_trip(Logs::Disk, sdk::ReadMode::Push { window: 64 << 10 }, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_consumes_pushed_records_on_tiered_logs() {
    sdk_round_trip(
        Logs::Tiered,
        sdk::ReadMode::Push { window: 64 << 10 },
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_produces_and_consumes_over_quic() {
    sdk_round_trip(Logs::Disk, sdk::ReadMode::Fetch, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_consumes_pushed_records_over_quic_a_stream_per_partition() {
    sdk_round_trip(Logs::Disk, sdk::ReadMode::Push { window: 64 << 10 }, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_produces_and_consumes_on_tiered_logs() {
    sdk_round_trip(Logs::Tiered, sdk::ReadMode::Fetch, false).await;
}

// ---------------------------------------------------------------- groups

/// Group settings that keep the membership tests short: sessions down to
/// 200 ms, and a new group waits 800 ms for its first members.
fn quick_groups() -> BrokerConfig {
    BrokerConfig {
        group: GroupLimits {
            min_session_timeout_ms: 200,
            initial_rebalance_delay_ms: 800,
            ..GroupLimits::default()
        },
        ..BrokerConfig::default()
    }
}

/// A native member as the test drives it, on its own connection.
struct Member {
    s: TcpStream,
    id: String,
    generation: i32,
    partitions: Vec<u32>,
}

const SESSION_MS: u32 = 1_500;

async fn join(mut s: TcpStream, group: &str, id: String) -> (TcpStream, proto::JoinGroupResponse) {
    let answer: proto::JoinGroupResponse = call(
        &mut s,
        &proto::JoinGroup {
            correlation: 7,
            group: group.into(),
            member_id: id,
            topics: vec!["six".into()],
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: 5_000,
        },
    )
    .await;
    (s, answer)
}

/// Joins (or rejoins) every member at once, as members of one generation do.
async fn join_all(group: &str, members: Vec<(TcpStream, String)>) -> Vec<Member> {
    let joins: Vec<_> = members
        .into_iter()
        .map(|(s, id)| {
            let group = group.to_string();
            tokio::spawn(async move { join(s, &group, id).await })
        })
        .collect();
    let mut out = Vec::new();
    for j in joins {
        let (s, answer) = j.await.unwrap();
        assert_eq!(answer.error, ErrorCode::NONE, "{answer:?}");
        assert!(!answer.member_id.is_empty());
        let mut partitions = Vec::new();
        for t in &answer.assignment {
            assert_eq!(t.topic, "six");
            partitions.extend(&t.partitions);
        }
        out.push(Member {
            s,
            id: answer.member_id,
            generation: answer.generation,
            partitions,
        });
    }
    out
}

/// Every member is of one generation, and their partitions cover the
/// topic's six exactly once.
fn assert_split(members: &[Member]) {
    let generation = members[0].generation;
    assert!(members.iter().all(|m| m.generation == generation));
    let mut all: Vec<u32> = members.iter().flat_map(|m| m.partitions.clone()).collect();
    all.sort_unstable();
    assert_eq!(all, (0..6).collect::<Vec<u32>>(), "disjoint and complete");
    for m in members {
        assert_eq!(
            m.partitions.len(),
            6 / members.len(),
            "range assignment is even here"
        );
    }
}

async fn heartbeat(m: &mut Member, group: &str) -> ErrorCode {
    let answer: proto::HeartbeatResponse = call(
        &mut m.s,
        &proto::Heartbeat {
            correlation: 8,
            group: group.into(),
            member_id: m.id.clone(),
            generation: m.generation,
        },
    )
    .await;
    answer.0.error
}

async fn commit_as(
    s: &mut TcpStream,
    group: &str,
    member: &str,
    generation: i32,
    partition: u32,
    offset: i64,
) -> ErrorCode {
    let answer: proto::CommitOffsetsResponse = call(
        s,
        &proto::CommitOffsets {
            correlation: 9,
            group: group.into(),
            offsets: vec![proto::CommittedOffset {
                topic: "six".into(),
                partition,
                offset,
                metadata: String::new(),
            }],
            generation,
            member_id: member.into(),
        },
    )
    .await;
    assert_eq!(answer.partitions.len(), 1);
    answer.partitions[0].2
}

async fn kafka_describe(gw: &Gateway, group: &str) -> describe_groups_response::DescribedGroup {
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let described: DescribeGroupsResponse = common::roundtrip(
        &mut k,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_string(group.into()))]),
    )
    .await;
    described.groups.into_iter().next().unwrap()
}

/// The partitions of "six" a Kafka tool decodes from a member's assignment.
fn kafka_view_of_assignment(bytes: &Bytes) -> Vec<u32> {
    use kafka_protocol::protocol::Decodable;
    let mut b = bytes.clone();
    let version = bytes::Buf::get_i16(&mut b);
    let a = ConsumerProtocolAssignment::decode(&mut b, version).unwrap();
    let mut out: Vec<u32> = a
        .assigned_partitions
        .iter()
        .filter(|tp| tp.topic.as_str() == "six")
        .flat_map(|tp| tp.partitions.iter().map(|p| *p as u32))
        .collect();
    out.sort_unstable();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_members_split_a_topic_and_rebalance_on_leave_and_session_timeout() {
    let (gw, backends) = start_with(Logs::Disk, quick_groups()).await;
    let addr = gw.native_addr().unwrap();
    let mut admin = connect(&gw).await;
    let created: proto::CreateTopicResponse = call(
        &mut admin,
        &proto::CreateTopic {
            correlation: 2,
            name: "six".into(),
            partitions: 6,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    assert_eq!(created.0.error, ErrorCode::NONE);

    // the coordinator: this server, at its native address
    let found: proto::FindCoordinatorResponse = call(
        &mut admin,
        &proto::FindCoordinator {
            correlation: 3,
            group: "readers".into(),
        },
    )
    .await;
    assert_eq!(found.error, ErrorCode::NONE);
    assert_eq!((found.node_id, found.port), (1, addr.port()));
    assert_eq!(found.host, addr.ip().to_string());
    let empty: proto::FindCoordinatorResponse = call(
        &mut admin,
        &proto::FindCoordinator {
            correlation: 4,
            group: String::new(),
        },
    )
    .await;
    assert_eq!(empty.error, ErrorCode::INVALID_GROUP);

    // three members join at once and split the six partitions
    let mut fresh = Vec::new();
    for _ in 0..3 {
        fresh.push((connect_to(addr).await, String::new()));
    }
    let mut members = join_all("readers", fresh).await;
    assert_split(&members);
    let first_generation = members[0].generation;
    for m in &mut members {
        assert_eq!(heartbeat(m, "readers").await, ErrorCode::NONE);
    }

    // Kafka's DescribeGroups lists the native members and their partitions
    let described = kafka_describe(&gw, "readers").await;
    assert_eq!(described.error_code, 0);
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.protocol_type.as_str(), "consumer");
    assert_eq!(described.protocol_data.as_str(), "aerostream-range");
    assert_eq!(described.members.len(), 3);
    for d in &described.members {
        let m = members
            .iter()
            .find(|m| m.id == d.member_id.as_str())
            .expect("a native member");
        assert_eq!(d.client_id.as_str(), "native-test");
        let mut mine = m.partitions.clone();
        mine.sort_unstable();
        assert_eq!(kafka_view_of_assignment(&d.member_assignment), mine);
    }
    // ... and ListGroups the group
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let listed: ListGroupsResponse =
        common::roundtrip(&mut k, ApiKey::ListGroups, 4, &ListGroupsRequest::default()).await;
    assert!(listed
        .groups
        .iter()
        .any(|g| g.group_id.as_str() == "readers" && g.protocol_type.as_str() == "consumer"));
    // a Kafka consumer cannot join the native group
    let kafka_join: JoinGroupResponse = common::roundtrip(
        &mut k,
        ApiKey::JoinGroup,
        5,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("readers")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))]),
    )
    .await;
    assert_eq!(
        kafka_join.error_code,
        kafka_protocol::ResponseError::InconsistentGroupProtocol.code()
    );

    // a commit outside membership is refused while the group has members;
    // members commit with their generation
    assert_eq!(
        commit_as(&mut admin, "readers", "", -1, 0, 1).await,
        ErrorCode::GROUP_BUSY
    );
    let owner = members
        .iter()
        .position(|m| m.partitions.contains(&0))
        .unwrap();
    let (id, generation) = (members[owner].id.clone(), members[owner].generation);
    assert_eq!(
        commit_as(&mut admin, "readers", &id, generation, 0, 5).await,
        ErrorCode::NONE
    );
    assert_eq!(
        commit_as(&mut admin, "readers", "nobody", generation, 0, 5).await,
        ErrorCode::UNKNOWN_MEMBER
    );

    // one leaves (not the member whose stale commit is tried below): the
    // others are told to rejoin, and own all six
    let leaving = if owner == members.len() - 1 {
        0
    } else {
        members.len() - 1
    };
    let mut leaver = members.remove(leaving);
    let left: proto::LeaveGroupResponse = call(
        &mut leaver.s,
        &proto::LeaveGroup {
            correlation: 10,
            group: "readers".into(),
            member_id: leaver.id.clone(),
        },
    )
    .await;
    assert_eq!(left.0.error, ErrorCode::NONE);
    for m in &mut members {
        assert_eq!(
            heartbeat(m, "readers").await,
            ErrorCode::REBALANCE_IN_PROGRESS
        );
    }
    let rejoin = members.drain(..).map(|m| (m.s, m.id)).collect();
    let mut members = join_all("readers", rejoin).await;
    assert_split(&members);
    assert!(members[0].generation > first_generation);
    assert_eq!(kafka_describe(&gw, "readers").await.members.len(), 2);

    // a commit of the generation the group left is refused
    assert_eq!(
        commit_as(&mut admin, "readers", &id, generation, 0, 6).await,
        ErrorCode::ILLEGAL_GENERATION
    );
    let owner = members
        .iter()
        .position(|m| m.partitions.contains(&0))
        .unwrap();
    let (id, now) = (members[owner].id.clone(), members[owner].generation);
    assert_eq!(
        commit_as(&mut admin, "readers", &id, now, 0, 7).await,
        ErrorCode::NONE
    );
    let committed: proto::FetchOffsetsResponse = call(
        &mut admin,
        &proto::FetchOffsets {
            correlation: 11,
            group: "readers".into(),
            partitions: vec![("six".into(), 0)],
        },
    )
    .await;
    assert_eq!(committed.offsets[0].0.offset, 7);

    // one stops heartbeating: after its session the other is told to
    // rejoin, and owns all six
    let _silent = members.pop().unwrap();
    let mut survivor = members.pop().unwrap();
    let stopped = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        match heartbeat(&mut survivor, "readers").await {
            ErrorCode::NONE => {
                // a bound against a hang, not a timing claim
                assert!(
                    stopped.elapsed() < Duration::from_millis(u64::from(SESSION_MS) * 40),
                    "the silent member is removed after its session"
                );
            }
            ErrorCode::REBALANCE_IN_PROGRESS => break,
            other => panic!("heartbeat answered {other}"),
        }
    }
    assert!(
        stopped.elapsed() >= Duration::from_millis(u64::from(SESSION_MS) - 200),
        "not before the session timeout"
    );
    let alone = join_all("readers", vec![(survivor.s, survivor.id)]).await;
    assert_eq!(alone[0].partitions.len(), 6);
    assert_split(&alone);
    let described = kafka_describe(&gw, "readers").await;
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id.as_str(), alone[0].id);

    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_member_cannot_join_a_kafka_consumers_group_nor_bad_joins_be_made() {
    let (gw, backends) = start_with(Logs::Disk, quick_groups()).await;
    let mut s = connect(&gw).await;
    // a Kafka consumer's group
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let kafka_join: JoinGroupResponse = common::roundtrip(
        &mut k,
        ApiKey::JoinGroup,
        3,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("kafkas")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(1_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))]),
    )
    .await;
    assert_eq!(kafka_join.error_code, 0);
    let refused: proto::JoinGroupResponse = call(
        &mut s,
        &proto::JoinGroup {
            correlation: 2,
            group: "kafkas".into(),
            member_id: String::new(),
            topics: vec!["t".into()],
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 1_000,
        },
    )
    .await;
    assert_eq!(refused.error, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(refused.generation, -1);

    let bad = |correlation, group: &str, topics: Vec<String>, session| proto::JoinGroup {
        correlation,
        group: group.into(),
        member_id: String::new(),
        topics,
        session_timeout_ms: session,
        rebalance_timeout_ms: 1_000,
    };
    let cases = [
        (
            bad(3, "", vec!["t".into()], 10_000),
            ErrorCode::INVALID_GROUP,
        ),
        (bad(4, "g", vec![], 10_000), ErrorCode::INVALID_REQUEST),
        (
            bad(5, "g", vec!["t".into()], 10),
            ErrorCode::INVALID_SESSION_TIMEOUT,
        ),
    ];
    for (join, code) in cases {
        let answer: proto::JoinGroupResponse = call(&mut s, &join).await;
        assert_eq!(answer.error, code, "{join:?}");
    }
    // heartbeats and leaves of members the group does not have
    let hb: proto::HeartbeatResponse = call(
        &mut s,
        &proto::Heartbeat {
            correlation: 6,
            group: "nobody-here".into(),
            member_id: "m".into(),
            generation: 1,
        },
    )
    .await;
    assert_eq!(hb.0.error, ErrorCode::UNKNOWN_MEMBER);
    let left: proto::LeaveGroupResponse = call(
        &mut s,
        &proto::LeaveGroup {
            correlation: 7,
            group: "nobody-here".into(),
            member_id: "m".into(),
        },
    )
    .await;
    assert_eq!(left.0.error, ErrorCode::UNKNOWN_MEMBER);
    gw.shutdown().await;
    backends.stop().await;
}

/// Three Rust consumers of one group read every record exactly once
/// between them, across the rebalance that follows one of them leaving:
/// each gives its partitions up at the position it reached, committed, and
/// the next owner starts there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_consumers_of_a_group_read_every_record_once_across_a_rebalance() {
    use futures::StreamExt;
    use sdk::{Client, ConsumerConfig, GroupOptions, Membership, NewTopic, ProducerConfig, Record};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    let (gw, backends) = start_with(Logs::Disk, quick_groups()).await;
    let url = format!("aero://{}", gw.native_addr().unwrap());
    let client = Client::connect(&url).await.unwrap();
    client.create_topic(NewTopic::new("six", 6)).await.unwrap();
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let produce = |from: usize, to: usize| {
        let sends: Vec<_> = (from..to)
            .map(|i| {
                producer.send(
                    "six",
                    Record::new(format!("v{i}")).with_key(format!("k{i}")),
                )
            })
            .collect();
        async move {
            for send in sends {
                send.await.unwrap();
            }
        }
    };
    produce(0, 300).await;

    // (partition, offset) → how many times it was read
    let read: Arc<Mutex<BTreeMap<(u32, i64), usize>>> = Arc::default();
    let config = ConsumerConfig {
        group: Some("exactly-once".into()),
        membership: Membership::Group(GroupOptions {
            session_timeout: Duration::from_millis(1_500),
            rebalance_timeout: Duration::from_secs(5),
            ..GroupOptions::default()
        }),
        max_wait: Duration::from_millis(100),
        ..ConsumerConfig::default()
    };
    let mut stops = Vec::new();
    let mut readers = Vec::new();
    for n in 0..3 {
        let member_client = Client::builder(&url)
            .client_id(format!("reader-{n}"))
            .connect()
            .await
            .unwrap();
        let mut consumer = member_client.consumer(config.clone()).unwrap();
        consumer.subscribe(&["six"]).unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let read = Arc::clone(&read);
        stops.push(stop);
        readers.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    r = consumer.next() => {
                        let r = r.expect("the stream goes on while subscribed").unwrap();
                        *read.lock().unwrap().entry((r.partition, r.offset)).or_default() += 1;
                    }
                }
            }
            // commits the positions reached and leaves the group
            consumer.close().await.unwrap();
        }));
    }
    let count = |read: &Arc<Mutex<BTreeMap<(u32, i64), usize>>>| read.lock().unwrap().len();
    let wait_for = |n: usize| {
        let read = Arc::clone(&read);
        async move {
            tokio::time::timeout(Duration::from_secs(60), async {
                while count(&read) < n {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("{} of {n} records read", count(&read)));
        }
    };
    wait_for(300).await;
    // the group's three members share the six partitions
    let described = kafka_describe(&gw, "exactly-once").await;
    assert_eq!(described.members.len(), 3, "{described:?}");

    // one leaves while the others go on reading newer records
    stops.pop().unwrap().send(()).unwrap();
    readers.pop().unwrap().await.unwrap();
    produce(300, 600).await;
    wait_for(600).await;
    let described = kafka_describe(&gw, "exactly-once").await;
    assert_eq!(described.members.len(), 2);
    // time for any record read twice to show up
    tokio::time::sleep(Duration::from_millis(500)).await;
    for stop in stops {
        stop.send(()).unwrap();
    }
    for r in readers {
        r.await.unwrap();
    }
    let read = read.lock().unwrap().clone();
    assert_eq!(read.len(), 600, "no record is lost");
    let twice: Vec<_> = read.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "records read twice: {twice:?}");
    // the closing members committed where they stopped: the group has
    // nothing left to read
    let pairs: Vec<(&str, u32)> = (0..6).map(|p| ("six", p)).collect();
    let committed = client
        .committed_offsets("exactly-once", &pairs)
        .await
        .unwrap();
    for (p, c) in committed.iter().enumerate() {
        let count = read.keys().filter(|(q, _)| *q == p as u32).count() as i64;
        assert_eq!(*c, Some(count), "partition {p}");
    }
    gw.shutdown().await;
    backends.stop().await;
}

// ------------------------------------------------------------------ QUIC

/// A bidirectional QUIC stream as one byte stream.
type QuicStream = tokio::io::Join<quinn::RecvStream, quinn::SendStream>;

/// A raw QUIC client trusting `ca_pem` and offering `alpn`.
fn quic_endpoint(ca_pem: &str, alpn: &[u8]) -> quinn::Endpoint {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let config = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap(),
    ));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(config);
    endpoint
}

async fn quic_dial(gw: &Gateway) -> Result<quinn::Connection, quinn::ConnectionError> {
    let endpoint = quic_endpoint(ca().cert_pem(), gateway::native::quic::ALPN);
    endpoint
        .connect(gw.native_quic_addr().unwrap(), "localhost")
        .unwrap()
        .await
}

async fn open_stream(conn: &quinn::Connection) -> QuicStream {
    let (send, recv) = conn.open_bi().await.unwrap();
    tokio::io::join(recv, send)
}

/// A QUIC connection whose first stream said hello.
async fn connect_quic(gw: &Gateway) -> (quinn::Connection, QuicStream) {
    let conn = quic_dial(gw).await.unwrap();
    let mut s = open_stream(&conn).await;
    say_hello(&mut s).await;
    (conn, s)
}

/// Expects the server to close `conn` with application code `code`.
async fn expect_connection_closed(conn: &quinn::Connection, code: u32) {
    let why = tokio::time::timeout(Duration::from_secs(20), conn.closed())
        .await
        .expect("the connection closes");
    match why {
        quinn::ConnectionError::ApplicationClosed(c) => {
            assert_eq!(c.error_code, quinn::VarInt::from_u32(code), "{c:?}")
        }
        other => panic!("closed otherwise: {other:?}"),
    }
}

/// The same requests on any transport, and what came back, less what
/// differs between two runs by nature (the producer id, the topic name).
async fn scenario<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, topic: &str) -> Vec<String> {
    let mut out = Vec::new();
    let created: proto::CreateTopicResponse = call(
        s,
        &proto::CreateTopic {
            correlation: 10,
            name: topic.into(),
            partitions: 3,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    out.push(format!(
        "create {:?}",
        (created.0.correlation, created.0.error)
    ));
    let meta: proto::MetadataResponse = call(
        s,
        &proto::Metadata {
            correlation: 11,
            topics: vec![topic.into()],
        },
    )
    .await;
    out.push(format!("metadata nodes {:?}", meta.nodes));
    for t in &meta.topics {
        out.push(format!("metadata topic {:?}", (t.error, &t.partitions)));
    }
    let pid: proto::InitProducerResponse = call(s, &proto::InitProducer { correlation: 12 }).await;
    out.push(format!("init producer {:?}", pid.error));
    let batch = |values: &[&[u8]], seq: i32| {
        record_batch(
            values,
            false,
            Some((pid.producer_id, pid.producer_epoch, seq)),
            Compression::None,
        )
    };
    let first = vec![
        (0, batch(&[b"p0-a", b"p0-b"], 0)),
        (1, batch(&[b"p1-a"], 0)),
        (2, batch(&[b"p2-a", b"p2-b", b"p2-c"], 0)),
    ];
    // pipelined: the first produce, its retry (a duplicate) and the next
    // batch of partition 1, before any answer is read
    send(s, &produce_req(13, topic, first.clone())).await;
    send(s, &produce_req(14, topic, first)).await;
    send(s, &produce_req(15, topic, vec![(1, batch(&[b"p1-b"], 1))])).await;
    let mut produced = Vec::new();
    for _ in 0..3 {
        let p: proto::ProduceResponse = recv(s).await;
        let parts: Vec<_> = p.topics[0]
            .partitions
            .iter()
            .map(|q| (q.partition, q.error, q.base_offset))
            .collect();
        produced.push(format!("produce {} {parts:?}", p.correlation));
    }
    produced.sort();
    out.extend(produced);
    for partition in 0..3 {
        let f: proto::FetchResponse = call(s, &fetch_req(20, topic, partition, 0, 100)).await;
        let p = &f.topics[0].partitions[0];
        out.push(format!(
            "fetch {partition} {:?}",
            (
                p.error,
                p.high_watermark,
                p.log_start_offset,
                values_of(&p.records)
            )
        ));
    }
    let offsets: proto::ListOffsetsResponse = call(
        s,
        &proto::ListOffsets {
            correlation: 21,
            partitions: (0..3)
                .flat_map(|p| [(topic.to_owned(), p, -2), (topic.to_owned(), p, -1)])
                .collect(),
        },
    )
    .await;
    out.push(format!(
        "list offsets {:?}",
        offsets
            .partitions
            .iter()
            .map(|o| (o.partition, o.error, o.offset))
            .collect::<Vec<_>>()
    ));
    let committed: proto::CommitOffsetsResponse = call(
        s,
        &proto::CommitOffsets {
            correlation: 22,
            group: format!("{topic}-group"),
            offsets: (0..3)
                .map(|p| proto::CommittedOffset {
                    topic: topic.into(),
                    partition: p,
                    offset: i64::from(p) + 1,
                    metadata: format!("m{p}"),
                })
                .collect(),
            ..Default::default()
        },
    )
    .await;
    out.push(format!(
        "commit {:?}",
        committed
            .partitions
            .iter()
            .map(|(_, p, e)| (*p, *e))
            .collect::<Vec<_>>()
    ));
    let read_back: proto::FetchOffsetsResponse = call(
        s,
        &proto::FetchOffsets {
            correlation: 23,
            group: format!("{topic}-group"),
            partitions: (0..3).map(|p| (topic.to_owned(), p)).collect(),
        },
    )
    .await;
    out.push(format!(
        "fetch offsets {:?}",
        read_back
            .offsets
            .iter()
            .map(|(o, e)| (o.partition, o.offset, o.metadata.clone(), *e))
            .collect::<Vec<_>>()
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_scenario_gives_the_same_answers_over_tcp_and_quic() {
    let (gw, backends) = start(Logs::Disk).await;
    let mut tcp = connect(&gw).await;
    let over_tcp = scenario(&mut tcp, "scenario-tcp").await;
    let (conn, mut quic) = connect_quic(&gw).await;
    let over_quic = scenario(&mut quic, "scenario-quic").await;
    assert_eq!(over_tcp, over_quic);
    // and it did something: offsets were assigned, duplicates recognised
    assert!(
        over_quic.contains(&format!(
            "produce 14 {:?}",
            vec![
                (0, ErrorCode::NONE, 0),
                (1, ErrorCode::NONE, 0),
                (2, ErrorCode::NONE, 0)
            ]
        )),
        "{over_quic:#?}"
    );
    assert!(
        over_quic
            .iter()
            .any(|l| l.starts_with("fetch 1 ") && l.contains("p1-b")),
        "{over_quic:#?}"
    );
    // what QUIC wrote, TCP reads
    let f: proto::FetchResponse = call(&mut tcp, &fetch_req(30, "scenario-quic", 2, 0, 0)).await;
    assert_eq!(
        values_of(&f.topics[0].partitions[0].records),
        vec![(0, "p2-a".into()), (1, "p2-b".into()), (2, "p2-c".into())]
    );
    conn.close(0u32.into(), b"done");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn further_quic_streams_share_the_hello_and_never_wait_for_each_other() {
    let (gw, backends) = start(Logs::Disk).await;
    let (conn, mut first) = connect_quic(&gw).await;
    let _: proto::CreateTopicResponse = call(
        &mut first,
        &proto::CreateTopic {
            correlation: 2,
            name: "streams".into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    // a long poll on a second stream (no hello of its own)...
    let mut waiting = open_stream(&conn).await;
    send(&mut waiting, &fetch_req(1, "streams", 0, 0, 10_000)).await;
    // ...holds up neither a third stream nor the first
    let mut third = open_stream(&conn).await;
    let pong: proto::Pong = call(
        &mut third,
        &proto::Ping {
            correlation: 1,
            nonce: 3,
        },
    )
    .await;
    assert_eq!((pong.correlation, pong.nonce), (1, 3));
    let _: proto::ProduceResponse = call(
        &mut first,
        &produce_req(
            3,
            "streams",
            vec![(0, record_batch(&[b"wake"], false, None, Compression::None))],
        ),
    )
    .await;
    let fetched: proto::FetchResponse = recv(&mut waiting).await;
    assert_eq!(fetched.correlation, 1);
    assert_eq!(
        values_of(&fetched.topics[0].partitions[0].records),
        vec![(0, "wake".into())]
    );
    // a stream the client finishes is answered and finished; the
    // connection goes on
    third.shutdown().await.unwrap();
    assert!(next_frame(&mut third).await.is_none());
    let pong: proto::Pong = call(
        &mut first,
        &proto::Ping {
            correlation: 4,
            nonce: 4,
        },
    )
    .await;
    assert_eq!(pong.nonce, 4);
    // a hello on a further stream is one hello too many
    let mut again = open_stream(&conn).await;
    send(
        &mut again,
        &proto::Hello {
            correlation: 7,
            min_version: 1,
            max_version: 9,
            ..Default::default()
        },
    )
    .await;
    expect_closed_with(&mut again, ErrorCode::INVALID_REQUEST).await;
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_frame_over_quic_gets_an_error_frame_and_closes_only_its_connection() {
    let (gw, backends) = start(Logs::Disk).await;
    let (healthy, mut healthy_stream) = connect_quic(&gw).await;
    let mut tcp = connect(&gw).await;

    // wrong magic on a further stream of a connection that said hello
    let (conn, mut first) = connect_quic(&gw).await;
    let mut s = open_stream(&conn).await;
    s.write_all(&[0x00, 0x01, 0x02, 0, 0, 0, 0]).await.unwrap();
    expect_closed_with(&mut s, ErrorCode::BAD_FRAME).await;
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;
    assert!(
        next_frame(&mut first).await.is_none(),
        "its other streams went with it"
    );
    // anything before the hello, on the first stream
    let conn = quic_dial(&gw).await.unwrap();
    let mut s = open_stream(&conn).await;
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
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;
    // a length over the limit, after a good hello
    let (conn, mut s) = connect_quic(&gw).await;
    s.write_all(
        &FrameHeader {
            op: proto::op::PING,
            len: u32::MAX,
        }
        .encode(),
    )
    .await
    .unwrap();
    expect_closed_with(&mut s, ErrorCode::FRAME_TOO_LARGE).await;
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;

    // the other connections never noticed
    for (s, n) in [(&mut healthy_stream as &mut QuicStream, 1)] {
        let pong: proto::Pong = call(
            s,
            &proto::Ping {
                correlation: 3,
                nonce: n,
            },
        )
        .await;
        assert_eq!(pong.nonce, n);
    }
    let pong: proto::Pong = call(
        &mut tcp,
        &proto::Ping {
            correlation: 3,
            nonce: 2,
        },
    )
    .await;
    assert_eq!(pong.nonce, 2);
    assert!(healthy.close_reason().is_none());
    let malformed = gw
        .broker()
        .metrics
        .malformed_requests
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(malformed >= 2, "counted like TCP's: {malformed}");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_or_another_protocol_is_refused() {
    let (gw, backends) = start(Logs::Disk).await;
    let url = format!("aero+quic://{}", gw.native_quic_addr().unwrap());
    // a CA that did not sign the server's certificate
    let stranger = NativeCa::generate().unwrap();
    let e = sdk::Client::builder(&url)
        .tls_ca_pem(stranger.cert_pem())
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_err();
    match &e {
        sdk::Error::Tls { reason, .. } => {
            assert!(reason.contains("UnknownIssuer"), "{reason}");
            assert!(reason.contains("tls_ca_file"), "says what to do: {reason}");
        }
        other => panic!("not a TLS error: {other:?}"),
    }
    assert!(!e.is_retriable());
    // the right CA, but a name the certificate does not carry
    let endpoint = quic_endpoint(ca().cert_pem(), gateway::native::quic::ALPN);
    let refused = endpoint
        .connect(gw.native_quic_addr().unwrap(), "elsewhere.example")
        .unwrap()
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("not valid for name"),
        "{refused}"
    );
    // no CA at all: the client says what it needs
    let e = sdk::Client::builder(&url).connect().await.unwrap_err();
    assert!(
        matches!(&e, sdk::Error::Config(m) if m.contains("tls_ca_file")),
        "{e}"
    );
    // a raw client trusting a stranger, and one speaking another protocol
    let endpoint = quic_endpoint(stranger.cert_pem(), gateway::native::quic::ALPN);
    let refused = endpoint
        .connect(gw.native_quic_addr().unwrap(), "localhost")
        .unwrap()
        .await
        .unwrap_err();
    assert!(
        matches!(refused, quinn::ConnectionError::TransportError(_)),
        "{refused:?}"
    );
    let endpoint = quic_endpoint(ca().cert_pem(), b"h3");
    let refused = endpoint
        .connect(gw.native_quic_addr().unwrap(), "localhost")
        .unwrap()
        .await
        .unwrap_err();
    assert!(
        matches!(refused, quinn::ConnectionError::ConnectionClosed(_)),
        "{refused:?}"
    );
    // accepting anything works, for trying things out
    let client = sdk::Client::builder(&url)
        .danger_accept_invalid_certs()
        .connect()
        .await
        .unwrap();
    client.ping().await.unwrap();
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_connection_counts_as_one_against_the_connection_limits() {
    let (gw, backends) = start_with(
        Logs::Disk,
        BrokerConfig {
            connections: gateway::connections::ConnectionLimits {
                max_connections_per_ip: 1,
                ..Default::default()
            },
            ..BrokerConfig::default()
        },
    )
    .await;
    let (conn, mut first) = connect_quic(&gw).await;
    // streams are not connections
    let mut second = open_stream(&conn).await;
    let pong: proto::Pong = call(
        &mut second,
        &proto::Ping {
            correlation: 1,
            nonce: 1,
        },
    )
    .await;
    assert_eq!(pong.nonce, 1);
    assert_eq!(gw.broker().connections.open_count(), 1);
    // another connection from the address, QUIC or TCP, is refused
    let refused = quic_dial(&gw).await.unwrap_err();
    assert!(
        matches!(&refused, quinn::ConnectionError::ConnectionClosed(c)
            if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED),
        "{refused:?}"
    );
    let mut tcp = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(closed, Ok(0) | Err(_)), "closed at once");
    // once the QUIC connection closes, its place is free again
    drop(first.shutdown().await);
    conn.close(0u32.into(), b"bye");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while gw.broker().connections.open_count() > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the place is freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (conn, _s) = connect_quic(&gw).await;
    conn.close(0u32.into(), b"bye");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_quic_requests_in_flight_then_closes() {
    let (gw, backends) = start(Logs::Disk).await;
    let (conn, mut s) = connect_quic(&gw).await;
    let _: proto::CreateTopicResponse = call(
        &mut s,
        &proto::CreateTopic {
            correlation: 2,
            name: "closing".into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    // a long poll under way when shutdown begins ends early, answered
    send(&mut s, &fetch_req(3, "closing", 0, 0, 30_000)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let addr = gw.native_quic_addr().unwrap();
    let stopped = tokio::spawn(gw.shutdown());
    let fetched: proto::FetchResponse = recv(&mut s).await;
    assert_eq!(fetched.correlation, 3);
    assert!(next_frame(&mut s).await.is_none());
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_SHUTDOWN).await;
    tokio::time::timeout(Duration::from_secs(15), stopped)
        .await
        .expect("shutdown ends")
        .unwrap();
    // the UDP port is free again
    std::net::UdpSocket::bind(addr).expect("the endpoint let go of its port");
    backends.stop().await;
}

/// An EC P-256 key set with one key, written to a JWKS file, and a token
/// for `sub` signed by it.
fn token_issuer(dir: &std::path::Path) -> (std::path::PathBuf, impl Fn(&str) -> String) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = pair.public_key_raw().to_vec();
    let jwk = serde_json::json!({
        "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256",
        "x": b64.encode(&point[1..33]), "y": b64.encode(&point[33..65]),
    });
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, serde_json::json!({ "keys": [jwk] }).to_string()).unwrap();
    let key = jsonwebtoken::EncodingKey::from_ec_der(&pair.serialize_der());
    let sign = move |sub: &str| {
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 600;
        let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        h.kid = Some("k1".into());
        jsonwebtoken::encode(&h, &serde_json::json!({ "sub": sub, "exp": exp }), &key).unwrap()
    };
    (jwks, sign)
}

/// A gateway whose listeners authenticate with SCRAM-SHA-512, PLAIN and
/// OAUTHBEARER, with ACLs on (`User:admin` a superuser), sessions of
/// `session` when given, and users admin, alice and bob (password "pw").
async fn start_secured(
    session: Option<Duration>,
) -> (
    Gateway,
    Backends,
    tempfile::TempDir,
    impl Fn(&str) -> String,
) {
    use gateway::sasl::{Mechanism, ScramMechanism};
    let dir = tempfile::tempdir().unwrap();
    let (jwks, sign) = token_issuer(dir.path());
    let oauth =
        gateway::sasl::oauthbearer::Validator::new(gateway::sasl::oauthbearer::OAuthConfig {
            jwks,
            issuer: None,
            audience: None,
            principal_claim: "sub".into(),
        })
        .unwrap();
    let (gw, backends) = start_with(
        Logs::Disk,
        BrokerConfig {
            sasl_mechanisms: vec![
                Mechanism::Scram(ScramMechanism::Sha512),
                Mechanism::Plain,
                Mechanism::OAuthBearer,
            ],
            sasl_max_session: session,
            oauthbearer: Some(Arc::new(oauth)),
            authz: dataplane::policy::authz::AuthzConfig {
                enabled: true,
                superusers: vec!["User:admin".into()],
                allow_if_no_acl: false,
            },
            ..BrokerConfig::default()
        },
    )
    .await;
    common::add_users(&backends.meta, &["admin", "alice", "bob"], "pw").await;
    (gw, backends, dir, sign)
}

async fn native_client(
    gw: &Gateway,
    quic: bool,
    credentials: sdk::Credentials,
) -> Result<sdk::Client, sdk::Error> {
    let url = if quic {
        format!("aero+quic://{}", gw.native_quic_addr().unwrap())
    } else {
        format!("aero://{}", gw.native_addr().unwrap())
    };
    let client = sdk::Client::builder(&url)
        .tls_ca_pem(ca().cert_pem())
        .credentials(credentials)
        .connect()
        .await?;
    // the first request opens the connection and logs in
    client.ping().await?;
    Ok(client)
}

/// With security on, native clients log in as the same users as Kafka
/// clients (SCRAM over QUIC, a token in the hello over TCP) and the same
/// ACLs govern them: what a user was granted works, the rest is
/// UNAUTHORIZED, and Metadata hides topics it may not describe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_clients_log_in_as_kafka_users_and_the_acls_govern_them() {
    use metastore::acl::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};
    use sdk::{Credentials, NewTopic, ProducerConfig, Record};

    let (gw, backends, _dir, sign) = start_secured(None).await;
    let admin = native_client(&gw, true, Credentials::scram_sha512("admin", "pw"))
        .await
        .unwrap();
    admin
        .create_topic(NewTopic::new("ledger", 2))
        .await
        .unwrap();
    let grant = |principal: &str, operation| AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "ledger".into(),
        pattern: PatternType::Literal,
        principal: principal.into(),
        host: "*".into(),
        operation,
        permission: AclPermission::Allow,
    };
    let made = backends
        .meta
        .create_acls(vec![
            grant("User:alice", AclOperation::Write),
            grant("User:carol", AclOperation::Read),
        ])
        .await
        .unwrap();
    assert!(made.iter().all(Result::is_ok), "{made:?}");

    // alice over QUIC with SCRAM, and carol with a token over TCP
    let alice = native_client(&gw, true, Credentials::scram_sha512("alice", "pw"))
        .await
        .unwrap();
    let producer = alice.producer(ProducerConfig::default()).unwrap();
    let sent = producer
        .send("ledger", Record::new("credit 10"))
        .await
        .unwrap();
    let token = sign("carol");
    let carol = native_client(&gw, false, Credentials::oauth_token(token))
        .await
        .unwrap();
    let md = carol.metadata(&[]).await.unwrap();
    assert!(md.topic("ledger").is_some(), "READ implies DESCRIBE");
    let mut consumer = carol.consumer(sdk::ConsumerConfig::default()).unwrap();
    consumer
        .assign("ledger", Some(vec![sent.partition]), sdk::StartAt::Earliest)
        .await
        .unwrap();
    let got = tokio::time::timeout(
        Duration::from_secs(20),
        futures::StreamExt::next(&mut consumer),
    )
    .await
    .expect("a record within 20 s")
    .expect("the stream goes on")
    .unwrap();
    assert_eq!(&got.value.unwrap()[..], b"credit 10");

    // bob has no ACL: the topic is hidden and writing is refused
    let bob = native_client(&gw, true, Credentials::plain("bob", "pw"))
        .await
        .unwrap();
    assert!(bob.metadata(&[]).await.unwrap().topic("ledger").is_none());
    let refused = bob
        .producer(ProducerConfig::default())
        .unwrap()
        .send("ledger", Record::new("debit 10"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused.code(), Some(ErrorCode::UNAUTHORIZED))
            || matches!(refused, sdk::Error::UnknownTopic(_)),
        "{refused:?}"
    );
    // carol may read but not write
    let refused = carol
        .producer(ProducerConfig::default())
        .unwrap()
        .send("ledger", Record::new("debit 10"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::UNAUTHORIZED), "{refused:?}");
    gw.shutdown().await;
}

/// A wrong password, an unknown user and a forged token are refused with
/// AUTHENTICATION_FAILED; a client without credentials gets its hello
/// answered and then AUTHENTICATION_REQUIRED for its first request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_logins_that_fail_are_refused_and_say_why() {
    use sdk::Credentials;
    let (gw, _backends, dir, _sign) = start_secured(None).await;
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (_, foreign) = token_issuer(&other);
    for (quic, credentials) in [
        (true, Credentials::scram_sha512("alice", "wrong")),
        (false, Credentials::scram_sha512("mallory", "pw")),
        (false, Credentials::plain("alice", "wrong")),
        (true, Credentials::oauth_token(foreign("alice"))),
        (true, Credentials::scram_sha256("alice", "pw")),
    ] {
        let what = format!("{credentials:?}");
        let e = native_client(&gw, quic, credentials).await.unwrap_err();
        assert_eq!(
            e.code(),
            Some(ErrorCode::AUTHENTICATION_FAILED),
            "{what}: {e:?}"
        );
    }
    let failures = gw
        .broker()
        .metrics
        .sasl_failures
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(failures, 5);

    let mut s = connect(&gw).await;
    send(
        &mut s,
        &proto::Ping {
            correlation: 2,
            nonce: 1,
        },
    )
    .await;
    expect_closed_with(&mut s, ErrorCode::AUTHENTICATION_REQUIRED).await;
    gw.shutdown().await;
}

/// With a session lifetime, a native connection's requests are refused
/// with SESSION_EXPIRED once it passed, and the client logs in again on a
/// new connection without the caller noticing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_session_ends_at_its_lifetime_and_the_client_logs_in_again() {
    let (gw, _backends, _dir, _sign) = start_secured(Some(Duration::from_millis(1500))).await;
    // by hand: PLAIN in the hello, then the session ends
    let mut s = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
    let hello: proto::HelloResponse = call(
        &mut s,
        &proto::Hello {
            correlation: 1,
            min_version: 1,
            max_version: 1,
            client_id: "expiring".into(),
            auth_mechanism: "PLAIN".into(),
            auth_bytes: Bytes::from_static(b"\0alice\0pw"),
        },
    )
    .await;
    assert_eq!(hello.error, ErrorCode::NONE);
    let _: proto::Pong = call(
        &mut s,
        &proto::Ping {
            correlation: 2,
            nonce: 1,
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1800)).await;
    send(
        &mut s,
        &proto::Ping {
            correlation: 3,
            nonce: 2,
        },
    )
    .await;
    expect_closed_with(&mut s, ErrorCode::SESSION_EXPIRED).await;

    // the SDK: the retriable SESSION_EXPIRED makes it connect again
    let client = native_client(&gw, true, sdk::Credentials::scram_sha512("alice", "pw"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    client.ping().await.expect("served after logging in again");
    let expired = gw
        .broker()
        .metrics
        .sasl_expired
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(expired, 2);
    gw.shutdown().await;
}
