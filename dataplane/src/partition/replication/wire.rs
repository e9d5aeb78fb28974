//! Replica fetches on the wire.
//!
//! A follower opens one bidirectional QUIC stream to each leader it follows
//! and sends [`FetchRequest`]s on it, one at a time, each naming every
//! partition it follows on that leader; the leader answers each with a
//! [`FetchResponse`] holding, per partition, the batches from the
//! follower's fetch offset (whole, as the leader's log holds them), its
//! high watermark and log start, and the epoch where the follower's log
//! diverges, if it does. Many partitions share a frame, so a busy follower
//! costs a message per round trip, not per record.
//!
//! A frame is a big-endian `u32` length and that many bytes: a kind byte,
//! then the fields in the order of the structs below (integers big-endian,
//! topic ids as 16 bytes, records as a `u32` length and bytes). Decoding
//! checks every length against what the frame holds before allocating, so a
//! hostile count cannot make the reader allocate.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

/// Largest request frame a leader reads.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Largest response frame a follower reads.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

const KIND_FETCH: u8 = 1;
const KIND_FETCH_RESPONSE: u8 = 2;
/// Bytes of one partition in a request, and in a response without records.
const REQUEST_PARTITION_BYTES: usize = 16 + 4 + 4 + 8 + 4 + 4;
const RESPONSE_PARTITION_BYTES: usize = 16 + 4 + 2 + 8 + 8 + 4 + 8 + 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("frame of {len} bytes is over the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    #[error("frame ends early: {what}")]
    Truncated { what: &'static str },
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("{0} bytes after the last field")]
    Trailing(usize),
}

/// One partition a follower asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    pub topic_id: Uuid,
    pub partition: i32,
    /// The leader epoch the follower believes current; a leader at another
    /// epoch refuses (fenced or unknown epoch).
    pub leader_epoch: i32,
    /// The follower's log end: it holds every offset below.
    pub fetch_offset: i64,
    /// The epoch of the follower's last batch (-1 for an empty log), for
    /// the divergence check.
    pub last_fetched_epoch: i32,
    pub max_bytes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    pub follower: u64,
    /// How long the leader may hold the request while no partition has data.
    pub max_wait_ms: u32,
    pub partitions: Vec<FetchPartition>,
}

/// Where a follower's log parts from the leader's: the follower truncates
/// to `end_offset` and fetches again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diverging {
    pub epoch: i32,
    pub end_offset: i64,
}

/// Why a leader refused a follower's fetch of one partition. The numbers
/// are part of the replication wire and never reused; they are Kafka's error
/// codes for the same conditions, so an operator reads them alike in logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i16)]
pub enum Refusal {
    /// The fetch offset is outside what the leader keeps locally.
    OffsetOutOfRange = 1,
    /// This agent does not lead the partition.
    NotLeaderOrFollower = 6,
    /// The leader could not read its own log.
    KafkaStorageError = 56,
    /// The follower's leader epoch is older than the leader's.
    FencedLeaderEpoch = 74,
    /// The follower's leader epoch is newer than the leader's.
    UnknownLeaderEpoch = 75,
}

impl Refusal {
    /// The number sent on the wire.
    pub const fn code(self) -> i16 {
        self as i16
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    pub topic_id: Uuid,
    pub partition: i32,
    /// A [`Refusal`] code (0: none).
    pub error: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub diverging: Option<Diverging>,
    pub records: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    pub partitions: Vec<FetchedPartition>,
}

fn frame(kind: u8, body_len: usize, write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + 1 + body_len);
    b.put_u32(0);
    b.put_u8(kind);
    write(&mut b);
    let len = u32::try_from(b.len() - 4).unwrap_or(u32::MAX);
    b[..4].copy_from_slice(&len.to_be_bytes());
    b.freeze()
}

impl FetchRequest {
    pub fn encode(&self) -> Bytes {
        frame(
            KIND_FETCH,
            16 + self.partitions.len() * REQUEST_PARTITION_BYTES,
            |b| {
                b.put_u64(self.follower);
                b.put_u32(self.max_wait_ms);
                b.put_u32(u32::try_from(self.partitions.len()).unwrap_or(u32::MAX));
                for p in &self.partitions {
                    b.put_slice(p.topic_id.as_bytes());
                    b.put_i32(p.partition);
                    b.put_i32(p.leader_epoch);
                    b.put_i64(p.fetch_offset);
                    b.put_i32(p.last_fetched_epoch);
                    b.put_u32(p.max_bytes);
                }
            },
        )
    }

