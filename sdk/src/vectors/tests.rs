//! Writes the corpus from the codecs (`write_vectors`, ignored) and checks
//! every file of it against them (`the_corpus_holds`).

use std::collections::BTreeMap;
use std::fs;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Value};

use super::*;
use crate::partitioner::{murmur2, partition_for_key};
use crate::proto::*;
use crate::record::{encode_batch, BatchOptions, ProducerIdentity, Record};

/// The body limit frames are decoded with unless a vector names another.
const MAX_BODY: u32 = 104_857_600;

/// A record batch the corpus uses wherever a message carries records:
/// two records, one keyed with a header, fixed timestamps.
fn sample_batch() -> Bytes {
    let records = [
        Record::new("hello")
            .with_key("user-42")
            .with_header("trace", "abc")
            .with_timestamp(1_700_000_000_000),
        Record::new("world").with_timestamp(1_700_000_000_005),
    ];
    encode_batch(
        &records,
        &BatchOptions {
            now_ms: 1_700_000_000_000,
            ..BatchOptions::default()
        },
    )
    .expect("the sample batch encodes")
}

/// A valid message: the file it goes to, a name, and the message.
struct Sample {
    file: &'static str,
    name: String,
    message: &'static str,
    frame: Bytes,
    value: Value,
}

fn sample<M: Message + serde::Serialize>(
    file: &'static str,
    name: &str,
    message: &'static str,
    m: &M,
) -> Sample {
    Sample {
        file,
        name: name.to_string(),
        message,
        frame: m.to_frame(),
        value: serde_json::to_value(m).expect("messages serialize"),
    }
}

fn producer() -> TxnProducer {
    TxnProducer {
        transactional_id: "orders-1".into(),
        producer_id: 4000,
        producer_epoch: 3,
    }
}

