//! SASL on the Kafka listener, as Kafka clients speak it: SaslHandshake v1
//! names a mechanism, then SaslAuthenticate carries its messages until the
//! client is authenticated (KIP-152). Until then a connection may only ask
//! for ApiVersions; anything else closes it, as Kafka does. A failed
//! authentication is answered with SASL_AUTHENTICATION_FAILED and the
//! connection closed.
//!
//! Mechanisms: PLAIN (checked against the user's SCRAM credential, so one
//! password serves both) and SCRAM-SHA-256/512, with credentials in the
//! metastore ([`metastore::ScramCredential`]). The authenticated user name
//! is the connection's principal (`User:NAME`).
//!
//! Re-authentication (KIP-368): with a session lifetime configured
//! (`connections.max.reauth.ms`), SaslAuthenticate tells the client how
//! long its session lasts (no longer than an OAUTHBEARER token's `exp`);
//! the client authenticates again on the same connection before then, with
//! the same mechanism and as the same principal, and a connection that
//! sends anything else after its session ended is closed.

pub mod mechanism;

pub use mechanism::Mechanism;

/// The largest request a connection may send before it authenticated
/// (Kafka's `sasl.server.max.receive.size`): an unauthenticated client
/// cannot make the broker hold a large request.
pub const MAX_UNAUTHENTICATED_REQUEST: usize = 512 * 1024;
pub use metastore::{ScramCredential, ScramMechanism};

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;
use metastore::{Metastore, Security};

use security::{oauthbearer, scram, LoginError};

use kafka_protocol::messages::ResponseKind;

use crate::kafka::api::{encode_frame, DispatchError};
use crate::kafka::response::ResponseFrame;

/// How far a connection's authentication got.
#[derive(Debug, Default)]
enum State {
    #[default]
    Start,
    Chosen(Mechanism),
    Scram(Box<scram::Exchange>),
    Done,
}

/// One connection's SASL authentication.
#[derive(Debug, Default)]
pub struct Session {
    state: State,
    user: Option<String>,
    /// Whom the last completed authentication was for, and with what.
    authenticated_as: Option<(String, Mechanism)>,
    /// When the session ends (re-authentication on).
    expires: Option<Instant>,
    /// The lifetime of a session just completed, until its answer has been
    /// sent ([`Session::answered`]).
    starting: Option<Duration>,
    /// An OAUTHBEARER token's `exp`, for the session's end.
    token_expiry: Option<u64>,
    /// Completed authentications on this connection.
    completed: u64,
    /// The mechanism of the exchange under way.
    mechanism: Option<Mechanism>,
}

/// What a connection's SASL exchange is checked with.
pub struct Settings<'a> {
    pub mechanisms: &'a [Mechanism],
    pub catalog: &'a Metastore,
    pub oauth: Option<&'a oauthbearer::Validator>,
    /// Kafka's `connections.max.reauth.ms`: how long a session lasts
    /// before the client must authenticate again; `None`: for ever.
    pub max_session: Option<Duration>,
    /// Checks PLAIN passwords, their cost bounded per address.
    pub passwords: &'a security::Passwords,
    /// The client's address.
    pub peer: std::net::IpAddr,
}

/// What the connection does with a request before authentication.
pub enum Step {
    /// Served as usual (ApiVersions).
    Pass,
    /// Send this answer; then close the connection when `close` is set.
    Answer { frame: ResponseFrame, close: bool },
    /// Close the connection without an answer.
    Close(String),
}

fn auth_failed(mechanism: Mechanism) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mechanism.name()
    )
}

