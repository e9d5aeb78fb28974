//! What every native-protocol test here shares: a gateway on the real
//! backends, raw frames over TCP, and request builders.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use gateway::broker::BrokerConfig;
use gateway::native::quic::NativeCa;
use gateway::testing::{Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::records::RecordBatchDecoder;
use sdk::frame::{FrameHeader, HEADER_LEN};
use sdk::proto::{self, ErrorCode, Message};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The CA of every test gateway's QUIC certificate.
pub(crate) fn ca() -> &'static NativeCa {
    static CA: OnceLock<NativeCa> = OnceLock::new();
    CA.get_or_init(|| NativeCa::generate().unwrap())
}

pub(crate) async fn start(kind: Logs) -> (Gateway, Backends) {
    start_with(kind, BrokerConfig::default()).await
}

/// A gateway with the native protocol on TCP and QUIC (same port number),
/// frames of at most 1 MiB.
pub(crate) async fn start_with(kind: Logs, broker: BrokerConfig) -> (Gateway, Backends) {
    start_exactly(
        kind,
        BrokerConfig {
            max_request_bytes: 1 << 20,
            ..broker
        },
    )
    .await
}

/// [`start_with`] with `broker` as it is.
pub(crate) async fn start_exactly(kind: Logs, broker: BrokerConfig) -> (Gateway, Backends) {
    let backends = Backends::start(kind, 1).await;
    let opts = GatewayOptions {
        native_addr: Some("127.0.0.1:0".parse().unwrap()),
        native_tls: Some(
            ca().issue(&["localhost".into(), "127.0.0.1".into()])
                .unwrap(),
        ),
        shards: 2,
        broker,
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    assert_eq!(
        gw.native_quic_addr().unwrap(),
        gw.native_addr().unwrap(),
        "QUIC on the UDP port of the TCP listener's number"
    );
    (gw, backends)
}

pub(crate) async fn send<S: AsyncWrite + Unpin, M: Message>(s: &mut S, m: &M) {
    s.write_all(&m.to_frame()).await.unwrap();
}

/// The next frame: its operation and body; `None` once the server closed.
pub(crate) async fn next_frame<S: AsyncRead + Unpin>(s: &mut S) -> Option<(u8, Bytes)> {
    let mut head = [0u8; HEADER_LEN];
    tokio::time::timeout(Duration::from_secs(20), s.read_exact(&mut head))
        .await
        .expect("a frame or a close within 20 s")
        .ok()?;
    let h = FrameHeader::decode(&head, u32::MAX).unwrap();
    let mut body = vec![0u8; h.len as usize];
    s.read_exact(&mut body).await.unwrap();
    Some((h.op, Bytes::from(body)))
}

pub(crate) async fn recv<S: AsyncRead + Unpin, M: Message>(s: &mut S) -> M {
    let (op, body) = next_frame(s).await.expect("a response");
    if op == proto::op::ERROR {
        panic!("error frame: {:?}", proto::ErrorFrame::decode_body(body));
    }
    assert_eq!(op, M::OP, "operation of the response");
    M::decode_body(body).unwrap()
}

pub(crate) async fn call<S: AsyncRead + AsyncWrite + Unpin, Q: Message, R: Message>(
    s: &mut S,
    q: &Q,
) -> R {
    send(s, q).await;
    recv(s).await
}

pub(crate) async fn connect(gw: &Gateway) -> TcpStream {
    connect_to(gw.native_addr().unwrap()).await
}

pub(crate) async fn connect_to(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    say_hello(&mut s).await;
    s
}

pub(crate) async fn say_hello<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) {
    let hello: proto::HelloResponse = call(
        s,
        &proto::Hello {
            correlation: 1,
            min_version: 1,
            max_version: 9,
            client_id: "native-test".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(hello.error, ErrorCode::NONE);
    assert_eq!(
        hello.version,
        proto::MAX_VERSION,
        "the highest common version"
    );
    assert_eq!(hello.node_id, 1);
}

/// Expects an error frame with `code`, then the server closing.
pub(crate) async fn expect_closed_with<S: AsyncRead + Unpin>(
    s: &mut S,
    code: ErrorCode,
) -> proto::ErrorFrame {
    let (op, body) = next_frame(s).await.expect("an error frame");
    assert_eq!(op, proto::op::ERROR);
    let e = proto::ErrorFrame::decode_body(body).unwrap();
    assert_eq!(e.error, code, "{e:?}");
    assert!(next_frame(s).await.is_none(), "the connection is closed");
    e
}

pub(crate) fn values_of(records: &Bytes) -> Vec<(i64, String)> {
    let mut buf = records.clone();
    let mut out = Vec::new();
    while !buf.is_empty() {
        let set = RecordBatchDecoder::decode(&mut buf).unwrap();
        for r in set.records {
            let v = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
            out.push((r.offset, v.unwrap_or_default()));
        }
    }
    out
}

pub(crate) fn produce_req(
    correlation: u32,
    topic: &str,
    parts: Vec<(u32, Bytes)>,
) -> proto::Produce {
    proto::Produce {
        correlation,
        acks: -1,
        timeout_ms: 10_000,
        topics: vec![proto::ProduceTopic {
            name: topic.into(),
            partitions: parts
                .into_iter()
                .map(|(partition, batch)| proto::ProducePartition { partition, batch })
                .collect(),
        }],
    }
}

pub(crate) fn fetch_req(
    correlation: u32,
    topic: &str,
    partition: u32,
    offset: i64,
    wait: u32,
) -> proto::Fetch {
    proto::Fetch {
        correlation,
        max_wait_ms: wait,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![proto::FetchTopic {
            name: topic.into(),
            partitions: vec![proto::FetchPartition {
                partition,
                offset,
                max_bytes: 1 << 20,
            }],
        }],
    }
}
