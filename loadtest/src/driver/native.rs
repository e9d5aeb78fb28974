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
//! `send` copies the payload into a record, hands it to the SDK producer
//! (which queues it at once) and passes the record's answer future to a
//! collector task on the runtime, which reports each answer to the probe
//! as it arrives. Sends beyond `queue.buffering.max.messages` (default
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
//! are librdkafka's).

use std::collections::{BTreeMap, VecDeque};
use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use sdk::{
    Client, ConsumerConfig, Delivery, Membership, OffsetReset, ProducerConfig, Record, StartAt,
};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;

use super::bootstrap::{check_native_url, Transport};
use super::{ConsumerClient, Driver, ProducerClient, SendOutcome, TopicSpec};
use crate::error::LoadError;
use crate::probe::{ConsumerProbe, ProducerProbe};
use crate::workload::{Acks, Compression, Workload};

/// How long topic creation and metadata propagation may take.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Records taken per poll call after the first (as the Kafka driver).
const POLL_BURST: usize = 4096;
/// Sends taken and answers reported per poll of a producer's collector
/// before it lets the runtime's other tasks run.
const WORK_PER_POLL: usize = 1024;
/// How long dropping a producer waits for its collector to report the
/// sends still unanswered.
const PURGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the SDK's async work runs; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeMode {
    /// One multi-thread runtime with this many workers for all clients.
    Shared { workers: usize },
    /// A current-thread runtime per client.
    PerClient,
}

/// `shared:1`, the cheapest in CPU per message of the three measured on
/// a 2-core machine with the load generator pinned to one core (small-20k:
/// about 26 µs per message against 28–30 µs per-client and 29–32 µs
/// shared:2; small-50k: 13–14 µs against 14.5–15 µs per-client).
impl Default for RuntimeMode {
    fn default() -> Self {
        RuntimeMode::Shared { workers: 1 }
    }
}

impl std::str::FromStr for RuntimeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<RuntimeMode, String> {
        let bad = || format!("`{s}` is not a native runtime: use per-client, shared or shared:N");
        match s.trim() {
            "per-client" => Ok(RuntimeMode::PerClient),
            "shared" => Ok(RuntimeMode::Shared { workers: 1 }),
            other => match other.strip_prefix("shared:").map(str::parse::<usize>) {
                Some(Ok(n)) if (1..=64).contains(&n) => Ok(RuntimeMode::Shared { workers: n }),
                _ => Err(bad()),
            },
        }
    }
}

impl std::fmt::Display for RuntimeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeMode::Shared { workers } => write!(f, "shared:{workers}"),
            RuntimeMode::PerClient => f.write_str("per-client"),
        }
    }
}

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

/// Every setting the native clients take from a workload.
#[derive(Debug, Clone)]
pub struct NativeSettings {
    pub producer: ProducerConfig,
    /// Unanswered sends at most before `send` says Full.
    pub max_pending_msgs: u64,
    /// Unanswered bytes at most before `send` says Full.
    pub max_pending_bytes: u64,
    pub consumer: ConsumerConfig,
    pub start: StartAt,
    /// Commit the group's offsets this often (`None`: never).
    pub auto_commit: Option<Duration>,
    /// Client properties of the workload with no native equivalent.
    pub ignored: Vec<String>,
}

fn bad_prop(key: &str, value: &str) -> LoadError {
    LoadError::InvalidWorkload {
        field: "producer_config/consumer_config",
        reason: format!("`{key}: {value}` is not a valid value for the native driver"),
    }
}

fn parse_prop<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, LoadError> {
    value.trim().parse().map_err(|_| bad_prop(key, value))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, LoadError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(bad_prop(key, value)),
    }
}

fn ms(key: &str, value: &str) -> Result<Duration, LoadError> {
    parse_prop::<u64>(key, value).map(Duration::from_millis)
}

fn acks(a: Acks) -> sdk::Acks {
    match a {
        Acks::None => sdk::Acks::None,
        Acks::Leader => sdk::Acks::Leader,
        Acks::All => sdk::Acks::All,
    }
}

