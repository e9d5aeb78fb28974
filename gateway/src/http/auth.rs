//! Logins on the HTTP listener. With security on (the Kafka listener
//! authenticates clients, so ACLs apply), the REST API, the console and
//! extensions' endpoints need the same identities Kafka clients use:
//! `Authorization: Basic` with a SCRAM user's name and password (checked as
//! SASL/PLAIN checks it), or `Authorization: Bearer` with a JWT the
//! OAUTHBEARER key set accepts. The principal is then authorized with the
//! ACLs, endpoint by endpoint, as Kafka authorizes the same action
//! (`caller.rs`). `/health`, `/healthz` and `/metrics` stay open for
//! probes and scrapers.
//!
//! A missing or wrong login gets 401 with `WWW-Authenticate: Basic`, so a
//! browser asks for one and then sends it with the console's requests.
//!
//! Basic sends the password with every request, and checking it costs
//! thousands of PBKDF2 iterations: a login verified once is remembered for
//! [`LOGIN_TTL`] (by a keyed hash of user and password, never the
//! password), and the check itself runs on the blocking pool. So a changed
//! password or a deleted user stops working on the HTTP port within that
//! time; the ACLs apply to every request at once. Checks share the
//! broker's bounds on login work with the Kafka and native listeners
//! ([`crate::logins`]): a few at once, an address that failed too often
//! lately refused unchecked, a refusal answered after a short delay.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_lc_rs::hmac;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use metastore::acl::AclOperation;

use super::caller::Caller;
use super::HttpState;
use crate::broker::Broker;
use crate::rest::ApiError;
use security::authz::ANONYMOUS;

/// Paths open without a login.
const OPEN: [&str; 3] = ["/health", "/healthz", "/metrics"];

/// How long a verified Basic login is remembered.
pub const LOGIN_TTL: Duration = Duration::from_secs(60);

/// Logins remembered at most; past it the oldest half is dropped.
const MAX_REMEMBERED: usize = 4096;

/// Basic logins verified lately: a keyed hash of `user:password` (the key
/// is random per process) and when it was verified.
struct Remembered {
    /// `None` when the system gave no randomness: nothing is remembered.
    key: Option<hmac::Key>,
    verified: Mutex<HashMap<Vec<u8>, Instant>>,
}

fn remembered() -> &'static Remembered {
    static R: OnceLock<Remembered> = OnceLock::new();
    R.get_or_init(|| {
        let mut raw = [0u8; 32];
        let key = aws_lc_rs::rand::fill(&mut raw)
            .ok()
            .map(|()| hmac::Key::new(hmac::HMAC_SHA256, &raw));
        Remembered {
            key,
            verified: Mutex::new(HashMap::new()),
        }
    })
}

impl Remembered {
    fn tag(&self, user: &str, password: &str) -> Option<Vec<u8>> {
        let mut ctx = hmac::Context::with_key(self.key.as_ref()?);
        // length-prefixed: no other split of the same bytes makes the tag
        ctx.update(&(user.len() as u64).to_be_bytes());
        ctx.update(user.as_bytes());
        ctx.update(password.as_bytes());
        Some(ctx.sign().as_ref().to_vec())
    }

    fn knows(&self, tag: &[u8], now: Instant) -> bool {
        self.verified
            .lock()
            .map(|m| {
                m.get(tag)
                    .is_some_and(|at| now.duration_since(*at) < LOGIN_TTL)
            })
            .unwrap_or(false)
    }

    fn remember(&self, tag: Vec<u8>, now: Instant) {
        if let Ok(mut m) = self.verified.lock() {
            if m.len() >= MAX_REMEMBERED {
                m.retain(|_, at| now.duration_since(*at) < LOGIN_TTL / 2);
            }
            m.insert(tag, now);
        }
    }
}

/// Checks a Basic login from `from`: remembered, or verified on the
/// blocking pool within the broker's bounds on login work
/// ([`crate::logins`]); a refusal is answered after the failure delay.
async fn basic(b: &Arc<Broker>, user: &str, password: &str, from: IpAddr) -> Result<(), String> {
    let r = remembered();
    let tag = r.tag(user, password);
    let now = Instant::now();
    if tag.as_deref().is_some_and(|t| r.knows(t, now)) {
        return Ok(());
    }
    let (b2, u, p) = (b.clone(), user.to_string(), password.to_string());
    let checked = b
        .logins
        .run(move || {
            b2.logins
                .passwords
                .check(&b2.node.catalog, &u, &p, from, now)
        })
        .await
        .map_err(|e| format!("the password check failed: {e}"))?;
    if let Err(e) = checked {
        b.logins.hold_failure().await;
        return Err(e.to_string());
    }
    if let Some(tag) = tag {
        r.remember(tag, now);
    }
    Ok(())
}

