//! Any bytes as a Kafka request frame: the gateway decodes and dispatches
//! them (against the real backends: disk logs and an embedded metastore in a
//! scratch directory) without panicking or over-allocating; anything
//! malformed is an error that closes the connection.
//!
//! Inputs that start with `SASL` drive a connection's SASL authentication
//! instead: the next byte picks the mechanism (PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512) named in a SaslHandshake, and the rest, split at 0xFF,
//! are the tokens of up to three SaslAuthenticate requests, against a user
//! `fuzz` whose SCRAM credentials the fixture made.
#![no_main]

use bytes::Bytes;
use gateway::kafka::api::dispatch;
use libfuzzer_sys::fuzz_target;

#[path = "fixture.rs"]
mod fixture;
use fixture::fixture;

// The allocator the broker runs with: wire-declared reservations cost
// address space only (see `gateway::alloc`).
#[global_allocator]
static ALLOC: gateway::alloc::WireSafeAlloc = gateway::alloc::WireSafeAlloc;

/// A request frame (no size prefix) with a v1 header.
fn frame(api: i16, version: i16, body: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(16 + body.len());
    b.extend_from_slice(&api.to_be_bytes());
    b.extend_from_slice(&version.to_be_bytes());
    b.extend_from_slice(&7i32.to_be_bytes());
    b.extend_from_slice(&4i16.to_be_bytes());
    b.extend_from_slice(b"fuzz");
    b.extend_from_slice(body);
    Bytes::from(b)
}

/// An OAUTHBEARER validator with one public key (RFC 7517's example P-256
/// key), so tokens are parsed and checked all the way to the signature.
fn oauth() -> Option<&'static security::oauthbearer::Validator> {
    use security::oauthbearer::{OAuthConfig, Validator};
    static V: std::sync::OnceLock<Option<Validator>> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let jwks = std::env::temp_dir().join(format!("aerostream-fuzz-jwks-{}.json", std::process::id()));
        let key = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"1","alg":"ES256",
            "x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
            "y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}]}"#;
        std::fs::write(&jwks, key).ok()?;
        Validator::new(OAuthConfig {
            jwks,
            issuer: None,
            audience: None,
            principal_claim: "sub".into(),
        })
        .ok()
    })
    .as_ref()
}

/// Password checks never refused for failing too often: every PLAIN input
/// reaches the check.
fn passwords() -> &'static security::Passwords {
    static P: std::sync::OnceLock<security::Passwords> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        security::Passwords::new(security::FailedLoginLimit {
            burst: u32::MAX,
            per_minute: 0.0,
        })
    })
}

fn sasl(data: &[u8]) {
    use gateway::sasl::{Mechanism, ScramMechanism, Session, Step};
    let f = fixture();
    let all = [
        Mechanism::Plain,
        Mechanism::Scram(ScramMechanism::Sha256),
        Mechanism::Scram(ScramMechanism::Sha512),
        Mechanism::OAuthBearer,
    ];
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let name = all[usize::from(pick) % all.len()].name().as_bytes();
    let mut body = (name.len() as i16).to_be_bytes().to_vec();
    body.extend_from_slice(name);
    let mut session = Session::default();
    let settings = gateway::sasl::Settings {
        mechanisms: &all,
        catalog: &f.broker.broker.node.catalog,
        oauth: oauth(),
        max_session: Some(std::time::Duration::from_secs(60)),
        passwords: passwords(),
        peer: std::net::IpAddr::from([127, 0, 0, 1]),
    };
    let mut frames = vec![frame(17, 1, &body)];
    for token in rest.split(|b| *b == 0xFF).take(3) {
        let mut body = (token.len() as i32).to_be_bytes().to_vec();
        body.extend_from_slice(token);
        frames.push(frame(36, 0, &body));
    }
    for fr in frames {
        match session.step(&settings, &fr, std::time::Instant::now()) {
            Ok(Step::Answer { close: false, .. }) | Ok(Step::Pass) => {}
            _ => return,
        }
        if session.authenticated() {
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(rest) = data.strip_prefix(b"SASL") {
        sasl(rest);
        return;
    }
    let f = fixture();
    let frame = Bytes::copy_from_slice(data);
    f.rt.block_on(async {
        // Long polls and group joins wait; a short bound keeps each run quick.
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            dispatch(&f.broker.broker, &f.client, frame),
        )
        .await;
    });
});
