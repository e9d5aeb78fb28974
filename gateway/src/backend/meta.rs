//! The production catalog: the `metastore` crate (openraft). Topics, configs,
//! committed offsets and producer-id blocks are Raft writes; reads come from
//! the local replica.

use std::collections::BTreeMap;
use std::ops::Range;

use metastore::{MetaError, Metastore};
use uuid::Uuid;

use super::{Catalog, CatalogError, CommittedOffset, ConfigOp, NewTopic, PartitionMeta, TopicMeta};

/// Translates a metastore error; exhaustive so every new variant gets a deliberate mapping.
pub fn from_meta(e: MetaError) -> CatalogError {
    let text = e.to_string();
    match e {
        MetaError::TopicAlreadyExists { name } => CatalogError::TopicAlreadyExists(name),
        MetaError::UnknownTopic { name } => CatalogError::UnknownTopic(name),
        MetaError::UnknownTopicId { .. } | MetaError::UnknownPartition { .. } => {
            CatalogError::UnknownTopic(text)
        }
        MetaError::InvalidTopicName { name, reason } => {
            CatalogError::InvalidTopicName { name, reason }
        }
        MetaError::InvalidPartitions { reason } => CatalogError::InvalidPartitions(reason),
        MetaError::InvalidReplicationFactor { reason } => {
            CatalogError::InvalidReplicationFactor(reason)
        }
        MetaError::InvalidReplicaAssignment { reason } => {
            CatalogError::InvalidReplicaAssignment(reason)
        }
        MetaError::InvalidConfig { key, reason } => CatalogError::InvalidConfig { key, reason },
        MetaError::InvalidRequest { reason } => CatalogError::InvalidRequest(reason),
        MetaError::GroupIdNotFound { group } => CatalogError::GroupIdNotFound(group),
        MetaError::InvalidGroupId { reason } => CatalogError::InvalidGroupId(reason),
        MetaError::OffsetMetadataTooLarge { len, max } => {
            CatalogError::OffsetMetadataTooLarge { len, max }
        }
        MetaError::NotLeader { .. }
        | MetaError::Timeout { .. }
        | MetaError::Network { .. }
        | MetaError::Membership { .. }
        | MetaError::ShuttingDown => CatalogError::Unavailable(text),
        // Replication, leadership and tiering errors: the gateway's catalog calls never
        // cause them, so seeing one is a bug worth an UNKNOWN_SERVER_ERROR and a log line.
        MetaError::UnknownAgent { .. }
        | MetaError::StaleRequest { .. }
        | MetaError::FencedLeaderEpoch { .. }
        | MetaError::NotPartitionLeader { .. }
        | MetaError::IneligibleReplica { .. }
        | MetaError::ElectionNotNeeded { .. }
        | MetaError::EligibleLeadersNotAvailable { .. }
        | MetaError::SegmentOverlap { .. }
        | MetaError::ProducerIdsExhausted
        | MetaError::Storage { .. }
        | MetaError::InvalidSettings { .. } => CatalogError::Internal(text),
    }
}

fn topic(t: metastore::TopicInfo) -> TopicMeta {
    TopicMeta {
        id: t.id,
        name: t.name,
        partitions: t
            .partitions
            .into_iter()
            .map(|p| PartitionMeta {
                index: p.index,
                leader: p.leader.map(|l| l as i32).unwrap_or(-1),
                leader_epoch: p.leader_epoch,
                replicas: p.replicas.into_iter().map(|r| r as i32).collect(),
                isr: p.isr.into_iter().map(|r| r as i32).collect(),
            })
            .collect(),
        configs: t.configs,
    }
}

/// [`Catalog`] over a running [`Metastore`].
pub struct MetastoreCatalog {
    ms: Metastore,
}

impl MetastoreCatalog {
    pub fn new(ms: Metastore) -> Self {
        MetastoreCatalog { ms }
    }
}

#[async_trait::async_trait]
impl Catalog for MetastoreCatalog {
    fn cluster_id(&self) -> String {
        self.ms.cluster().cluster_id
    }

    fn topics(&self) -> Vec<TopicMeta> {
        self.ms.topics().into_iter().map(topic).collect()
    }

    fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.ms.topic(name).map(topic)
    }

    fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta> {
        self.ms.topic_by_id(id).map(topic)
    }

    async fn create_topic(
        &self,
        t: NewTopic,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError> {
        let req = metastore::CreateTopic {
            name: t.name,
            partitions: t.partitions,
            replication_factor: t.replication_factor,
            configs: t.configs,
            assignments: Vec::new(),
        };
        self.ms
            .create_topic(req, validate_only)
            .await
            .map(topic)
            .map_err(from_meta)
    }

    async fn delete_topic(&self, name: &str) -> Result<TopicMeta, CatalogError> {
        self.ms
            .delete_topic(name)
            .await
            .map(topic)
            .map_err(from_meta)
    }

    async fn create_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError> {
        self.ms
            .create_partitions(name, total, validate_only)
            .await
            .map(topic)
            .map_err(from_meta)
    }

    async fn alter_configs(
        &self,
        name: &str,
        ops: Vec<ConfigOp>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError> {
        let ops = ops
            .into_iter()
            .map(|op| match op {
                ConfigOp::Set(k, v) => metastore::ConfigOp::Set(k, v),
                ConfigOp::Delete(k) => metastore::ConfigOp::Delete(k),
            })
            .collect();
        self.ms
            .alter_topic_configs(name, ops, replace_all, validate_only)
            .await
            .map(topic)
            .map_err(from_meta)
    }

    async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<((String, i32), CommittedOffset)>,
    ) -> Result<(), CatalogError> {
        let commits = offsets
            .into_iter()
            .map(|((t, p), o)| metastore::OffsetCommit {
                topic: t,
                partition: p,
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata,
                commit_time_ms: o.commit_time_ms,
            })
            .collect();
        let results = self
            .ms
            .commit_offsets(group, commits)
            .await
            .map_err(from_meta)?;
        // One failure fails the request: the handler has already vetted each entry.
        results.into_iter().try_for_each(|r| r.map_err(from_meta))
    }

    fn committed_offsets(&self, group: &str) -> BTreeMap<(String, i32), CommittedOffset> {
        self.ms
            .committed_offsets(group)
            .into_iter()
            .map(|(k, o)| {
                (
                    k,
                    CommittedOffset {
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: o.metadata,
                        commit_time_ms: o.commit_time_ms,
                    },
                )
            })
            .collect()
    }

    fn offset_groups(&self) -> Vec<String> {
        self.ms.groups()
    }

    async fn delete_group(&self, group: &str) -> Result<(), CatalogError> {
        match self.ms.delete_group(group).await {
            Ok(()) | Err(MetaError::GroupIdNotFound { .. }) => Ok(()),
            Err(e) => Err(from_meta(e)),
        }
    }

    async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), CatalogError> {
        self.ms
            .delete_offsets(group, partitions)
            .await
            .map(|_| ())
            .map_err(from_meta)
    }

    async fn allocate_producer_ids(&self, count: u32) -> Result<Range<i64>, CatalogError> {
        self.ms
            .allocate_producer_ids(count)
            .await
            .map_err(from_meta)
    }
}
