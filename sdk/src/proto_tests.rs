use super::*;
use crate::frame::{FrameHeader, HEADER_LEN};
use crate::wire::{DecodeError, WireWrite};
use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

/// Encodes, checks the frame header, decodes back, and checks that every
/// shorter body is refused with an error rather than a panic or a wrong
/// message.
fn round_trip<M: Message + PartialEq + std::fmt::Debug>(m: M) {
    let frame = m.to_frame();
    let parts = m.to_frame_parts();
    assert_eq!(parts.total, frame.len());
    assert_eq!(parts.parts.concat(), frame[..], "the parts are the frame");
    let header = FrameHeader::decode(&frame, u32::MAX).expect("header");
    assert_eq!(header.op, M::OP);
    assert_eq!(header.len as usize, frame.len() - HEADER_LEN);
    let body = frame.slice(HEADER_LEN..);
    assert_eq!(M::decode_body(body.clone()).as_ref(), Ok(&m));
    for cut in 0..body.len() {
        assert!(
            M::decode_body(body.slice(..cut)).is_err(),
            "a body cut at {cut} of {} decoded",
            body.len()
        );
    }
    let mut longer = BytesMut::from(&body[..]);
    longer.put_u8(0);
    assert_eq!(
        M::decode_body(longer.freeze()),
        Err(DecodeError::Trailing(1))
    );
}

