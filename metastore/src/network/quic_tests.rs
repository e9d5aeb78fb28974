use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::network::certs::ClusterCa;
use crate::network::{ForwardRequest, ForwardResponse, RpcRequest};

/// Answers every request and remembers who sent it.
#[derive(Default)]
struct Recorder {
    from: Mutex<Vec<NodeId>>,
}

impl RpcHandler for Recorder {
    fn handle(self: Arc<Self>, envelope: Envelope) -> BoxFuture<'static, RpcResponse> {
        self.from.lock().push(envelope.from);
        Box::pin(async { RpcResponse::Forward(Ok(ForwardResponse::ReadIndex { index: Some(7) })) })
    }
}

fn loopback() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").expect("bind")
}

/// Node `id` of `ca`, serving into a recorder.
fn server(ca: &ClusterCa, id: NodeId) -> (QuicTransport, Arc<Recorder>, String) {
    let tls = ca.issue(id).expect("issue").tls(ca);
    let mut settings = QuicSettings::from_socket(loopback(), tls).expect("settings");
    let transport = QuicTransport::bind(&mut settings, id).expect("bind");
    let recorder = Arc::new(Recorder::default());
    let _serving = transport.serve(id, recorder.clone());
    let addr = transport.local_addr().expect("addr").to_string();
    (transport, recorder, addr)
}

/// A caller that presents `tls`'s certificate (or none) and trusts `tls`'s CA.
fn caller(tls: &RaftTls, present_certificate: bool) -> QuicTransport {
    let client = if present_certificate {
        tls::client_crypto(tls)
    } else {
        tls::client_crypto_without_certificate(tls)
    };
    let (server, client) = tls::quic_configs(
        tls::server_crypto(tls).expect("server crypto"),
        client.expect("client crypto"),
    )
    .expect("configs");
    QuicTransport::with_configs(loopback(), server, client).expect("endpoint")
}

async fn ask(
    client: &QuicTransport,
    addr: &str,
    from: NodeId,
    to: NodeId,
) -> Result<RpcResponse, TransportError> {
    let envelope = Envelope {
        from,
        to,
        body: RpcRequest::Forward(ForwardRequest::ReadIndex),
    };
    tokio::time::timeout(Duration::from_secs(20), client.call(addr, envelope))
        .await
        .expect("the call ends")
}

fn handled(r: &Result<RpcResponse, TransportError>) -> bool {
    matches!(r, Ok(RpcResponse::Forward(Ok(_))))
}

#[tokio::test]
async fn a_member_is_served_under_its_own_node_id() {
    let ca = ClusterCa::generate().expect("ca");
    let (_server, seen, addr) = server(&ca, 1);
    let client = caller(&ca.issue(2).expect("issue").tls(&ca), true);
    let r = ask(&client, &addr, 2, 1).await;
    assert!(handled(&r), "{r:?}");
    assert_eq!(*seen.from.lock(), vec![2]);
}

#[tokio::test]
async fn a_peer_without_a_certificate_is_refused() {
    let ca = ClusterCa::generate().expect("ca");
    let (_server, seen, addr) = server(&ca, 1);
    let client = caller(&ca.issue(2).expect("issue").tls(&ca), false);
    let r = ask(&client, &addr, 2, 1).await;
    assert!(r.is_err(), "{r:?}");
    assert!(seen.from.lock().is_empty());
}

#[tokio::test]
async fn a_peer_with_a_certificate_from_another_ca_is_refused() {
    let ca = ClusterCa::generate().expect("ca");
    let (_server, seen, addr) = server(&ca, 1);
    let other = ClusterCa::generate().expect("other ca");
    let foreign = other.issue(2).expect("issue");
    // it trusts the cluster's CA, so only the server's check can stop it
    let tls = RaftTls::from_pem(ca.cert_pem(), foreign.cert_pem(), foreign.key_pem()).expect("pem");
    let r = ask(&caller(&tls, true), &addr, 2, 1).await;
    assert!(r.is_err(), "{r:?}");
    assert!(seen.from.lock().is_empty());
}

#[tokio::test]
async fn a_peer_with_node_2s_certificate_cannot_send_as_node_3() {
    let ca = ClusterCa::generate().expect("ca");
    let (_server, seen, addr) = server(&ca, 1);
    let client = caller(&ca.issue(2).expect("issue").tls(&ca), true);
    let r = ask(&client, &addr, 3, 1).await;
    assert!(matches!(r, Ok(RpcResponse::Refused(_))), "{r:?}");
    assert!(seen.from.lock().is_empty());
}

