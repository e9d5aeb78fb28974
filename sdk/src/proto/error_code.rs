//! The error codes answers carry: one table gives each code its name, its
//! meaning and whether trying again can help.

/// A numeric error code. Codes are stable: a code keeps its meaning forever
/// and a retired one is never given to another error. A client that meets a
/// code it does not know treats it as not retriable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ErrorCode(pub u16);

macro_rules! error_codes {
    ($($name:ident = $code:literal, $retriable:literal, $text:literal;)*) => {
        impl ErrorCode {
            $(pub const $name: ErrorCode = ErrorCode($code);)*

            /// The code's name as the protocol document spells it.
            pub fn name(self) -> &'static str {
                match self.0 {
                    $($code => stringify!($name),)*
                    _ => "UNKNOWN_CODE",
                }
            }

            /// Whether the same request may succeed if sent again later.
            pub fn is_retriable(self) -> bool {
                match self.0 {
                    $($code => $retriable,)*
                    _ => false,
                }
            }

            /// What the code means.
            pub fn description(self) -> &'static str {
                match self.0 {
                    $($code => $text,)*
                    _ => "an error this client does not know",
                }
            }

            /// Every code this build knows, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode($code)),*];
        }
    };
}

error_codes! {
    NONE = 0, false, "no error";
    UNKNOWN_SERVER_ERROR = 1, false, "the server failed in a way it could not classify";
    UNSUPPORTED_VERSION = 2, false, "no protocol version is spoken by both sides";
    HELLO_REQUIRED = 3, false, "the first frame of a connection must be a hello";
    BAD_FRAME = 4, false, "the frame header is wrong (magic, framing version)";
    FRAME_TOO_LARGE = 5, false, "the frame is longer than the server accepts";
    INVALID_REQUEST = 6, false, "the body could not be decoded or breaks a rule of the operation";
    UNKNOWN_OPERATION = 7, false, "the operation code is not one the server knows";
    UNKNOWN_TOPIC = 8, true, "no topic has this name (it may still be being created)";
    UNKNOWN_PARTITION = 9, false, "the topic has no partition with this index";
    NOT_LEADER = 10, true, "this server does not lead the partition; refresh metadata";
    OFFSET_OUT_OF_RANGE = 11, false, "the offset is below the log start or past the high watermark";
    INVALID_RECORDS = 12, false, "the record batch is malformed or fails its checksum";
    RECORDS_TOO_LARGE = 13, false, "the batch is larger than the topic's max.message.bytes";
    NOT_ENOUGH_REPLICAS = 14, true, "fewer in-sync replicas than min.insync.replicas; nothing was written";
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 15, true, "written by the leader, but too few replicas confirmed it";
    TIMED_OUT = 16, true, "the request's timeout passed before it completed";
    TOPIC_ALREADY_EXISTS = 17, false, "a topic with this name exists";
    INVALID_TOPIC = 18, false, "the topic name is not allowed";
    INVALID_PARTITIONS = 19, false, "the partition count is not allowed";
    INVALID_REPLICATION_FACTOR = 20, false, "the replication factor cannot be met";
    INVALID_CONFIG = 21, false, "a topic setting is unknown or has a bad value";
    DUPLICATE_SEQUENCE = 22, false, "the batch was written before; its first offset is returned";
    OUT_OF_ORDER_SEQUENCE = 23, false, "the producer's sequence number skips ahead";
    PRODUCER_FENCED = 24, false, "a newer epoch of this producer id exists";
    UNKNOWN_PRODUCER = 25, false, "the producer id is not known to the partition";
    STORAGE_ERROR = 26, true, "the partition's log is offline or its disk failed";
    NOT_AVAILABLE = 27, true, "the server is starting, shutting down or has no leader for this yet";
    INVALID_GROUP = 28, false, "the group id is empty or not allowed";
    GROUP_BUSY = 29, false, "the group has members managed by its coordinator; offsets are committed through membership";
    UNAUTHORIZED = 30, false, "the client is not allowed to do this";
    INVALID_ACKS = 31, false, "acks must be 0, 1 or -1";
    NOT_COORDINATOR = 32, true, "this server does not coordinate the group; find its coordinator again";
    REBALANCE_IN_PROGRESS = 33, false, "the group is rebalancing: give up the partitions and join again";
    ILLEGAL_GENERATION = 34, false, "the generation is not the group's current one: join again";
    UNKNOWN_MEMBER = 35, false, "the group has no member of this id (it left or its session expired): join again as a new member";
    INCONSISTENT_GROUP_PROTOCOL = 36, false, "the group's members are of another kind (Kafka consumers) or the request does not fit the group";
    INVALID_SESSION_TIMEOUT = 37, false, "the session timeout is outside the server's group.min.session.timeout.ms..group.max.session.timeout.ms";
    GROUP_FULL = 38, false, "the group has group.max.size members already";
    DUPLICATE_SUBSCRIPTION = 39, false, "the subscription id is already open on this connection";
    TOO_MANY_SUBSCRIPTIONS = 40, false, "the connection has as many subscriptions open as the server allows";
    UNKNOWN_SUBSCRIPTION = 41, false, "no subscription with this id is open on this connection";
    AUTHENTICATION_FAILED = 42, false, "the credentials were refused, or the mechanism is not enabled on the server";
    AUTHENTICATION_REQUIRED = 43, false, "the server serves nothing but authentication until the client authenticated";
    SESSION_EXPIRED = 44, true, "the authenticated session reached its lifetime: connect and authenticate again";
    INVALID_TXN_STATE = 45, false, "the request does not fit the transaction's state (no transaction open, a partition not added to it, or it is ending)";
    CONCURRENT_TRANSACTIONS = 46, true, "the transactional id's previous transaction is still being completed";
    INVALID_TXN_TIMEOUT = 47, false, "the transaction timeout is above the server's transaction.max.timeout.ms";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl Default for ErrorCode {
    fn default() -> Self {
        ErrorCode::NONE
    }
}