impl Session {
    /// Whether the client has authenticated.
    pub fn authenticated(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The authenticated user.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// How many times the client completed authentication on this
    /// connection (more than once: it re-authenticated).
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Starts the clock of a session whose SaslAuthenticate answer has just
    /// been sent. The client counts the lifetime from when it reads that
    /// answer and re-authenticates at about 90% of it, so time spent serving
    /// and writing the answer (long on a loaded machine) must not come out
    /// of that margin. It lengthens the session by no more than the write.
    pub fn answered(&mut self, now: Instant) {
        if let Some(lifetime) = self.starting.take() {
            self.expires = Some(now + lifetime);
        }
    }

    /// Whether the session ended without the client authenticating again.
    pub fn expired(&self, now: Instant) -> bool {
        self.authenticated() && self.expires.is_some_and(|e| now >= e)
    }

    /// Whether a request must go through [`Session::step`] rather than be
    /// served: everything before authentication, and SaslHandshake or
    /// SaslAuthenticate when re-authentication is on.
    pub fn wants(&self, settings: &Settings<'_>, frame: &[u8]) -> bool {
        if !self.authenticated() {
            return true;
        }
        let key = frame.get(..2).map(|k| i16::from_be_bytes([k[0], k[1]]));
        settings.max_session.is_some()
            && matches!(key, Some(k) if k == ApiKey::SaslHandshake as i16 || k == ApiKey::SaslAuthenticate as i16)
    }

    /// Handles a request that arrives before the client authenticated, or
    /// that re-authenticates it.
    pub fn step(
        &mut self,
        settings: &Settings<'_>,
        frame: &Bytes,
        now: Instant,
    ) -> Result<Step, DispatchError> {
        let enabled = settings.mechanisms;
        if frame.len() < 8 {
            return Err(DispatchError::BadHeader(format!("{} bytes", frame.len())));
        }
        let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let api = ApiKey::try_from(raw_key).map_err(|_| DispatchError::UnknownApi(raw_key))?;
        match api {
            ApiKey::ApiVersions => return Ok(Step::Pass),
            ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {}
            other => {
                return Ok(Step::Close(format!(
                    "{other:?} before SASL authentication completed"
                )))
            }
        }
        let Some((lo, hi)) = crate::kafka::versions::range(api) else {
            return Err(DispatchError::UnsupportedVersion { api, version });
        };
        if version < lo || version > hi {
            return Err(DispatchError::UnsupportedVersion { api, version });
        }
        let mut body = frame.clone();
        let header = RequestHeader::decode(&mut body, api.request_header_version(version))
            .map_err(|e| DispatchError::BadHeader(e.to_string()))?;
        let malformed = |reason: String| DispatchError::Malformed {
            api,
            version,
            reason,
        };
        if api == ApiKey::SaslHandshake {
            let req = SaslHandshakeRequest::decode(&mut body, version)
                .map_err(|e| malformed(e.to_string()))?;
            let offered: Vec<StrBytes> = enabled
                .iter()
                .map(|m| StrBytes::from_static_str(m.name()))
                .collect();
            let resp = SaslHandshakeResponse::default().with_mechanisms(offered);
            let (resp, close) = match self.choose(settings, req.mechanism.as_str()) {
                Ok(()) => (resp, false),
                Err(code) => (resp.with_error_code(code.code()), true),
            };
            let frame = encode_frame(&header, api, &ResponseKind::SaslHandshake(resp))?;
            return Ok(Step::Answer { frame, close });
        }
        let req = SaslAuthenticateRequest::decode(&mut body, version)
            .map_err(|e| malformed(e.to_string()))?;
        let Exchanged {
            answer,
            error,
            lifetime_ms,
        } = self.authenticate(settings, &req.auth_bytes, now);
        let mut resp = SaslAuthenticateResponse::default()
            .with_auth_bytes(answer)
            .with_session_lifetime_ms(lifetime_ms);
        let close = error.is_some();
        if let Some((code, message)) = error {
            resp = resp
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message)));
        }
        let frame = encode_frame(&header, api, &ResponseKind::SaslAuthenticate(resp))?;
        Ok(Step::Answer { frame, close })
    }
}

/// What one client message of an exchange gave.
struct Exchanged {
    /// The server's message back.
    answer: Bytes,
    /// Why the exchange failed (the connection closes).
    error: Option<(ResponseError, String)>,
    /// The session's lifetime once authenticated (0: no end).
    lifetime_ms: i64,
}

/// One message of a native-protocol exchange, served.
#[derive(Debug)]
pub struct NativeStep {
    /// The server's message back.
    pub answer: Bytes,
    /// Whether the client is now authenticated.
    pub complete: bool,
    /// The session's lifetime in ms once complete (0: no end).
    pub lifetime_ms: u64,
}

