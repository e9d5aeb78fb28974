//! A view of the Kafka v2 RecordBatch header: parse, validate, stamp.
//!
//! The log stores batches exactly as producers sent them. On the append path
//! the fixed 61-byte header and the CRC are checked, and the records are
//! walked (decompressed on the fly when the batch is compressed, see
//! `records`) only to count them and check their framing; they are never
//! re-encoded. Layout (big endian):
//!
//! ```text
//! 0  baseOffset i64          <- stamped by the log (outside the CRC)
//! 8  batchLength i32         (bytes after this field)
//! 12 partitionLeaderEpoch i32 <- stamped by the log (outside the CRC)
//! 16 magic i8 (= 2)
//! 17 crc u32                 CRC-32C of bytes 21..end
//! 21 attributes i16          bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control
//! 23 lastOffsetDelta i32
//! 27 baseTimestamp i64
//! 35 maxTimestamp i64
//! 43 producerId i64
//! 51 producerEpoch i16
//! 53 baseSequence i32
//! 57 recordsCount i32
//! 61 records...
//! ```

use crate::error::StorageError;
use crate::schema_ids::SchemaRule;

/// Bytes of the fixed v2 header.
pub const HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: baseOffset and batchLength itself.
pub const LOG_OVERHEAD: usize = 12;
/// Smallest legal value of `batchLength`.
pub const MIN_BATCH_LENGTH: i32 = (HEADER_LEN - LOG_OVERHEAD) as i32;
/// Smallest possible encoding of one uncompressed v2 record (seven one-byte
/// varints/fields); used to reject record counts the bytes cannot hold.
const MIN_RECORD_LEN: u64 = 7;

const OFF_BASE_OFFSET: usize = 0;
const OFF_LENGTH: usize = 8;
const OFF_LEADER_EPOCH: usize = 12;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_LAST_OFFSET_DELTA: usize = 23;
const OFF_BASE_TIMESTAMP: usize = 27;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_PRODUCER_ID: usize = 43;
const OFF_PRODUCER_EPOCH: usize = 51;
const OFF_BASE_SEQUENCE: usize = 53;
const OFF_RECORDS_COUNT: usize = 57;

const ATTR_CODEC_MASK: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
const ATTR_TRANSACTIONAL: i16 = 1 << 4;
const ATTR_CONTROL: i16 = 1 << 5;

pub use crate::records::Compression;

/// What a batch's timestamps mean (Kafka `message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// Producers set the timestamps; the log keeps them.
    #[default]
    CreateTime,
    /// The log stamps the append time into `maxTimestamp` of every batch.
    LogAppendTime,
}

/// The decoded fixed header of one v2 batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

impl BatchHeader {
    /// Decodes the fixed header from the first [`HEADER_LEN`] bytes of `b`.
    /// Returns `None` if `b` is shorter than a header. No field is checked.
    pub fn decode(b: &[u8]) -> Option<BatchHeader> {
        if b.len() < HEADER_LEN {
            return None;
        }
        Some(BatchHeader {
            base_offset: be_i64(b, OFF_BASE_OFFSET),
            batch_length: be_i32(b, OFF_LENGTH),
            partition_leader_epoch: be_i32(b, OFF_LEADER_EPOCH),
            magic: b[OFF_MAGIC] as i8,
            crc: be_u32(b, OFF_CRC),
            attributes: be_i16(b, OFF_ATTRIBUTES),
            last_offset_delta: be_i32(b, OFF_LAST_OFFSET_DELTA),
            base_timestamp: be_i64(b, OFF_BASE_TIMESTAMP),
            max_timestamp: be_i64(b, OFF_MAX_TIMESTAMP),
            producer_id: be_i64(b, OFF_PRODUCER_ID),
            producer_epoch: be_i16(b, OFF_PRODUCER_EPOCH),
            base_sequence: be_i32(b, OFF_BASE_SEQUENCE),
            records_count: be_i32(b, OFF_RECORDS_COUNT),
        })
    }

    /// Whole size of the batch on disk (`batchLength` + 12), or `None` when
    /// `batchLength` is below the v2 minimum.
    pub fn total_len(&self) -> Option<usize> {
        if self.batch_length < MIN_BATCH_LENGTH {
            return None;
        }
        usize::try_from(self.batch_length)
            .ok()
            .map(|l| l + LOG_OVERHEAD)
    }