#[test]
fn every_message_round_trips_and_refuses_every_truncation() {
    round_trip(Hello {
        correlation: 1,
        min_version: 1,
        max_version: 3,
        client_id: "app".into(),
        auth_mechanism: String::new(),
        auth_bytes: Bytes::from_static(b"tok"),
    });
    round_trip(HelloResponse {
        correlation: 1,
        error: ErrorCode::NONE,
        version: 1,
        node_id: 7,
        max_frame_bytes: 1 << 20,
        server: "aerostream 0.1.0".into(),
    });
    round_trip(Authenticate {
        correlation: 2,
        mechanism: "SCRAM-SHA-512".into(),
        auth_bytes: Bytes::from_static(b"n,,n=alice,r=abc"),
    });
    round_trip(AuthenticateResponse {
        correlation: 2,
        error: ErrorCode::NONE,
        auth_bytes: Bytes::from_static(b"r=abcdef,s=c2FsdA==,i=4096"),
        complete: true,
        session_lifetime_ms: 60_000,
    });
    round_trip(Ping {
        correlation: 2,
        nonce: 99,
    });
    round_trip(Pong {
        correlation: 2,
        nonce: 99,
    });
    round_trip(ErrorFrame {
        correlation: 0,
        error: ErrorCode::BAD_FRAME,
        message: "bad magic".into(),
    });
    round_trip(Metadata {
        correlation: 3,
        topics: vec!["a".into(), "b".into()],
    });
    round_trip(MetadataResponse {
        correlation: 3,
        nodes: vec![Node {
            id: 1,
            host: "h".into(),
            port: 9091,
            rack: "az1".into(),
        }],
        topics: vec![TopicMetadata {
            name: "a".into(),
            error: ErrorCode::NONE,
            partitions: vec![PartitionMetadata {
                index: 0,
                leader: 1,
                leader_epoch: 4,
                replicas: vec![1, 2, 3],
                in_sync: vec![1, 3],
            }],
        }],
    });
    round_trip(CreateTopic {
        correlation: 4,
        name: "t".into(),
        partitions: 3,
        replication_factor: -1,
        configs: vec![("retention.ms".into(), "1000".into())],
    });
    round_trip(CreateTopicResponse(TopicResponse {
        correlation: 4,
        error: ErrorCode::TOPIC_ALREADY_EXISTS,
        message: "exists".into(),
    }));
    round_trip(DeleteTopic {
        correlation: 5,
        name: "t".into(),
    });
    round_trip(DeleteTopicResponse(TopicResponse::default()));
    round_trip(InitProducer { correlation: 6 });
    round_trip(InitProducerResponse {
        correlation: 6,
        error: ErrorCode::NONE,
        producer_id: 1000,
        producer_epoch: 0,
    });
    round_trip(Produce {
        correlation: 7,
        acks: -1,
        timeout_ms: 30_000,
        topics: vec![ProduceTopic {
            name: "t".into(),
            partitions: vec![
                ProducePartition {
                    partition: 0,
                    batch: Bytes::from_static(b"batch0"),
                },
                ProducePartition {
                    partition: 2,
                    batch: Bytes::from_static(b"batch2"),
                },
            ],
        }],
    });
    round_trip(ProduceResponse {
        correlation: 7,
        topics: vec![TopicProduced {
            name: "t".into(),
            partitions: vec![PartitionProduced {
                partition: 0,
                error: ErrorCode::NONE,
                base_offset: 42,
                log_append_time_ms: -1,
                log_start_offset: 0,
                message: String::new(),
            }],
        }],
    });
    round_trip(Fetch {
        correlation: 8,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            name: "t".into(),
            partitions: vec![FetchPartition {
                partition: 1,
                offset: 10,
                max_bytes: 65536,
            }],
        }],
    });
    round_trip(FetchResponse {
        correlation: 8,
        topics: vec![TopicFetched {
            name: "t".into(),
            partitions: vec![PartitionFetched {
                partition: 1,
                error: ErrorCode::NONE,
                high_watermark: 20,
                log_start_offset: 0,
                records: Bytes::from_static(b"records"),
            }],
        }],
    });
    round_trip(ListOffsets {
        correlation: 9,
        partitions: vec![("t".into(), 0, -2), ("t".into(), 1, 1_700_000_000_000)],
    });
    round_trip(ListOffsetsResponse {
        correlation: 9,
        partitions: vec![OffsetFound {
            topic: "t".into(),
            partition: 0,
            error: ErrorCode::NONE,
            offset: 5,
            timestamp: -1,
        }],
    });
    round_trip(CommitOffsets {
        correlation: 10,
        group: "g".into(),
        offsets: vec![CommittedOffset {
            topic: "t".into(),
            partition: 0,
            offset: 5,
            metadata: "m".into(),
        }],
        ..CommitOffsets::default()
    });
    round_trip(CommitOffsets {
        correlation: 10,
        group: "g".into(),
        offsets: vec![],
        generation: 4,
        member_id: "app-1".into(),
    });
    round_trip(CommitOffsetsResponse {
        correlation: 10,
        partitions: vec![("t".into(), 0, ErrorCode::NONE)],
    });
    round_trip(FetchOffsets {
        correlation: 11,
        group: "g".into(),
        partitions: vec![("t".into(), 0)],
    });
    round_trip(FetchOffsetsResponse {
        correlation: 11,
        offsets: vec![(
            CommittedOffset {
                topic: "t".into(),
                partition: 0,
                offset: -1,
                metadata: String::new(),
            },
            ErrorCode::NONE,
        )],
    });
    round_trip(Subscribe {
        correlation: 12,
        subscription: 3,
        topic: "t".into(),
        partition: 1,
        start_kind: 3,
        start_value: 1_700_000_000_000,
        credit: 65536,
    });
    round_trip(SubscribeResponse {
        correlation: 12,
        error: ErrorCode::NONE,
        subscription: 3,
        offset: 42,
        high_watermark: 50,
        message: String::new(),
    });
    round_trip(Push {
        subscription: 3,
        error: ErrorCode::NONE,
        high_watermark: 50,
        log_start_offset: 0,
        next_offset: 45,
        records: Bytes::from_static(b"batches"),
    });
    round_trip(Credit {
        subscription: 3,
        bytes: 4096,
    });
    round_trip(Unsubscribe {
        correlation: 13,
        subscription: 3,
    });
    round_trip(UnsubscribeResponse {
        correlation: 13,
        error: ErrorCode::UNKNOWN_SUBSCRIPTION,
    });
    round_trip(FindCoordinator {
        correlation: 12,
        group: "g".into(),
    });
    round_trip(FindCoordinatorResponse {
        correlation: 12,
        error: ErrorCode::NONE,
        node_id: 2,
        host: "h".into(),
        port: 9091,
    });
    round_trip(JoinGroup {
        correlation: 13,
        group: "g".into(),
        member_id: String::new(),
        topics: vec!["a".into(), "b".into()],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
    });
    round_trip(JoinGroupResponse {
        correlation: 13,
        error: ErrorCode::NONE,
        generation: 3,
        member_id: "app-1".into(),
        assignment: vec![
            TopicAssignment {
                topic: "a".into(),
                partitions: vec![0, 1],
            },
            TopicAssignment {
                topic: "b".into(),
                partitions: vec![],
            },
        ],
    });
    round_trip(Heartbeat {
        correlation: 14,
        group: "g".into(),
        member_id: "app-1".into(),
        generation: 3,
    });
    round_trip(HeartbeatResponse(GroupResponse {
        correlation: 14,
        error: ErrorCode::REBALANCE_IN_PROGRESS,
    }));
    round_trip(LeaveGroup {
        correlation: 15,
        group: "g".into(),
        member_id: "app-1".into(),
    });
    round_trip(LeaveGroupResponse(GroupResponse {
        correlation: 15,
        error: ErrorCode::NONE,
    }));
}

