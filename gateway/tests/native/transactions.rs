//! Transactions of the Rust client against the real gateway: the
//! coordinator, markers and read_committed reads Kafka clients use, so a
//! native transaction is a Kafka transaction to Kafka readers and tools.

use std::time::Duration;

use futures::StreamExt;
use gateway::testing::Logs;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use sdk::{
    Client, ConsumerConfig, Error, ErrorCode, GroupOptions, Isolation, Membership, NewTopic,
    Producer, ProducerConfig, Record, StartAt,
};
use tokio::net::TcpStream;

use crate::common;
use crate::support::start;

fn transactional(id: &str) -> ProducerConfig {
    ProducerConfig {
        linger: Duration::ZERO,
        ..ProducerConfig::default()
    }
    .transactional_id(id)
}

/// Sends `values` to partition 0 of `topic` in one transaction, and
/// commits or aborts it.
async fn transaction(p: &Producer, topic: &str, values: &[&str], commit: bool) {
    p.begin_transaction().unwrap();
    let sends: Vec<_> = values
        .iter()
        .map(|v| p.send_to(topic, 0, Record::new(v.to_string())))
        .collect();
    for s in sends {
        s.await.unwrap();
    }
    if commit {
        p.commit_transaction().await.unwrap();
    } else {
        p.abort_transaction().await.unwrap();
    }
}

/// The values a native consumer of `isolation` reads from partition 0 of
/// `topic`, until it has read `expected` of them (and then a little more,
/// to see nothing else comes).
async fn native_values(
    client: &Client,
    topic: &str,
    isolation: Isolation,
    expected: usize,
) -> Vec<String> {
    let mut consumer = client
        .consumer(
            ConsumerConfig {
                max_wait: Duration::from_millis(100),
                ..ConsumerConfig::default()
            }
            .isolation_level(isolation),
        )
        .unwrap();
    consumer
        .assign(topic, Some(vec![0]), StartAt::Earliest)
        .await
        .unwrap();
    let mut out = Vec::new();
    while out.len() < expected {
        let r = tokio::time::timeout(Duration::from_secs(20), consumer.next())
            .await
            .expect("records come")
            .expect("the consumer goes on")
            .unwrap();
        out.push(String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned());
    }
    // nothing beyond
    if let Ok(Some(Ok(r))) = tokio::time::timeout(Duration::from_millis(500), consumer.next()).await
    {
        panic!("an unexpected record at offset {}", r.offset);
    }
    out
}

/// A Kafka read_committed Fetch of partition 0 of `topic`: the data
/// records' values (control records left out) and the producer ids of
/// the aborted transactions listed.
async fn kafka_read_committed(k: &mut TcpStream, topic: &str) -> (Vec<String>, Vec<i64>) {
    let resp: FetchResponse = common::roundtrip(
        k,
        ApiKey::Fetch,
        12,
        &FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_max_bytes(1 << 20)
            .with_isolation_level(1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)])]),
    )
    .await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let ranges = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect::<Vec<_>>();
    let aborted = ranges.iter().map(|r| r.0).collect();
    // as a Kafka consumer skips them: a producer's records from an aborted
    // transaction's first offset up to the producer's next marker
    let mut aborting = std::collections::HashSet::new();
    let mut values = Vec::new();
    let mut buf = p.records.clone().unwrap_or_default();
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode(&mut buf).unwrap();
        for r in set.records {
            for (pid, first) in &ranges {
                if *first == r.offset {
                    aborting.insert(*pid);
                }
            }
            if r.control {
                aborting.remove(&r.producer_id);
                continue;
            }
            if aborting.contains(&r.producer_id) {
                continue;
            }
            assert!(r.transactional, "written as a transactional batch");
            values.push(String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned());
        }
    }
    (values, aborted)
}

