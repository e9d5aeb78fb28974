//! The operations of the native protocol and their bodies.
//!
//! Every request body starts with a `u32` correlation id that its response
//! repeats, so a client may have many requests in flight on one connection.
//! A response carries its request's operation code with the high bit set
//! ([`RESPONSE`]). The layout of every body is specified in
//! `docs/native-protocol.md`; the encoders here are its reference.

use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::{FrameHeader, HEADER_LEN};
use crate::wire::{DecodeError, Reader, WireWrite};

/// Protocol (body) versions this build speaks, negotiated by [`Hello`].
pub const MIN_VERSION: u16 = 1;
pub const MAX_VERSION: u16 = 1;

/// Operation codes. A response uses its request's code with [`RESPONSE`] set.
pub mod op {
    pub const HELLO: u8 = 0x01;
    pub const PING: u8 = 0x02;
    pub const METADATA: u8 = 0x03;
    pub const CREATE_TOPIC: u8 = 0x04;
    pub const DELETE_TOPIC: u8 = 0x05;
    pub const INIT_PRODUCER: u8 = 0x06;
    pub const PRODUCE: u8 = 0x07;
    pub const FETCH: u8 = 0x08;
    pub const LIST_OFFSETS: u8 = 0x09;
    pub const COMMIT_OFFSETS: u8 = 0x0A;
    pub const FETCH_OFFSETS: u8 = 0x0B;
    /// Opens a subscription: the server pushes a partition's new batches.
    pub const SUBSCRIBE: u8 = 0x0C;
    /// A subscription's records, sent by the server unasked (always with
    /// [`RESPONSE`] set: `0x8D`).
    pub const PUSH: u8 = 0x0D;
    /// Grants a subscription more bytes; never answered.
    pub const CREDIT: u8 = 0x0E;
    /// Ends a subscription.
    pub const UNSUBSCRIBE: u8 = 0x0F;
    pub const FIND_COORDINATOR: u8 = 0x10;
    pub const JOIN_GROUP: u8 = 0x11;
    pub const HEARTBEAT: u8 = 0x12;
    pub const LEAVE_GROUP: u8 = 0x13;
    /// One message of a SASL exchange (SCRAM, PLAIN, OAUTHBEARER), after
    /// the hello, on a server that requires authentication.
    pub const AUTHENTICATE: u8 = 0x14;
    /// Sent by the server, unasked, right before it closes a connection it
    /// cannot go on serving (bad frame, failed hello).
    pub const ERROR: u8 = 0x7F;
    /// Set on a response's operation code.
    pub const RESPONSE: u8 = 0x80;
}
pub use op::RESPONSE;

/// A numeric error code. Codes are stable: a code keeps its meaning forever
/// and a retired one is never given to another error. A client that meets a
/// code it does not know treats it as not retriable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// A message of the protocol: its operation code and body layout.
pub trait Message: Sized {
    /// The operation code in the frame header.
    const OP: u8;
    /// Appends the body (correlation id included) to `buf`.
    fn encode_body(&self, buf: &mut BytesMut);
    /// Decodes a whole body; trailing bytes are an error.
    fn decode_body(body: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = Self::decode_from(&mut r)?;
        r.finish()?;
        Ok(m)
    }
    fn decode_from(r: &mut Reader) -> Result<Self, DecodeError>;

    /// The whole frame: header and body.
    fn to_frame(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(64);
        buf.put_bytes(0, HEADER_LEN);
        self.encode_body(&mut buf);
        let len = u32::try_from(buf.len() - HEADER_LEN).unwrap_or(u32::MAX);
        buf[..HEADER_LEN].copy_from_slice(&FrameHeader { op: Self::OP, len }.encode());
        buf.freeze()
    }
}

/// Decodes the correlation id at the start of any body, if there is one.
pub fn correlation_of(body: &[u8]) -> Option<u32> {
    body.get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
}

macro_rules! message {
    ($ty:ident, $op:expr, |$s:ident, $b:ident| $enc:block, |$r:ident| $dec:block) => {
        impl Message for $ty {
            const OP: u8 = $op;
            fn encode_body(&self, $b: &mut BytesMut) {
                let $s = self;
                $enc
            }
            fn decode_from($r: &mut Reader) -> Result<Self, DecodeError> {
                $dec
            }
        }
    };
}

// ---------------------------------------------------------------- hello

/// The first frame a client sends on a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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

