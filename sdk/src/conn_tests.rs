//! The connection against a server double that speaks the frames over real
//! TCP: it answers the hello, then runs a script.

use std::future::Future;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpListener;

use super::*;
use crate::proto::{Metadata, Ping, Pong, Produce};

type ServerRead = BufReader<OwnedReadHalf>;

const LONG: Duration = Duration::from_secs(5);

fn options() -> ConnOptions {
    ConnOptions {
        client_id: "conn-test".into(),
        connect_timeout: LONG,
        max_frame_bytes: 1 << 20,
        quic: None,
        credentials: None,
    }
}

fn hello_ok(hello: Hello) -> Bytes {
    HelloResponse {
        correlation: hello.correlation,
        error: ErrorCode::NONE,
        version: 1,
        node_id: 7,
        max_frame_bytes: 1 << 20,
        server: "double".into(),
    }
    .to_frame()
}

/// Accepts one connection, answers its hello with `answer`, then runs
/// `script` on the two halves.
async fn serve<A, S, F>(answer: A, script: S) -> Address
where
    A: FnOnce(Hello) -> Bytes + Send + 'static,
    S: FnOnce(ServerRead, OwnedWriteHalf) -> F + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let hello = read_frame(&mut read, u32::MAX).await.unwrap().unwrap();
        assert_eq!(hello.op, op::HELLO);
        let hello = Hello::decode_body(hello.body).unwrap();
        assert_eq!(hello.client_id, "conn-test");
        assert_eq!(
            (hello.min_version, hello.max_version),
            (proto::MIN_VERSION, proto::MAX_VERSION)
        );
        write.write_all(&answer(hello)).await.unwrap();
        script(read, write).await;
    });
    Address {
        host: "127.0.0.1".into(),
        port,
    }
}

async fn read_ping(read: &mut ServerRead) -> Ping {
    let frame = read_frame(read, u32::MAX).await.unwrap().unwrap();
    Ping::decode_body(frame.body).unwrap()
}

async fn pong(write: &mut OwnedWriteHalf, ping: &Ping) {
    let answer = Pong {
        correlation: ping.correlation,
        nonce: ping.nonce,
    };
    write.write_all(&answer.to_frame()).await.unwrap();
}

fn ping(nonce: u64) -> Ping {
    Ping {
        correlation: 0,
        nonce,
    }
}

/// Waits for the server to close its side.
async fn until_closed(mut read: ServerRead) {
    while let Ok(Some(_)) = read_frame(&mut read, u32::MAX).await {}
}

#[tokio::test]
async fn answers_in_any_order_reach_the_requests_they_answer() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let mut pings = Vec::new();
        for _ in 0..3 {
            pings.push(read_ping(&mut read).await);
        }
        for p in pings.iter().rev() {
            pong(&mut write, p).await;
        }
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    assert_eq!(conn.info().node_id, 7);
    assert_eq!(conn.info().max_frame_bytes, 1 << 20);
    let (a, b, c) = tokio::join!(
        conn.call(ping(1), LONG),
        conn.call(ping(2), LONG),
        conn.call(ping(3), LONG)
    );
    assert_eq!(
        [a.unwrap().nonce, b.unwrap().nonce, c.unwrap().nonce],
        [1, 2, 3]
    );
}

#[tokio::test]
async fn an_error_frame_fails_the_request_it_names_and_correlation_zero_fails_all() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let a = read_ping(&mut read).await;
        let b = read_ping(&mut read).await;
        let _c = read_ping(&mut read).await;
        let named = ErrorFrame {
            correlation: b.correlation,
            error: ErrorCode::INVALID_REQUEST,
            message: "bad ping".into(),
        };
        write.write_all(&named.to_frame()).await.unwrap();
        pong(&mut write, &a).await;
        let all = ErrorFrame {
            correlation: 0,
            error: ErrorCode::BAD_FRAME,
            message: String::new(),
        };
        write.write_all(&all.to_frame()).await.unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let (a, b, c) = tokio::join!(
        conn.call(ping(1), LONG),
        conn.call(ping(2), LONG),
        conn.call(ping(3), LONG)
    );
    assert_eq!(a.unwrap().nonce, 1, "answered before the error frames");
    assert!(matches!(
        b,
        Err(Error::Server { code: ErrorCode::INVALID_REQUEST, message }) if message == "bad ping"
    ));
    assert!(matches!(
        c,
        Err(Error::Server {
            code: ErrorCode::BAD_FRAME,
            ..
        })
    ));
    assert!(conn.is_closed());
    assert!(matches!(conn.call(ping(4), LONG).await, Err(Error::Closed)));
}

