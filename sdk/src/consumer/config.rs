//! What a consumer is asked to do: how it takes part in a group, where its
//! partitions start, what an out-of-range offset does, and how records
//! reach it. Plain data, read by the consumer and by its membership.

use std::time::Duration;

#[cfg(doc)]
use super::Consumer;
use crate::group::GroupOptions;
use crate::proto::Isolation;

/// How a consumer takes part in a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Membership {
    /// The application assigns partitions itself; the group, if any, only
    /// stores committed offsets (committed outside membership).
    #[default]
    Manual,
    /// The consumer joins [`ConsumerConfig::group`] with
    /// [`Consumer::subscribe`], and the group's coordinator assigns it
    /// partitions of the subscribed topics, rebalancing them as members
    /// come and go.
    Group(GroupOptions),
}

/// Where a newly assigned partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The first offset still held.
    Earliest,
    /// The high watermark: only records produced from now on.
    Latest,
    /// This offset.
    Offset(i64),
    /// The first record at or after this time (ms since the Unix epoch);
    /// the high watermark when every record is older.
    Timestamp(i64),
    /// The group's committed offset; the earliest when it committed none.
    Committed,
}

/// What to do when a fetch offset is out of the partition's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// Go on from the first offset still held.
    #[default]
    Earliest,
    /// Go on from the high watermark.
    Latest,
    /// Yield OFFSET_OUT_OF_RANGE and pause the partition until a seek.
    Fail,
}

/// How records reach a [`Consumer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReadMode {
    /// Long-poll fetches, one in flight per leader for all its partitions.
    #[default]
    Fetch,
    /// A subscription per partition: the server pushes records as they
    /// are committed, within `window` bytes of credit per partition (at
    /// least the topics' `max.message.bytes`). On a QUIC connection each
    /// subscription is its own stream.
    Push { window: u32 },
}

/// How a [`Consumer`] fetches.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Where [`Consumer::commit`] commits and [`StartAt::Committed`]
    /// reads; `None` for a consumer that commits nothing.
    pub group: Option<String>,
    pub membership: Membership,
    /// How long the server may hold a fetch waiting for data (default
    /// 500 ms).
    pub max_wait: Duration,
    /// Bytes the server waits for before answering early (default 1).
    pub min_bytes: u32,
    /// Records per fetch answer at most (default 50 MiB; the first batch
    /// comes whole even when larger). Keep it under the client's
    /// `max_frame_bytes`.
    pub max_bytes: u32,
    /// Records per partition per fetch at most (default 1 MiB).
    pub partition_max_bytes: u32,
    /// What an out-of-range offset does (default: back to the earliest).
    pub offset_reset: OffsetReset,
    /// Fetches or pushed subscriptions (default: fetches). `max_wait`,
    /// `min_bytes` and the byte limits apply to fetches only.
    pub read_mode: ReadMode,
    /// Which records are read (default: all, read_uncommitted).
    /// [`Isolation::ReadCommitted`] reads up to the last stable offset and
    /// leaves aborted transactions' records out; fetches only (a
    /// subscription pushes read_uncommitted).
    pub isolation: Isolation,
    /// Checks every fetched batch's CRC-32C before returning its records
    /// (default: true, as Kafka's `check.crcs`). A batch that fails it is
    /// an error, like any undecodable batch. Off saves a pass over every
    /// byte read: TCP and TLS already check what crossed the network, and
    /// the checksum otherwise catches a batch damaged where it was stored.
    /// Compressed batches, and pushed subscriptions, are always checked;
    /// lengths and counts are checked either way.
    pub check_crcs: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group: None,
            membership: Membership::Manual,
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 << 20,
            partition_max_bytes: 1 << 20,
            offset_reset: OffsetReset::Earliest,
            read_mode: ReadMode::Fetch,
            isolation: Isolation::ReadUncommitted,
            check_crcs: true,
        }
    }
}

impl ConsumerConfig {
    /// This configuration with an isolation level (see the field).
    pub fn isolation_level(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }
}
