//! Logins on the HTTP listener. With security on (the Kafka listener
//! authenticates clients, so ACLs apply), the REST API, the console and
//! extensions' endpoints need the same identities Kafka clients use:
//! `Authorization: Basic` with a SCRAM user's name and password (checked as
//! SASL/PLAIN checks it), or `Authorization: Bearer` with a JWT the
//! OAUTHBEARER key set accepts. The principal is then authorized with the
//! ACLs: reading (GET, HEAD) needs DESCRIBE on the cluster, changing
//! anything ALTER, or being a superuser. `/health`, `/healthz` and
//! `/metrics` stay open for probes and scrapers.
//!
//! A missing or wrong login gets 401 with `WWW-Authenticate: Basic`, so a
//! browser asks for one and then sends it with the console's requests.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use metastore::acl::{AclOperation, ResourceType};

use super::HttpState;
use crate::authz::{Requester, CLUSTER_RESOURCE};
use crate::broker::Broker;
use crate::rest::ApiError;

/// Paths open without a login.
const OPEN: [&str; 3] = ["/health", "/healthz", "/metrics"];

/// The principal the request's credentials prove, or why they do not.
fn principal(b: &Broker, headers: &HeaderMap) -> Result<String, String> {
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
        crate::sasl::check_password(&b.catalog, user, password)?;
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

/// The middleware: passes requests through when security is off, and
/// otherwise only with a login the ACLs allow.
pub(super) async fn require_login(
    State(st): State<HttpState>,
    req: Request,
    next: Next,
) -> Response {
    let b = &st.broker;
    let config = &b.config.authz;
    if !config.enabled || OPEN.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let who = match principal(b, req.headers()) {
        Ok(p) => p,
        Err(why) => {
            tracing::info!(path = req.uri().path(), reason = %why, "HTTP login refused");
            return unauthorized(&why);
        }
    };
    let host = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_canonical().to_string())
        .unwrap_or_default();
    let reading = req.method() == Method::GET || req.method() == Method::HEAD;
    let operation = if reading {
        AclOperation::Describe
    } else {
        AclOperation::Alter
    };
    let allowed = b.catalog.read(|s| {
        crate::authz::decide(
            config,
            s.acls(),
            Requester::new(&who, &host),
            operation,
            ResourceType::Cluster,
            CLUSTER_RESOURCE,
        )
    });
    if !allowed {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("{who} needs {operation} on the cluster (an ACL) or to be a superuser"),
        )
        .into_response();
    }
    next.run(req).await
}
