//! Record batches: those of fetch answers read, those of produce requests
//! written.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// The producer a batch is written for.
#[derive(Clone, Copy, Debug)]
pub struct BatchProducer {
    pub id: i64,
    pub epoch: i16,
    /// The first record's sequence; the next ones follow.
    pub sequence: i32,
    pub transactional: bool,
}

/// One uncompressed RecordBatch v2 of `entries` (key, value), stamped
/// now. Without a producer the batch carries none and no sequence.
pub fn encode_batch(
    entries: &[(Option<Bytes>, Bytes)],
    producer: Option<BatchProducer>,
) -> anyhow::Result<Bytes> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let records: Vec<Record> = entries
        .iter()
        .enumerate()
        .map(|(i, (key, value))| {
            let i = i32::try_from(i).unwrap_or(i32::MAX);
            Record {
                transactional: producer.is_some_and(|p| p.transactional),
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: producer.map_or(-1, |p| p.id),
                producer_epoch: producer.map_or(-1, |p| p.epoch),
                timestamp_type: TimestampType::Creation,
                offset: i64::from(i),
                // without a producer, offset - sequence stays constant, so
                // the encoder keeps all records in one batch, and the base
                // sequence is -1 (none)
                sequence: producer.map_or(-1, |p| p.sequence).wrapping_add(i),
                timestamp: now,
                key: key.clone(),
                value: Some(value.clone()),
                headers: IndexMap::new(),
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| anyhow!("cannot encode a record batch: {e}"))?;
    Ok(buf.freeze())
}

/// The records of every complete batch in a fetch answer's record bytes (a
/// fetch may end with a partial batch, which the next fetch returns whole).
pub fn decode_records(mut bytes: Bytes) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    while bytes.len() >= 12 {
        let len = i32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        let total = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .saturating_add(12);
        if bytes.len() < total {
            break;
        }
        let mut batch = bytes.split_to(total);
        let set = RecordBatchDecoder::decode(&mut batch)
            .map_err(|e| anyhow!("cannot decode a fetched record batch: {e}"))?;
        records.extend(set.records);
    }
    Ok(records)
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
