//! Transactions: a transactional producer's id and epoch, the partitions
//! and group offsets a transaction covers, its end, transactional produce,
//! and fetches that read only committed records.
//!
//! Every operation here is served by the transaction coordinator Kafka
//! clients use, on the same records: a transactional id is one id to both
//! protocols. [`InitTxn`], [`AddTxnPartitions`], [`AddTxnOffsets`] and
//! [`EndTxn`] go to the transactional id's coordinator
//! ([`FindTxnCoordinator`]), [`TxnOffsetCommit`] to the group's
//! coordinator; elsewhere they are answered NOT_COORDINATOR.
//! [`TxnProduce`] and [`FetchIsolated`] go to partition leaders.

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::message;
use super::error_code::ErrorCode;
use super::fetch::FetchTopic;
use super::op::{self, RESPONSE};
use super::produce::{put_produce_fields, read_produce_fields, Produce, ProduceResponse};
use crate::wire::{DecodeError, Reader, WireWrite};

/// Finds the server that coordinates a transactional id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FindTxnCoordinator {
    pub correlation: u32,
    pub transactional_id: String,
}

message!(
    FindTxnCoordinator,
    op::FIND_TXN_COORDINATOR,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.transactional_id);
    },
    |r| {
        Ok(FindTxnCoordinator {
            correlation: r.u32("correlation id")?,
            transactional_id: r.string("transactional id")?,
        })
    }
);

/// The coordinator of a transactional id, at its native address; laid out
/// as [`super::FindCoordinatorResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FindTxnCoordinatorResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    pub node_id: u32,
    /// Empty on error.
    pub host: String,
    /// 0 on error.
    pub port: u16,
}

message!(
    FindTxnCoordinatorResponse,
    op::FIND_TXN_COORDINATOR | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_u32(s.node_id);
        b.put_string(&s.host);
        b.put_u16(s.port);
    },
    |r| {
        Ok(FindTxnCoordinatorResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            node_id: r.u32("node id")?,
            host: r.string("host")?,
            port: r.u16("port")?,
        })
    }
);

/// Kafka's InitProducerId with a transactional id: the id's producer id
/// and a new epoch, which fences every older epoch; a transaction the
/// previous epoch left open is aborted (or its commit completed) first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct InitTxn {
    pub correlation: u32,
    pub transactional_id: String,
    /// How long a transaction may stay open before the coordinator aborts it.
    pub timeout_ms: u32,
}

message!(
    InitTxn,
    op::INIT_TXN,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.transactional_id);
        b.put_u32(s.timeout_ms);
    },
    |r| {
        Ok(InitTxn {
            correlation: r.u32("correlation id")?,
            transactional_id: r.string("transactional id")?,
            timeout_ms: r.u32("transaction timeout")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct InitTxnResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Empty when `error` is NONE.
    pub message: String,
}

message!(
    InitTxnResponse,
    op::INIT_TXN | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_i64(s.producer_id);
        b.put_i16(s.producer_epoch);
        b.put_string(&s.message);
    },
    |r| {
        Ok(InitTxnResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            producer_id: r.i64("producer id")?,
            producer_epoch: r.i16("producer epoch")?,
            message: r.string("message")?,
        })
    }
);

/// The answer of [`AddTxnPartitions`], [`TxnOffsetCommit`] and [`EndTxn`]:
/// the whole request succeeded or failed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TxnResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// Empty when `error` is NONE.
    pub message: String,
}

impl TxnResponse {
    fn encode(&self, b: &mut BytesMut) {
        b.put_u32(self.correlation);
        b.put_u16(self.error.0);
        b.put_string(&self.message);
    }

    fn decode(r: &mut Reader) -> Result<TxnResponse, DecodeError> {
        Ok(TxnResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            message: r.string("message")?,
        })
    }
}

