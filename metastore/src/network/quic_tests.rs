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