#[test]
fn a_produce_frame_shares_its_large_batches_and_copies_small_ones() {
    let large = Bytes::from(vec![7u8; 64 * 1024]);
    let small = Bytes::from(vec![9u8; 100]);
    let produce = Produce {
        correlation: 5,
        acks: -1,
        timeout_ms: 30_000,
        topics: vec![ProduceTopic {
            name: "t".into(),
            partitions: vec![
                ProducePartition {
                    partition: 0,
                    batch: large.clone(),
                },
                ProducePartition {
                    partition: 1,
                    batch: small.clone(),
                },
            ],
        }],
    };
    let parts = produce.to_frame_parts();
    assert_eq!(parts.parts.concat(), produce.to_frame()[..]);
    assert!(
        parts.parts.iter().any(|p| p.as_ptr() == large.as_ptr()),
        "the large batch is written from its own buffer"
    );
    assert!(parts.parts.iter().all(|p| p.as_ptr() != small.as_ptr()));
    let txn = TxnProduce {
        transactional_id: "tx".into(),
        produce,
    };
    let parts = txn.to_frame_parts();
    assert_eq!(parts.parts.concat(), txn.to_frame()[..]);
    assert!(parts.parts.iter().any(|p| p.as_ptr() == large.as_ptr()));
}

#[test]
fn a_commit_outside_membership_is_the_default() {
    let c = CommitOffsets::default();
    assert_eq!((c.generation, c.member_id.as_str()), (-1, ""));
}

#[test]
fn a_join_answer_counting_more_partitions_than_bytes_is_refused_before_allocating() {
    let mut b = BytesMut::new();
    b.put_u32(1); // correlation
    b.put_u16(0); // error
    b.put_i32(1); // generation
    b.put_string("m");
    b.put_u32(1); // one topic
    b.put_string("t");
    b.put_u32(u32::MAX); // partitions
    assert!(matches!(
        JoinGroupResponse::decode_body(b.freeze()),
        Err(DecodeError::Count { .. })
    ));
}

#[test]
fn the_fetch_response_head_is_what_the_full_encoder_writes() {
    let p = PartitionFetched {
        partition: 3,
        error: ErrorCode::NONE,
        high_watermark: 9,
        log_start_offset: 1,
        records: Bytes::from_static(b"xyz"),
    };
    let mut spliced = BytesMut::new();
    FetchResponse::put_partition_head(&mut spliced, &p, 3);
    spliced.put_slice(b"xyz");
    let mut full = BytesMut::new();
    FetchResponse {
        correlation: 0,
        topics: vec![TopicFetched {
            name: String::new(),
            partitions: vec![p],
        }],
    }
    .encode_body(&mut full);
    assert!(full.ends_with(&spliced));
}

#[test]
fn error_codes_are_numbered_without_gaps_and_named_once() {
    for (i, c) in ErrorCode::ALL.iter().enumerate() {
        assert_eq!(c.0 as usize, i, "{} is out of order", c.name());
    }
    let names: std::collections::HashSet<_> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), ErrorCode::ALL.len());
    assert_eq!(ErrorCode(60000).name(), "UNKNOWN_CODE");
    assert!(!ErrorCode(60000).is_retriable());
}

#[test]
fn acks_and_offset_specs_map_to_their_wire_values_and_back() {
    for a in [Acks::None, Acks::Leader, Acks::All] {
        assert_eq!(Acks::from_wire(a.to_wire()), Some(a));
    }
    assert_eq!(Acks::from_wire(2), None);
    for s in [
        OffsetSpec::Earliest,
        OffsetSpec::Latest,
        OffsetSpec::Timestamp(0),
    ] {
        assert_eq!(OffsetSpec::from_wire(s.to_wire()), Some(s));
    }
    assert_eq!(OffsetSpec::from_wire(-3), None);
}

