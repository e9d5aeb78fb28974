//! The native protocol on a real socket over the real backends (disk logs,
//! and logs sealed to object storage), spoken frame by frame with the
//! protocol types: every operation, pipelining, interoperation with the
//! Kafka listener, and bad frames; over TCP and over QUIC (the same
//! scenario on both, streams, TLS trust, connection limits).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod groups;
mod logins;
mod operations;
mod quic;
mod stalled_logins;
mod subscriptions;
mod support;
mod transactions;
