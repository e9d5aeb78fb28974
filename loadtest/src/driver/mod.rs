//! The driver seam: how the runner talks to a broker. A driver creates the
//! topic and hands out producer and consumer clients; clients report every
//! acknowledgement and every received message to their probe. Two drivers
//! implement the three traits: [`kafka::KafkaDriver`] (librdkafka over the
//! Kafka wire) and [`native::NativeDriver`] (the `sdk` crate over
//! AeroStream's native protocol). [`bootstrap`] pairs `loadtest run
//! --driver` with its `--bootstrap` address.
//!
//! Contract for implementations:
//! - `ProducerClient::send` never blocks for long: when the client's queue
//!   is full it returns [`SendOutcome::Full`] and the runner retries.
//! - Every message `send` accepted is reported exactly once to
//!   [`ProducerProbe::on_ack`], with success or the failure text, by the
//!   time `flush` returns 0 pending (or when the client is dropped).
//! - `ConsumerClient::poll` passes each record's value to
//!   [`ConsumerProbe::on_message`] and reports partition assignment changes
//!   through [`ConsumerProbe::on_assignment`].

use std::sync::Arc;
use std::time::Duration;

use crate::error::LoadError;
use crate::probe::{ConsumerProbe, ProducerProbe};

pub mod bootstrap;
pub mod kafka;
pub mod native;

/// Whether the client took the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    Queued,
    /// The client's local queue is full; try again shortly.
    Full,
}

/// Topic shape a run needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u16,
    /// Create it (false: it must already exist).
    pub create: bool,
    /// Topic configs to set at creation.
    pub configs: std::collections::BTreeMap<String, String>,
}

/// A way of reaching a broker.
pub trait Driver: Send + Sync {
    /// Short name for reports, e.g. `kafka`.
    fn name(&self) -> &'static str;
    /// Makes the topic exist and waits until every partition has a leader.
    fn prepare_topic(&self, topic: &TopicSpec) -> Result<(), LoadError>;
    /// Removes a topic the run created.
    fn delete_topic(&self, topic: &str) -> Result<(), LoadError>;
    fn producer(
        &self,
        topic: &str,
        probe: Arc<ProducerProbe>,
    ) -> Result<Box<dyn ProducerClient>, LoadError>;
    fn consumer(
        &self,
        topic: &str,
        group: &str,
        probe: Arc<ConsumerProbe>,
    ) -> Result<Box<dyn ConsumerClient>, LoadError>;
}

/// One producer connection.
pub trait ProducerClient: Send {
    fn send(&mut self, payload: &[u8]) -> Result<SendOutcome, LoadError>;
    /// Waits up to `timeout` for every accepted message to be acknowledged
    /// or failed; returns how many are still outstanding.
    fn flush(&mut self, timeout: Duration) -> u64;
}

/// One consumer in the run's group.
pub trait ConsumerClient: Send {
    /// Waits up to `timeout` for records and reports them to the probe.
    fn poll(&mut self, timeout: Duration);
}
