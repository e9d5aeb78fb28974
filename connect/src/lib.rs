//! The built-in Kafka Connect engine.
//!
//! Every agent serves Connect's REST API (as Apache Kafka 4.x defines it)
//! and runs a worker. Connector configs, target states (running, paused,
//! stopped), task statuses and source offsets are durable in the
//! metastore, so every agent answers the same; the tasks of every
//! connector are spread over the live agents, and move when an agent
//! comes or goes. Tasks move records through the native client (`sdk`):
//! a source task produces with acks=all and commits its offsets once they
//! are acknowledged, a sink task is a member of the consumer group
//! `connect-<name>` and commits its group offsets once what it wrote is
//! durable (at-least-once; the object-storage sink names its files by
//! their first offset, so a rewrite after a crash replaces a file rather
//! than adding one).
//!
//! Built-in connectors, named by short class names as Connect's aliases
//! are: `DatagenSource` ([`source::datagen`]), `HttpSource`
//! ([`source::http`]), `PostgresSource` ([`source::postgres`]),
//! `ObjectStoreSink` ([`sink::object_store`]), `HttpSink` ([`sink::http`])
//! and `PostgresSink` ([`sink::postgres`]); what the PostgreSQL connectors
//! share is in [`postgres`].
//! Keys and values go through the converters of [`convert`]: JSON, string
//! and bytes, and Avro, Protobuf and JSON Schema through the schema
//! registry.

pub mod config;
pub mod convert;
pub mod metrics;
pub mod plugins;
pub mod postgres;
pub mod record;
pub mod rest;
mod runner;
pub mod sink;
pub mod source;
pub mod worker;

pub use runner::group_of;
pub use worker::{Worker, WorkerConfig};