async fn describe(k: &mut TcpStream, id: &str) -> (String, Vec<(String, Vec<i32>)>) {
    let d: DescribeTransactionsResponse = common::roundtrip(
        k,
        ApiKey::DescribeTransactions,
        0,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(StrBytes::from_string(id.to_owned()))]),
    )
    .await;
    let s = &d.transaction_states[0];
    assert_eq!(s.error_code, 0);
    (
        s.transaction_state.to_string(),
        s.topics
            .iter()
            .map(|t| (t.topic.to_string(), t.partitions.clone()))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_is_read_by_native_and_kafka_read_committed_readers() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("orders", 1))
        .await
        .unwrap();
    let p = client.producer(transactional("orders-app")).unwrap();
    p.init_transactions().await.unwrap();
    transaction(&p, "orders", &["o1", "o2", "o3"], true).await;

    assert_eq!(
        native_values(&client, "orders", Isolation::ReadCommitted, 3).await,
        ["o1", "o2", "o3"]
    );
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let (values, aborted) = kafka_read_committed(&mut k, "orders").await;
    assert_eq!(values, ["o1", "o2", "o3"]);
    assert!(aborted.is_empty());
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_transaction_is_hidden_from_read_committed_readers_only() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("mixed", 1))
        .await
        .unwrap();
    let p = client.producer(transactional("mixed-app")).unwrap();
    p.init_transactions().await.unwrap();
    transaction(&p, "mixed", &["a1", "a2"], false).await;
    transaction(&p, "mixed", &["c1"], true).await;
    transaction(&p, "mixed", &["a3"], false).await;
    transaction(&p, "mixed", &["c2", "c3"], true).await;

    assert_eq!(
        native_values(&client, "mixed", Isolation::ReadCommitted, 3).await,
        ["c1", "c2", "c3"]
    );
    assert_eq!(
        native_values(&client, "mixed", Isolation::ReadUncommitted, 6).await,
        ["a1", "a2", "c1", "a3", "c2", "c3"]
    );
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let (values, aborted) = kafka_read_committed(&mut k, "mixed").await;
    assert_eq!(values, ["c1", "c2", "c3"]);
    assert_eq!(aborted.len(), 2, "both aborted transactions are listed");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_holds_read_committed_readers_back() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("pending", 1))
        .await
        .unwrap();
    let p = client.producer(transactional("pending-app")).unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    p.send_to("pending", 0, Record::new("open")).await.unwrap();
    // written, and read_uncommitted sees it; read_committed does not yet
    assert_eq!(
        native_values(&client, "pending", Isolation::ReadUncommitted, 1).await,
        ["open"]
    );
    assert!(
        native_values(&client, "pending", Isolation::ReadCommitted, 0)
            .await
            .is_empty()
    );
    p.commit_transaction().await.unwrap();
    assert_eq!(
        native_values(&client, "pending", Isolation::ReadCommitted, 1).await,
        ["open"]
    );
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_of_the_id_fences_the_first() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("fenced", 1))
        .await
        .unwrap();
    let first = client.producer(transactional("fenced-app")).unwrap();
    first.init_transactions().await.unwrap();
    first.begin_transaction().unwrap();
    first
        .send_to("fenced", 0, Record::new("zombie"))
        .await
        .unwrap();

    let second = client.producer(transactional("fenced-app")).unwrap();
    second.init_transactions().await.unwrap();
    let e = first.commit_transaction().await.unwrap_err();
    assert!(matches!(e, Error::ProducerFenced(_)), "{e:?}");
    // fenced for good
    let again = first.begin_transaction().unwrap_err();
    assert!(matches!(again, Error::ProducerFenced(_)), "{again:?}");
    let init = first.init_transactions().await.unwrap_err();
    assert!(matches!(init, Error::ProducerFenced(_)), "{init:?}");

    transaction(&second, "fenced", &["survivor"], true).await;
    // the first producer's open transaction was aborted by the second's init
    assert_eq!(
        native_values(&client, "fenced", Isolation::ReadCommitted, 1).await,
        ["survivor"]
    );
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_to_a_transaction_are_committed_only_with_it() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("input", 1))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("output", 1))
        .await
        .unwrap();
    let p = client.producer(transactional("etl")).unwrap();
    p.init_transactions().await.unwrap();

    p.begin_transaction().unwrap();
    p.send_to("output", 0, Record::new("x")).await.unwrap();
    p.send_offsets_to_transaction(&[("input", 0, 5)], "etl-group")
        .await
        .unwrap();
    let before = client
        .committed_offsets("etl-group", &[("input", 0)])
        .await
        .unwrap();
    assert_eq!(before, [None], "held in the transaction until it commits");
    p.commit_transaction().await.unwrap();
    let after = client
        .committed_offsets("etl-group", &[("input", 0)])
        .await
        .unwrap();
    assert_eq!(after, [Some(5)]);

    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&[("input", 0, 9)], "etl-group")
        .await
        .unwrap();
    p.abort_transaction().await.unwrap();
    let aborted = client
        .committed_offsets("etl-group", &[("input", 0)])
        .await
        .unwrap();
    assert_eq!(
        aborted,
        [Some(5)],
        "an aborted transaction's offsets are dropped"
    );
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_transaction_is_described_through_the_kafka_api() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client.create_topic(NewTopic::new("seen", 2)).await.unwrap();
    let p = client.producer(transactional("seen-app")).unwrap();
    p.init_transactions().await.unwrap();
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    assert_eq!(describe(&mut k, "seen-app").await.0, "Empty");

    p.begin_transaction().unwrap();
    p.send_to("seen", 1, Record::new("v")).await.unwrap();
    assert_eq!(
        describe(&mut k, "seen-app").await,
        ("Ongoing".to_owned(), vec![("seen".to_owned(), vec![1])])
    );
    let listed: ListTransactionsResponse = common::roundtrip(
        &mut k,
        ApiKey::ListTransactions,
        0,
        &ListTransactionsRequest::default(),
    )
    .await;
    assert!(listed
        .transaction_states
        .iter()
        .any(|t| t.transactional_id.as_str() == "seen-app"
            && t.transaction_state.as_str() == "Ongoing"));
    p.commit_transaction().await.unwrap();
    assert_eq!(describe(&mut k, "seen-app").await.0, "CompleteCommit");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_calls_out_of_order_are_refused_with_a_clear_error() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("order", 1))
        .await
        .unwrap();
    let p = client.producer(transactional("order-app")).unwrap();
    let early = p.begin_transaction().unwrap_err();
    assert!(matches!(early, Error::TransactionState(_)), "{early:?}");
    p.init_transactions().await.unwrap();
    let outside = p.send_to("order", 0, Record::new("x")).await.unwrap_err();
    assert!(matches!(outside, Error::TransactionState(_)), "{outside:?}");
    let commit = p.commit_transaction().await.unwrap_err();
    assert!(matches!(commit, Error::TransactionState(_)), "{commit:?}");
    p.begin_transaction().unwrap();
    let twice = p.begin_transaction().unwrap_err();
    assert!(matches!(twice, Error::TransactionState(_)), "{twice:?}");
    // a plain producer has no transactions
    let plain = client.producer(ProducerConfig::default()).unwrap();
    assert!(matches!(
        plain.begin_transaction(),
        Err(Error::TransactionState(_))
    ));
    // and a subscription cannot read committed
    let push = client.consumer(
        ConsumerConfig {
            read_mode: sdk::ReadMode::Push { window: 1 << 20 },
            ..ConsumerConfig::default()
        }
        .isolation_level(Isolation::ReadCommitted),
    );
    assert!(matches!(push, Err(Error::Config(_))));
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_member_commits_its_offsets_in_the_transaction_of_its_output() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client.create_topic(NewTopic::new("in", 1)).await.unwrap();
    client.create_topic(NewTopic::new("out", 1)).await.unwrap();
    let plain = client.producer(ProducerConfig::default()).unwrap();
    for v in ["a", "b", "c"] {
        plain.send_to("in", 0, Record::new(v)).await.unwrap();
    }
    let mut consumer = client
        .consumer(ConsumerConfig {
            group: Some("upper".into()),
            membership: Membership::Group(GroupOptions::default()),
            max_wait: Duration::from_millis(100),
            ..ConsumerConfig::default()
        })
        .unwrap();
    consumer.subscribe(&["in"]).unwrap();
    let p = client.producer(transactional("upper-app")).unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    let mut next = 0;
    for _ in 0..3 {
        let r = tokio::time::timeout(Duration::from_secs(20), consumer.next())
            .await
            .expect("records come")
            .expect("the consumer goes on")
            .unwrap();
        let upper = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).to_uppercase();
        p.send_to("out", 0, Record::new(upper)).await.unwrap();
        next = r.offset + 1;
    }
    let member = consumer.group_metadata().expect("a group consumer");
    assert_eq!(member.group, "upper");
    assert!(member.generation >= 1 && !member.member_id.is_empty());
    // from outside the membership, the group (which has a member) refuses
    let outside = p
        .send_offsets_to_transaction(&[("in", 0, next)], "upper")
        .await
        .unwrap_err();
    assert_eq!(outside.code(), Some(ErrorCode::UNKNOWN_MEMBER), "{outside}");
    p.send_offsets_to_transaction_for(&[("in", 0, next)], &member)
        .await
        .unwrap();
    p.commit_transaction().await.unwrap();
    assert_eq!(
        client
            .committed_offsets("upper", &[("in", 0)])
            .await
            .unwrap(),
        [Some(3)]
    );
    assert_eq!(
        native_values(&client, "out", Isolation::ReadCommitted, 3).await,
        ["A", "B", "C"]
    );
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_send_makes_the_transaction_abort_only_and_the_producer_goes_on() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client.create_topic(NewTopic::new("one", 1)).await.unwrap();
    let p = client.producer(transactional("one-app")).unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    p.send_to("one", 0, Record::new("lost")).await.unwrap();
    let missing = p.send_to("one", 7, Record::new("x")).await.unwrap_err();
    assert!(
        matches!(missing, Error::UnknownPartition { .. }),
        "{missing:?}"
    );
    let refused = p.commit_transaction().await.unwrap_err();
    assert!(matches!(refused, Error::TransactionState(_)), "{refused:?}");
    p.abort_transaction().await.unwrap();
    transaction(&p, "one", &["kept"], true).await;
    assert_eq!(
        native_values(&client, "one", Isolation::ReadCommitted, 1).await,
        ["kept"]
    );
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_producer_of_the_same_transactional_id_fences_a_native_one() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client
        .create_topic(NewTopic::new("shared", 1))
        .await
        .unwrap();
    let p = client.producer(transactional("shared-id")).unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    p.send_to("shared", 0, Record::new("native")).await.unwrap();

    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let init: InitProducerIdResponse = common::roundtrip(
        &mut k,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(
                "shared-id",
            ))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
    .await;
    assert_eq!(init.error_code, 0);
    let e = p.commit_transaction().await.unwrap_err();
    assert!(matches!(e, Error::ProducerFenced(_)), "{e:?}");
    // the Kafka producer's init aborted the native transaction, and the
    // id is the Kafka producer's, with nothing open
    assert_eq!(describe(&mut k, "shared-id").await.0, "Empty");
    assert!(
        native_values(&client, "shared", Isolation::ReadCommitted, 0)
            .await
            .is_empty()
    );
    gw.shutdown().await;
    backends.stop().await;
}

