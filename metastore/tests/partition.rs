//! Network partitions, on the in-process router so links can be cut
//! without sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{agent, eventually, Cluster};
use metastore::{ClusterControl, Topics};
use metastore::{CreateTopic, MetaError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_minority_cannot_commit_and_its_write_is_discarded() {
    common::init_tracing();
    let c = Cluster::in_process(3, Duration::from_secs(6)).await;
    c.node(1).register_agent(agent(1)).await.unwrap();
    let old = c.leader().await;
    let others: Vec<u64> = c.nodes.keys().copied().filter(|id| *id != old).collect();

    c.node(old).fault_injection().isolate();
    for id in &others {
        c.node(*id).fault_injection().block(old);
    }

    // the cut-off leader cannot reach a quorum: its write times out, outcome unknown to it
    let err = c
        .node(old)
        .create_topic(CreateTopic::new("minority", 1, 1), false)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            MetaError::Timeout {
                maybe_applied: true,
                ..
            } | MetaError::NotLeader { .. }
        ),
        "{err}"
    );
    assert!(c.node(old).topic("minority").is_none());
    let stale = c.node(old).ensure_fresh(Duration::from_millis(100)).await;
    assert!(
        stale.is_err(),
        "an isolated node cannot vouch for fresh reads"
    );

    // the majority elects a new leader and keeps committing
    c.node(others[0])
        .create_topic(CreateTopic::new("majority", 1, 1), false)
        .await
        .unwrap();
    let new = c.node(others[0]).metastore_leader().unwrap();
    assert!(
        others.contains(&new),
        "the new leader {new} is in the majority"
    );
    assert!(c.node(others[1]).topic("minority").is_none());

    c.node(old).fault_injection().heal();
    for id in &others {
        c.node(*id).fault_injection().heal();
    }
    let back = c.node(old).clone();
    eventually(
        "the old leader rejoins and catches up",
        Duration::from_secs(20),
        || back.topic("majority").is_some() && back.metastore_leader() == Some(new),
    )
    .await;
    back.linearizable_barrier().await.unwrap();
    for ms in c.nodes.values() {
        assert!(
            ms.topic("minority").is_none(),
            "the uncommitted minority write was discarded"
        );
    }
    c.shutdown().await;
}
