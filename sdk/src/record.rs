//! Records as the application sees them, and their Kafka RecordBatch v2
//! form on the wire.
//!
//! The native protocol carries records as Kafka record batches (magic 2,
//! CRC-32C), the bytes the broker's log stores, so a batch one protocol
//! writes the other reads. Batches are read with kafka-protocol's
//! [`RecordBatchDecoder`] and written by `batch_writer` (the same bytes as
//! kafka-protocol's `RecordBatchEncoder`, without building its record type
//! for each record first); this module maps records to and from them, and
//! walks the batch headers itself where the decoder does not say enough
//! (the offset after a batch whose last records were compacted away, the
//! log-append time).
//!
//! Nothing here reads a clock: a record without a timestamp gets the `now`
//! the caller passes.

use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::records::{self as kp, RecordBatchDecoder};

use crate::error::Error;

mod batch_reader;
mod batch_writer;

/// A record to produce.
///
/// ```
/// use sdk::Record;
///
/// let r = Record::new("hello")
///     .with_key("user-42")
///     .with_header("trace", "abc")
///     .with_timestamp(1_700_000_000_000);
/// assert_eq!(r.value.as_deref(), Some(&b"hello"[..]));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// Decides the partition (Kafka's murmur2 partitioner) when present.
    pub key: Option<Bytes>,
    /// `None` is a tombstone for compacted topics.
    pub value: Option<Bytes>,
    /// Header keys must be distinct (the batch codec keeps one value per
    /// key); encoding refuses a record that repeats one.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Creation time in milliseconds since the Unix epoch; `None` takes
    /// the time the record is sent.
    pub timestamp: Option<i64>,
}

impl Record {
    /// A record with this value and nothing else.
    pub fn new(value: impl Into<Bytes>) -> Record {
        Record {
            value: Some(value.into()),
            ..Record::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Record {
        self.key = Some(key.into());
        self
    }

    /// Appends a header (a header without value goes in `headers`
    /// directly, as `(key, None)`).
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Record {
        self.headers.push((key.into(), Some(value.into())));
        self
    }

    /// Sets the creation timestamp (ms since the Unix epoch).
    pub fn with_timestamp(mut self, timestamp_ms: i64) -> Record {
        self.timestamp = Some(timestamp_ms);
        self
    }

    /// Roughly the bytes the record takes in an uncompressed batch: what
    /// batch sizes and the producer's buffer count.
    pub fn estimated_size(&self) -> usize {
        // length, attributes, timestamp and offset deltas, key and value
        // lengths, header count: at most 21 bytes of varints.
        const OVERHEAD: usize = 21;
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, Bytes::len))
            .sum();
        OVERHEAD
            + self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + headers
    }
}

/// A record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// Shared by every record of the topic, so cloning is cheap.
    pub topic: Arc<str>,
    pub partition: u32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch: the producer's creation time, or
    /// the broker's append time on topics that use LogAppendTime.
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Compression of a produced batch. The consumer reads every kind,
/// whatever the producer chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub(crate) fn to_kafka(self) -> kp::Compression {
        match self {
            Compression::None => kp::Compression::None,
            Compression::Gzip => kp::Compression::Gzip,
            Compression::Snappy => kp::Compression::Snappy,
            Compression::Lz4 => kp::Compression::Lz4,
            Compression::Zstd => kp::Compression::Zstd,
        }
    }
}

/// The idempotent producer's identity in a batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdentity {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Sequence number of the batch's first record; the others follow.
    pub base_sequence: i32,
}

/// How [`encode_batch`] writes a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchOptions {
    pub compression: Compression,
    /// `None` for a producer that is not idempotent (id and epoch -1).
    pub producer: Option<ProducerIdentity>,
    /// Timestamp (ms) of the records that have none.
    pub now_ms: i64,
    /// Marks the batch transactional (attribute bit 4): its records count
    /// only once their transaction commits. Needs `producer`.
    pub transactional: bool,
}

