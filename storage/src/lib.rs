//! The AeroStream partition log: every produced byte passes through here.
//!
//! Role: store Kafka v2 RecordBatches exactly as producers sent them, in
//! segment files with sparse offset and time indexes, and hand byte ranges
//! back to readers so the gateway can `sendfile(2)` them to consumers. It
//! validates batches (framing, CRC-32C, sizes, record counts, idempotent
//! producer sequences; records are walked, and decompressed with a bound,
//! only to count them) without re-encoding them, stamps base offsets and leader
//! epochs in place, paces writeback so appends see no flush storms, and
//! recovers from a crash at any instant by cutting a torn tail.
//!
//! Seams:
//! - [`PartitionLog`] is owned by one task (shard-per-core; no locks on the
//!   append path). It is `Send`; readers on other tasks learn about new data
//!   through [`PartitionLog::subscribe`] (a `watch` of the log end offset).
//! - Reads return a [`ReadSlice`] (`Arc<File>`, position, length) for
//!   zero-copy sends, or bytes via [`ReadSlice::read_to_bytes`].
//! - [`PartitionLog::sync_point`] starts a durability point that a blocking
//!   thread runs ([`SyncPoint::run`]) and the owner records
//!   ([`PartitionLog::sync_done`]): group commit of every append so far.
//! - [`PartitionLog::segments`], [`PartitionLog::enforce_retention`] and
//!   [`PartitionLog::delete_records_before`] are the hooks tiering and
//!   DeleteRecords use; [`PartitionLog::append_replicated`] (a leader's
//!   batches written byte for byte), [`PartitionLog::truncate_to`] and
//!   [`PartitionLog::epoch_end_offset`] serve followers;
//!   [`PartitionLog::restore_producers`] gives one that restarts where
//!   object storage ends the producer state uploaded there.
//! - [`tier`] seals segments to object storage and reads offsets below the
//!   local log start back from it (uploader engine and driver, cold reader,
//!   local disk budget, retention across tiers).
//! - [`batch`] exposes header parsing and validation for callers that must
//!   check a batch without appending it.
//! - Every failure is a [`StorageError`] variant; the gateway maps each to
//!   a Kafka error code.
//!
//! Directory layout of one partition: `{base:020}.log` / `.index` /
//! `.timeindex` per segment, `.txnindex` beside a segment holding abort
//! markers (see [`txn`]), `{offset:020}.snapshot` (producer state),
//! `log-start-offset`, `producer-start-offset` (only while local copies of
//! tiered records were evicted), `leader-epoch-checkpoint`, `recovery-point-offset`
//! (below it every segment is fsynced; rolls fsync in the background, see
//! `flusher`), and `clean-shutdown` while closed cleanly.
//!
//! Transactions ([`txn`]): transactional batches open their producer's
//! transaction, [`PartitionLog::append_marker`] ends it, and the log
//! answers the first unstable offset and the aborted transactions a
//! read_committed fetch must name. [`compaction`] keeps the latest record
//! of each key of a compacted topic's sealed segments. Not supported:
//! message format v0/v1 (rejected with [`StorageError::UnsupportedMagic`]).
//!
//! ```
//! use storage::{LogConfig, PartitionLog, AppendOutcome};
//! # fn batch() -> Vec<u8> {
//! #     // A minimal uncompressed v2 batch with one empty record.
//! #     // length 6, attributes, timestamp delta, offset delta, null key, null value, no headers
//! #     let record = [6u8 << 1, 0, 0, 0, 1, 1, 0];
//! #     let mut b = vec![0u8; 61];
//! #     b[8..12].copy_from_slice(&((61 - 12 + record.len()) as i32).to_be_bytes());
//! #     b[16] = 2;
//! #     b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
//! #     b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
//! #     b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
//! #     b[57..61].copy_from_slice(&1i32.to_be_bytes());
//! #     b.extend_from_slice(&record);
//! #     let crc = crc32c::crc32c(&b[21..]);
//! #     b[17..21].copy_from_slice(&crc.to_be_bytes());
//! #     b
//! # }
//! # fn main() -> Result<(), storage::StorageError> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let mut log = PartitionLog::open(dir.path(), LogConfig::default())?;
//! let mut records = batch(); // bytes of a ProduceRequest partition
//! let AppendOutcome::Appended(info) = log.append(&mut records, 0, 1_700_000_000_000)? else {
//!     unreachable!("not an idempotent producer")
//! };
//! assert_eq!(info.base_offset, 0);
//! let slice = log.read(0, 1 << 20, log.log_end_offset())?;
//! assert_eq!(slice.read_to_bytes().expect("pread"), records);
//! log.close()?;
//! # Ok(())
//! # }
//! ```

pub mod batch;
mod cleaner;
mod codec_readers;
pub mod compaction;
mod compaction_install;
pub mod config;
mod epoch;
pub mod error;
mod fault;
pub mod files;
mod flusher;
mod health;
mod index;
mod log;
mod log_txn;
mod merge;
mod pool;
mod producer;
mod records;
mod recovery;
mod replica;
mod retention;
pub mod schema_ids;
pub mod segment;
mod snapshots;
mod sync;
#[cfg(test)]
mod test_support;
pub mod tier;
pub mod txn;
pub mod writeback;

/// Test support for callers of this crate (the `testing` feature): failure
/// injection into the log's own device calls.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    pub use crate::fault::{fail_next, DeviceOp};
}

pub use batch::{BatchHeader, Compression, TimestampType};
pub use compaction::{CleanerFigures, CleanerTotals, CompactionJob, CompactionReport};
pub use config::{CompactionConfig, LogConfig};
pub use error::StorageError;
pub use log::{AppendInfo, AppendOutcome, PartitionLog, ReadSlice, TimestampOffset};
pub use producer::ProducerSummary;
pub use replica::ReplicaAppend;
pub use schema_ids::{SchemaRule, SubjectIds};
pub use segment::SegmentInfo;
pub use sync::{SyncDone, SyncPoint};
pub use txn::{AbortedTxn, ControlType};
pub use writeback::WritebackConfig;
