//! The consumer against the broker double: start positions, order,
//! seeks, commits, errors, and a produce-then-consume round trip.

use std::time::Duration;

use super::*;
use crate::record::{encode_batch, BatchOptions, Record};
use crate::testing::Double;
use crate::{ProducerConfig, StartAt};

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the test took too long")
}

async fn setup(nodes: usize, partitions: u32) -> (Double, Client) {
    let double = Double::start(nodes).await;
    double.create("t", partitions);
    let client = within(Client::connect(&double.url())).await.unwrap();
    (double, client)
}

/// Appends one batch of `values` to a partition.
fn append(double: &Double, partition: u32, values: &[&str]) -> i64 {
    let records: Vec<Record> = values
        .iter()
        .map(|v| Record::new(v.to_string()).with_timestamp(1))
        .collect();
    let batch = encode_batch(&records, &BatchOptions::default()).unwrap();
    double.append("t", partition, batch)
}

fn config() -> ConsumerConfig {
    ConsumerConfig {
        max_wait: Duration::from_millis(50),
        ..ConsumerConfig::default()
    }
}

fn group(name: &str) -> ConsumerConfig {
    ConsumerConfig {
        group: Some(name.into()),
        ..config()
    }
}

/// The next `n` records as (partition, offset, value).
async fn take(consumer: &mut Consumer, n: usize) -> Vec<(u32, i64, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let r = within(consumer.next()).await.unwrap().unwrap();
        let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        out.push((r.partition, r.offset, v));
    }
    out
}

fn offsets(records: &[(u32, i64, String)]) -> Vec<i64> {
    records.iter().map(|r| r.1).collect()
}

#[tokio::test]
async fn records_come_in_offset_order_from_the_earliest() {
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["a", "b", "c"]);
    append(&double, 0, &["d", "e"]);
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", None, StartAt::Earliest))
        .await
        .unwrap();
    let got = take(&mut consumer, 5).await;
    assert_eq!(offsets(&got), vec![0, 1, 2, 3, 4]);
    assert_eq!(got[3].2, "d");
    assert_eq!(consumer.position("t", 0), Some(5));
}

#[tokio::test]
async fn latest_waits_for_new_records() {
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["old"]);
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", Some(vec![0]), StartAt::Latest))
        .await
        .unwrap();
    let writer = double.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        append(&writer, 0, &["new"]);
    });
    let got = take(&mut consumer, 1).await;
    assert_eq!(got, vec![(0, 1, "new".to_owned())]);
}

#[tokio::test]
async fn an_offset_inside_a_batch_skips_the_records_before_it() {
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["a", "b", "c", "d"]);
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", None, StartAt::Offset(2)))
        .await
        .unwrap();
    assert_eq!(consumer.position("t", 0), Some(2));
    assert_eq!(offsets(&take(&mut consumer, 2).await), vec![2, 3]);
}

#[tokio::test]
async fn a_time_later_than_every_record_starts_at_the_high_watermark() {
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["old", "older"]);
    let mut consumer = client.consumer(config()).unwrap();
    // The double finds no record at or after any time above 0.
    within(consumer.assign("t", None, StartAt::Timestamp(5)))
        .await
        .unwrap();
    assert_eq!(consumer.position("t", 0), Some(2));
    append(&double, 0, &["new"]);
    assert_eq!(offsets(&take(&mut consumer, 1).await), vec![2]);
}

#[tokio::test]
async fn partitions_on_several_nodes_are_all_read() {
    let (double, client) = setup(2, 4).await;
    for p in 0..4 {
        append(&double, p, &["x", "y"]);
    }
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", None, StartAt::Earliest))
        .await
        .unwrap();
    let got = take(&mut consumer, 8).await;
    for p in 0..4 {
        let of_p: Vec<i64> = got.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
        assert_eq!(of_p, vec![0, 1], "partition {p}");
    }
}

#[tokio::test]
async fn commit_stores_positions_and_committed_starts_there() {
    let (double, client) = setup(1, 2).await;
    append(&double, 0, &["a", "b", "c", "d"]);
    append(&double, 1, &["e"]);
    let mut consumer = client.consumer(group("g")).unwrap();
    within(consumer.assign("t", Some(vec![0]), StartAt::Committed))
        .await
        .unwrap();
    assert_eq!(offsets(&take(&mut consumer, 2).await), vec![0, 1]);
    within(consumer.commit()).await.unwrap();
    assert_eq!(double.committed("g", "t", 0), Some(2));

    let mut again = client.consumer(group("g")).unwrap();
    within(again.assign("t", None, StartAt::Committed))
        .await
        .unwrap();
    let got = take(&mut again, 3).await;
    let mut firsts: Vec<(u32, i64)> = got.iter().map(|r| (r.0, r.1)).collect();
    firsts.sort_unstable();
    assert_eq!(
        firsts,
        vec![(0, 2), (0, 3), (1, 0)],
        "partition 1 had no commit"
    );
}

