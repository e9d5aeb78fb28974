//! Topics: creation, deletion, effective configs and the offsets of a
//! partition: one implementation for every front end (Kafka's
//! CreateTopics/DeleteTopics/DescribeConfigs, `/v1/topics`, the native
//! protocol), so they cannot disagree on what an operation does.

use std::collections::BTreeMap;

use metastore::{AgentId, CreateTopic, Manifests, MetaError, TopicInfo, Topics};

use crate::node::{Node, Unavailable};
use crate::partition::OffsetQuery;
use crate::topic_config::{self, ConfigType};

/// A topic to create. `None` takes the broker's default (`num.partitions`,
/// `default.replication.factor`); explicit `assignments` (replicas per
/// partition, in partition order) name both counts themselves.
#[derive(Debug, Clone, Default)]
pub struct NewTopic {
    pub name: String,
    pub partitions: Option<i32>,
    pub replication_factor: Option<i16>,
    pub configs: BTreeMap<String, String>,
    pub assignments: Vec<Vec<AgentId>>,
}

/// A topic created (or, with `validate_only`, one that would be).
#[derive(Debug, Clone)]
pub struct Created {
    pub topic: TopicInfo,
    pub replication_factor: i16,
}

/// Creates a topic through the metastore; with `validate_only` only checks
/// that it could be created.
pub async fn create_topic(
    node: &Node,
    t: NewTopic,
    validate_only: bool,
) -> Result<Created, MetaError> {
    let explicit = !t.assignments.is_empty();
    let partitions = if explicit {
        i32::try_from(t.assignments.len()).unwrap_or(i32::MAX)
    } else {
        t.partitions.unwrap_or(node.config.num_partitions)
    };
    let replication_factor = match t.assignments.first() {
        Some(replicas) => i16::try_from(replicas.len()).unwrap_or(i16::MAX),
        None => t
            .replication_factor
            .unwrap_or_else(|| node.default_replication_factor()),
    };
    // explicit assignments name the partitions and replicas themselves
    let (spec_partitions, spec_rf) = if explicit {
        (-1, -1)
    } else {
        (partitions, replication_factor)
    };
    let spec = CreateTopic {
        name: t.name.clone(),
        partitions: spec_partitions,
        replication_factor: spec_rf,
        configs: t.configs,
        assignments: t.assignments,
    };
    let topic = node.catalog.create_topic(spec, validate_only).await?;
    if !validate_only {
        tracing::info!(topic = %t.name, partitions, "created topic");
    }
    Ok(Created {
        topic,
        replication_factor,
    })
}

/// Deletes a topic from the metastore, then closes and removes its local
/// partition logs.
pub async fn delete_topic(node: &Node, topic: &TopicInfo) -> Result<(), MetaError> {
    node.catalog.delete_topic(&topic.name).await?;
    let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    node.partitions
        .remove_topic(&topic.name, topic.id, partitions)
        .await;
    tracing::info!(topic = %topic.name, "deleted topic");
    Ok(())
}

/// Where a config's effective value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on the topic.
    Topic,
    /// The default (Kafka's, or this broker's for keys AeroStream adds).
    Default,
}

/// One topic config with its effective value.
#[derive(Debug, Clone)]
pub struct ConfigEntry {
    pub name: &'static str,
    pub value: String,
    pub default: String,
    pub source: ConfigSource,
    pub kind: ConfigType,
}

/// The default of a topic config on this broker: the catalogue's, except for
/// keys whose default is a broker setting.
fn broker_default(node: &Node, d: &topic_config::ConfigDef) -> &'static str {
    if d.name == topic_config::WRITE_CACHING {
        if node.config.log_defaults.write_caching {
            "true"
        } else {
            "false"
        }
    } else {
        d.default
    }
}

/// Every config a topic has, in catalogue order, with its effective value.
pub fn topic_configs(node: &Node, t: &TopicInfo) -> Vec<ConfigEntry> {
    topic_config::catalogue()
        .iter()
        .map(|d| {
            let default = broker_default(node, d);
            let (value, source) = match t.configs.get(d.name) {
                Some(v) => (v.clone(), ConfigSource::Topic),
                None => (default.to_string(), ConfigSource::Default),
            };
            ConfigEntry {
                name: d.name,
                value,
                default: default.to_string(),
                source,
                kind: d.kind,
            }
        })
        .collect()
}

/// The offsets of a partition this agent leads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartitionOffsets {
    /// The first offset across tiers.
    pub log_start: i64,
    /// The first offset on local disk.
    pub local_log_start: i64,
    /// The first offset in object storage, when object storage holds
    /// offsets below the local start.
    pub tiered_start: Option<i64>,
    /// The next offset to be written.
    pub log_end: i64,
    /// The last committed offset plus one: what consumers may read up to.
    pub high_watermark: i64,
    /// Bytes of record data on the leader's local disk.
    pub local_bytes: u64,
    /// Where compaction stands, for a compacted topic's partition.
    pub cleaner: Option<CleanerView>,
}

/// A compacted partition's cleaner figures, as the leader's log reports them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerView {
    /// Bytes of sealed segments written since they were last compacted,
    /// over the bytes of sealed segments (0 when there are none).
    pub dirty_ratio: f64,
    pub dirty_bytes: u64,
    pub compactable_bytes: u64,
    /// Every offset below this was compacted at least once.
    pub compacted_below: u64,
    /// Since the log was opened: runs, bytes and records removed.
    pub runs: u64,
    pub bytes_removed: u64,
    pub records_removed: u64,
}

/// Bytes of a partition's segments in object storage, as the metastore
/// records them (any agent knows this; segment objects only, not their
/// index objects).
pub fn tiered_bytes(node: &Node, topic: &TopicInfo, index: i32) -> u64 {
    node.catalog
        .segments(topic.id, index)
        .iter()
        .map(|s| s.size)
        .sum()
}

/// The offsets of partition `index`, opening its log if need be. Only the
/// leader knows them: other agents answer [`Unavailable::NotLeader`].
pub async fn partition_offsets(
    node: &Node,
    topic: &TopicInfo,
    index: i32,
) -> Result<PartitionOffsets, Unavailable> {
    let h = node.partition(topic, index).await?;
    let (log_start, high_watermark) = h.bounds().await.map_err(Unavailable::Log)?;
    let local_log_start = h
        .offsets(OffsetQuery::EarliestLocal)
        .await
        .map_err(Unavailable::Log)?
        .map_or(log_start, |o| o.offset);
    let log_end = *h.log_end().borrow();
    let local_bytes = h.local_bytes().await.map_err(Unavailable::Log)?;
    let c = &h.stats().cleaner;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let compacted = crate::topic_config::is_compacted(&topic.configs);
    let cleaner = compacted.then(|| CleanerView {
        dirty_ratio: if load(&c.compactable_bytes) == 0 {
            0.0
        } else {
            load(&c.dirty_bytes) as f64 / load(&c.compactable_bytes) as f64
        },
        dirty_bytes: load(&c.dirty_bytes),
        compactable_bytes: load(&c.compactable_bytes),
        compacted_below: load(&c.compacted_below),
        runs: load(&c.runs),
        bytes_removed: load(&c.bytes_removed),
        records_removed: load(&c.records_removed),
    });
    Ok(PartitionOffsets {
        log_start,
        local_log_start,
        tiered_start: (log_start < local_log_start).then_some(log_start),
        log_end,
        high_watermark,
        local_bytes,
        cleaner,
    })
}