impl Default for ErrorCode {
    fn default() -> Self {
        ErrorCode::NONE
    }
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

// ---------------------------------------------------------------- authenticate

/// One client message of a SASL exchange, as Kafka's SaslAuthenticate
/// carries it: SCRAM takes two (client-first, client-final), PLAIN and
/// OAUTHBEARER one. Every message of an exchange names its mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Authenticate {
    pub correlation: u32,
    pub mechanism: String,
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
pub struct AuthenticateResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// The server's message (SCRAM's server-first and server-final).
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

// ---------------------------------------------------------------- ping

#[derive(Debug, Clone, PartialEq, Eq, Default)]
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

// ---------------------------------------------------------------- error

/// Sent by the server before it closes a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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

// ---------------------------------------------------------------- metadata

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    pub correlation: u32,
    /// Topics to describe; empty for all.
    pub topics: Vec<String>,
}

message!(
    Metadata,
    op::METADATA,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(t);
        }
    },
    |r| {
        Ok(Metadata {
            correlation: r.u32("correlation id")?,
            topics: r.array("topics", 2, |r| r.string("topic"))?,
        })
    }
);

/// A server of the cluster, at its native address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    pub id: u32,
    pub host: String,
    pub port: u16,
    /// Empty when the server has no rack.
    pub rack: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionMetadata {
    pub index: u32,
    /// The leader's node id, or -1 when the partition has none right now.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<u32>,
    pub in_sync: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicMetadata {
    pub name: String,
    pub error: ErrorCode,
    pub partitions: Vec<PartitionMetadata>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataResponse {
    pub correlation: u32,
    pub nodes: Vec<Node>,
    pub topics: Vec<TopicMetadata>,
}

fn put_ids(b: &mut BytesMut, ids: &[u32]) {
    b.put_count(ids.len());
    for id in ids {
        b.put_u32(*id);
    }
}

message!(
    MetadataResponse,
    op::METADATA | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.nodes.len());
        for n in &s.nodes {
            b.put_u32(n.id);
            b.put_string(&n.host);
            b.put_u16(n.port);
            b.put_string(&n.rack);
        }
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(&t.name);
            b.put_u16(t.error.0);
            b.put_count(t.partitions.len());
            for p in &t.partitions {
                b.put_u32(p.index);
                b.put_i32(p.leader);
                b.put_i32(p.leader_epoch);
                put_ids(b, &p.replicas);
                put_ids(b, &p.in_sync);
            }
        }
    },
    |r| {
        Ok(MetadataResponse {
            correlation: r.u32("correlation id")?,
            nodes: r.array("nodes", 10, |r| {
                Ok(Node {
                    id: r.u32("node id")?,
                    host: r.string("host")?,
                    port: r.u16("port")?,
                    rack: r.string("rack")?,
                })
            })?,
            topics: r.array("topics", 8, |r| {
                Ok(TopicMetadata {
                    name: r.string("topic")?,
                    error: ErrorCode(r.u16("error")?),
                    partitions: r.array("partitions", 20, |r| {
                        Ok(PartitionMetadata {
                            index: r.u32("partition")?,
                            leader: r.i32("leader")?,
                            leader_epoch: r.i32("leader epoch")?,
                            replicas: r.array("replicas", 4, |r| r.u32("replica"))?,
                            in_sync: r.array("in-sync replicas", 4, |r| r.u32("replica"))?,
                        })
                    })?,
                })
            })?,
        })
    }
);

// ---------------------------------------------------------------- topics

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateTopic {
    pub correlation: u32,
    pub name: String,
    /// -1 for the server's default (`num.partitions`).
    pub partitions: i32,
    /// -1 for the server's default (`default.replication.factor`).
    pub replication_factor: i16,
    /// Kafka topic settings, e.g. `retention.ms`.
    pub configs: Vec<(String, String)>,
}

message!(
    CreateTopic,
    op::CREATE_TOPIC,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.name);
        b.put_i32(s.partitions);
        b.put_i16(s.replication_factor);
        b.put_count(s.configs.len());
        for (k, v) in &s.configs {
            b.put_string(k);
            b.put_string(v);
        }
    },
    |r| {
        Ok(CreateTopic {
            correlation: r.u32("correlation id")?,
            name: r.string("topic")?,
            partitions: r.i32("partitions")?,
            replication_factor: r.i16("replication factor")?,
            configs: r.array("configs", 4, |r| {
                Ok((r.string("config name")?, r.string("config value")?))
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeleteTopic {
    pub correlation: u32,
    pub name: String,
}

message!(
    DeleteTopic,
    op::DELETE_TOPIC,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.name);
    },
    |r| {
        Ok(DeleteTopic {
            correlation: r.u32("correlation id")?,
            name: r.string("topic")?,
        })
    }
);

/// The answer to [`CreateTopic`] and [`DeleteTopic`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// Empty when `error` is NONE.
    pub message: String,
}

impl TopicResponse {
    fn encode(&self, b: &mut BytesMut) {
        b.put_u32(self.correlation);
        b.put_u16(self.error.0);
        b.put_string(&self.message);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(TopicResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            message: r.string("message")?,
        })
    }
}

/// [`TopicResponse`] to a [`CreateTopic`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateTopicResponse(pub TopicResponse);
message!(
    CreateTopicResponse,
    op::CREATE_TOPIC | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(CreateTopicResponse(TopicResponse::decode(r)?)) }
);

