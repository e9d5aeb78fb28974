//! Record batches of fetch answers.

use anyhow::anyhow;
use bytes::Bytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};

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
