//! Group membership against the broker double: joining, reading from the
//! committed offsets, committing as a member, giving partitions up on a
//! rebalance, and leaving.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;

use super::*;
use crate::record::{encode_batch, BatchOptions, Record};
use crate::testing::Double;
use crate::{Consumer, ConsumerConfig, Membership, OffsetReset};

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the test took too long")
}

fn append(double: &Double, partition: u32, values: &[&str]) {
    let records: Vec<Record> = values
        .iter()
        .map(|v| Record::new(v.to_string()).with_timestamp(1))
        .collect();
    double.append(
        "t",
        partition,
        encode_batch(&records, &BatchOptions::default()).unwrap(),
    );
}

fn member_of(group: &str) -> ConsumerConfig {
    ConsumerConfig {
        group: Some(group.into()),
        membership: Membership::Group(GroupOptions {
            session_timeout: Duration::from_millis(900),
            heartbeat_interval: Some(Duration::from_millis(50)),
            ..GroupOptions::default()
        }),
        max_wait: Duration::from_millis(50),
        ..ConsumerConfig::default()
    }
}

async fn take(consumer: &mut Consumer, n: usize) -> Vec<(u32, i64, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let r = within(consumer.next()).await.unwrap().unwrap();
        let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        out.push((r.partition, r.offset, v));
    }
    out.sort();
    out
}

