//! Messages about the connection rather than the data: the hello that
//! negotiates a version, SASL authentication, ping, and the error frame a
//! server sends before it closes a connection.

use bytes::{BufMut, Bytes};

use super::codec::message;
use super::error_code::ErrorCode;
use super::op::{self, RESPONSE};
use crate::wire::WireWrite;

/// Protocol (body) versions this build speaks, negotiated by [`Hello`].
pub const MIN_VERSION: u16 = 1;
pub const MAX_VERSION: u16 = 1;

/// The first frame a client sends on a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct Hello {
    pub correlation: u32,
    pub min_version: u16,
    pub max_version: u16,
    pub client_id: String,
    /// A SASL mechanism whose exchange is one client message (`PLAIN`,
    /// `OAUTHBEARER`), to authenticate within the hello; empty for none.
    /// Multi-message mechanisms (SCRAM) use [`Authenticate`] after it.
    pub auth_mechanism: String,
    /// That message.
    #[cfg_attr(test, serde(with = "crate::proto::hex_serde"))]
    pub auth_bytes: Bytes,
}

message!(
    Hello,
    op::HELLO,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.min_version);
        b.put_u16(s.max_version);
        b.put_string(&s.client_id);
        b.put_string(&s.auth_mechanism);
        b.put_blob(&s.auth_bytes);
    },
    |r| {
        Ok(Hello {
            correlation: r.u32("correlation id")?,
            min_version: r.u16("min version")?,
            max_version: r.u16("max version")?,
            client_id: r.string("client id")?,
            auth_mechanism: r.string("auth mechanism")?,
            auth_bytes: r.blob("auth bytes")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct HelloResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// The version both sides speak from now on.
    pub version: u16,
    pub node_id: u32,
    /// The largest frame body the server accepts.
    pub max_frame_bytes: u32,
    pub server: String,
}

message!(
    HelloResponse,
    op::HELLO | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_u16(s.version);
        b.put_u32(s.node_id);
        b.put_u32(s.max_frame_bytes);
        b.put_string(&s.server);
    },
    |r| {
        Ok(HelloResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            version: r.u16("version")?,
            node_id: r.u32("node id")?,
            max_frame_bytes: r.u32("max frame bytes")?,
            server: r.string("server")?,
        })
    }
);

/// One client message of a SASL exchange, as Kafka's SaslAuthenticate
/// carries it: SCRAM takes two (client-first, client-final), PLAIN and
/// OAUTHBEARER one. Every message of an exchange names its mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct Authenticate {
    pub correlation: u32,
    pub mechanism: String,
    #[cfg_attr(test, serde(with = "crate::proto::hex_serde"))]
    pub auth_bytes: Bytes,
}

message!(
    Authenticate,
    op::AUTHENTICATE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.mechanism);
        b.put_blob(&s.auth_bytes);
    },
    |r| {
        Ok(Authenticate {
            correlation: r.u32("correlation id")?,
            mechanism: r.string("mechanism")?,
            auth_bytes: r.blob("auth bytes")?,
        })
    }
);

/// The server's message of the exchange. A failed exchange is answered
/// with an error frame (AUTHENTICATION_FAILED) and the connection closed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct AuthenticateResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// The server's message (SCRAM's server-first and server-final).
    #[cfg_attr(test, serde(with = "crate::proto::hex_serde"))]
    pub auth_bytes: Bytes,
    /// Whether the client is now authenticated.
    pub complete: bool,
    /// How long the session lasts once complete, in ms; 0: for as long as
    /// the connection. Past it every request is refused with
    /// SESSION_EXPIRED and the connection closed.
    pub session_lifetime_ms: u64,
}

message!(
    AuthenticateResponse,
    op::AUTHENTICATE | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_blob(&s.auth_bytes);
        b.put_u8(u8::from(s.complete));
        b.put_u64(s.session_lifetime_ms);
    },
    |r| {
        Ok(AuthenticateResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            auth_bytes: r.blob("auth bytes")?,
            complete: r.u8("complete")? != 0,
            session_lifetime_ms: r.u64("session lifetime")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct Ping {
    pub correlation: u32,
    pub nonce: u64,
}

message!(
    Ping,
    op::PING,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u64(s.nonce);
    },
    |r| {
        Ok(Ping {
            correlation: r.u32("correlation id")?,
            nonce: r.u64("nonce")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct Pong {
    pub correlation: u32,
    pub nonce: u64,
}

message!(
    Pong,
    op::PING | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u64(s.nonce);
    },
    |r| {
        Ok(Pong {
            correlation: r.u32("correlation id")?,
            nonce: r.u64("nonce")?,
        })
    }
);

/// Sent by the server before it closes a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ErrorFrame {
    /// The request the error is about, or 0 when none could be read.
    pub correlation: u32,
    pub error: ErrorCode,
    pub message: String,
}

message!(
    ErrorFrame,
    op::ERROR,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_string(&s.message);
    },
    |r| {
        Ok(ErrorFrame {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            message: r.string("message")?,
        })
    }
);