    /// Offset of the last record (base offset + last offset delta).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// Offset that follows this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// The codec, or the raw code if Kafka defines no such codec.
    pub fn compression(&self) -> Result<Compression, u8> {
        match self.attributes & ATTR_CODEC_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(other as u8),
        }
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & ATTR_LOG_APPEND_TIME != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// True when the batch carries idempotent producer state.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Sequence number of the last record, wrapping at `i32::MAX` as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return self.base_sequence;
        }
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        if last > i64::from(i32::MAX) {
            (last - i64::from(i32::MAX) - 1) as i32
        } else {
            last as i32
        }
    }
}

/// CRC-32C over the part of a batch the v2 format protects (attributes to end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(OFF_ATTRIBUTES..).unwrap_or(&[]))
}

/// Limits applied by [`validate`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest accepted batch (`max.message.bytes`).
    pub max_batch_bytes: usize,
    /// Largest size the records of a compressed batch may decompress to
    /// (see [`crate::LogConfig::max_uncompressed_batch_bytes`]); the walk
    /// that counts them stops there.
    pub max_uncompressed_bytes: u64,
    /// Refuse records without a key (a producer's batch for a compacted
    /// topic: [`StorageError::KeylessRecords`]).
    pub require_keys: bool,
    /// Accept batches compaction removed records from (a leader's batches,
    /// replicated): offset deltas that only increase, up to a last offset
    /// delta past the record count. A producer's batch must count its
    /// offsets up from 0 with no gap.
    pub sparse_offsets: bool,
}

/// One batch found in a produce payload.
#[derive(Debug, Clone, Copy)]
pub struct ValidBatch {
    /// Byte position of the batch inside the payload.
    pub position: usize,
    /// Whole length of the batch.
    pub len: usize,
    pub header: BatchHeader,
}

/// Checks one batch that starts at `bytes[0]` and returns its header and
/// length. `position` only labels errors. Checks, in order: framing,
/// size limit, magic, CRC-32C, codec, record count against offset delta and
/// producer fields (see [`check_header`]); then the records themselves,
/// decompressed on the fly with a bound: their number must be the declared
/// count, each must be framed within the batch with offset deltas counting
/// up from 0, and they may not decompress to more than
/// `limits.max_uncompressed_bytes`.
///
/// Errors: [`StorageError::InvalidRecord`] when the records disagree with
/// the header, do not parse, or pass the uncompressed limit;
/// [`StorageError::CorruptBatch`] when the compressed stream does not decode.
pub fn validate(bytes: &[u8], position: usize, limits: Limits) -> Result<ValidBatch, StorageError> {
    validate_with(bytes, position, limits, None)
}

/// [`validate`], and with `schemas` the records' keys or values must carry
/// schema ids of the topic's subjects (broker-side schema validation, see
/// [`crate::schema_ids`]): [`StorageError::SchemaValidation`] otherwise.
/// The ids are checked in the same walk that counts the records.
pub fn validate_with(
    bytes: &[u8],
    position: usize,
    limits: Limits,
    schemas: Option<&SchemaRule>,
) -> Result<ValidBatch, StorageError> {
    let b = check_header(bytes, position, limits.max_batch_bytes)?;
    let codec = b
        .header
        .compression()
        .map_err(|codec| StorageError::UnsupportedCompression { position, codec })?;
    if !limits.sparse_offsets
        && i64::from(b.header.last_offset_delta) != i64::from(b.header.records_count) - 1
    {
        return Err(StorageError::InvalidRecord {
            position,
            reason: format!(
                "last offset delta {} does not match record count {}",
                b.header.last_offset_delta, b.header.records_count
            ),
        });
    }
    let records = &bytes[HEADER_LEN..b.len];
    crate::records::check_keyed(
        codec,
        records,
        b.header.records_count,
        limits.max_uncompressed_bytes,
        crate::records::Rules {
            keys: limits.require_keys,
            sparse_up_to: limits.sparse_offsets.then_some(b.header.last_offset_delta),
            schemas: schemas.filter(|s| !s.is_empty()),
        },
    )
    .map_err(|refusal| match refusal {
        crate::records::Refusal::Keyless { indexes } => StorageError::KeylessRecords {
            position,
            indexes: indexes
                .into_iter()
                .map(|i| i32::try_from(i).unwrap_or(i32::MAX))
                .collect(),
        },
        crate::records::Refusal::Schema { records } => StorageError::SchemaValidation {
            position,
            records: records
                .into_iter()
                .map(|(i, why)| (i32::try_from(i).unwrap_or(i32::MAX), why))
                .collect(),
        },
        crate::records::Refusal::Codec { .. } => StorageError::CorruptBatch {
            position,
            reason: refusal.to_string(),
        },
        crate::records::Refusal::TooMany { .. }
        | crate::records::Refusal::TooFew { .. }
        | crate::records::Refusal::Malformed { .. }
        | crate::records::Refusal::OverCap { .. } => StorageError::InvalidRecord {
            position,
            reason: refusal.to_string(),
        },
    })?;
    Ok(b)
}

