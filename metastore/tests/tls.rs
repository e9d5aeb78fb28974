//! Mutual TLS between metastore nodes: only nodes with a certificate from
//! the cluster's CA, for their own node id, take part.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::time::Duration;

use common::{agent, eventually};
use metastore::network::certs::create_cluster_certificates;
use metastore::{
    Bootstrap, ClusterCa, CreateTopic, MetaError, Metastore, MetastoreConfig, QuicSettings,
    RaftTls, Transport,
};
use metastore::{ClusterControl, Topics};

fn config(
    id: u64,
    dir: &tempfile::TempDir,
    socket: UdpSocket,
    tls: RaftTls,
    bootstrap: Bootstrap,
) -> MetastoreConfig {
    MetastoreConfig {
        node_id: id,
        dir: dir.path().to_owned(),
        transport: Transport::Quic(QuicSettings::from_socket(socket, tls).unwrap()),
        bootstrap,
        timing: common::timing(),
        agent_lease: common::AGENT_LEASE,
        request_timeout: Duration::from_secs(3),
        ..MetastoreConfig::default()
    }
}

fn sockets(n: usize) -> (Vec<UdpSocket>, Vec<String>) {
    let sockets: Vec<_> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let addrs = sockets
        .iter()
        .map(|s| s.local_addr().unwrap().to_string())
        .collect();
    (sockets, addrs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_with_certificates_from_files_elect_and_replicate() {
    let certs = tempfile::tempdir().unwrap();
    create_cluster_certificates(certs.path(), [1, 2, 3]).unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (sockets, addrs) = sockets(3);
    let members: BTreeMap<u64, String> = (1..=3).zip(addrs).collect();
    let mut nodes = Vec::new();
    for (i, socket) in sockets.into_iter().enumerate() {
        let id = i as u64 + 1;
        let tls = RaftTls::load(certs.path(), id).unwrap();
        let cfg = config(
            id,
            &dirs[i],
            socket,
            tls,
            Bootstrap::Members(members.clone()),
        );
        nodes.push(Metastore::start(cfg).await.unwrap());
    }
    for n in &nodes {
        n.wait_ready(Duration::from_secs(20)).await.unwrap();
    }
    nodes[2].register_agent(agent(1)).await.unwrap();
    nodes[1]
        .create_topic(CreateTopic::new("replicated", 1, 1), false)
        .await
        .unwrap();
    for n in &nodes {
        eventually(
            "every node holds the topic",
            Duration::from_secs(10),
            || n.topic("replicated").is_some(),
        )
        .await;
    }
    for n in &nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_node_refuses_to_start_with_another_nodes_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (mut sockets, addrs) = sockets(1);
    let members: BTreeMap<u64, String> = [(3, addrs[0].clone())].into();
    let err = Metastore::start(config(
        3,
        &dir,
        sockets.remove(0),
        common::node_tls(2),
        Bootstrap::Members(members),
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&err, MetaError::InvalidSettings { reason } if reason.contains("node-3.aerostream")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_certificate_from_another_ca_gets_nothing_and_changes_nothing() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (sockets, addrs) = sockets(3);
    let members: BTreeMap<u64, String> = [(1, addrs[0].clone()), (2, addrs[1].clone())].into();
    let mut sockets = sockets.into_iter();
    let n1 = Metastore::start(config(
        1,
        &dirs[0],
        sockets.next().unwrap(),
        common::node_tls(1),
        Bootstrap::Members(members.clone()),
    ))
    .await
    .unwrap();
    let n2 = Metastore::start(config(
        2,
        &dirs[1],
        sockets.next().unwrap(),
        common::node_tls(2),
        Bootstrap::Members(members),
    ))
    .await
    .unwrap();
    n1.wait_ready(Duration::from_secs(20)).await.unwrap();
    n2.register_agent(agent(1)).await.unwrap();
    n2.create_topic(CreateTopic::new("trusted", 1, 1), false)
        .await
        .unwrap();

    // a well-formed certificate for node 3, from a CA the cluster never trusted
    let rogue_ca = ClusterCa::generate().unwrap();
    let rogue_tls = rogue_ca.issue(3).unwrap().tls(&rogue_ca);
    let rogue = Metastore::start(config(
        3,
        &dirs[2],
        sockets.next().unwrap(),
        rogue_tls,
        Bootstrap::Join,
    ))
    .await
    .unwrap();
    n1.add_learner(3, addrs[2].clone()).await.unwrap();
    // the leader keeps trying; give it a few rounds of replication
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        rogue.topic("trusted").is_none(),
        "the cluster refuses to replicate to an untrusted node"
    );
    let err = rogue
        .create_topic(CreateTopic::new("forged", 1, 1), false)
        .await
        .unwrap_err();
    assert!(matches!(err, MetaError::NotLeader { .. }), "{err}");
    assert!(n1.topic("forged").is_none());
    assert!(n1.topic("trusted").is_some());
    for ms in [&rogue, &n1, &n2] {
        ms.shutdown().await.unwrap();
    }
}