/// The producer a transactional request comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TxnProducer {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl TxnProducer {
    fn encode(&self, b: &mut BytesMut) {
        b.put_string(&self.transactional_id);
        b.put_i64(self.producer_id);
        b.put_i16(self.producer_epoch);
    }

    fn decode(r: &mut Reader) -> Result<TxnProducer, DecodeError> {
        Ok(TxnProducer {
            transactional_id: r.string("transactional id")?,
            producer_id: r.i64("producer id")?,
            producer_epoch: r.i16("producer epoch")?,
        })
    }
}

/// Adds partitions to the producer's transaction (opening it), before the
/// first transactional produce to each.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct AddTxnPartitions {
    pub correlation: u32,
    pub producer: TxnProducer,
    /// `(topic, partitions)`.
    pub topics: Vec<(String, Vec<u32>)>,
}

message!(
    AddTxnPartitions,
    op::ADD_TXN_PARTITIONS,
    |s, b| {
        b.put_u32(s.correlation);
        s.producer.encode(b);
        b.put_count(s.topics.len());
        for (name, partitions) in &s.topics {
            b.put_string(name);
            super::codec::put_ids(b, partitions);
        }
    },
    |r| {
        Ok(AddTxnPartitions {
            correlation: r.u32("correlation id")?,
            producer: TxnProducer::decode(r)?,
            topics: r.array("topics", 6, |r| {
                Ok((
                    r.string("topic")?,
                    r.array("partitions", 4, |r| r.u32("partition"))?,
                ))
            })?,
        })
    }
);

/// [`TxnResponse`] to an [`AddTxnPartitions`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct AddTxnPartitionsResponse(pub TxnResponse);
message!(
    AddTxnPartitionsResponse,
    op::ADD_TXN_PARTITIONS | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(AddTxnPartitionsResponse(TxnResponse::decode(r)?)) }
);

/// Adds a group to the producer's transaction (opening it), before its
/// offsets are committed in it with [`TxnOffsetCommit`]. Sent to the
/// transaction's coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct AddTxnOffsets {
    pub correlation: u32,
    pub producer: TxnProducer,
    pub group: String,
}

message!(
    AddTxnOffsets,
    op::ADD_TXN_OFFSETS,
    |s, b| {
        b.put_u32(s.correlation);
        s.producer.encode(b);
        b.put_string(&s.group);
    },
    |r| {
        Ok(AddTxnOffsets {
            correlation: r.u32("correlation id")?,
            producer: TxnProducer::decode(r)?,
            group: r.string("group")?,
        })
    }
);

/// [`TxnResponse`] to an [`AddTxnOffsets`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct AddTxnOffsetsResponse(pub TxnResponse);
message!(
    AddTxnOffsetsResponse,
    op::ADD_TXN_OFFSETS | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(AddTxnOffsetsResponse(TxnResponse::decode(r)?)) }
);

/// Offsets of a group committed by the transaction: they become the
/// group's committed offsets when it commits, and are dropped if it aborts.
/// Sent to the group's coordinator, after [`AddTxnOffsets`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TxnOffsetCommit {
    pub correlation: u32,
    pub producer: TxnProducer,
    pub group: String,
    /// The committing member's generation and id, checked as a member's
    /// commit is so that a member of an older generation cannot commit;
    /// -1 and empty outside group membership.
    pub generation: i32,
    pub member_id: String,
    /// `(topic, partition, next offset to read)`.
    pub offsets: Vec<(String, u32, i64)>,
}

message!(
    TxnOffsetCommit,
    op::TXN_OFFSET_COMMIT,
    |s, b| {
        b.put_u32(s.correlation);
        s.producer.encode(b);
        b.put_string(&s.group);
        b.put_i32(s.generation);
        b.put_string(&s.member_id);
        b.put_count(s.offsets.len());
        for (topic, partition, offset) in &s.offsets {
            b.put_string(topic);
            b.put_u32(*partition);
            b.put_i64(*offset);
        }
    },
    |r| {
        Ok(TxnOffsetCommit {
            correlation: r.u32("correlation id")?,
            producer: TxnProducer::decode(r)?,
            group: r.string("group")?,
            generation: r.i32("generation")?,
            member_id: r.string("member id")?,
            offsets: r.array("offsets", 14, |r| {
                Ok((r.string("topic")?, r.u32("partition")?, r.i64("offset")?))
            })?,
        })
    }
);

