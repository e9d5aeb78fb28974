//! The state every connection shares: settings, the catalog, the partition
//! tasks, the group coordinator, producer ids and fetch sessions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use metastore::Metastore;

use crate::connections::{ConnectionLimits, Connections};
use crate::fetch_session::FetchSessions;
use crate::forward::client::{ForwardCounters, Forwarder};
use dataplane::group::coordinator::Coordinator;
use dataplane::group::engine::GroupLimits;
use dataplane::node::{Node, NodeConfig};
use dataplane::partition::{PartitionCounters, Partitions};
use dataplane::telemetry::histogram::LatencyHistogram;
use dataplane::telemetry::prometheus::write_metric;
use dataplane::topic_config;

/// Broker-level settings (Kafka's server.properties equivalents).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    /// SASL mechanisms clients must authenticate with on the Kafka
    /// listener; empty: no authentication.
    pub sasl_mechanisms: Vec<crate::sasl::mechanism::Mechanism>,
    /// Kafka's `connections.max.reauth.ms`: how long a SASL session lasts
    /// before the client must authenticate again (KIP-368); `None`: for ever.
    pub sasl_max_session: Option<std::time::Duration>,
    /// How OAUTHBEARER tokens are checked, when that mechanism is on.
    pub oauthbearer: Option<std::sync::Arc<security::oauthbearer::Validator>>,
    /// ACL authorization of Kafka requests.
    pub authz: security::authz::AuthzConfig,
    /// Host and port clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: i32,
    /// `socket.request.max.bytes`.
    pub max_request_bytes: usize,
    /// `auto.create.topics.enable`.
    pub auto_create_topics: bool,
    /// `num.partitions` for auto-created topics.
    pub num_partitions: i32,
    /// `default.replication.factor`; -1 (the default) means three, or the
    /// number of live agents when fewer.
    pub default_replication_factor: i16,
    /// `broker.rack`: shown in Metadata until this node's registration is read back.
    pub rack: Option<String>,
    pub group: GroupLimits,
    /// `fetch.max.bytes`: upper bound of one fetch response.
    pub fetch_max_bytes: usize,
    /// `max.incremental.fetch.session.cache.slots`.
    pub fetch_session_slots: usize,
    /// Broker-wide defaults of topic settings that Kafka does not define
    /// (`write.caching`).
    pub log_defaults: topic_config::LogDefaults,
    /// Connection and request-memory limits.
    pub connections: ConnectionLimits,
    /// What bounds the work of logins (password checks above all).
    pub logins: crate::logins::LoginLimits,
    /// Load-balancer mode: every agent advertises the balancer's address,
    /// clients see the cluster as one broker ([`crate::brokers::LOAD_BALANCER_ID`])
    /// and requests are forwarded to the agent that owns their data.
    pub load_balanced: bool,
    /// Load-balancer mode: the balancer's address in each zone, given to
    /// clients that name that zone (`aerostream_az=` in the client id, or
    /// `client.rack`) instead of the advertised one, so that their
    /// connections stay in their zone.
    pub zone_addrs: std::collections::BTreeMap<String, (String, i32)>,
    /// Host and port native-protocol clients are told to connect to; `None`
    /// when the native listener is off.
    pub native_advertised: Option<(String, i32)>,
    /// Most (topic, partition) and (group, topic) series `/metrics` shows
    /// each; the rest are summed under `topic="other"`.
    pub metrics_max_series: usize,
    /// Prices the cost report (`/v1/cost`) values its counts at.
    pub cost_prices: crate::cost::Prices,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 1,
            sasl_mechanisms: Vec::new(),
            oauthbearer: None,
            sasl_max_session: None,
            authz: security::authz::AuthzConfig::default(),
            advertised_host: "127.0.0.1".into(),
            cost_prices: crate::cost::Prices::default(),
            advertised_port: 9092,
            max_request_bytes: 100 * 1024 * 1024,
            auto_create_topics: true,
            num_partitions: 1,
            default_replication_factor: -1,
            rack: None,
            group: GroupLimits::default(),
            fetch_max_bytes: 55 * 1024 * 1024,
            fetch_session_slots: 1000,
            log_defaults: topic_config::LogDefaults::default(),
            connections: ConnectionLimits::default(),
            logins: crate::logins::LoginLimits::default(),
            load_balanced: false,
            zone_addrs: Default::default(),
            native_advertised: None,
            metrics_max_series: DEFAULT_METRICS_MAX_SERIES,
        }
    }
}

