//! Logins on the native protocol: Kafka's users and ACLs govern native
//! clients, failed logins are refused with a reason, and a session ends at
//! its lifetime.

use metastore::Security;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gateway::broker::BrokerConfig;
use gateway::testing::{Backends, Logs};
use gateway::Gateway;
use sdk::proto::{self, ErrorCode};
use tokio::net::TcpStream;

use super::support::*;
use crate::common;

/// An EC P-256 key set with one key, written to a JWKS file, and a token
/// for `sub` signed by it.
pub(crate) fn token_issuer(dir: &std::path::Path) -> (std::path::PathBuf, impl Fn(&str) -> String) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = pair.public_key_raw().to_vec();
    let jwk = serde_json::json!({
        "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256",
        "x": b64.encode(&point[1..33]), "y": b64.encode(&point[33..65]),
    });
    let jwks = dir.join("jwks.json");
    std::fs::write(&jwks, serde_json::json!({ "keys": [jwk] }).to_string()).unwrap();
    let key = jsonwebtoken::EncodingKey::from_ec_der(&pair.serialize_der());
    let sign = move |sub: &str| {
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 600;
        let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        h.kid = Some("k1".into());
        jsonwebtoken::encode(&h, &serde_json::json!({ "sub": sub, "exp": exp }), &key).unwrap()
    };
    (jwks, sign)
}

/// A gateway whose listeners authenticate with SCRAM-SHA-512, PLAIN and
/// OAUTHBEARER, with ACLs on (`User:admin` a superuser), sessions of
/// `session` when given, and users admin, alice and bob (password "pw").
pub(crate) async fn start_secured(
    session: Option<Duration>,
) -> (
    Gateway,
    Backends,
    tempfile::TempDir,
    impl Fn(&str) -> String,
) {
    use gateway::sasl::{Mechanism, ScramMechanism};
    let dir = tempfile::tempdir().unwrap();
    let (jwks, sign) = token_issuer(dir.path());
    let oauth = security::oauthbearer::Validator::new(security::oauthbearer::OAuthConfig {
        jwks,
        issuer: None,
        audience: None,
        principal_claim: "sub".into(),
    })
    .unwrap();
    let (gw, backends) = start_with(
        Logs::Disk,
        BrokerConfig {
            sasl_mechanisms: vec![
                Mechanism::Scram(ScramMechanism::Sha512),
                Mechanism::Plain,
                Mechanism::OAuthBearer,
            ],
            sasl_max_session: session,
            oauthbearer: Some(Arc::new(oauth)),
            authz: security::authz::AuthzConfig {
                enabled: true,
                superusers: vec!["User:admin".into()],
                allow_if_no_acl: false,
            },
            ..BrokerConfig::default()
        },
    )
    .await;
    common::add_users(&backends.meta, &["admin", "alice", "bob"], "pw").await;
    (gw, backends, dir, sign)
}

pub(crate) async fn native_client(
    gw: &Gateway,
    quic: bool,
    credentials: sdk::Credentials,
) -> Result<sdk::Client, sdk::Error> {
    let url = if quic {
        format!("aero+quic://{}", gw.native_quic_addr().unwrap())
    } else {
        format!("aero://{}", gw.native_addr().unwrap())
    };
    let client = sdk::Client::builder(&url)
        .tls_ca_pem(ca().cert_pem())
        .credentials(credentials)
        .connect()
        .await?;
    // the first request opens the connection and logs in
    client.ping().await?;
    Ok(client)
}

