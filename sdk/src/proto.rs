//! The operations of the native protocol and their bodies.
//!
//! Every request body starts with a `u32` correlation id that its response
//! repeats, so a client may have many requests in flight on one connection.
//! A response carries its request's operation code with the high bit set
//! ([`RESPONSE`]). The layout of every body is specified in
//! `docs/native-protocol.md`; the encoders here are its reference.

mod codec;
mod connection;
mod error_code;
mod fetch;
mod group;
mod metadata;
pub mod op;
mod produce;
mod request;
mod subscribe;
mod txn;

pub use codec::{correlation_of, FrameParts, FrameWriter, Message};
pub use connection::{
    Authenticate, AuthenticateResponse, ErrorFrame, Hello, HelloResponse, Ping, Pong, MAX_VERSION,
    MIN_VERSION,
};
pub use error_code::ErrorCode;
pub use fetch::{
    Fetch, FetchPartition, FetchResponse, FetchTopic, ListOffsets, ListOffsetsResponse,
    OffsetFound, OffsetSpec, PartitionFetched, TopicFetched,
};
pub use group::{
    CommitOffsets, CommitOffsetsResponse, CommittedOffset, FetchOffsets, FetchOffsetsResponse,
    FindCoordinator, FindCoordinatorResponse, GroupResponse, Heartbeat, HeartbeatResponse,
    JoinGroup, JoinGroupResponse, LeaveGroup, LeaveGroupResponse, TopicAssignment,
};
pub use metadata::{
    CreateTopic, CreateTopicResponse, DeleteTopic, DeleteTopicResponse, Metadata, MetadataResponse,
    Node, PartitionMetadata, TopicMetadata, TopicResponse,
};
pub use op::RESPONSE;
pub use produce::{
    Acks, InitProducer, InitProducerResponse, PartitionProduced, Produce, ProducePartition,
    ProduceResponse, ProduceTopic, TopicProduced,
};
pub use request::Request;
pub use subscribe::{
    Credit, Push, Start, Subscribe, SubscribeResponse, Unsubscribe, UnsubscribeResponse,
};
pub use txn::{
    AbortedTxn, AddTxnOffsets, AddTxnOffsetsResponse, AddTxnPartitions, AddTxnPartitionsResponse,
    EndTxn, EndTxnResponse, FetchIsolated, FetchIsolatedResponse, FindTxnCoordinator,
    FindTxnCoordinatorResponse, InitTxn, InitTxnResponse, Isolation, PartitionFetchedIsolated,
    TopicFetchedIsolated, TxnOffsetCommit, TxnOffsetCommitResponse, TxnProduce, TxnProduceResponse,
    TxnProducer, TxnResponse,
};

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;

/// Byte strings as lowercase hex in the conformance corpus's JSON.
#[cfg(test)]
pub(crate) mod hex_serde {
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_hex(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let text = String::deserialize(d)?;
        from_hex(&text)
            .map(Bytes::from)
            .map_err(serde::de::Error::custom)
    }

    /// Lowercase hex of `b`.
    pub(crate) fn to_hex(b: &[u8]) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(b.len() * 2);
        for byte in b {
            s.push(DIGITS[usize::from(byte >> 4)] as char);
            s.push(DIGITS[usize::from(byte & 15)] as char);
        }
        s
    }

    /// The bytes of a hex string (either case).
    pub(crate) fn from_hex(s: &str) -> Result<Vec<u8>, String> {
        let digit = |c: u8| -> Result<u8, String> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                b'A'..=b'F' => Ok(c - b'A' + 10),
                _ => Err(format!("{:?} is not a hex digit", c as char)),
            }
        };
        let raw = s.as_bytes();
        if !raw.len().is_multiple_of(2) {
            return Err(format!("hex string of odd length {}", raw.len()));
        }
        raw.chunks(2)
            .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
            .collect()
    }
}
