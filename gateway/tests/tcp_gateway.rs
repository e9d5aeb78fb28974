//! A gateway on a real socket over the real backends (disk logs, embedded
//! metastore): fetched records leave through sendfile, frames are
//! size-capped, a bad frame closes only its connection, connections are
//! capped and closed when idle or when a client stops reading, and /health
//! and /metrics answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::{Bytes, BytesMut};
use gateway::broker::BrokerConfig;
use gateway::connections::ConnectionLimits;
use gateway::testing::{record_batch, Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{add_users, api_versions_code, metadata_closes, roundtrip};

async fn start_with(broker: BrokerConfig) -> (Gateway, Backends) {
    let backends = Backends::start(Logs::Disk, broker.node_id).await;
    let opts = GatewayOptions {
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        shards: 2,
        broker,
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    (gw, backends)
}

async fn start() -> (Gateway, Backends) {
    start_with(BrokerConfig {
        max_request_bytes: 64 * 1024,
        ..Default::default()
    })
    .await
}

fn batch(n: usize) -> Bytes {
    let values: Vec<String> = (0..n).map(|i| format!("value-{i}")).collect();
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    record_batch(&values, false, None, Compression::Snappy)
}

async fn create_topic(s: &mut TcpStream) {
    let created: CreateTopicsResponse = roundtrip(
        s,
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic())
            .with_num_partitions(1)
            .with_replication_factor(1)]),
    )
    .await;
    assert_eq!(created.topics[0].error_code, 0);
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("it"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_written_to_disk_are_fetched_over_tcp_byte_for_byte() {
    let (gw, _backends) = start().await;
    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    create_topic(&mut s).await;
    let sent = batch(20);
    for _ in 0..3 {
        let produced: ProduceResponse = roundtrip(
            &mut s,
            ApiKey::Produce,
            9,
            &ProduceRequest::default()
                .with_acks(-1)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic())
                    .with_partition_data(vec![
                        PartitionProduceData::default().with_records(Some(sent.clone()))
                    ])]),
        )
        .await;
        assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    }
    for version in [4, 11, 12] {
        let fetched: FetchResponse = roundtrip(
            &mut s,
            ApiKey::Fetch,
            version,
            &FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        FetchPartition::default().with_partition_max_bytes(1 << 20)
                    ])]),
        )
        .await;
        let p = &fetched.responses[0].partitions[0];
        assert_eq!(p.high_watermark, 60);
        let mut records = p.records.clone().unwrap();
        assert_eq!(records.len(), 3 * sent.len(), "three whole batches");
        let sets = RecordBatchDecoder::decode_all(&mut records).unwrap();
        let offsets: Vec<i64> = sets
            .iter()
            .flat_map(|s| s.records.iter().map(|r| r.offset))
            .collect();
        assert_eq!(offsets, (0..60).collect::<Vec<_>>());
    }
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_frame_closes_only_its_own_connection() {
    let (gw, _backends) = start().await;
    let mut bad = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let mut good = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    bad.write_all(&(1_000_000i32).to_be_bytes()).await.unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(
        bad.read(&mut buf).await.unwrap(),
        0,
        "closed without reading the body"
    );
    assert_eq!(
        api_versions_code(&mut good).await,
        0,
        "the other client is unaffected"
    );
    gw.shutdown().await;
}