/// Encodes `records` as ONE Kafka RecordBatch v2 with base offset 0 (the
/// broker assigns offsets): what a partition of a `Produce` carries.
pub fn encode_batch(records: &[Record], options: &BatchOptions) -> Result<Bytes, Error> {
    if records.is_empty() {
        return Err(Error::InvalidRecord(
            "a batch needs at least one record".into(),
        ));
    }
    let producer = match options.producer {
        Some(p) => {
            if p.base_sequence < 0 {
                return Err(Error::InvalidRecord(format!(
                    "base sequence {} is negative",
                    p.base_sequence
                )));
            }
            batch_writer::Producer {
                id: p.producer_id,
                epoch: p.producer_epoch,
                base_sequence: p.base_sequence,
            }
        }
        None if options.transactional => {
            return Err(Error::InvalidRecord(
                "a transactional batch needs a producer id".into(),
            ))
        }
        None => batch_writer::Producer {
            id: kp::NO_PRODUCER_ID,
            epoch: kp::NO_PRODUCER_EPOCH,
            base_sequence: kp::NO_SEQUENCE,
        },
    };
    for r in records {
        // consumers of this SDK keep a record's headers by key
        for (i, (k, _)) in r.headers.iter().enumerate() {
            if r.headers[..i].iter().any(|(earlier, _)| earlier == k) {
                return Err(Error::InvalidRecord(format!(
                    "header {k:?} appears more than once in a record"
                )));
            }
        }
    }
    batch_writer::write(records, &producer, options)
}

/// Bytes of a v2 batch header before its records.
const BATCH_HEADER_LEN: usize = 61;
/// Bytes before a batch's length field ends: base offset and length.
const LOG_OVERHEAD: usize = 12;
/// Where a batch's checksum ends: it covers everything after.
const CRC_END: usize = 21;
/// Smallest encoding of one record: length, attributes, timestamp and
/// offset deltas, key and value lengths, header count, one byte each.
const MIN_RECORD_LEN: usize = 7;

/// The fields of a v2 batch header the decoder needs and kafka-protocol's
/// records do not give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchHeader {
    base_offset: i64,
    /// Bytes of the whole batch, its first 12 included.
    total_len: usize,
    magic: i8,
    crc: u32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    record_count: i32,
}

impl BatchHeader {
    const COMPRESSION_MASK: i16 = 0x7;
    const LOG_APPEND_TIME: i16 = 1 << 3;
    const TRANSACTIONAL: i16 = 1 << 4;
    const CONTROL: i16 = 1 << 5;

    /// Reads the header at the start of `buf`; `Ok(None)` when `buf` holds
    /// less than a whole batch (a fetch may end inside one).
    fn read(buf: &[u8]) -> Result<Option<BatchHeader>, Error> {
        let Some(mut head) = buf.get(..LOG_OVERHEAD) else {
            return Ok(None);
        };
        let base_offset = head.get_i64();
        let len = head.get_i32();
        let len = usize::try_from(len)
            .map_err(|_| Error::Protocol(format!("record batch of negative length {len}")))?;
        let total_len = LOG_OVERHEAD + len;
        if buf.len() < total_len {
            return Ok(None);
        }
        if total_len < BATCH_HEADER_LEN {
            // Old message formats have shorter headers, so look at the magic
            // byte before calling the length too short.
            if let Some(&magic) = buf.get(16) {
                if magic != 2 {
                    return Err(unsupported_magic(magic as i8));
                }
            }
            return Err(Error::Protocol(format!(
                "record batch of {total_len} bytes is shorter than its header"
            )));
        }
        let mut h = &buf[12..BATCH_HEADER_LEN];
        let _leader_epoch = h.get_i32();
        let magic = h.get_i8();
        if magic != 2 {
            return Err(unsupported_magic(magic));
        }
        let crc = h.get_u32();
        let attributes = h.get_i16();
        let last_offset_delta = h.get_i32();
        let base_timestamp = h.get_i64();
        let max_timestamp = h.get_i64();
        let producer_id = h.get_i64();
        let _epoch_and_sequence = (h.get_i16(), h.get_i32());
        let record_count = h.get_i32();
        Ok(Some(BatchHeader {
            base_offset,
            total_len,
            magic,
            attributes,
            last_offset_delta,
            crc,
            base_timestamp,
            max_timestamp,
            producer_id,
            record_count,
        }))
    }