#[tokio::test]
async fn every_waiting_request_fails_when_the_connection_drops() {
    let addr = serve(hello_ok, |mut read, write| async move {
        read_ping(&mut read).await;
        read_ping(&mut read).await;
        drop((read, write));
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let (a, b) = tokio::join!(conn.call(ping(1), LONG), conn.call(ping(2), LONG));
    assert!(matches!(a, Err(Error::Closed)), "{a:?}");
    assert!(matches!(b, Err(Error::Closed)), "{b:?}");
    assert!(conn.is_closed());
    assert!(conn.closed_at().is_some());
    assert!(matches!(conn.call(ping(3), LONG).await, Err(Error::Closed)));
}

#[tokio::test]
async fn an_oversized_answer_is_refused_from_its_header() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        read_ping(&mut read).await;
        // A header announcing one byte more than the client accepts, and
        // no body: the client must not wait for (or allocate) it.
        let header = FrameHeader {
            op: op::PING | RESPONSE,
            len: (1 << 20) + 1,
        };
        write.write_all(&header.encode()).await.unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let err = conn.call(ping(1), LONG).await.unwrap_err();
    assert!(
        matches!(&err, Error::Protocol(m) if m.contains("exceeds the limit")),
        "{err}"
    );
    assert!(conn.is_closed());
}

#[tokio::test]
async fn a_request_times_out_and_its_late_answer_is_not_mistaken_for_another() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let slow = read_ping(&mut read).await;
        let next = read_ping(&mut read).await;
        pong(&mut write, &slow).await;
        pong(&mut write, &next).await;
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let slow = conn.call(ping(1), Duration::from_millis(50)).await;
    assert!(matches!(slow, Err(Error::Timeout)), "{slow:?}");
    assert_eq!(conn.call(ping(2), LONG).await.unwrap().nonce, 2);
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn an_answer_of_the_wrong_operation_is_a_protocol_error() {
    let addr = serve(hello_ok, |mut read, mut write| async move {
        let p = read_ping(&mut read).await;
        let wrong = proto::MetadataResponse {
            correlation: p.correlation,
            ..Default::default()
        };
        write.write_all(&wrong.to_frame()).await.unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let err = conn.call(ping(1), LONG).await.unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err}");
}

#[tokio::test]
async fn a_request_larger_than_the_server_accepts_is_not_sent() {
    let small = |hello: Hello| {
        HelloResponse {
            correlation: hello.correlation,
            version: 1,
            max_frame_bytes: 16,
            ..Default::default()
        }
        .to_frame()
    };
    let addr = serve(small, |mut read, mut write| async move {
        // The first frame after the hello is the ping, not the metadata.
        let p = read_ping(&mut read).await;
        pong(&mut write, &p).await;
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let big = Metadata {
        correlation: 0,
        topics: vec!["a-topic-name-longer-than-sixteen-bytes".into()],
    };
    let err = conn.call(big, LONG).await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { max: 16, .. }), "{err}");
    assert_eq!(conn.call(ping(9), LONG).await.unwrap().nonce, 9);
}

#[tokio::test]
async fn a_request_without_answer_completes_once_written() {
    let (seen_tx, seen) = oneshot::channel();
    let addr = serve(hello_ok, |mut read, write| async move {
        let _open = write;
        let frame = read_frame(&mut read, u32::MAX).await.unwrap().unwrap();
        let produce = Produce::decode_body(frame.body).unwrap();
        seen_tx.send(produce.acks).unwrap();
        until_closed(read).await;
    })
    .await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    let produce = Produce {
        acks: 0,
        ..Default::default()
    };
    conn.send_only(produce, LONG).await.unwrap();
    assert_eq!(seen.await.unwrap(), 0);
}

#[tokio::test]
async fn a_refused_hello_says_why() {
    let unsupported = |hello: Hello| {
        HelloResponse {
            correlation: hello.correlation,
            error: ErrorCode::UNSUPPORTED_VERSION,
            ..Default::default()
        }
        .to_frame()
    };
    let addr = serve(unsupported, |_, _| async {}).await;
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedVersion(_)), "{err}");

    let future_version = |hello: Hello| {
        HelloResponse {
            correlation: hello.correlation,
            version: proto::MAX_VERSION + 1,
            ..Default::default()
        }
        .to_frame()
    };
    let addr = serve(future_version, |_, _| async {}).await;
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedVersion(_)), "{err}");

    let error_frame = |hello: Hello| {
        ErrorFrame {
            correlation: hello.correlation,
            error: ErrorCode::UNAUTHORIZED,
            message: "who are you".into(),
        }
        .to_frame()
    };
    let addr = serve(error_frame, |_, _| async {}).await;
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::UNAUTHORIZED));
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error_naming_the_address() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let addr = Address {
        host: "127.0.0.1".into(),
        port,
    };
    let err = connect(&addr, Transport::Tcp, &options())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Connect { addr, .. } if *addr == format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.is_retriable());
}

// ------------------------------------------------------------------ QUIC

