//! Partition tasks: each partition's log is owned by one task on one shard,
//! picked by a hash of (topic id, partition). Everything that touches the log
//! goes through that task's bounded channel, so appends need no locks.
//!
//! The task also owns the partition's high watermark, the offset below which
//! consumers may read and acks=all producers are answered:
//! - with `write.caching=true` (the default) it is the log end, moved after
//!   every append: acknowledged means "in the page cache";
//! - with `write.caching=false` it is the log end as of the last completed
//!   durability point. An acks=all append waits in the task until the high
//!   watermark passes it. Whenever the task's queue is drained, data waits
//!   and no durability point runs, the task starts one
//!   (`storage::SyncPoint`): the fdatasync runs on a blocking thread and its
//!   outcome comes back to the task, so every produce request that arrives
//!   meanwhile waits for the next one, which covers them all (group commit).
//!   Consumers never see, or commit offsets of, data a power loss could take
//!   back. A failed durability point takes the log offline, and the writes
//!   waiting for it get KAFKA_STORAGE_ERROR.
//!
//! The high watermark never moves backwards, and watchers are woken only when
//! it moves, so long-polling fetches sleep until there is news.
//!
//! Opening a log recovers it (a CRC scan of unclean segments), which is
//! blocking file IO: it runs on a blocking thread, once per partition however
//! many requests ask at the same time, and the registry lock is held only to
//! look the partition up. Once shutdown begins, or while a topic is being
//! deleted, no log is opened: a request racing either gets
//! NOT_LEADER_OR_FOLLOWER and never a second log on a directory still in use.
//!
//! Reads below the local log start are answered by the task as "tiered" with
//! the bounds of that moment, and the handle then reads object storage off
//! the task ([`PartitionHandle::read`]); ListOffsets merges both tiers the
//! same way ([`PartitionHandle::offsets`]). This is the one place where the
//! two tiers meet on the read path.

mod command;
mod handle;
pub mod hw_checkpoint;
mod registry;
pub mod replication;
mod task;
mod txn_guard;

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use command::{
    Acks, FetchedAt, FollowerFetch, FollowerFetchAnswer, Isolation, IsrProposal, Leadership,
    OffsetQuery, ReadResult, ReplicaPosition,
};
pub use handle::{PartitionHandle, TaskId};
pub use registry::Partitions;
pub use txn_guard::TxnGuard;

/// Wall-clock milliseconds since the epoch: for record timestamps and
/// whatever is compared with them, never for measuring durations.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Milliseconds on a monotonic clock (tokio's, so paused time in tests
/// moves it) from a fixed origin in this process: for durations such as a
/// follower's replica lag, which a wall-clock step (NTP, an operator) must
/// neither stretch nor shrink. Comparable only within this process.
pub fn monotonic_ms() -> i64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    // well before any instant this process reads, whichever reads first
    // (a test runtime's paused clock may start before the first call)
    let origin = *ORIGIN.get_or_init(|| {
        let now = std::time::Instant::now();
        now.checked_sub(Duration::from_secs(1 << 20)).unwrap_or(now)
    });
    let now: std::time::Instant = tokio::time::Instant::now().into_std();
    i64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(i64::MAX)
}

/// Counters of the partition tasks, for `/metrics` and for tests that check
/// how much work a request caused.
#[derive(Debug, Default)]
pub struct PartitionCounters {
    /// Read commands served (fetches, including every long-poll re-read).
    pub reads: AtomicU64,
    /// Durability points (fdatasyncs) completed for `write.caching=false`.
    pub syncs: AtomicU64,
    /// Logs opened.
    pub opens: AtomicU64,
    /// Open logs that went offline after a failed write or fsync (a gauge).
    pub offline: AtomicU64,
    /// Replica fetch response bytes this node sent as a leader.
    pub replica_bytes_sent: AtomicU64,
    /// Replica fetch response bytes this node received as a follower.
    pub replica_bytes_received: AtomicU64,
    /// Replica fetch bytes per peer: requests and answers, both ways.
    pub replica_peers: crate::traffic::PeerTraffic,
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "lag_clock_tests.rs"]
mod lag_clock_tests;

#[cfg(test)]
#[path = "follower_tests.rs"]
mod follower_tests;

#[cfg(test)]
#[path = "restart_tests.rs"]
mod restart_tests;

#[cfg(test)]
#[path = "object_store_reads_tests.rs"]
mod object_store_reads_tests;

#[cfg(test)]
#[path = "deposed_leader_tests.rs"]
mod deposed_leader_tests;
