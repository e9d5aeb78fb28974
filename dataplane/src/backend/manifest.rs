//! The metastore as the tiering manifest: one Raft write per committed
//! segment, local-replica reads. Production wires it into `storage::tier::Tier`.

use std::collections::BTreeSet;

use async_trait::async_trait;
use metastore::{Manifests, MetaError, Metastore, PackedObject, SegmentEntry, WalAppend, WalRange};
use storage::tier::wal::{WalIndex, WalRecord};
use storage::tier::{Manifest, ManifestError, PackedAt, PartitionKey, TieredSegment, TopicToPurge};

/// [`Manifest`] over a running [`Metastore`].
#[derive(Debug, Clone)]
pub struct MetastoreManifest {
    meta: Metastore,
}

impl MetastoreManifest {
    pub fn new(meta: Metastore) -> Self {
        MetastoreManifest { meta }
    }
}

fn tiered(e: SegmentEntry) -> TieredSegment {
    TieredSegment {
        key: e.key,
        base_offset: e.base_offset,
        last_offset: e.last_offset,
        first_timestamp: e.first_timestamp,
        max_timestamp: e.max_timestamp,
        size: e.size,
        checksum: e.checksum,
        index_size: e.index_size,
        time_index_size: e.time_index_size,
        served_from: e.served_from,
        pack: e.pack.map(|p| PackedAt {
            key: p.key,
            offset: p.offset,
            object_size: p.object_size,
            producers_size: p.producers_size,
            txn_index_size: p.txn_index_size,
        }),
    }
}

fn entry(s: TieredSegment) -> SegmentEntry {
    SegmentEntry {
        key: s.key,
        base_offset: s.base_offset,
        last_offset: s.last_offset,
        first_timestamp: s.first_timestamp,
        max_timestamp: s.max_timestamp,
        size: s.size,
        checksum: s.checksum,
        index_size: s.index_size,
        time_index_size: s.time_index_size,
        served_from: s.served_from,
        pack: s.pack.map(|p| PackedObject {
            key: p.key,
            offset: p.offset,
            object_size: p.object_size,
            producers_size: p.producers_size,
            txn_index_size: p.txn_index_size,
        }),
    }
}

/// Whether a metastore failure may pass (leader change, timeout, shutdown
/// of a peer); exhaustive so new variants get a deliberate answer.
fn retriable(e: &MetaError) -> bool {
    match e {
        MetaError::NotLeader { .. }
        | MetaError::Timeout { .. }
        | MetaError::Network { .. }
        | MetaError::Membership { .. }
        | MetaError::ShuttingDown
        | MetaError::Storage { .. } => true,
        MetaError::TopicAlreadyExists { .. }
        | MetaError::UnknownTopic { .. }
        | MetaError::UnknownTopicId { .. }
        | MetaError::UnknownPartition { .. }
        | MetaError::InvalidTopicName { .. }
        | MetaError::InvalidPartitions { .. }
        | MetaError::InvalidReplicationFactor { .. }
        | MetaError::InvalidReplicaAssignment { .. }
        | MetaError::InvalidConfig { .. }
        | MetaError::InvalidRequest { .. }
        | MetaError::GroupIdNotFound { .. }
        | MetaError::InvalidGroupId { .. }
        | MetaError::OffsetMetadataTooLarge { .. }
        | MetaError::NotCoordinator { .. }
        | MetaError::Transaction { .. }
        | MetaError::UnknownAgent { .. }
        | MetaError::DuplicateAgent { .. }
        | MetaError::AgentAlive { .. }
        | MetaError::StaleRequest { .. }
        | MetaError::FencedLeaderEpoch { .. }
        | MetaError::NotPartitionLeader { .. }
        | MetaError::IneligibleReplica { .. }
        | MetaError::ElectionNotNeeded { .. }
        | MetaError::NoReassignmentInProgress { .. }
        | MetaError::EligibleLeadersNotAvailable { .. }
        | MetaError::SegmentOverlap { .. }
        | MetaError::ProducerIdsExhausted
        | MetaError::Registry { .. }
        | MetaError::Connect { .. }
        | MetaError::InvalidSettings { .. } => false,
    }
}

impl MetastoreManifest {
    /// The epoch at which this agent leads `p`, as its replica of the
    /// metadata shows; refused (not retriable) when it does not lead it.
    fn leader_epoch(&self, p: PartitionKey, operation: &'static str) -> Result<i32, ManifestError> {
        let me = self.meta.node_id();
        let leadership = self.meta.read(|s| {
            s.topic_by_id(p.topic_id)
                .and_then(|t| t.partition(p.partition))
                .map(|part| (part.leader, part.leader_epoch))
        });
        match leadership {
            Some((Some(leader), epoch)) if leader == me => Ok(epoch),
            Some((leader, epoch)) => Err(ManifestError {
                operation,
                reason: format!(
                    "agent {me} does not lead partition {} of topic {} (leader {leader:?} at epoch {epoch})",
                    p.partition, p.topic_id
                ),
                retriable: false,
            }),
            None => Err(failed(operation)(MetaError::UnknownTopicId { id: p.topic_id })),
        }
    }
}