/// The default of [`BrokerConfig::metrics_max_series`].
pub const DEFAULT_METRICS_MAX_SERIES: usize = 1000;

/// Request counters exported on /metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    pub requests: AtomicU64,
    pub request_errors: AtomicU64,
    pub connections_opened: AtomicU64,
    pub connections_closed: AtomicU64,
    pub produced_bytes: AtomicU64,
    pub fetched_bytes: AtomicU64,
    pub malformed_requests: AtomicU64,
    /// Connections to a TLS listener closed before the handshake completed.
    pub tls_handshake_failures: AtomicU64,
    /// Connections closed for failing or skipping SASL authentication.
    pub sasl_failures: AtomicU64,
    /// Completed SASL re-authentications (KIP-368).
    pub sasl_reauthentications: AtomicU64,
    /// Connections closed because their SASL session ended before the
    /// client authenticated again.
    pub sasl_expired: AtomicU64,
    /// Responses that told a client over its quota to wait.
    pub quota_throttles: AtomicU64,
    /// Requests with bytes after their last field (tolerated, as Kafka does).
    pub trailing_bytes_requests: AtomicU64,
    /// Requests being served right now; shutdown waits for this to reach zero.
    pub in_flight: AtomicU64,
    /// Produce requests, from decoded to answered (acks=all includes the
    /// wait for the in-sync replicas).
    pub produce_latency: LatencyHistogram,
    /// Fetch requests, from decoded to answered (includes the long-poll
    /// wait for `min_bytes`).
    pub fetch_latency: LatencyHistogram,
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Prometheus text exposition.
    pub fn render(
        &self,
        open_partitions: usize,
        partitions: &PartitionCounters,
        forwarded: &ForwardCounters,
    ) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut s = String::new();
        for (name, help, v) in [
            (
                "aerostream_kafka_requests_total",
                "Kafka requests handled",
                g(&self.requests),
            ),
            (
                "aerostream_kafka_request_errors_total",
                "Kafka requests answered with a top-level error",
                g(&self.request_errors),
            ),
            (
                "aerostream_kafka_malformed_requests_total",
                "Connections closed for malformed requests",
                g(&self.malformed_requests),
            ),
            (
                "aerostream_kafka_tls_handshake_failures_total",
                "Connections to the TLS Kafka listener closed before the handshake completed",
                g(&self.tls_handshake_failures),
            ),
            (
                "aerostream_kafka_sasl_failures_total",
                "Connections closed for failing or skipping SASL authentication",
                g(&self.sasl_failures),
            ),
            (
                "aerostream_kafka_sasl_reauthentications_total",
                "SASL re-authentications completed on open connections (KIP-368)",
                g(&self.sasl_reauthentications),
            ),
            (
                "aerostream_kafka_sasl_sessions_expired_total",
                "Connections closed because their SASL session ended before the client authenticated again",
                g(&self.sasl_expired),
            ),
            (
                "aerostream_kafka_quota_throttles_total",
                "Responses that told a client over its byte-rate quota to wait (throttle_time_ms)",
                g(&self.quota_throttles),
            ),
            (
                "aerostream_kafka_requests_with_trailing_bytes_total",
                "Requests with bytes after their last field (served, as Kafka does)",
                g(&self.trailing_bytes_requests),
            ),
            (
                "aerostream_connections_opened_total",
                "Kafka connections accepted",
                g(&self.connections_opened),
            ),
            (
                "aerostream_connections_closed_total",
                "Kafka connections closed",
                g(&self.connections_closed),
            ),
            (
                "aerostream_produced_bytes_total",
                "Record bytes appended",
                g(&self.produced_bytes),
            ),
            (
                "aerostream_fetched_bytes_total",
                "Record bytes sent to consumers",
                g(&self.fetched_bytes),
            ),
            (
                "aerostream_partition_reads_total",
                "Reads served by partition tasks (fetches and long-poll re-reads)",
                g(&partitions.reads),
            ),
            (
                "aerostream_partition_syncs_total",
                "Durability points (fdatasync) shared by acks=all writes of topics with write.caching=false",
                g(&partitions.syncs),
            ),
            (
                "aerostream_partition_opens_total",
                "Partition logs opened (recovered) since start",
                g(&partitions.opens),
            ),
            (
                "aerostream_replica_fetch_bytes_sent_total",
                "Replica fetch response bytes sent to followers (frames, before QUIC and UDP headers)",
                g(&partitions.replica_bytes_sent),
            ),
            (
                "aerostream_forwarded_requests_sent_total",
                "Client requests (or parts of them) forwarded to the agent owning their data",
                g(&forwarded.sent),
            ),
            (
                "aerostream_forwarded_requests_failed_total",
                "Forwarded requests whose owner did not answer",
                g(&forwarded.failed),
            ),
            (
                "aerostream_forwarded_requests_served_total",
                "Requests other agents forwarded to this one",
                g(&forwarded.served),
            ),
            (
                "aerostream_replica_fetch_bytes_received_total",
                "Replica fetch response bytes received from leaders (frames, before QUIC and UDP headers)",
                g(&partitions.replica_bytes_received),
            ),
        ] {
            write_metric(&mut s, name, "counter", help, v);
        }
        write_metric(
            &mut s,
            "aerostream_partitions_offline",
            "gauge",
            "Open partition logs that refuse writes after a failed write or fsync",
            g(&partitions.offline),
        );
        write_metric(
            &mut s,
            "aerostream_open_partitions",
            "gauge",
            "Partition logs open on this node",
            open_partitions as u64,
        );
        self.produce_latency.render(
            &mut s,
            "aerostream_produce_latency_seconds",
            "Produce requests from decoded to answered (acks=all includes the replicas' confirmation)",
        );
        self.fetch_latency.render(
            &mut s,
            "aerostream_fetch_latency_seconds",
            "Fetch requests from decoded to answered (includes the long-poll wait for min.bytes)",
        );
        s
    }
}