/// [`TxnResponse`] to a [`TxnOffsetCommit`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TxnOffsetCommitResponse(pub TxnResponse);
message!(
    TxnOffsetCommitResponse,
    op::TXN_OFFSET_COMMIT | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(TxnOffsetCommitResponse(TxnResponse::decode(r)?)) }
);

/// Commits or aborts the producer's transaction. Answered once the
/// markers are written, so a read_committed reader sees a commit by then.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct EndTxn {
    pub correlation: u32,
    pub producer: TxnProducer,
    /// true: commit; false: abort.
    pub commit: bool,
}

message!(
    EndTxn,
    op::END_TXN,
    |s, b| {
        b.put_u32(s.correlation);
        s.producer.encode(b);
        b.put_u8(u8::from(s.commit));
    },
    |r| {
        let correlation = r.u32("correlation id")?;
        let producer = TxnProducer::decode(r)?;
        let commit = match r.u8("commit")? {
            0 => false,
            1 => true,
            other => {
                return Err(DecodeError::Invalid {
                    what: "commit flag (0 or 1)",
                    value: i64::from(other),
                })
            }
        };
        Ok(EndTxn {
            correlation,
            producer,
            commit,
        })
    }
);

/// [`TxnResponse`] to an [`EndTxn`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct EndTxnResponse(pub TxnResponse);
message!(
    EndTxnResponse,
    op::END_TXN | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(EndTxnResponse(TxnResponse::decode(r)?)) }
);

/// A [`Produce`] of transactional batches (the batches' header carries the
/// transactional attribute and the producer id and epoch), with the
/// transactional id they are written for; each partition must have been
/// added to the transaction first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TxnProduce {
    pub transactional_id: String,
    /// Its correlation id is the request's.
    pub produce: Produce,
}

message!(
    TxnProduce,
    op::TXN_PRODUCE,
    |s, b| {
        b.put_u32(s.produce.correlation);
        b.put_string(&s.transactional_id);
        put_produce_fields(b, &s.produce);
    },
    |r| {
        let correlation = r.u32("correlation id")?;
        let transactional_id = r.string("transactional id")?;
        Ok(TxnProduce {
            transactional_id,
            produce: read_produce_fields(r, correlation)?,
        })
    },
    parts | s,
    w | {
        w.buf.put_u32(s.produce.correlation);
        w.buf.put_string(&s.transactional_id);
        put_produce_fields(w, &s.produce);
    }
);

/// [`ProduceResponse`] to a [`TxnProduce`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TxnProduceResponse(pub ProduceResponse);
message!(
    TxnProduceResponse,
    op::TXN_PRODUCE | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(TxnProduceResponse(ProduceResponse::decode(r)?)) }
);

/// What a fetch may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(test, serde(rename_all = "snake_case"))]
pub enum Isolation {
    /// Everything up to the high watermark, open and aborted transactions'
    /// records included (what [`super::Fetch`] returns).
    #[default]
    ReadUncommitted,
    /// Only up to the last stable offset (no open transaction's records),
    /// with the aborted transactions of the range so the reader skips
    /// their records.
    ReadCommitted,
}

impl Isolation {
    pub fn to_wire(self) -> u8 {
        match self {
            Isolation::ReadUncommitted => 0,
            Isolation::ReadCommitted => 1,
        }
    }
    pub fn from_wire(v: u8) -> Option<Isolation> {
        match v {
            0 => Some(Isolation::ReadUncommitted),
            1 => Some(Isolation::ReadCommitted),
            _ => None,
        }
    }
}