    fn is_control(&self) -> bool {
        self.attributes & Self::CONTROL != 0
    }

    fn is_transactional(&self) -> bool {
        self.attributes & Self::TRANSACTIONAL != 0
    }

    fn is_compressed(&self) -> bool {
        self.attributes & Self::COMPRESSION_MASK != 0
    }

    fn log_append_time(&self) -> bool {
        self.attributes & Self::LOG_APPEND_TIME != 0
    }

    /// The offset right after the batch, records compacted away included.
    fn next_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
            .saturating_add(1)
    }
}

fn unsupported_magic(magic: i8) -> Error {
    Error::Protocol(format!(
        "record batch of magic {magic}: only magic 2 (Kafka 0.11 and later) is supported"
    ))
}

/// What [`decode_batches`] found in a partition's fetched bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodedRecords {
    /// The records at or after the offset asked for, in offset order,
    /// control records left out.
    pub records: Vec<ConsumedRecord>,
    /// Where the next fetch starts: after the last whole batch, even when
    /// that batch held nothing to return (control or compacted records).
    /// `None` when the bytes held no whole batch.
    pub next_offset: Option<i64>,
}

/// Decodes the record batches of one partition of a fetch response.
///
/// Records below `from_offset` are skipped (the first batch may start
/// before the offset asked for), and so are control batches (transaction
/// markers); a truncated batch at the end is ignored. Transactional records
/// are returned whether committed or not (read_uncommitted); see
/// [`decode_committed`] for read_committed.
pub fn decode_batches(
    topic: &Arc<str>,
    partition: u32,
    bytes: Bytes,
    from_offset: i64,
) -> Result<DecodedRecords, Error> {
    decode_committed(topic, partition, bytes, from_offset, &[])
}

/// [`decode_batches`] for a read_committed fetch: the records of the
/// `aborted` transactions the fetch answer lists are left out too. A
/// transaction's records are those of its producer's transactional batches
/// from its first offset up to the producer's next control batch (its abort
/// marker), which is how Kafka's consumers tell them.
pub fn decode_committed(
    topic: &Arc<str>,
    partition: u32,
    bytes: Bytes,
    from_offset: i64,
    aborted: &[crate::proto::AbortedTxn],
) -> Result<DecodedRecords, Error> {
    decode_fetched(topic, partition, bytes, from_offset, aborted, true)
}

