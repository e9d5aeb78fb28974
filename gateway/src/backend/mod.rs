//! The two seams the gateway stands on: partition logs and the cluster catalog.
//!
//! * [`PartitionLog`] is one partition's log, owned by exactly one partition task
//!   (it is `Send`, never shared). The `storage` crate's `PartitionLog` is the
//!   production backend; [`memory::MemoryLog`] keeps batches in memory for tests.
//! * [`Catalog`] is the cluster's metadata: topics, configs, committed offsets and
//!   producer-id blocks. The `metastore` crate is the production backend;
//!   [`memory::MemoryCatalog`] is the in-process one for tests.
//!
//! Errors cross the seams as [`LogError`] and [`CatalogError`]; `crate::codes`
//! maps each variant to one Kafka error code.

pub mod disk;
pub mod memory;
pub mod meta;

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;
use uuid::Uuid;

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

/// How record timestamps are set (topic config `message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
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
}

/// Failures of a partition log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("record batch is corrupt: {0}")]
    Corrupt(String),
    #[error("record batch is invalid: {0}")]
    InvalidRecord(String),
    #[error("record batch of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },
    #[error("offset {offset} is outside the log [{start}, {end}]")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    #[error("producer {producer_id}: sequence {got} does not follow {last}")]
    OutOfOrderSequence {
        producer_id: i64,
        got: i32,
        last: i32,
    },
    #[error("producer {producer_id}: epoch {got} is older than {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        got: i16,
        current: i16,
    },
    #[error("producer {producer_id} is unknown to this partition")]
    UnknownProducerId { producer_id: i64 },
    #[error("timestamp {timestamp} is invalid: {reason}")]
    InvalidTimestamp { timestamp: i64, reason: String },
    #[error("record batch uses an unsupported format: {0}")]
    UnsupportedFormat(String),
    #[error("record batch uses an unsupported compression codec: {0}")]
    UnsupportedCompression(String),
    #[error("leader epoch {received} is older than {latest}")]
    FencedLeaderEpoch { received: i32, latest: i32 },
    #[error("invalid log configuration: {0}")]
    InvalidConfig(String),
    #[error("the log is unusable: {0}")]
    Storage(String),
    #[error("storage I/O failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A timestamp and the first offset at or after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

/// One partition's log. Implementations do blocking file IO; the owning
/// partition task calls them and never holds them across an await.
pub trait PartitionLog: Send + 'static {
    /// Validates and appends one or more concatenated v2 record batches,
    /// stamping base offsets and the leader epoch in place.
    fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Appended, LogError>;
    /// Whole batches from the one containing `offset`, at least one batch if any
    /// is below `upper_bound` (even when larger than `max_bytes`).
    fn read(&self, offset: i64, max_bytes: usize, upper_bound: i64) -> Result<Records, LogError>;
    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<TimestampOffset>, LogError>;
    fn max_timestamp(&self) -> Option<TimestampOffset>;
    fn log_start_offset(&self) -> i64;
    fn log_end_offset(&self) -> i64;
    /// Watches the log end offset; long-polling fetches wait on it.
    fn subscribe(&self) -> watch::Receiver<i64>;
    fn set_settings(&mut self, settings: &LogSettings);
    /// Timers (flush.ms, segment.ms, retention).
    fn tick(&mut self, now_ms: i64) -> Result<(), LogError>;
    fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError>;
    fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)>;
    fn flush(&mut self) -> Result<(), LogError>;
    /// Flushes and marks a clean shutdown.
    fn close(self: Box<Self>) -> Result<(), LogError>;
}

/// Opens and removes partition logs.
pub trait LogFactory: Send + Sync + 'static {
    fn open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<Box<dyn PartitionLog>, LogError>;
    /// Deletes a partition's data after its topic is deleted.
    fn remove(&self, topic: &str, topic_id: Uuid, partition: i32) -> Result<(), LogError>;
}

/// One partition as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    pub index: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// One topic as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub id: Uuid,
    pub name: String,
    pub partitions: Vec<PartitionMeta>,
    /// Only the explicitly set configs.
    pub configs: BTreeMap<String, String>,
}

/// A topic to create.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// One change of an IncrementalAlterConfigs or AlterConfigs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    Set(String, String),
    Delete(String),
}

/// A committed offset of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_time_ms: i64,
}

/// Failures of the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("topic '{0}' already exists")]
    TopicAlreadyExists(String),
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    #[error("invalid partition count: {0}")]
    InvalidPartitions(String),
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    #[error("invalid config {key}: {reason}")]
    InvalidConfig { key: String, reason: String },
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopicName { name: String, reason: String },
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("group '{0}' does not exist")]
    GroupIdNotFound(String),
    #[error("invalid group id: {0}")]
    InvalidGroupId(String),
    #[error("offset metadata of {len} bytes exceeds {max} bytes")]
    OffsetMetadataTooLarge { len: usize, max: usize },
    #[error("the metadata store is unavailable: {0}")]
    Unavailable(String),
    #[error("the metadata store failed: {0}")]
    Internal(String),
}

/// The cluster's metadata as the gateway needs it. Reads are local and cheap;
/// writes are durable when their future resolves.
#[async_trait::async_trait]
pub trait Catalog: Send + Sync + 'static {
    fn cluster_id(&self) -> String;
    fn topics(&self) -> Vec<TopicMeta>;
    fn topic(&self, name: &str) -> Option<TopicMeta>;
    fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta>;
    async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError>;
    async fn delete_topic(&self, name: &str) -> Result<TopicMeta, CatalogError>;
    async fn create_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError>;
    async fn alter_configs(
        &self,
        name: &str,
        ops: Vec<ConfigOp>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError>;
    async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<((String, i32), CommittedOffset)>,
    ) -> Result<(), CatalogError>;
    fn committed_offsets(&self, group: &str) -> BTreeMap<(String, i32), CommittedOffset>;
    /// Groups that have committed offsets.
    fn offset_groups(&self) -> Vec<String>;
    async fn delete_group(&self, group: &str) -> Result<(), CatalogError>;
    async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), CatalogError>;
    async fn allocate_producer_ids(&self, count: u32) -> Result<Range<i64>, CatalogError>;
}
