//! gateway: the Kafka wire front end of AeroStream.
//!
//! A request's path: a shard's [`server`] accepts the connection and reads a
//! size-capped frame ([`kafka::frame`]); [`kafka::api::dispatch`] decodes it
//! with `kafka-protocol` and calls the handler for that API; handlers reach
//! partition logs through [`partition::Partitions`] (one task per partition on
//! its owning shard, bounded channels) and cluster metadata through the
//! `metastore::Metastore` (writes through Raft, reads from the local
//! replica); consumer groups go through the
//! [`group::coordinator::Coordinator`] task that drives the pure
//! [`group::engine::GroupEngine`]. Responses are frames of parts so fetched
//! records are spliced in and, on plain TCP, sent with `sendfile(2)`.
//!
//! Partitions tier to object storage: the production log backend
//! ([`backend::tiered`]) wraps each storage log in a
//! `storage::tier::TieredPartition`, and a partition's handle reads below the
//! local log start from object storage ([`partition::PartitionHandle::read`]).
//!
//! Seams: [`backend::LogBackend`]/[`backend::LogFactory`] (the `storage`
//! crate, with or without tiering), and the metastore with its own types.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use gateway::backend::disk::DiskLogFactory;
//! use gateway::{Gateway, GatewayOptions};
//!
//! let meta = metastore::Metastore::start(metastore::MetastoreConfig::embedded("data/meta")).await?;
//! let logs = Arc::new(DiskLogFactory::new("data/log")?);
//! let gw = Gateway::start(GatewayOptions::default(), meta.clone(), logs).await?;
//! println!("Kafka clients connect to {}", gw.kafka_addr());
//! gw.shutdown().await;
//! # Ok(()) }
//! ```

pub mod alloc;
pub mod broker;
pub mod brokers;
pub mod codes;
pub mod connections;
pub mod console;
pub mod fetch_session;
pub mod forward;
pub mod http;
pub mod kafka;
pub mod kafka_tls;
pub mod native;
pub mod rest;
pub mod sasl;
pub mod server;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

mod gateway;

pub use crate::gateway::{Gateway, GatewayOptions, MetricsText};

// The gateway's own tests decode hostile frames too.
#[cfg(test)]
#[global_allocator]
static ALLOC: alloc::WireSafeAlloc = alloc::WireSafeAlloc;