/// [`decode_committed`]; `check_crc` false skips the checksum of
/// uncompressed batches (the consumer's `check_crcs`). Compressed batches
/// are always checked.
pub(crate) fn decode_fetched(
    topic: &Arc<str>,
    partition: u32,
    mut bytes: Bytes,
    from_offset: i64,
    aborted: &[crate::proto::AbortedTxn],
    check_crc: bool,
) -> Result<DecodedRecords, Error> {
    let mut out = DecodedRecords::default();
    let mut pending: Vec<crate::proto::AbortedTxn> = aborted.to_vec();
    pending.sort_by_key(|a| std::cmp::Reverse(a.first_offset));
    let mut aborting: std::collections::HashSet<i64> = std::collections::HashSet::new();
    while let Some(header) = BatchHeader::read(&bytes)? {
        let mut batch = bytes.split_to(header.total_len);
        out.next_offset = Some(header.next_offset());
        // transactions aborted from this batch on
        while pending
            .last()
            .is_some_and(|a| a.first_offset < header.next_offset())
        {
            if let Some(a) = pending.pop() {
                aborting.insert(a.producer_id);
            }
        }
        if header.is_control() {
            // the marker ends its producer's transaction
            aborting.remove(&header.producer_id);
            continue;
        }
        if header.next_offset() <= from_offset
            || (header.is_transactional() && aborting.contains(&header.producer_id))
        {
            continue;
        }
        let count = usize::try_from(header.record_count).map_err(|_| {
            Error::Protocol(format!(
                "record batch with negative record count {}",
                header.record_count
            ))
        })?;
        // The codec reserves room for `count` records before decoding them:
        // check the count against the bytes that must hold them first.
        let room = header.total_len - BATCH_HEADER_LEN;
        if !header.is_compressed() && count > room / MIN_RECORD_LEN {
            return Err(Error::Protocol(format!(
                "record batch claims {count} records in {room} bytes"
            )));
        }
        let append_time = header.log_append_time().then_some(header.max_timestamp);
        if !header.is_compressed() {
            if check_crc {
                let crc = crc32c::crc32c(&batch[CRC_END..]);
                if crc != header.crc {
                    return Err(Error::Protocol(format!(
                        "record batch at offset {} fails its checksum ({:#010x}, computed {crc:#010x})",
                        header.base_offset, header.crc
                    )));
                }
            }
            let from = batch_reader::Batch {
                topic,
                partition,
                base_offset: header.base_offset,
                base_timestamp: header.base_timestamp,
                append_time,
                count,
            };
            batch_reader::read(
                &from,
                batch.split_off(BATCH_HEADER_LEN),
                from_offset,
                &mut out.records,
            )?;
            continue;
        }
        let set = decode_compressed(&mut batch, count)?;
        for r in set.records {
            if r.offset < from_offset {
                continue;
            }
            out.records.push(ConsumedRecord {
                topic: Arc::clone(topic),
                partition,
                offset: r.offset,
                timestamp: append_time.unwrap_or(r.timestamp),
                key: r.key,
                value: r.value,
                headers: r
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v))
                    .collect(),
            });
        }
    }
    Ok(out)
}

/// Decodes a compressed batch, checking the record count against the
/// decompressed bytes before the codec reserves room for the records.
fn decode_compressed(batch: &mut Bytes, count: usize) -> Result<kp::RecordSet, Error> {
    use kafka_protocol::compression::{Decompressor, Gzip, Lz4, Snappy, Zstd};
    RecordBatchDecoder::decode_with_custom_compression(
        batch,
        Some(|buf: &mut Bytes, kind: kp::Compression| {
            let plain = match kind {
                kp::Compression::None => buf.split_off(0),
                kp::Compression::Gzip => Gzip::decompress(buf, |d| Ok(d.split_off(0)))?,
                kp::Compression::Snappy => Snappy::decompress(buf, |d| Ok(d.split_off(0)))?,
                kp::Compression::Lz4 => Lz4::decompress(buf, |d| Ok(d.split_off(0)))?,
                kp::Compression::Zstd => Zstd::decompress(buf, |d| Ok(d.split_off(0)))?,
            };
            if count > plain.len() / MIN_RECORD_LEN {
                let len = plain.len();
                return Err(CountTooLarge { count, len }.into());
            }
            Ok(plain)
        }),
    )
    .map_err(|e| Error::Protocol(format!("undecodable record batch: {e}")))
}