impl Session {
    /// Starts an exchange with the mechanism a client named (SaslHandshake,
    /// or a native message): one of the enabled ones, or the one used
    /// before when re-authenticating.
    fn choose(&mut self, settings: &Settings<'_>, name: &str) -> Result<(), ResponseError> {
        let chosen = settings
            .mechanisms
            .iter()
            .copied()
            .find(|m| m.name().eq_ignore_ascii_case(name));
        match (&self.state, chosen) {
            (State::Start, Some(m)) => {
                self.state = State::Chosen(m);
                self.mechanism = Some(m);
                Ok(())
            }
            // re-authentication, with the mechanism used before
            (State::Done, Some(m))
                if settings.max_session.is_some()
                    && self
                        .authenticated_as
                        .as_ref()
                        .is_some_and(|(_, was)| *was == m) =>
            {
                self.state = State::Chosen(m);
                Ok(())
            }
            (State::Start, None) => Err(ResponseError::UnsupportedSaslMechanism),
            _ => Err(ResponseError::IllegalSaslState),
        }
    }

    /// Serves one client message of the chosen mechanism's exchange.
    fn authenticate(&mut self, settings: &Settings<'_>, token: &Bytes, now: Instant) -> Exchanged {
        let (catalog, oauth) = (settings.catalog, settings.oauth);
        let (answer, error) = match std::mem::take(&mut self.state) {
            State::Chosen(Mechanism::Plain) => match plain(settings, token, now) {
                Ok(user) => {
                    self.user = Some(user);
                    self.state = State::Done;
                    (Bytes::new(), None)
                }
                Err(e) => {
                    tracing::info!(reason = %e, "SASL/PLAIN authentication failed");
                    (Bytes::new(), Some(auth_failed(Mechanism::Plain)))
                }
            },
            State::Chosen(Mechanism::Scram(m)) => {
                let first = std::str::from_utf8(token)
                    .map_err(|_| LoginError::NotUtf8("the client's first message"))
                    .and_then(scram::parse_client_first);
                let started = first.and_then(|f| {
                    let c = catalog.scram_credential(&f.user, m).ok_or_else(|| {
                        LoginError::NoCredential {
                            mechanism: m.name(),
                            user: f.user.clone(),
                        }
                    })?;
                    let user = f.user.clone();
                    scram::Exchange::start(m, f, c).map(|(x, reply)| (x, reply, user))
                });
                match started {
                    Ok((x, reply, user)) => {
                        self.user = Some(user);
                        self.state = State::Scram(Box::new(x));
                        (Bytes::from(reply), None)
                    }
                    Err(e) => {
                        tracing::info!(reason = %e, mechanism = m.name(), "SASL/SCRAM authentication failed");
                        (Bytes::new(), Some(auth_failed(Mechanism::Scram(m))))
                    }
                }
            }
            State::Chosen(Mechanism::OAuthBearer) => match bearer(oauth, token) {
                Ok((user, exp)) => {
                    self.user = Some(user);
                    self.token_expiry = Some(exp);
                    self.state = State::Done;
                    (Bytes::new(), None)
                }
                Err(e) => {
                    tracing::info!(reason = %e, "SASL/OAUTHBEARER authentication failed");
                    (
                        Bytes::new(),
                        Some(format!("{}: {e}", auth_failed(Mechanism::OAuthBearer))),
                    )
                }
            },
            State::Scram(x) => {
                let m = x.mechanism();
                let done = std::str::from_utf8(token)
                    .map_err(|_| LoginError::NotUtf8("the client's final message"))
                    .and_then(|fin| x.finish(fin));
                match done {
                    Ok(server_final) => {
                        self.state = State::Done;
                        (Bytes::from(server_final), None)
                    }
                    Err(e) => {
                        tracing::info!(reason = %e, mechanism = m.name(), user = ?self.user, "SASL/SCRAM authentication failed");
                        self.user = None;
                        (Bytes::new(), Some(auth_failed(Mechanism::Scram(m))))
                    }
                }
            }
            State::Start | State::Done => {
                return Exchanged {
                    answer: Bytes::new(),
                    error: Some((
                        ResponseError::IllegalSaslState,
                        "SaslAuthenticate before SaslHandshake".to_string(),
                    )),
                    lifetime_ms: 0,
                }
            }
        };
        let mut error = error;
        let mut lifetime_ms = 0;
        if error.is_none() && self.authenticated() {
            match self.complete(settings, now) {
                Ok(ms) => lifetime_ms = ms,
                Err(e) => error = Some(e),
            }
        }
        Exchanged {
            answer,
            error: error.map(|e| (ResponseError::SaslAuthenticationFailed, e)),
            lifetime_ms,
        }
    }