#[tokio::test]
async fn a_peer_answering_at_node_3s_address_must_hold_node_3s_certificate() {
    let ca = ClusterCa::generate().expect("ca");
    // node 2 listens where the caller expects node 3
    let (_server, seen, addr) = server(&ca, 2);
    let client = caller(&ca.issue(1).expect("issue").tls(&ca), true);
    let r = ask(&client, &addr, 1, 3).await;
    assert!(matches!(r, Err(TransportError::NotSent { .. })), "{r:?}");
    assert!(seen.from.lock().is_empty());
}

#[tokio::test]
async fn a_request_larger_than_a_peer_accepts_is_not_sent() {
    let ca = ClusterCa::generate().expect("ca");
    let (_server, seen, addr) = server(&ca, 1);
    let client = caller(&ca.issue(2).expect("issue").tls(&ca), true);
    let huge = crate::command::Command::DeleteGroup {
        group: "g".repeat(MAX_REQUEST_BYTES),
        coordinator: None,
    };
    let envelope = Envelope {
        from: 2,
        to: 1,
        body: RpcRequest::Forward(ForwardRequest::Write {
            request: None,
            commands: vec![huge],
        }),
    };
    let r = client.call(&addr, envelope).await;
    assert!(matches!(r, Err(TransportError::TooLarge { .. })), "{r:?}");
    assert!(seen.from.lock().is_empty());
}

/// Echoes one message per stream, prefixed with whether the peer's
/// certificate names node 2.
struct Echo;

impl crate::network::services::ClusterService for Echo {
    fn serve(
        &self,
        peer: crate::network::services::PeerCertificate,
        conn: quinn::Connection,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                let mut out = vec![u8::from(peer.names_node(2))];
                out.extend(recv.read_to_end(1024).await.unwrap_or_default());
                let _ = send.write_all(&out).await;
                let _ = send.finish();
            }
        })
    }
}

fn with_service(ca: &ClusterCa, id: NodeId, alpn: &[u8]) -> QuicTransport {
    let tls = ca.issue(id).expect("issue").tls(ca);
    let mut settings = QuicSettings::from_socket(loopback(), tls).expect("settings");
    settings.service_alpns = vec![alpn.to_vec()];
    QuicTransport::bind(&mut settings, id).expect("bind")
}

#[tokio::test]
async fn another_protocol_shares_the_endpoint_with_raft_traffic_and_its_mutual_tls() {
    let ca = ClusterCa::generate().expect("ca");
    let alpn = b"aerostream-test/1";
    let one = with_service(&ca, 1, alpn);
    let recorder = Arc::new(Recorder::default());
    let _serving = one.serve(1, recorder.clone());
    let addr = one.local_addr().expect("addr").to_string();
    let two = with_service(&ca, 2, alpn);

    // Before a handler is registered, the connection is closed.
    let early = two.dial(&addr, 1, alpn).await.expect("handshake");
    let closed = async {
        let (mut s, mut r) = early.open_bi().await.map_err(|e| e.to_string())?;
        s.write_all(b"x").await.map_err(|e| e.to_string())?;
        s.finish().map_err(|e| e.to_string())?;
        r.read_to_end(1024).await.map_err(|e| e.to_string())
    };
    assert!(closed.await.is_err(), "no handler yet: nothing is served");

    one.services.register(alpn, Arc::new(Echo));
    let conn = two.dial(&addr, 1, alpn).await.expect("dial");
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    send.write_all(b"hello").await.expect("write");
    send.finish().expect("finish");
    let answer = recv.read_to_end(1024).await.expect("answer");
    assert_eq!(answer, b"\x01hello", "node 2's certificate names node 2");

    // Raft traffic still works on the same endpoint.
    let raft = ask(&two, &addr, 2, 1).await.expect("raft call");
    assert!(matches!(raft, RpcResponse::Forward(Ok(_))));
    assert_eq!(*recorder.from.lock(), vec![2]);

    // The dialer insists on the node it meant to reach.
    assert!(two.dial(&addr, 3, alpn).await.is_err());
    // A protocol the dialer was not set up for is refused before dialing.
    assert!(two.dial(&addr, 1, b"aerostream-other/1").await.is_err());
}