/// With security on, native clients log in as the same users as Kafka
/// clients (SCRAM over QUIC, a token in the hello over TCP) and the same
/// ACLs govern them: what a user was granted works, the rest is
/// UNAUTHORIZED, and Metadata hides topics it may not describe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_clients_log_in_as_kafka_users_and_the_acls_govern_them() {
    use metastore::acl::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};
    use sdk::{Credentials, NewTopic, ProducerConfig, Record};

    let (gw, backends, _dir, sign) = start_secured(None).await;
    let admin = native_client(&gw, true, Credentials::scram_sha512("admin", "pw"))
        .await
        .unwrap();
    admin
        .create_topic(NewTopic::new("ledger", 2))
        .await
        .unwrap();
    let grant = |principal: &str, operation| AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "ledger".into(),
        pattern: PatternType::Literal,
        principal: principal.into(),
        host: "*".into(),
        operation,
        permission: AclPermission::Allow,
    };
    let made = backends
        .meta
        .create_acls(vec![
            grant("User:alice", AclOperation::Write),
            grant("User:carol", AclOperation::Read),
        ])
        .await
        .unwrap();
    assert!(made.iter().all(Result::is_ok), "{made:?}");

    // alice over QUIC with SCRAM, and carol with a token over TCP
    let alice = native_client(&gw, true, Credentials::scram_sha512("alice", "pw"))
        .await
        .unwrap();
    let producer = alice.producer(ProducerConfig::default()).unwrap();
    let sent = producer
        .send("ledger", Record::new("credit 10"))
        .await
        .unwrap();
    let token = sign("carol");
    let carol = native_client(&gw, false, Credentials::oauth_token(token))
        .await
        .unwrap();
    let md = carol.metadata(&[]).await.unwrap();
    assert!(md.topic("ledger").is_some(), "READ implies DESCRIBE");
    let mut consumer = carol.consumer(sdk::ConsumerConfig::default()).unwrap();
    consumer
        .assign("ledger", Some(vec![sent.partition]), sdk::StartAt::Earliest)
        .await
        .unwrap();
    let got = tokio::time::timeout(
        Duration::from_secs(20),
        futures::StreamExt::next(&mut consumer),
    )
    .await
    .expect("a record within 20 s")
    .expect("the stream goes on")
    .unwrap();
    assert_eq!(&got.value.unwrap()[..], b"credit 10");

    // bob has no ACL: the topic is hidden and writing is refused
    let bob = native_client(&gw, true, Credentials::plain("bob", "pw"))
        .await
        .unwrap();
    assert!(bob.metadata(&[]).await.unwrap().topic("ledger").is_none());
    let refused = bob
        .producer(ProducerConfig::default())
        .unwrap()
        .send("ledger", Record::new("debit 10"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused.code(), Some(ErrorCode::UNAUTHORIZED))
            || matches!(refused, sdk::Error::UnknownTopic(_)),
        "{refused:?}"
    );
    // carol may read but not write
    let refused = carol
        .producer(ProducerConfig::default())
        .unwrap()
        .send("ledger", Record::new("debit 10"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::UNAUTHORIZED), "{refused:?}");
    gw.shutdown().await;
}

/// A wrong password, an unknown user and a forged token are refused with
/// AUTHENTICATION_FAILED; a client without credentials gets its hello
/// answered and then AUTHENTICATION_REQUIRED for its first request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_logins_that_fail_are_refused_and_say_why() {
    use sdk::Credentials;
    let (gw, _backends, dir, _sign) = start_secured(None).await;
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (_, foreign) = token_issuer(&other);
    for (quic, credentials) in [
        (true, Credentials::scram_sha512("alice", "wrong")),
        (false, Credentials::scram_sha512("mallory", "pw")),
        (false, Credentials::plain("alice", "wrong")),
        (true, Credentials::oauth_token(foreign("alice"))),
        (true, Credentials::scram_sha256("alice", "pw")),
    ] {
        let what = format!("{credentials:?}");
        let e = native_client(&gw, quic, credentials).await.unwrap_err();
        assert_eq!(
            e.code(),
            Some(ErrorCode::AUTHENTICATION_FAILED),
            "{what}: {e:?}"
        );
    }
    let failures = gw
        .broker()
        .metrics
        .sasl_failures
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(failures, 5);

    let mut s = connect(&gw).await;
    send(
        &mut s,
        &proto::Ping {
            correlation: 2,
            nonce: 1,
        },
    )
    .await;
    expect_closed_with(&mut s, ErrorCode::AUTHENTICATION_REQUIRED).await;
    gw.shutdown().await;
}

/// With a session lifetime, a native connection's requests are refused
/// with SESSION_EXPIRED once it passed, and the client logs in again on a
/// new connection without the caller noticing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_session_ends_at_its_lifetime_and_the_client_logs_in_again() {
    let (gw, _backends, _dir, _sign) = start_secured(Some(Duration::from_millis(1500))).await;
    // by hand: PLAIN in the hello, then the session ends
    let mut s = TcpStream::connect(gw.native_addr().unwrap()).await.unwrap();
    let hello: proto::HelloResponse = call(
        &mut s,
        &proto::Hello {
            correlation: 1,
            min_version: 1,
            max_version: 1,
            client_id: "expiring".into(),
            auth_mechanism: "PLAIN".into(),
            auth_bytes: Bytes::from_static(b"\0alice\0pw"),
        },
    )
    .await;
    assert_eq!(hello.error, ErrorCode::NONE);
    let _: proto::Pong = call(
        &mut s,
        &proto::Ping {
            correlation: 2,
            nonce: 1,
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1800)).await;
    send(
        &mut s,
        &proto::Ping {
            correlation: 3,
            nonce: 2,
        },
    )
    .await;
    expect_closed_with(&mut s, ErrorCode::SESSION_EXPIRED).await;

    // the SDK: the retriable SESSION_EXPIRED makes it connect again
    let client = native_client(&gw, true, sdk::Credentials::scram_sha512("alice", "pw"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    client.ping().await.expect("served after logging in again");
    let expired = gw
        .broker()
        .metrics
        .sasl_expired
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(expired, 2);
    gw.shutdown().await;
}
