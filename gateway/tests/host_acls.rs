//! ACL hosts on dual-stack listeners: an IPv4 client of a listener bound to
//! `[::]` arrives as `::ffff:a.b.c.d`, and an ACL names it `a.b.c.d`. A
//! DENY for the IPv4 address must hold on the Kafka and the native TCP
//! listeners alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use gateway::broker::BrokerConfig;
use gateway::testing::{record_batch, Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use metastore::acl::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};
use metastore::{CreateTopic, Security, Topics};
use sdk::frame::{FrameHeader, HEADER_LEN};
use sdk::proto::{self, ErrorCode, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::roundtrip;

const TOPIC: &str = "ledger";

/// Kafka and native listeners on `[::]`, ACLs on; everyone may do anything
/// with the topic, but nobody may write to it from 127.0.0.1.
async fn start() -> (Gateway, Backends) {
    let backends = Backends::start(Logs::Disk, 1).await;
    let any: SocketAddr = "[::]:0".parse().unwrap();
    let opts = GatewayOptions {
        kafka_addr: any,
        native_addr: Some(any),
        broker: BrokerConfig {
            authz: security::authz::AuthzConfig {
                enabled: true,
                superusers: Vec::new(),
                allow_if_no_acl: false,
            },
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    backends
        .meta
        .create_topic(
            CreateTopic {
                name: TOPIC.into(),
                partitions: 1,
                replication_factor: 1,
                ..CreateTopic::default()
            },
            false,
        )
        .await
        .unwrap();
    let binding = |permission, operation, host: &str| AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: TOPIC.into(),
        pattern: PatternType::Literal,
        principal: "User:*".into(),
        host: host.into(),
        operation,
        permission,
    };
    let made = backends
        .meta
        .create_acls(vec![
            binding(AclPermission::Allow, AclOperation::All, "*"),
            binding(AclPermission::Deny, AclOperation::Write, "127.0.0.1"),
        ])
        .await
        .unwrap();
    assert!(made.iter().all(Result::is_ok));
    (gw, backends)
}

fn on(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

async fn kafka_produce(addr: SocketAddr) -> i16 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let produced: ProduceResponse = roundtrip(
        &mut s,
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(record_batch(
                        &[b"entry"],
                        false,
                        None,
                        Compression::None,
                    )))])]),
    )
    .await;
    produced.responses[0].partition_responses[0].error_code
}

async fn native_call<Q: Message, R: Message>(s: &mut TcpStream, q: &Q) -> R {
    s.write_all(&q.to_frame()).await.unwrap();
    let mut head = [0u8; HEADER_LEN];
    tokio::time::timeout(Duration::from_secs(20), s.read_exact(&mut head))
        .await
        .expect("an answer within 20 s")
        .unwrap();
    let h = FrameHeader::decode(&head, u32::MAX).unwrap();
    let mut body = vec![0u8; h.len as usize];
    s.read_exact(&mut body).await.unwrap();
    assert_eq!(
        h.op,
        R::OP,
        "{:?}",
        proto::ErrorFrame::decode_body(body.clone().into())
    );
    R::decode_body(Bytes::from(body)).unwrap()
}

async fn native_produce(addr: SocketAddr) -> ErrorCode {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let hello: proto::HelloResponse = native_call(
        &mut s,
        &proto::Hello {
            correlation: 1,
            min_version: 1,
            max_version: proto::MAX_VERSION,
            client_id: "host-acl-test".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(hello.error, ErrorCode::NONE);
    let produced: proto::ProduceResponse = native_call(
        &mut s,
        &proto::Produce {
            correlation: 2,
            acks: -1,
            timeout_ms: 10_000,
            topics: vec![proto::ProduceTopic {
                name: TOPIC.into(),
                partitions: vec![proto::ProducePartition {
                    partition: 0,
                    batch: record_batch(&[b"entry"], false, None, Compression::None),
                }],
            }],
        },
    )
    .await;
    produced.topics[0].partitions[0].error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_for_an_ipv4_host_holds_on_a_dual_stack_kafka_listener() {
    let (gw, _backends) = start().await;
    let port = gw.kafka_addr().port();
    assert_eq!(
        kafka_produce(on("127.0.0.1", port)).await,
        ResponseError::TopicAuthorizationFailed.code(),
        "127.0.0.1 may not write"
    );
    // the same listener over IPv6: the DENY does not name ::1
    assert_eq!(kafka_produce(on("::1", port)).await, 0);
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_for_an_ipv4_host_holds_on_a_dual_stack_native_listener() {
    let (gw, _backends) = start().await;
    let port = gw.native_addr().unwrap().port();
    assert_eq!(
        native_produce(on("127.0.0.1", port)).await,
        ErrorCode::UNAUTHORIZED,
        "127.0.0.1 may not write"
    );
    assert_eq!(native_produce(on("::1", port)).await, ErrorCode::NONE);
    gw.shutdown().await;
}
