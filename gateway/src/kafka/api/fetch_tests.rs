//! Fetch against the real logs: long polls, Kafka's response limits and
//! fetch sessions.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use super::test_support::*;
use super::{dispatch, Client};
use crate::broker::Broker;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    fetch_waits_for_min_bytes_until_data_arrives,
    fetch_without_data_returns_empty_after_max_wait,
    fetch_past_the_log_end_is_offset_out_of_range,
    an_idle_long_poll_reads_its_partition_twice_not_in_a_loop,
    min_bytes_zero_is_answered_without_waiting,
    a_response_holds_no_batch_past_fetch_max_bytes_after_the_first,
    incremental_fetch_session_lists_only_partitions_with_news,
    a_fetch_session_answers_only_on_its_own_connection,
    epoch_zero_with_a_session_id_starts_over,
);

fn reads(b: &Broker) -> u64 {
    b.node.partitions.counters().reads.load(Ordering::Relaxed)
}

async fn fetch_waits_for_min_bytes_until_data_arrives(logs: Logs) {
    let t = Arc::new(TestBroker::start(logs).await);
    create(&t.broker, "lp", 1).await;
    let waiter = {
        let t = t.clone();
        tokio::spawn(async move {
            let resp: FetchResponse =
                call(&t.broker, ApiKey::Fetch, 12, &fetch_req("lp", 0, 30_000, 1)).await;
            resp
        })
    };
    tokio::task::yield_now().await;
    produce(&t.broker, "lp", batch(&["late"], None, Compression::None)).await;
    let resp = waiter.await.expect("fetch task");
    assert_eq!(
        values_of(resp.responses[0].partitions[0].records.clone()),
        vec![(0, "late".into())]
    );
}

async fn fetch_without_data_returns_empty_after_max_wait(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "quiet", 1).await;
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("quiet", 0, 50, 1)).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert!(values_of(p.records.clone()).is_empty());
}

async fn fetch_past_the_log_end_is_offset_out_of_range(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "t", 1).await;
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("t", 10, 0, 1)).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
}

/// A consumer at the tail of a partition that had one append since it was
/// opened: the long poll reads once, sleeps until the deadline, reads once
/// more. (The watch of the high watermark used to look changed forever, so
/// the poll re-read in a loop and kept the broker's cores busy.)
async fn an_idle_long_poll_reads_its_partition_twice_not_in_a_loop(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "idle", 1).await;
    produce(b, "idle", batch(&["one"], None, Compression::None)).await;
    let before = reads(b);
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &fetch_req("idle", 1, 300, 1)).await;
    assert!(values_of(resp.responses[0].partitions[0].records.clone()).is_empty());
    let spent = reads(b) - before;
    assert!(spent <= 2, "an idle long poll read {spent} times");
}

/// Kafka answers at once when a consumer asks for `min_bytes` 0.
async fn min_bytes_zero_is_answered_without_waiting(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "now", 1).await;
    let before = reads(b);
    let resp: FetchResponse = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        call(b, ApiKey::Fetch, 12, &fetch_req("now", 0, 20_000, 0)),
    )
    .await
    .expect("answered");
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    assert_eq!(reads(b) - before, 1, "one read, no wait for data");
}

fn multi_partition_fetch(topic: &str, offsets: &[i64], max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(
                offsets
                    .iter()
                    .enumerate()
                    .map(|(p, o)| {
                        FetchPartition::default()
                            .with_partition(p as i32)
                            .with_fetch_offset(*o)
                            .with_partition_max_bytes(1_048_576)
                    })
                    .collect(),
            )])
}

/// librdkafka sizes its receive buffer from `fetch.max.bytes` (+512): a
/// response with more than one oversized partition disconnects it in a loop.
/// Only the first partition that returns data may exceed the limit.
async fn a_response_holds_no_batch_past_fetch_max_bytes_after_the_first(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "big", 4).await;
    let value = "v".repeat(900 * 1024);
    for p in 0..4 {
        for _ in 0..3 {
            let resp: ProduceResponse = call(
                b,
                ApiKey::Produce,
                9,
                &produce_req("big", p, batch(&[&value], None, Compression::None), 1),
            )
            .await;
            assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        }
    }
    let max_bytes = 1_000_000;
    let mut offsets = vec![0i64; 4];
    let mut got = 0;
    for _ in 0..100 {
        if got == 12 {
            break;
        }
        let resp: FetchResponse = call(
            b,
            ApiKey::Fetch,
            12,
            &multi_partition_fetch("big", &offsets, max_bytes),
        )
        .await;
        let mut total = 0;
        let mut first_len = None;
        for p in &resp.responses[0].partitions {
            assert_eq!(p.error_code, 0);
            let len = p.records.as_ref().map_or(0, Bytes::len);
            if len > 0 && first_len.is_none() {
                first_len = Some(len);
            }
            total += len;
            let values = values_of(p.records.clone());
            got += values.len();
            if let Some((last, _)) = values.last() {
                offsets[p.partition_index as usize] = last + 1;
            }
        }
        let allowed = first_len.unwrap_or(0).max(max_bytes as usize);
        assert!(
            total <= allowed,
            "a response of {total} record bytes for fetch.max.bytes {max_bytes}"
        );
    }
    assert_eq!(got, 12, "every record is read, one response at a time");
    assert_eq!(offsets, vec![3, 3, 3, 3]);
}

