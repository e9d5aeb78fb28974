//! [`Manifests`]: tiering manifests and log start floors.

use uuid::Uuid;

use super::{unexpected, Metastore};
use crate::command::{Command, CommandOutput};
use crate::error::MetaError;
use crate::types::{DeletedTopic, SegmentEntry, WalAppend, WalRange};

/// Tiering manifests: which sealed objects in object storage hold which of
/// a partition's offsets; each partition's log start floor, below which its
/// records are deleted (Kafka DeleteRecords); and the manifests of deleted
/// topics, kept until their objects are deleted.
///
/// Writes go through Raft (forwarded to the leader, wherever it is) and
/// resolve once committed (on a quorum's disks) and applied on this replica
/// too. Reads come from the local replica, possibly stale by
/// [`Metastore::staleness`].
#[expect(
    async_fn_in_trait,
    reason = "implemented by Metastore only; callers hold the concrete type, whose futures are Send"
)]
pub trait Manifests {
    /// Adds a sealed object to a partition's manifest. Retrying the same
    /// entry is harmless. `leader_epoch` is the epoch at which the caller
    /// leads the partition: the commit is refused with
    /// [`MetaError::FencedLeaderEpoch`] once a later leader took over
    /// (`None` skips that check, for callers that lead nothing). An entry
    /// wholly below the partition's log start is refused with
    /// [`MetaError::StaleRequest`].
    async fn commit_segment(
        &self,
        topic_id: Uuid,
        partition: i32,
        entry: SegmentEntry,
        leader_epoch: Option<i32>,
    ) -> Result<(), MetaError>;

    /// Replaces the consecutive entries whose keys are `old_keys` (in
    /// offset order: one, or several a merged compacted segment covers) by
    /// `entry`, which must serve exactly the offsets they serve together (a
    /// compacted copy under new keys), in one Raft write. Retrying once it
    /// landed is harmless. Refused with [`MetaError::StaleRequest`] when an
    /// old entry is not recorded, [`MetaError::InvalidRequest`] when the
    /// old entries do not follow each other or the offsets differ,
    /// [`MetaError::SegmentOverlap`] when the new key is recorded with
    /// other content, and [`MetaError::FencedLeaderEpoch`] as
    /// [`Manifests::commit_segment`].
    async fn replace_segment(
        &self,
        topic_id: Uuid,
        partition: i32,
        old_keys: Vec<String>,
        entry: SegmentEntry,
        leader_epoch: Option<i32>,
    ) -> Result<(), MetaError>;

    /// Drops manifest entries wholly below `below_offset`; returns them so
    /// their objects can be deleted. No entry below it is taken afterwards.
    async fn trim_segments(
        &self,
        topic_id: Uuid,
        partition: i32,
        below_offset: i64,
    ) -> Result<Vec<SegmentEntry>, MetaError>;

    fn segments(&self, topic_id: Uuid, partition: i32) -> Vec<SegmentEntry>;

    /// Raises the partition's log start floor to `offset` (Kafka
    /// DeleteRecords) and returns the floor now in force: a lower offset than
    /// the current floor changes nothing. Durable (committed to a quorum's
    /// disks) when it returns; dropped when the topic is deleted.
    async fn set_log_start(
        &self,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
    ) -> Result<i64, MetaError>;

    /// The partition's log start floor on the local replica, if one was set.
    fn log_start(&self, topic_id: Uuid, partition: i32) -> Option<i64>;

    fn deleted_topics(&self) -> Vec<DeletedTopic>;

    /// Records write-ahead ranges of object-store-durable partitions in one
    /// Raft write: one result per append, in order (see `state/wal.rs`).
    /// Durable when it returns.
    async fn append_wal(
        &self,
        appends: Vec<WalAppend>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError>;

    /// The partition's write-ahead ranges on the local replica.
    fn wal_ranges(&self, topic_id: Uuid, partition: i32) -> Vec<WalRange>;

    /// Forgets a deleted topic's manifest once its objects are deleted.
    async fn forget_deleted_topic(&self, topic_id: Uuid) -> Result<(), MetaError>;
}

impl Manifests for Metastore {
    async fn commit_segment(
        &self,
        topic_id: Uuid,
        partition: i32,
        entry: SegmentEntry,
        leader_epoch: Option<i32>,
    ) -> Result<(), MetaError> {
        self.unit_command(Command::CommitSegment {
            topic_id,
            partition,
            entry,
            leader_epoch,
        })
        .await
    }

    async fn replace_segment(
        &self,
        topic_id: Uuid,
        partition: i32,
        old_keys: Vec<String>,
        entry: SegmentEntry,
        leader_epoch: Option<i32>,
    ) -> Result<(), MetaError> {
        let mut old_keys = old_keys.into_iter();
        let Some(old_key) = old_keys.next() else {
            return Err(MetaError::invalid_request(format!(
                "segment entry '{}' replaces no entry",
                entry.key
            )));
        };
        self.unit_command(Command::ReplaceSegment {
            topic_id,
            partition,
            old_key,
            merged_keys: old_keys.collect(),
            entry,
            leader_epoch,
        })
        .await
    }

    async fn trim_segments(
        &self,
        topic_id: Uuid,
        partition: i32,
        below_offset: i64,
    ) -> Result<Vec<SegmentEntry>, MetaError> {
        match self
            .submit_one(Command::TrimSegments {
                topic_id,
                partition,
                below_offset,
            })
            .await?
        {
            CommandOutput::Segments(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    fn segments(&self, topic_id: Uuid, partition: i32) -> Vec<SegmentEntry> {
        self.read(|s| s.segments(topic_id, partition).to_vec())
    }

    async fn set_log_start(
        &self,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
    ) -> Result<i64, MetaError> {
        match self
            .submit_one(Command::SetLogStart {
                topic_id,
                partition,
                offset,
            })
            .await?
        {
            CommandOutput::LogStart(floor) => Ok(floor),
            other => Err(unexpected(other)),
        }
    }

    fn log_start(&self, topic_id: Uuid, partition: i32) -> Option<i64> {
        self.read(|s| s.log_start(topic_id, partition))
    }

    fn deleted_topics(&self) -> Vec<DeletedTopic> {
        self.read(|s| s.deleted_topics().cloned().collect())
    }

    async fn append_wal(
        &self,
        appends: Vec<WalAppend>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError> {
        match self.submit_one(Command::AppendWal { appends }).await? {
            CommandOutput::WalResults(results) => Ok(results),
            other => Err(unexpected(other)),
        }
    }

    fn wal_ranges(&self, topic_id: Uuid, partition: i32) -> Vec<WalRange> {
        self.read(|s| s.wal_ranges(topic_id, partition).to_vec())
    }

    async fn forget_deleted_topic(&self, topic_id: Uuid) -> Result<(), MetaError> {
        self.unit_command(Command::ForgetDeletedTopic { topic_id })
            .await
    }
}