fn compression(c: Compression) -> sdk::Compression {
    match c {
        Compression::None => sdk::Compression::None,
        Compression::Gzip => sdk::Compression::Gzip,
        Compression::Snappy => sdk::Compression::Snappy,
        Compression::Lz4 => sdk::Compression::Lz4,
        Compression::Zstd => sdk::Compression::Zstd,
    }
}

fn compression_prop(key: &str, value: &str) -> Result<sdk::Compression, LoadError> {
    let c = match value.trim() {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => return Err(bad_prop(key, value)),
    };
    Ok(compression(c))
}

fn acks_prop(key: &str, value: &str) -> Result<sdk::Acks, LoadError> {
    match value.trim() {
        "0" => Ok(sdk::Acks::None),
        "1" => Ok(sdk::Acks::Leader),
        "all" | "-1" => Ok(sdk::Acks::All),
        _ => Err(bad_prop(key, value)),
    }
}

impl NativeSettings {
    /// The native clients' settings for a workload: its producer settings
    /// and the Kafka properties with an equivalent (see the module
    /// documentation); the others are listed in `ignored`.
    pub fn from_workload(w: &Workload) -> Result<NativeSettings, LoadError> {
        let mut producer = ProducerConfig {
            acks: acks(w.acks),
            linger: Duration::from_millis(u64::from(w.linger_ms)),
            batch_bytes: w.batch_size as usize,
            compression: compression(w.compression),
            // librdkafka's default; the SDK's is true.
            idempotent: false,
            // librdkafka's queue.buffering.max.kbytes default.
            buffer_bytes: 1 << 30,
            ..ProducerConfig::default()
        };
        let mut max_pending_msgs: u64 = 100_000;
        let mut ignored = Vec::new();
        for (k, v) in &w.producer_config {
            match k.as_str() {
                "acks" | "request.required.acks" => producer.acks = acks_prop(k, v)?,
                "linger.ms" | "queue.buffering.max.ms" => producer.linger = ms(k, v)?,
                "batch.size" => producer.batch_bytes = parse_prop(k, v)?,
                "compression.type" | "compression.codec" => {
                    producer.compression = compression_prop(k, v)?
                }
                "enable.idempotence" => producer.idempotent = parse_bool(k, v)?,
                "request.timeout.ms" => producer.request_timeout = ms(k, v)?,
                "retries" | "message.send.max.retries" => producer.retries = parse_prop(k, v)?,
                "retry.backoff.ms" => producer.retry_backoff = ms(k, v)?,
                "retry.backoff.max.ms" => producer.retry_backoff_max = ms(k, v)?,
                "queue.buffering.max.messages" => max_pending_msgs = parse_prop(k, v)?,
                "queue.buffering.max.kbytes" => {
                    let kib: usize = parse_prop(k, v)?;
                    producer.buffer_bytes = kib.saturating_mul(1024).min(u32::MAX as usize);
                }
                "message.max.bytes" => producer.max_request_bytes = parse_prop(k, v)?,
                "client.id" => {}
                _ => ignored.push(format!("producer_config {k}")),
            }
        }
        if producer.idempotent && producer.acks != sdk::Acks::All {
            return Err(LoadError::InvalidWorkload {
                field: "producer_config",
                reason: "enable.idempotence needs acks: all".into(),
            });
        }
        let mut consumer = ConsumerConfig::default();
        let mut start = StartAt::Earliest;
        let mut auto_commit = Some(Duration::from_secs(5));
        let mut commit_every = Duration::from_secs(5);
        // What the Kafka driver sets before the workload's own entries.
        let mut props = BTreeMap::from([
            ("auto.offset.reset".to_string(), "earliest".to_string()),
            ("enable.auto.commit".to_string(), "true".to_string()),
        ]);
        props.extend(w.consumer_config.clone());
        for (k, v) in &props {
            match k.as_str() {
                "auto.offset.reset" => {
                    (start, consumer.offset_reset) = match v.trim() {
                        "earliest" | "smallest" | "beginning" => {
                            (StartAt::Earliest, OffsetReset::Earliest)
                        }
                        "latest" | "largest" | "end" => (StartAt::Latest, OffsetReset::Latest),
                        "error" => (StartAt::Earliest, OffsetReset::Fail),
                        _ => return Err(bad_prop(k, v)),
                    }
                }
                "enable.auto.commit" => {
                    auto_commit = parse_bool(k, v)?.then_some(Duration::ZERO);
                }
                "auto.commit.interval.ms" => commit_every = ms(k, v)?,
                "fetch.wait.max.ms" => consumer.max_wait = ms(k, v)?,
                "fetch.min.bytes" => consumer.min_bytes = parse_prop(k, v)?,
                "fetch.max.bytes" => consumer.max_bytes = parse_prop(k, v)?,
                "max.partition.fetch.bytes" => consumer.partition_max_bytes = parse_prop(k, v)?,
                "client.id" | "enable.partition.eof" | "group.id" => {}
                _ => ignored.push(format!("consumer_config {k}")),
            }
        }
        let auto_commit = auto_commit.map(|_| commit_every.max(Duration::from_millis(100)));
        Ok(NativeSettings {
            max_pending_bytes: producer.buffer_bytes as u64,
            producer,
            max_pending_msgs: max_pending_msgs.max(1),
            consumer,
            start,
            auto_commit,
            ignored,
        })
    }
}

