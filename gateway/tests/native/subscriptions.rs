//! Subscriptions push exactly what the client granted, start where asked
//! and end with an error push; the Rust client produces and consumes over
//! fetches, pushes and QUIC.

use std::time::Duration;

use gateway::testing::{record_batch, Logs};
use kafka_protocol::records::Compression;
use sdk::proto::{self, ErrorCode, Message};
use tokio::net::TcpStream;

use super::support::*;

/// Creates `topic` with one partition and writes `batches` batches of one
/// record each; returns each batch's stored size.
pub(crate) async fn one_partition_with_batches(
    s: &mut TcpStream,
    topic: &str,
    batches: usize,
) -> Vec<usize> {
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
pub(crate) async fn next_push(s: &mut TcpStream, wait: Duration) -> Option<proto::Push> {
    let (op, body) = tokio::time::timeout(wait, next_frame(s)).await.ok()??;
    assert_eq!(op, proto::op::PUSH | proto::RESPONSE, "a push");
    Some(proto::Push::decode_body(body).unwrap())
}

/// A subscriber is never sent more record bytes than it granted: a batch
/// that does not fit waits for credit, and each grant releases exactly
/// the batches it pays for.
pub(crate) async fn credit_bounds_pushes(kind: Logs) {
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
pub(crate) async fn sdk_subscription(kind: Logs) {
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
pub(crate) async fn sdk_round_trip(kind: Logs, read_mode: sdk::ReadMode, quic: bool) {
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