#[derive(Debug, thiserror::Error)]
#[error("record batch claims {count} records in {len} decompressed bytes")]
struct CountTooLarge {
    count: usize,
    len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions, TimestampType};

    fn topic() -> Arc<str> {
        Arc::from("t")
    }

    fn sample() -> Vec<Record> {
        vec![
            Record::new("v0")
                .with_key("k0")
                .with_header("h", "x")
                .with_timestamp(1_000),
            Record {
                key: None,
                value: None,
                headers: vec![("empty".into(), None)],
                timestamp: None,
            },
            Record::new(vec![7u8; 300]).with_timestamp(1_002),
        ]
    }

    /// Sets a batch's base offset as the broker does on append.
    fn at_offset(batch: &Bytes, base: i64) -> Bytes {
        let mut b = BytesMut::from(&batch[..]);
        b[..8].copy_from_slice(&base.to_be_bytes());
        b.freeze()
    }

    #[test]
    fn records_round_trip_through_one_batch_with_every_compression() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let options = BatchOptions {
                compression,
                producer: None,
                now_ms: 1_001,
                transactional: false,
            };
            let batch = encode_batch(&sample(), &options).unwrap();
            let header = BatchHeader::read(&batch).unwrap().unwrap();
            assert_eq!(header.total_len, batch.len(), "one batch, {compression:?}");
            assert_eq!(header.record_count, 3);
            let decoded = decode_batches(&topic(), 4, at_offset(&batch, 10), 0).unwrap();
            assert_eq!(decoded.next_offset, Some(13));
            let got: Vec<_> = decoded
                .records
                .iter()
                .map(|r| {
                    (
                        r.offset,
                        r.timestamp,
                        r.key.clone(),
                        r.value.clone(),
                        r.headers.clone(),
                    )
                })
                .collect();
            let want: Vec<_> = sample()
                .into_iter()
                .zip(10..)
                .map(|(r, o)| (o, r.timestamp.unwrap_or(1_001), r.key, r.value, r.headers))
                .collect();
            assert_eq!(got, want, "{compression:?}");
            assert!(decoded
                .records
                .iter()
                .all(|r| r.partition == 4 && &*r.topic == "t"));
        }
    }

    #[test]
    fn an_idempotent_batch_carries_producer_id_epoch_and_base_sequence() {
        let producer = ProducerIdentity {
            producer_id: 0x0102_0304_0506,
            producer_epoch: 3,
            base_sequence: 41,
        };
        let batch = encode_batch(
            &sample(),
            &BatchOptions {
                producer: Some(producer),
                ..BatchOptions::default()
            },
        )
        .unwrap();
        let mut h = &batch[43..61];
        assert_eq!(h.get_i64(), producer.producer_id);
        assert_eq!(h.get_i16(), 3);
        assert_eq!(h.get_i32(), 41);
        assert_eq!(h.get_i32(), 3, "record count");
        assert_eq!(batch[16], 2, "magic");
        let info = RecordBatchDecoder::decode_batch_info(&mut batch.clone()).unwrap();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].base_sequence, 41);
    }

    #[test]
    fn a_batch_without_producer_has_no_id_epoch_or_sequence() {
        let batch = encode_batch(&sample(), &BatchOptions::default()).unwrap();
        let mut h = &batch[43..61];
        assert_eq!((h.get_i64(), h.get_i16(), h.get_i32()), (-1, -1, -1));
    }

    #[test]
    fn a_sequence_near_i32_max_wraps_inside_one_batch() {
        let batch = encode_batch(
            &sample(),
            &BatchOptions {
                producer: Some(ProducerIdentity {
                    producer_id: 1,
                    producer_epoch: 0,
                    base_sequence: i32::MAX - 1,
                }),
                ..BatchOptions::default()
            },
        )
        .unwrap();
        let header = BatchHeader::read(&batch).unwrap().unwrap();
        assert_eq!(header.total_len, batch.len());
    }

    #[test]
    fn records_below_the_offset_asked_for_are_skipped() {
        let batch = encode_batch(&sample(), &BatchOptions::default()).unwrap();
        let mut two = BytesMut::new();
        two.put_slice(&at_offset(&batch, 100));
        two.put_slice(&at_offset(&batch, 103));
        let decoded = decode_batches(&topic(), 0, two.freeze(), 102).unwrap();
        let offsets: Vec<i64> = decoded.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![102, 103, 104, 105]);
        assert_eq!(decoded.next_offset, Some(106));
    }

    #[test]
    fn a_truncated_last_batch_is_left_for_the_next_fetch() {
        let batch = at_offset(
            &encode_batch(&sample(), &BatchOptions::default()).unwrap(),
            5,
        );
        let mut bytes = BytesMut::new();
        bytes.put_slice(&batch);
        bytes.put_slice(&batch[..batch.len() - 1]);
        let decoded = decode_batches(&topic(), 0, bytes.freeze(), 0).unwrap();
        assert_eq!(decoded.records.len(), 3);
        assert_eq!(decoded.next_offset, Some(8));
        let nothing = decode_batches(&topic(), 0, batch.slice(..20), 0).unwrap();
        assert_eq!(nothing, DecodedRecords::default());
    }

    #[test]
    fn control_batches_are_skipped_but_still_advance_the_offset() {
        let control = kp::Record {
            transactional: true,
            control: true,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: 9,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: 3,
            sequence: -1,
            timestamp: 0,
            key: Some(Bytes::from_static(&[0, 0, 0, 1])),
            value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
            headers: Default::default(),
        };
        let mut marker = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut marker,
            [&control],
            &RecordEncodeOptions {
                version: 2,
                compression: kp::Compression::None,
            },
        )
        .unwrap();
        let data = at_offset(
            &encode_batch(&sample(), &BatchOptions::default()).unwrap(),
            0,
        );
        let mut bytes = BytesMut::new();
        bytes.put_slice(&data);
        bytes.put_slice(&marker);
        let decoded = decode_batches(&topic(), 0, bytes.freeze(), 0).unwrap();
        assert_eq!(decoded.records.len(), 3);
        assert_eq!(decoded.next_offset, Some(4));
    }

    /// A transaction marker of `producer` at `offset`.
    fn marker(producer: i64, offset: i64) -> Bytes {
        let control = kp::Record {
            transactional: true,
            control: true,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: 0,
            key: Some(Bytes::from_static(&[0, 0, 0, 0])),
            value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
            headers: Default::default(),
        };
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            [&control],
            &RecordEncodeOptions {
                version: 2,
                compression: kp::Compression::None,
            },
        )
        .unwrap();
        out.freeze()
    }

    fn transactional(producer: i64, base: i64) -> Bytes {
        let options = BatchOptions {
            producer: Some(ProducerIdentity {
                producer_id: producer,
                producer_epoch: 0,
                base_sequence: 0,
            }),
            transactional: true,
            ..BatchOptions::default()
        };
        at_offset(&encode_batch(&sample(), &options).unwrap(), base)
    }

    #[test]
    fn read_committed_skips_the_records_of_aborted_transactions_only() {
        // producer 9: aborted at 0..=2 (marker 3), committed at 4..=6
        // (marker 7); producer 5 committed at 8..=10 (marker 11)
        let mut bytes = BytesMut::new();
        for part in [
            transactional(9, 0),
            marker(9, 3),
            transactional(9, 4),
            marker(9, 7),
            transactional(5, 8),
            marker(5, 11),
        ] {
            bytes.put_slice(&part);
        }
        let bytes = bytes.freeze();
        let aborted = [crate::proto::AbortedTxn {
            producer_id: 9,
            first_offset: 0,
        }];
        let decoded = decode_committed(&topic(), 0, bytes.clone(), 0, &aborted).unwrap();
        let offsets: Vec<i64> = decoded.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![4, 5, 6, 8, 9, 10]);
        assert_eq!(decoded.next_offset, Some(12), "past the skipped batches");
        // read_uncommitted returns every data record
        let all = decode_batches(&topic(), 0, bytes, 0).unwrap();
        assert_eq!(all.records.len(), 9);
    }

    #[test]
    fn a_fetch_of_nothing_but_an_aborted_transaction_still_advances() {
        let mut bytes = BytesMut::new();
        bytes.put_slice(&transactional(9, 10));
        bytes.put_slice(&marker(9, 13));
        let aborted = [crate::proto::AbortedTxn {
            producer_id: 9,
            first_offset: 10,
        }];
        let decoded = decode_committed(&topic(), 0, bytes.freeze(), 10, &aborted).unwrap();
        assert!(decoded.records.is_empty());
        assert_eq!(decoded.next_offset, Some(14));
    }

    #[test]
    fn a_transactional_batch_is_marked_and_needs_a_producer() {
        let batch = transactional(3, 0);
        let attributes = i16::from_be_bytes([batch[21], batch[22]]);
        assert_ne!(attributes & BatchHeader::TRANSACTIONAL, 0);
        let refused = encode_batch(
            &sample(),
            &BatchOptions {
                transactional: true,
                ..BatchOptions::default()
            },
        );
        assert!(matches!(refused, Err(Error::InvalidRecord(_))));
    }

    #[test]
    fn log_append_time_batches_give_every_record_the_append_time() {
        let batch = encode_batch(&sample(), &BatchOptions::default()).unwrap();
        let mut b = BytesMut::from(&batch[..]);
        let attributes = i16::from_be_bytes([b[21], b[22]]) | BatchHeader::LOG_APPEND_TIME;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b[35..43].copy_from_slice(&5_000i64.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let decoded = decode_batches(&topic(), 0, b.freeze(), 0).unwrap();
        assert!(decoded.records.iter().all(|r| r.timestamp == 5_000));
    }

    #[test]
    fn a_count_larger_than_the_bytes_is_refused_before_decoding() {
        let batch = encode_batch(&sample(), &BatchOptions::default()).unwrap();
        let mut b = BytesMut::from(&batch[..]);
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let err = decode_batches(&topic(), 0, b.freeze(), 0).unwrap_err();
        assert!(matches!(err, Error::Protocol(m) if m.contains("claims")));
    }

    #[test]
    fn a_compressed_count_larger_than_its_decompressed_bytes_is_refused() {
        let batch = encode_batch(
            &sample(),
            &BatchOptions {
                compression: Compression::Zstd,
                ..BatchOptions::default()
            },
        )
        .unwrap();
        let mut b = BytesMut::from(&batch[..]);
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let err = decode_batches(&topic(), 0, b.freeze(), 0).unwrap_err();
        assert!(
            matches!(&err, Error::Protocol(m) if m.contains("claims")),
            "{err}"
        );
    }

    #[test]
    fn old_message_formats_and_corrupt_batches_are_protocol_errors() {
        let batch = encode_batch(&sample(), &BatchOptions::default()).unwrap();
        let mut old = BytesMut::from(&batch[..]);
        old[16] = 1;
        assert!(matches!(
            decode_batches(&topic(), 0, old.freeze(), 0),
            Err(Error::Protocol(m)) if m.contains("magic 1")
        ));
        let mut corrupt = BytesMut::from(&batch[..]);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xFF;
        assert!(matches!(
            decode_batches(&topic(), 0, corrupt.freeze(), 0),
            Err(Error::Protocol(_))
        ));
    }

    #[test]
    fn a_batch_read_without_its_checksum_still_refuses_lying_lengths() {
        let batch = encode_batch(&sample(), &BatchOptions::default()).unwrap();
        let read = |b: Bytes| decode_fetched(&topic(), 0, b, 0, &[], false);
        // unchecked, the records are the same as checked
        assert_eq!(
            read(batch.clone()).unwrap(),
            decode_batches(&topic(), 0, batch.clone(), 0).unwrap()
        );
        // the record claims more bytes than the batch holds: its length
        // (over 127, two varint bytes) made about 8 KiB
        let one = encode_batch(&[Record::new(vec![7u8; 300])], &BatchOptions::default()).unwrap();
        let mut long = BytesMut::from(&one[..]);
        assert_ne!(long[BATCH_HEADER_LEN] & 0x80, 0, "a two-byte length");
        long[BATCH_HEADER_LEN + 1] = 0x7f;
        assert!(matches!(
            read(long.freeze()),
            Err(Error::Protocol(m)) if m.contains("remain")
        ));
        // any single byte changed after the header: an error or records,
        // never a panic or a read past the batch
        for at in BATCH_HEADER_LEN..batch.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut b = BytesMut::from(&batch[..]);
                b[at] ^= flip;
                if let Ok(decoded) = read(b.freeze()) {
                    assert!(decoded.records.len() <= sample().len());
                }
            }
        }
    }

    #[test]
    fn repeated_header_keys_and_empty_batches_are_refused() {
        let twice = Record::new("v").with_header("h", "1").with_header("h", "2");
        assert!(matches!(
            encode_batch(&[twice], &BatchOptions::default()),
            Err(Error::InvalidRecord(_))
        ));
        assert!(matches!(
            encode_batch(&[], &BatchOptions::default()),
            Err(Error::InvalidRecord(_))
        ));
    }
}
