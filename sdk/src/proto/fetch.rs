//! Reading on request: long-poll fetches of record batches, and the
//! lookup of offsets by position or timestamp that tells a reader where to
//! start.

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::message;
use super::error_code::ErrorCode;
use super::op::{self, RESPONSE};
use crate::wire::WireWrite;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchPartition {
    pub partition: u32,
    pub offset: i64,
    pub max_bytes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchTopic {
    pub name: String,
    pub partitions: Vec<FetchPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
        put_fetch_topics(b, &s.topics);
    },
    |r| {
        Ok(Fetch {
            correlation: r.u32("correlation id")?,
            max_wait_ms: r.u32("max wait")?,
            min_bytes: r.u32("min bytes")?,
            max_bytes: r.u32("max bytes")?,
            topics: read_fetch_topics(r)?,
        })
    }
);

/// The partitions a [`Fetch`] (or a `FetchIsolated`) asks for.
pub(super) fn put_fetch_topics(b: &mut BytesMut, topics: &[FetchTopic]) {
    b.put_count(topics.len());
    for t in topics {
        b.put_string(&t.name);
        b.put_count(t.partitions.len());
        for p in &t.partitions {
            b.put_u32(p.partition);
            b.put_i64(p.offset);
            b.put_u32(p.max_bytes);
        }
    }
}

pub(super) fn read_fetch_topics(
    r: &mut crate::wire::Reader,
) -> Result<Vec<FetchTopic>, crate::wire::DecodeError> {
    r.array("topics", 6, |r| {
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
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct PartitionFetched {
    pub partition: u32,
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Whole record batches; the first may start before the offset asked
    /// for (a compressed batch is never split), so skip records below it.
    #[cfg_attr(test, serde(with = "crate::proto::hex_serde"))]
    pub records: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicFetched {
    pub name: String,
    pub partitions: Vec<PartitionFetched>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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

/// Where to look in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
