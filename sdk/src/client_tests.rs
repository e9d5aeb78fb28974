//! The client against the broker double: bootstrap, admin calls, leader
//! routing, reconnects.

use std::time::Duration;

use super::*;
use crate::testing::Double;

/// Fails the test instead of hanging it.
async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the test took too long")
}

async fn dead_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn connect_reaches_the_first_bootstrap_server_that_answers() {
    let double = Double::start(1).await;
    let dead = dead_port().await;
    let url = format!(
        "aero://127.0.0.1:{dead},{}",
        &double.url()["aero://".len()..]
    );
    let client = within(Client::connect(&url)).await.unwrap();
    within(client.ping()).await.unwrap();
}

#[tokio::test]
async fn connect_says_why_it_cannot() {
    let quic = Client::connect("aero+quic://127.0.0.1:9091")
        .await
        .unwrap_err();
    assert!(
        matches!(&quic, Error::Config(m) if m.contains("needs the CA")),
        "QUIC needs a CA to trust: {quic}"
    );
    let bad = Client::connect("127.0.0.1:9091").await.unwrap_err();
    assert!(matches!(bad, Error::InvalidUrl(_)), "{bad}");
    let dead = dead_port().await;
    let down = Client::connect(&format!("aero://127.0.0.1:{dead}"))
        .await
        .unwrap_err();
    assert!(matches!(down, Error::Connect { .. }), "{down}");
}

#[tokio::test]
async fn admin_calls_create_describe_commit_and_delete() {
    let double = Double::start(1).await;
    let client = within(Client::connect(&double.url())).await.unwrap();
    within(client.create_topic(NewTopic::new("t", 3).config("retention.ms", "1000")))
        .await
        .unwrap();
    let again = within(client.create_topic(NewTopic::new("t", 3)))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Some(ErrorCode::TOPIC_ALREADY_EXISTS));

    let metadata = within(client.metadata(&["t", "missing"])).await.unwrap();
    assert_eq!(metadata.nodes.len(), 1);
    assert_eq!(metadata.topic("t").map(|t| t.partitions.len()), Some(3));
    assert!(metadata.topic("missing").is_none());

    let latest = within(client.list_offsets("t", 2, OffsetSpec::Latest)).await;
    assert_eq!(latest.unwrap(), 0);
    let absent = within(client.list_offsets("t", 3, OffsetSpec::Latest)).await;
    assert!(matches!(
        absent,
        Err(Error::UnknownPartition { partition: 3, .. })
    ));

    within(client.commit_offsets("g", &[("t", 0, 5)]))
        .await
        .unwrap();
    let committed = within(client.committed_offsets("g", &[("t", 0), ("t", 1)]))
        .await
        .unwrap();
    assert_eq!(committed, vec![Some(5), None]);

    within(client.delete_topic("t")).await.unwrap();
    let metadata = within(client.metadata(&["t"])).await.unwrap();
    assert!(metadata.topic("t").is_none());
}

#[tokio::test]
async fn partition_requests_go_to_the_leader_and_follow_it_when_it_moves() {
    let double = Double::start(2).await;
    double.create("t", 2);
    let client = within(Client::connect(&double.url())).await.unwrap();
    // Partition 1 is led by node 1, which the bootstrap URL does not name.
    assert_eq!(
        within(client.list_offsets("t", 1, OffsetSpec::Earliest))
            .await
            .unwrap(),
        0
    );
    double.set_leader("t", 1, 0);
    // The cached leader (node 1) answers NOT_LEADER; the client refreshes
    // its metadata and asks node 0.
    assert_eq!(
        within(client.list_offsets("t", 1, OffsetSpec::Latest))
            .await
            .unwrap(),
        0
    );
    assert_eq!(client.cached_route("t").unwrap().leader(1), Some(0));
}

#[tokio::test]
async fn a_dropped_connection_is_replaced_after_a_backoff() {
    let double = Double::start(1).await;
    let client = within(Client::connect(&double.url())).await.unwrap();
    within(client.metadata(&[])).await.unwrap();
    let first = within(client.node_conn(0)).await.unwrap();
    double.kill_connections();
    within(async {
        while !first.is_closed() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let closed_at = first.closed_at().unwrap();
    let second = within(client.node_conn(0)).await.unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(
        closed_at.elapsed() >= Duration::from_millis(80),
        "reconnected {:?} after the drop",
        closed_at.elapsed()
    );
    within(client.ping()).await.unwrap();
}

#[tokio::test]
async fn concurrent_requests_for_a_node_share_one_connection() {
    let double = Double::start(1).await;
    let client = within(Client::connect(&double.url())).await.unwrap();
    within(client.metadata(&[])).await.unwrap();
    let (a, b) = within(async { tokio::join!(client.node_conn(0), client.node_conn(0)) }).await;
    assert!(Arc::ptr_eq(&a.unwrap(), &b.unwrap()));
}
