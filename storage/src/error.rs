//! The one error type of the storage crate.
//!
//! Every variant is something a caller must react to differently, so the
//! gateway maps each one to a Kafka error code with an exhaustive `match`.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the partition log.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The bytes of a batch do not hold together: a length runs past the
    /// buffer, the CRC does not match, the framing is broken, or the
    /// records of a compressed batch do not decompress with its codec.
    /// Kafka: CORRUPT_MESSAGE.
    #[error("corrupt record batch at byte {position} of the request: {reason}")]
    CorruptBatch { position: usize, reason: String },

    /// The batch is well framed but breaks a rule of the v2 format (no
    /// records, offset delta disagreeing with the record count, a record
    /// count other than the records the batch holds once decompressed, a
    /// record that does not parse or whose offset delta is not its index, a
    /// control batch sent by a client...), or its records decompress to more
    /// than `LogConfig::max_uncompressed_batch_bytes`. Kafka: INVALID_RECORD.
    #[error("invalid record batch at byte {position} of the request: {reason}")]
    InvalidRecord { position: usize, reason: String },

    /// The records at `indexes` (counted from 0 in their batch) have no
    /// key, and the topic is compacted. Kafka: INVALID_RECORD, with each
    /// record named in the answer's record errors (KIP-467).
    #[error(
        "records {indexes:?} of the batch at byte {position} have no key: a compacted topic accepts only records with keys"
    )]
    KeylessRecords { position: usize, indexes: Vec<i32> },

    /// The records named (index in their batch, counted from 0, and why)
    /// do not carry, in their key or value, the schema registry's wire
    /// format with the id of a live version of the topic's subject, and
    /// the topic validates schemas (`confluent.value.schema.validation`,
    /// `confluent.key.schema.validation`). Kafka: INVALID_RECORD, with each
    /// record named in the answer's record errors (KIP-467).
    #[error(
        "{} of the batch at byte {position} failed the topic's schema validation: {}",
        count_records(records.len()),
        records.first().map_or("", |(_, why)| why.as_str())
    )]
    SchemaValidation {
        position: usize,
        records: Vec<(i32, String)>,
    },

    /// The batch uses a message format older than v2. Kafka:
    /// UNSUPPORTED_FOR_MESSAGE_FORMAT.
    #[error(
        "record batch at byte {position} has magic {magic}; only format v2 (magic 2) is accepted"
    )]
    UnsupportedMagic { position: usize, magic: i8 },

    /// The compression codec in the attributes is not one Kafka defines.
    /// Kafka: UNSUPPORTED_COMPRESSION_TYPE.
    #[error("record batch at byte {position} uses unknown compression codec {codec}")]
    UnsupportedCompression { position: usize, codec: u8 },

    /// One batch is larger than `max.message.bytes` or than a whole segment.
    /// Kafka: MESSAGE_TOO_LARGE.
    #[error("record batch of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },

    /// A batch or marker that does not fit the producer's transaction
    /// (a plain batch while its transaction is ongoing). Kafka:
    /// INVALID_TXN_STATE.
    #[error("producer {producer_id}: {reason}")]
    InvalidTxnState { producer_id: i64, reason: String },

    /// A marker from a transaction coordinator older than the one that
    /// wrote the producer's latest marker. Kafka:
    /// TRANSACTION_COORDINATOR_FENCED.
    #[error("producer {producer_id}: marker of coordinator epoch {received}, but epoch {current} wrote the latest")]
    CoordinatorFenced {
        producer_id: i64,
        current: i32,
        received: i32,
    },

    /// An idempotent producer skipped or reordered sequence numbers.
    /// Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER.
    #[error("producer {producer_id} sent sequence {received}, expected {expected}")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        received: i32,
    },

    /// An idempotent producer wrote with an epoch older than the one already
    /// seen. Kafka: INVALID_PRODUCER_EPOCH.
    #[error("producer {producer_id} used epoch {received}, but epoch {current} is current")]
    InvalidProducerEpoch {
        producer_id: i64,
        current: i16,
        received: i16,
    },

    /// The caller appended with a partition leader epoch older than one the
    /// log already holds, or a replicated batch carries an epoch older than
    /// the batch before it. Kafka: FENCED_LEADER_EPOCH.
    #[error("append with leader epoch {received} after leader epoch {latest} was recorded")]
    StaleLeaderEpoch { received: i32, latest: i32 },

    /// A follower was handed batches that do not continue its log: the
    /// first one does not start at the log end, or one does not start
    /// right after the batch before it (a gap or an overlap). Nothing was
    /// written; the follower must fetch again from `expected`, or truncate
    /// first if its log diverged from the leader's. Kafka has no wire code
    /// for this broker-internal fault; KAFKA_STORAGE_ERROR fits best.
    #[error("replicated batch starts at offset {got}, but the log continues at {expected}")]
    ReplicaOffsetMismatch { expected: i64, got: i64 },

    /// The requested offset lies outside `[log start, log end]`.
    /// Kafka: OFFSET_OUT_OF_RANGE.
    #[error("offset {offset} is outside the log range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },

    /// A file on disk holds something the log did not write and cannot
    /// repair by truncation. Kafka: KAFKA_STORAGE_ERROR.
    #[error("segment file {path} is corrupt at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    /// A configuration value is out of range.
    /// Kafka: INVALID_CONFIG.
    #[error("invalid log configuration: {reason}")]
    InvalidConfig { reason: String },

    /// An earlier write could not be undone, or an fsync or writeback wait
    /// failed, so the log cannot tell which acknowledged bytes reached the
    /// device; it refuses appends, flushes and durability points until it
    /// is reopened (and recovered). Reads still work.
    /// Kafka: KAFKA_STORAGE_ERROR.
    #[error("log {dir} is offline after a failed write: {reason}")]
    Offline { dir: PathBuf, reason: String },

    /// An operating system call failed. Kafka: KAFKA_STORAGE_ERROR.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl StorageError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> StorageError {
        StorageError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Adds a human context to `io::Result`s.
pub(crate) trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, StorageError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, StorageError> {
        self.map_err(|source| StorageError::io(context(), source))
    }
}

/// "1 record", "3 records".
fn count_records(n: usize) -> String {
    if n == 1 {
        "1 record".into()
    } else {
        format!("{n} records")
    }
}
