//! The producer against the broker double: ordering, partitioning,
//! retries, idempotence, flush.

use std::collections::HashSet;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc;

use super::*;
use crate::proto::ErrorCode;
use crate::testing::Double;

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

fn fast_retries() -> ProducerConfig {
    ProducerConfig {
        retry_backoff: Duration::from_millis(10),
        retry_backoff_max: Duration::from_millis(50),
        ..ProducerConfig::default()
    }
}

fn values(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("r{i}")).collect()
}

#[tokio::test]
async fn records_are_acknowledged_with_offsets_in_send_order() {
    let (double, client) = setup(1, 1).await;
    let producer = client.producer(ProducerConfig::default()).unwrap();
    // Queued at send, awaited later: the order is the order of the calls.
    let sends: Vec<_> = values(100)
        .into_iter()
        .map(|v| producer.send("t", Record::new(v)))
        .collect();
    let deliveries = within(futures::future::join_all(sends)).await;
    let offsets: Vec<i64> = deliveries.into_iter().map(|d| d.unwrap().offset).collect();
    assert_eq!(offsets, (0..100).collect::<Vec<i64>>());
    let stored: Vec<String> = double.values("t", 0).into_iter().map(|(_, v)| v).collect();
    assert_eq!(stored, values(100));
    assert!(
        double.produces_seen() < 100,
        "records were batched ({} produces)",
        double.produces_seen()
    );
}

#[tokio::test]
async fn keyed_records_land_where_the_java_client_puts_them() {
    let (double, client) = setup(2, 4).await;
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let want = crate::partitioner::partition_for_key(b"foobar", 4);
    for _ in 0..3 {
        let d = within(producer.send("t", Record::new("v").with_key("foobar")))
            .await
            .unwrap();
        assert_eq!(d.partition, want);
    }
    assert_eq!(double.values("t", want).len(), 3);
}

#[tokio::test]
async fn keyless_records_fill_one_partition_per_batch() {
    let (_double, client) = setup(1, 4).await;
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let sends: Vec<_> = (0..10)
        .map(|_| producer.send("t", Record::new("v")))
        .collect();
    let deliveries = within(futures::future::join_all(sends)).await;
    let partitions: HashSet<u32> = deliveries
        .iter()
        .map(|d| d.as_ref().unwrap().partition)
        .collect();
    assert_eq!(partitions.len(), 1, "{deliveries:?}");
}

#[tokio::test]
async fn retriable_errors_are_retried_and_keep_the_order() {
    let (double, client) = setup(1, 1).await;
    double.fail_produces(&[ErrorCode::NOT_LEADER, ErrorCode::NOT_ENOUGH_REPLICAS]);
    let producer = client.producer(fast_retries()).unwrap();
    let sends: Vec<_> = values(5)
        .into_iter()
        .map(|v| producer.send("t", Record::new(v)))
        .collect();
    for (i, d) in within(futures::future::join_all(sends))
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(d.unwrap().offset, i as i64);
    }
    let stored: Vec<String> = double.values("t", 0).into_iter().map(|(_, v)| v).collect();
    assert_eq!(stored, values(5));
}

#[tokio::test]
async fn a_batch_whose_answer_was_lost_is_not_written_twice() {
    let (double, client) = setup(1, 1).await;
    double.lose_answers(1);
    let producer = client.producer(fast_retries()).unwrap();
    let d = within(producer.send("t", Record::new("once")))
        .await
        .unwrap();
    assert_eq!(d.offset, 0);
    assert_eq!(double.values("t", 0), vec![(0, "once".to_owned())]);
    assert!(double.produces_seen() >= 2, "the batch was resent");
}

#[tokio::test]
async fn without_idempotence_a_lost_answer_writes_the_batch_twice() {
    // What idempotence buys: the same scenario, producer ids off.
    let (double, client) = setup(1, 1).await;
    double.lose_answers(1);
    let config = ProducerConfig {
        idempotent: false,
        ..fast_retries()
    };
    let producer = client.producer(config).unwrap();
    within(producer.send("t", Record::new("twice")))
        .await
        .unwrap();
    assert_eq!(double.values("t", 0).len(), 2);
}

#[tokio::test]
async fn a_non_retriable_error_fails_the_record_and_the_producer_goes_on() {
    let (double, client) = setup(1, 1).await;
    double.fail_produces(&[ErrorCode::RECORDS_TOO_LARGE]);
    let producer = client.producer(fast_retries()).unwrap();
    let err = within(producer.send("t", Record::new("big")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::RECORDS_TOO_LARGE));
    let d = within(producer.send("t", Record::new("fine")))
        .await
        .unwrap();
    assert_eq!(d.offset, 0);
}

