//! Writes one Kafka RecordBatch v2 straight from the SDK's [`Record`]s.
//!
//! The layout is the one `kafka_protocol`'s `RecordBatchEncoder` writes
//! (base offset 0, first and last timestamp the records' smallest and
//! largest, offsets and timestamps as deltas from them), byte for byte: the
//! tests compare the two. Going through that encoder meant building a
//! `kafka_protocol::records::Record` and a header map for every record
//! first, and sizing every record twice; here each record is sized once
//! and written once into a buffer allocated at its final size. Compression
//! is still `kafka_protocol`'s (its compressors take the encoded records).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{self as kc, Compressor};
use kafka_protocol::records as kp;

use super::{BatchOptions, Compression, Record};
use crate::error::Error;

/// Bytes from the batch length field's end to the CRC's end: partition
/// leader epoch, magic, CRC.
const BEFORE_ATTRIBUTES: usize = 4 + 1 + 4;
/// Bytes of the header after the CRC: attributes, last offset delta, first
/// and max timestamps, producer id and epoch, base sequence, record count.
const AFTER_CRC: usize = 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;
/// The whole header: base offset, batch length, then the above.
pub(crate) const HEADER_LEN: usize = 8 + 4 + BEFORE_ATTRIBUTES + AFTER_CRC;

/// The batch's producer fields, already checked by the caller.
pub(crate) struct Producer {
    pub id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

/// Encodes `records` (at least one, fewer than 2^31) as one batch.
pub(crate) fn write(
    records: &[Record],
    producer: &Producer,
    options: &BatchOptions,
) -> Result<Bytes, Error> {
    let count = i32::try_from(records.len()).map_err(|_| Error::TooLarge {
        what: "a batch's record count",
        size: records.len(),
        max: i32::MAX as usize,
    })?;
    let stamp = |r: &Record| r.timestamp.unwrap_or(options.now_ms);
    let (mut first_ts, mut max_ts) = (i64::MAX, i64::MIN);
    for r in records {
        let ts = stamp(r);
        first_ts = first_ts.min(ts);
        max_ts = max_ts.max(ts);
    }
    let mut lens = Vec::with_capacity(records.len());
    let mut body_len = 0usize;
    for (i, r) in records.iter().enumerate() {
        let len = record_len(r, stamp(r) - first_ts, i as i32)?;
        body_len += varint_len(zigzag32(len)) + len as usize;
        lens.push(len);
    }

    let mut buf = BytesMut::with_capacity(HEADER_LEN + body_len);
    buf.put_i64(0); // base offset: the broker assigns offsets
    buf.put_i32(0); // batch length, set below
    buf.put_i32(kp::NO_PARTITION_LEADER_EPOCH);
    buf.put_i8(2); // magic
    buf.put_u32(0); // CRC, set below
    let mut attributes = options.compression.to_kafka() as i16;
    if options.transactional {
        attributes |= 1 << 4;
    }
    buf.put_i16(attributes);
    buf.put_i32(count - 1); // last offset delta
    buf.put_i64(first_ts);
    buf.put_i64(max_ts);
    buf.put_i64(producer.id);
    buf.put_i16(producer.epoch);
    buf.put_i32(producer.base_sequence);
    buf.put_i32(count);

    let put_records = |out: &mut BytesMut| {
        for (i, (r, len)) in records.iter().zip(&lens).enumerate() {
            put_record(out, r, *len, stamp(r) - first_ts, i as i32);
        }
        Ok(())
    };
    let compressed = match options.compression {
        Compression::None => kc::None::compress(&mut buf, put_records),
        Compression::Gzip => kc::Gzip::compress(&mut buf, put_records),
        Compression::Snappy => kc::Snappy::compress(&mut buf, put_records),
        Compression::Lz4 => kc::Lz4::compress(&mut buf, put_records),
        Compression::Zstd => kc::Zstd::compress(&mut buf, put_records),
    };
    compressed
        .map_err(|e| Error::InvalidRecord(format!("cannot compress the record batch: {e}")))?;

    let batch_len = buf.len() - 12;
    let batch_len = i32::try_from(batch_len).map_err(|_| Error::TooLarge {
        what: "a record batch",
        size: batch_len,
        max: i32::MAX as usize,
    })?;
    buf[8..12].copy_from_slice(&batch_len.to_be_bytes());
    let crc_at = 12 + BEFORE_ATTRIBUTES - 4;
    let crc = crc32c::crc32c(&buf[crc_at + 4..]);
    buf[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(buf.freeze())
}

/// A record's length after its length prefix.
fn record_len(r: &Record, ts_delta: i64, offset_delta: i32) -> Result<i32, Error> {
    let mut len = 1 + varint_len(zigzag64(ts_delta)) + varint_len(zigzag32(offset_delta));
    len += bytes_len(r.key.as_deref());
    len += bytes_len(r.value.as_deref());
    len += varint_len(zigzag32(header_count(r)?));
    for (k, v) in &r.headers {
        len += bytes_len(Some(k.as_bytes())) + bytes_len(v.as_deref());
    }
    i32::try_from(len).map_err(|_| Error::TooLarge {
        what: "a record",
        size: len,
        max: i32::MAX as usize,
    })
}

fn header_count(r: &Record) -> Result<i32, Error> {
    i32::try_from(r.headers.len()).map_err(|_| Error::TooLarge {
        what: "a record's header count",
        size: r.headers.len(),
        max: i32::MAX as usize,
    })
}

/// Writes a record `record_len` sized as `len`.
fn put_record(out: &mut BytesMut, r: &Record, len: i32, ts_delta: i64, offset_delta: i32) {
    put_varint(out, zigzag32(len));
    out.put_i8(0); // attributes
    put_varint(out, zigzag64(ts_delta));
    put_varint(out, zigzag32(offset_delta));
    put_bytes(out, r.key.as_deref());
    put_bytes(out, r.value.as_deref());
    put_varint(out, zigzag32(r.headers.len() as i32));
    for (k, v) in &r.headers {
        put_bytes(out, Some(k.as_bytes()));
        put_bytes(out, v.as_deref());
    }
}

/// Length-prefixed bytes (-1 for none), as a record's key, value and
/// header fields are.
fn put_bytes(out: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            put_varint(out, zigzag32(b.len() as i32));
            out.put_slice(b);
        }
        None => put_varint(out, zigzag32(-1)),
    }
}

