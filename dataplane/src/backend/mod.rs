//! The seams the gateway stands on: partition logs and the cluster catalog.
//!
//! * [`LogBackend`] is one partition's local log, owned by exactly one
//!   partition task (it is `Send`, never shared). Two backends exist, both over
//!   the `storage` crate: [`disk::DiskLog`] (a plain `storage::PartitionLog`)
//!   and [`tiered::TieredLog`] (the production one, which seals to object
//!   storage). Offsets below the local log start are read through
//!   [`ColdLog`], which the tiered backend hands out next to the log.
//!
//! The cluster's metadata (topics, configs, committed offsets, producer-id
//! blocks) is the `metastore` crate's `Metastore` itself, with its own types
//! (`TopicInfo`, `ConfigOp`, `CommittedOffset`) and errors (`MetaError`).
//!
//! Errors cross the log seam as [`LogError`], which carries the storage
//! crate's own errors unchanged; `crate::codes` maps each of them, and each
//! `MetaError`, to one Kafka error code.

pub mod disk;
pub mod manifest;
pub mod tiered;

use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;
use storage::tier::TierError;
use storage::StorageError;
use uuid::Uuid;

pub use storage::{TimestampOffset, TimestampType};

/// Record bytes read from a log: in memory, or a byte range of a segment file
/// that plain-TCP connections send with `sendfile(2)`.
#[derive(Debug, Clone)]
pub enum Records {
    Bytes(Bytes),
    File {
        file: Arc<File>,
        position: u64,
        len: usize,
    },
}

impl Records {
    pub fn empty() -> Self {
        Records::Bytes(Bytes::new())
    }