/// Everything a request handler needs: the node's data plane and what the
/// front ends share on top of it.
pub struct Broker {
    pub config: BrokerConfig,
    /// The catalog, the partitions, the group coordinator and the
    /// decisions every front end makes the same way.
    pub node: Node,
    pub fetch_sessions: FetchSessions,
    /// Client quotas' rate windows on this agent.
    pub quotas: security::quota::Quotas,
    pub metrics: Metrics,
    pub connections: Arc<Connections>,
    /// Login work, bounded broker-wide and per address.
    pub logins: crate::logins::Logins,
    /// Forwarded requests, sent and served.
    pub forward_counters: Arc<ForwardCounters>,
    /// Kafka clients' bytes by zone (the cost report's client side).
    pub client_zones: crate::client_zone::ClientZoneCounters,
    /// Crashed agents, as this agent first saw them fenced (Metadata lists
    /// them a little longer, see `brokers::CRASHED_LISTING`).
    pub fenced_since: crate::fenced::FencedSince,
    /// Transactions this agent is completing now.
    pub txn_completing: crate::kafka::api::txn_claims::Completing,
    forwarder: OnceLock<Arc<Forwarder>>,
    /// Set when a controlled shutdown starts handing leadership over:
    /// `/health` answers 503 (load balancers stop sending new clients)
    /// while requests are still served.
    leaving: std::sync::atomic::AtomicBool,
    shutting_down: tokio::sync::watch::Sender<bool>,
    /// Whether the Kafka and native listeners accept clients (see
    /// `GatewayOptions::hold_clients`).
    clients_open: tokio::sync::watch::Sender<bool>,
    /// When this broker was built: the cost report's counts cover the time since.
    pub started: std::time::Instant,
}

impl Broker {
    pub fn new(
        config: BrokerConfig,
        catalog: Metastore,
        partitions: Arc<Partitions>,
        groups: Coordinator,
    ) -> Self {
        let node = NodeConfig {
            node_id: config.node_id,
            num_partitions: config.num_partitions,
            default_replication_factor: config.default_replication_factor,
            log_defaults: config.log_defaults.clone(),
        };
        Broker {
            fetch_sessions: FetchSessions::new(config.fetch_session_slots),
            quotas: security::quota::Quotas::default(),
            connections: Connections::new(config.connections.clone()),
            logins: crate::logins::Logins::new(&config.logins),
            config,
            node: Node::new(node, catalog, partitions, groups),
            metrics: Metrics::default(),
            forward_counters: Arc::default(),
            client_zones: Default::default(),
            fenced_since: Default::default(),
            txn_completing: Default::default(),
            forwarder: OnceLock::new(),
            leaving: std::sync::atomic::AtomicBool::new(false),
            shutting_down: tokio::sync::watch::channel(false).0,
            clients_open: tokio::sync::watch::channel(true).0,
            started: std::time::Instant::now(),
        }
    }

