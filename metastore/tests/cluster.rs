//! Three metastore voters over QUIC in one process: failover, catch-up,
//! forwarding, membership changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{agent, eventually, Cluster};
use metastore::{
    Bootstrap, CreateTopic, MetaError, MetaEvent, Metastore, MetastoreConfig, OffsetCommit,
    QuicSettings, Transport,
};
use metastore::{ClusterControl, Groups, Topics};

fn commit(topic: &str, offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic: topic.into(),
        partition: 0,
        offset,
        leader_epoch: 0,
        metadata: None,
        commit_time_ms: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_survive_killing_the_leader_and_a_restarted_node_catches_up() {
    common::init_tracing();
    let mut c = Cluster::quic(3).await;
    let cluster_id = c.node(1).cluster().cluster_id;
    assert!(
        c.nodes
            .values()
            .all(|m| m.cluster().cluster_id == cluster_id),
        "one cluster id everywhere"
    );
    c.node(1).register_agent(agent(1)).await.unwrap();
    // the agent heartbeats through every metastore node, so killing one does not silence it
    let _alive: Vec<_> = c
        .nodes
        .values()
        .map(|m| m.keep_agent_alive(agent(1), Duration::from_millis(300)))
        .collect();
    c.node(2)
        .create_topic(CreateTopic::new("before", 2, 1), false)
        .await
        .unwrap();

    let old = c.leader().await;
    c.kill(old).await;
    let survivor = *c.nodes.keys().next().unwrap();
    // the write waits out the election and lands on the new leader
    c.node(survivor)
        .create_topic(CreateTopic::new("after-failover", 1, 1), false)
        .await
        .unwrap();
    let new = c.leader().await;
    assert_ne!(new, old);
    for ms in c.nodes.values() {
        let has = |name: &str| ms.topic(name).is_some();
        eventually(
            "survivors hold every acknowledged write",
            Duration::from_secs(10),
            || has("before") && has("after-failover"),
        )
        .await;
    }
    for i in 0..50 {
        let ms = c.node(if i % 2 == 0 { new } else { survivor });
        ms.commit_offsets("g", None, vec![commit("before", i)])
            .await
            .unwrap();
    }

    c.restart(old).await;
    let back = c.node(old).clone();
    eventually(
        "the restarted node catches up",
        Duration::from_secs(20),
        || {
            back.topic("after-failover").is_some()
                && back
                    .committed_offsets("g")
                    .get(&("before".to_string(), 0))
                    .map(|o| o.offset)
                    == Some(49)
        },
    )
    .await;
    assert_eq!(back.cluster().cluster_id, cluster_id);
    assert_eq!(back.cluster().membership.voters, vec![1, 2, 3]);
    // and it serves writes again (forwarded to whoever leads)
    back.create_topic(CreateTopic::new("from-restarted", 1, 1), false)
        .await
        .unwrap();
    assert!(back.topic("from-restarted").is_some());
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_forward_writes_and_read_them_back_at_once() {
    let c = Cluster::quic(3).await;
    let leader = c.leader().await;
    let follower = c.nodes.keys().copied().find(|id| *id != leader).unwrap();
    let ms = c.node(follower);
    let other = c
        .nodes
        .keys()
        .copied()
        .find(|id| *id != leader && *id != follower)
        .unwrap();
    let mut watch = c.node(other).subscribe();
    ms.register_agent(agent(5)).await.unwrap();
    for i in 0..20 {
        let t = ms
            .create_topic(CreateTopic::new(format!("f{i}"), 1, 1), false)
            .await
            .unwrap();
        assert_eq!(
            ms.topic(&t.name).as_deref(),
            Some(&t),
            "read-your-writes on a follower"
        );
    }
    // every replica streams the changes it applies, in order
    assert_eq!(
        watch.recv().await.unwrap(),
        MetaEvent::AgentRegistered { agent_id: 5 }
    );
    for i in 0..20 {
        match watch.recv().await.unwrap() {
            MetaEvent::TopicCreated { name, .. } => assert_eq!(name, format!("f{i}")),
            other => panic!("unexpected event {other:?}"),
        }
    }
    let err = ms
        .create_topic(CreateTopic::new("f0", 1, 1), false)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        MetaError::TopicAlreadyExists { name: "f0".into() },
        "validation errors travel back intact"
    );
    let ids: Vec<_> =
        futures::future::join_all(c.nodes.values().map(|m| m.allocate_producer_ids(100))).await;
    let mut ranges: Vec<_> = ids.into_iter().map(Result::unwrap).collect();
    ranges.sort_by_key(|r| r.start);
    assert!(
        ranges.windows(2).all(|w| w[0].end <= w[1].start),
        "no producer id handed out twice: {ranges:?}"
    );
    assert!(
        ms.staleness().is_some_and(|s| s < Duration::from_secs(5)),
        "a follower in contact knows its staleness"
    );
    ms.ensure_fresh(Duration::from_millis(1)).await.unwrap();
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learners_join_are_promoted_and_nodes_can_leave() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = |id: u64, bootstrap: Bootstrap| MetastoreConfig {
        node_id: id,
        dir: dirs[id as usize - 1].path().to_owned(),
        transport: Transport::Quic(QuicSettings::bind(
            "127.0.0.1:0".parse().unwrap(),
            common::node_tls(id),
        )),
        bootstrap,
        timing: common::timing(),
        agent_lease: common::AGENT_LEASE,
        ..MetastoreConfig::default()
    };
    let n1 = Metastore::start(config(1, Bootstrap::SingleNode))
        .await
        .unwrap();
    n1.register_agent(agent(1)).await.unwrap();
    n1.create_topic(CreateTopic::new("seed", 1, 1), false)
        .await
        .unwrap();
    let n2 = Metastore::start(config(2, Bootstrap::Join)).await.unwrap();
    let n3 = Metastore::start(config(3, Bootstrap::Join)).await.unwrap();
    assert!(n2.topic("seed").is_none());

    n1.add_learner(2, n2.raft_addr().unwrap().to_string())
        .await
        .unwrap();
    n1.add_learner(3, n3.raft_addr().unwrap().to_string())
        .await
        .unwrap();
    eventually(
        "learners receive the log and the membership",
        Duration::from_secs(10),
        || {
            n2.topic("seed").is_some()
                && n3.topic("seed").is_some()
                && n2.cluster().membership.learners == vec![2, 3]
        },
    )
    .await;
    assert_eq!(n2.cluster().cluster_id, n1.cluster().cluster_id);

    n2.promote_voters(BTreeSet::from([2, 3])).await.unwrap();
    eventually("three voters everywhere", Duration::from_secs(10), || {
        [&n1, &n2, &n3]
            .iter()
            .all(|m| m.cluster().membership.voters == vec![1, 2, 3])
    })
    .await;

    n2.remove_node(3).await.unwrap();
    eventually("node 3 is gone", Duration::from_secs(10), || {
        [&n1, &n2].iter().all(|m| {
            m.cluster().membership.voters == vec![1, 2]
                && m.cluster().membership.learners.is_empty()
        })
    })
    .await;
    n3.shutdown().await.unwrap();
    n2.create_topic(CreateTopic::new("two-voters", 1, 1), false)
        .await
        .unwrap();
    assert!(
        n1.topic("two-voters").is_some() || {
            n1.linearizable_barrier().await.unwrap();
            n1.topic("two-voters").is_some()
        }
    );
    n1.shutdown().await.unwrap();
    n2.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_missed_purged_entries_catches_up_from_a_snapshot() {
    let mut c = Cluster::quic_snapshotting(3, 20).await;
    let leader = c.leader().await;
    c.node(leader).register_agent(agent(1)).await.unwrap();
    let behind = c.nodes.keys().copied().find(|id| *id != leader).unwrap();
    c.kill(behind).await;
    let _alive: Vec<_> = c
        .nodes
        .values()
        .map(|m| m.keep_agent_alive(agent(1), Duration::from_millis(300)))
        .collect();
    for i in 0..120 {
        c.node(leader)
            .create_topic(CreateTopic::new(format!("s{i}"), 1, 1), false)
            .await
            .unwrap();
    }
    let lead = c.node(leader).clone();
    eventually("the leader purges its log", Duration::from_secs(20), || {
        lead.raft_metrics().purged.is_some_and(|p| p.index > 60)
    })
    .await;
    let purged = lead.raft_metrics().purged.unwrap().index;

    c.restart(behind).await;
    let back = c.node(behind).clone();
    eventually(
        "the lagging node holds every topic",
        Duration::from_secs(30),
        || (0..120).all(|i| back.topic(&format!("s{i}")).is_some()),
    )
    .await;
    let snap = back.raft_metrics().snapshot.map(|l| l.index);
    assert!(
        snap >= Some(purged),
        "entries up to {purged} came as a snapshot, got {snap:?}"
    );
    assert_eq!(back.topics(), lead.topics());
    c.shutdown().await;
}

/// Binds `addr` once the previous owner of the port has let it go.
async fn rebind(addr: std::net::SocketAddr) -> std::net::UdpSocket {
    let start = std::time::Instant::now();
    loop {
        match std::net::UdpSocket::bind(addr) {
            Ok(s) => return s,
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                panic!("cannot rebind {addr}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_outside_the_voters_joins_through_a_follower_and_a_restart_adds_it_once() {
    let c = Cluster::quic(3).await;
    let leader = c.leader().await;
    c.node(leader).register_agent(agent(1)).await.unwrap();
    c.node(leader)
        .create_topic(CreateTopic::new("before-join", 1, 1), false)
        .await
        .unwrap();
    // the joiner knows only a follower, which must hand the request to the leader
    let follower = c.nodes.keys().copied().find(|id| *id != leader).unwrap();
    let voters: BTreeMap<u64, String> = [(follower, c.addrs[&follower].clone())].into();
    let dir = tempfile::tempdir().unwrap();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let config = |socket| MetastoreConfig {
        node_id: 4,
        dir: dir.path().to_owned(),
        transport: common::quic(4, socket),
        bootstrap: Bootstrap::Join,
        timing: common::timing(),
        agent_lease: common::AGENT_LEASE,
        ..MetastoreConfig::default()
    };
    let n4 = Metastore::start(config(socket)).await.unwrap();
    assert!(!n4.is_member());
    n4.join(&voters, Duration::from_secs(30)).await.unwrap();
    n4.wait_ready(Duration::from_secs(20)).await.unwrap();
    for ms in c.nodes.values().chain([&n4]) {
        eventually(
            "node 4 is a learner everywhere and holds the log",
            Duration::from_secs(20),
            || {
                let m = ms.cluster().membership;
                m.learners == vec![4] && m.voters == vec![1, 2, 3]
            },
        )
        .await;
    }
    eventually("the learner holds the log", Duration::from_secs(20), || {
        n4.topic("before-join").is_some()
    })
    .await;
    // the learner's writes go to the leader like any member's
    n4.create_topic(CreateTopic::new("from-learner", 1, 1), false)
        .await
        .unwrap();
    let membership_before = c
        .node(leader)
        .raft_metrics()
        .membership_config
        .log_id()
        .to_owned();

    n4.shutdown().await.unwrap();
    drop(n4);
    let n4 = Metastore::start(config(rebind(addr).await)).await.unwrap();
    assert!(n4.is_member(), "its log names it a member");
    n4.join(&voters, Duration::from_secs(30)).await.unwrap();
    n4.wait_ready(Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        c.node(leader)
            .raft_metrics()
            .membership_config
            .log_id()
            .to_owned(),
        membership_before,
        "rejoining changed no membership"
    );
    assert_eq!(c.node(leader).cluster().membership.learners, vec![4]);
    n4.shutdown().await.unwrap();
    c.shutdown().await;
}

#[tokio::test]
async fn joining_without_a_reachable_voter_names_every_voter_asked() {
    let dir = tempfile::tempdir().unwrap();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // nothing listens there
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    drop(silent);
    let n = Metastore::start(MetastoreConfig {
        node_id: 5,
        dir: dir.path().to_owned(),
        transport: common::quic(5, socket),
        bootstrap: Bootstrap::Join,
        timing: common::timing(),
        ..MetastoreConfig::default()
    })
    .await
    .unwrap();
    let voters: BTreeMap<u64, String> = [(1, silent_addr.clone())].into();
    let err = n.join(&voters, Duration::from_secs(1)).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("voter 1 at {silent_addr}")),
        "{text}"
    );
    assert!(!n.is_member());
    n.shutdown().await.unwrap();
}
