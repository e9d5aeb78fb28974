//! The hello that opens a connection and the authentication it may
//! carry or start (one-message and multi-message SASL mechanisms).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use sdk::proto::{self, ErrorCode, ErrorFrame, Message};

use super::shared::fatal;
use crate::broker::{Broker, Metrics};
use crate::kafka::response::ResponseFrame;
use crate::native::{frame_of, Session};

/// What the hello, or a message of the authentication after it, settled.
pub(in crate::native) struct Settled {
    /// The answer to write.
    pub answer: ResponseFrame,
    /// The connection's session: complete unless `auth` is set.
    pub session: Session,
    /// The authentication still under way; `None` once the client may
    /// send requests.
    pub auth: Option<crate::sasl::Session>,
}

/// Serves the first frame of a connection, which must be a hello, and the
/// authentication it may carry (a one-message mechanism). On a server that
/// requires authentication (SASL mechanisms configured), a hello without
/// it leaves the authentication to [`authenticate`]. The error frame to
/// close with when refused.
pub(in crate::native) fn hello(
    b: &Broker,
    peer: IpAddr,
    op: u8,
    body: Bytes,
) -> Result<Settled, ErrorFrame> {
    let correlation = proto::correlation_of(&body).unwrap_or(0);
    if op != proto::op::HELLO {
        return Err(fatal(
            correlation,
            ErrorCode::HELLO_REQUIRED,
            format!("the first frame must be a hello (operation 0x01), not operation {op:#04x}"),
        ));
    }
    let h = proto::Hello::decode_body(body)
        .map_err(|e| fatal(correlation, ErrorCode::INVALID_REQUEST, e.to_string()))?;
    let version = h.max_version.min(proto::MAX_VERSION);
    if version < h.min_version.max(proto::MIN_VERSION) {
        return Err(fatal(
            h.correlation,
            ErrorCode::UNSUPPORTED_VERSION,
            format!(
                "the client speaks versions {}..={}, this server {}..={}",
                h.min_version,
                h.max_version,
                proto::MIN_VERSION,
                proto::MAX_VERSION
            ),
        ));
    }
    let mut session = Session {
        client_id: Arc::from(h.client_id.as_str()),
        version,
        principal: Arc::from(security::authz::ANONYMOUS),
        expires: None,
    };
    let answer = frame_of(&proto::HelloResponse {
        correlation: h.correlation,
        error: ErrorCode::NONE,
        version,
        node_id: u32::try_from(b.config.node_id).unwrap_or(0),
        max_frame_bytes: u32::try_from(b.config.max_request_bytes).unwrap_or(u32::MAX),
        server: format!("aerostream {}", env!("CARGO_PKG_VERSION")),
    });
    if b.config.sasl_mechanisms.is_empty() {
        if !h.auth_mechanism.is_empty() {
            return Err(fatal(
                h.correlation,
                ErrorCode::AUTHENTICATION_FAILED,
                format!(
                    "authentication mechanism {:?} is not enabled on this server (it authenticates no one)",
                    h.auth_mechanism
                ),
            ));
        }
        return Ok(Settled {
            answer,
            session,
            auth: None,
        });
    }
    let mut auth = crate::sasl::Session::default();
    if h.auth_mechanism.is_empty() {
        return Ok(Settled {
            answer,
            session,
            auth: Some(auth),
        });
    }
    let now = Instant::now();
    let step = auth
        .native_message(
            &crate::server::sasl_settings(b, peer),
            &h.auth_mechanism,
            &h.auth_bytes,
            now,
        )
        .map_err(|why| refused(b, h.correlation, why))?;
    if !step.complete {
        return Err(refused(
            b,
            h.correlation,
            format!(
                "{} takes more than one message: authenticate after the hello (operation 0x14)",
                h.auth_mechanism
            ),
        ));
    }
    authenticated(&mut session, &auth, now);
    Ok(Settled {
        answer,
        session,
        auth: None,
    })
}

/// Counts a refused authentication; the error frame that closes the
/// connection.
fn refused(b: &Broker, correlation: u32, why: String) -> ErrorFrame {
    Metrics::add(&b.metrics.sasl_failures, 1);
    tracing::info!(reason = %why, "native authentication failed");
    fatal(correlation, ErrorCode::AUTHENTICATION_FAILED, why)
}

/// The session of a client that completed its authentication.
fn authenticated(session: &mut Session, auth: &crate::sasl::Session, now: Instant) {
    let user = auth.user().unwrap_or_default();
    session.principal = Arc::from(format!("User:{user}"));
    session.expires = auth.expires().filter(|e| *e > now);
}

/// Serves a frame of a connection that said hello but has yet to complete
/// the authentication the server requires: an Authenticate message, or
/// the error frame that closes the connection.
pub(in crate::native) fn authenticate(
    b: &Broker,
    peer: IpAddr,
    session: &mut Session,
    auth: &mut crate::sasl::Session,
    op: u8,
    body: Bytes,
) -> Result<Settled, ErrorFrame> {
    let correlation = proto::correlation_of(&body).unwrap_or(0);
    if op != proto::op::AUTHENTICATE {
        Metrics::add(&b.metrics.sasl_failures, 1);
        return Err(fatal(
            correlation,
            ErrorCode::AUTHENTICATION_REQUIRED,
            format!("operation {op:#04x} before the client authenticated: this server requires authentication (operation 0x14)"),
        ));
    }
    let a = proto::Authenticate::decode_body(body)
        .map_err(|e| fatal(correlation, ErrorCode::INVALID_REQUEST, e.to_string()))?;
    let now = Instant::now();
    let step = auth
        .native_message(
            &crate::server::sasl_settings(b, peer),
            &a.mechanism,
            &a.auth_bytes,
            now,
        )
        .map_err(|why| refused(b, a.correlation, why))?;
    if step.complete {
        authenticated(session, auth, now);
    }
    let answer = frame_of(&proto::AuthenticateResponse {
        correlation: a.correlation,
        error: ErrorCode::NONE,
        auth_bytes: step.answer,
        complete: step.complete,
        session_lifetime_ms: if step.complete { step.lifetime_ms } else { 0 },
    });
    Ok(Settled {
        answer,
        session: session.clone(),
        auth: (!step.complete).then(|| std::mem::take(auth)),
    })
}