proptest! {
    #[test]
    fn any_body_for_any_operation_decodes_or_is_refused(op in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Request::decode(op, Bytes::from(body));
    }

    #[test]
    fn produce_requests_round_trip(corr in any::<u32>(), acks in any::<i8>(), names in proptest::collection::vec("[a-z.]{0,12}", 0..4), batch in proptest::collection::vec(any::<u8>(), 0..64)) {
        let m = Produce {
            correlation: corr,
            acks,
            timeout_ms: 1,
            topics: names.into_iter().map(|name| ProduceTopic {
                name,
                partitions: vec![ProducePartition { partition: 0, batch: Bytes::from(batch.clone()) }],
            }).collect(),
        };
        let frame = m.to_frame();
        prop_assert_eq!(Produce::decode_body(frame.slice(HEADER_LEN..)), Ok(m));
    }
}

#[test]
fn every_error_code_is_in_the_protocol_document_with_its_retriability() {
    let doc = include_str!("../../docs/native-protocol.md");
    for c in ErrorCode::ALL {
        let retriable = if c.is_retriable() { "yes" } else { "no" };
        let row = format!("| {} | {} | {} |", c.0, c.name(), retriable);
        assert!(
            doc.contains(&row),
            "docs/native-protocol.md lacks the row {row:?}"
        );
    }
}

