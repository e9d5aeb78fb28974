//! One agent's data plane as the front ends see it: the catalog, the
//! partitions this agent opened, its group coordinator, and the few
//! decisions every front end makes the same way (does this agent lead a
//! partition, does it coordinate a group, which producer id comes next,
//! how a topic is auto-created).
//!
//! A front end holds a [`Node`] (or just the handle inside it it needs) and
//! translates its own wire format to these calls; the Kafka, native and REST
//! front ends therefore cannot disagree on what "leads" or "auto-create"
//! means.

use std::ops::Range;
use std::sync::Arc;

use metastore::coordinators::SlotFence;
use metastore::{
    AgentId, ClusterControl, CreateTopic, Groups, MetaError, Metastore, PartitionInfo, TopicInfo,
    Topics,
};
use tokio::sync::Mutex as AsyncMutex;

use crate::backend::LogError;
use crate::group::coordinator::Coordinator;
use crate::partition::replication::manager::{ReplicaManager, ReplicationSettings};
use crate::partition::{PartitionHandle, Partitions};
use crate::topic_config::{self, LogDefaults};

/// Number of producer ids fetched from the catalog at a time.
const PRODUCER_ID_BLOCK: u32 = 1000;

/// The settings a node decides with (Kafka's server.properties
/// equivalents that are not about a wire protocol).
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub node_id: i32,
    /// `num.partitions` for auto-created topics.
    pub num_partitions: i32,
    /// `default.replication.factor`; -1 means three, or the number of live
    /// agents when fewer.
    pub default_replication_factor: i16,
    /// Broker-wide defaults of topic settings Kafka does not define.
    pub log_defaults: LogDefaults,
}

/// Why a partition cannot be served here.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("the partition does not exist")]
    UnknownPartition,
    #[error("this node does not lead the partition")]
    NotLeader,
    #[error(transparent)]
    Log(LogError),
}

/// Where a group (or a transactional id) is coordinated, as this agent's
/// metastore replica says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupHome {
    /// This agent holds the key's coordinator slot, at this fence.
    Here(SlotFence),
    /// Another agent holds it.
    Elsewhere(AgentId),
    /// No agent holds slots yet (no agent has registered).
    Unassigned,
}

/// One agent's data plane.
pub struct Node {
    pub config: NodeConfig,
    /// Topics, configs, committed offsets and producer ids: the metastore
    /// (writes through Raft, reads from the local replica).
    pub catalog: Metastore,
    pub partitions: Arc<Partitions>,
    pub groups: Coordinator,
    producer_ids: AsyncMutex<Range<i64>>,
    /// Serialises topic auto-creation so concurrent requests create once.
    create_lock: AsyncMutex<()>,
}

impl Node {
    pub fn new(
        config: NodeConfig,
        catalog: Metastore,
        partitions: Arc<Partitions>,
        groups: Coordinator,
    ) -> Self {
        Node {
            config,
            catalog,
            partitions,
            groups,
            producer_ids: AsyncMutex::new(0..0),
            create_lock: AsyncMutex::new(()),
        }
    }

    /// This node's id as the metastore spells it (node ids are never
    /// negative: the binary refuses one at start).
    pub fn agent_id(&self) -> AgentId {
        u64::try_from(self.config.node_id).unwrap_or(u64::MAX)
    }

    /// A fresh producer id, from the current block or a newly allocated one.
    pub async fn next_producer_id(&self) -> Result<i64, MetaError> {
        let mut ids = self.producer_ids.lock().await;
        if ids.is_empty() {
            *ids = self
                .catalog
                .allocate_producer_ids(PRODUCER_ID_BLOCK)
                .await?;
        }
        ids.next().ok_or(MetaError::ProducerIdsExhausted)
    }

