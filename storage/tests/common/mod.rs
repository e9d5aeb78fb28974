//! Builders of realistic v2 batches (through kafka-protocol's encoder, as a
//! real producer would send them) and helpers to read a log back.
#![allow(dead_code, clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use storage::PartitionLog;

pub mod tier;

/// Producer identity of a batch: `None` for a plain producer.
#[derive(Clone, Copy, Debug)]
pub struct Idem {
    pub pid: i64,
    pub epoch: i16,
    pub seq: i32,
}

/// Value of the `i`-th record of a batch: a recognisable payload.
pub fn value_for(tag: u64, i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{tag}:{i}:").into_bytes();
    v.resize(len.max(v.len()), b'x');
    v
}

/// One batch of `n` records with timestamps `ts, ts+1, ...` (base offset 0,
/// as producers send it).
pub fn batch_with(
    n: usize,
    value_len: usize,
    ts: i64,
    compression: Compression,
    idem: Option<Idem>,
    tag: u64,
) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: idem.map_or(-1, |p| p.pid),
            producer_epoch: idem.map_or(-1, |p| p.epoch),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: idem.map_or(i as i32 - 1, |p| p.seq + i as i32),
            timestamp: ts + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(value_for(tag, i, value_len))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.to_vec()
}

/// A batch of `n` records that carry no timestamp (-1), as old clients
/// send them.
pub fn untimed_batch(n: usize, value_len: usize, tag: u64) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: -1,
            key: None,
            value: Some(Bytes::from(value_for(tag, i, value_len))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.to_vec()
}

pub fn batch(n: usize, ts: i64) -> Vec<u8> {
    batch_with(n, 16, ts, Compression::None, None, 0)
}

pub fn idem_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    batch_with(
        n,
        16,
        1_000,
        Compression::None,
        Some(Idem { pid, epoch, seq }),
        0,
    )
}

/// Decodes every record of the log from `from` to the end.
pub fn read_all(log: &PartitionLog, from: i64) -> Vec<Record> {
    let mut out = Vec::new();
    let mut offset = from;
    let end = log.log_end_offset();
    while offset < end {
        let slice = log.read(offset, 1 << 20, end).unwrap();
        assert!(
            !slice.is_empty(),
            "read at {offset} below end {end} returned nothing"
        );
        let mut bytes = slice.read_to_bytes().unwrap();
        for set in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
            out.extend(set.records.into_iter().filter(|r| r.offset >= offset));
        }
        offset = slice.next_offset;
    }
    out
}

/// Config with small segments so tests roll often.
pub fn small_segments() -> storage::LogConfig {
    storage::LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 1024,
        ..storage::LogConfig::default()
    }
}

/// A transactional batch of producer `pid` at `epoch`, sequences from `seq`:
/// [`idem_batch`] with the transactional attribute (bit 4) set.
pub fn txn_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let mut b = idem_batch(pid, epoch, seq, n);
    let attrs = i16::from_be_bytes([b[21], b[22]]) | 1 << 4;
    b[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}
