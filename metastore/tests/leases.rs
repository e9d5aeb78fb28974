//! Agent leases across a change of metastore leader: heartbeats are timed by
//! the leader in memory, so a new leader starts without them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{agent, eventually, Cluster};
use metastore::{ClusterControl, MetaEvent};

/// Agent 10 heartbeats only through the metastore leader and dies with it;
/// agents 11 and 12 heartbeat through the two other nodes. The new leader,
/// which heard none of them before its election, fences agent 10 and never
/// fences the live ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_metastore_leader_fences_the_agent_that_died_with_the_old_one_and_no_other() {
    common::init_tracing();
    let mut c =
        Cluster::in_process_leased(3, Duration::from_secs(30), Duration::from_millis(1500)).await;
    let old = c.leader().await;
    let survivors: Vec<u64> = c.nodes.keys().copied().filter(|id| *id != old).collect();
    let every = Duration::from_millis(100);
    let dying = c.node(old).keep_agent_alive(agent(10), every);
    let _live: Vec<_> = survivors
        .iter()
        .zip([11, 12])
        .map(|(node, id)| c.node(*node).keep_agent_alive(agent(id), every))
        .collect();
    let watcher = c.node(survivors[0]).clone();
    eventually("three agents registered", Duration::from_secs(20), || {
        watcher.agents().len() == 3
    })
    .await;
    let mut events = watcher.subscribe();

    c.kill(old).await;
    drop(dying);
    let new = c.leader().await;
    assert_ne!(new, old);
    eventually(
        "the agent that died with the old leader is fenced",
        Duration::from_secs(30),
        || watcher.agents().iter().any(|a| a.id == 10 && a.fenced),
    )
    .await;
    // a little more than a lease later, the live agents still hold theirs
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let mut fenced = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let MetaEvent::AgentFenced { agent_id } = e {
            fenced.push(agent_id);
        }
    }
    assert_eq!(fenced, vec![10], "only the dead agent was ever fenced");
    assert!(watcher
        .agents()
        .iter()
        .filter(|a| a.id != 10)
        .all(|a| !a.fenced));
    c.shutdown().await;
}
