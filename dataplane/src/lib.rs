//! dataplane: what one agent does with records, whatever protocol brought
//! them.
//!
//! - [`partition`]: each partition's log is owned by one task on one
//!   [`shard`]; [`partition::Partitions`] finds or opens it, and
//!   [`partition::PartitionHandle`] is how everything else talks to it.
//!   [`partition::replication`] is the replication story in one folder:
//!   the pure engines that move the high watermark and the in-sync set
//!   ([`partition::replication::replica_set`]) and find where a follower's
//!   log parts from the leader's ([`partition::replication::divergence`]),
//!   the leader-to-follower fetch format ([`partition::replication::wire`])
//!   and the drivers that run them over the cluster's QUIC endpoint.
//! - [`backend`]: the log seam ([`backend::LogBackend`]) with its two
//!   backends, local segments and local segments sealed to object storage.
//! - [`group`]: the consumer group coordinator, a task driving the pure
//!   [`group::engine::GroupEngine`].
//! - [`node`]: one agent's data plane as the front ends hold it, and
//!   [`topics`]: the topic operations every front end shares.
//! - [`topic_config`]: topic settings, validated and turned into log settings.
//! - [`telemetry`]: latency histograms, per-partition counters, trace
//!   sampling and the Prometheus text format.
//!
//! The front ends (Kafka, native, REST) live in the `gateway` crate and
//! translate their wire formats to these types; nothing here depends on a
//! wire protocol or on HTTP, and Cargo enforces it: this crate depends on
//! `storage` and `metastore` only.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use dataplane::backend::disk::DiskLogFactory;
//! use dataplane::partition::Partitions;
//! use dataplane::topic_config;
//!
//! let logs = Arc::new(DiskLogFactory::new("data/log")?);
//! let partitions = Partitions::new(vec![tokio::runtime::Handle::current()], logs);
//! let topic = uuid::Uuid::new_v4();
//! // a topic with no settings of its own, on the broker's defaults
//! let settings = || topic_config::log_settings(&Default::default(), &Default::default());
//! let handle = partitions.get_or_open("orders", topic, 0, settings).await?;
//! println!("log end offset: {}", handle.position().await?.log_end);
//! # Ok(()) }
//! ```

pub mod backend;
pub mod fetch;
pub mod group;
pub mod node;
pub mod partition;
pub mod shard;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topic_config;
pub mod topics;
pub mod traffic;