fn bytes_len(b: Option<&[u8]>) -> usize {
    match b {
        Some(b) => varint_len(zigzag32(b.len() as i32)) + b.len(),
        None => 1,
    }
}

fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_batch, ProducerIdentity};
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    use proptest::prelude::*;

    /// The batch kafka-protocol's encoder writes for the same records: the
    /// reference these tests hold the writer to.
    fn reference(records: &[Record], options: &BatchOptions) -> Bytes {
        let (id, epoch, seq) = match options.producer {
            Some(p) => (p.producer_id, p.producer_epoch, p.base_sequence),
            None => (-1, -1, -1),
        };
        let kafka: Vec<kp::Record> = records
            .iter()
            .enumerate()
            .map(|(i, r)| kp::Record {
                transactional: options.transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: kp::NO_PARTITION_LEADER_EPOCH,
                producer_id: id,
                producer_epoch: epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: seq.wrapping_add(i as i32),
                timestamp: r.timestamp.unwrap_or(options.now_ms),
                key: r.key.clone(),
                value: r.value.clone(),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone()))
                    .collect::<IndexMap<_, _>>(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &kafka,
            &RecordEncodeOptions {
                version: 2,
                compression: options.compression.to_kafka(),
            },
        )
        .unwrap();
        buf.freeze()
    }

    fn bytes(max: usize) -> impl Strategy<Value = Option<Bytes>> {
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from))
    }

    fn record() -> impl Strategy<Value = Record> {
        (
            bytes(40),
            bytes(300),
            proptest::option::of(-5_000i64..5_000_000),
            proptest::collection::vec(("[a-z]{0,6}", bytes(20)), 0..4),
        )
            .prop_map(|(key, value, timestamp, headers)| {
                // header keys are unique within a record
                let mut seen = Vec::new();
                let headers = headers
                    .into_iter()
                    .filter(|(k, _)| {
                        let new = !seen.contains(k);
                        seen.push(k.clone());
                        new
                    })
                    .collect();
                Record {
                    key,
                    value,
                    timestamp,
                    headers,
                }
            })
    }

    fn compression() -> impl Strategy<Value = Compression> {
        prop_oneof![
            Just(Compression::None),
            Just(Compression::Gzip),
            Just(Compression::Snappy),
            Just(Compression::Lz4),
            Just(Compression::Zstd),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn the_writer_writes_the_bytes_kafka_protocols_encoder_writes(
            records in proptest::collection::vec(record(), 1..40),
            compression in compression(),
            producer in proptest::option::of((0i64..1 << 40, 0i16..100, 0i32..i32::MAX)),
            transactional in any::<bool>(),
            now_ms in 0i64..2_000_000_000_000,
        ) {
            let options = BatchOptions {
                compression,
                producer: producer.map(|(producer_id, producer_epoch, base_sequence)| ProducerIdentity {
                    producer_id,
                    producer_epoch,
                    base_sequence,
                }),
                now_ms,
                transactional: transactional && producer.is_some(),
            };
            let written = encode_batch(&records, &options).unwrap();
            prop_assert_eq!(&written[..], &reference(&records, &options)[..]);
        }
    }

    #[test]
    fn a_batch_is_allocated_at_its_final_size_when_uncompressed() {
        let records: Vec<Record> = (0..100)
            .map(|i| Record::new(vec![7u8; 100]).with_key(format!("key-{i}")))
            .collect();
        let written = encode_batch(&records, &BatchOptions::default()).unwrap();
        let buf = written.try_into_mut().unwrap();
        assert_eq!(buf.capacity(), buf.len(), "no room left over, none grown");
    }
}