/// A [`super::Fetch`] with an isolation level.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchIsolated {
    pub correlation: u32,
    pub isolation: Isolation,
    pub max_wait_ms: u32,
    pub min_bytes: u32,
    pub max_bytes: u32,
    pub topics: Vec<FetchTopic>,
}

message!(
    FetchIsolated,
    op::FETCH_ISOLATED,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u8(s.isolation.to_wire());
        b.put_u32(s.max_wait_ms);
        b.put_u32(s.min_bytes);
        b.put_u32(s.max_bytes);
        super::fetch::put_fetch_topics(b, &s.topics);
    },
    |r| {
        let correlation = r.u32("correlation id")?;
        let level = r.u8("isolation")?;
        let isolation = Isolation::from_wire(level).ok_or(DecodeError::Invalid {
            what: "isolation level (0 or 1)",
            value: i64::from(level),
        })?;
        Ok(FetchIsolated {
            correlation,
            isolation,
            max_wait_ms: r.u32("max wait")?,
            min_bytes: r.u32("min bytes")?,
            max_bytes: r.u32("max bytes")?,
            topics: super::fetch::read_fetch_topics(r)?,
        })
    }
);

/// A transaction aborted in a fetched range: its producer's transactional
/// records from `first_offset` up to its abort marker are to be skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct PartitionFetchedIsolated {
    pub partition: u32,
    pub error: ErrorCode,
    pub high_watermark: i64,
    /// Below it, every transaction is decided; read_committed reads stop
    /// there.
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// read_committed only: the aborted transactions of the range.
    pub aborted: Vec<AbortedTxn>,
    #[cfg_attr(test, serde(with = "crate::proto::hex_serde"))]
    pub records: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicFetchedIsolated {
    pub name: String,
    pub partitions: Vec<PartitionFetchedIsolated>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchIsolatedResponse {
    pub correlation: u32,
    pub topics: Vec<TopicFetchedIsolated>,
}

impl FetchIsolatedResponse {
    /// Encodes everything of a partition but its records' bytes (the
    /// server splices those in from the log).
    pub fn put_partition_head(b: &mut BytesMut, p: &PartitionFetchedIsolated, records_len: usize) {
        b.put_u32(p.partition);
        b.put_u16(p.error.0);
        b.put_i64(p.high_watermark);
        b.put_i64(p.last_stable_offset);
        b.put_i64(p.log_start_offset);
        b.put_count(p.aborted.len());
        for a in &p.aborted {
            b.put_i64(a.producer_id);
            b.put_i64(a.first_offset);
        }
        b.put_u32(u32::try_from(records_len).unwrap_or(u32::MAX));
    }
}

message!(
    FetchIsolatedResponse,
    op::FETCH_ISOLATED | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(&t.name);
            b.put_count(t.partitions.len());
            for p in &t.partitions {
                FetchIsolatedResponse::put_partition_head(b, p, p.records.len());
                b.put_slice(&p.records);
            }
        }
    },
    |r| {
        Ok(FetchIsolatedResponse {
            correlation: r.u32("correlation id")?,
            topics: r.array("topics", 6, |r| {
                Ok(TopicFetchedIsolated {
                    name: r.string("topic")?,
                    partitions: r.array("partitions", 38, |r| {
                        Ok(PartitionFetchedIsolated {
                            partition: r.u32("partition")?,
                            error: ErrorCode(r.u16("error")?),
                            high_watermark: r.i64("high watermark")?,
                            last_stable_offset: r.i64("last stable offset")?,
                            log_start_offset: r.i64("log start offset")?,
                            aborted: r.array("aborted transactions", 16, |r| {
                                Ok(AbortedTxn {
                                    producer_id: r.i64("producer id")?,
                                    first_offset: r.i64("first offset")?,
                                })
                            })?,
                            records: r.blob("records")?,
                        })
                    })?,
                })
            })?,
        })
    }
);