/// The checks of [`validate`] that need only the header and the CRC, not
/// the records: enough for bytes read back from the log, which were
/// validated whole when appended.
pub fn check_header(
    bytes: &[u8],
    position: usize,
    max_batch_bytes: usize,
) -> Result<ValidBatch, StorageError> {
    let corrupt = |reason: String| StorageError::CorruptBatch { position, reason };
    let invalid = |reason: String| StorageError::InvalidRecord { position, reason };
    let Some(header) = BatchHeader::decode(bytes) else {
        return Err(corrupt(format!(
            "{} bytes left, a v2 batch header needs {HEADER_LEN}",
            bytes.len()
        )));
    };
    let Some(len) = header.total_len() else {
        return Err(corrupt(format!(
            "batch length {} is below the minimum {MIN_BATCH_LENGTH}",
            header.batch_length
        )));
    };
    if len > max_batch_bytes {
        return Err(StorageError::RecordTooLarge {
            size: len,
            max: max_batch_bytes,
        });
    }
    if len > bytes.len() {
        return Err(corrupt(format!(
            "batch claims {len} bytes but only {} remain",
            bytes.len()
        )));
    }
    if header.magic != 2 {
        return Err(StorageError::UnsupportedMagic {
            position,
            magic: header.magic,
        });
    }
    let batch = &bytes[..len];
    let actual = compute_crc(batch);
    if actual != header.crc {
        return Err(corrupt(format!(
            "CRC-32C mismatch: header says {:#010x}, bytes give {actual:#010x}",
            header.crc
        )));
    }
    let codec = header
        .compression()
        .map_err(|codec| StorageError::UnsupportedCompression { position, codec })?;
    if header.records_count <= 0 {
        return Err(invalid(format!(
            "record count {} (a batch needs at least one record)",
            header.records_count
        )));
    }
    // below: a batch compaction removed records from keeps its last offset
    if i64::from(header.last_offset_delta) < i64::from(header.records_count) - 1 {
        return Err(invalid(format!(
            "last offset delta {} is too small for record count {}",
            header.last_offset_delta, header.records_count
        )));
    }
    if codec == Compression::None {
        let room = (len - HEADER_LEN) as u64;
        if header.records_count as u64 * MIN_RECORD_LEN > room {
            return Err(invalid(format!(
                "{} records cannot fit in {room} uncompressed bytes",
                header.records_count
            )));
        }
    }
    // markers (control batches) carry no sequence
    if header.has_producer_id()
        && (header.producer_epoch < 0 || (header.base_sequence < 0 && !header.is_control()))
    {
        return Err(invalid(format!(
            "producer id {} with epoch {} and base sequence {}",
            header.producer_id, header.producer_epoch, header.base_sequence
        )));
    }
    Ok(ValidBatch {
        position,
        len,
        header,
    })
}

/// Validates every batch of a produce payload (concatenated v2 batches).
/// Trailing bytes that do not form a whole batch are an error.
pub fn validate_all(records: &[u8], limits: Limits) -> Result<Vec<ValidBatch>, StorageError> {
    validate_all_with(records, limits, None)
}