fn failed(operation: &'static str) -> impl Fn(MetaError) -> ManifestError {
    move |e| ManifestError {
        operation,
        retriable: retriable(&e),
        reason: e.to_string(),
    }
}

#[async_trait]
impl Manifest for MetastoreManifest {
    fn segments(&self, p: PartitionKey) -> Vec<TieredSegment> {
        self.meta
            .segments(p.topic_id, p.partition)
            .into_iter()
            .map(tiered)
            .collect()
    }

    /// Commits as the partition's leader at the epoch this agent's replica
    /// of the metadata shows it leading: the metastore refuses the commit
    /// once a later leader took over, so an upload that outlived this
    /// agent's leadership cannot land after the next leader's trims.
    async fn commit(&self, p: PartitionKey, segment: TieredSegment) -> Result<(), ManifestError> {
        let epoch = self.leader_epoch(p, "commit")?;
        self.meta
            .commit_segment(p.topic_id, p.partition, entry(segment), Some(epoch))
            .await
            .map_err(failed("commit"))
    }

    /// Replaces as the partition's leader, fenced by its epoch as `commit`
    /// is: a deposed leader's compacted copy never lands.
    async fn replace(
        &self,
        p: PartitionKey,
        old_keys: &[String],
        segment: TieredSegment,
    ) -> Result<(), ManifestError> {
        let epoch = self.leader_epoch(p, "replace")?;
        self.meta
            .replace_segment(
                p.topic_id,
                p.partition,
                old_keys.to_vec(),
                entry(segment),
                Some(epoch),
            )
            .await
            .map_err(failed("replace"))
    }

    async fn trim(
        &self,
        p: PartitionKey,
        below_offset: i64,
    ) -> Result<Vec<TieredSegment>, ManifestError> {
        let removed = self
            .meta
            .trim_segments(p.topic_id, p.partition, below_offset)
            .await
            .map_err(failed("trim"))?;
        Ok(removed.into_iter().map(tiered).collect())
    }

    fn log_start(&self, p: PartitionKey) -> Option<i64> {
        self.meta.log_start(p.topic_id, p.partition)
    }

    async fn set_log_start(&self, p: PartitionKey, offset: i64) -> Result<(), ManifestError> {
        self.meta
            .set_log_start(p.topic_id, p.partition, offset)
            .await
            .map(|_| ())
            .map_err(failed("set log start"))
    }

    fn deleted_topics(&self) -> Vec<TopicToPurge> {
        self.meta
            .deleted_topics()
            .into_iter()
            .map(|d| TopicToPurge {
                topic_id: d.id,
                segments: d
                    .segments
                    .into_iter()
                    .map(|(p, list)| (p, list.into_iter().map(tiered).collect()))
                    .collect(),
            })
            .collect()
    }

    /// Only the metastore's leader vouches for the set, after a barrier:
    /// its state then holds every commit acknowledged so far.
    async fn packs_in_use(&self) -> Result<Option<BTreeSet<String>>, ManifestError> {
        if self.meta.metastore_leader() != Some(self.meta.node_id()) {
            return Ok(None);
        }
        self.meta
            .linearizable_barrier()
            .await
            .map_err(failed("list packed objects"))?;
        // write-ahead objects live under the packs' prefix too
        Ok(Some(self.meta.read(|s| {
            let mut keys = s.packed_objects();
            keys.extend(s.wal_objects());
            keys
        })))
    }

    async fn forget_deleted_topic(&self, topic_id: uuid::Uuid) -> Result<(), ManifestError> {
        self.meta
            .forget_deleted_topic(topic_id)
            .await
            .map_err(failed("forget deleted topic"))
    }
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;

/// The metastore records the write-ahead ranges of object-store-durable
/// partitions (`metastore::Command::AppendWal`).
#[async_trait]
impl WalIndex for MetastoreManifest {
    async fn record(
        &self,
        ranges: Vec<WalRecord>,
    ) -> Result<Vec<Result<(), String>>, ManifestError> {
        let appends = ranges
            .into_iter()
            .map(|r| WalAppend {
                topic_id: r.partition.topic_id,
                partition: r.partition.partition,
                range: WalRange {
                    base_offset: r.base_offset,
                    last_offset: r.last_offset,
                    leader_epoch: r.leader_epoch,
                    key: r.key,
                    offset: r.offset,
                    len: r.len,
                },
            })
            .collect();
        let results = self
            .meta
            .append_wal(appends)
            .await
            .map_err(failed("record write-ahead ranges"))?;
        Ok(results
            .into_iter()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect())
    }
}
