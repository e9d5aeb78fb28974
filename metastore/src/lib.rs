//! The AeroStream metastore: cluster metadata replicated with Raft.
//!
//! Gateways hold no state of their own because the metastore holds the
//! truth: which topics exist and how they are configured, which agent leads
//! each partition under which epoch, which offsets live in which sealed
//! object and below which offset a partition's records are deleted, what
//! each consumer group has committed, which producer ids are taken. It runs as one node embedded in the agent by default, and as three
//! or five voters (plus read-only learners) in a cluster.
//!
//! # Layers
//!
//! - [`types`], [`topic_config`]: the data model as plain data, and the
//!   catalogue of Kafka topic configs with defaults and validation (topic
//!   names too).
//! - [`state`]: the state machine. [`command::Command`]s are validated and
//!   applied here without IO or clock, each returning a typed [`MetaError`].
//! - [`lease`]: the lease engine (pure; each agent's silence handed in)
//!   that fences silent agents and re-elects partition leaders from the
//!   ISR. `liveness` is how the Raft leader measures that silence: agents'
//!   heartbeats are requests to it, timed on its monotonic clock and not
//!   logged.
//! - [`coordinators`], [`coordinator_plan`]: which agent coordinates which
//!   consumer groups (coordinator slots with epochs that fence a moved
//!   coordinator's writes), and the pure planner that moves slots off
//!   failed agents and onto new ones.
//! - `store`: openraft storage: a CRC'd, segmented, group-committed Raft
//!   log and a snapshotted state machine on disk.
//! - [`network`]: Raft RPCs and forwarded client requests over QUIC with
//!   mutual TLS (each node id bound to its certificate; [`network::certs`]
//!   makes them), or over an in-process router in tests; behind one
//!   `Transport` seam.
//! - [`Metastore`]: the handle: linearizable writes routed to the leader and
//!   batched there, local reads with a staleness bound, a change stream. Its
//!   operations come in facets, one trait each: [`Topics`], [`Groups`],
//!   [`Security`], [`ClusterControl`], [`Manifests`].
//!
//! # Features
//!
//! - `testing`: test machinery, never in release builds: link fault
//!   injection (`NetworkFaults`, `ClusterControl::fault_injection`) and the
//!   in-process transport (`Transport::InProcess`, `LocalRouter`).
//! - `bench`: the `metabench` binary and its dependencies.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), metastore::MetaError> {
//! use metastore::{AgentAddrs, AgentRegistration, CreateTopic, Metastore, MetastoreConfig};
//! use metastore::{ClusterControl, Topics};
//!
//! let ms = Metastore::start(MetastoreConfig::embedded("data/meta")).await?;
//! let mut changes = ms.subscribe();
//! ms.register_agent(AgentRegistration {
//!     id: 1,
//!     addrs: AgentAddrs { kafka: Some("127.0.0.1:9092".into()), ..Default::default() },
//!     rack: None,
//!     instance: None,
//! })
//! .await?;
//! let topic = ms.create_topic(CreateTopic::new("orders", 3, -1), false).await?;
//! assert_eq!(topic.partitions[0].leader, Some(1));
//! assert!(ms.topic("orders").is_some()); // read locally, already applied
//! let _event = changes.recv().await; // AgentRegistered, then TopicCreated
//! ms.shutdown().await?;
//! # Ok(())
//! # }
//! ```

pub mod acl;
mod api;
pub mod balance;
pub mod command;
pub mod connect;
pub mod coordinator_plan;
pub mod coordinators;
pub mod error;
pub mod lease;
mod lease_driver;
mod liveness;
pub mod network;
mod node;
pub mod options;
pub mod processors;
mod proposer;
pub mod quota;
pub mod raft_types;
pub mod registry;
pub mod state;
mod store;
pub mod topic_config;
pub mod transactions;
pub mod types;

pub use api::{
    AgentKeepAlive, ClusterControl, Groups, Manifests, Metastore, Security, Topics, Transactions,
};
pub use error::MetaError;
pub use lease_driver::new_cluster_id;
pub use network::certs::{ClusterCa, NodeCertificate};
#[cfg(any(test, feature = "testing"))]
pub use network::local::LocalRouter;
pub use network::quic::QuicSettings;
pub use network::tls::RaftTls;
#[cfg(any(test, feature = "testing"))]
pub use network::NetworkFaults;
pub use options::{
    agent_heartbeat_interval, agent_suspect_after, Bootstrap, MetastoreConfig, RaftTiming,
    Transport, DEFAULT_AGENT_LEASE,
};
pub use types::*;
