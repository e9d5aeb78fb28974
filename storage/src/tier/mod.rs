//! Tiered storage: sealed segments go to object storage, and offsets no
//! longer on local disk are read back from it.
//!
//! Role: local disk holds the recent tail of each partition; object storage
//! holds every sealed segment (its `.seg`, `.idx` and `.tix` objects, and
//! the `.producers` snapshot of idempotent producer state at its end, keyed
//! as `cache::layout` says), recorded in a [`Manifest`] (the metastore in
//! production). This module makes that happen without ever losing an
//! acknowledged record:
//! - [`engine::UploaderEngine`] (pure: events in with `now`, actions out)
//!   decides what to upload, commit and retry, and how far each partition
//!   may delete locally;
//! - [`Tier`] is the service: its driver task performs the engine's actions
//!   on the control-plane runtime, runs retention across both tiers, and
//!   serves cold reads through [`cache::ColdCache`];
//! - [`TieredPartition`] wraps a partition's [`crate::PartitionLog`] on its
//!   owning task: it reports sealed segments, applies `local.retention.*`
//!   below what the manifest serves (whichever agent uploaded it: in a
//!   cluster only the partition's leader does), and refuses appends (retriably) when data not
//!   yet uploaded fills the node's [`DiskBudget`]. Every call the owner
//!   makes (append, reads, timestamp lookups, flush, sync points, config)
//!   is a method of it; [`latest_max_timestamp`] merges MAX_TIMESTAMP
//!   answers across tiers.
//!
//! Module layering (no cycles): `shared` (what a partition shares with the
//! uploader) and `link` (the driver's messages and registry) sit below
//! `partition` and `retention`, which sit below `driver`.
//!
//! Seams: [`Manifest`] (metastore or [`MemoryManifest`]) and
//! [`cache::ObjectStoreHandle`] (any backend, or a fault-injecting wrapper).
//!
//! ```no_run
//! # async fn demo(log: storage::PartitionLog) -> Result<(), storage::tier::TierError> {
//! use std::sync::Arc;
//! use storage::tier::{MemoryManifest, PartitionKey, Tier, TierConfig, TierRetention};
//!
//! let store = cache::ObjectStoreHandle::in_memory();
//! let cache = cache::ColdCache::open(cache::CacheConfig::default(), store.clone()).await?;
//! let tier = Tier::start(TierConfig::default(), store, cache, Arc::new(MemoryManifest::new()));
//! let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
//! let mut partition = tier.open_partition(key, log, TierRetention::default())?;
//! // ... partition.append(..), partition.tick(now) on the partition's task;
//! // tier.read(key, offset, max_bytes).await for offsets below the local start.
//! partition.close()?;
//! tier.shutdown().await;
//! # Ok(()) }
//! ```

pub mod budget;
pub mod cold;
mod driver;
pub mod engine;
mod error;
mod link;
pub mod manifest;
#[cfg(any(test, feature = "testing"))]
pub mod manifest_suite;
mod metrics;
pub mod pack;
mod partition;
mod producers;
mod retention;
mod shared;
mod sidecar;
mod txn_index;
pub mod wal;

pub use budget::DiskBudget;
pub use cold::{latest_max_timestamp, ColdRead, ColdReader};
pub use driver::{Tier, TierConfig};
pub use engine::{EngineConfig, SealedSegment, UploaderEngine};
pub use error::TierError;
pub use manifest::{
    Manifest, ManifestError, MemoryManifest, ObjectPlace, PackedAt, TieredSegment, TopicToPurge,
};
pub use metrics::{TierMetrics, TierSnapshot};
pub use pack::PackConfig;
pub use partition::TieredPartition;
pub use retention::{expired_below, DeleteMode};
pub use shared::{PartitionShared, TierRetention};

/// A partition of a topic, named by the topic's id (names can be reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    pub topic_id: uuid::Uuid,
    pub partition: i32,
}

impl PartitionKey {
    pub fn new(topic_id: uuid::Uuid, partition: i32) -> Self {
        PartitionKey {
            topic_id,
            partition,
        }
    }
}
