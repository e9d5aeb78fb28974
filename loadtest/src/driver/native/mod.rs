//! The native driver: AeroStream's own protocol through the Rust SDK
//! (`sdk` crate), so the same workloads measure the broker as native
//! clients see it, next to the Kafka wire ([`super::kafka`]).
//!
//! Shape, as in the Kafka driver: one SDK [`Client`] (one connection per
//! server) per producer and per consumer.
//!
//! # Runtimes
//!
//! The driver traits are synchronous; the SDK is async. [`RuntimeMode`]
//! says where the SDK's tasks run:
//! - [`RuntimeMode::Shared`] (the default, one worker): one multi-thread
//!   tokio runtime owned by the driver for every client of the run;
//!   consumers are polled from the runner's poll threads, their I/O driven
//!   by the worker.
//! - [`RuntimeMode::PerClient`]: a current-thread runtime per client. A
//!   consumer's runtime is driven by the runner's own poll thread (its
//!   `poll` is the runtime's `block_on`: fetch answers never cross threads);
//!   a producer's runtime gets a thread of its own, since the runner's send
//!   loop sleeps between sends.
//!
//! With the load generator pinned to one core, one shared worker costs the
//! least CPU per message (see [`RuntimeMode::default`]): fewer threads to
//! wake per send and per answer.
//!
//! # Producers
//!
//! `send` copies the payload into a record and hands it to the SDK
//! producer with a delivery callback (`Producer::send_with`: queued at
//! once, no future per record), which reports the answer to the probe on
//! the SDK's background task. Sends beyond `queue.buffering.max.messages` (default
//! 100 000, as librdkafka) or `queue.buffering.max.kbytes` (default 1 GiB)
//! still unanswered return [`SendOutcome::Full`]; the SDK's own buffer is
//! sized so that it never makes a send wait.
//!
//! Workload settings and the Kafka client properties of `producer_config`
//! that have a native equivalent map to [`ProducerConfig`]:
//!
//! | workload / property                               | `ProducerConfig`                      |
//! |---------------------------------------------------|---------------------------------------|
//! | `acks` (`acks`, `request.required.acks`)          | `acks`                                |
//! | `linger_ms` (`linger.ms`, `queue.buffering.max.ms`) | `linger`                            |
//! | `batch_size` (`batch.size`)                       | `batch_bytes`                         |
//! | `compression` (`compression.type`, `compression.codec`) | `compression`                   |
//! | `enable.idempotence` (default false, as librdkafka) | `idempotent`                        |
//! | `request.timeout.ms`                              | `request_timeout`                     |
//! | `retries`, `message.send.max.retries`             | `retries`                             |
//! | `retry.backoff.ms`, `retry.backoff.max.ms`        | `retry_backoff`, `retry_backoff_max`  |
//! | `queue.buffering.max.kbytes`                      | `buffer_bytes` and the send bound     |
//! | `queue.buffering.max.messages`                    | the send bound (no SDK setting)       |
//! | `message.max.bytes`                               | `max_request_bytes`                   |
//!
//! No native equivalent (ignored, and listed by [`NativeDriver::notes`]):
//! `batch.num.messages` (the SDK caps batches by bytes only),
//! `message.timeout.ms` / `delivery.timeout.ms` (the SDK gives up after
//! `retries` attempts of `request_timeout` each, not after a total time),
//! `max.in.flight.requests.per.connection` (the SDK keeps at most one
//! batch per partition in flight), `sticky.partitioning.linger.ms` and
//! `partitioner` (keyless records stick to a partition for about one
//! `batch_size` of bytes, as Kafka's Java client; the load generator's
//! records are keyless), socket and security properties, and anything
//! else librdkafka-specific.
//!
//! # Consumers
//!
//! The SDK consumer has manual assignment only ([`Membership::Manual`]):
//! consumer `k` of `n` takes the partitions `p` with `p % n == k`
//! ([`static_split`]) and reports them through the probe as the Kafka
//! driver reports its group's assignment. They start where the Kafka
//! driver's fresh group starts: `auto.offset.reset` (earliest unless the
//! workload says otherwise). The group's offsets are committed every
//! `auto.commit.interval.ms` (5 s) while `enable.auto.commit` is true, as
//! librdkafka does, so the broker does the same bookkeeping for both ways
//! in. `fetch.wait.max.ms`, `fetch.min.bytes`, `fetch.max.bytes` and
//! `max.partition.fetch.bytes` map to [`ConsumerConfig`] (whose defaults
//! are librdkafka's), and so does `check.crcs`, false by default as in
//! librdkafka: neither way in checks batch CRCs unless the workload asks,
//! and both check every payload's own checksum.
//!
//! [`SendOutcome::Full`]: super::SendOutcome::Full
//! [`ProducerConfig`]: sdk::ProducerConfig

