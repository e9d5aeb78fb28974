//! Why a login is refused. The SASL exchanges of the Kafka listener and of
//! the native protocol, and the HTTP port's Basic logins, fail for these
//! reasons; they are logged, and clients see Kafka's generic
//! "authentication failed" (OAUTHBEARER adds the reason, as Kafka does).

/// Why a login is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// A message, or a field of one, is not UTF-8.
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    /// A message does not follow its mechanism's grammar (RFC 5802 for
    /// SCRAM, RFC 4616 for PLAIN, RFC 7628 for OAUTHBEARER): what is wrong.
    #[error("{0}")]
    Malformed(&'static str),
    /// The client asked for SCRAM channel binding, which is not offered.
    #[error("channel binding is not supported")]
    ChannelBindingUnsupported,
    /// The final SCRAM message's channel binding differs from the first's.
    #[error("the channel binding does not match the first message")]
    ChannelBindingMismatch,
    /// The final SCRAM message's nonce is not the one the server sent.
    #[error("the nonce does not match")]
    NonceMismatch,
    /// The SCRAM proof does not hold: the password is wrong.
    #[error("invalid credentials")]
    InvalidProof,
    /// The system's random source failed.
    #[error("no randomness for a {0}")]
    NoRandomness(&'static str),
    /// The user has no credential for the SCRAM mechanism chosen.
    #[error("no {mechanism} credential for user {user}")]
    NoCredential {
        mechanism: &'static str,
        user: String,
    },
    /// No such user (PLAIN, HTTP Basic).
    #[error("no user {0}")]
    UnknownUser(String),
    /// The password is not the user's (PLAIN, HTTP Basic).
    #[error("wrong password for user {0}")]
    WrongPassword(String),
    /// The client's address failed too many password checks lately: the
    /// password was not checked.
    #[error("too many failed logins from {0} lately: the password was not checked")]
    TooManyFailures(std::net::IpAddr),
    /// The authorization identity names someone else.
    #[error("{user} may not act as {other}")]
    ActsAsOther { user: String, other: String },
    /// OAUTHBEARER is on but no key set is configured.
    #[error("no key set is configured (--sasl-oauthbearer-jwks)")]
    NoKeySet,
    /// The bearer token is not valid: why, in the JWT library's words.
    #[error("{0}")]
    InvalidToken(String),
}