/// The transaction operations frame by frame: what each answers, the
/// leader's KIP-890 check of a TxnProduce, the LSO and aborted list of a
/// read_committed FetchIsolated, and a bad flag closing the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transaction_operations_frame_by_frame() {
    use crate::support::{call, connect, expect_closed_with};
    use sdk::proto::{self, Message};
    use sdk::record::{encode_batch, BatchOptions, ProducerIdentity};
    use tokio::io::AsyncWriteExt;

    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client.create_topic(NewTopic::new("raw", 1)).await.unwrap();
    let mut s = connect(&gw).await;

    let none: proto::FindTxnCoordinatorResponse = call(
        &mut s,
        &proto::FindTxnCoordinator {
            correlation: 2,
            transactional_id: String::new(),
        },
    )
    .await;
    assert_eq!(none.error, ErrorCode::INVALID_REQUEST);
    let found: proto::FindTxnCoordinatorResponse = call(
        &mut s,
        &proto::FindTxnCoordinator {
            correlation: 3,
            transactional_id: "raw-app".into(),
        },
    )
    .await;
    assert_eq!(
        (found.error, found.node_id, found.port),
        (ErrorCode::NONE, 1, gw.native_addr().unwrap().port())
    );
    let init: proto::InitTxnResponse = call(
        &mut s,
        &proto::InitTxn {
            correlation: 4,
            transactional_id: "raw-app".into(),
            timeout_ms: 60_000,
        },
    )
    .await;
    assert_eq!(init.error, ErrorCode::NONE, "{}", init.message);
    let producer = proto::TxnProducer {
        transactional_id: "raw-app".into(),
        producer_id: init.producer_id,
        producer_epoch: init.producer_epoch,
    };
    let batch = encode_batch(
        &[Record::new("r0")],
        &BatchOptions {
            producer: Some(ProducerIdentity {
                producer_id: init.producer_id,
                producer_epoch: init.producer_epoch,
                base_sequence: 0,
            }),
            transactional: true,
            ..BatchOptions::default()
        },
    )
    .unwrap();
    let produce = |correlation| proto::TxnProduce {
        transactional_id: "raw-app".into(),
        produce: crate::support::produce_req(correlation, "raw", vec![(0, batch.clone())]),
    };
    // not added to the transaction: refused at the leader
    let refused: proto::TxnProduceResponse = call(&mut s, &produce(5)).await;
    let p = &refused.0.topics[0].partitions[0];
    assert_eq!(p.error, ErrorCode::INVALID_TXN_STATE, "{}", p.message);
    let added: proto::AddTxnPartitionsResponse = call(
        &mut s,
        &proto::AddTxnPartitions {
            correlation: 6,
            producer: producer.clone(),
            topics: vec![("raw".into(), vec![0])],
        },
    )
    .await;
    assert_eq!(added.0.error, ErrorCode::NONE, "{}", added.0.message);
    let written: proto::TxnProduceResponse = call(&mut s, &produce(7)).await;
    let p = &written.0.topics[0].partitions[0];
    assert_eq!(
        (p.error, p.base_offset),
        (ErrorCode::NONE, 0),
        "{}",
        p.message
    );

    let committed_read = |correlation| proto::FetchIsolated {
        correlation,
        isolation: proto::Isolation::ReadCommitted,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 1 << 20,
        topics: vec![proto::FetchTopic {
            name: "raw".into(),
            partitions: vec![proto::FetchPartition {
                partition: 0,
                offset: 0,
                max_bytes: 1 << 20,
            }],
        }],
    };
    let open: proto::FetchIsolatedResponse = call(&mut s, &committed_read(8)).await;
    let p = &open.topics[0].partitions[0];
    assert_eq!(
        (p.error, p.high_watermark, p.last_stable_offset),
        (ErrorCode::NONE, 1, 0)
    );
    assert!(p.records.is_empty(), "nothing below the open transaction");

    let ended: proto::EndTxnResponse = call(
        &mut s,
        &proto::EndTxn {
            correlation: 9,
            producer: producer.clone(),
            commit: false,
        },
    )
    .await;
    assert_eq!(ended.0.error, ErrorCode::NONE, "{}", ended.0.message);
    let aborted: proto::FetchIsolatedResponse = call(&mut s, &committed_read(10)).await;
    let p = &aborted.topics[0].partitions[0];
    assert_eq!(
        (p.high_watermark, p.last_stable_offset),
        (2, 2),
        "the record and its abort marker"
    );
    assert_eq!(
        p.aborted,
        [proto::AbortedTxn {
            producer_id: init.producer_id,
            first_offset: 0
        }]
    );
    let decoded = sdk::record::decode_committed(
        &std::sync::Arc::from("raw"),
        0,
        p.records.clone(),
        0,
        &p.aborted,
    )
    .unwrap();
    assert!(decoded.records.is_empty());
    assert_eq!(decoded.next_offset, Some(2));
    // a second EndTxn has no transaction to end
    let again: proto::EndTxnResponse = call(
        &mut s,
        &proto::EndTxn {
            correlation: 11,
            producer,
            commit: true,
        },
    )
    .await;
    assert_eq!(again.0.error, ErrorCode::INVALID_TXN_STATE);

    // a commit flag other than 0 or 1 is an undecodable body
    let mut frame = proto::EndTxn::default().to_frame().to_vec();
    *frame.last_mut().unwrap() = 2;
    s.write_all(&frame).await.unwrap();
    expect_closed_with(&mut s, ErrorCode::INVALID_REQUEST).await;
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let (gw, backends) = start(Logs::Disk).await;
    let client = Client::connect(&format!("aero://{}", gw.native_addr().unwrap()))
        .await
        .unwrap();
    client.create_topic(NewTopic::new("slow", 1)).await.unwrap();
    let p = client
        .producer(ProducerConfig {
            transaction_timeout: Duration::from_millis(200),
            ..transactional("slow-app")
        })
        .unwrap();
    p.init_transactions().await.unwrap();
    p.begin_transaction().unwrap();
    p.send_to("slow", 0, Record::new("late")).await.unwrap();
    // the coordinator's sweep aborts it
    let mut k = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while describe(&mut k, "slow-app").await.0 != "CompleteAbort" {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the sweep aborts the transaction");
    let e = p.commit_transaction().await.unwrap_err();
    assert!(matches!(e, Error::ProducerFenced(_)), "{e:?}");
    assert!(native_values(&client, "slow", Isolation::ReadCommitted, 0)
        .await
        .is_empty());
    gw.shutdown().await;
    backends.stop().await;
}