#[tokio::test]
async fn records_for_an_unknown_topic_fail_after_the_retries() {
    let (_double, client) = setup(1, 1).await;
    let config = ProducerConfig {
        retries: 2,
        ..fast_retries()
    };
    let producer = client.producer(config).unwrap();
    let err = within(producer.send("nope", Record::new("v")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownTopic(ref t) if t == "nope"),
        "{err}"
    );
    let err = within(producer.send_to("t", 7, Record::new("v")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownPartition { partition: 7, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_topic_created_while_records_wait_receives_them() {
    let (double, client) = setup(1, 1).await;
    let producer = client.producer(fast_retries()).unwrap();
    let pending = producer.send("late", Record::new("v"));
    tokio::time::sleep(Duration::from_millis(30)).await;
    double.create("late", 1);
    assert_eq!(within(pending).await.unwrap().offset, 0);
}

#[tokio::test]
async fn flush_sends_lingering_batches_and_waits_for_their_answers() {
    let (double, client) = setup(1, 1).await;
    let config = ProducerConfig {
        linger: Duration::from_secs(3600),
        ..ProducerConfig::default()
    };
    let producer = client.producer(config).unwrap();
    let pending = producer.send("t", Record::new("v"));
    within(producer.flush()).await.unwrap();
    assert_eq!(double.values("t", 0).len(), 1);
    assert_eq!(pending.now_or_never().map(|d| d.unwrap().offset), Some(0));
}

#[tokio::test]
async fn acks_none_resolves_once_written_without_an_offset() {
    let (double, client) = setup(1, 1).await;
    let config = ProducerConfig {
        acks: Acks::None,
        idempotent: false,
        ..ProducerConfig::default()
    };
    let producer = client.producer(config).unwrap();
    let d = within(producer.send("t", Record::new("v"))).await.unwrap();
    assert_eq!(d.offset, -1);
    within(async {
        while double.values("t", 0).is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_moved_leader_is_followed() {
    let (double, client) = setup(2, 2).await;
    let producer = client.producer(fast_retries()).unwrap();
    within(producer.send_to("t", 1, Record::new("a")))
        .await
        .unwrap();
    double.set_leader("t", 1, 0);
    let d = within(producer.send_to("t", 1, Record::new("b")))
        .await
        .unwrap();
    assert_eq!(d.offset, 1);
    assert_eq!(double.values("t", 1).len(), 2);
}

#[tokio::test]
async fn a_full_buffer_queues_records_in_order_as_room_comes() {
    let (double, client) = setup(1, 1).await;
    let config = ProducerConfig {
        buffer_bytes: 2 * Record::new("r0").with_timestamp(0).estimated_size(),
        ..ProducerConfig::default()
    };
    let producer = client.producer(config).unwrap();
    let sends: Vec<_> = values(8)
        .into_iter()
        .map(|v| producer.send("t", Record::new(v)))
        .collect();
    let deliveries = within(futures::future::join_all(sends)).await;
    let offsets: Vec<i64> = deliveries.into_iter().map(|d| d.unwrap().offset).collect();
    assert_eq!(offsets, (0..8).collect::<Vec<i64>>());
    let stored: Vec<String> = double.values("t", 0).into_iter().map(|(_, v)| v).collect();
    assert_eq!(stored, values(8));
    let huge = Record::new(vec![0u8; 1000]);
    assert!(matches!(
        within(producer.send("t", huge)).await,
        Err(Error::TooLarge { .. })
    ));
}

#[tokio::test]
async fn dropping_the_producer_still_sends_what_it_holds() {
    let (double, client) = setup(1, 1).await;
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let pending = producer.send("t", Record::new("v"));
    drop(producer);
    assert_eq!(within(pending).await.unwrap().offset, 0);
    assert_eq!(double.values("t", 0).len(), 1);
}

#[tokio::test]
async fn bad_settings_are_refused() {
    let (_double, client) = setup(1, 1).await;
    let idempotent_leader_acks = ProducerConfig {
        acks: Acks::Leader,
        ..ProducerConfig::default()
    };
    assert!(matches!(
        client.producer(idempotent_leader_acks),
        Err(Error::Config(_))
    ));
    let empty_batches = ProducerConfig {
        batch_bytes: 0,
        ..ProducerConfig::default()
    };
    assert!(matches!(
        client.producer(empty_batches),
        Err(Error::Config(_))
    ));
}

#[tokio::test]
async fn a_server_without_transactions_refuses_init_transactions_clearly() {
    // the double, like a server that predates them, knows no transaction
    // operation: it answers UNKNOWN_OPERATION and closes the connection
    let (_double, client) = setup(1, 1).await;
    let producer = client
        .producer(fast_retries().transactional_id("app"))
        .unwrap();
    let e = within(producer.init_transactions()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UNKNOWN_OPERATION), "{e}");
    // and the producer stays unusable for transactions
    assert!(matches!(
        producer.begin_transaction(),
        Err(Error::TransactionState(_))
    ));
}

#[test]
fn a_transactional_configuration_is_checked() {
    let empty = ProducerConfig::default().transactional_id("");
    assert!(matches!(empty.validate(), Err(Error::Config(_))));
    let not_idempotent = ProducerConfig {
        idempotent: false,
        ..ProducerConfig::default()
    }
    .transactional_id("app");
    assert!(matches!(not_idempotent.validate(), Err(Error::Config(_))));
    assert!(ProducerConfig::default()
        .transactional_id("app")
        .validate()
        .is_ok());
}

#[tokio::test]
async fn callbacks_receive_each_answer_once_in_send_order() {
    let (double, client) = setup(1, 1).await;
    let producer = client.producer(ProducerConfig::default()).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    for (i, v) in values(50).into_iter().enumerate() {
        let tx = tx.clone();
        producer
            .send_with("t", Record::new(v), move |r| {
                let _ = tx.send((i, r.map(|d| d.offset)));
            })
            .unwrap();
    }
    drop(tx);
    let mut answers = Vec::new();
    while let Some(a) = within(rx.recv()).await {
        answers.push(a);
    }
    let want: Vec<(usize, Result<i64, Error>)> = (0..50).map(|i| (i, Ok(i as i64))).collect();
    assert_eq!(format!("{answers:?}"), format!("{want:?}"));
    let stored: Vec<String> = double.values("t", 0).into_iter().map(|(_, v)| v).collect();
    assert_eq!(stored, values(50));
    // a chosen partition that does not exist fails through the callback
    let (tx, mut rx) = mpsc::unbounded_channel();
    producer
        .send_to_with("t", 7, Record::new("v"), move |r| {
            let _ = tx.send(r);
        })
        .unwrap();
    assert!(matches!(
        within(rx.recv()).await,
        Some(Err(Error::UnknownPartition { partition: 7, .. }))
    ));
}

#[tokio::test]
async fn a_callback_send_into_a_full_buffer_queues_nothing() {
    let (double, client) = setup(1, 1).await;
    let one = Record::new("r0").with_timestamp(0).estimated_size();
    let config = ProducerConfig {
        buffer_bytes: one,
        linger: Duration::from_millis(200),
        ..ProducerConfig::default()
    };
    let producer = client.producer(config).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let tx2 = tx.clone();
    producer
        .send_with("t", Record::new("r0"), move |r| {
            let _ = tx.send(r.map(|d| d.offset));
        })
        .unwrap();
    // the first record holds the whole buffer until it is answered
    let refused = producer.send_with("t", Record::new("r1"), move |r| {
        let _ = tx2.send(r.map(|d| d.offset));
    });
    assert!(
        matches!(refused, Err(Error::BufferFull { max }) if max == one),
        "{refused:?}"
    );
    assert!(matches!(within(rx.recv()).await, Some(Ok(0))));
    assert!(
        within(rx.recv()).await.is_none(),
        "the refused send's callback never runs"
    );
    assert_eq!(double.values("t", 0).len(), 1);
    let huge = producer.send_with("t", Record::new(vec![0u8; 1000]), |_| {});
    assert!(matches!(huge, Err(Error::TooLarge { .. })), "{huge:?}");
}

#[test]
fn sends_after_the_producers_runtime_stopped_fail_closed() {
    let outer = tokio::runtime::Runtime::new().unwrap();
    let double = outer.block_on(Double::start(1));
    double.create("t", 1);
    let inner = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (client, producer) = inner.block_on(async {
        let client = within(Client::connect(&double.url())).await.unwrap();
        let producer = client.producer(ProducerConfig::default()).unwrap();
        within(producer.send("t", Record::new("v"))).await.unwrap();
        (client, producer)
    });
    // the background task goes with its runtime
    drop(inner);
    let answer = outer.block_on(within(producer.send("t", Record::new("w"))));
    assert!(matches!(answer, Err(Error::Closed)), "{answer:?}");
    let refused = producer.send_with("t", Record::new("x"), |_| {});
    assert!(matches!(refused, Err(Error::Closed)), "{refused:?}");
    drop((client, producer));
}
