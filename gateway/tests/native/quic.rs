//! The same protocol over QUIC: the same answers as over TCP, streams
//! that share the hello and never wait for each other, bad frames, untrusted
//! certificates, connection limits and shutdown.

use std::sync::Arc;
use std::time::Duration;

use gateway::broker::BrokerConfig;
use gateway::native::quic::NativeCa;
use gateway::testing::{record_batch, Logs};
use gateway::Gateway;
use kafka_protocol::records::Compression;
use sdk::frame::FrameHeader;
use sdk::proto::{self, ErrorCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::*;

/// A bidirectional QUIC stream as one byte stream.
pub(crate) type QuicStream = tokio::io::Join<quinn::RecvStream, quinn::SendStream>;

/// A raw QUIC client trusting `ca_pem` and offering `alpn`.
pub(crate) fn quic_endpoint(ca_pem: &str, alpn: &[u8]) -> quinn::Endpoint {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let config = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap(),
    ));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(config);
    endpoint
}

pub(crate) async fn quic_dial(gw: &Gateway) -> Result<quinn::Connection, quinn::ConnectionError> {
    let endpoint = quic_endpoint(ca().cert_pem(), gateway::native::quic::ALPN);
    endpoint
        .connect(gw.native_quic_addr().unwrap(), "localhost")
        .unwrap()
        .await
}

pub(crate) async fn open_stream(conn: &quinn::Connection) -> QuicStream {
    let (send, recv) = conn.open_bi().await.unwrap();
    tokio::io::join(recv, send)
}

/// A QUIC connection whose first stream said hello.
pub(crate) async fn connect_quic(gw: &Gateway) -> (quinn::Connection, QuicStream) {
    let conn = quic_dial(gw).await.unwrap();
    let mut s = open_stream(&conn).await;
    say_hello(&mut s).await;
    (conn, s)
}

/// Expects the server to close `conn` with application code `code`.
pub(crate) async fn expect_connection_closed(conn: &quinn::Connection, code: u32) {
    let why = tokio::time::timeout(Duration::from_secs(20), conn.closed())
        .await
        .expect("the connection closes");
    match why {
        quinn::ConnectionError::ApplicationClosed(c) => {
            assert_eq!(c.error_code, quinn::VarInt::from_u32(code), "{c:?}")
        }
        other => panic!("closed otherwise: {other:?}"),
    }
}