/// Before a client authenticated, a request over 512 KiB closes its
/// connection (Kafka's `sasl.server.max.receive.size`); only ApiVersions
/// and the SASL requests are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_sasl_on_an_unauthenticated_client_may_send_only_small_sasl_requests() {
    let (gw, _backends) = start_with(BrokerConfig {
        sasl_mechanisms: vec![gateway::sasl::Mechanism::Plain],
        ..Default::default()
    })
    .await;
    let malformed = || {
        gw.broker()
            .metrics
            .malformed_requests
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = malformed();
    let mut big = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    big.write_all(&(600_000i32).to_be_bytes()).await.unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(big.read(&mut buf).await.unwrap(), 0, "closed unread");
    assert_eq!(
        malformed(),
        before + 1,
        "refused for its size, not left to the idle timeout"
    );

    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    assert_eq!(
        api_versions_code(&mut s).await,
        0,
        "ApiVersions is served before authentication"
    );
    assert!(
        metadata_closes(&mut s).await,
        "Metadata before authentication closes the connection"
    );
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_answer_over_http() {
    let (gw, _backends) = start().await;
    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let _: ApiVersionsResponse = roundtrip(
        &mut s,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    let get = |path: &'static str| {
        let addr = gw.http_addr().unwrap();
        async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).await.unwrap();
            out
        }
    };
    let health = get("/health").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let metrics = get("/metrics").await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("aerostream_kafka_requests_total "))
        .expect("request counter");
    let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(n >= 1, "{line}");
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_a_waiting_long_poll_before_closing() {
    let (gw, _backends) = start().await;
    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    create_topic(&mut s).await;
    let poll = tokio::spawn(async move {
        let resp: FetchResponse = roundtrip(
            &mut s,
            ApiKey::Fetch,
            12,
            &FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(600_000)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        FetchPartition::default().with_partition_max_bytes(1 << 20)
                    ])]),
        )
        .await;
        resp
    });
    // Wait until the fetch is parked in the broker.
    while gw
        .broker()
        .metrics
        .in_flight
        .load(std::sync::atomic::Ordering::SeqCst)
        == 0
    {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    gw.shutdown().await;
    // A hang guard, not a speed check: the answer must come rather than wait ten minutes.
    let resp = tokio::time::timeout(std::time::Duration::from_secs(60), poll)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
}

/// Reads until the server closes the connection (a hang guard bounds it).
async fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(30), s.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

async fn metric(gw: &Gateway, name: &str) -> u64 {
    let mut c = TcpStream::connect(gw.http_addr().unwrap()).await.unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).await.unwrap();
    out.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_max_connections_are_closed_and_counted() {
    let (gw, _backends) = start_with(BrokerConfig {
        connections: ConnectionLimits {
            max_connections: 2,
            ..ConnectionLimits::default()
        },
        ..Default::default()
    })
    .await;
    let mut a = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let mut b = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    for s in [&mut a, &mut b] {
        let v: ApiVersionsResponse =
            roundtrip(s, ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).await;
        assert_eq!(v.error_code, 0);
    }
    let mut third = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    assert!(
        closed_by_server(&mut third).await,
        "the third connection is refused"
    );
    assert_eq!(
        metric(
            &gw,
            "aerostream_connections_refused_total{limit=\"max.connections\"}"
        )
        .await,
        1
    );
    drop(a);
    // Once a place frees up, clients get in again.
    let mut tries = 0;
    loop {
        let mut again = TcpStream::connect(gw.kafka_addr()).await.unwrap();
        let mut body = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::ApiVersions as i16)
            .with_request_api_version(3)
            .with_correlation_id(42)
            .encode(&mut body, ApiKey::ApiVersions.request_header_version(3))
            .unwrap();
        ApiVersionsRequest::default().encode(&mut body, 3).unwrap();
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let mut len = [0u8; 4];
        if again.write_all(&frame).await.is_ok() && again.read_exact(&mut len).await.is_ok() {
            break;
        }
        tries += 1;
        assert!(tries < 100, "a freed place is never reused");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_after_connections_max_idle_ms() {
    let (gw, _backends) = start_with(BrokerConfig {
        connections: ConnectionLimits {
            idle_timeout: std::time::Duration::from_millis(300),
            ..ConnectionLimits::default()
        },
        ..Default::default()
    })
    .await;
    let mut idle = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let _: ApiVersionsResponse = roundtrip(
        &mut idle,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    // Half a frame and then silence: a slow client cannot hold the connection either.
    let mut slow = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    slow.write_all(&[0, 0, 0, 40, 0, 18]).await.unwrap();
    assert!(closed_by_server(&mut idle).await);
    assert!(closed_by_server(&mut slow).await);
    assert!(metric(&gw, "aerostream_connections_idle_closed_total").await >= 2);
    gw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_its_response_is_disconnected() {
    let (gw, _backends) = start_with(BrokerConfig {
        connections: ConnectionLimits {
            write_timeout: std::time::Duration::from_millis(500),
            ..ConnectionLimits::default()
        },
        ..Default::default()
    })
    .await;
    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    create_topic(&mut s).await;
    let value = Bytes::from(vec![7u8; 900 * 1024]);
    for _ in 0..40 {
        let one = record_batch(&[&value[..]], false, None, Compression::None);
        let produced: ProduceResponse = roundtrip(
            &mut s,
            ApiKey::Produce,
            9,
            &ProduceRequest::default().with_acks(1).with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic())
                    .with_partition_data(vec![
                        PartitionProduceData::default().with_records(Some(one))
                    ]),
            ]),
        )
        .await;
        assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    }
    // Ask for 36 MB and never read the answer.
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(12)
        .with_correlation_id(1)
        .encode(&mut body, ApiKey::Fetch.request_header_version(12))
        .unwrap();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic())
            .with_partitions(vec![
                FetchPartition::default().with_partition_max_bytes(50 << 20)
            ])])
        .encode(&mut body, 12)
        .unwrap();
    s.write_all(&(body.len() as i32).to_be_bytes())
        .await
        .unwrap();
    s.write_all(&body).await.unwrap();
    let mut waited = 0;
    while metric(&gw, "aerostream_connections_write_timeouts_total").await == 0 {
        waited += 1;
        assert!(waited < 600, "the stalled response is never given up");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    gw.shutdown().await;
}