use std::sync::Arc;
use std::time::{Duration, Instant};

use sdk::{Client, ConsumerConfig, Membership};
use tokio::runtime::Runtime;

use super::bootstrap::{check_native_url, Transport};
use super::{ConsumerClient, Driver, ProducerClient, TopicSpec};
use crate::error::LoadError;
use crate::probe::{ConsumerProbe, ProducerProbe};
use crate::workload::Workload;

mod consumer;
mod producer;
mod runtime;
mod settings;

pub use consumer::static_split;
pub use runtime::RuntimeMode;
pub use settings::NativeSettings;

use consumer::NativeConsumer;
use producer::NativeProducer;
use runtime::{current_thread, ClientRuntime};

/// How long topic creation and metadata propagation may take.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach the broker natively, beyond the workload.
#[derive(Debug, Clone)]
pub struct NativeOptions {
    /// `aero://host:port[,host:port…]` or `aero+quic://…`, checked by
    /// [`check_native_url`]; handed to the SDK as it is.
    pub url: String,
    pub runtime: RuntimeMode,
    /// PEM files of the CAs to trust for `aero+quic://` (an agent writes
    /// its own to `<data dir>/native-tls/ca.pem`).
    pub tls_ca: Vec<std::path::PathBuf>,
    /// Trust any certificate (`aero+quic://` against a test agent).
    pub insecure: bool,
}

/// Reaches an AeroStream broker over its native protocol.
pub struct NativeDriver {
    options: NativeOptions,
    transport: Transport,
    settings: NativeSettings,
    consumers: u32,
    /// The shared runtime ([`RuntimeMode::Shared`]).
    shared: Option<Runtime>,
}

impl std::fmt::Debug for NativeDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeDriver")
            .field("url", &self.options.url)
            .field("runtime", &self.options.runtime)
            .finish_non_exhaustive()
    }
}

fn sdk_err(what: &str, e: sdk::Error) -> LoadError {
    LoadError::Native(format!("{what}: {e}"))
}

fn topic_err(topic: &str, reason: impl ToString) -> LoadError {
    LoadError::Topic {
        topic: topic.to_string(),
        reason: reason.to_string(),
    }
}

impl NativeDriver {
    /// A driver for the workload `w` at `options.url` (checked first).
    pub fn new(options: NativeOptions, w: &Workload) -> Result<NativeDriver, LoadError> {
        let transport = check_native_url(&options.url)?;
        let settings = NativeSettings::from_workload(w)?;
        let shared = match options.runtime {
            RuntimeMode::Shared { workers } => Some(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .thread_name("native-sdk")
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        LoadError::ClientConfig(format!("cannot start a tokio runtime: {e}"))
                    })?,
            ),
            RuntimeMode::PerClient => None,
        };
        Ok(NativeDriver {
            options,
            transport,
            settings,
            consumers: w.consumers,
            shared,
        })
    }

    /// Workload properties this driver cannot honour (for a note in the
    /// run's output).
    pub fn notes(&self) -> &[String] {
        &self.settings.ignored
    }

    pub fn settings(&self) -> &NativeSettings {
        &self.settings
    }

    fn runtime(
        &self,
        thread_name: String,
        driven_by_caller: bool,
    ) -> Result<ClientRuntime, LoadError> {
        match &self.shared {
            Some(rt) => Ok(ClientRuntime::Shared(rt.handle().clone())),
            None if driven_by_caller => Ok(ClientRuntime::Owned(current_thread()?)),
            None => ClientRuntime::threaded(thread_name),
        }
    }

    /// Connects a client named `client_id` on `rt`.
    fn connect(&self, rt: &ClientRuntime, client_id: &str) -> Result<Client, LoadError> {
        let url = self.options.url.clone();
        let mut builder = Client::builder(&url).client_id(client_id);
        for ca in &self.options.tls_ca {
            builder = builder.tls_ca_file(ca);
        }
        if self.options.insecure {
            builder = builder.danger_accept_invalid_certs();
        }
        rt.block_on(builder.connect())
            .map_err(|e| sdk_err(&format!("connecting to {url}"), e))
    }

    /// An admin client on a runtime of its own, for one call.
    fn admin<T>(
        &self,
        work: impl AsyncFnOnce(&Client) -> Result<T, LoadError>,
    ) -> Result<T, LoadError> {
        let rt = ClientRuntime::Owned(current_thread()?);
        let client = self.connect(&rt, "loadtest-admin")?;
        rt.block_on(work(&client))
    }
}