/// The principal the request's credentials prove, or why they do not.
async fn principal(b: &Arc<Broker>, headers: &HeaderMap, from: IpAddr) -> Result<String, String> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or("no Authorization header")?
        .to_str()
        .map_err(|_| "the Authorization header is not text")?;
    let (scheme, rest) = value
        .split_once(' ')
        .ok_or("a malformed Authorization header")?;
    if scheme.eq_ignore_ascii_case("Basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .map_err(|_| "Basic credentials are not base64")?;
        let text = String::from_utf8(decoded).map_err(|_| "Basic credentials are not UTF-8")?;
        let (user, password) = text
            .split_once(':')
            .ok_or("Basic credentials are user:password")?;
        basic(b, user, password, from).await?;
        return Ok(format!("User:{user}"));
    }
    if scheme.eq_ignore_ascii_case("Bearer") {
        let oauth = b
            .config
            .oauthbearer
            .as_deref()
            .ok_or("Bearer tokens need OAUTHBEARER configured")?;
        let (sub, _exp) = oauth.validate(rest.trim())?;
        return Ok(format!("User:{sub}"));
    }
    Err(format!(
        "the {scheme} scheme is not accepted: use Basic or Bearer"
    ))
}

fn unauthorized(why: &str) -> Response {
    let mut resp = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        format!("log in with a Kafka user (Basic) or a token (Bearer): {why}"),
    )
    .into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"AeroStream\", charset=\"UTF-8\""),
    );
    resp
}

/// The client's address as ACL hosts name it (IPv4 for an IPv4-mapped
/// IPv6 peer).
fn client_host(req: &Request) -> String {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_canonical().to_string())
        .unwrap_or_default()
}

/// The middleware: puts the request's [`Caller`] on it, the principal its
/// login proves (`User:ANONYMOUS` with security off, or on the open
/// paths), and refuses a missing or wrong login with 401. What the
/// principal may do is decided by each handler with the ACLs (see
/// `caller.rs`); extensions' endpoints by [`cluster_gate`].
pub(super) async fn require_login(
    State(st): State<HttpState>,
    mut req: Request,
    next: Next,
) -> Response {
    let b = &st.broker;
    let host = client_host(&req);
    if !b.config.authz.enabled || OPEN.contains(&req.uri().path()) {
        req.extensions_mut().insert(Caller::new(ANONYMOUS, host));
        return next.run(req).await;
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_canonical());
    let from = peer.unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let who = match principal(b, req.headers(), from).await {
        Ok(p) => p,
        Err(why) => {
            tracing::info!(path = req.uri().path(), reason = %why, "HTTP login refused");
            return unauthorized(&why);
        }
    };
    req.extensions_mut().insert(Caller::new(who, host));
    next.run(req).await
}

/// What an endpoint outside the REST API (an extension's) needs: DESCRIBE
/// on the cluster to read (GET, HEAD), ALTER to do anything else, or being
/// a superuser.
pub(super) fn cluster_gate(b: &Broker, caller: &Caller, method: &Method) -> Result<(), ApiError> {
    let operation = if method == Method::GET || method == Method::HEAD {
        AclOperation::Describe
    } else {
        AclOperation::Alter
    };
    caller.require_on_cluster(b, operation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_login_is_its_user_and_password_for_a_while_only() {
        let r = remembered();
        let now = Instant::now();
        let tag = r.tag("alice", "right").expect("a key");
        assert!(!r.knows(&tag, now));
        r.remember(tag.clone(), now);
        assert!(r.knows(&tag, now + Duration::from_secs(1)));
        assert!(!r.knows(&tag, now + LOGIN_TTL), "forgotten after the TTL");
        // another user, another password, or the same bytes split elsewhere
        r.remember(r.tag("a\0b", "c").expect("a key"), now);
        for (user, password) in [
            ("alice", "wrong"),
            ("bob", "right"),
            ("aliceright", ""),
            ("a", "b\0c"),
        ] {
            let other = r.tag(user, password).expect("a key");
            assert!(!r.knows(&other, now), "{user:?}/{password:?}");
        }
    }
}
