//! Partition replication between agents.
//!
//! The leader of a partition appends producer batches to its local log;
//! its followers fetch those batches over the cluster's QUIC endpoint and
//! append them unchanged (`storage::PartitionLog::append_replicated`). What
//! the leader learns from their fetches moves the partition's high
//! watermark and its in-sync replica set: [`replica_set`] holds those rules
//! as a pure engine, run by each partition's task; [`divergence`] tells a
//! follower where its log parts from the leader's. [`wire`] is the fetch
//! format, [`service`] the leader's side, [`fetcher`] the follower's, and
//! [`manager`] keeps every local replica in the role the metastore gives
//! it. docs/cluster.md describes the whole design.

pub mod divergence;
pub mod fetcher;
pub mod manager;
pub mod rebuild;
pub mod replica_set;
pub mod service;
pub mod wire;