#[test]
fn the_worked_join_group_example_is_what_the_encoders_write() {
    let join = JoinGroup {
        correlation: 5,
        group: "billing".into(),
        member_id: String::new(),
        topics: vec!["events".into()],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
    };
    let hex = |b: &[u8]| {
        b.iter()
            .map(|x| format!("{x:02X}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        hex(&join.to_frame()),
        "AE 01 11 00 00 00 23 00 00 00 05 00 07 62 69 6C 6C 69 6E 67 00 00 00 00 00 01 \
         00 06 65 76 65 6E 74 73 00 00 27 10 00 00 75 30"
    );
    let answer = JoinGroupResponse {
        correlation: 5,
        error: ErrorCode::NONE,
        generation: 1,
        member_id: "demo-a1b2-1".into(),
        assignment: vec![TopicAssignment {
            topic: "events".into(),
            partitions: vec![0, 1],
        }],
    };
    assert_eq!(
        hex(&answer.to_frame()),
        "AE 01 91 00 00 00 2F 00 00 00 05 00 00 00 00 00 01 00 0B 64 65 6D 6F 2D 61 31 62 \
         32 2D 31 00 00 00 01 00 06 65 76 65 6E 74 73 00 00 00 02 00 00 00 00 00 00 00 01"
    );
}

#[test]
fn a_push_head_is_what_the_full_encoder_writes_before_the_records() {
    let p = Push {
        subscription: 9,
        error: ErrorCode::NONE,
        high_watermark: 10,
        log_start_offset: 2,
        next_offset: 10,
        records: Bytes::from_static(b"xyz"),
    };
    let mut head = BytesMut::new();
    p.put_head(&mut head, 3);
    assert_eq!(head.len(), Push::HEAD_LEN);
    head.put_slice(b"xyz");
    let frame = p.to_frame();
    assert_eq!(&frame[HEADER_LEN..], &head[..]);
}

#[test]
fn subscription_starts_round_trip_and_bad_kinds_are_refused() {
    for s in [
        Start::Offset(0),
        Start::Offset(7),
        Start::Earliest,
        Start::Latest,
        Start::Timestamp(5),
    ] {
        let (k, v) = s.to_wire();
        assert_eq!(Start::from_wire(k, v), Some(s));
    }
    assert_eq!(Start::from_wire(0, -1), None);
    assert_eq!(Start::from_wire(3, -5), None);
    assert_eq!(Start::from_wire(4, 0), None);
}

#[test]
fn the_transaction_messages_round_trip() {
    let producer = TxnProducer {
        transactional_id: "app-1".into(),
        producer_id: 4_000,
        producer_epoch: 3,
    };
    round_trip(FindTxnCoordinator {
        correlation: 1,
        transactional_id: "app-1".into(),
    });
    round_trip(FindTxnCoordinatorResponse {
        correlation: 1,
        error: ErrorCode::NONE,
        node_id: 2,
        host: "h".into(),
        port: 9091,
    });
    round_trip(InitTxn {
        correlation: 2,
        transactional_id: "app-1".into(),
        timeout_ms: 60_000,
    });
    round_trip(InitTxnResponse {
        correlation: 2,
        error: ErrorCode::CONCURRENT_TRANSACTIONS,
        producer_id: -1,
        producer_epoch: -1,
        message: "later".into(),
    });
    round_trip(AddTxnPartitions {
        correlation: 3,
        producer: producer.clone(),
        topics: vec![("a".into(), vec![0, 2]), ("b".into(), vec![1])],
    });
    round_trip(AddTxnOffsets {
        correlation: 4,
        producer: producer.clone(),
        group: "g".into(),
    });
    round_trip(TxnOffsetCommit {
        correlation: 5,
        producer: producer.clone(),
        group: "g".into(),
        generation: -1,
        member_id: String::new(),
        offsets: vec![("a".into(), 0, 17)],
    });
    round_trip(EndTxn {
        correlation: 6,
        producer: producer.clone(),
        commit: true,
    });
    for response in [
        TxnResponse {
            correlation: 7,
            error: ErrorCode::PRODUCER_FENCED,
            message: "fenced".into(),
        },
        TxnResponse::default(),
    ] {
        round_trip(AddTxnPartitionsResponse(response.clone()));
        round_trip(AddTxnOffsetsResponse(response.clone()));
        round_trip(TxnOffsetCommitResponse(response.clone()));
        round_trip(EndTxnResponse(response));
    }
    round_trip(TxnProduce {
        transactional_id: "app-1".into(),
        produce: Produce {
            correlation: 8,
            acks: -1,
            timeout_ms: 30_000,
            topics: vec![ProduceTopic {
                name: "a".into(),
                partitions: vec![ProducePartition {
                    partition: 0,
                    batch: Bytes::from_static(b"batch"),
                }],
            }],
        },
    });
    round_trip(TxnProduceResponse(ProduceResponse {
        correlation: 8,
        topics: Vec::new(),
    }));
    round_trip(FetchIsolated {
        correlation: 9,
        isolation: Isolation::ReadCommitted,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            name: "a".into(),
            partitions: vec![FetchPartition {
                partition: 0,
                offset: 5,
                max_bytes: 1 << 20,
            }],
        }],
    });
    round_trip(FetchIsolatedResponse {
        correlation: 9,
        topics: vec![TopicFetchedIsolated {
            name: "a".into(),
            partitions: vec![PartitionFetchedIsolated {
                partition: 0,
                error: ErrorCode::NONE,
                high_watermark: 20,
                last_stable_offset: 12,
                log_start_offset: 0,
                aborted: vec![AbortedTxn {
                    producer_id: 4_000,
                    first_offset: 6,
                }],
                records: Bytes::from_static(b"records"),
            }],
        }],
    });
}

#[test]
fn the_smallest_isolated_fetch_partition_is_not_refused_as_too_large_a_count() {
    // 38 bytes: nothing aborted, no records
    round_trip(FetchIsolatedResponse {
        correlation: 1,
        topics: vec![TopicFetchedIsolated {
            name: String::new(),
            partitions: vec![PartitionFetchedIsolated::default()],
        }],
    });
}

#[test]
fn bad_flags_of_the_transaction_messages_are_refused() {
    let mut end = EndTxn::default().to_frame().slice(HEADER_LEN..).to_vec();
    *end.last_mut().expect("a commit byte") = 2;
    assert!(matches!(
        EndTxn::decode_body(Bytes::from(end)),
        Err(DecodeError::Invalid { .. })
    ));
    let mut fetch = FetchIsolated::default()
        .to_frame()
        .slice(HEADER_LEN..)
        .to_vec();
    fetch[4] = 7;
    assert!(matches!(
        FetchIsolated::decode_body(Bytes::from(fetch)),
        Err(DecodeError::Invalid { .. })
    ));
    // a server that predates them answers UNKNOWN_OPERATION: the codes are
    // unknown to a decoder that does not list them
    assert!(matches!(
        Request::decode(0x1D, Bytes::from_static(&[0, 0, 0, 1])),
        Err(DecodeError::UnknownOp(0x1D))
    ));
}
