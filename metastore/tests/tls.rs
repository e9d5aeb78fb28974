//! Mutual TLS between metastore nodes: only nodes with a certificate from
//! the cluster's CA take part.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::time::Duration;

use common::agent;
use metastore::{
    Bootstrap, CreateTopic, MetaError, Metastore, MetastoreConfig, QuicSettings, RaftTls, Transport,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};

fn cluster_ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn node_tls(ca: &CertifiedIssuer<'static, KeyPair>) -> RaftTls {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec![metastore::network::tls::SERVER_NAME.to_owned()]).unwrap();
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.signed_by(&key, ca).unwrap();
    RaftTls::Mutual {
        ca: ca.der().clone(),
        cert_chain: vec![cert.der().clone()],
        key: key.serialize_der(),
    }
}

fn config(
    id: u64,
    dir: &tempfile::TempDir,
    socket: UdpSocket,
    tls: RaftTls,
    bootstrap: Bootstrap,
) -> MetastoreConfig {
    let mut quic = QuicSettings::from_socket(socket).unwrap();
    quic.tls = tls;
    MetastoreConfig {
        node_id: id,
        dir: dir.path().to_owned(),
        transport: Transport::Quic(quic),
        bootstrap,
        timing: common::timing(),
        agent_lease: common::AGENT_LEASE,
        request_timeout: Duration::from_secs(3),
        ..MetastoreConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_nodes_with_a_cluster_certificate_take_part() {
    let ca = cluster_ca();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let sockets: Vec<_> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let addrs: Vec<String> = sockets
        .iter()
        .map(|s| s.local_addr().unwrap().to_string())
        .collect();
    let members: BTreeMap<u64, String> = [(1, addrs[0].clone()), (2, addrs[1].clone())].into();
    let mut sockets = sockets.into_iter();
    let n1 = Metastore::start(config(
        1,
        &dirs[0],
        sockets.next().unwrap(),
        node_tls(&ca),
        Bootstrap::Members(members.clone()),
    ))
    .await
    .unwrap();
    let n2 = Metastore::start(config(
        2,
        &dirs[1],
        sockets.next().unwrap(),
        node_tls(&ca),
        Bootstrap::Members(members),
    ))
    .await
    .unwrap();
    n1.wait_ready(Duration::from_secs(20)).await.unwrap();
    n2.register_agent(agent(1)).await.unwrap();
    n2.create_topic(CreateTopic::new("trusted", 1, 1), false)
        .await
        .unwrap();

    // a node whose certificate the CA never signed
    let rogue = Metastore::start(config(
        3,
        &dirs[2],
        sockets.next().unwrap(),
        RaftTls::SelfSigned,
        Bootstrap::Join,
    ))
    .await
    .unwrap();
    n1.add_learner(3, addrs[2].clone()).await.unwrap();
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