/// The partitions consumer `index` of `consumers` reads: `p % n == k`.
///
/// SEAM (group membership): this static split stands in for a consumer
/// group because the SDK only has [`Membership::Manual`] today. When the
/// SDK gains group membership (another `Membership` variant), the native
/// consumer subscribes with the run's group instead of calling this, and
/// reports the assignments the group hands it through
/// `ConsumerProbe::on_assignment` (+n on assign, -n on revoke), as the
/// Kafka driver's rebalance callback does; see `NativeDriver::consumer`.
pub fn static_split(index: u32, consumers: u32, partitions: u32) -> Vec<u32> {
    let n = consumers.max(1);
    (0..partitions).filter(|p| p % n == index % n).collect()
}

// ------------------------------------------------------------ runtimes

/// Where one client's async work runs.
enum ClientRuntime {
    /// A handle on the driver's shared multi-thread runtime.
    Shared(Handle),
    /// A current-thread runtime driven by whoever calls `block_on` (a
    /// consumer's poll thread, or the caller of an admin call).
    Owned(Runtime),
    /// A current-thread runtime driven by a thread of its own.
    Threaded {
        handle: Handle,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

fn current_thread() -> Result<Runtime, LoadError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::ClientConfig(format!("cannot start a tokio runtime: {e}")))
}

impl ClientRuntime {
    fn threaded(name: String) -> Result<ClientRuntime, LoadError> {
        let rt = current_thread()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                rt.block_on(async {
                    let _ = stopped.await;
                });
                // Dropping the runtime here cancels what is left of its tasks.
            })
            .map_err(|e| LoadError::Thread(e.to_string()))?;
        Ok(ClientRuntime::Threaded {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    fn handle(&self) -> Handle {
        match self {
            ClientRuntime::Shared(h) | ClientRuntime::Threaded { handle: h, .. } => h.clone(),
            ClientRuntime::Owned(rt) => rt.handle().clone(),
        }
    }

    /// Runs `f` to completion from synchronous code (never from inside a
    /// runtime).
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        match self {
            ClientRuntime::Shared(h) | ClientRuntime::Threaded { handle: h, .. } => h.block_on(f),
            ClientRuntime::Owned(rt) => rt.block_on(f),
        }
    }
}

