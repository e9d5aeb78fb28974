//! gateway: AeroStream's front ends. Each translates its wire format to
//! the data plane's calls (the `dataplane` crate) and answers in its own
//! terms; nothing below this crate knows a wire protocol or HTTP.
//!
//! - The Kafka listener: a shard's [`server`] accepts the connection and
//!   reads a size-capped frame ([`kafka::frame`]); [`kafka::api::dispatch`]
//!   decodes it with `kafka-protocol` and calls the handler for that API
//!   (one file per API under `kafka/api/`). Handlers reach partitions and
//!   groups through the broker's [`dataplane::node::Node`], and
//!   [`codes`] maps every data-plane error to one Kafka code. Responses are
//!   frames of parts, so fetched records are spliced in and, on plain TCP,
//!   sent with `sendfile(2)`.
//! - The native protocol over TCP and QUIC ([`native`]), one file per
//!   operation under `native/ops/`, served on the Kafka handlers.
//! - The HTTP port ([`http`]): health, metrics, the REST API ([`rest`]) and
//!   the web console ([`console`]).
//! - Load-balancer mode's forwarding between agents ([`forward`]).
//! - SASL exchanges ([`sasl`]) and TLS ([`kafka_tls`]); the login checks
//!   themselves are the `security` crate's.
//!
//! [`broker::Broker`] is what every connection shares: the node's data plane
//! and the front ends' own state (fetch sessions, connection limits, request
//! metrics, the forwarder).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use dataplane::backend::disk::DiskLogFactory;
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
pub mod client_zone;
pub mod codes;
pub mod connections;
pub mod console;
pub mod cost;
pub mod cross_zone;
pub mod fenced;
pub mod fetch_session;
pub mod forward;
pub mod http;
pub mod kafka;
pub mod kafka_tls;
pub mod logins;
pub mod native;
pub mod rest;
pub mod sasl;
pub mod server;
pub mod shutdown;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

mod gateway;

pub use crate::gateway::{Gateway, GatewayOptions, MetricsText};

// The gateway's own tests decode hostile frames too.
#[cfg(test)]
#[global_allocator]
static ALLOC: alloc::WireSafeAlloc = alloc::WireSafeAlloc;