    /// Sends requests for data or groups other agents own to them (set once
    /// the cluster endpoint is up; used in load-balancer mode only).
    pub fn set_forwarder(&self, forwarder: Arc<Forwarder>) {
        let _ = self.forwarder.set(forwarder);
    }

    /// The forwarder for a request a client sent here, in load-balancer
    /// mode; `None` for requests another agent forwarded (served here, never
    /// passed on again) and outside load-balancer mode.
    pub fn forwarder(&self, forwarded: bool) -> Option<&Arc<Forwarder>> {
        if forwarded || !self.config.load_balanced {
            return None;
        }
        self.forwarder.get()
    }

    /// The way to the other agents of the cluster, in any mode (a
    /// transaction coordinator sends markers to partition leaders);
    /// `None` for a single agent.
    pub fn cluster_forwarder(&self) -> Option<&Arc<Forwarder>> {
        self.forwarder.get()
    }

    /// The agent is on its way down and says so (`/health` 503), but
    /// still serves: its partitions are being handed over.
    pub fn begin_leaving(&self) {
        self.leaving
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the agent is leaving or shutting down.
    pub fn is_leaving(&self) -> bool {
        self.leaving.load(std::sync::atomic::Ordering::SeqCst) || self.is_shutting_down()
    }

    /// Whether `who` may perform `operation` on the resource, by the ACLs
    /// (always, with authorization off): the one decision every front end
    /// (Kafka, native, HTTP) asks, read from the local metastore replica.
    pub fn may(
        &self,
        who: security::authz::Requester<'_>,
        operation: metastore::acl::AclOperation,
        resource_type: metastore::acl::ResourceType,
        name: &str,
    ) -> bool {
        let config = &self.config.authz;
        if !config.enabled {
            return true;
        }
        self.node.catalog.read(|s| {
            security::authz::decide(config, s.acls(), who, operation, resource_type, name)
        })
    }

    pub fn begin_shutdown(&self) {
        self.begin_leaving();
        self.shutting_down.send_replace(true);
    }

    /// Keeps the listeners from accepting clients until
    /// [`Broker::open_to_clients`].
    pub fn hold_clients(&self) {
        self.clients_open.send_replace(false);
    }

    pub fn open_to_clients(&self) {
        self.clients_open.send_replace(true);
    }

    /// Waits until the listeners may accept clients; false when `stop`
    /// came first.
    pub async fn clients_may_connect(&self, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
        let mut open = self.clients_open.subscribe();
        tokio::select! {
            biased;
            _ = stop.changed() => false,
            r = open.wait_for(|open| *open) => r.is_ok(),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutting_down.borrow()
    }

    /// A receiver that turns true once shutdown has begun.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutting_down.subscribe()
    }

    /// Resolves once shutdown has begun (long polls stop waiting then).
    pub async fn shutdown_started(&self) {
        let mut rx = self.shutting_down.subscribe();
        let _ = rx.wait_for(|stopping| *stopping).await;
    }
}

/// The write-ahead writer's figures (topics with durability=object-store).
pub fn render_wal(c: &storage::tier::wal::WalCounters) -> String {
    let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut s = String::new();
    for (name, kind, help, v) in [
        (
            "aerostream_wal_objects_total",
            "counter",
            "Write-ahead objects put to object storage for topics with durability=object-store",
            g(&c.objects),
        ),
        (
            "aerostream_wal_bytes_total",
            "counter",
            "Record bytes in write-ahead objects",
            g(&c.bytes),
        ),
        (
            "aerostream_wal_pieces_total",
            "counter",
            "Appended batches made durable through write-ahead objects",
            g(&c.pieces),
        ),
        (
            "aerostream_wal_put_failures_total",
            "counter",
            "Write-ahead object PUTs that failed and were tried again",
            g(&c.put_failures),
        ),
        (
            "aerostream_wal_record_failures_total",
            "counter",
            "Metastore writes of write-ahead ranges that failed and were tried again",
            g(&c.record_failures),
        ),
        (
            "aerostream_wal_refused_total",
            "counter",
            "Appended batches whose range the metastore refused (the partition's leader changed)",
            g(&c.refused),
        ),
        (
            "aerostream_wal_backlog_bytes",
            "gauge",
            "Bytes handed to the write-ahead writer and not yet durable",
            g(&c.backlog_bytes),
        ),
    ] {
        write_metric(&mut s, name, kind, help, v);
    }
    s
}