    pub fn len(&self) -> usize {
        match self {
            Records::Bytes(b) => b.len(),
            Records::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the bytes themselves to `out` (a positioned read straight
    /// into it for file ranges).
    pub fn append_to(&self, out: &mut bytes::BytesMut) -> std::io::Result<()> {
        match self {
            Records::Bytes(b) => out.extend_from_slice(b),
            Records::File {
                file,
                position,
                len,
            } => {
                use std::os::unix::fs::FileExt;
                let start = out.len();
                out.resize(start + *len, 0);
                if let Err(e) = file.read_exact_at(&mut out[start..], *position) {
                    out.truncate(start);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The bytes themselves (a positioned read for file ranges).
    pub fn to_bytes(&self) -> std::io::Result<Bytes> {
        match self {
            Records::Bytes(b) => Ok(b.clone()),
            Records::File {
                file,
                position,
                len,
            } => {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; *len];
                file.read_exact_at(&mut buf, *position)?;
                Ok(Bytes::from(buf))
            }
        }
    }
}

/// The outcome of appending one produce partition's batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    pub last_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    /// True when an idempotent producer retried batches already in the log.
    pub duplicate: bool,
}

impl Appended {
    /// The gateway's view of the storage crate's answer.
    pub fn from_outcome(outcome: &storage::AppendOutcome) -> Appended {
        let info = outcome.info();
        Appended {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            log_append_time_ms: info.log_append_time_ms,
            duplicate: matches!(outcome, storage::AppendOutcome::Duplicate(_)),
        }
    }
}

/// A segment rolls up to `segment.bytes / ROLL_JITTER_FRACTION` early.
const ROLL_JITTER_FRACTION: u64 = 8;

/// Settings of one partition log derived from its topic's configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    pub segment_bytes: u64,
    pub segment_ms: Option<u64>,
    pub max_message_bytes: u32,
    pub flush_messages: Option<u64>,
    pub flush_ms: Option<u64>,
    pub timestamp_type: TimestampType,
    pub retention_bytes: Option<u64>,
    pub retention_ms: Option<u64>,
    /// `local.retention.bytes` with `-2` resolved to `retention.bytes`;
    /// `None` = no size limit on local copies of tiered data.
    pub local_retention_bytes: Option<u64>,
    /// `local.retention.ms` resolved likewise.
    pub local_retention_ms: Option<u64>,
    /// `write.caching`: `true` acknowledges acks=all writes once they are in
    /// the page cache; `false` only once an fdatasync (shared by every
    /// produce request waiting at that moment) made them durable, and
    /// consumers see nothing that is not yet durable.
    pub write_caching: bool,
    /// `cleanup.policy` includes `compact`.
    pub compacted: bool,
    /// `delete.retention.ms`, `min.compaction.lag.ms`,
    /// `max.compaction.lag.ms`, `min.cleanable.dirty.ratio`.
    pub compaction: storage::CompactionConfig,
    /// `durability=object-store`: acks=all writes are acknowledged once a
    /// write-ahead object holds them (`storage::tier::wal`), and the high
    /// watermark never passes what object storage holds.
    pub object_store_durable: bool,
}

impl LogSettings {
    /// The storage crate's settings for this partition.
    pub fn log_config(&self) -> storage::LogConfig {
        let segment_bytes = self.segment_bytes.clamp(
            storage::config::MIN_SEGMENT_BYTES,
            storage::config::MAX_SEGMENT_BYTES,
        );
        storage::LogConfig {
            segment_bytes,
            // Partitions filled at the same rate would otherwise roll,
            // seal and upload in the same moment, one after the other on
            // their shard: each rolls somewhere in the last eighth instead.
            segment_jitter_bytes: segment_bytes / ROLL_JITTER_FRACTION,
            segment_ms: self.segment_ms,
            max_message_bytes: self.max_message_bytes,
            flush_messages: self.flush_messages,
            flush_ms: self.flush_ms,
            timestamp_type: self.timestamp_type,
            compacted: self.compacted,
            compaction: self.compaction,
            ..storage::LogConfig::default()
        }
    }
}

/// Failures of a partition log. The storage crate's errors travel unchanged
/// so their detail (paths, positions, producer ids) reaches the logs and the
/// client's error message; `crate::codes::log_error` maps each to a Kafka code.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Tier(TierError),
    /// This node does not serve the partition (it is shutting down, the topic
    /// is being deleted, the partition's task stopped, or another agent leads it).
    #[error("this node does not serve the partition: {0}")]
    NotServing(&'static str),
    /// A durability point failed: the log is offline and acks=all writes
    /// waiting for it are not acknowledged.
    #[error("the write could not be made durable: {0}")]
    NotDurable(#[from] NotDurable),
    /// Reading what the log holds failed (the file could not be read).
    #[error("reading the log failed: {0}")]
    Read(#[source] std::io::Error),
    /// A leader that took over does not yet know how far its log is
    /// committed (its high watermark is below the log end it took over
    /// with): answers that depend on it wait until its followers confirm
    /// (Kafka's OFFSET_NOT_AVAILABLE, KIP-207; clients retry).
    #[error("the new leader's high watermark is not known yet: {0}")]
    OffsetNotAvailable(&'static str),
    /// Too few in-sync replicas for an acks=all write.
    #[error(transparent)]
    NotEnoughReplicas(#[from] crate::partition::replication::replica_set::NotEnoughReplicas),
}

/// Why appended data was not made durable. Every write waiting for the
/// same durability point gets the same cause, hence the shared [`Arc`].
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotDurable {
    /// The blocking thread running the fdatasync went away before it
    /// answered (the runtime is shutting down).
    #[error("the fdatasync thread stopped before it answered")]
    SyncThreadStopped,
    /// The fdatasync, or recording its outcome, failed.
    #[error("a durability point failed: {0}")]
    SyncFailed(std::sync::Arc<LogError>),
    /// Closing the log (its last fsync) failed.
    #[error("closing the log failed: {0}")]
    CloseFailed(std::sync::Arc<LogError>),
}

impl From<TierError> for LogError {
    fn from(e: TierError) -> Self {
        match e {
            TierError::Storage(s) => LogError::Storage(s),
            other => LogError::Tier(other),
        }
    }
}

/// A transaction marker to write: the producer, its epoch, commit or
/// abort, and the epoch of the coordinator that asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub control: storage::ControlType,
    pub coordinator_epoch: i32,
}

/// What a local read found.
#[derive(Debug)]
pub enum LocalRead {
    /// Whole batches (possibly none, at the log end).
    Records(Records),
    /// The offset lies below the local log start but at or above the log
    /// start across tiers: it is in object storage.
    Tiered,
}

/// One partition's local log. Implementations do blocking file IO; the owning
/// partition task calls them and never holds them across an await.
pub trait LogBackend: Send + 'static {
    /// Validates and appends one v2 record batch (or several, for callers
    /// other than Produce v3+), stamping base offsets and the leader epoch in place.
    /// `schemas`: the topic validates schemas, and the records' keys or
    /// values must carry these ids (`storage::schema_ids`).
    fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
        schemas: Option<&storage::SchemaRule>,
    ) -> Result<Appended, LogError>;
    /// Whole batches from the one containing `offset`, none holding an offset
    /// `>= upper_bound`. `min_one`: return the first batch whole even when it
    /// is larger than `max_bytes` (Kafka does this for the first partition of
    /// a response only, so that a consumer always makes progress).
    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        upper_bound: i64,
    ) -> Result<LocalRead, LogError>;
    /// Writes the marker that ends a producer's transaction (see
    /// `storage::PartitionLog::append_marker`); returns its offset.
    fn append_marker(
        &mut self,
        marker: Marker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<i64, LogError>;
    /// The first offset of the oldest ongoing transaction.
    fn first_unstable_offset(&self) -> Option<i64>;
    /// Every producer the partition remembers (DescribeProducers).
    fn producers(&self) -> Vec<storage::ProducerSummary>;
    /// The aborted transactions a read_committed read of `[from, upto)`
    /// must name.
    fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<storage::AbortedTxn>;
    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<TimestampOffset>, LogError>;
    fn max_timestamp(&self) -> Option<TimestampOffset>;
    /// The first offset of the partition across tiers.
    fn log_start_offset(&self) -> i64;
    /// The first offset on local disk (`log_start_offset` when nothing is tiered).
    fn local_start_offset(&self) -> i64;
    /// The last offset held by object storage, if any.
    fn latest_tiered_offset(&self) -> Option<i64>;
    fn log_end_offset(&self) -> i64;
    /// Bytes of record data on local disk.
    fn local_bytes(&self) -> u64;
    /// Every offset below this survives a power loss.
    fn flushed_offset(&self) -> i64;
    /// Starts a durability point at the log end (never blocks); run it off
    /// the shard and hand the outcome to [`LogBackend::sync_done`].
    fn sync_point(&mut self) -> storage::SyncPoint;
    /// Records a durability point's outcome; the new flushed offset, or the
    /// error that took the log offline.
    fn sync_done(&mut self, done: storage::SyncDone) -> Result<i64, LogError>;
    fn set_settings(&mut self, settings: &LogSettings);
    /// Timers (flush.ms, segment.ms, retention).
    fn tick(&mut self, now_ms: i64) -> Result<(), LogError>;
    fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError>;
    fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)>;
    /// The epoch of the newest batch, if any.
    fn latest_epoch(&self) -> Option<i32>;
    /// A follower's append: `records` are whole batches as the leader's log
    /// holds them (offsets and epochs stamped) and must continue this log
    /// exactly; they are written unchanged. Returns the new log end.
    fn append_replicated(&mut self, records: &[u8], now_ms: i64) -> Result<i64, LogError>;
    /// Removes every batch at or past `offset` (a follower parting from a
    /// new leader's log).
    fn truncate_to(&mut self, offset: i64) -> Result<(), LogError>;
    /// Empties the local log and restarts it at `offset` (a follower whose
    /// leader no longer holds what it would fetch locally).
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError>;
    /// Restores idempotent producer state from a snapshot taken where this
    /// empty log starts (see `storage::PartitionLog::restore_producers`);
    /// whether it was restored.
    fn restore_producers(&mut self, snapshot: &[u8]) -> Result<bool, LogError>;
    /// Object storage receives only offsets below `limit` from now on (a
    /// replicated partition's high watermark on its leader, `i64::MIN` on a
    /// follower). A log without object storage ignores it.
    fn set_upload_limit(&mut self, limit: i64);
    /// A compaction run of a compacted topic's log due now, below
    /// `upper_bound` as well as the log's own limits (see
    /// `storage::compaction`); run it off the shard (`storage::compaction::submit`)
    /// and hand the result to [`LogBackend::install_compaction`].
    fn plan_compaction(&self, now_ms: i64, upper_bound: i64) -> Option<storage::CompactionJob>;
    /// Puts a finished compaction run's segments in place.
    fn install_compaction(
        &mut self,
        done: storage::compaction::Compacted,
        now_ms: i64,
    ) -> Result<storage::CompactionReport, LogError>;
    /// Where compaction of this log stands.
    fn cleaner_figures(&self) -> storage::CleanerFigures;
    /// Flushes and marks a clean shutdown.
    fn close(self: Box<Self>) -> Result<(), LogError>;
}

/// Reads of the offsets a partition keeps in object storage. Used off the
/// partition's task, so slow object-store calls never stall its shard.
#[async_trait::async_trait]
pub trait ColdLog: Send + Sync + 'static {
    /// Whole batches from the one holding `offset`; `None` when object storage
    /// holds no such offset.
    async fn read(&self, offset: i64, max_bytes: usize) -> Result<Option<Bytes>, LogError>;
    /// The first record at or after `log_start` with a timestamp `>= ts_ms`.
    async fn offset_for_timestamp(
        &self,
        ts_ms: i64,
        log_start: i64,
    ) -> Result<Option<TimestampOffset>, LogError>;
    /// The largest timestamp at or after `log_start` and the first record carrying it.
    async fn max_timestamp(&self, log_start: i64) -> Result<Option<TimestampOffset>, LogError>;
    /// Records a DeleteRecords floor durably (in the metastore) before the
    /// local log applies it, so losing the local directory cannot bring
    /// deleted records back.
    async fn persist_log_start(&self, offset: i64) -> Result<(), LogError>;
    /// The idempotent producer snapshot uploaded with the tiered segment
    /// that ends right before `next_offset`; `None` when no segment ends
    /// there or it has none.
    async fn producer_snapshot(&self, next_offset: i64) -> Result<Option<Bytes>, LogError>;
    /// The aborted transactions named by the tiered segments' indexes that
    /// overlap `[from, upto)`.
    async fn aborted_transactions(
        &self,
        from: i64,
        upto: i64,
    ) -> Result<Vec<storage::AbortedTxn>, LogError>;
    /// The offset after the last one object storage holds, if it holds any.
    /// A read past a compacted copy's last batch finds nothing there up to
    /// this offset, and goes on from it (locally).
    fn tiered_end(&self) -> Option<i64> {
        None
    }
}

/// A partition log as a factory opens it.
pub struct OpenedLog {
    pub log: Box<dyn LogBackend>,
    /// Object storage behind the local log, for tiered backends.
    pub cold: Option<Arc<dyn ColdLog>>,
}

/// Opens and removes partition logs.
pub trait LogFactory: Send + Sync + 'static {
    /// Opens (creating or recovering) a partition's log. Blocking: recovery
    /// scans segments, so callers run it off the shard threads.
    fn open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<OpenedLog, LogError>;
    /// Deletes a partition's local data after its topic is deleted or its
    /// replica moved to other agents.
    fn remove(&self, topic: &str, topic_id: Uuid, partition: i32) -> Result<(), LogError>;
}