/// PLAIN over a socket: a handshake and the user's password.
async fn plain_login(s: &mut TcpStream, user: &str, password: &str) -> SaslAuthenticateResponse {
    let hs: SaslHandshakeResponse = roundtrip(
        s,
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    )
    .await;
    assert_eq!(hs.error_code, 0);
    let token = format!("\0{user}\0{password}");
    roundtrip(
        s,
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
    )
    .await
}

/// KIP-368: with a session lifetime, SaslAuthenticate says how long the
/// session lasts; the client may authenticate again on the connection (as
/// the same principal only), and one that does not is closed once the
/// session ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_session_ends_unless_the_client_authenticates_again_as_itself() {
    let (gw, backends) = start_with(BrokerConfig {
        sasl_mechanisms: vec![gateway::sasl::Mechanism::Plain],
        sasl_max_session: Some(std::time::Duration::from_millis(2000)),
        ..Default::default()
    })
    .await;
    add_users(&backends.meta, &["alice", "bob"], "pw").await;
    let counter = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let metrics = &gw.broker().metrics;

    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let first = plain_login(&mut s, "alice", "pw").await;
    assert_eq!((first.error_code, first.session_lifetime_ms), (0, 2000));
    let again = plain_login(&mut s, "alice", "pw").await;
    assert_eq!(again.error_code, 0);
    assert_eq!(counter(&metrics.sasl_reauthentications), 1);
    assert_eq!(
        api_versions_code(&mut s).await,
        0,
        "served after re-authenticating"
    );
    let other = plain_login(&mut s, "bob", "pw").await;
    assert_eq!(
        other.error_code,
        kafka_protocol::ResponseError::SaslAuthenticationFailed.code(),
        "a connection keeps its principal"
    );

    let mut idle = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    assert_eq!(plain_login(&mut idle, "alice", "pw").await.error_code, 0);
    tokio::time::sleep(std::time::Duration::from_millis(2300)).await;
    assert!(
        metadata_closes(&mut idle).await,
        "closed: its session ended"
    );
    assert_eq!(counter(&metrics.sasl_expired), 1);
    gw.shutdown().await;
}

/// An agent binds its listeners, registers with the metastore, then opens
/// them: a client connecting in between is answered only once it is open
/// (it waits in the listen backlog), so it never meets an agent the
/// cluster does not know yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_gateway_answers_its_first_clients_once_opened() {
    let backends = Backends::start(Logs::Disk, BrokerConfig::default().node_id).await;
    let opts = GatewayOptions {
        shards: 2,
        hold_clients: true,
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let early = tokio::spawn(async move {
        let code = api_versions_code(&mut s).await;
        (code, s)
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!early.is_finished(), "answered while held");
    gw.open_to_clients();
    let (code, _s) = tokio::time::timeout(std::time::Duration::from_secs(10), early)
        .await
        .expect("answered once opened")
        .unwrap();
    assert_eq!(code, 0);
    let mut later = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    assert_eq!(api_versions_code(&mut later).await, 0);
}