/// [`validate_all`] with [`validate_with`]'s schema check.
pub fn validate_all_with(
    records: &[u8],
    limits: Limits,
    schemas: Option<&SchemaRule>,
) -> Result<Vec<ValidBatch>, StorageError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    if records.is_empty() {
        return Err(StorageError::InvalidRecord {
            position: 0,
            reason: "the payload holds no record batch".into(),
        });
    }
    while pos < records.len() {
        let b = validate_with(&records[pos..], pos, limits, schemas)?;
        pos += b.len;
        out.push(b);
    }
    Ok(out)
}

/// Sets a batch's length and record count and recomputes its CRC (a batch
/// compaction removed records from).
pub(crate) fn set_length_and_count(batch: &mut [u8], batch_length: i32, records_count: i32) {
    batch[OFF_LENGTH..OFF_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    batch[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&records_count.to_be_bytes());
    let crc = compute_crc(batch);
    batch[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Writes the base offset and partition leader epoch (both outside the CRC).
pub fn stamp(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    if batch.len() < HEADER_LEN {
        return;
    }
    batch[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    batch[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Marks the batch as LogAppendTime with `now_ms` as its max timestamp and
/// recomputes the CRC (both fields are inside it), as Kafka does.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    if batch.len() < HEADER_LEN {
        return;
    }
    let attrs = be_i16(batch, OFF_ATTRIBUTES) | ATTR_LOG_APPEND_TIME;
    batch[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates over the batches of a byte range read back from the log (for
/// example a [`crate::ReadSlice`]), checking framing and CRC of each (not
/// the records: see [`check_header`]).
pub struct BatchIter<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> BatchIter<'a> {
    pub fn new(bytes: &'a [u8]) -> BatchIter<'a> {
        BatchIter { bytes, pos: 0 }
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), StorageError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        match check_header(&self.bytes[self.pos..], self.pos, usize::MAX) {
            Ok(b) => {
                let slice = &self.bytes[self.pos..self.pos + b.len];
                self.pos += b.len;
                Some(Ok((b.header, slice)))
            }
            Err(e) => {
                self.pos = self.bytes.len();
                Some(Err(e))
            }
        }
    }
}

/// `(offset delta, timestamp)` of each record of an uncompressed v2 batch,
/// read without allocating. Yields nothing for compressed batches and stops
/// at the first malformed record.
pub struct RecordTimestamps<'a> {
    batch: &'a [u8],
    pos: usize,
    left: i32,
    base_timestamp: i64,
}

impl<'a> RecordTimestamps<'a> {
    pub fn new(batch: &'a [u8]) -> RecordTimestamps<'a> {
        let h = BatchHeader::decode(batch);
        let usable = h.filter(|h| h.compression() == Ok(Compression::None));
        let end = h
            .and_then(|h| h.total_len())
            .map_or(0, |l| l.min(batch.len()));
        RecordTimestamps {
            batch: &batch[..end],
            pos: HEADER_LEN,
            left: usable.map_or(0, |h| h.records_count),
            base_timestamp: h.map_or(0, |h| h.base_timestamp),
        }
    }
}

impl Iterator for RecordTimestamps<'_> {
    type Item = (i32, i64);
    fn next(&mut self) -> Option<(i32, i64)> {
        if self.left <= 0 {
            return None;
        }
        let parsed = (|| {
            let len =
                usize::try_from(crate::records::read_varint(self.batch, &mut self.pos, 5)?).ok()?;
            let body_start = self.pos;
            let end = body_start
                .checked_add(len)
                .filter(|e| *e <= self.batch.len())?;
            let mut p = body_start + 1; // attributes
            let ts_delta = crate::records::read_varint(self.batch, &mut p, 10)?;
            let off_delta =
                i32::try_from(crate::records::read_varint(self.batch, &mut p, 5)?).ok()?;
            if p > end {
                return None;
            }
            self.pos = end;
            Some((off_delta, self.base_timestamp.wrapping_add(ts_delta)))
        })();
        match parsed {
            Some(item) => {
                self.left -= 1;
                Some(item)
            }
            None => {
                self.left = 0;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An uncompressed batch of `n` null-key, null-value records whose
    /// timestamp deltas are `0, 1, 2, ...`.
    fn raw_batch(n: i32, base_ts: i64) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN];
        for i in 0..n {
            // length 6 | attrs | ts delta | offset delta | key -1 | value -1 | 0 headers
            b.extend_from_slice(&[12, 0, (i as u8) << 1, (i as u8) << 1, 1, 1, 0]);
        }
        let len = (b.len() - LOG_OVERHEAD) as i32;
        b[OFF_LENGTH..OFF_LENGTH + 4].copy_from_slice(&len.to_be_bytes());
        b[OFF_MAGIC] = 2;
        b[OFF_LAST_OFFSET_DELTA..OFF_LAST_OFFSET_DELTA + 4].copy_from_slice(&(n - 1).to_be_bytes());
        b[OFF_BASE_TIMESTAMP..OFF_BASE_TIMESTAMP + 8].copy_from_slice(&base_ts.to_be_bytes());
        b[OFF_PRODUCER_ID..OFF_PRODUCER_ID + 8].copy_from_slice(&(-1i64).to_be_bytes());
        b[OFF_PRODUCER_EPOCH..OFF_PRODUCER_EPOCH + 2].copy_from_slice(&(-1i16).to_be_bytes());
        b[OFF_BASE_SEQUENCE..OFF_BASE_SEQUENCE + 4].copy_from_slice(&(-1i32).to_be_bytes());
        b[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&n.to_be_bytes());
        reseal(&mut b);
        b
    }

    fn reseal(b: &mut [u8]) {
        let crc = compute_crc(b);
        b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    }

    const LIMITS: Limits = Limits {
        require_keys: false,
        sparse_offsets: false,
        max_batch_bytes: 1 << 20,
        max_uncompressed_bytes: 64 << 20,
    };

    #[test]
    fn a_well_formed_batch_validates_and_reports_its_header() {
        let b = raw_batch(3, 500);
        let v = validate(&b, 0, LIMITS).unwrap();
        assert_eq!(v.len, b.len());
        assert_eq!(v.header.records_count, 3);
        assert_eq!(v.header.compression(), Ok(Compression::None));
        assert!(!v.header.has_producer_id());
    }

    #[test]
    fn record_count_must_match_offset_delta_and_fit_the_bytes() {
        let mut b = raw_batch(3, 0);
        b[OFF_LAST_OFFSET_DELTA..OFF_LAST_OFFSET_DELTA + 4].copy_from_slice(&5i32.to_be_bytes());
        reseal(&mut b);
        assert!(matches!(
            validate(&b, 0, LIMITS),
            Err(StorageError::InvalidRecord { .. })
        ));
        let mut b = raw_batch(3, 0);
        b[OFF_RECORDS_COUNT..OFF_RECORDS_COUNT + 4].copy_from_slice(&1_000i32.to_be_bytes());
        b[OFF_LAST_OFFSET_DELTA..OFF_LAST_OFFSET_DELTA + 4].copy_from_slice(&999i32.to_be_bytes());
        reseal(&mut b);
        let err = validate(&b, 0, LIMITS).unwrap_err().to_string();
        assert!(err.contains("cannot fit"), "{err}");
    }

    #[test]
    fn stamping_changes_only_fields_outside_the_crc() {
        let mut b = raw_batch(2, 0);
        let crc = compute_crc(&b);
        stamp(&mut b, 1_234, 9);
        assert_eq!(compute_crc(&b), crc);
        let h = validate(&b, 0, LIMITS).unwrap().header;
        assert_eq!((h.base_offset, h.partition_leader_epoch), (1_234, 9));
        set_log_append_time(&mut b, 77);
        let h = validate(&b, 0, LIMITS).unwrap().header;
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(h.max_timestamp, 77);
    }

    #[test]
    fn record_timestamps_walk_uncompressed_records_and_stop_on_garbage() {
        let b = raw_batch(4, 1_000);
        let ts: Vec<_> = RecordTimestamps::new(&b).collect();
        assert_eq!(ts, vec![(0, 1_000), (1, 1_001), (2, 1_002), (3, 1_003)]);
        let mut cut = b.clone();
        cut[HEADER_LEN + 7] = 0x7f; // second record claims a negative length
        assert_eq!(RecordTimestamps::new(&cut).count(), 1);
    }

    #[test]
    fn last_sequence_wraps_like_kafka() {
        let mut h = BatchHeader::decode(&raw_batch(3, 0)).unwrap();
        h.base_sequence = i32::MAX - 1;
        assert_eq!(h.last_sequence(), 0);
        h.base_sequence = 10;
        assert_eq!(h.last_sequence(), 12);
    }
}