impl Drop for ClientRuntime {
    fn drop(&mut self) {
        if let ClientRuntime::Threaded { stop, thread, .. } = self {
            if let Some(stop) = stop.take() {
                let _ = stop.send(());
            }
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

// ------------------------------------------------------------ driver

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
        let topic = topic.to_string();
        let flusher = producer.clone();
        let send = move |record: Record| producer.send(&topic, record);
        Ok(Box::new(NativeProducer::start(
            send,
            flusher,
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

// ------------------------------------------------------------ producer

/// Sends neither answered nor failed yet.
#[derive(Debug, Default)]
struct Pending {
    msgs: AtomicU64,
    bytes: AtomicU64,
}

enum ToCollector<F> {
    Sent(F, Bytes),
    /// Report what is still unanswered as failed, then confirm.
    Purge(std::sync::mpsc::SyncSender<()>),
}

struct NativeProducer<S, F> {
    send: S,
    flusher: sdk::Producer,
    to_collector: mpsc::UnboundedSender<ToCollector<F>>,
    pending: Arc<Pending>,
    max_msgs: u64,
    max_bytes: u64,
    // Last: dropped after the collector was told to purge.
    rt: ClientRuntime,
}

type SendResult = Result<Delivery, sdk::Error>;

impl<S, F> NativeProducer<S, F>
where
    S: FnMut(Record) -> F + Send + 'static,
    F: Future<Output = SendResult> + Send + 'static,
{
    fn start(
        send: S,
        flusher: sdk::Producer,
        probe: Arc<ProducerProbe>,
        rt: ClientRuntime,
        max_msgs: u64,
        max_bytes: u64,
    ) -> NativeProducer<S, F> {
        let (to_collector, queue) = mpsc::unbounded_channel();
        let pending = Arc::new(Pending::default());
        // Unconstrained: tokio's cooperative budget would make the answers'
        // oneshot receivers return Pending past 128 polls and defer their
        // wake-ups, which hides them from FuturesUnordered's own yielding:
        // every poll then walks every waiting answer, and a collector that
        // fell behind falls further behind (seen at 50k msg/s: the load
        // generator's core spinning in FuturesUnordered wake-ups). The
        // collector bounds its own work per poll instead.
        rt.handle().spawn(tokio::task::unconstrained(collect(
            queue,
            probe,
            Arc::clone(&pending),
        )));
        NativeProducer {
            send,
            flusher,
            to_collector,
            pending,
            max_msgs,
            max_bytes,
            rt,
        }
    }
}

/// A send's answer, with the send's number.
fn numbered<F>(answer: F, n: u64) -> impl Future<Output = (u64, SendResult)>
where
    F: Future<Output = SendResult>,
{
    answer.map(move |r| (n, r))
}

/// The answers of one producer's sends, reported to its probe as they
/// arrive; each accepted send is reported exactly once (answered, failed
/// or purged).
async fn collect<F>(
    mut queue: mpsc::UnboundedReceiver<ToCollector<F>>,
    probe: Arc<ProducerProbe>,
    pending: Arc<Pending>,
) where
    F: Future<Output = SendResult> + Send + 'static,
{
    // Payloads by send number (from `base`); answers come mostly in order.
    let mut payloads: VecDeque<Option<Bytes>> = VecDeque::new();
    let mut base: u64 = 0;
    let mut answers = FuturesUnordered::new();
    let mut open = true;
    let report = |payloads: &mut VecDeque<Option<Bytes>>,
                  base: &mut u64,
                  n: u64,
                  outcome: Result<(), &str>| {
        let Some(payload) = n
            .checked_sub(*base)
            .and_then(|i| payloads.get_mut(i as usize))
            .and_then(Option::take)
        else {
            return;
        };
        probe.on_ack(&payload, outcome);
        pending
            .bytes
            .fetch_sub(payload.len() as u64, Ordering::AcqRel);
        pending.msgs.fetch_sub(1, Ordering::AcqRel);
        while payloads.front().is_some_and(Option::is_none) {
            payloads.pop_front();
            *base += 1;
        }
    };
    poll_fn(|cx| {
        let mut work = 0;
        while open {
            if work >= WORK_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            work += 1;
            match queue.poll_recv(cx) {
                Poll::Ready(Some(ToCollector::Sent(answer, payload))) => {
                    let n = base + payloads.len() as u64;
                    payloads.push_back(Some(payload));
                    answers.push(numbered(answer, n));
                }
                Poll::Ready(Some(ToCollector::Purge(done))) => {
                    let (first, end) = (base, base + payloads.len() as u64);
                    for n in first..end {
                        report(
                            &mut payloads,
                            &mut base,
                            n,
                            Err("purged: the producer closed before the broker answered"),
                        );
                    }
                    answers.clear();
                    let _ = done.send(());
                    open = false;
                }
                Poll::Ready(None) => open = false,
                Poll::Pending => break,
            }
        }
        loop {
            if work >= 2 * WORK_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            work += 1;
            match answers.poll_next_unpin(cx) {
                Poll::Ready(Some((n, Ok(_)))) => report(&mut payloads, &mut base, n, Ok(())),
                Poll::Ready(Some((n, Err(e)))) => {
                    report(&mut payloads, &mut base, n, Err(&e.to_string()))
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if !open && answers.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

impl<S, F> ProducerClient for NativeProducer<S, F>
where
    S: FnMut(Record) -> F + Send + 'static,
    F: Future<Output = SendResult> + Send + 'static,
{
    fn send(&mut self, payload: &[u8]) -> Result<SendOutcome, LoadError> {
        let len = payload.len() as u64;
        if self.pending.msgs.load(Ordering::Acquire) >= self.max_msgs
            || self.pending.bytes.load(Ordering::Acquire) + len > self.max_bytes
        {
            return Ok(SendOutcome::Full);
        }
        let payload = Bytes::copy_from_slice(payload);
        // Queued by the SDK now; the future only waits for the answer.
        let answer = (self.send)(Record::new(payload.clone()));
        self.pending.msgs.fetch_add(1, Ordering::AcqRel);
        self.pending.bytes.fetch_add(len, Ordering::AcqRel);
        self.to_collector
            .send(ToCollector::Sent(answer, payload))
            .map_err(|_| LoadError::Send("the native producer's collector has stopped".into()))?;
        Ok(SendOutcome::Queued)
    }

    fn flush(&mut self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let flusher = self.flusher.clone();
        // Sends lingering batches at once and waits for the SDK's answers;
        // the collector reports them a moment later.
        let _ = self
            .rt
            .block_on(async { tokio::time::timeout(timeout, flusher.flush()).await });
        loop {
            let left = self.pending.msgs.load(Ordering::Acquire);
            if left == 0 || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl<S, F> Drop for NativeProducer<S, F> {
    fn drop(&mut self) {
        // As the Kafka driver's purge: what is still unanswered is
        // reported as failed now, never later as acknowledged.
        let (done, confirmed) = std::sync::mpsc::sync_channel(1);
        if self.to_collector.send(ToCollector::Purge(done)).is_ok() {
            let _ = confirmed.recv_timeout(PURGE_TIMEOUT);
        }
    }
}

// ------------------------------------------------------------ consumer

struct NativeConsumer {
    consumer: sdk::Consumer,
    probe: Arc<ConsumerProbe>,
    assigned: usize,
    auto_commit: Option<Duration>,
    last_commit: Instant,
    // Last: the consumer's connections go before their runtime.
    rt: ClientRuntime,
}

impl ConsumerClient for NativeConsumer {
    fn poll(&mut self, timeout: Duration) {
        if self.assigned == 0 {
            std::thread::sleep(timeout);
            return;
        }
        let consumer = &mut self.consumer;
        let probe = &self.probe;
        let burst = poll_fn(|cx| {
            let mut taken = 0;
            loop {
                match consumer.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(record))) => {
                        probe.on_message(record.value.as_deref().unwrap_or_default());
                        taken += 1;
                        if taken >= POLL_BURST {
                            return Poll::Ready(());
                        }
                    }
                    Poll::Ready(Some(Err(e))) => {
                        probe.on_error(&e.to_string());
                        return Poll::Ready(());
                    }
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending if taken > 0 => return Poll::Ready(()),
                    Poll::Pending => return Poll::Pending,
                }
            }
        });
        self.rt.block_on(async {
            let _ = tokio::time::timeout(timeout, burst).await;
        });
        if let Some(every) = self.auto_commit {
            if self.last_commit.elapsed() >= every {
                self.last_commit = Instant::now();
                let consumer = &mut self.consumer;
                let result = self
                    .rt
                    .block_on(async { tokio::time::timeout(every, consumer.commit()).await });
                let problem = match result {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some("timed out".to_string()),
                };
                if let Some(p) = problem {
                    self.probe
                        .shared()
                        .note_error("client", &format!("committing offsets: {p}"));
                }
            }
        }
    }
}

impl Drop for NativeConsumer {
    fn drop(&mut self) {
        // As the Kafka driver's revoke on unsubscribe.
        self.probe.on_assignment(-(self.assigned as i64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_split_gives_every_partition_to_exactly_one_consumer() {
        assert_eq!(static_split(0, 2, 8), vec![0, 2, 4, 6]);
        assert_eq!(static_split(1, 2, 8), vec![1, 3, 5, 7]);
        assert_eq!(static_split(0, 1, 3), vec![0, 1, 2]);
        // More consumers than partitions: the last ones hold nothing.
        assert_eq!(static_split(2, 3, 2), Vec::<u32>::new());
        for (n, parts) in [(1, 1), (3, 8), (4, 4), (5, 3), (7, 64)] {
            let mut all: Vec<u32> = (0..n).flat_map(|k| static_split(k, n, parts)).collect();
            all.sort_unstable();
            assert_eq!(
                all,
                (0..parts).collect::<Vec<_>>(),
                "{n} consumers, {parts} partitions"
            );
        }
    }

    fn workload(extra: &str) -> Workload {
        Workload::from_yaml(&format!(
            "name: t\npartitions: 8\nmessage_size: 1024\nproducers: 2\nconsumers: 2\nrate: 1000\nacks: 1\nlinger_ms: 3\nbatch_size: 65536\ncompression: lz4\nwarmup: 1s\nduration: 2s\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn workload_settings_map_to_the_sdk_producer() {
        let s = NativeSettings::from_workload(&workload("")).unwrap();
        let p = &s.producer;
        assert_eq!(p.acks, sdk::Acks::Leader);
        assert_eq!(p.linger, Duration::from_millis(3));
        assert_eq!(p.batch_bytes, 65536);
        assert_eq!(p.compression, sdk::Compression::Lz4);
        assert!(!p.idempotent, "librdkafka's default");
        assert_eq!(
            (s.max_pending_msgs, s.max_pending_bytes),
            (100_000, 1 << 30)
        );
        assert_eq!(s.start, StartAt::Earliest);
        assert_eq!(s.auto_commit, Some(Duration::from_secs(5)));
        assert!(s.ignored.is_empty());
    }

    #[test]
    fn kafka_properties_with_an_equivalent_map_and_the_rest_are_listed() {
        let s = NativeSettings::from_workload(&workload(
            "producer_config:\n  linger.ms: \"7\"\n  queue.buffering.max.messages: \"500\"\n  batch.num.messages: \"100\"\nconsumer_config:\n  auto.offset.reset: latest\n  fetch.wait.max.ms: \"50\"\n  enable.auto.commit: \"false\"\n  session.timeout.ms: \"6000\"\n",
        ))
        .unwrap();
        assert_eq!(s.producer.linger, Duration::from_millis(7));
        assert_eq!(s.max_pending_msgs, 500);
        assert_eq!(
            (s.start, s.consumer.offset_reset),
            (StartAt::Latest, OffsetReset::Latest)
        );
        assert_eq!(s.consumer.max_wait, Duration::from_millis(50));
        assert_eq!(s.auto_commit, None);
        assert_eq!(
            s.ignored,
            vec![
                "producer_config batch.num.messages".to_string(),
                "consumer_config session.timeout.ms".to_string()
            ]
        );
    }

    #[test]
    fn idempotence_without_acks_all_is_refused_and_bad_values_are_named() {
        let err = NativeSettings::from_workload(&workload(
            "producer_config:\n  enable.idempotence: \"true\"\n",
        ))
        .unwrap_err();
        assert!(err.to_string().contains("acks"), "{err}");
        let err = NativeSettings::from_workload(&workload("producer_config:\n  linger.ms: soon\n"))
            .unwrap_err();
        assert!(err.to_string().contains("linger.ms: soon"), "{err}");
    }

    /// A collector fed with answers the test settles by hand.
    struct Harness {
        rt: Runtime,
        to_collector: mpsc::UnboundedSender<ToCollector<BoxedAnswer>>,
        shared: Arc<crate::probe::RunShared>,
        pending: Arc<Pending>,
        writer: crate::payload::PayloadWriter,
        done: Option<tokio::task::JoinHandle<()>>,
    }

    type BoxedAnswer = futures::future::BoxFuture<'static, SendResult>;

    impl Harness {
        fn new() -> Harness {
            let rt = current_thread().unwrap();
            let shared = crate::probe::RunShared::new(1, 1);
            let probe = Arc::new(ProducerProbe::new(0, shared.clone()));
            let pending = Arc::new(Pending::default());
            let (to_collector, queue) = mpsc::unbounded_channel();
            let done = rt.spawn(tokio::task::unconstrained(collect(
                queue,
                probe,
                Arc::clone(&pending),
            )));
            Harness {
                rt,
                to_collector,
                shared,
                pending,
                writer: crate::payload::PayloadWriter::new(64, 1, 0),
                done: Some(done),
            }
        }

        /// Sends message `seq`; the returned sender answers it.
        fn send(&mut self, seq: u64) -> tokio::sync::oneshot::Sender<SendResult> {
            let (answer, answered) = tokio::sync::oneshot::channel();
            let payload = Bytes::copy_from_slice(self.writer.stamp(seq, 0));
            self.pending.msgs.fetch_add(1, Ordering::AcqRel);
            self.pending
                .bytes
                .fetch_add(payload.len() as u64, Ordering::AcqRel);
            let fut: BoxedAnswer =
                Box::pin(async move { answered.await.unwrap_or(Err(sdk::Error::Closed)) });
            self.to_collector
                .send(ToCollector::Sent(fut, payload))
                .unwrap();
            answer
        }

        fn settle(&self) {
            self.rt.block_on(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
            });
        }

        fn purge_and_finish(mut self) -> crate::probe::CounterSnapshot {
            let (purged, confirmed) = std::sync::mpsc::sync_channel(1);
            self.to_collector.send(ToCollector::Purge(purged)).unwrap();
            drop(self.to_collector);
            let done = self.done.take().unwrap();
            self.rt.block_on(done).unwrap();
            confirmed.recv().unwrap();
            assert_eq!(self.pending.msgs.load(Ordering::Acquire), 0);
            assert_eq!(self.pending.bytes.load(Ordering::Acquire), 0);
            self.shared.counters.snapshot()
        }
    }

    fn delivered() -> SendResult {
        Ok(Delivery {
            partition: 0,
            offset: 0,
        })
    }

    #[test]
    fn every_send_is_reported_once_answered_failed_or_purged() {
        let mut h = Harness::new();
        let answers: Vec<_> = (0..5).map(|seq| h.send(seq)).collect();
        let mut answers = answers.into_iter();
        // Out of order: 1 then 0 succeed, 2 fails, 3 and 4 never answer.
        let (a0, a1, a2) = (answers.next(), answers.next(), answers.next());
        a1.unwrap().send(delivered()).unwrap();
        a0.unwrap().send(delivered()).unwrap();
        a2.unwrap().send(Err(sdk::Error::Timeout)).unwrap();
        h.settle();
        assert_eq!(h.pending.msgs.load(Ordering::Acquire), 2);
        let _unanswered: Vec<_> = answers.collect();
        let c = h.purge_and_finish();
        assert_eq!((c.acked, c.failed), (2, 3));
    }

    #[test]
    fn a_flood_of_answers_is_reported_without_spinning() {
        // Tens of thousands of answers ready at once: with tokio's budget
        // deferring their wake-ups, FuturesUnordered walked all of them per
        // poll and the collector never caught up.
        let mut h = Harness::new();
        let n = 50_000;
        let answers: Vec<_> = (0..n).map(|seq| h.send(seq)).collect();
        h.settle();
        let start = Instant::now();
        for a in answers {
            a.send(delivered()).unwrap();
        }
        while h.pending.msgs.load(Ordering::Acquire) > 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "collector stuck");
            h.settle();
        }
        let c = h.purge_and_finish();
        assert_eq!((c.acked, c.failed), (n, 0));
    }

    #[test]
    fn runtime_modes_parse() {
        assert_eq!("per-client".parse(), Ok(RuntimeMode::PerClient));
        assert_eq!("shared".parse(), Ok(RuntimeMode::Shared { workers: 1 }));
        assert_eq!("shared:2".parse(), Ok(RuntimeMode::Shared { workers: 2 }));
        assert!("shared:0".parse::<RuntimeMode>().is_err());
        assert!("threads".parse::<RuntimeMode>().is_err());
        assert_eq!(RuntimeMode::Shared { workers: 3 }.to_string(), "shared:3");
        assert_eq!(RuntimeMode::default(), RuntimeMode::Shared { workers: 1 });
    }
}