#[tokio::test]
async fn a_seek_drops_what_was_buffered_and_restarts_there() {
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["a", "b", "c", "d"]);
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", None, StartAt::Earliest))
        .await
        .unwrap();
    assert_eq!(offsets(&take(&mut consumer, 1).await), vec![0]);
    consumer.seek("t", 0, 3).unwrap();
    assert_eq!(consumer.position("t", 0), Some(3));
    assert_eq!(offsets(&take(&mut consumer, 1).await), vec![3]);
    consumer.seek("t", 0, 1).unwrap();
    assert_eq!(offsets(&take(&mut consumer, 3).await), vec![1, 2, 3]);
    assert!(consumer.seek("t", 5, 0).is_err(), "not assigned");
}

#[tokio::test]
async fn an_offset_out_of_range_resets_to_the_earliest() {
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["a", "b"]);
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", None, StartAt::Offset(100)))
        .await
        .unwrap();
    assert_eq!(offsets(&take(&mut consumer, 2).await), vec![0, 1]);
}

#[tokio::test]
async fn an_offset_out_of_range_is_an_error_when_asked_so() {
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["a"]);
    let config = ConsumerConfig {
        offset_reset: OffsetReset::Fail,
        ..config()
    };
    let mut consumer = client.consumer(config).unwrap();
    within(consumer.assign("t", None, StartAt::Offset(100)))
        .await
        .unwrap();
    let err = within(consumer.next()).await.unwrap().unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::OFFSET_OUT_OF_RANGE));
    consumer.seek("t", 0, 0).unwrap();
    assert_eq!(offsets(&take(&mut consumer, 1).await), vec![0]);
}

#[tokio::test]
async fn a_moved_leader_is_followed_without_an_error() {
    let (double, client) = setup(2, 2).await;
    append(&double, 1, &["a"]);
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", Some(vec![1]), StartAt::Earliest))
        .await
        .unwrap();
    assert_eq!(offsets(&take(&mut consumer, 1).await), vec![0]);
    double.set_leader("t", 1, 0);
    append(&double, 1, &["b"]);
    assert_eq!(offsets(&take(&mut consumer, 1).await), vec![1]);
}

#[tokio::test]
async fn produced_records_come_back_with_keys_headers_and_timestamps() {
    let (_double, client) = setup(1, 3).await;
    let producer = client
        .producer(ProducerConfig {
            compression: crate::Compression::Zstd,
            ..ProducerConfig::default()
        })
        .unwrap();
    let sent = Record::new("payload")
        .with_key("k")
        .with_header("h", "1")
        .with_timestamp(1234);
    let d = within(producer.send("t", sent.clone())).await.unwrap();
    let mut consumer = client.consumer(config()).unwrap();
    within(consumer.assign("t", Some(vec![d.partition]), StartAt::Earliest))
        .await
        .unwrap();
    let got = within(consumer.next()).await.unwrap().unwrap();
    assert_eq!((got.partition, got.offset), (d.partition, d.offset));
    assert_eq!(got.key, sent.key);
    assert_eq!(got.value, sent.value);
    assert_eq!(got.headers, sent.headers);
    assert_eq!(got.timestamp, 1234);
}

#[tokio::test]
async fn an_idle_consumer_keeps_one_fetch_per_node_in_flight() {
    let (double, client) = setup(1, 4).await;
    let mut consumer = client
        .consumer(ConsumerConfig {
            max_wait: Duration::from_millis(100),
            ..ConsumerConfig::default()
        })
        .unwrap();
    within(consumer.assign("t", None, StartAt::Earliest))
        .await
        .unwrap();
    let before = double.fetches_seen();
    let idle = tokio::time::timeout(Duration::from_millis(450), consumer.next()).await;
    assert!(idle.is_err(), "nothing to read");
    let fetches = double.fetches_seen() - before;
    // Four partitions, one node: one long poll at a time, each holding
    // up to 100 ms (the double counts each look at the log it makes).
    assert!(fetches <= 12, "{fetches} fetches in 450 ms");
}

#[tokio::test]
async fn misuse_is_a_config_error() {
    let (_double, client) = setup(1, 1).await;
    let mut consumer = client.consumer(config()).unwrap();
    assert!(within(consumer.next()).await.is_none(), "nothing assigned");
    assert!(matches!(
        consumer.assign("t", None, StartAt::Committed).await,
        Err(Error::Config(_))
    ));
    assert!(matches!(consumer.commit().await, Err(Error::Config(_))));
    assert!(matches!(
        consumer.assign("t", Some(vec![3]), StartAt::Earliest).await,
        Err(Error::UnknownPartition { partition: 3, .. })
    ));
    assert!(matches!(
        consumer.assign("nope", None, StartAt::Earliest).await,
        Err(Error::UnknownTopic(_))
    ));
    within(consumer.assign("t", None, StartAt::Earliest))
        .await
        .unwrap();
    assert_eq!(consumer.assignment(), vec![("t".to_owned(), 0)]);
    consumer.unassign("t", None);
    assert!(consumer.assignment().is_empty());
}

#[tokio::test]
async fn read_committed_against_a_server_without_it_says_so() {
    // the double, like a server that predates FetchIsolated, answers
    // UNKNOWN_OPERATION
    let (double, client) = setup(1, 1).await;
    append(&double, 0, &["a"]);
    let mut consumer = client
        .consumer(config().isolation_level(Isolation::ReadCommitted))
        .unwrap();
    consumer
        .assign("t", Some(vec![0]), StartAt::Earliest)
        .await
        .unwrap();
    let e = within(consumer.next()).await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UNKNOWN_OPERATION), "{e}");
}
