//! Who may forward requests to an agent: the owner serves a forwarded
//! request as the principal the forwarder names, so the forwarder must be
//! a current member of the cluster, not merely hold a certificate from the
//! cluster's CA (a node that never joined, or was removed, may hold one).
//! Real metastores on QUIC with mutual TLS; the outsider is a node of its
//! own one-node cluster holding a certificate the same CA issued.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use dataplane::backend::disk::DiskLogFactory;
use gateway::broker::BrokerConfig;
use gateway::forward::client::{ForwardCounters, Forwarder};
use gateway::forward::Origin;
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use metastore::network::certs::create_cluster_certificates;
use metastore::{
    AgentAddrs, AgentRegistration, Bootstrap, ClusterControl, Metastore, MetastoreConfig,
    QuicSettings, RaftTiming, RaftTls, Topics, Transport,
};

const VERSION: i16 = 7;

/// A metastore on QUIC that is the only member of its own cluster, with
/// the forwarding protocol on its cluster endpoint.
async fn lone_node(certs: &std::path::Path, id: u64, data: &std::path::Path) -> Metastore {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    let mut quic = QuicSettings::from_socket(socket, RaftTls::load(certs, id).unwrap()).unwrap();
    quic.service_alpns = vec![gateway::forward::ALPN.to_vec()];
    let meta = Metastore::start(MetastoreConfig {
        node_id: id,
        dir: data.join("meta"),
        transport: Transport::Quic(quic),
        bootstrap: Bootstrap::Members(BTreeMap::from([(id, addr)])),
        timing: RaftTiming::relaxed(),
        // the agents registered here never heartbeat: a lease that lapsed
        // while a loaded machine runs the test would fence agent 1, and the
        // member's CreateTopics would find no live agent to hold its topic
        agent_lease: Duration::from_secs(3600),
        ..MetastoreConfig::default()
    })
    .await
    .unwrap();
    meta.wait_ready(Duration::from_secs(30)).await.unwrap();
    meta
}

/// Registers agent `id` at the cluster address `quic` in `meta`.
async fn register(meta: &Metastore, id: u64, quic: String) {
    meta.register_agent(AgentRegistration {
        id,
        addrs: AgentAddrs {
            connect: None,
            kafka: None,
            native: None,
            quic: Some(quic),
        },
        rack: None,
        instance: None,
    })
    .await
    .unwrap();
}

/// A CreateTopics request frame (header and body, no size prefix).
fn create_topics(topic: &str) -> Vec<u8> {
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::CreateTopics as i16)
        .with_request_api_version(VERSION)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("admin-tool")))
        .encode(
            &mut frame,
            ApiKey::CreateTopics.request_header_version(VERSION),
        )
        .unwrap();
    CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(10_000)
        .encode(&mut frame, VERSION)
        .unwrap();
    frame.to_vec()
}

/// Forwards CreateTopics for `topic` to agent 1 through `via`'s cluster
/// endpoint, as `User:admin`; the topic's error code, or why the owner
/// gave no answer.
async fn forward_create(via: &Metastore, topic: &str) -> Result<i16, String> {
    let forwarder = Forwarder::new(via.clone(), Arc::new(ForwardCounters::default()), 1 << 20);
    let origin = Origin {
        host: "/10.0.0.7",
        principal: "User:admin",
    };
    let answer = forwarder
        .call(
            1,
            origin,
            &create_topics(topic),
            None,
            Duration::from_secs(10),
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no answer")?;
    let mut buf = answer;
    ResponseHeader::decode(
        &mut buf,
        ApiKey::CreateTopics.response_header_version(VERSION),
    )
    .unwrap();
    let resp = CreateTopicsResponse::decode(&mut buf, VERSION).unwrap();
    Ok(resp.topics[0].error_code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_the_clusters_ca_for_a_node_that_is_no_member_cannot_forward() {
    let certs = tempfile::tempdir().unwrap();
    create_cluster_certificates(certs.path(), [1, 99]).unwrap();
    let (data1, data99) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    // agent 1: the only member of its cluster, forwarding on, ACLs on with
    // `User:admin` its superuser
    let meta1 = lone_node(certs.path(), 1, data1.path()).await;
    let addr1 = meta1.raft_addr().unwrap().to_string();
    let logs = Arc::new(DiskLogFactory::new(data1.path().join("log")).unwrap());
    let opts = GatewayOptions {
        broker: BrokerConfig {
            node_id: 1,
            authz: security::authz::AuthzConfig {
                enabled: true,
                superusers: vec!["User:admin".into()],
                allow_if_no_acl: false,
            },
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, meta1.clone(), logs).await.unwrap();
    gw.start_forwarding().unwrap();
    register(&meta1, 1, addr1.clone()).await;

    // node 99 holds a certificate the cluster's CA issued, but never joined
    let outsider = lone_node(certs.path(), 99, data99.path()).await;
    register(&outsider, 1, addr1).await;
    assert!(!meta1.has_member(99));
    let refused = forward_create(&outsider, "planted").await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(meta1.topic("planted").is_none(), "nothing was created");
    assert_eq!(
        gw.broker()
            .forward_counters
            .served
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );

    // a member's forwarded request is served as the principal it names
    assert_eq!(forward_create(&meta1, "allowed").await, Ok(0));
    assert!(meta1.topic("allowed").is_some());

    gw.shutdown().await;
    for m in [outsider, meta1] {
        m.shutdown().await.unwrap();
    }
}