/// [`TopicResponse`] to a [`DeleteTopic`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeleteTopicResponse(pub TopicResponse);
message!(
    DeleteTopicResponse,
    op::DELETE_TOPIC | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(DeleteTopicResponse(TopicResponse::decode(r)?)) }
);

// ---------------------------------------------------------------- producer id

/// Asks for a producer id and epoch for an idempotent producer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitProducer {
    pub correlation: u32,
}

message!(
    InitProducer,
    op::INIT_PRODUCER,
    |s, b| {
        b.put_u32(s.correlation);
    },
    |r| {
        Ok(InitProducer {
            correlation: r.u32("correlation id")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitProducerResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

message!(
    InitProducerResponse,
    op::INIT_PRODUCER | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_i64(s.producer_id);
        b.put_i16(s.producer_epoch);
    },
    |r| {
        Ok(InitProducerResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            producer_id: r.i64("producer id")?,
            producer_epoch: r.i16("producer epoch")?,
        })
    }
);

// ---------------------------------------------------------------- produce

/// What a produce waits for before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// No response at all.
    None,
    /// The leader appended the batch.
    Leader,
    /// Every in-sync replica has the batch (at least `min.insync.replicas`).
    #[default]
    All,
}

impl Acks {
    pub fn to_wire(self) -> i8 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
    pub fn from_wire(v: i8) -> Option<Acks> {
        match v {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// One partition's record batch in a [`Produce`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProducePartition {
    pub partition: u32,
    /// Exactly one Kafka RecordBatch (magic 2), as the log stores it. An
    /// idempotent producer's id, epoch and sequence are in its header.
    pub batch: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProduceTopic {
    pub name: String,
    pub partitions: Vec<ProducePartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Produce {
    pub correlation: u32,
    /// 0: no response; 1: after the leader's append; -1: after every
    /// in-sync replica has it. Anything else is INVALID_ACKS.
    pub acks: i8,
    pub timeout_ms: u32,
    pub topics: Vec<ProduceTopic>,
}

message!(
    Produce,
    op::PRODUCE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_i8(s.acks);
        b.put_u32(s.timeout_ms);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(&t.name);
            b.put_count(t.partitions.len());
            for p in &t.partitions {
                b.put_u32(p.partition);
                b.put_blob(&p.batch);
            }
        }
    },
    |r| {
        Ok(Produce {
            correlation: r.u32("correlation id")?,
            acks: r.i8("acks")?,
            timeout_ms: r.u32("timeout")?,
            topics: r.array("topics", 6, |r| {
                Ok(ProduceTopic {
                    name: r.string("topic")?,
                    partitions: r.array("partitions", 8, |r| {
                        Ok(ProducePartition {
                            partition: r.u32("partition")?,
                            batch: r.blob("batch")?,
                        })
                    })?,
                })
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionProduced {
    pub partition: u32,
    pub error: ErrorCode,
    /// Offset of the batch's first record; -1 on error.
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// Empty when `error` is NONE.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicProduced {
    pub name: String,
    pub partitions: Vec<PartitionProduced>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProduceResponse {
    pub correlation: u32,
    pub topics: Vec<TopicProduced>,
}

message!(
    ProduceResponse,
    op::PRODUCE | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(&t.name);
            b.put_count(t.partitions.len());
            for p in &t.partitions {
                b.put_u32(p.partition);
                b.put_u16(p.error.0);
                b.put_i64(p.base_offset);
                b.put_i64(p.log_append_time_ms);
                b.put_i64(p.log_start_offset);
                b.put_string(&p.message);
            }
        }
    },
    |r| {
        Ok(ProduceResponse {
            correlation: r.u32("correlation id")?,
            topics: r.array("topics", 6, |r| {
                Ok(TopicProduced {
                    name: r.string("topic")?,
                    partitions: r.array("partitions", 32, |r| {
                        Ok(PartitionProduced {
                            partition: r.u32("partition")?,
                            error: ErrorCode(r.u16("error")?),
                            base_offset: r.i64("base offset")?,
                            log_append_time_ms: r.i64("log append time")?,
                            log_start_offset: r.i64("log start offset")?,
                            message: r.string("message")?,
                        })
                    })?,
                })
            })?,
        })
    }
);

// ---------------------------------------------------------------- fetch

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchPartition {
    pub partition: u32,
    pub offset: i64,
    pub max_bytes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchTopic {
    pub name: String,
    pub partitions: Vec<FetchPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fetch {
    pub correlation: u32,
    /// How long the server may wait for `min_bytes` to be available.
    pub max_wait_ms: u32,
    pub min_bytes: u32,
    /// Limit of the whole response's records (the first batch comes whole
    /// even when larger, so a consumer always progresses).
    pub max_bytes: u32,
    pub topics: Vec<FetchTopic>,
}

message!(
    Fetch,
    op::FETCH,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u32(s.max_wait_ms);
        b.put_u32(s.min_bytes);
        b.put_u32(s.max_bytes);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(&t.name);
            b.put_count(t.partitions.len());
            for p in &t.partitions {
                b.put_u32(p.partition);
                b.put_i64(p.offset);
                b.put_u32(p.max_bytes);
            }
        }
    },
    |r| {
        Ok(Fetch {
            correlation: r.u32("correlation id")?,
            max_wait_ms: r.u32("max wait")?,
            min_bytes: r.u32("min bytes")?,
            max_bytes: r.u32("max bytes")?,
            topics: r.array("topics", 6, |r| {
                Ok(FetchTopic {
                    name: r.string("topic")?,
                    partitions: r.array("partitions", 16, |r| {
                        Ok(FetchPartition {
                            partition: r.u32("partition")?,
                            offset: r.i64("offset")?,
                            max_bytes: r.u32("partition max bytes")?,
                        })
                    })?,
                })
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionFetched {
    pub partition: u32,
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Whole record batches; the first may start before the offset asked
    /// for (a compressed batch is never split), so skip records below it.
    pub records: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicFetched {
    pub name: String,
    pub partitions: Vec<PartitionFetched>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchResponse {
    pub correlation: u32,
    pub topics: Vec<TopicFetched>,
}

impl FetchResponse {
    /// Encodes everything of a partition but its records' bytes: the
    /// server splices those in from the log (sendfile on TCP).
    pub fn put_partition_head(b: &mut BytesMut, p: &PartitionFetched, records_len: usize) {
        b.put_u32(p.partition);
        b.put_u16(p.error.0);
        b.put_i64(p.high_watermark);
        b.put_i64(p.log_start_offset);
        b.put_u32(u32::try_from(records_len).unwrap_or(u32::MAX));
    }
}

message!(
    FetchResponse,
    op::FETCH | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(&t.name);
            b.put_count(t.partitions.len());
            for p in &t.partitions {
                FetchResponse::put_partition_head(b, p, p.records.len());
                b.put_slice(&p.records);
            }
        }
    },
    |r| {
        Ok(FetchResponse {
            correlation: r.u32("correlation id")?,
            topics: r.array("topics", 6, |r| {
                Ok(TopicFetched {
                    name: r.string("topic")?,
                    partitions: r.array("partitions", 26, |r| {
                        Ok(PartitionFetched {
                            partition: r.u32("partition")?,
                            error: ErrorCode(r.u16("error")?),
                            high_watermark: r.i64("high watermark")?,
                            log_start_offset: r.i64("log start offset")?,
                            records: r.blob("records")?,
                        })
                    })?,
                })
            })?,
        })
    }
);

// ---------------------------------------------------------------- list offsets

/// Where to look in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first offset still held (object storage included).
    Earliest,
    /// The high watermark: the offset the next committed record gets.
    Latest,
    /// The first offset whose record timestamp is at or after this (ms).
    Timestamp(i64),
}

impl OffsetSpec {
    pub fn to_wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
    pub fn from_wire(v: i64) -> Option<OffsetSpec> {
        match v {
            -2 => Some(OffsetSpec::Earliest),
            -1 => Some(OffsetSpec::Latest),
            t if t >= 0 => Some(OffsetSpec::Timestamp(t)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListOffsets {
    pub correlation: u32,
    /// (topic, partition, spec): spec -2 earliest, -1 latest, ≥ 0 a timestamp.
    pub partitions: Vec<(String, u32, i64)>,
}

message!(
    ListOffsets,
    op::LIST_OFFSETS,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.partitions.len());
        for (t, p, spec) in &s.partitions {
            b.put_string(t);
            b.put_u32(*p);
            b.put_i64(*spec);
        }
    },
    |r| {
        Ok(ListOffsets {
            correlation: r.u32("correlation id")?,
            partitions: r.array("partitions", 14, |r| {
                Ok((r.string("topic")?, r.u32("partition")?, r.i64("spec")?))
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFound {
    pub topic: String,
    pub partition: u32,
    pub error: ErrorCode,
    /// -1 when a timestamp is later than every record.
    pub offset: i64,
    /// The found record's timestamp; -1 for earliest and latest.
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListOffsetsResponse {
    pub correlation: u32,
    pub partitions: Vec<OffsetFound>,
}

message!(
    ListOffsetsResponse,
    op::LIST_OFFSETS | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.partitions.len());
        for p in &s.partitions {
            b.put_string(&p.topic);
            b.put_u32(p.partition);
            b.put_u16(p.error.0);
            b.put_i64(p.offset);
            b.put_i64(p.timestamp);
        }
    },
    |r| {
        Ok(ListOffsetsResponse {
            correlation: r.u32("correlation id")?,
            partitions: r.array("partitions", 24, |r| {
                Ok(OffsetFound {
                    topic: r.string("topic")?,
                    partition: r.u32("partition")?,
                    error: ErrorCode(r.u16("error")?),
                    offset: r.i64("offset")?,
                    timestamp: r.i64("timestamp")?,
                })
            })?,
        })
    }
);

// ---------------------------------------------------------------- group offsets

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: u32,
    /// The next offset to read.
    pub offset: i64,
    pub metadata: String,
}

/// Commits offsets for a group, where Kafka clients of the group see
/// them too: outside any membership (generation -1 and no member id), as
/// Kafka's standalone consumers do, or as a member of the group
/// ([`JoinGroup`]), with the generation and member id its join gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOffsets {
    pub correlation: u32,
    pub group: String,
    pub offsets: Vec<CommittedOffset>,
    /// The member's generation; -1 outside membership.
    pub generation: i32,
    /// The member's id; empty outside membership.
    pub member_id: String,
}

impl Default for CommitOffsets {
    /// A commit outside membership.
    fn default() -> Self {
        CommitOffsets {
            correlation: 0,
            group: String::new(),
            offsets: Vec::new(),
            generation: -1,
            member_id: String::new(),
        }
    }
}

message!(
    CommitOffsets,
    op::COMMIT_OFFSETS,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_count(s.offsets.len());
        for o in &s.offsets {
            b.put_string(&o.topic);
            b.put_u32(o.partition);
            b.put_i64(o.offset);
            b.put_string(&o.metadata);
        }
        b.put_i32(s.generation);
        b.put_string(&s.member_id);
    },
    |r| {
        Ok(CommitOffsets {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            offsets: r.array("offsets", 16, |r| {
                Ok(CommittedOffset {
                    topic: r.string("topic")?,
                    partition: r.u32("partition")?,
                    offset: r.i64("offset")?,
                    metadata: r.string("metadata")?,
                })
            })?,
            generation: r.i32("generation")?,
            member_id: r.string("member id")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommitOffsetsResponse {
    pub correlation: u32,
    /// (topic, partition, error), in request order.
    pub partitions: Vec<(String, u32, ErrorCode)>,
}

message!(
    CommitOffsetsResponse,
    op::COMMIT_OFFSETS | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.partitions.len());
        for (t, p, e) in &s.partitions {
            b.put_string(t);
            b.put_u32(*p);
            b.put_u16(e.0);
        }
    },
    |r| {
        Ok(CommitOffsetsResponse {
            correlation: r.u32("correlation id")?,
            partitions: r.array("partitions", 8, |r| {
                Ok((
                    r.string("topic")?,
                    r.u32("partition")?,
                    ErrorCode(r.u16("error")?),
                ))
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchOffsets {
    pub correlation: u32,
    pub group: String,
    pub partitions: Vec<(String, u32)>,
}

message!(
    FetchOffsets,
    op::FETCH_OFFSETS,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_count(s.partitions.len());
        for (t, p) in &s.partitions {
            b.put_string(t);
            b.put_u32(*p);
        }
    },
    |r| {
        Ok(FetchOffsets {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            partitions: r.array("partitions", 6, |r| {
                Ok((r.string("topic")?, r.u32("partition")?))
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchOffsetsResponse {
    pub correlation: u32,
    /// -1 offset: nothing committed.
    pub offsets: Vec<(CommittedOffset, ErrorCode)>,
}

message!(
    FetchOffsetsResponse,
    op::FETCH_OFFSETS | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.offsets.len());
        for (o, e) in &s.offsets {
            b.put_string(&o.topic);
            b.put_u32(o.partition);
            b.put_u16(e.0);
            b.put_i64(o.offset);
            b.put_string(&o.metadata);
        }
    },
    |r| {
        Ok(FetchOffsetsResponse {
            correlation: r.u32("correlation id")?,
            offsets: r.array("offsets", 18, |r| {
                let topic = r.string("topic")?;
                let partition = r.u32("partition")?;
                let e = ErrorCode(r.u16("error")?);
                let offset = r.i64("offset")?;
                let metadata = r.string("metadata")?;
                Ok((
                    CommittedOffset {
                        topic,
                        partition,
                        offset,
                        metadata,
                    },
                    e,
                ))
            })?,
        })
    }
);

// ---------------------------------------------------------------- groups

/// Asks which server coordinates a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FindCoordinator {
    pub correlation: u32,
    pub group: String,
}

message!(
    FindCoordinator,
    op::FIND_COORDINATOR,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
    },
    |r| {
        Ok(FindCoordinator {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
        })
    }
);

/// The server coordinating a group, at its native address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FindCoordinatorResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    pub node_id: u32,
    /// Empty on error.
    pub host: String,
    /// 0 on error.
    pub port: u16,
}

message!(
    FindCoordinatorResponse,
    op::FIND_COORDINATOR | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_u32(s.node_id);
        b.put_string(&s.host);
        b.put_u16(s.port);
    },
    |r| {
        Ok(FindCoordinatorResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            node_id: r.u32("node id")?,
            host: r.string("host")?,
            port: r.u16("port")?,
        })
    }
);

/// Joins a consumer group (or rejoins it after a rebalance) and waits for
/// the member's share of the subscribed topics' partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroup {
    pub correlation: u32,
    pub group: String,
    /// Empty on a first join; the id the last join gave afterwards.
    pub member_id: String,
    /// The topics the member reads.
    pub topics: Vec<String>,
    /// How long the member stays in the group without a heartbeat.
    pub session_timeout_ms: u32,
    /// How long a rebalance waits for the members to join again.
    pub rebalance_timeout_ms: u32,
}

message!(
    JoinGroup,
    op::JOIN_GROUP,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_string(&s.member_id);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(t);
        }
        b.put_u32(s.session_timeout_ms);
        b.put_u32(s.rebalance_timeout_ms);
    },
    |r| {
        Ok(JoinGroup {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            member_id: r.string("member id")?,
            topics: r.array("topics", 2, |r| r.string("topic"))?,
            session_timeout_ms: r.u32("session timeout")?,
            rebalance_timeout_ms: r.u32("rebalance timeout")?,
        })
    }
);

/// Partitions of one topic assigned to a member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicAssignment {
    pub topic: String,
    pub partitions: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// The generation the member belongs to; -1 on error.
    pub generation: i32,
    /// The member's id (given on a first join); the request's on error.
    pub member_id: String,
    /// The member's partitions; empty on error.
    pub assignment: Vec<TopicAssignment>,
}

message!(
    JoinGroupResponse,
    op::JOIN_GROUP | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_i32(s.generation);
        b.put_string(&s.member_id);
        b.put_count(s.assignment.len());
        for t in &s.assignment {
            b.put_string(&t.topic);
            put_ids(b, &t.partitions);
        }
    },
    |r| {
        Ok(JoinGroupResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            generation: r.i32("generation")?,
            member_id: r.string("member id")?,
            assignment: r.array("assignment", 6, |r| {
                Ok(TopicAssignment {
                    topic: r.string("topic")?,
                    partitions: r.array("partitions", 4, |r| r.u32("partition"))?,
                })
            })?,
        })
    }
);

/// Keeps a member in its group; tells it when to join again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Heartbeat {
    pub correlation: u32,
    pub group: String,
    pub member_id: String,
    pub generation: i32,
}

message!(
    Heartbeat,
    op::HEARTBEAT,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_string(&s.member_id);
        b.put_i32(s.generation);
    },
    |r| {
        Ok(Heartbeat {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            member_id: r.string("member id")?,
            generation: r.i32("generation")?,
        })
    }
);

/// The answer to a [`Heartbeat`] and to a [`LeaveGroup`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupResponse {
    pub correlation: u32,
    pub error: ErrorCode,
}

impl GroupResponse {
    fn encode(&self, b: &mut BytesMut) {
        b.put_u32(self.correlation);
        b.put_u16(self.error.0);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(GroupResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
        })
    }
}

/// [`GroupResponse`] to a [`Heartbeat`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatResponse(pub GroupResponse);
message!(
    HeartbeatResponse,
    op::HEARTBEAT | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(HeartbeatResponse(GroupResponse::decode(r)?)) }
);

/// Leaves a group at once, so that the others rebalance without waiting
/// for the member's session to expire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaveGroup {
    pub correlation: u32,
    pub group: String,
    pub member_id: String,
}

message!(
    LeaveGroup,
    op::LEAVE_GROUP,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_string(&s.member_id);
    },
    |r| {
        Ok(LeaveGroup {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            member_id: r.string("member id")?,
        })
    }
);

/// [`GroupResponse`] to a [`LeaveGroup`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaveGroupResponse(pub GroupResponse);
message!(
    LeaveGroupResponse,
    op::LEAVE_GROUP | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(LeaveGroupResponse(GroupResponse::decode(r)?)) }
);

// ---------------------------------------------------------------- requests

/// Any request a server may receive, decoded from its operation code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Hello(Hello),
    Authenticate(Authenticate),
    Ping(Ping),
    Metadata(Metadata),
    CreateTopic(CreateTopic),
    DeleteTopic(DeleteTopic),
    InitProducer(InitProducer),
    Produce(Produce),
    Fetch(Fetch),
    ListOffsets(ListOffsets),
    CommitOffsets(CommitOffsets),
    FetchOffsets(FetchOffsets),
    Subscribe(Subscribe),
    Credit(Credit),
    Unsubscribe(Unsubscribe),
    FindCoordinator(FindCoordinator),
    JoinGroup(JoinGroup),
    Heartbeat(Heartbeat),
    LeaveGroup(LeaveGroup),
}

impl Request {
    pub fn decode(op: u8, body: Bytes) -> Result<Request, DecodeError> {
        Ok(match op {
            op::HELLO => Request::Hello(Hello::decode_body(body)?),
            op::AUTHENTICATE => Request::Authenticate(Authenticate::decode_body(body)?),
            op::PING => Request::Ping(Ping::decode_body(body)?),
            op::METADATA => Request::Metadata(Metadata::decode_body(body)?),
            op::CREATE_TOPIC => Request::CreateTopic(CreateTopic::decode_body(body)?),
            op::DELETE_TOPIC => Request::DeleteTopic(DeleteTopic::decode_body(body)?),
            op::INIT_PRODUCER => Request::InitProducer(InitProducer::decode_body(body)?),
            op::PRODUCE => Request::Produce(Produce::decode_body(body)?),
            op::FETCH => Request::Fetch(Fetch::decode_body(body)?),
            op::LIST_OFFSETS => Request::ListOffsets(ListOffsets::decode_body(body)?),
            op::COMMIT_OFFSETS => Request::CommitOffsets(CommitOffsets::decode_body(body)?),
            op::FETCH_OFFSETS => Request::FetchOffsets(FetchOffsets::decode_body(body)?),
            op::SUBSCRIBE => Request::Subscribe(Subscribe::decode_body(body)?),
            op::CREDIT => Request::Credit(Credit::decode_body(body)?),
            op::UNSUBSCRIBE => Request::Unsubscribe(Unsubscribe::decode_body(body)?),
            op::FIND_COORDINATOR => Request::FindCoordinator(FindCoordinator::decode_body(body)?),
            op::JOIN_GROUP => Request::JoinGroup(JoinGroup::decode_body(body)?),
            op::HEARTBEAT => Request::Heartbeat(Heartbeat::decode_body(body)?),
            op::LEAVE_GROUP => Request::LeaveGroup(LeaveGroup::decode_body(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }
}

// ---------------------------------------------------------------- subscriptions

/// Where a subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// This offset.
    Offset(i64),
    /// The first offset still held (object storage included).
    Earliest,
    /// The high watermark: only records produced from now on.
    Latest,
    /// The first record whose timestamp is at or after this (ms since the
    /// Unix epoch); the high watermark when every record is older.
    Timestamp(i64),
}

impl Start {
    /// The `(kind, value)` pair of the wire.
    pub fn to_wire(self) -> (u8, i64) {
        match self {
            Start::Offset(o) => (0, o),
            Start::Earliest => (1, 0),
            Start::Latest => (2, 0),
            Start::Timestamp(t) => (3, t),
        }
    }

    /// `None` for an unknown kind or a negative offset or timestamp.
    pub fn from_wire(kind: u8, value: i64) -> Option<Start> {
        match kind {
            0 if value >= 0 => Some(Start::Offset(value)),
            1 => Some(Start::Earliest),
            2 => Some(Start::Latest),
            3 if value >= 0 => Some(Start::Timestamp(value)),
            _ => None,
        }
    }
}

/// Opens a subscription to one partition. The server answers with a
/// [`SubscribeResponse`], then pushes the partition's batches as
/// [`Push`] frames while the subscription has credit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscribe {
    pub correlation: u32,
    /// Chosen by the client; unique among the connection's open
    /// subscriptions. Pushes and credits name it.
    pub subscription: u32,
    pub topic: String,
    pub partition: u32,
    /// 0 offset, 1 earliest, 2 latest, 3 timestamp ([`Start`]).
    pub start_kind: u8,
    /// The offset or timestamp for kinds 0 and 3; ignored otherwise.
    pub start_value: i64,
    /// Record bytes the server may push before it is granted more.
    pub credit: u32,
}

impl Subscribe {
    pub fn start(&self) -> Option<Start> {
        Start::from_wire(self.start_kind, self.start_value)
    }
}

message!(
    Subscribe,
    op::SUBSCRIBE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u32(s.subscription);
        b.put_string(&s.topic);
        b.put_u32(s.partition);
        b.put_u8(s.start_kind);
        b.put_i64(s.start_value);
        b.put_u32(s.credit);
    },
    |r| {
        Ok(Subscribe {
            correlation: r.u32("correlation id")?,
            subscription: r.u32("subscription")?,
            topic: r.string("topic")?,
            partition: r.u32("partition")?,
            start_kind: r.u8("start kind")?,
            start_value: r.i64("start value")?,
            credit: r.u32("credit")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscribeResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    pub subscription: u32,
    /// The offset pushes start at (the start resolved); -1 on errors.
    pub offset: i64,
    /// The partition's high watermark when the subscription opened; -1 on
    /// errors.
    pub high_watermark: i64,
    pub message: String,
}

message!(
    SubscribeResponse,
    op::SUBSCRIBE | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_u32(s.subscription);
        b.put_i64(s.offset);
        b.put_i64(s.high_watermark);
        b.put_string(&s.message);
    },
    |r| {
        Ok(SubscribeResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            subscription: r.u32("subscription")?,
            offset: r.i64("offset")?,
            high_watermark: r.i64("high watermark")?,
            message: r.string("message")?,
        })
    }
);

/// Records of a subscription, pushed by the server. A push with an error
/// other than NONE carries no records and ends the subscription.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Push {
    pub subscription: u32,
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The offset the subscription goes on from: one past the last record
    /// of `records` (the offset it was at when `records` is empty).
    pub next_offset: i64,
    /// Whole RecordBatch v2, back to back; the first may start below the
    /// subscription's offset (skip those records).
    pub records: Bytes,
}

impl Push {
    /// Bytes of the body before `records`' own bytes.
    pub const HEAD_LEN: usize = 4 + 2 + 8 + 8 + 8 + 4;

    /// Writes everything but the record bytes, which follow it.
    pub fn put_head(&self, b: &mut BytesMut, records_len: usize) {
        b.put_u32(self.subscription);
        b.put_u16(self.error.0);
        b.put_i64(self.high_watermark);
        b.put_i64(self.log_start_offset);
        b.put_i64(self.next_offset);
        b.put_u32(u32::try_from(records_len).unwrap_or(u32::MAX));
    }
}

message!(
    Push,
    op::PUSH | RESPONSE,
    |s, b| {
        s.put_head(b, s.records.len());
        b.put_slice(&s.records);
    },
    |r| {
        Ok(Push {
            subscription: r.u32("subscription")?,
            error: ErrorCode(r.u16("error")?),
            high_watermark: r.i64("high watermark")?,
            log_start_offset: r.i64("log start offset")?,
            next_offset: r.i64("next offset")?,
            records: r.blob("records")?,
        })
    }
);

/// Lets the server push `bytes` more record bytes on a subscription.
/// Credit adds up; the server never pushes more than was granted in all.
/// No answer; a credit for a subscription that is not open is ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Credit {
    pub subscription: u32,
    pub bytes: u32,
}

message!(
    Credit,
    op::CREDIT,
    |s, b| {
        b.put_u32(s.subscription);
        b.put_u32(s.bytes);
    },
    |r| {
        Ok(Credit {
            subscription: r.u32("subscription")?,
            bytes: r.u32("bytes")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unsubscribe {
    pub correlation: u32,
    pub subscription: u32,
}

message!(
    Unsubscribe,
    op::UNSUBSCRIBE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u32(s.subscription);
    },
    |r| {
        Ok(Unsubscribe {
            correlation: r.u32("correlation id")?,
            subscription: r.u32("subscription")?,
        })
    }
);

/// After it, the server sends no more pushes for the subscription.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UnsubscribeResponse {
    pub correlation: u32,
    pub error: ErrorCode,
}

message!(
    UnsubscribeResponse,
    op::UNSUBSCRIBE | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
    },
    |r| {
        Ok(UnsubscribeResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
        })
    }
);

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;
