//! The client's one error type.
//!
//! Every public call returns [`Error`]. Whether trying again can help is
//! [`Error::is_retriable`]: the producer and consumer retry those errors
//! themselves and only hand back the ones that are not, or that outlived
//! their retries.

use std::sync::Arc;

use crate::proto::ErrorCode;

/// Why a call of the client failed.
///
/// `Clone` so that one failed batch can fail each of its records with the
/// same error; I/O errors are shared behind an [`Arc`] for that reason.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No connection could be made to a server (refused, unreachable, or
    /// the connection attempt timed out).
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The TLS handshake of a QUIC connection failed: above all, the
    /// server's certificate is not signed by a CA the client trusts (see
    /// [`crate::ClientBuilder::tls_ca_file`]) or does not name the host
    /// dialled. Not retriable: trying again meets the same certificate.
    #[error("TLS handshake with {addr} failed: {reason}")]
    Tls { addr: String, reason: String },
    /// Reading or writing an established connection failed.
    #[error("connection failed: {0}")]
    Io(#[source] Arc<std::io::Error>),
    /// The server sent bytes this client cannot make sense of: an
    /// undecodable frame or body, or an answer of the wrong operation.
    #[error("protocol violation by the server: {0}")]
    Protocol(String),
    /// The server refused the request with an error code.
    #[error("the server answered {code}: {message}")]
    Server { code: ErrorCode, message: String },
    /// The connection closed before the request was answered (or the
    /// producer or client it needed has shut down).
    #[error("the connection closed before the request was answered")]
    Closed,
    /// No answer came within the request timeout.
    #[error("the request timed out")]
    Timeout,
    /// Client and server share no protocol version.
    #[error(
        "the server speaks no protocol version this client speaks ({min}..={max}): {0}",
        min = crate::proto::MIN_VERSION,
        max = crate::proto::MAX_VERSION
    )]
    UnsupportedVersion(String),
    /// The bootstrap URL could not be parsed.
    #[error("invalid bootstrap URL: {0}")]
    InvalidUrl(String),
    /// The cluster has no topic of this name.
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    /// The topic has no partition of this index.
    #[error("topic {topic:?} has no partition {partition}")]
    UnknownPartition { topic: String, partition: u32 },
    /// A partition's leader is a node the client's metadata does not list.
    #[error("node {0} is not in the cluster metadata")]
    UnknownNode(u32),
    /// The client, producer or consumer was configured or used wrongly.
    #[error("configuration error: {0}")]
    Config(String),
    /// A record could not be encoded into a record batch.
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// A request or record is larger than the limit that applies to it.
    #[error("{what} of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        what: &'static str,
        size: usize,
        max: usize,
    },
    /// A newer producer took the transactional id over (or the coordinator
    /// aborted the transaction after its timeout and bumped the epoch):
    /// this producer can do nothing more; make a new one.
    #[error("the producer was fenced: {0}")]
    ProducerFenced(String),
    /// A producer holds [`crate::ProducerConfig::buffer_bytes`] of records
    /// already: [`crate::Producer::send_with`] queued nothing. Wait for
    /// answers (or flush) and send again.
    #[error("the producer's buffer of {max} bytes is full")]
    BufferFull { max: usize },
    /// The call does not fit the state of the producer's transaction (no
    /// transaction begun, one already begun, a send of it failed, …).
    #[error("invalid transaction state: {0}")]
    TransactionState(String),
}

impl Error {
    /// Whether the same call may succeed if made again later: connection
    /// trouble, timeouts, a metadata change (unknown topic or node, not
    /// leader) and the server codes marked retriable.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Connect { .. }
            | Error::Io(_)
            | Error::Closed
            | Error::Timeout
            | Error::UnknownTopic(_)
            | Error::UnknownNode(_)
            | Error::BufferFull { .. } => true,
            Error::Server { code, .. } => code.is_retriable(),
            Error::Protocol(_)
            | Error::Tls { .. }
            | Error::UnsupportedVersion(_)
            | Error::InvalidUrl(_)
            | Error::UnknownPartition { .. }
            | Error::Config(_)
            | Error::InvalidRecord(_)
            | Error::TooLarge { .. }
            | Error::ProducerFenced(_)
            | Error::TransactionState(_) => false,
        }
    }

    /// The server's error code, when the server refused the request.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the client should refresh its metadata before trying again:
    /// the partition moved, or a topic or node it routes to is unknown.
    pub(crate) fn wants_metadata(&self) -> bool {
        match self {
            Error::Server { code, .. } => wants_metadata(*code),
            Error::UnknownTopic(_) | Error::UnknownNode(_) | Error::Connect { .. } => true,
            _ => false,
        }
    }

    /// The error for a code the server answered, with its message (or the
    /// code's description when the server sent none).
    pub(crate) fn server(code: ErrorCode, message: impl Into<String>) -> Error {
        let message = message.into();
        let message = if message.is_empty() {
            code.description().to_owned()
        } else {
            message
        };
        Error::Server { code, message }
    }
}

/// Server codes after which the client's routing is stale.
pub(crate) fn wants_metadata(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NOT_LEADER
            | ErrorCode::UNKNOWN_TOPIC
            | ErrorCode::UNKNOWN_PARTITION
            | ErrorCode::NOT_AVAILABLE
    )
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(Arc::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_trouble_and_retriable_codes_are_retriable_the_rest_not() {
        assert!(Error::Closed.is_retriable());
        assert!(Error::Timeout.is_retriable());
        assert!(Error::from(std::io::Error::other("reset")).is_retriable());
        assert!(Error::server(ErrorCode::NOT_LEADER, "").is_retriable());
        assert!(!Error::server(ErrorCode::RECORDS_TOO_LARGE, "").is_retriable());
        assert!(!Error::server(ErrorCode(60_000), "").is_retriable());
        assert!(!Error::Config("x".into()).is_retriable());
        assert!(!Error::Protocol("x".into()).is_retriable());
    }

    #[test]
    fn a_server_error_without_message_says_what_its_code_means() {
        let e = Error::server(ErrorCode::NOT_LEADER, "");
        assert_eq!(
            e.to_string(),
            "the server answered NOT_LEADER (10): this server does not lead the partition; refresh metadata"
        );
        assert_eq!(e.code(), Some(ErrorCode::NOT_LEADER));
        assert!(e.wants_metadata());
    }
}