    /// Decodes a frame body (after the length prefix).
    pub fn decode(mut body: Bytes) -> Result<FetchRequest, WireError> {
        expect_kind(&mut body, KIND_FETCH)?;
        need(&body, 16, "request header")?;
        let follower = body.get_u64();
        let max_wait_ms = body.get_u32();
        let count = body.get_u32() as usize;
        need(
            &body,
            count.saturating_mul(REQUEST_PARTITION_BYTES),
            "partitions",
        )?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(FetchPartition {
                topic_id: uuid(&mut body),
                partition: body.get_i32(),
                leader_epoch: body.get_i32(),
                fetch_offset: body.get_i64(),
                last_fetched_epoch: body.get_i32(),
                max_bytes: body.get_u32(),
            });
        }
        no_trailing(&body)?;
        Ok(FetchRequest {
            follower,
            max_wait_ms,
            partitions,
        })
    }
}

impl FetchResponse {
    pub fn encode(&self) -> Bytes {
        let records: usize = self.partitions.iter().map(|p| p.records.len()).sum();
        frame(
            KIND_FETCH_RESPONSE,
            4 + self.partitions.len() * RESPONSE_PARTITION_BYTES + records,
            |b| {
                b.put_u32(u32::try_from(self.partitions.len()).unwrap_or(u32::MAX));
                for p in &self.partitions {
                    b.put_slice(p.topic_id.as_bytes());
                    b.put_i32(p.partition);
                    b.put_i16(p.error);
                    b.put_i64(p.high_watermark);
                    b.put_i64(p.log_start_offset);
                    let d = p.diverging.unwrap_or(Diverging {
                        epoch: -1,
                        end_offset: -1,
                    });
                    b.put_i32(d.epoch);
                    b.put_i64(d.end_offset);
                    b.put_u32(u32::try_from(p.records.len()).unwrap_or(u32::MAX));
                    b.put_slice(&p.records);
                }
            },
        )
    }

    /// Decodes a frame body (after the length prefix); record bytes are
    /// slices of `body`, not copies.
    pub fn decode(mut body: Bytes) -> Result<FetchResponse, WireError> {
        expect_kind(&mut body, KIND_FETCH_RESPONSE)?;
        need(&body, 4, "response header")?;
        let count = body.get_u32() as usize;
        need(
            &body,
            count.saturating_mul(RESPONSE_PARTITION_BYTES),
            "partitions",
        )?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            need(&body, RESPONSE_PARTITION_BYTES, "partition")?;
            let topic_id = uuid(&mut body);
            let partition = body.get_i32();
            let error = body.get_i16();
            let high_watermark = body.get_i64();
            let log_start_offset = body.get_i64();
            let epoch = body.get_i32();
            let end_offset = body.get_i64();
            let len = body.get_u32() as usize;
            need(&body, len, "records")?;
            let records = body.split_to(len);
            partitions.push(FetchedPartition {
                topic_id,
                partition,
                error,
                high_watermark,
                log_start_offset,
                diverging: (epoch >= 0).then_some(Diverging { epoch, end_offset }),
                records,
            });
        }
        no_trailing(&body)?;
        Ok(FetchResponse { partitions })
    }
}

/// The body length a frame's 4-byte prefix announces, checked against `max`.
pub fn body_len(prefix: [u8; 4], max: usize) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > max {
        return Err(WireError::TooLarge { len, max });
    }
    Ok(len)
}

fn expect_kind(body: &mut Bytes, kind: u8) -> Result<(), WireError> {
    need(body, 1, "kind")?;
    match body.get_u8() {
        k if k == kind => Ok(()),
        other => Err(WireError::UnknownKind(other)),
    }
}

fn need(body: &Bytes, n: usize, what: &'static str) -> Result<(), WireError> {
    if body.remaining() < n {
        return Err(WireError::Truncated { what });
    }
    Ok(())
}

fn no_trailing(body: &Bytes) -> Result<(), WireError> {
    match body.remaining() {
        0 => Ok(()),
        n => Err(WireError::Trailing(n)),
    }
}

fn uuid(body: &mut Bytes) -> Uuid {
    let mut id = [0u8; 16];
    body.copy_to_slice(&mut id);
    Uuid::from_bytes(id)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