/// A CA and a server certificate it signed for localhost and 127.0.0.1:
/// (CA PEM, server chain, server key).
fn certificates() -> (
    String,
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("test CA {}", rand::random::<u32>()),
    );
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (
        ca.pem(),
        vec![leaf.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
}

fn quic_options(trust: TrustSettings) -> ConnOptions {
    ConnOptions {
        quic: Some(QuicClient::new(&trust).unwrap()),
        ..options()
    }
}

fn trusting(ca_pem: &str) -> TrustSettings {
    TrustSettings {
        ca_pems: vec![ca_pem.as_bytes().to_vec()],
        ..TrustSettings::default()
    }
}

use crate::quic::{QuicClient, TrustSettings};

/// A QUIC server double: answers the hello on a connection's first stream,
/// then pings on every stream (on further ones without a hello), except
/// pings of nonce 666, which it never answers. Returns its CA and address.
async fn quic_double() -> (String, Address) {
    let (ca, chain, key) = certificates();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    tls.alpn_protocols = vec![crate::quic::ALPN.to_vec()];
    let config = quinn::ServerConfig::with_crypto(Arc::new(
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap(),
    ));
    let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let port = endpoint.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let mut first = true;
                while let Ok((mut send, recv)) = conn.accept_bi().await {
                    let hello = std::mem::take(&mut first);
                    tokio::spawn(async move {
                        let mut read = BufReader::new(recv);
                        if hello {
                            let h = read_frame(&mut read, u32::MAX).await.unwrap().unwrap();
                            assert_eq!(h.op, op::HELLO);
                            let h = Hello::decode_body(h.body).unwrap();
                            send.write_all(&hello_ok(h)).await.unwrap();
                        }
                        while let Ok(Some(f)) = read_frame(&mut read, u32::MAX).await {
                            assert_eq!(f.op, op::PING, "no hello on further streams");
                            let p = Ping::decode_body(f.body).unwrap();
                            if p.nonce != 666 {
                                let answer = Pong {
                                    correlation: p.correlation,
                                    nonce: p.nonce,
                                };
                                send.write_all(&answer.to_frame()).await.unwrap();
                            }
                        }
                    });
                }
            });
        }
    });
    (
        ca,
        Address {
            host: "127.0.0.1".into(),
            port,
        },
    )
}

#[tokio::test]
async fn over_quic_further_streams_share_the_hello_and_do_not_wait_for_each_other() {
    let (ca, addr) = quic_double().await;
    let conn = connect(&addr, Transport::Quic, &quic_options(trusting(&ca)))
        .await
        .unwrap();
    assert_eq!(conn.info().node_id, 7);
    assert_eq!(conn.call(ping(1), LONG).await.unwrap().nonce, 1);
    let stream = conn.open_stream().await.unwrap().expect("QUIC has streams");
    assert_eq!(stream.info(), conn.info(), "the hello's outcome, shared");
    assert_eq!(stream.call(ping(2), LONG).await.unwrap().nonce, 2);
    // a request nobody answers on one stream holds up no other
    let stuck = conn.open_stream().await.unwrap().unwrap();
    let held = tokio::spawn(async move { stuck.call(ping(666), LONG).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(stream.call(ping(3), LONG).await.unwrap().nonce, 3);
    assert_eq!(conn.call(ping(4), LONG).await.unwrap().nonce, 4);
    assert!(!held.is_finished());
    held.abort();
    // a dropped stream leaves the connection and the other streams be
    drop(stream);
    assert_eq!(conn.call(ping(5), LONG).await.unwrap().nonce, 5);
}

#[tokio::test]
async fn over_tcp_there_are_no_further_streams() {
    let addr = serve(hello_ok, |read, _write| until_closed(read)).await;
    let conn = connect(&addr, Transport::Tcp, &options()).await.unwrap();
    assert!(conn.open_stream().await.unwrap().is_none());
}

#[tokio::test]
async fn a_server_whose_certificate_is_not_trusted_is_refused_with_a_tls_error() {
    let (_, addr) = quic_double().await;
    let (stranger, _, _) = certificates();
    let err = connect(&addr, Transport::Quic, &quic_options(trusting(&stranger)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Tls { reason, .. } if reason.contains("UnknownIssuer")),
        "{err:?}"
    );
    assert!(!err.is_retriable());
    // accepting anything connects (for trying things out)
    let conn = connect(
        &addr,
        Transport::Quic,
        &quic_options(TrustSettings {
            accept_invalid_certs: true,
            ..TrustSettings::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(conn.call(ping(9), LONG).await.unwrap().nonce, 9);
}

#[tokio::test]
async fn quic_without_a_ca_or_with_a_bad_one_says_what_it_needs() {
    let none = QuicClient::new(&TrustSettings::default()).unwrap_err();
    assert!(
        matches!(&none, Error::Config(m) if m.contains("tls_ca_file") && m.contains("ca.pem")),
        "{none}"
    );
    let missing = QuicClient::new(&TrustSettings {
        ca_files: vec!["/nonexistent/ca.pem".into()],
        ..TrustSettings::default()
    })
    .unwrap_err();
    assert!(
        matches!(&missing, Error::Config(m) if m.contains("/nonexistent/ca.pem")),
        "{missing}"
    );
    let garbage = QuicClient::new(&trusting("not a certificate")).unwrap_err();
    assert!(matches!(garbage, Error::Config(_)), "{garbage}");
}