async fn incremental_fetch_session_lists_only_partitions_with_news(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "s", 1).await;
    produce(b, "s", batch(&["a"], None, Compression::None)).await;
    let mut req = fetch_req("s", 0, 0, 1)
        .with_session_id(0)
        .with_session_epoch(0);
    let first: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    assert_ne!(first.session_id, 0, "a session was created");
    assert_eq!(first.responses.len(), 1);
    // Next epoch: the client moved to offset 1 and nothing new arrived, so the partition is left out.
    req = fetch_req("s", 1, 0, 0)
        .with_session_id(first.session_id)
        .with_session_epoch(1);
    let quiet: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    assert_eq!(quiet.error_code, 0);
    assert!(quiet.responses.is_empty(), "{quiet:?}");
    let stale: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    assert_eq!(stale.error_code, 71, "INVALID_FETCH_SESSION_EPOCH");
}

/// A client that lost track of its session's epoch (it gave up on a fetch
/// the broker served, as franz-go does when its assignment changes) sends a
/// full fetch with its session id and epoch 0: a new session answers, with
/// every partition, and the old one is gone. Refusing it with
/// INVALID_FETCH_SESSION_EPOCH had franz-go resend it in a loop, reading
/// nothing.
async fn epoch_zero_with_a_session_id_starts_over(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "again", 1).await;
    produce(b, "again", batch(&["a"], None, Compression::None)).await;
    let first: FetchResponse = call(
        b,
        ApiKey::Fetch,
        12,
        &fetch_req("again", 0, 0, 0)
            .with_session_id(0)
            .with_session_epoch(0),
    )
    .await;
    assert_ne!(first.session_id, 0, "a session was created");
    // the client served epoch 1 but never read the answer
    let served: FetchResponse = call(
        b,
        ApiKey::Fetch,
        12,
        &fetch_req("again", 1, 0, 0)
            .with_session_id(first.session_id)
            .with_session_epoch(1),
    )
    .await;
    assert_eq!(served.error_code, 0);
    let restart = fetch_req("again", 0, 0, 0)
        .with_session_id(first.session_id)
        .with_session_epoch(0);
    let again: FetchResponse = call(b, ApiKey::Fetch, 12, &restart).await;
    assert_eq!(
        again.error_code, 0,
        "a full fetch naming the session is served"
    );
    assert_ne!(again.session_id, 0, "in a new session");
    assert_eq!(again.responses.len(), 1, "with every partition: {again:?}");
    let stale = fetch_req("again", 1, 0, 0)
        .with_session_id(first.session_id)
        .with_session_epoch(2);
    if again.session_id != first.session_id {
        let old: FetchResponse = call(b, ApiKey::Fetch, 12, &stale).await;
        assert_eq!(old.error_code, 70, "the old session is closed");
    }
    let next: FetchResponse = call(
        b,
        ApiKey::Fetch,
        12,
        &fetch_req("again", 1, 0, 0)
            .with_session_id(again.session_id)
            .with_session_epoch(1),
    )
    .await;
    assert_eq!(next.error_code, 0, "the new session goes on at epoch 1");
}

async fn a_fetch_session_answers_only_on_its_own_connection(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "own", 1).await;
    let req = fetch_req("own", 0, 0, 0)
        .with_session_id(0)
        .with_session_epoch(0);
    let first: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    assert_ne!(first.session_id, 0);
    let next = fetch_req("own", 0, 0, 0)
        .with_session_id(first.session_id)
        .with_session_epoch(1);
    let stranger = Client::direct("/127.0.0.2".into(), 99);
    let f = frame(ApiKey::Fetch, 12, &next).expect("frame");
    let resp = dispatch(b, &stranger, f)
        .await
        .expect("served")
        .expect("response");
    let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
    use kafka_protocol::protocol::Decodable;
    ResponseHeader::decode(&mut bytes, ApiKey::Fetch.response_header_version(12)).expect("header");
    let other = FetchResponse::decode(&mut bytes, 12).expect("body");
    assert_eq!(other.error_code, 70, "FETCH_SESSION_ID_NOT_FOUND");
    let mine: FetchResponse = call(b, ApiKey::Fetch, 12, &next).await;
    assert_eq!(mine.error_code, 0, "the owner's session is untouched");
}
