//! The Kafka listener with SASL on, against clients that connect and do
//! not log in: they may not hold the request budget logged-in clients
//! need, nor stay connected for long, and an address that keeps failing
//! password logins is refused without its passwords being checked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use gateway::broker::BrokerConfig;
use gateway::connections::ConnectionLimits;
use gateway::testing::{Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{add_users, api_versions_code, roundtrip};

const BUDGET: usize = 4 << 20;

/// PLAIN required, requests and the broker-wide budget of 4 MiB, and a
/// login timeout of `login_timeout`; user alice (password "pw").
async fn start(login_timeout: Duration) -> (Gateway, Backends) {
    let backends = Backends::start(Logs::Disk, 1).await;
    let opts = GatewayOptions {
        shards: 2,
        broker: BrokerConfig {
            sasl_mechanisms: vec![gateway::sasl::Mechanism::Plain],
            max_request_bytes: BUDGET,
            connections: ConnectionLimits {
                queued_max_request_bytes: BUDGET,
                login_timeout,
                ..ConnectionLimits::default()
            },
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    add_users(&backends.meta, &["alice"], "pw").await;
    (gw, backends)
}

/// An ApiVersions v3 request with its size prefix.
fn api_versions_frame() -> Vec<u8> {
    use kafka_protocol::protocol::Encodable;
    let mut body = Vec::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(3)
        .with_correlation_id(7)
        .encode(&mut body, ApiKey::ApiVersions.request_header_version(3))
        .unwrap();
    ApiVersionsRequest::default().encode(&mut body, 3).unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

async fn plain_login(s: &mut TcpStream, user: &str, password: &str) -> i16 {
    let hs: SaslHandshakeResponse = roundtrip(
        s,
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    )
    .await;
    assert_eq!(hs.error_code, 0);
    let auth: SaslAuthenticateResponse = roundtrip(
        s,
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from(format!("\0{user}\0{password}"))),
    )
    .await;
    auth.error_code
}

/// Eight connections each announce the largest request allowed before
/// logging in (512 KiB; 4 MiB together, the whole budget) and stall. They
/// hold none of the broker-wide budget, so a client logs in and its
/// Metadata is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_stalled_before_sasl_hold_none_of_the_request_budget() {
    // the login timeout is long: it plays no part here
    let (gw, _backends) = start(Duration::from_secs(600)).await;
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
        s.write_all(&(512 * 1024i32).to_be_bytes()).await.unwrap();
        // and a little of the body
        s.write_all(&[0u8; 100]).await.unwrap();
        stalled.push(s);
    }
    let in_use = || gw.broker().connections.request_bytes_in_use();
    for _ in 0..50 {
        if in_use() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        in_use(),
        0,
        "requests of clients that have not logged in take none of the broker-wide budget"
    );
    let served = async {
        let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
        assert_eq!(plain_login(&mut s, "alice", "pw").await, 0);
        let meta: MetadataResponse =
            roundtrip(&mut s, ApiKey::Metadata, 12, &MetadataRequest::default()).await;
        meta
    };
    let meta = tokio::time::timeout(Duration::from_secs(60), served)
        .await
        .expect("the login and Metadata are not held up");
    assert_eq!(meta.brokers.len(), 1);
    assert_eq!(in_use(), 0);
    drop(stalled);
    gw.shutdown().await;
}

/// A connection that has not authenticated within the login timeout
/// is closed, even while it keeps asking for ApiVersions (which it may
/// before logging in); one that authenticated may then stay idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_authenticate_within_the_login_timeout_is_closed() {
    let (gw, _backends) = start(Duration::from_secs(1)).await;
    let mut logged_in = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    assert_eq!(plain_login(&mut logged_in, "alice", "pw").await, 0);

    let mut chatty = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let mut silent = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    let closed = async {
        // ApiVersions every 200 ms: each answered, until the timeout
        let mut answered = 0;
        loop {
            if chatty.write_all(&api_versions_frame()).await.is_err() {
                break answered;
            }
            let mut len = [0u8; 4];
            match chatty.read_exact(&mut len).await {
                Ok(_) => {}
                Err(_) => break answered,
            }
            let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
            chatty.read_exact(&mut body).await.unwrap();
            answered += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let answered = tokio::time::timeout(Duration::from_secs(60), closed)
        .await
        .expect("closed, long before the idle timeout");
    assert!(answered >= 1, "ApiVersions is served before logging in");
    let mut buf = [0u8; 8];
    let silent_end = tokio::time::timeout(Duration::from_secs(60), silent.read(&mut buf))
        .await
        .expect("closed, long before the idle timeout");
    assert!(matches!(silent_end, Ok(0) | Err(_)), "{silent_end:?}");
    assert_eq!(
        gw.broker()
            .connections
            .counters
            .login_timeouts
            .load(Ordering::Relaxed),
        2
    );
    // the authenticated connection, idle for longer, is still served
    assert_eq!(api_versions_code(&mut logged_in).await, 0);
    gw.shutdown().await;
}

/// HTTP GET `path` with Basic `user:password`; the status code.
async fn http_get_status(
    addr: std::net::SocketAddr,
    path: &str,
    user: &str,
    password: &str,
) -> u16 {
    use base64::Engine;
    let login = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {login}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).await.unwrap();
    out.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{out}"))
}

/// After three different wrong passwords from one address (a wrong one
/// retried counts once), its logins are refused as a wrong password is,
/// on the Kafka port and the HTTP port alike, without any password being
/// checked (no PBKDF2 runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_that_keeps_failing_logins_is_refused_unchecked_on_every_port() {
    let backends = Backends::start(Logs::Disk, 1).await;
    let opts = GatewayOptions {
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        shards: 2,
        broker: BrokerConfig {
            sasl_mechanisms: vec![gateway::sasl::Mechanism::Plain],
            authz: security::authz::AuthzConfig {
                enabled: true,
                superusers: vec!["User:admin".into()],
                allow_if_no_acl: false,
            },
            logins: gateway::logins::LoginLimits {
                failed_per_address: security::FailedLoginLimit {
                    burst: 3,
                    per_minute: 0.0,
                },
                ..gateway::logins::LoginLimits::default()
            },
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    add_users(&backends.meta, &["alice"], "pw").await;
    let http = gw.http_addr().unwrap();
    let passwords = &gw.broker().logins.passwords;
    const FAILED: i16 = 58; // SASL_AUTHENTICATION_FAILED

    // alice logs in (then lacks the cluster ACL the cluster view needs): a
    // login that works costs nothing
    assert_eq!(
        http_get_status(http, "/v1/cluster", "alice", "pw").await,
        403
    );
    // one wrong password retried is one failure (answered from memory)
    for _ in 0..3 {
        let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
        assert_eq!(plain_login(&mut s, "alice", "stale").await, FAILED);
    }
    assert_eq!(passwords.repeated(), 2);
    for guess in ["guess-1", "guess-2"] {
        let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
        assert_eq!(plain_login(&mut s, "alice", guess).await, FAILED);
    }
    let checked = passwords.iterations_run();
    let mut s = TcpStream::connect(gw.kafka_addr()).await.unwrap();
    assert_eq!(
        plain_login(&mut s, "alice", "pw").await,
        FAILED,
        "refused as a wrong password is"
    );
    // the HTTP login of a minute ago is remembered; another is refused
    assert_eq!(http_get_status(http, "/v1/topics", "bob", "pw").await, 401);
    assert_eq!(
        passwords.iterations_run(),
        checked,
        "no password was checked"
    );
    assert_eq!(passwords.refused(), 2);
    let metrics = gw.metrics_text().render();
    assert!(
        metrics.contains("aerostream_login_password_checks_refused_total 2"),
        "{metrics}"
    );
    gw.shutdown().await;
}
