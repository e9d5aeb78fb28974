//! Writing: the producer id an idempotent producer asks for first, and
//! produce requests with their acks.

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::{message, FrameWriter};
use super::error_code::ErrorCode;
use super::op::{self, RESPONSE};
use crate::wire::WireWrite;

/// Asks for a producer id and epoch for an idempotent producer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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

/// What a produce waits for before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ProducePartition {
    pub partition: u32,
    /// Exactly one Kafka RecordBatch (magic 2), as the log stores it. An
    /// idempotent producer's id, epoch and sequence are in its header.
    #[cfg_attr(test, serde(with = "crate::proto::hex_serde"))]
    pub batch: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ProduceTopic {
    pub name: String,
    pub partitions: Vec<ProducePartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
        put_produce_fields(b, s);
    },
    |r| {
        let correlation = r.u32("correlation id")?;
        read_produce_fields(r, correlation)
    },
    parts | s,
    w | {
        w.buf.put_u32(s.correlation);
        put_produce_fields(w, s);
    }
);

/// Where a [`Produce`]'s fields are written: a buffer that copies the
/// record batches in, or a [`FrameWriter`] that shares the large ones.
pub(super) trait BatchSink {
    /// Room for `fields` bytes of fields around `batches` bytes of batches.
    fn reserve_for(&mut self, fields: usize, batches: usize);
    fn fields(&mut self) -> &mut BytesMut;
    /// A batch as a blob (`u32` length, then its bytes).
    fn batch(&mut self, batch: &Bytes);
}

impl BatchSink for BytesMut {
    fn reserve_for(&mut self, fields: usize, batches: usize) {
        self.reserve(fields + batches);
    }
    fn fields(&mut self) -> &mut BytesMut {
        self
    }
    fn batch(&mut self, batch: &Bytes) {
        self.put_blob(batch);
    }
}

impl BatchSink for FrameWriter {
    fn reserve_for(&mut self, fields: usize, _batches: usize) {
        self.buf.reserve(fields);
    }
    fn fields(&mut self) -> &mut BytesMut {
        &mut self.buf
    }
    fn batch(&mut self, batch: &Bytes) {
        self.put_shared_blob(batch);
    }
}

/// A [`Produce`]'s fields after its correlation id (a [`TxnProduce`] puts
/// its transactional id between the two).
pub(super) fn put_produce_fields(b: &mut impl BatchSink, s: &Produce) {
    // the batches are most of the frame: one allocation for all of it
    // rather than a buffer doubled (and copied) on the way up
    let fields: usize = s
        .topics
        .iter()
        .map(|t| t.name.len() + 8 + 8 * t.partitions.len())
        .sum();
    let batches: usize = s
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.batch.len())
        .sum();
    b.reserve_for(fields + 16, batches);
    let f = b.fields();
    f.put_i8(s.acks);
    f.put_u32(s.timeout_ms);
    f.put_count(s.topics.len());
    for t in &s.topics {
        let f = b.fields();
        f.put_string(&t.name);
        f.put_count(t.partitions.len());
        for p in &t.partitions {
            b.fields().put_u32(p.partition);
            b.batch(&p.batch);
        }
    }
}

pub(super) fn read_produce_fields(
    r: &mut crate::wire::Reader,
    correlation: u32,
) -> Result<Produce, crate::wire::DecodeError> {
    Ok(Produce {
        correlation,
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

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicProduced {
    pub name: String,
    pub partitions: Vec<PartitionProduced>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct ProduceResponse {
    pub correlation: u32,
    pub topics: Vec<TopicProduced>,
}

message!(
    ProduceResponse,
    op::PRODUCE | RESPONSE,
    |s, b| { s.encode(b) },
    |r| { ProduceResponse::decode(r) }
);

impl ProduceResponse {
    pub(super) fn encode(&self, b: &mut bytes::BytesMut) {
        let s = self;
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
    }

    pub(super) fn decode(
        r: &mut crate::wire::Reader,
    ) -> Result<ProduceResponse, crate::wire::DecodeError> {
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
}