/// Whether every partition of `topic` has a leader, or why not.
async fn topic_ready(client: &Client, topic: &str, partitions: u32) -> Result<(), String> {
    let md = client.metadata(&[topic]).await.map_err(|e| e.to_string())?;
    let Some(t) = md.topic(topic) else {
        return Err("topic missing from metadata".into());
    };
    if t.partitions.len() != partitions as usize {
        return Err(format!(
            "{} partitions in metadata, {partitions} expected",
            t.partitions.len()
        ));
    }
    if t.partitions.iter().any(|p| p.leader < 0) {
        return Err("partitions without a leader".into());
    }
    Ok(())
}

impl Driver for NativeDriver {
    fn name(&self) -> &'static str {
        self.transport.way_in()
    }

    fn prepare_topic(&self, topic: &TopicSpec) -> Result<(), LoadError> {
        self.admin(async |client| {
            if topic.create {
                let mut new = sdk::NewTopic::new(&topic.name, topic.partitions)
                    .replication_factor(topic.replication_factor);
                for (k, v) in &topic.configs {
                    new = new.config(k, v);
                }
                match client.create_topic(new).await {
                    Ok(()) => {}
                    Err(e) if e.code() == Some(sdk::ErrorCode::TOPIC_ALREADY_EXISTS) => {}
                    Err(e) => return Err(topic_err(&topic.name, e)),
                }
            }
            // A broker may acknowledge creation before leaders are in place.
            let deadline = Instant::now() + TOPIC_READY_TIMEOUT;
            loop {
                match topic_ready(client, &topic.name, topic.partitions).await {
                    Ok(()) => return Ok(()),
                    Err(last) if Instant::now() >= deadline => {
                        return Err(topic_err(
                            &topic.name,
                            format!("not ready after {TOPIC_READY_TIMEOUT:?}: {last}"),
                        ))
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        })
    }

    fn delete_topic(&self, topic: &str) -> Result<(), LoadError> {
        self.admin(async |client| {
            client
                .delete_topic(topic)
                .await
                .map_err(|e| topic_err(topic, e))
        })
    }

    fn producer(
        &self,
        topic: &str,
        probe: Arc<ProducerProbe>,
    ) -> Result<Box<dyn ProducerClient>, LoadError> {
        let id = format!("loadtest-producer-{}", probe.index);
        let rt = self.runtime(format!("native-p{}", probe.index), false)?;
        let client = self.connect(&rt, &id)?;
        let producer = client
            .producer(self.settings.producer.clone())
            .map_err(|e| sdk_err("starting a producer", e))?;
        Ok(Box::new(NativeProducer::start(
            producer,
            topic.to_string(),
            probe,
            rt,
            self.settings.max_pending_msgs,
            self.settings.max_pending_bytes,
        )))
    }

    fn consumer(
        &self,
        topic: &str,
        group: &str,
        probe: Arc<ConsumerProbe>,
    ) -> Result<Box<dyn ConsumerClient>, LoadError> {
        let id = format!("loadtest-consumer-{}", probe.index);
        let rt = self.runtime(String::new(), true)?;
        let client = self.connect(&rt, &id)?;
        let config = ConsumerConfig {
            group: Some(group.to_string()),
            // SEAM (group membership): `Membership::Manual` plus the static
            // split below. With group membership in the SDK, set the group
            // variant here, subscribe instead of `assign`, and report the
            // SDK's assignment changes in `NativeConsumer::poll`.
            membership: Membership::Manual,
            ..self.settings.consumer.clone()
        };
        let mut consumer = client
            .consumer(config)
            .map_err(|e| sdk_err("starting a consumer", e))?;
        let partitions = rt.block_on(async {
            let md = client
                .metadata(&[topic])
                .await
                .map_err(|e| sdk_err("reading metadata", e))?;
            md.topic(topic)
                .map(|t| t.partitions.len() as u32)
                .ok_or_else(|| topic_err(topic, "missing from metadata"))
        })?;
        let mine = static_split(probe.index, self.consumers, partitions);
        if !mine.is_empty() {
            rt.block_on(consumer.assign(topic, Some(mine.clone()), self.settings.start))
                .map_err(|e| sdk_err(&format!("assigning {topic} {mine:?}"), e))?;
        }
        probe.on_assignment(mine.len() as i64);
        Ok(Box::new(NativeConsumer {
            consumer,
            probe,
            assigned: mine.len(),
            auto_commit: self.settings.auto_commit,
            last_commit: Instant::now(),
            rt,
        }))
    }
}