    /// The task of a topic's partition, opening its log on first use. This
    /// node must lead the partition: an agent whose lease lapsed, or that was
    /// never given the partition, answers NOT_LEADER_OR_FOLLOWER.
    pub async fn partition(
        &self,
        topic: &TopicInfo,
        index: i32,
    ) -> Result<PartitionHandle, Unavailable> {
        let meta = usize::try_from(index)
            .ok()
            .and_then(|i| topic.partitions.get(i))
            .ok_or(Unavailable::UnknownPartition)?;
        if !self.leads(meta) {
            return Err(Unavailable::NotLeader);
        }
        self.partitions
            .get_or_open(&topic.name, topic.id, index, || {
                topic_config::log_settings(&topic.configs, &self.config.log_defaults)
            })
            .await
            .map_err(Unavailable::Log)
    }

    /// Where `key` is coordinated: the holder of its coordinator slot.
    pub fn group_home(&self, key: &str) -> GroupHome {
        match self.catalog.coordinator(key) {
            None => GroupHome::Unassigned,
            Some(p) if p.holder.agent == self.agent_id() => GroupHome::Here(p.fence()),
            Some(p) => GroupHome::Elsewhere(p.holder.agent),
        }
    }

    /// Whether this node leads the partition (holds its lease).
    pub fn leads(&self, p: &PartitionInfo) -> bool {
        p.leader
            .is_some_and(|l| i64::try_from(l) == Ok(i64::from(self.config.node_id)))
    }

    /// The replication factor of topics created without one.
    pub fn default_replication_factor(&self) -> i16 {
        if self.config.default_replication_factor > 0 {
            return self.config.default_replication_factor;
        }
        let live = self.catalog.agents().iter().filter(|a| !a.fenced).count();
        i16::try_from(live.clamp(1, 3)).unwrap_or(1)
    }

    /// Creates a topic the way Kafka's auto-creation does (default partitions
    /// and replication factor), unless it appeared meanwhile.
    pub async fn auto_create(&self, name: &str) -> Result<Arc<TopicInfo>, MetaError> {
        let _guard = self.create_lock.lock().await;
        if let Some(t) = self.catalog.topic(name) {
            return Ok(t);
        }
        let topic = CreateTopic {
            name: name.to_string(),
            partitions: self.config.num_partitions,
            replication_factor: self.default_replication_factor(),
            configs: Default::default(),
            assignments: Vec::new(),
        };
        match self.catalog.create_topic(topic, false).await {
            Ok(t) => {
                tracing::info!(topic = name, "auto-created topic");
                Ok(Arc::new(t))
            }
            Err(MetaError::TopicAlreadyExists { .. }) => {
                self.catalog
                    .topic(name)
                    .ok_or_else(|| MetaError::UnknownTopic {
                        name: name.to_string(),
                    })
            }
            Err(e) => Err(e),
        }
    }

    /// Replicates partitions with the other agents of the cluster: serves
    /// followers' fetches on the metastore's cluster endpoint (which must
    /// offer [`crate::partition::replication::service::ALPN`]) and keeps
    /// every local replica leading or following as the metastore says.
    /// Partitions opened from now on refuse writes until their role is known.
    pub fn start_replication(
        &self,
        settings: ReplicationSettings,
    ) -> Result<ReplicaManager, MetaError> {
        let me = u64::try_from(self.config.node_id).map_err(|_| MetaError::InvalidSettings {
            reason: "a node id must not be negative".into(),
        })?;
        ReplicaManager::start(
            me,
            self.catalog.clone(),
            self.partitions.clone(),
            self.config.log_defaults.clone(),
            settings,
        )
    }

    /// Opens (recovers) every partition this node leads, so segments sealed
    /// but not yet uploaded before a restart go up without waiting for a
    /// client. Returns how many opened.
    pub async fn open_led_partitions(&self) -> usize {
        let mut opened = 0;
        for topic in self.catalog.topics() {
            for p in &topic.partitions {
                if !self.leads(p) {
                    continue;
                }
                match self.partition(&topic, p.index).await {
                    Ok(_) => opened += 1,
                    Err(e) => {
                        tracing::warn!(topic = %topic.name, partition = p.index, error = %e, "could not open a partition at start")
                    }
                }
            }
        }
        opened
    }
}
