//! What a partition's handle asks its task, and what the task answers.

use bytes::{Bytes, BytesMut};
use metastore::AgentId;
use storage::tier::PartitionKey;
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Appended, LogError, LogSettings, Marker, Records, TimestampOffset};
use crate::partition::replication::replica_set::{Assignment, IsrChange};
use crate::partition::replication::wire::Diverging;

/// What a producer asked to wait for (`acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=0: no answer is sent; the append still happens.
    None,
    /// acks=1: answered after the local append.
    Leader,
    /// acks=-1: answered once the high watermark passes the batch.
    All,
}

impl Acks {
    /// Kafka's `acks` field; `None` for values Kafka refuses.
    pub fn from_wire(acks: i16) -> Option<Acks> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// What a fetch read returns, with the partition's offsets at that moment.
#[derive(Debug)]
pub struct ReadResult {
    pub records: Records,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The high watermark, or the first offset of the oldest ongoing
    /// transaction if lower.
    pub last_stable_offset: i64,
    /// For a read_committed read: the aborted transactions overlapping
    /// what it returned (empty otherwise).
    pub aborted: Vec<storage::AbortedTxn>,
}

/// Which records a read may return (Kafka's `isolation_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Up to the high watermark.
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions named.
    ReadCommitted,
}

impl Isolation {
    /// Kafka's wire value: 1 is read_committed, anything else
    /// read_uncommitted.
    pub fn from_wire(level: i8) -> Self {
        if level == 1 {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        }
    }
}

/// A ListOffsets question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    Earliest,
    /// EARLIEST_LOCAL (-4): the first offset on local disk.
    EarliestLocal,
    Latest,
    /// LATEST for read_committed: the last stable offset.
    LastStable,
    /// LATEST_TIERED (-5): the last offset in object storage.
    LatestTiered,
    MaxTimestamp,
    Timestamp(i64),
}

pub(super) type Reply<T> = oneshot::Sender<T>;
pub(super) type AppendReply = Reply<Result<(Appended, i64), LogError>>;

/// The task's answer to a read.
pub(super) enum TaskRead {
    Local(ReadResult),
    /// Below the local start: read object storage, within these bounds.
    Tiered {
        log_start: i64,
        high_watermark: i64,
        last_stable_offset: i64,
        /// read_committed: the aborted transactions from the read offset
        /// up to the last stable offset.
        aborted: Vec<storage::AbortedTxn>,
    },
}

/// The task's answer to a ListOffsets question, before object storage is asked.
pub(super) struct TaskOffsets {
    pub(super) local: Option<TimestampOffset>,
    pub(super) log_start: i64,
    /// Object storage holds offsets below the local start.
    pub(super) tiered_below_local: bool,
}

/// This node leads the partition: its replicas and the rules it keeps.
#[derive(Debug, Clone)]
pub struct Leadership {
    /// This node's agent id.
    pub me: AgentId,
    pub assignment: Assignment,
    pub min_insync: usize,
    pub lag_max_ms: i64,
    /// Replicas that may not join the ISR: fenced agents (their lease ran
    /// out, or they shut down), as KIP-841 keeps fenced and shutting-down
    /// brokers out of the ISR.
    pub ineligible: Vec<AgentId>,
    /// Where the task sends the ISR changes it wants recorded.
    pub isr_requests: mpsc::UnboundedSender<IsrProposal>,
}

/// An ISR change a partition's leader asks the metastore to record.
#[derive(Debug, Clone)]
pub struct IsrProposal {
    pub key: PartitionKey,
    pub change: IsrChange,
}

/// A follower's fetch, as the leader's task sees it.
#[derive(Debug, Clone, Copy)]
pub struct FollowerFetch {
    pub follower: AgentId,
    pub leader_epoch: i32,
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
    pub max_bytes: usize,
}

/// The leader's answer to one partition of a follower's fetch.
#[derive(Debug, Clone)]
pub struct FollowerFetchAnswer {
    /// A Kafka error code (0: none).
    pub error: i16,
    pub high_watermark: i64,
    /// The first offset the leader holds locally (where a follower that
    /// fell below it restarts).
    pub local_start_offset: i64,
    pub log_end_offset: i64,
    pub diverging: Option<Diverging>,
    pub records: Bytes,
}

/// Where a follower's local log stands: the offset it fetches from (and
/// that its leader counts toward the high watermark) and the epoch of the
/// batch before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaPosition {
    pub log_end: i64,
    /// Epoch of the newest batch (-1 for none).
    pub latest_epoch: i32,
}

/// The view a follower fetched under: a leader's answer is applied only
/// while the follower still follows that leader at that epoch and its log
/// still ends where the fetch started (a late answer is stale, as in Kafka).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedAt {
    pub leader: AgentId,
    pub leader_epoch: i32,
    /// The follower's log end the fetch started from.
    pub fetch_offset: i64,
}

/// How a follower cuts its log.
#[derive(Debug)]
pub(super) enum Cut {
    /// Remove every batch at or past this offset.
    To(i64),
    /// Empty the log and restart it at `at`, with the idempotent producer
    /// state of `producers` (a snapshot taken there) when there is one.
    Restart { at: i64, producers: Option<Bytes> },
}

pub(super) enum Command {
    Lead(Leadership),
    Follow {
        leader: AgentId,
        leader_epoch: i32,
    },
    IsrChangeFailed {
        change: IsrChange,
        outcome_unknown: bool,
    },
    FollowerFetch {
        fetch: FollowerFetch,
        reply: Reply<FollowerFetchAnswer>,
    },
    ReplicaAppend {
        fetched: FetchedAt,
        records: Bytes,
        leader_high_watermark: i64,
        reply: Reply<Result<(), LogError>>,
    },
    Truncate {
        fetched: FetchedAt,
        cut: Cut,
        reply: Reply<Result<(), LogError>>,
    },
    Position {
        reply: Reply<Result<ReplicaPosition, LogError>>,
    },
    Append {
        records: BytesMut,
        leader_epoch: i32,
        acks: Acks,
        /// The topic validates schemas: the ids the records must carry.
        schemas: Option<Box<storage::SchemaRule>>,
        /// A transactional batch: when its producer was verified.
        txn: Option<super::TxnGuard>,
        reply: AppendReply,
    },
    Read {
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        isolation: Isolation,
        reply: Reply<Result<TaskRead, LogError>>,
    },
    /// A transaction marker, written as the leader at `leader_epoch`;
    /// answered once the in-sync replicas hold it.
    Marker {
        marker: Marker,
        leader_epoch: i32,
        reply: AppendReply,
    },
    Offsets {
        query: OffsetQuery,
        reply: Reply<Result<TaskOffsets, LogError>>,
    },
    Bounds {
        reply: Reply<(i64, i64)>,
    },
    /// The last stable offset (see [`ReadResult::last_stable_offset`]).
    LastStable {
        reply: Reply<i64>,
    },
    /// Every producer the partition remembers (DescribeProducers).
    Producers {
        reply: Reply<Vec<storage::ProducerSummary>>,
    },
    LocalBytes {
        reply: Reply<u64>,
    },
    DeleteBefore {
        offset: i64,
        reply: Reply<Result<i64, LogError>>,
    },
    EpochEnd {
        epoch: i32,
        reply: Reply<Result<Option<(i32, i64)>, LogError>>,
    },
    Settings(LogSettings),
    Close {
        reply: Reply<Result<(), LogError>>,
    },
}