async fn wait_until(mut done: impl FnMut() -> bool) {
    within(async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

#[tokio::test]
async fn a_member_reads_its_partitions_from_the_committed_offsets_and_commits_when_it_closes() {
    let double = Double::start(2).await;
    double.create("t", 2);
    append(&double, 0, &["a0", "a1", "a2"]);
    append(&double, 1, &["b0", "b1"]);
    let client = within(Client::connect(&double.url())).await.unwrap();
    client.commit_offsets("g", &[("t", 0, 1)]).await.unwrap();

    let mut consumer = client.consumer(member_of("g")).unwrap();
    consumer.subscribe(&["t"]).unwrap();
    let got = take(&mut consumer, 4).await;
    assert_eq!(
        got,
        vec![
            (0, 1, "a1".into()),
            (0, 2, "a2".into()),
            (1, 0, "b0".into()),
            (1, 1, "b1".into())
        ],
        "partition 0 from its committed offset, partition 1 from the earliest"
    );
    assert_eq!(consumer.assignment().len(), 2);
    within(consumer.close()).await.unwrap();
    let g = double.group("g");
    assert_eq!((g.joins, g.leaves), (1, 1));
    assert_eq!(g.member, None, "the member left");
    assert_eq!(double.committed("g", "t", 0), Some(3));
    assert_eq!(double.committed("g", "t", 1), Some(2));
    assert!(
        g.member_commits.iter().all(|c| c.0 == 1),
        "committed as a member of generation 1: {:?}",
        g.member_commits
    );
}

#[tokio::test]
async fn a_rebalance_commits_the_positions_then_resumes_from_them_in_the_next_generation() {
    let double = Double::start(1).await;
    double.create("t", 1);
    append(&double, 0, &["a", "b", "c"]);
    let client = within(Client::connect(&double.url())).await.unwrap();
    let mut consumer = client.consumer(member_of("g")).unwrap();
    consumer.subscribe(&["t"]).unwrap();
    let first = take(&mut consumer, 2).await;
    assert_eq!(first, vec![(0, 0, "a".into()), (0, 1, "b".into())]);

    double.fail_heartbeats(&[ErrorCode::REBALANCE_IN_PROGRESS]);
    // the stream answers the revoke and takes the new assignment while
    // being polled
    let mut seen = pump_until(&mut consumer, || double.group("g").joins == 2).await;
    let g = double.group("g");
    assert!(
        g.member_commits.iter().any(|c| c.0 == 1 && c.3 >= 2),
        "the positions were committed in generation 1 before rejoining: {:?}",
        g.member_commits
    );
    append(&double, 0, &["d"]);
    while seen.len() < 2 {
        seen.extend(take(&mut consumer, 1).await);
    }
    assert_eq!(
        seen,
        vec![(0, 2, "c".into()), (0, 3, "d".into())],
        "nothing lost, nothing read twice"
    );
    within(consumer.close()).await.unwrap();
    assert_eq!(double.committed("g", "t", 0), Some(4));
}

#[tokio::test]
async fn a_commit_of_a_generation_the_group_left_is_refused() {
    let double = Double::start(1).await;
    double.create("t", 1);
    append(&double, 0, &["a"]);
    let client = within(Client::connect(&double.url())).await.unwrap();
    let mut consumer = client.consumer(member_of("g")).unwrap();
    consumer.subscribe(&["t"]).unwrap();
    take(&mut consumer, 1).await;
    // the double answers heartbeats of an older generation with a
    // rebalance; commit before the task notices it
    double.fail_heartbeats(&[ErrorCode::NONE; 100]);
    double.bump_generation("g");
    let e = within(consumer.commit()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ILLEGAL_GENERATION), "{e}");
}

#[tokio::test]
async fn a_dropped_member_leaves_its_group_and_commits() {
    let double = Double::start(1).await;
    double.create("t", 1);
    append(&double, 0, &["a", "b"]);
    let client = within(Client::connect(&double.url())).await.unwrap();
    let mut consumer = client.consumer(member_of("g")).unwrap();
    consumer.subscribe(&["t"]).unwrap();
    take(&mut consumer, 1).await;
    drop(consumer);
    wait_until(|| double.group("g").leaves == 1).await;
    assert_eq!(double.committed("g", "t", 0), Some(1));
}

#[tokio::test]
async fn without_a_commit_the_reset_decides_where_a_partition_starts() {
    let double = Double::start(1).await;
    double.create("t", 1);
    append(&double, 0, &["old"]);
    let client = within(Client::connect(&double.url())).await.unwrap();
    let mut consumer = client
        .consumer(ConsumerConfig {
            offset_reset: OffsetReset::Latest,
            ..member_of("g")
        })
        .unwrap();
    consumer.subscribe(&["t"]).unwrap();
    // the assignment arrives and the latest offset is looked up
    wait_until_assigned(&mut consumer).await;
    append(&double, 0, &["new"]);
    assert_eq!(take(&mut consumer, 1).await, vec![(0, 1, "new".into())]);
}

/// Polls the consumer until `done`, with the records it yields meanwhile.
async fn pump_until(
    consumer: &mut Consumer,
    mut done: impl FnMut() -> bool,
) -> Vec<(u32, i64, String)> {
    within(async {
        let mut out = Vec::new();
        while !done() {
            if let Ok(Some(r)) =
                tokio::time::timeout(Duration::from_millis(20), consumer.next()).await
            {
                let r = r.unwrap();
                let v =
                    String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
                out.push((r.partition, r.offset, v));
            }
        }
        out
    })
    .await
}

/// Polls the consumer until the group assigned it a partition with a
/// position.
async fn wait_until_assigned(consumer: &mut Consumer) {
    within(async {
        while consumer.position("t", 0).is_none() {
            let _ = tokio::time::timeout(Duration::from_millis(20), consumer.next()).await;
        }
    })
    .await
}

#[tokio::test]
async fn membership_is_configured_with_a_group_and_used_through_subscribe() {
    let double = Double::start(1).await;
    double.create("t", 1);
    let client = within(Client::connect(&double.url())).await.unwrap();
    let no_group = ConsumerConfig {
        group: None,
        ..member_of("g")
    };
    assert!(matches!(client.consumer(no_group), Err(Error::Config(_))));
    let mut manual = client
        .consumer(ConsumerConfig {
            group: Some("g".into()),
            ..ConsumerConfig::default()
        })
        .unwrap();
    assert!(matches!(manual.subscribe(&["t"]), Err(Error::Config(_))));
    let too_slow = ConsumerConfig {
        membership: Membership::Group(GroupOptions {
            session_timeout: Duration::from_secs(1),
            heartbeat_interval: Some(Duration::from_secs(2)),
            ..GroupOptions::default()
        }),
        ..member_of("g")
    };
    assert!(matches!(client.consumer(too_slow), Err(Error::Config(_))));
    let mut member = client.consumer(member_of("g")).unwrap();
    assert!(matches!(member.subscribe(&[]), Err(Error::Config(_))));
    member.subscribe(&["t"]).unwrap();
    assert!(matches!(member.subscribe(&["t"]), Err(Error::Config(_))));
}