/// The same requests on any transport, and what came back, less what
/// differs between two runs by nature (the producer id, the topic name).
pub(crate) async fn scenario<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    topic: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let created: proto::CreateTopicResponse = call(
        s,
        &proto::CreateTopic {
            correlation: 10,
            name: topic.into(),
            partitions: 3,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    out.push(format!(
        "create {:?}",
        (created.0.correlation, created.0.error)
    ));
    let meta: proto::MetadataResponse = call(
        s,
        &proto::Metadata {
            correlation: 11,
            topics: vec![topic.into()],
        },
    )
    .await;
    out.push(format!("metadata nodes {:?}", meta.nodes));
    for t in &meta.topics {
        out.push(format!("metadata topic {:?}", (t.error, &t.partitions)));
    }
    let pid: proto::InitProducerResponse = call(s, &proto::InitProducer { correlation: 12 }).await;
    out.push(format!("init producer {:?}", pid.error));
    let batch = |values: &[&[u8]], seq: i32| {
        record_batch(
            values,
            false,
            Some((pid.producer_id, pid.producer_epoch, seq)),
            Compression::None,
        )
    };
    let first = vec![
        (0, batch(&[b"p0-a", b"p0-b"], 0)),
        (1, batch(&[b"p1-a"], 0)),
        (2, batch(&[b"p2-a", b"p2-b", b"p2-c"], 0)),
    ];
    // pipelined: the first produce, its retry (a duplicate) and the next
    // batch of partition 1, before any answer is read
    send(s, &produce_req(13, topic, first.clone())).await;
    send(s, &produce_req(14, topic, first)).await;
    send(s, &produce_req(15, topic, vec![(1, batch(&[b"p1-b"], 1))])).await;
    let mut produced = Vec::new();
    for _ in 0..3 {
        let p: proto::ProduceResponse = recv(s).await;
        let parts: Vec<_> = p.topics[0]
            .partitions
            .iter()
            .map(|q| (q.partition, q.error, q.base_offset))
            .collect();
        produced.push(format!("produce {} {parts:?}", p.correlation));
    }
    produced.sort();
    out.extend(produced);
    for partition in 0..3 {
        let f: proto::FetchResponse = call(s, &fetch_req(20, topic, partition, 0, 100)).await;
        let p = &f.topics[0].partitions[0];
        out.push(format!(
            "fetch {partition} {:?}",
            (
                p.error,
                p.high_watermark,
                p.log_start_offset,
                values_of(&p.records)
            )
        ));
    }
    let offsets: proto::ListOffsetsResponse = call(
        s,
        &proto::ListOffsets {
            correlation: 21,
            partitions: (0..3)
                .flat_map(|p| [(topic.to_owned(), p, -2), (topic.to_owned(), p, -1)])
                .collect(),
        },
    )
    .await;
    out.push(format!(
        "list offsets {:?}",
        offsets
            .partitions
            .iter()
            .map(|o| (o.partition, o.error, o.offset))
            .collect::<Vec<_>>()
    ));
    let committed: proto::CommitOffsetsResponse = call(
        s,
        &proto::CommitOffsets {
            correlation: 22,
            group: format!("{topic}-group"),
            offsets: (0..3)
                .map(|p| proto::CommittedOffset {
                    topic: topic.into(),
                    partition: p,
                    offset: i64::from(p) + 1,
                    metadata: format!("m{p}"),
                })
                .collect(),
            ..Default::default()
        },
    )
    .await;
    out.push(format!(
        "commit {:?}",
        committed
            .partitions
            .iter()
            .map(|(_, p, e)| (*p, *e))
            .collect::<Vec<_>>()
    ));
    let read_back: proto::FetchOffsetsResponse = call(
        s,
        &proto::FetchOffsets {
            correlation: 23,
            group: format!("{topic}-group"),
            partitions: (0..3).map(|p| (topic.to_owned(), p)).collect(),
        },
    )
    .await;
    out.push(format!(
        "fetch offsets {:?}",
        read_back
            .offsets
            .iter()
            .map(|(o, e)| (o.partition, o.offset, o.metadata.clone(), *e))
            .collect::<Vec<_>>()
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_scenario_gives_the_same_answers_over_tcp_and_quic() {
    let (gw, backends) = start(Logs::Disk).await;
    let mut tcp = connect(&gw).await;
    let over_tcp = scenario(&mut tcp, "scenario-tcp").await;
    let (conn, mut quic) = connect_quic(&gw).await;
    let over_quic = scenario(&mut quic, "scenario-quic").await;
    assert_eq!(over_tcp, over_quic);
    // and it did something: offsets were assigned, duplicates recognised
    assert!(
        over_quic.contains(&format!(
            "produce 14 {:?}",
            vec![
                (0, ErrorCode::NONE, 0),
                (1, ErrorCode::NONE, 0),
                (2, ErrorCode::NONE, 0)
            ]
        )),
        "{over_quic:#?}"
    );
    assert!(
        over_quic
            .iter()
            .any(|l| l.starts_with("fetch 1 ") && l.contains("p1-b")),
        "{over_quic:#?}"
    );
    // what QUIC wrote, TCP reads
    let f: proto::FetchResponse = call(&mut tcp, &fetch_req(30, "scenario-quic", 2, 0, 0)).await;
    assert_eq!(
        values_of(&f.topics[0].partitions[0].records),
        vec![(0, "p2-a".into()), (1, "p2-b".into()), (2, "p2-c".into())]
    );
    conn.close(0u32.into(), b"done");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn further_quic_streams_share_the_hello_and_never_wait_for_each_other() {
    let (gw, backends) = start(Logs::Disk).await;
    let (conn, mut first) = connect_quic(&gw).await;
    let _: proto::CreateTopicResponse = call(
        &mut first,
        &proto::CreateTopic {
            correlation: 2,
            name: "streams".into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    // a long poll on a second stream (no hello of its own)...
    let mut waiting = open_stream(&conn).await;
    send(&mut waiting, &fetch_req(1, "streams", 0, 0, 10_000)).await;
    // ...holds up neither a third stream nor the first
    let mut third = open_stream(&conn).await;
    let pong: proto::Pong = call(
        &mut third,
        &proto::Ping {
            correlation: 1,
            nonce: 3,
        },
    )
    .await;
    assert_eq!((pong.correlation, pong.nonce), (1, 3));
    let _: proto::ProduceResponse = call(
        &mut first,
        &produce_req(
            3,
            "streams",
            vec![(0, record_batch(&[b"wake"], false, None, Compression::None))],
        ),
    )
    .await;
    let fetched: proto::FetchResponse = recv(&mut waiting).await;
    assert_eq!(fetched.correlation, 1);
    assert_eq!(
        values_of(&fetched.topics[0].partitions[0].records),
        vec![(0, "wake".into())]
    );
    // a stream the client finishes is answered and finished; the
    // connection goes on
    third.shutdown().await.unwrap();
    assert!(next_frame(&mut third).await.is_none());
    let pong: proto::Pong = call(
        &mut first,
        &proto::Ping {
            correlation: 4,
            nonce: 4,
        },
    )
    .await;
    assert_eq!(pong.nonce, 4);
    // a hello on a further stream is one hello too many
    let mut again = open_stream(&conn).await;
    send(
        &mut again,
        &proto::Hello {
            correlation: 7,
            min_version: 1,
            max_version: 9,
            ..Default::default()
        },
    )
    .await;
    expect_closed_with(&mut again, ErrorCode::INVALID_REQUEST).await;
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_frame_over_quic_gets_an_error_frame_and_closes_only_its_connection() {
    let (gw, backends) = start(Logs::Disk).await;
    let (healthy, mut healthy_stream) = connect_quic(&gw).await;
    let mut tcp = connect(&gw).await;

    // wrong magic on a further stream of a connection that said hello
    let (conn, mut first) = connect_quic(&gw).await;
    let mut s = open_stream(&conn).await;
    s.write_all(&[0x00, 0x01, 0x02, 0, 0, 0, 0]).await.unwrap();
    expect_closed_with(&mut s, ErrorCode::BAD_FRAME).await;
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;
    assert!(
        next_frame(&mut first).await.is_none(),
        "its other streams went with it"
    );
    // anything before the hello, on the first stream
    let conn = quic_dial(&gw).await.unwrap();
    let mut s = open_stream(&conn).await;
    send(
        &mut s,
        &proto::Ping {
            correlation: 9,
            nonce: 1,
        },
    )
    .await;
    let e = expect_closed_with(&mut s, ErrorCode::HELLO_REQUIRED).await;
    assert_eq!(e.correlation, 9);
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;
    // a length over the limit, after a good hello
    let (conn, mut s) = connect_quic(&gw).await;
    s.write_all(
        &FrameHeader {
            op: proto::op::PING,
            len: u32::MAX,
        }
        .encode(),
    )
    .await
    .unwrap();
    expect_closed_with(&mut s, ErrorCode::FRAME_TOO_LARGE).await;
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_REFUSED).await;

    // the other connections never noticed
    for (s, n) in [(&mut healthy_stream as &mut QuicStream, 1)] {
        let pong: proto::Pong = call(
            s,
            &proto::Ping {
                correlation: 3,
                nonce: n,
            },
        )
        .await;
        assert_eq!(pong.nonce, n);
    }
    let pong: proto::Pong = call(
        &mut tcp,
        &proto::Ping {
            correlation: 3,
            nonce: 2,
        },
    )
    .await;
    assert_eq!(pong.nonce, 2);
    assert!(healthy.close_reason().is_none());
    let malformed = gw
        .broker()
        .metrics
        .malformed_requests
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(malformed >= 2, "counted like TCP's: {malformed}");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_or_another_protocol_is_refused() {
    let (gw, backends) = start(Logs::Disk).await;
    let url = format!("aero+quic://{}", gw.native_quic_addr().unwrap());
    // a CA that did not sign the server's certificate
    let stranger = NativeCa::generate().unwrap();
    let e = sdk::Client::builder(&url)
        .tls_ca_pem(stranger.cert_pem())
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_err();
    match &e {
        sdk::Error::Tls { reason, .. } => {
            assert!(reason.contains("UnknownIssuer"), "{reason}");
            assert!(reason.contains("tls_ca_file"), "says what to do: {reason}");
        }
        other => panic!("not a TLS error: {other:?}"),
    }
    assert!(!e.is_retriable());
    // the right CA, but a name the certificate does not carry
    let endpoint = quic_endpoint(ca().cert_pem(), gateway::native::quic::ALPN);
    let refused = endpoint
        .connect(gw.native_quic_addr().unwrap(), "elsewhere.example")
        .unwrap()
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("not valid for name"),
        "{refused}"
    );
    // no CA at all: the client says what it needs
    let e = sdk::Client::builder(&url).connect().await.unwrap_err();
    assert!(
        matches!(&e, sdk::Error::Config(m) if m.contains("tls_ca_file")),
        "{e}"
    );
    // a raw client trusting a stranger, and one speaking another protocol
    let endpoint = quic_endpoint(stranger.cert_pem(), gateway::native::quic::ALPN);
    let refused = endpoint
        .connect(gw.native_quic_addr().unwrap(), "localhost")
        .unwrap()
        .await
        .unwrap_err();
    assert!(
        matches!(refused, quinn::ConnectionError::TransportError(_)),
        "{refused:?}"
    );
    let endpoint = quic_endpoint(ca().cert_pem(), b"h3");
    let refused = endpoint
        .connect(gw.native_quic_addr().unwrap(), "localhost")
        .unwrap()
        .await
        .unwrap_err();
    assert!(
        matches!(refused, quinn::ConnectionError::ConnectionClosed(_)),
        "{refused:?}"
    );
    // accepting anything works, for trying things out
    let client = sdk::Client::builder(&url)
        .danger_accept_invalid_certs()
        .connect()
        .await
        .unwrap();
    client.ping().await.unwrap();
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_connection_counts_as_one_against_the_connection_limits() {
    let (gw, backends) = start_with(
        Logs::Disk,
        BrokerConfig {
            connections: gateway::connections::ConnectionLimits {
                max_connections_per_ip: 1,
                ..Default::default()
            },
            ..BrokerConfig::default()
        },
    )
    .await;
    let (conn, mut first) = connect_quic(&gw).await;
    // streams are not connections
    let mut second = open_stream(&conn).await;
    let pong: proto::Pong = call(
        &mut second,
        &proto::Ping {
            correlation: 1,
            nonce: 1,
        },
    )
    .await;
    assert_eq!(pong.nonce, 1);
    assert_eq!(gw.broker().connections.open_count(), 1);
    // another connection from the address, QUIC or TCP, is refused
    let refused = quic_dial(&gw).await.unwrap_err();
    assert!(
        matches!(&refused, quinn::ConnectionError::ConnectionClosed(c)
            if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED),
        "{refused:?}"
    );
    let mut tcp = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(closed, Ok(0) | Err(_)), "closed at once");
    // once the QUIC connection closes, its place is free again
    drop(first.shutdown().await);
    conn.close(0u32.into(), b"bye");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while gw.broker().connections.open_count() > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the place is freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (conn, _s) = connect_quic(&gw).await;
    conn.close(0u32.into(), b"bye");
    gw.shutdown().await;
    backends.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_quic_requests_in_flight_then_closes() {
    let (gw, backends) = start(Logs::Disk).await;
    let (conn, mut s) = connect_quic(&gw).await;
    let _: proto::CreateTopicResponse = call(
        &mut s,
        &proto::CreateTopic {
            correlation: 2,
            name: "closing".into(),
            partitions: 1,
            replication_factor: -1,
            configs: vec![],
        },
    )
    .await;
    // a long poll under way when shutdown begins ends early, answered
    send(&mut s, &fetch_req(3, "closing", 0, 0, 30_000)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let addr = gw.native_quic_addr().unwrap();
    let stopped = tokio::spawn(gw.shutdown());
    let fetched: proto::FetchResponse = recv(&mut s).await;
    assert_eq!(fetched.correlation, 3);
    assert!(next_frame(&mut s).await.is_none());
    expect_connection_closed(&conn, gateway::native::quic::CLOSE_SHUTDOWN).await;
    tokio::time::timeout(Duration::from_secs(15), stopped)
        .await
        .expect("shutdown ends")
        .unwrap();
    // the UDP port is free again
    std::net::UdpSocket::bind(addr).expect("the endpoint let go of its port");
    backends.stop().await;
}