fn samples() -> Vec<Sample> {
    let batch = sample_batch();
    let produce = Produce {
        correlation: 7,
        acks: -1,
        timeout_ms: 30_000,
        topics: vec![ProduceTopic {
            name: "orders".into(),
            partitions: vec![ProducePartition {
                partition: 2,
                batch: batch.clone(),
            }],
        }],
    };
    let produce_response = ProduceResponse {
        correlation: 7,
        topics: vec![TopicProduced {
            name: "orders".into(),
            partitions: vec![
                PartitionProduced {
                    partition: 2,
                    error: ErrorCode::NONE,
                    base_offset: 41,
                    log_append_time_ms: -1,
                    log_start_offset: 0,
                    message: String::new(),
                },
                PartitionProduced {
                    partition: 3,
                    error: ErrorCode::NOT_LEADER,
                    base_offset: -1,
                    log_append_time_ms: -1,
                    log_start_offset: -1,
                    message: "not the leader of orders-3".into(),
                },
            ],
        }],
    };
    let fetch_topics = vec![FetchTopic {
        name: "orders".into(),
        partitions: vec![
            FetchPartition {
                partition: 0,
                offset: 0,
                max_bytes: 1_048_576,
            },
            FetchPartition {
                partition: 2,
                offset: 41,
                max_bytes: 65_536,
            },
        ],
    }];
    let mut s = vec![
        sample(
            "connection",
            "hello",
            "Hello",
            &Hello {
                correlation: 1,
                min_version: 1,
                max_version: 1,
                client_id: "aerostream-go".into(),
                auth_mechanism: String::new(),
                auth_bytes: Bytes::new(),
            },
        ),
        sample(
            "connection",
            "hello with PLAIN credentials",
            "Hello",
            &Hello {
                correlation: 1,
                min_version: 1,
                max_version: 3,
                client_id: "clïent ✓".into(),
                auth_mechanism: "PLAIN".into(),
                auth_bytes: Bytes::from_static(b"\0alice\0s3cret"),
            },
        ),
        sample(
            "connection",
            "hello answered",
            "HelloResponse",
            &HelloResponse {
                correlation: 1,
                error: ErrorCode::NONE,
                version: 1,
                node_id: 1,
                max_frame_bytes: 104_857_600,
                server: "aerostream 0.1.0".into(),
            },
        ),
        sample(
            "connection",
            "hello refused",
            "HelloResponse",
            &HelloResponse {
                correlation: 1,
                error: ErrorCode::UNSUPPORTED_VERSION,
                version: 0,
                node_id: 0,
                max_frame_bytes: 0,
                server: String::new(),
            },
        ),
        sample(
            "connection",
            "authenticate SCRAM client-first",
            "Authenticate",
            &Authenticate {
                correlation: 2,
                mechanism: "SCRAM-SHA-256".into(),
                auth_bytes: Bytes::from_static(b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"),
            },
        ),
        sample(
            "connection",
            "authenticate answered, complete",
            "AuthenticateResponse",
            &AuthenticateResponse {
                correlation: 3,
                error: ErrorCode::NONE,
                auth_bytes: Bytes::from_static(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="),
                complete: true,
                session_lifetime_ms: 3_600_000,
            },
        ),
        sample(
            "connection",
            "ping",
            "Ping",
            &Ping {
                correlation: 9,
                nonce: 0xDEAD_BEEF_CAFE_BABE,
            },
        ),
        sample(
            "connection",
            "pong",
            "Pong",
            &Pong {
                correlation: 9,
                nonce: 0xDEAD_BEEF_CAFE_BABE,
            },
        ),
        sample(
            "metadata",
            "metadata of every topic",
            "Metadata",
            &Metadata {
                correlation: 4,
                topics: vec![],
            },
        ),
        sample(
            "metadata",
            "metadata of two topics",
            "Metadata",
            &Metadata {
                correlation: 4,
                topics: vec!["orders".into(), "payments".into()],
            },
        ),
        sample(
            "metadata",
            "metadata answered",
            "MetadataResponse",
            &MetadataResponse {
                correlation: 4,
                nodes: vec![
                    Node {
                        id: 1,
                        host: "10.0.0.1".into(),
                        port: 9091,
                        rack: "eu-west-1a".into(),
                    },
                    Node {
                        id: 2,
                        host: "10.0.0.2".into(),
                        port: 9091,
                        rack: String::new(),
                    },
                ],
                topics: vec![
                    TopicMetadata {
                        name: "orders".into(),
                        error: ErrorCode::NONE,
                        partitions: vec![
                            PartitionMetadata {
                                index: 0,
                                leader: 1,
                                leader_epoch: 5,
                                replicas: vec![1, 2],
                                in_sync: vec![1, 2],
                            },
                            PartitionMetadata {
                                index: 1,
                                leader: -1,
                                leader_epoch: -1,
                                replicas: vec![2, 1],
                                in_sync: vec![],
                            },
                        ],
                    },
                    TopicMetadata {
                        name: "missing".into(),
                        error: ErrorCode::UNKNOWN_TOPIC,
                        partitions: vec![],
                    },
                ],
            },
        ),
        sample(
            "metadata",
            "create topic",
            "CreateTopic",
            &CreateTopic {
                correlation: 5,
                name: "orders".into(),
                partitions: 12,
                replication_factor: -1,
                configs: vec![
                    ("retention.ms".into(), "86400000".into()),
                    ("cleanup.policy".into(), "compact".into()),
                ],
            },
        ),
        sample(
            "metadata",
            "create topic answered",
            "CreateTopicResponse",
            &CreateTopicResponse(TopicResponse {
                correlation: 5,
                error: ErrorCode::NONE,
                message: String::new(),
            }),
        ),
        sample(
            "metadata",
            "create topic refused",
            "CreateTopicResponse",
            &CreateTopicResponse(TopicResponse {
                correlation: 5,
                error: ErrorCode::TOPIC_ALREADY_EXISTS,
                message: "Topic 'orders' already exists.".into(),
            }),
        ),
        sample(
            "metadata",
            "delete topic",
            "DeleteTopic",
            &DeleteTopic {
                correlation: 6,
                name: "orders".into(),
            },
        ),
        sample(
            "metadata",
            "delete topic answered",
            "DeleteTopicResponse",
            &DeleteTopicResponse(TopicResponse {
                correlation: 6,
                error: ErrorCode::UNKNOWN_TOPIC,
                message: "no topic orders".into(),
            }),
        ),
        sample(
            "produce",
            "init producer",
            "InitProducer",
            &InitProducer { correlation: 10 },
        ),
        sample(
            "produce",
            "init producer answered",
            "InitProducerResponse",
            &InitProducerResponse {
                correlation: 10,
                error: ErrorCode::NONE,
                producer_id: 4000,
                producer_epoch: 0,
            },
        ),
        sample("produce", "produce one batch", "Produce", &produce),
        sample(
            "produce",
            "produce, no acks, nothing",
            "Produce",
            &Produce {
                correlation: 8,
                acks: 0,
                timeout_ms: 0,
                topics: vec![],
            },
        ),
        sample(
            "produce",
            "produce answered",
            "ProduceResponse",
            &produce_response,
        ),
        sample(
            "fetch",
            "fetch two partitions",
            "Fetch",
            &Fetch {
                correlation: 11,
                max_wait_ms: 500,
                min_bytes: 1,
                max_bytes: 52_428_800,
                topics: fetch_topics.clone(),
            },
        ),
        sample(
            "fetch",
            "fetch answered",
            "FetchResponse",
            &FetchResponse {
                correlation: 11,
                topics: vec![TopicFetched {
                    name: "orders".into(),
                    partitions: vec![
                        PartitionFetched {
                            partition: 0,
                            error: ErrorCode::NONE,
                            high_watermark: 2,
                            log_start_offset: 0,
                            records: batch.clone(),
                        },
                        PartitionFetched {
                            partition: 2,
                            error: ErrorCode::OFFSET_OUT_OF_RANGE,
                            high_watermark: 40,
                            log_start_offset: 0,
                            records: Bytes::new(),
                        },
                    ],
                }],
            },
        ),
        sample(
            "fetch",
            "list offsets",
            "ListOffsets",
            &ListOffsets {
                correlation: 12,
                partitions: vec![
                    ("orders".into(), 0, -2),
                    ("orders".into(), 1, -1),
                    ("orders".into(), 2, 1_700_000_000_000),
                ],
            },
        ),
        sample(
            "fetch",
            "list offsets answered",
            "ListOffsetsResponse",
            &ListOffsetsResponse {
                correlation: 12,
                partitions: vec![
                    OffsetFound {
                        topic: "orders".into(),
                        partition: 0,
                        error: ErrorCode::NONE,
                        offset: 0,
                        timestamp: -1,
                    },
                    OffsetFound {
                        topic: "orders".into(),
                        partition: 9,
                        error: ErrorCode::UNKNOWN_PARTITION,
                        offset: -1,
                        timestamp: -1,
                    },
                ],
            },
        ),
        sample(
            "groups",
            "commit offsets as a member",
            "CommitOffsets",
            &CommitOffsets {
                correlation: 13,
                group: "readers".into(),
                offsets: vec![CommittedOffset {
                    topic: "orders".into(),
                    partition: 0,
                    offset: 42,
                    metadata: "host-a".into(),
                }],
                generation: 3,
                member_id: "aero-1b2c".into(),
            },
        ),
        sample(
            "groups",
            "commit offsets without membership",
            "CommitOffsets",
            &CommitOffsets {
                correlation: 13,
                group: "readers".into(),
                offsets: vec![],
                generation: -1,
                member_id: String::new(),
            },
        ),
        sample(
            "groups",
            "commit offsets answered",
            "CommitOffsetsResponse",
            &CommitOffsetsResponse {
                correlation: 13,
                partitions: vec![
                    ("orders".into(), 0, ErrorCode::NONE),
                    ("orders".into(), 1, ErrorCode::ILLEGAL_GENERATION),
                ],
            },
        ),
        sample(
            "groups",
            "fetch offsets",
            "FetchOffsets",
            &FetchOffsets {
                correlation: 14,
                group: "readers".into(),
                partitions: vec![("orders".into(), 0), ("orders".into(), 1)],
            },
        ),
        sample(
            "groups",
            "fetch offsets answered",
            "FetchOffsetsResponse",
            &FetchOffsetsResponse {
                correlation: 14,
                offsets: vec![
                    (
                        CommittedOffset {
                            topic: "orders".into(),
                            partition: 0,
                            offset: 42,
                            metadata: "host-a".into(),
                        },
                        ErrorCode::NONE,
                    ),
                    (
                        CommittedOffset {
                            topic: "orders".into(),
                            partition: 1,
                            offset: -1,
                            metadata: String::new(),
                        },
                        ErrorCode::NONE,
                    ),
                ],
            },
        ),
        sample(
            "groups",
            "find coordinator",
            "FindCoordinator",
            &FindCoordinator {
                correlation: 15,
                group: "readers".into(),
            },
        ),
        sample(
            "groups",
            "find coordinator answered",
            "FindCoordinatorResponse",
            &FindCoordinatorResponse {
                correlation: 15,
                error: ErrorCode::NONE,
                node_id: 2,
                host: "10.0.0.2".into(),
                port: 9091,
            },
        ),
        sample(
            "groups",
            "join group",
            "JoinGroup",
            &JoinGroup {
                correlation: 16,
                group: "readers".into(),
                member_id: String::new(),
                topics: vec!["orders".into(), "payments".into()],
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
            },
        ),
        sample(
            "groups",
            "join group answered",
            "JoinGroupResponse",
            &JoinGroupResponse {
                correlation: 16,
                error: ErrorCode::NONE,
                generation: 3,
                member_id: "aero-1b2c".into(),
                assignment: vec![
                    TopicAssignment {
                        topic: "orders".into(),
                        partitions: vec![0, 2, 4],
                    },
                    TopicAssignment {
                        topic: "payments".into(),
                        partitions: vec![],
                    },
                ],
            },
        ),
        sample(
            "groups",
            "heartbeat",
            "Heartbeat",
            &Heartbeat {
                correlation: 17,
                group: "readers".into(),
                member_id: "aero-1b2c".into(),
                generation: 3,
            },
        ),
        sample(
            "groups",
            "heartbeat answered: rebalance",
            "HeartbeatResponse",
            &HeartbeatResponse(GroupResponse {
                correlation: 17,
                error: ErrorCode::REBALANCE_IN_PROGRESS,
            }),
        ),
        sample(
            "groups",
            "leave group",
            "LeaveGroup",
            &LeaveGroup {
                correlation: 18,
                group: "readers".into(),
                member_id: "aero-1b2c".into(),
            },
        ),
        sample(
            "groups",
            "leave group answered",
            "LeaveGroupResponse",
            &LeaveGroupResponse(GroupResponse {
                correlation: 18,
                error: ErrorCode::NONE,
            }),
        ),
        sample(
            "subscribe",
            "subscribe from earliest",
            "Subscribe",
            &Subscribe {
                correlation: 19,
                subscription: 1,
                topic: "orders".into(),
                partition: 0,
                start_kind: 1,
                start_value: 0,
                credit: 4_194_304,
            },
        ),
        sample(
            "subscribe",
            "subscribe from an offset",
            "Subscribe",
            &Subscribe {
                correlation: 20,
                subscription: 2,
                topic: "orders".into(),
                partition: 2,
                start_kind: 0,
                start_value: 41,
                credit: 1_048_576,
            },
        ),
        sample(
            "subscribe",
            "subscribe answered",
            "SubscribeResponse",
            &SubscribeResponse {
                correlation: 19,
                error: ErrorCode::NONE,
                subscription: 1,
                offset: 0,
                high_watermark: 2,
                message: String::new(),
            },
        ),
        sample(
            "subscribe",
            "push of a batch",
            "Push",
            &Push {
                subscription: 1,
                error: ErrorCode::NONE,
                high_watermark: 2,
                log_start_offset: 0,
                next_offset: 2,
                records: batch.clone(),
            },
        ),
        sample(
            "subscribe",
            "push ending a subscription",
            "Push",
            &Push {
                subscription: 1,
                error: ErrorCode::NOT_LEADER,
                high_watermark: 2,
                log_start_offset: 0,
                next_offset: 2,
                records: Bytes::new(),
            },
        ),
        sample(
            "subscribe",
            "credit",
            "Credit",
            &Credit {
                subscription: 1,
                bytes: 1_048_576,
            },
        ),
        sample(
            "subscribe",
            "unsubscribe",
            "Unsubscribe",
            &Unsubscribe {
                correlation: 21,
                subscription: 1,
            },
        ),
        sample(
            "subscribe",
            "unsubscribe answered",
            "UnsubscribeResponse",
            &UnsubscribeResponse {
                correlation: 21,
                error: ErrorCode::UNKNOWN_SUBSCRIPTION,
            },
        ),
        sample(
            "txn",
            "find txn coordinator",
            "FindTxnCoordinator",
            &FindTxnCoordinator {
                correlation: 30,
                transactional_id: "orders-1".into(),
            },
        ),
        sample(
            "txn",
            "find txn coordinator answered",
            "FindTxnCoordinatorResponse",
            &FindTxnCoordinatorResponse {
                correlation: 30,
                error: ErrorCode::NONE,
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9091,
            },
        ),
        sample(
            "txn",
            "init txn",
            "InitTxn",
            &InitTxn {
                correlation: 31,
                transactional_id: "orders-1".into(),
                timeout_ms: 60_000,
            },
        ),
        sample(
            "txn",
            "init txn answered",
            "InitTxnResponse",
            &InitTxnResponse {
                correlation: 31,
                error: ErrorCode::NONE,
                producer_id: 4000,
                producer_epoch: 3,
                message: String::new(),
            },
        ),
        sample(
            "txn",
            "add txn partitions",
            "AddTxnPartitions",
            &AddTxnPartitions {
                correlation: 32,
                producer: producer(),
                topics: vec![("orders".into(), vec![0, 2])],
            },
        ),
        sample(
            "txn",
            "add txn partitions answered",
            "AddTxnPartitionsResponse",
            &AddTxnPartitionsResponse(TxnResponse {
                correlation: 32,
                error: ErrorCode::CONCURRENT_TRANSACTIONS,
                message: "the previous transaction is completing".into(),
            }),
        ),
        sample(
            "txn",
            "add txn offsets",
            "AddTxnOffsets",
            &AddTxnOffsets {
                correlation: 33,
                producer: producer(),
                group: "readers".into(),
            },
        ),
        sample(
            "txn",
            "add txn offsets answered",
            "AddTxnOffsetsResponse",
            &AddTxnOffsetsResponse(TxnResponse {
                correlation: 33,
                error: ErrorCode::NONE,
                message: String::new(),
            }),
        ),
        sample(
            "txn",
            "txn offset commit",
            "TxnOffsetCommit",
            &TxnOffsetCommit {
                correlation: 34,
                producer: producer(),
                group: "readers".into(),
                generation: -1,
                member_id: String::new(),
                offsets: vec![("orders".into(), 0, 43)],
            },
        ),
        sample(
            "txn",
            "txn offset commit answered",
            "TxnOffsetCommitResponse",
            &TxnOffsetCommitResponse(TxnResponse {
                correlation: 34,
                error: ErrorCode::NONE,
                message: String::new(),
            }),
        ),
        sample(
            "txn",
            "end txn: commit",
            "EndTxn",
            &EndTxn {
                correlation: 35,
                producer: producer(),
                commit: true,
            },
        ),
        sample(
            "txn",
            "end txn: abort",
            "EndTxn",
            &EndTxn {
                correlation: 35,
                producer: producer(),
                commit: false,
            },
        ),
        sample(
            "txn",
            "end txn answered",
            "EndTxnResponse",
            &EndTxnResponse(TxnResponse {
                correlation: 35,
                error: ErrorCode::PRODUCER_FENCED,
                message: "a newer epoch exists".into(),
            }),
        ),
        sample(
            "txn",
            "txn produce",
            "TxnProduce",
            &TxnProduce {
                transactional_id: "orders-1".into(),
                produce: Produce {
                    correlation: 36,
                    topics: vec![ProduceTopic {
                        name: "orders".into(),
                        partitions: vec![ProducePartition {
                            partition: 0,
                            batch: encode_batch(
                                &[Record::new("in a transaction")
                                    .with_timestamp(1_700_000_000_000)],
                                &BatchOptions {
                                    producer: Some(ProducerIdentity {
                                        producer_id: 4000,
                                        producer_epoch: 3,
                                        base_sequence: 0,
                                    }),
                                    transactional: true,
                                    ..BatchOptions::default()
                                },
                            )
                            .expect("the transactional batch encodes"),
                        }],
                    }],
                    ..produce.clone()
                },
            },
        ),
        sample(
            "txn",
            "txn produce answered",
            "TxnProduceResponse",
            &TxnProduceResponse(ProduceResponse {
                correlation: 36,
                ..produce_response.clone()
            }),
        ),
        sample(
            "txn",
            "fetch read_committed",
            "FetchIsolated",
            &FetchIsolated {
                correlation: 37,
                isolation: Isolation::ReadCommitted,
                max_wait_ms: 500,
                min_bytes: 1,
                max_bytes: 52_428_800,
                topics: fetch_topics,
            },
        ),
        sample(
            "txn",
            "fetch read_committed answered",
            "FetchIsolatedResponse",
            &FetchIsolatedResponse {
                correlation: 37,
                topics: vec![TopicFetchedIsolated {
                    name: "orders".into(),
                    partitions: vec![PartitionFetchedIsolated {
                        partition: 0,
                        error: ErrorCode::NONE,
                        high_watermark: 5,
                        last_stable_offset: 2,
                        log_start_offset: 0,
                        aborted: vec![AbortedTxn {
                            producer_id: 4000,
                            first_offset: 2,
                        }],
                        records: batch,
                    }],
                }],
            },
        ),
    ];
    // one error frame per code
    for code in ErrorCode::ALL {
        s.push(sample(
            "errors",
            &format!("error frame {}", code.name()),
            "ErrorFrame",
            &ErrorFrame {
                correlation: u32::from(code.0) + 100,
                error: *code,
                message: code.description().into(),
            },
        ));
    }
    s
}

/// A frame a decoder must refuse: its bytes and the class of the refusal.
struct Refused {
    name: String,
    frame: Vec<u8>,
    max_body: u32,
    error: String,
}

/// Rewrites the length in a frame's header to what its body holds.
fn with_length(mut frame: Vec<u8>) -> Vec<u8> {
    let len = u32::try_from(frame.len() - HEADER_LEN).expect("test frames are small");
    frame[3..7].copy_from_slice(&len.to_be_bytes());
    frame
}

fn frame_of(op_code: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![
        crate::frame::MAGIC,
        crate::frame::VERSION,
        op_code,
        0,
        0,
        0,
        0,
    ];
    f.extend_from_slice(body);
    with_length(f)
}

/// The refusal the codecs give for `frame` (it must be one).
fn refused(name: impl Into<String>, frame: Vec<u8>, max_body: u32) -> Refused {
    let name = name.into();
    let error = match decode_frame(&frame, max_body) {
        Ok(_) => panic!("{name}: the codecs accept this frame"),
        Err(class) => class,
    };
    Refused {
        name,
        frame,
        max_body,
        error,
    }
}

fn malformed(samples: &[Sample]) -> Vec<Refused> {
    let mut out = Vec::new();
    // Every message cut short by one byte, and with one byte too many,
    // its header's length telling the truth.
    for s in samples.iter().filter(|s| s.file != "errors") {
        let mut cut = s.frame.to_vec();
        cut.pop();
        out.push(refused(
            format!("{}: body cut by one byte", s.name),
            with_length(cut),
            MAX_BODY,
        ));
        let mut long = s.frame.to_vec();
        long.push(0);
        out.push(refused(
            format!("{}: one byte after the last field", s.name),
            with_length(long),
            MAX_BODY,
        ));
    }
    let hello = Hello {
        correlation: 1,
        min_version: 1,
        max_version: 1,
        client_id: "c".into(),
        ..Hello::default()
    }
    .to_frame()
    .to_vec();
    out.push(refused("empty input", vec![], MAX_BODY));
    out.push(refused("header cut short", hello[..5].to_vec(), MAX_BODY));
    let mut bad = hello.clone();
    bad[0] = 0x4B;
    out.push(refused("wrong magic", bad, MAX_BODY));
    let mut bad = hello.clone();
    bad[1] = 2;
    out.push(refused("framing version 2", bad, MAX_BODY));
    out.push(refused(
        "body over the reader's limit (refused before reading it)",
        hello.clone(),
        8,
    ));
    let mut bad = hello.clone();
    bad[3..7].copy_from_slice(&1000u32.to_be_bytes());
    out.push(refused(
        "header length past the end of the input",
        bad,
        MAX_BODY,
    ));
    let mut bad = hello.clone();
    bad[3..7].copy_from_slice(&5u32.to_be_bytes());
    out.push(refused(
        "header length shorter than the body (bytes left after the frame)",
        bad,
        MAX_BODY,
    ));
    for code in [0x00, 0x0D, 0x1D, 0x20, 0x7E, 0x80, 0x8E, 0x9D, 0xFF] {
        out.push(refused(
            format!("unknown operation {code:#04x}"),
            frame_of(code, &[0, 0, 0, 1]),
            MAX_BODY,
        ));
    }
    // lying lengths and counts
    let mut body = BytesMut::new();
    body.put_u32(1);
    body.put_u16(1);
    body.put_u16(1);
    body.put_u16(200);
    body.put_slice(b"short");
    out.push(refused(
        "hello: client id length past the body",
        frame_of(op::HELLO, &body),
        MAX_BODY,
    ));
    let mut body = BytesMut::new();
    body.put_u32(1);
    body.put_u16(1);
    body.put_u16(1);
    body.put_u16(2);
    body.put_slice(&[0xC3, 0x28]);
    body.put_u16(0);
    body.put_u32(0);
    out.push(refused(
        "hello: client id not UTF-8",
        frame_of(op::HELLO, &body),
        MAX_BODY,
    ));
    let mut body = BytesMut::new();
    body.put_u32(1);
    body.put_u16(1);
    body.put_u16(1);
    body.put_u16(0);
    body.put_u16(0);
    body.put_u32(0xFFFF_FFF0);
    out.push(refused(
        "hello: auth bytes length past the body",
        frame_of(op::HELLO, &body),
        MAX_BODY,
    ));
    let mut body = BytesMut::new();
    body.put_u32(7);
    body.put_i8(-1);
    body.put_u32(1000);
    body.put_u32(u32::MAX);
    body.put_slice(&[0; 16]);
    out.push(refused(
        "produce: topic count of 4294967295 in 16 bytes",
        frame_of(op::PRODUCE, &body),
        MAX_BODY,
    ));
    let mut body = BytesMut::new();
    body.put_u32(7);
    body.put_i8(-1);
    body.put_u32(1000);
    body.put_u32(1);
    body.put_u16(1);
    body.put_slice(b"t");
    body.put_u32(2);
    body.put_u32(0);
    body.put_u32(0);
    out.push(refused(
        "produce: two partitions in room for one (8 bytes each at least)",
        frame_of(op::PRODUCE, &body),
        MAX_BODY,
    ));
    let mut body = BytesMut::new();
    body.put_u32(11);
    body.put_u32(1);
    body.put_u16(1);
    body.put_slice(b"t");
    body.put_u32(1);
    body.put_u32(0);
    body.put_u16(0);
    body.put_i64(0);
    body.put_i64(0);
    body.put_u32(64);
    body.put_slice(&[0; 8]);
    out.push(refused(
        "fetch answer: records length past the body",
        frame_of(op::FETCH | RESPONSE, &body),
        MAX_BODY,
    ));
    let mut body = BytesMut::new();
    body.put_u32(4);
    body.put_u32(3);
    body.put_u32(1);
    body.put_u16(0);
    body.put_u16(0);
    body.put_u16(0);
    out.push(refused(
        "metadata answer: three nodes in room for less than one",
        frame_of(op::METADATA | RESPONSE, &body),
        MAX_BODY,
    ));
    let mut frame = EndTxn {
        correlation: 35,
        producer: producer(),
        commit: true,
    }
    .to_frame()
    .to_vec();
    if let Some(last) = frame.last_mut() {
        *last = 2;
    }
    out.push(refused("end txn: commit flag 2", frame, MAX_BODY));
    let mut frame = FetchIsolated {
        correlation: 37,
        isolation: Isolation::ReadCommitted,
        ..FetchIsolated::default()
    }
    .to_frame()
    .to_vec();
    frame[HEADER_LEN + 4] = 7;
    out.push(refused(
        "fetch isolated: isolation level 7",
        frame,
        MAX_BODY,
    ));
    out
}

/// Frames of a conversation: who sends it, and the message.
fn step(from: &str, frame: Bytes, message: &'static str, value: Value) -> Value {
    json!({
        "from": from,
        "message": message,
        "frame": to_hex(&frame),
        "value": value,
    })
}

fn client<M: Message + serde::Serialize>(message: &'static str, m: &M) -> Value {
    step(
        "client",
        m.to_frame(),
        message,
        serde_json::to_value(m).expect("serializes"),
    )
}

fn server<M: Message + serde::Serialize>(message: &'static str, m: &M) -> Value {
    step(
        "server",
        m.to_frame(),
        message,
        serde_json::to_value(m).expect("serializes"),
    )
}

fn conversations() -> Value {
    let batch = sample_batch();
    let hello = Hello {
        correlation: 0,
        min_version: 1,
        max_version: 1,
        client_id: "conformance".into(),
        ..Hello::default()
    };
    let hello_ok = HelloResponse {
        correlation: 0,
        error: ErrorCode::NONE,
        version: 1,
        node_id: 1,
        max_frame_bytes: 104_857_600,
        server: "aerostream".into(),
    };
    let login = Hello {
        auth_mechanism: "PLAIN".into(),
        auth_bytes: Bytes::from_static(b"\0alice\0alice-secret"),
        ..hello.clone()
    };
    let produce = Produce {
        correlation: 1,
        acks: -1,
        timeout_ms: 30_000,
        topics: vec![ProduceTopic {
            name: "orders".into(),
            partitions: vec![ProducePartition {
                partition: 0,
                batch: batch.clone(),
            }],
        }],
    };
    let produced = ProduceResponse {
        correlation: 1,
        topics: vec![TopicProduced {
            name: "orders".into(),
            partitions: vec![PartitionProduced {
                partition: 0,
                error: ErrorCode::NONE,
                base_offset: 0,
                log_append_time_ms: -1,
                log_start_offset: 0,
                message: String::new(),
            }],
        }],
    };
    let fetch = Fetch {
        correlation: 2,
        max_wait_ms: 100,
        min_bytes: 1,
        max_bytes: 1_048_576,
        topics: vec![FetchTopic {
            name: "orders".into(),
            partitions: vec![FetchPartition {
                partition: 0,
                offset: 0,
                max_bytes: 1_048_576,
            }],
        }],
    };
    let fetched = FetchResponse {
        correlation: 2,
        topics: vec![TopicFetched {
            name: "orders".into(),
            partitions: vec![PartitionFetched {
                partition: 0,
                error: ErrorCode::NONE,
                high_watermark: 2,
                log_start_offset: 0,
                records: batch.clone(),
            }],
        }],
    };
    json!({
        "conversations": [
            {
                "name": "hello, login with PLAIN, produce, fetch",
                "description": "A client logs in within its hello, writes a batch of two records to orders-0 and reads it back.",
                "steps": [
                    client("Hello", &login),
                    server("HelloResponse", &hello_ok),
                    client("Produce", &produce),
                    server("ProduceResponse", &produced),
                    client("Fetch", &fetch),
                    server("FetchResponse", &fetched),
                ],
            },
            {
                "name": "SCRAM login with Authenticate",
                "description": "A hello without mechanism, then SCRAM-SHA-256's two messages (RFC 5802's example nonce); the second answer completes the login.",
                "steps": [
                    client("Hello", &hello),
                    server("HelloResponse", &hello_ok),
                    client("Authenticate", &Authenticate {
                        correlation: 1,
                        mechanism: "SCRAM-SHA-256".into(),
                        auth_bytes: Bytes::from_static(b"n,,n=alice,r=rOprNGfwEbeRWgbNEkqO"),
                    }),
                    server("AuthenticateResponse", &AuthenticateResponse {
                        correlation: 1,
                        error: ErrorCode::NONE,
                        auth_bytes: Bytes::from_static(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"),
                        complete: false,
                        session_lifetime_ms: 0,
                    }),
                    client("Authenticate", &Authenticate {
                        correlation: 2,
                        mechanism: "SCRAM-SHA-256".into(),
                        auth_bytes: Bytes::from_static(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
                    }),
                    server("AuthenticateResponse", &AuthenticateResponse {
                        correlation: 2,
                        error: ErrorCode::NONE,
                        auth_bytes: Bytes::from_static(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
                        complete: true,
                        session_lifetime_ms: 0,
                    }),
                ],
            },
            {
                "name": "a request before the hello",
                "description": "The first frame is not a hello: the server answers with an error frame HELLO_REQUIRED and closes the connection.",
                "steps": [
                    client("Ping", &Ping { correlation: 5, nonce: 1 }),
                    server("ErrorFrame", &ErrorFrame {
                        correlation: 5,
                        error: ErrorCode::HELLO_REQUIRED,
                        message: "the first frame must be a hello".into(),
                    }),
                ],
            },
            {
                "name": "pipelined requests answered out of order",
                "description": "Responses repeat their request's correlation id and may come in any order.",
                "steps": [
                    client("Hello", &hello),
                    server("HelloResponse", &hello_ok),
                    client("Fetch", &Fetch { correlation: 1, max_wait_ms: 1000, ..fetch.clone() }),
                    client("Ping", &Ping { correlation: 2, nonce: 77 }),
                    server("Pong", &Pong { correlation: 2, nonce: 77 }),
                    server("FetchResponse", &FetchResponse { correlation: 1, ..fetched.clone() }),
                ],
            },
            {
                "name": "subscription with credit",
                "description": "Subscribe with 1 MiB of credit; each push spends its records' length; Credit grants more and is never answered; Unsubscribe ends it.",
                "steps": [
                    client("Hello", &hello),
                    server("HelloResponse", &hello_ok),
                    client("Subscribe", &Subscribe {
                        correlation: 1,
                        subscription: 1,
                        topic: "orders".into(),
                        partition: 0,
                        start_kind: 1,
                        start_value: 0,
                        credit: 1_048_576,
                    }),
                    server("SubscribeResponse", &SubscribeResponse {
                        correlation: 1,
                        error: ErrorCode::NONE,
                        subscription: 1,
                        offset: 0,
                        high_watermark: 2,
                        message: String::new(),
                    }),
                    server("Push", &Push {
                        subscription: 1,
                        error: ErrorCode::NONE,
                        high_watermark: 2,
                        log_start_offset: 0,
                        next_offset: 2,
                        records: batch,
                    }),
                    client("Credit", &Credit { subscription: 1, bytes: 65_536 }),
                    client("Unsubscribe", &Unsubscribe { correlation: 2, subscription: 1 }),
                    server("UnsubscribeResponse", &UnsubscribeResponse { correlation: 2, error: ErrorCode::NONE }),
                ],
            },
            {
                "name": "consumer group: find coordinator, join, heartbeat, commit, leave",
                "description": "A member joins with an empty member id, receives its id, generation and partitions, and commits as that member.",
                "steps": [
                    client("Hello", &hello),
                    server("HelloResponse", &hello_ok),
                    client("FindCoordinator", &FindCoordinator { correlation: 1, group: "readers".into() }),
                    server("FindCoordinatorResponse", &FindCoordinatorResponse {
                        correlation: 1, error: ErrorCode::NONE, node_id: 1, host: "127.0.0.1".into(), port: 9091,
                    }),
                    client("JoinGroup", &JoinGroup {
                        correlation: 2, group: "readers".into(), member_id: String::new(),
                        topics: vec!["orders".into()], session_timeout_ms: 10_000, rebalance_timeout_ms: 30_000,
                    }),
                    server("JoinGroupResponse", &JoinGroupResponse {
                        correlation: 2, error: ErrorCode::NONE, generation: 1, member_id: "aero-1".into(),
                        assignment: vec![TopicAssignment { topic: "orders".into(), partitions: vec![0] }],
                    }),
                    client("Heartbeat", &Heartbeat {
                        correlation: 3, group: "readers".into(), member_id: "aero-1".into(), generation: 1,
                    }),
                    server("HeartbeatResponse", &HeartbeatResponse(GroupResponse { correlation: 3, error: ErrorCode::NONE })),
                    client("CommitOffsets", &CommitOffsets {
                        correlation: 4, group: "readers".into(),
                        offsets: vec![CommittedOffset { topic: "orders".into(), partition: 0, offset: 2, metadata: String::new() }],
                        generation: 1, member_id: "aero-1".into(),
                    }),
                    server("CommitOffsetsResponse", &CommitOffsetsResponse {
                        correlation: 4, partitions: vec![("orders".into(), 0, ErrorCode::NONE)],
                    }),
                    client("LeaveGroup", &LeaveGroup { correlation: 5, group: "readers".into(), member_id: "aero-1".into() }),
                    server("LeaveGroupResponse", &LeaveGroupResponse(GroupResponse { correlation: 5, error: ErrorCode::NONE })),
                ],
            },
        ]
    })
}

fn error_codes() -> Value {
    let codes: Vec<Value> = ErrorCode::ALL
        .iter()
        .map(|c| {
            json!({
                "code": c.0,
                "name": c.name(),
                "retriable": c.is_retriable(),
                "description": c.description(),
            })
        })
        .collect();
    json!({ "error_codes": codes })
}

fn partitioner() -> Value {
    let keys: [&[u8]; 9] = [
        b"",
        b"a",
        b"ab",
        b"abc",
        b"foobar",
        b"user-42",
        b"21",
        "clé ✓".as_bytes(),
        b"\x00\xff\x10\x80\x7f",
    ];
    let entries: Vec<Value> = keys
        .iter()
        .map(|k| {
            json!({
                "key": to_hex(k),
                "murmur2": murmur2(k),
                "partitions": {
                    "1": partition_for_key(k, 1),
                    "3": partition_for_key(k, 3),
                    "12": partition_for_key(k, 12),
                    "100": partition_for_key(k, 100),
                },
            })
        })
        .collect();
    json!({
        "description": "Kafka's murmur2 partitioner: murmur2(key) as a signed 32-bit integer, and the partition (murmur2(key) & 0x7fffffff) % count for several counts.",
        "keys": entries,
    })
}

fn record_batches() -> Value {
    let batch = |name: &str, records: &[Record], options: BatchOptions| -> Value {
        let bytes = encode_batch(records, &options).expect("sample batches encode");
        let recs: Vec<Value> = records
            .iter()
            .map(|r| {
                json!({
                    "key": r.key.as_ref().map(|k| to_hex(k)),
                    "value": r.value.as_ref().map(|v| to_hex(v)),
                    "headers": r.headers.iter().map(|(k, v)| json!([k, v.as_ref().map(|v| to_hex(v))])).collect::<Vec<_>>(),
                    "timestamp": r.timestamp,
                })
            })
            .collect();
        let producer = options.producer.map(|p| {
            json!({
                "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch,
                "base_sequence": p.base_sequence,
            })
        });
        json!({
            "name": name,
            "records": recs,
            "producer": producer,
            "transactional": options.transactional,
            "batch": to_hex(&bytes),
        })
    };
    let base = BatchOptions {
        now_ms: 1_700_000_000_000,
        ..BatchOptions::default()
    };
    json!({
        "description": "Kafka RecordBatch v2 (magic 2, uncompressed, base offset 0) as a Produce carries it; null key/value is absent (length -1). Every record has its timestamp.",
        "batches": [
            batch("two records, one keyed with a header", &[
                Record::new("hello").with_key("user-42").with_header("trace", "abc").with_timestamp(1_700_000_000_000),
                Record::new("world").with_timestamp(1_700_000_000_005),
            ], base),
            batch("a tombstone and an empty value", &[
                Record { key: Some(Bytes::from_static(b"k")), value: None, headers: vec![("h".into(), None)], timestamp: Some(1_700_000_000_000) },
                Record::new("").with_timestamp(1_699_999_999_000),
            ], base),
            batch("idempotent producer", &[
                Record::new("one").with_timestamp(1_700_000_000_000),
                Record::new("two").with_timestamp(1_700_000_000_001),
                Record::new("three").with_timestamp(1_700_000_000_002),
            ], BatchOptions { producer: Some(ProducerIdentity { producer_id: 4000, producer_epoch: 2, base_sequence: 17 }), ..base }),
            batch("transactional", &[
                Record::new("in a transaction").with_timestamp(1_700_000_000_000),
            ], BatchOptions { producer: Some(ProducerIdentity { producer_id: 4000, producer_epoch: 3, base_sequence: 0 }), transactional: true, ..base }),
        ],
    })
}

/// Writes every file of the corpus, pretty-printed, ending in a newline.
fn write(name: &str, value: &Value) {
    let dir = corpus_dir();
    fs::create_dir_all(&dir).expect("create the corpus folder");
    let mut text = serde_json::to_string_pretty(value).expect("serializes");
    text.push('\n');
    fs::write(dir.join(name), text).expect("write a corpus file");
}

/// The whole corpus, file by file.
fn corpus() -> BTreeMap<String, Value> {
    let samples = samples();
    let mut files: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for s in &samples {
        files
            .entry(format!("{}.json", s.file))
            .or_default()
            .push(json!({
                "name": s.name,
                "message": s.message,
                "op": s.frame[2],
                "frame": to_hex(&s.frame),
                "value": s.value,
            }));
    }
    let mut out: BTreeMap<String, Value> = files
        .into_iter()
        .map(|(k, v)| (k, json!({ "vectors": v })))
        .collect();
    let refused: Vec<Value> = malformed(&samples)
        .into_iter()
        .map(|r| {
            json!({
                "name": r.name,
                "frame": to_hex(&r.frame),
                "max_body": r.max_body,
                "error": r.error,
            })
        })
        .collect();
    out.insert("malformed.json".into(), json!({ "vectors": refused }));
    out.insert("conversations.json".into(), conversations());
    out.insert("error_codes.json".into(), error_codes());
    out.insert("partitioner.json".into(), partitioner());
    out.insert("record_batches.json".into(), record_batches());
    out
}

#[test]
#[ignore = "writes sdk/vectors/; run it after changing the protocol"]
fn write_vectors() {
    for (name, value) in corpus() {
        write(&name, &value);
    }
}

fn read(name: &str) -> Value {
    let path = corpus_dir().join(name);
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} missing in {v}"))
}

/// One valid message: the frame decodes to the value, the value encodes
/// to the frame byte for byte, and the op matches the message.
fn check_message(file: &str, v: &Value) {
    let name = str_of(v, "name");
    let message = str_of(v, "message");
    let frame = from_hex(str_of(v, "frame")).expect("frames are hex");
    let (decoded_as, value) =
        decode_frame(&frame, MAX_BODY).unwrap_or_else(|e| panic!("{file} {name}: refused: {e}"));
    assert_eq!(
        decoded_as, message,
        "{file} {name}: the op names another message"
    );
    if let Some(op) = v.get("op") {
        assert_eq!(
            op,
            &json!(frame[2]),
            "{file} {name}: op is not the header's"
        );
    }
    assert_eq!(value, v["value"], "{file} {name}: decodes to another value");
    let encoded = encode_named(message, &v["value"])
        .unwrap_or_else(|e| panic!("{file} {name}: the value does not encode: {e}"));
    assert_eq!(
        to_hex(&encoded),
        to_hex(&frame),
        "{file} {name}: the value encodes to other bytes"
    );
}

#[test]
fn the_corpus_holds() {
    let mut seen_messages = std::collections::BTreeSet::new();
    let mut count = 0;
    for file in [
        "connection.json",
        "metadata.json",
        "produce.json",
        "fetch.json",
        "groups.json",
        "subscribe.json",
        "txn.json",
        "errors.json",
    ] {
        let doc = read(file);
        let vectors = doc["vectors"].as_array().expect("vectors is a list");
        assert!(!vectors.is_empty(), "{file} has no vector");
        for v in vectors {
            check_message(file, v);
            seen_messages.insert(str_of(v, "message").to_string());
            count += 1;
        }
    }
    // every message of the protocol has a vector
    macro_rules! covered {
        ($name:literal, $ty:ty) => {
            assert!(seen_messages.contains($name), "no vector for {}", $name);
        };
    }
    for_each_message!(covered);
    assert!(count > 60, "only {count} vectors");

    // every refused frame is refused, for the stated reason
    let doc = read("malformed.json");
    let refused = doc["vectors"].as_array().expect("vectors is a list");
    assert!(refused.len() > 100);
    for v in refused {
        let name = str_of(v, "name");
        let frame = from_hex(str_of(v, "frame")).expect("frames are hex");
        let max_body = v["max_body"]
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .expect("max_body");
        match decode_frame(&frame, max_body) {
            Ok((m, _)) => panic!("malformed {name}: accepted as {m}"),
            Err(class) => assert_eq!(class, str_of(v, "error"), "malformed {name}"),
        }
    }

    // conversations: every frame as its message, correlation ids answered
    let doc = read("conversations.json");
    for c in doc["conversations"].as_array().expect("a list") {
        let mut asked = std::collections::BTreeSet::new();
        for s in c["steps"].as_array().expect("steps") {
            check_message(
                "conversations.json",
                &json!({
                    "name": c["name"], "message": s["message"], "frame": s["frame"], "value": s["value"],
                }),
            );
            let frame = from_hex(str_of(s, "frame")).expect("hex");
            let corr = correlation_of(&frame[HEADER_LEN..]);
            match (str_of(s, "from"), str_of(s, "message")) {
                ("client", "Credit") | ("server", "Push") => {}
                ("client", _) => {
                    asked.insert(corr);
                }
                ("server", _) => assert!(
                    asked.remove(&corr),
                    "{}: an answer to a request never made",
                    c["name"]
                ),
                (other, _) => panic!("unknown sender {other}"),
            }
        }
    }

    // the error-code table is this build's
    let doc = read("error_codes.json");
    assert_eq!(
        doc,
        error_codes(),
        "error_codes.json differs from ErrorCode"
    );
    assert_eq!(read("partitioner.json"), partitioner());
    assert_eq!(read("record_batches.json"), record_batches());
}

/// The corpus files are exactly what the generator writes: nobody edited
/// one by hand, and no protocol change forgot to regenerate them.
#[test]
fn the_corpus_is_what_the_codecs_write() {
    for (name, value) in corpus() {
        assert_eq!(
            read(&name),
            value,
            "sdk/vectors/{name} is stale: regenerate it (see sdk/vectors/README.md)"
        );
    }
}
