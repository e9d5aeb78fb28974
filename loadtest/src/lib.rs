//! `loadtest`: an OpenMessaging-Benchmark-style load generator for
//! Kafka-wire brokers and AeroStream's native protocol, used to measure
//! AeroStream side by side with other brokers on the same machine, and its
//! ways in (Kafka wire, native TCP, native QUIC) side by side.
//!
//! A run follows a [`workload::Workload`] (one topic with P partitions, N
//! producers at a fixed total rate or `max`, M consumers in one group,
//! message size, acks, linger, batch size, compression, warm-up and
//! measurement durations). It measures publish latency (send call to
//! acknowledgement) and end-to-end latency (send time written into the
//! payload to consumer receipt) in HDR histograms, and audits delivery: every
//! acknowledged message must reach a consumer with its bytes intact.
//!
//! Seams:
//! - [`driver::Driver`] is how the runner reaches a broker. The Kafka
//!   driver uses librdkafka (the `rdkafka` crate) so the figures do not
//!   depend on AeroStream's own protocol code; the native driver
//!   ([`driver::native`]) uses the `sdk` crate over the native protocol.
//!   `loadtest run --driver kafka|native` picks one; results record the
//!   way in (`kafka`, `native-tcp`, `native-quic`).
//! - [`mock_broker`] runs librdkafka's built-in mock cluster as the floor:
//!   a broker that does the least possible work, to measure what the load
//!   generator itself costs (`loadtest mock-broker`).
//! - Pacing and the `max`-rate search ([`rate`]) are pure: time is passed
//!   in, so they are tested without sleeping.
//!
//! ```no_run
//! use std::sync::Arc;
//! use loadtest::{driver::kafka::KafkaDriver, runner, workload::Workload};
//!
//! # fn main() -> Result<(), loadtest::error::LoadError> {
//! let w = Workload::from_file("loadtest/workloads/small-20k.yaml".as_ref())?;
//! let driver = Arc::new(KafkaDriver::new("127.0.0.1:9092", &w));
//! let opts = runner::RunOptions::new(w, "aerostream", "127.0.0.1:9092");
//! let result = runner::run(driver, &opts, &mut |line| println!("{line}"))?;
//! println!("{}", loadtest::report::summary_text(&result));
//! assert!(result.verdict.delivery_ok);
//! # Ok(()) }
//! ```

pub mod compare;
pub mod driver;
pub mod error;
pub mod ledger;
pub mod mock_broker;
pub mod payload;
pub mod probe;
pub mod procstat;
pub mod rate;
pub mod report;
pub mod runner;
pub mod stats;
pub mod workload;