    /// Serves one message of a native-protocol exchange: the hello's, or an
    /// Authenticate's. Every message names its mechanism: the first one
    /// chooses it, the others must name the same. `Err`: why the client is
    /// refused (the connection closes).
    pub fn native_message(
        &mut self,
        settings: &Settings<'_>,
        mechanism: &str,
        token: &Bytes,
        now: Instant,
    ) -> Result<NativeStep, String> {
        match &self.state {
            State::Start => self.choose(settings, mechanism).map_err(|e| match e {
                ResponseError::UnsupportedSaslMechanism => format!(
                    "mechanism {mechanism:?} is not enabled on this server (enabled: {})",
                    settings
                        .mechanisms
                        .iter()
                        .map(|m| m.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => "the exchange is in a state that does not take this message".to_string(),
            })?,
            State::Scram(x) if x.mechanism().name().eq_ignore_ascii_case(mechanism) => {}
            State::Scram(x) => {
                return Err(format!(
                    "the exchange under way is {}, not {mechanism}",
                    x.mechanism().name()
                ))
            }
            State::Chosen(_) | State::Done => {
                return Err("the connection is already authenticated".to_string())
            }
        }
        let done = self.authenticate(settings, token, now);
        if let Some((_, why)) = done.error {
            return Err(why);
        }
        Ok(NativeStep {
            answer: done.answer,
            complete: self.authenticated(),
            lifetime_ms: u64::try_from(done.lifetime_ms).unwrap_or(0),
        })
    }

    /// When the session ends (re-authentication on, or a token's expiry).
    pub fn expires(&self) -> Option<Instant> {
        self.expires
    }
}

impl Session {
    /// Records a completed authentication: the same principal and
    /// mechanism as before when re-authenticating, and the session's end;
    /// the session's lifetime in ms for the client (0: no end).
    fn complete(&mut self, settings: &Settings<'_>, now: Instant) -> Result<i64, String> {
        let user = self.user.clone().unwrap_or_default();
        let mechanism = match &self.authenticated_as {
            Some((was, _)) if *was != user => {
                return Err(format!(
                    "re-authentication as {user} on a connection authenticated as {was}"
                ))
            }
            Some((_, m)) => *m,
            None => self.mechanism.ok_or("no mechanism was chosen")?,
        };
        self.authenticated_as = Some((user, mechanism));
        self.completed += 1;
        let Some(max) = settings.max_session else {
            return Ok(0);
        };
        // no longer than the token is valid
        let token_left = self.token_expiry.take().map(|exp| {
            let now_s = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            Duration::from_secs(exp.saturating_sub(now_s))
        });
        let lifetime = token_left.map_or(max, |left| left.min(max));
        self.expires = Some(now + lifetime);
        self.starting = Some(lifetime);
        Ok(i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX))
    }
}

/// Checks an OAUTHBEARER initial response; the token's principal name on
/// success.
fn bearer(
    oauth: Option<&oauthbearer::Validator>,
    message: &[u8],
) -> Result<(String, u64), LoginError> {
    let oauth = oauth.ok_or(LoginError::NoKeySet)?;
    let r = oauthbearer::initial_response(message).map_err(LoginError::InvalidToken)?;
    let (user, exp) = oauth.validate(r.token).map_err(LoginError::InvalidToken)?;
    match r.authzid {
        Some(a) if a != user => Err(LoginError::ActsAsOther {
            user,
            other: a.to_string(),
        }),
        _ => Ok((user, exp)),
    }
}

/// Checks a SASL/PLAIN message (`[authzid] NUL user NUL password`) against
/// the user's SCRAM credential (SHA-512 first); the user on success.
fn plain(settings: &Settings<'_>, token: &[u8], now: Instant) -> Result<String, LoginError> {
    let mut parts = token.split(|b| *b == 0);
    let authzid = parts.next().unwrap_or_default();
    let user = parts.next().ok_or(LoginError::Malformed("no user"))?;
    let password = parts.next().ok_or(LoginError::Malformed("no password"))?;
    if parts.next().is_some() {
        return Err(LoginError::Malformed("too many fields"));
    }
    let user = std::str::from_utf8(user).map_err(|_| LoginError::NotUtf8("the user"))?;
    let password =
        std::str::from_utf8(password).map_err(|_| LoginError::NotUtf8("the password"))?;
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(LoginError::ActsAsOther {
            user: user.to_string(),
            other: String::from_utf8_lossy(authzid).into_owned(),
        });
    }
    settings
        .passwords
        .check(settings.catalog, user, password, settings.peer, now)?;
    Ok(user.to_string())
}
