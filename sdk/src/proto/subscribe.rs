//! Subscriptions: a partition's batches pushed by the server as they are
//! committed, paced by the credit the subscriber grants.

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::message;
use super::error_code::ErrorCode;
use super::op::{self, RESPONSE};
use crate::wire::WireWrite;

/// Where a subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
    #[cfg_attr(test, serde(with = "crate::proto::hex_serde"))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
