//! Settings of `aerostream serve`: flags win over `AEROSTREAM_*` environment
//! variables, which win over the TOML file given with `--config`, which wins
//! over the built-in defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

/// Flags (and their environment variables) of `aerostream serve`.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// TOML file with any of the settings below (keys as in the flag names, with '_').
    #[arg(long, env = "AEROSTREAM_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data folder: partition logs in DIR/log, the metastore in DIR/meta [default: ./data].
    #[arg(long, env = "AEROSTREAM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Kafka listener [default: 127.0.0.1:9092].
    #[arg(long, env = "AEROSTREAM_KAFKA_ADDR")]
    pub kafka_addr: Option<SocketAddr>,
    /// HOST:PORT that Kafka clients are told to connect to [default: the Kafka listener].
    #[arg(long, env = "AEROSTREAM_ADVERTISED_KAFKA_ADDR")]
    pub advertised_kafka_addr: Option<String>,
    /// Native-protocol listener, TCP [default: 127.0.0.1:9091].
    #[arg(long, env = "AEROSTREAM_NATIVE_ADDR")]
    pub native_addr: Option<SocketAddr>,
    /// HOST:PORT that native clients are told to connect to [default: the native listener].
    #[arg(long, env = "AEROSTREAM_ADVERTISED_NATIVE_ADDR")]
    pub advertised_native_addr: Option<String>,
    /// Certificate chain (PEM, leaf first) of the native protocol's QUIC
    /// endpoint, on the UDP port of --native-addr; with --native-tls-key
    /// [default: a certificate issued at start by the agent's own CA, whose
    /// certificate is DATA_DIR/native-tls/ca.pem].
    #[arg(long, env = "AEROSTREAM_NATIVE_TLS_CERT")]
    pub native_tls_cert: Option<PathBuf>,
    /// Private key (PEM: PKCS#8, PKCS#1 or SEC1) of --native-tls-cert.
    #[arg(long, env = "AEROSTREAM_NATIVE_TLS_KEY")]
    pub native_tls_key: Option<PathBuf>,
    /// Certificate chain (PEM, leaf first) that turns on TLS for the Kafka
    /// listener (Kafka's SSL security protocol); with --kafka-tls-key. The
    /// files are re-read when they change, without a restart.
    #[arg(long, env = "AEROSTREAM_KAFKA_TLS_CERT")]
    pub kafka_tls_cert: Option<PathBuf>,
    /// Private key (PEM: PKCS#8, PKCS#1 or SEC1) of --kafka-tls-cert.
    #[arg(long, env = "AEROSTREAM_KAFKA_TLS_KEY")]
    pub kafka_tls_key: Option<PathBuf>,
    /// CA certificates (PEM) that issue Kafka clients' certificates: with
    /// it, a client must present one (mutual TLS). Needs --kafka-tls-cert.
    #[arg(long, env = "AEROSTREAM_KAFKA_TLS_CLIENT_CA")]
    pub kafka_tls_client_ca: Option<PathBuf>,
    /// SASL mechanisms Kafka clients must authenticate with, comma-separated:
    /// PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER [default: none, no
    /// authentication].
    /// Use with TLS: PLAIN sends the password as it is.
    #[arg(long, env = "AEROSTREAM_SASL_MECHANISMS", value_delimiter = ',')]
    pub sasl_mechanisms: Option<Vec<String>>,
    /// A user to create at start when it has no credential yet, NAME:PASSWORD
    /// (SCRAM-SHA-256 and SCRAM-SHA-512; PLAIN checks the same password).
    /// An existing user's credential is left alone.
    #[arg(long, env = "AEROSTREAM_ADMIN_USER")]
    pub admin_user: Option<String>,
    /// How long a SASL session lasts before the client must authenticate
    /// again on the same connection (KIP-368), as Kafka's
    /// connections.max.reauth.ms [default: 0, sessions never end]. A client
    /// that does not re-authenticate in time is disconnected.
    #[arg(long, env = "AEROSTREAM_CONNECTIONS_MAX_REAUTH_MS")]
    pub connections_max_reauth_ms: Option<u64>,
    /// JSON Web Key Set file with the public keys OAUTHBEARER tokens must be
    /// signed with (needed with OAUTHBEARER in --sasl-mechanisms); re-read
    /// when it changes.
    #[arg(long, env = "AEROSTREAM_SASL_OAUTHBEARER_JWKS")]
    pub sasl_oauthbearer_jwks: Option<PathBuf>,
    /// The `iss` claim OAUTHBEARER tokens must carry [default: any].
    #[arg(long, env = "AEROSTREAM_SASL_OAUTHBEARER_ISSUER")]
    pub sasl_oauthbearer_issuer: Option<String>,
    /// An `aud` value OAUTHBEARER tokens must include [default: not checked].
    #[arg(long, env = "AEROSTREAM_SASL_OAUTHBEARER_AUDIENCE")]
    pub sasl_oauthbearer_audience: Option<String>,
    /// The claim that names an OAUTHBEARER token's principal [default: sub].
    #[arg(long, env = "AEROSTREAM_SASL_OAUTHBEARER_SUB_CLAIM")]
    pub sasl_oauthbearer_sub_claim: Option<String>,
    /// Principals allowed everything whatever the ACLs say, comma-separated
    /// (User:alice,User:CN=ops); the --admin-user is always one. ACLs are
    /// enforced when clients authenticate (SASL or mutual TLS).
    #[arg(long, env = "AEROSTREAM_SUPERUSERS", value_delimiter = ',')]
    pub superusers: Option<Vec<String>>,
    /// Allow a request on a resource no ACL names, as Kafka's
    /// allow.everyone.if.no.acl.found [default: false: no ACL means deny].
    #[arg(long, env = "AEROSTREAM_ALLOW_EVERYONE_IF_NO_ACL_FOUND")]
    pub allow_everyone_if_no_acl_found: Option<bool>,
    /// Health and metrics listener [default: 127.0.0.1:9001].
    #[arg(long, env = "AEROSTREAM_HTTP_ADDR")]
    pub http_addr: Option<SocketAddr>,
    /// This node's id [default: 1].
    #[arg(long, env = "AEROSTREAM_NODE_ID")]
    pub node_id: Option<i32>,
    /// Shard runtimes (one thread each) [default: number of cores].
    #[arg(long, env = "AEROSTREAM_SHARDS")]
    pub shards: Option<usize>,
    /// Create topics on first Metadata request, as Kafka's auto.create.topics.enable [default: true].
    #[arg(long, env = "AEROSTREAM_AUTO_CREATE_TOPICS")]
    pub auto_create_topics: Option<bool>,
    /// Partitions of auto-created topics (Kafka's num.partitions) [default: 1].
    #[arg(long, env = "AEROSTREAM_NUM_PARTITIONS")]
    pub num_partitions: Option<i32>,
    /// Largest accepted request frame (socket.request.max.bytes) [default: 104857600].
    #[arg(long, env = "AEROSTREAM_MAX_REQUEST_BYTES")]
    pub max_request_bytes: Option<usize>,
    /// Wait for more members before a new group's first rebalance (group.initial.rebalance.delay.ms) [default: 3000].
    #[arg(long, env = "AEROSTREAM_GROUP_INITIAL_REBALANCE_DELAY_MS")]
    pub group_initial_rebalance_delay_ms: Option<i64>,
    /// Smallest session timeout a consumer may ask for (group.min.session.timeout.ms) [default: 6000].
    #[arg(long, env = "AEROSTREAM_GROUP_MIN_SESSION_TIMEOUT_MS")]
    pub group_min_session_timeout_ms: Option<i32>,
    /// Log filter, as RUST_LOG [default: info].
    #[arg(long, env = "AEROSTREAM_LOG")]
    pub log: Option<String>,
    /// Object storage for sealed segments: s3://bucket/prefix, gs://bucket/prefix,
    /// az://container/prefix or file:///abs/dir; the cloud's usual environment
    /// variables configure it [default: the folder DATA_DIR/objects].
    #[arg(long, env = "AEROSTREAM_OBJECT_STORE")]
    pub object_store: Option<String>,
    /// Memory for cached blocks of cold (tiered) data, e.g. 256MiB [default: 256MiB].
    #[arg(long, env = "AEROSTREAM_CACHE_MEMORY_BYTES", value_parser = parse_bytes)]
    pub cache_memory_bytes: Option<u64>,
    /// Local disk for cached blocks of cold data; 0 disables the disk tier [default: 1GiB].
    #[arg(long, env = "AEROSTREAM_CACHE_DISK_BYTES", value_parser = parse_bytes)]
    pub cache_disk_bytes: Option<u64>,
    /// Folder of the cache's disk tier [default: DATA_DIR/cache].
    #[arg(long, env = "AEROSTREAM_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Local disk for partition data. Segments already in object storage
    /// leave early when it is passed; when data not yet uploaded would pass
    /// it, producers get a retriable KAFKA_STORAGE_ERROR until uploads catch
    /// up [default: 90% of the free space under DATA_DIR at start].
    #[arg(long, env = "AEROSTREAM_LOCAL_DISK_LIMIT", value_parser = parse_bytes)]
    pub local_disk_limit: Option<u64>,
    /// Segment uploads in flight at once [default: 8].
    #[arg(long, env = "AEROSTREAM_UPLOAD_CONCURRENCY")]
    pub upload_concurrency: Option<usize>,
    /// Move deleted objects under PREFIX/tombstones/ (for a bucket lifecycle
    /// rule to expire) instead of deleting them [default: false].
    #[arg(long, env = "AEROSTREAM_OBJECT_STORE_TOMBSTONES")]
    pub object_store_tombstones: Option<bool>,
    /// Acknowledge acks=all writes once in the page cache (true), or only
    /// after an fdatasync shared by the produce requests waiting at that
    /// moment, with consumers seeing only fsynced data (false). The default
    /// of every topic's `write.caching` [default: true].
    #[arg(long, env = "AEROSTREAM_WRITE_CACHING")]
    pub write_caching: Option<bool>,
    /// Kafka connections open at once, across all listeners (max.connections) [default: 4096].
    #[arg(long, env = "AEROSTREAM_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Kafka connections open at once from one address (max.connections.per.ip) [default: 4096].
    #[arg(long, env = "AEROSTREAM_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<usize>,
    /// Close a connection that sends no complete request for this long
    /// (connections.max.idle.ms) [default: 600000].
    #[arg(long, env = "AEROSTREAM_CONNECTIONS_MAX_IDLE_MS")]
    pub connections_max_idle_ms: Option<u64>,
    /// An agent that has not heartbeated the metastore for this long is
    /// fenced and its partitions move to other in-sync replicas; the same
    /// on every agent [default: 3000].
    #[arg(long, env = "AEROSTREAM_AGENT_LEASE_MS")]
    pub agent_lease_ms: Option<u64>,
    /// A follower not caught up with its leader for this long leaves the
    /// partition's in-sync replicas (replica.lag.time.max.ms) [default: 30000].
    #[arg(long, env = "AEROSTREAM_REPLICA_LAG_TIME_MAX_MS")]
    pub replica_lag_time_max_ms: Option<u64>,
    /// Partition moves the metastore leader's balancer keeps under way at
    /// once (draining agents, spreading replicas and leaders); 0 turns
    /// balancing off [default: 3].
    #[arg(long, env = "AEROSTREAM_PARTITION_MOVES")]
    pub partition_moves: Option<usize>,
    /// Request bytes being served at once, broker-wide; connections wait for
    /// room before reading more (queued.max.request.bytes) [default: 512MiB].
    #[arg(long, env = "AEROSTREAM_QUEUED_MAX_REQUEST_BYTES", value_parser = parse_bytes)]
    pub queued_max_request_bytes: Option<u64>,
    /// UDP address (QUIC) for the metastore and other agents; used with
    /// --voters [default: 127.0.0.1:9093].
    #[arg(long, env = "AEROSTREAM_CLUSTER_ADDR")]
    pub cluster_addr: Option<SocketAddr>,
    /// HOST:PORT other agents dial to reach this one [default: this agent's
    /// entry in --voters, else --cluster-addr].
    #[arg(long, env = "AEROSTREAM_ADVERTISED_CLUSTER_ADDR")]
    pub advertised_cluster_addr: Option<String>,
    /// The metastore voters, ID@HOST:PORT,... (1, 3 or 5 entries, the same
    /// list on every agent). Without it the agent is a one-node cluster of
    /// its own [default: none].
    #[arg(long, env = "AEROSTREAM_VOTERS")]
    pub voters: Option<String>,
    /// Rack or availability zone of this agent (Kafka's broker.rack) [default: none].
    #[arg(long, env = "AEROSTREAM_RACK")]
    pub rack: Option<String>,
    /// Behind a load balancer: every agent advertises the balancer's address
    /// (--advertised-kafka-addr), clients see the cluster as one broker and
    /// each agent forwards requests for data or groups it does not own to
    /// the agent that does; the same on every agent; used with --voters
    /// [default: false].
    #[arg(long, env = "AEROSTREAM_LOAD_BALANCED", num_args = 0..=1, default_missing_value = "true")]
    pub load_balanced: Option<bool>,
    /// Folder with the cluster CA (ca.pem) and this agent's certificate
    /// (node-ID.pem, node-ID.key), as `aerostream cluster-ca` writes them;
    /// used with --voters [default: DATA_DIR/certs].
    #[arg(long, env = "AEROSTREAM_CLUSTER_CERTS")]
    pub cluster_certs: Option<PathBuf>,
    /// OTLP/HTTP (protobuf) collector to export metrics and sampled traces
    /// to, e.g. http://127.0.0.1:4318 (paths /v1/metrics and /v1/traces are
    /// added) [default: none: nothing is exported].
    #[arg(long, env = "AEROSTREAM_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Share of produce, fetch, replication and cold-read requests traced
    /// when --otlp-endpoint is set, from 0 to 1 [default: 0.01].
    #[arg(long, env = "AEROSTREAM_OTLP_SAMPLE_RATIO")]
    pub otlp_sample_ratio: Option<f64>,
    /// How often metrics go to the OTLP collector, in milliseconds [default: 10000].
    #[arg(long, env = "AEROSTREAM_OTLP_EXPORT_INTERVAL_MS")]
    pub otlp_export_interval_ms: Option<u64>,
    /// Most per-(topic, partition) and per-(group, topic) series /metrics
    /// shows each; the rest are summed under topic="other" [default: 1000].
    #[arg(long, env = "AEROSTREAM_METRICS_MAX_SERIES")]
    pub metrics_max_series: Option<usize>,
    /// Testing only: wrap the object store in a fault injector controlled at
    /// HTTP /admin/object-store/faults.
    #[cfg(feature = "fault-injection")]
    #[arg(long, env = "AEROSTREAM_OBJECT_STORE_FAULTS", hide = true)]
    pub object_store_faults: Option<bool>,
}

/// Parses a byte count: digits with an optional binary unit (KiB, MiB, GiB,
/// TiB; also K, M, G, T, KB, MB, GB, TB as the same powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a byte count like 1048576 or 256MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown unit '{other}' in '{s}'")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{s}' is too large"))
}

fn bytes_de<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::N(n)) => Ok(Some(n)),
        Some(Raw::S(s)) => parse_bytes(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

/// The same settings as read from the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    data_dir: Option<PathBuf>,
    kafka_addr: Option<SocketAddr>,
    advertised_kafka_addr: Option<String>,
    native_addr: Option<SocketAddr>,
    advertised_native_addr: Option<String>,
    native_tls_cert: Option<PathBuf>,
    native_tls_key: Option<PathBuf>,
    kafka_tls_cert: Option<PathBuf>,
    kafka_tls_key: Option<PathBuf>,
    kafka_tls_client_ca: Option<PathBuf>,
    sasl_mechanisms: Option<Vec<String>>,
    admin_user: Option<String>,
    superusers: Option<Vec<String>>,
    allow_everyone_if_no_acl_found: Option<bool>,
    connections_max_reauth_ms: Option<u64>,
    sasl_oauthbearer_jwks: Option<PathBuf>,
    sasl_oauthbearer_issuer: Option<String>,
    sasl_oauthbearer_audience: Option<String>,
    sasl_oauthbearer_sub_claim: Option<String>,
    http_addr: Option<SocketAddr>,
    node_id: Option<i32>,
    shards: Option<usize>,
    auto_create_topics: Option<bool>,
    num_partitions: Option<i32>,
    max_request_bytes: Option<usize>,
    group_initial_rebalance_delay_ms: Option<i64>,
    group_min_session_timeout_ms: Option<i32>,
    log: Option<String>,
    object_store: Option<String>,
    #[serde(default, deserialize_with = "bytes_de")]
    cache_memory_bytes: Option<u64>,
    #[serde(default, deserialize_with = "bytes_de")]
    cache_disk_bytes: Option<u64>,
    cache_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "bytes_de")]
    local_disk_limit: Option<u64>,
    upload_concurrency: Option<usize>,
    object_store_tombstones: Option<bool>,
    write_caching: Option<bool>,
    max_connections: Option<usize>,
    max_connections_per_ip: Option<usize>,
    connections_max_idle_ms: Option<u64>,
    replica_lag_time_max_ms: Option<u64>,
    partition_moves: Option<usize>,
    agent_lease_ms: Option<u64>,
    #[serde(default, deserialize_with = "bytes_de")]
    queued_max_request_bytes: Option<u64>,
    cluster_addr: Option<SocketAddr>,
    advertised_cluster_addr: Option<String>,
    #[serde(default, deserialize_with = "voters_de")]
    voters: Option<String>,
    rack: Option<String>,
    load_balanced: Option<bool>,
    cluster_certs: Option<PathBuf>,
    otlp_endpoint: Option<String>,
    otlp_sample_ratio: Option<f64>,
    otlp_export_interval_ms: Option<u64>,
    metrics_max_series: Option<usize>,
}

/// `voters` in the file: the flag's string, or an array of its entries.
fn voters_de<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        One(String),
        List(Vec<String>),
    }
    Ok(Option::<Raw>::deserialize(d)?.map(|r| match r {
        Raw::One(s) => s,
        Raw::List(l) => l.join(","),
    }))
}

/// How this agent takes part in a cluster (`--voters` given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// Bound UDP address of the agent's QUIC endpoint.
    pub cluster_addr: SocketAddr,
    /// HOST:PORT peers dial.
    pub advertised_cluster_addr: String,
    /// The metastore voters: id -> HOST:PORT.
    pub voters: BTreeMap<u64, String>,
    /// Where ca.pem and node-ID.{pem,key} are.
    pub certs_dir: PathBuf,
}

impl ClusterSettings {
    /// Whether `node` is one of the metastore voters (else it joins as a learner).
    pub fn is_voter(&self, node: u64) -> bool {
        self.voters.contains_key(&node)
    }

    /// `1@host:port, 2@host:port, ...` for messages.
    pub fn describe_voters(&self, except: Option<u64>) -> String {
        self.voters
            .iter()
            .filter(|(id, _)| Some(**id) != except)
            .map(|(id, a)| format!("{id}@{a}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Largest voter count a cluster may have: more voters only slow writes down.
const MAX_VOTERS: usize = 5;

/// Parses `ID@HOST:PORT,...`: 1, 3 or 5 voters, distinct ids and addresses,
/// ids that fit a Kafka broker id.
pub fn parse_voters(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut voters = BTreeMap::new();
    let mut addrs = std::collections::BTreeSet::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, addr) = entry.split_once('@').with_context(|| {
            format!("--voters entry '{entry}' is not ID@HOST:PORT (for example 1@10.0.0.1:9093)")
        })?;
        let id: u64 = id.trim().parse().with_context(|| {
            format!(
                "--voters entry '{entry}' has an id that is not a number from 0 to {}",
                i32::MAX
            )
        })?;
        anyhow::ensure!(
            id <= i32::MAX as u64,
            "--voters entry '{entry}': node ids must fit a Kafka broker id (at most {})",
            i32::MAX
        );
        let (host, port) = parse_host_port(addr.trim(), "--voters entry")?;
        let addr = join_host_port(&host, port);
        anyhow::ensure!(
            voters.insert(id, addr.clone()).is_none(),
            "node {id} appears twice in --voters"
        );
        anyhow::ensure!(
            addrs.insert(addr.clone()),
            "address {addr} appears twice in --voters"
        );
    }
    let n = voters.len();
    anyhow::ensure!(
        n > 0,
        "--voters is empty; list the voters as ID@HOST:PORT,..."
    );
    anyhow::ensure!(
        n % 2 == 1 && n <= MAX_VOTERS,
        "--voters lists {n} voters; the metastore needs 1, 3 or 5 (an odd number, at most {MAX_VOTERS})"
    );
    Ok(voters)
}

/// `host:port`, with brackets around an IPv6 host.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Resolved settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub kafka_addr: SocketAddr,
    pub advertised_kafka_addr: Option<(String, u16)>,
    pub native_addr: SocketAddr,
    pub advertised_native_addr: Option<(String, u16)>,
    /// The native QUIC endpoint's certificate and key files; `None`: the
    /// agent's own CA issues one at start.
    pub native_tls: Option<NativeTlsFiles>,
    /// TLS on the Kafka listener; `None` serves plaintext.
    pub kafka_tls: Option<KafkaTlsFiles>,
    /// SASL mechanisms of the Kafka listener; empty: no authentication.
    pub sasl_mechanisms: Vec<gateway::sasl::Mechanism>,
    /// (name, password) to create at start.
    pub admin_user: Option<(String, String)>,
    /// ACL authorization: on when clients authenticate.
    pub authz: dataplane::policy::authz::AuthzConfig,
    /// How OAUTHBEARER tokens are checked, with that mechanism on.
    pub oauthbearer: Option<gateway::sasl::oauthbearer::OAuthConfig>,
    /// connections.max.reauth.ms; `None` for 0.
    pub sasl_max_session: Option<Duration>,
    pub http_addr: SocketAddr,
    pub node_id: i32,
    pub shards: usize,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    pub max_request_bytes: usize,
    pub group_initial_rebalance_delay_ms: i64,
    pub group_min_session_timeout_ms: i32,
    pub log: String,
    /// `None`: the folder DATA_DIR/objects.
    pub object_store: Option<String>,
    pub cache_memory_bytes: u64,
    /// 0: no disk tier.
    pub cache_disk_bytes: u64,
    pub cache_dir: PathBuf,
    /// `None`: worked out from the free space at start.
    pub local_disk_limit: Option<u64>,
    pub upload_concurrency: usize,
    pub object_store_tombstones: bool,
    pub write_caching: bool,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub connections_max_idle_ms: u64,
    pub replica_lag_time_max_ms: u64,
    pub partition_moves: usize,
    pub agent_lease_ms: u64,
    pub queued_max_request_bytes: u64,
    /// Kafka's broker.rack.
    pub rack: Option<String>,
    /// Load-balancer mode (forwarding to owners).
    pub load_balanced: bool,
    /// `None`: the embedded one-node metastore (no --voters).
    pub cluster: Option<ClusterSettings>,
    /// `None`: no OpenTelemetry export.
    pub otlp_endpoint: Option<String>,
    pub otlp_sample_ratio: f64,
    pub otlp_export_interval_ms: u64,
    pub metrics_max_series: usize,
    #[cfg(feature = "fault-injection")]
    pub object_store_faults: bool,
}

/// `--native-tls-cert` and `--native-tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeTlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Both files or neither.
fn resolve_native_tls(
    args: &ServeArgs,
    file: &FileSettings,
) -> anyhow::Result<Option<NativeTlsFiles>> {
    let cert = args
        .native_tls_cert
        .clone()
        .or_else(|| file.native_tls_cert.clone());
    let key = args
        .native_tls_key
        .clone()
        .or_else(|| file.native_tls_key.clone());
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(NativeTlsFiles { cert, key })),
        (None, None) => Ok(None),
        (Some(_), None) => anyhow::bail!(
            "--native-tls-cert is set but --native-tls-key is not: the QUIC endpoint needs the \
             certificate's private key too (or leave both out for a certificate from the agent's own CA)"
        ),
        (None, Some(_)) => anyhow::bail!(
            "--native-tls-key is set but --native-tls-cert is not: the QUIC endpoint needs the \
             certificate too (or leave both out for a certificate from the agent's own CA)"
        ),
    }
}

/// `--kafka-tls-cert`, `--kafka-tls-key` and `--kafka-tls-client-ca`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// Certificate and key both or neither; a client CA only with them.
fn resolve_kafka_tls(
    args: &ServeArgs,
    file: &FileSettings,
) -> anyhow::Result<Option<KafkaTlsFiles>> {
    let cert = args
        .kafka_tls_cert
        .clone()
        .or_else(|| file.kafka_tls_cert.clone());
    let key = args
        .kafka_tls_key
        .clone()
        .or_else(|| file.kafka_tls_key.clone());
    let client_ca = args
        .kafka_tls_client_ca
        .clone()
        .or_else(|| file.kafka_tls_client_ca.clone());
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(KafkaTlsFiles {
            cert,
            key,
            client_ca,
        })),
        (None, None) if client_ca.is_some() => anyhow::bail!(
            "--kafka-tls-client-ca is set but --kafka-tls-cert is not: clients present their \
             certificates over TLS, so the listener needs its own certificate and key too"
        ),
        (None, None) => Ok(None),
        (Some(_), None) => anyhow::bail!(
            "--kafka-tls-cert is set but --kafka-tls-key is not: the Kafka listener needs the \
             certificate's private key too"
        ),
        (None, Some(_)) => anyhow::bail!(
            "--kafka-tls-key is set but --kafka-tls-cert is not: the Kafka listener needs the \
             certificate too"
        ),
    }
}

fn parse_host_port(s: &str, what: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = s
        .rsplit_once(':')
        .with_context(|| format!("{what} '{s}' is not HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .with_context(|| format!("{what} '{s}' has a bad port"))?;
    let host = host.trim_matches(['[', ']']);
    anyhow::ensure!(!host.is_empty(), "{what} '{s}' has no host");
    Ok((host.to_string(), port))
}

/// The cluster part of the settings, checked: see [`ClusterSettings`].
fn resolve_cluster(
    args: &ServeArgs,
    file: &FileSettings,
    node_id: i32,
    data_dir: &Path,
) -> anyhow::Result<Option<ClusterSettings>> {
    let voters = args.voters.clone().or_else(|| file.voters.clone());
    let cluster_addr = args.cluster_addr.or(file.cluster_addr);
    let advertised = args
        .advertised_cluster_addr
        .clone()
        .or_else(|| file.advertised_cluster_addr.clone());
    let certs = args
        .cluster_certs
        .clone()
        .or_else(|| file.cluster_certs.clone());
    let Some(voters) = voters else {
        for (set, flag) in [
            (cluster_addr.is_some(), "--cluster-addr"),
            (advertised.is_some(), "--advertised-cluster-addr"),
            (certs.is_some(), "--cluster-certs"),
        ] {
            anyhow::ensure!(
                !set,
                "{flag} is set but --voters is not: a cluster needs the list of metastore voters"
            );
        }
        return Ok(None);
    };
    let voters = parse_voters(&voters)?;
    let node = u64::try_from(node_id).context("--node-id must not be negative")?;
    let cluster_addr = cluster_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9093)));
    let advertised = match advertised {
        Some(a) => {
            let (host, port) = parse_host_port(&a, "--advertised-cluster-addr")?;
            Some(join_host_port(&host, port))
        }
        None => None,
    };
    let advertised_cluster_addr = match (voters.get(&node), advertised) {
        (Some(mine), Some(a)) => {
            anyhow::ensure!(
                *mine == a,
                "node {node} is listed in --voters as {node}@{mine} but advertises {a}; \
                 peers dial the address in --voters, so the two must be the same"
            );
            a
        }
        (Some(mine), None) => mine.clone(),
        (None, Some(a)) => a,
        (None, None) => {
            anyhow::ensure!(
                !cluster_addr.ip().is_unspecified(),
                "--cluster-addr {cluster_addr} cannot be dialled by other agents; \
                 set --advertised-cluster-addr to this agent's reachable HOST:PORT"
            );
            cluster_addr.to_string()
        }
    };
    Ok(Some(ClusterSettings {
        cluster_addr,
        advertised_cluster_addr,
        voters,
        certs_dir: certs.unwrap_or_else(|| data_dir.join("certs")),
    }))
}

impl Settings {
    /// Merges flags/env with the TOML file (if any) and the defaults.
    pub fn resolve(args: &ServeArgs) -> anyhow::Result<Settings> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileSettings::default(),
        };
        let cores = std::thread::available_parallelism()
            .map(|c| c.get())
            .unwrap_or(1);
        let advertised = args
            .advertised_kafka_addr
            .clone()
            .or_else(|| file.advertised_kafka_addr.clone());
        let data_dir = args
            .data_dir
            .clone()
            .or_else(|| file.data_dir.clone())
            .unwrap_or_else(|| PathBuf::from("./data"));
        let node_id = args.node_id.or(file.node_id).unwrap_or(1);
        let cluster = resolve_cluster(args, &file, node_id, &data_dir)?;
        let native_tls = resolve_native_tls(args, &file)?;
        let kafka_tls = resolve_kafka_tls(args, &file)?;
        let mut sasl_mechanisms = Vec::new();
        for name in args
            .sasl_mechanisms
            .clone()
            .or_else(|| file.sasl_mechanisms.clone())
            .unwrap_or_default()
        {
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            let m = gateway::sasl::Mechanism::from_name(name).with_context(|| {
                format!("unknown SASL mechanism {name}: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
            })?;
            if !sasl_mechanisms.contains(&m) {
                sasl_mechanisms.push(m);
            }
        }
        let admin_user = match args.admin_user.clone().or_else(|| file.admin_user.clone()) {
            None => None,
            Some(pair) => {
                let (name, password) = pair
                    .split_once(':')
                    .filter(|(n, p)| !n.is_empty() && !p.is_empty())
                    .context("--admin-user is NAME:PASSWORD, both non-empty")?;
                Some((name.to_string(), password.to_string()))
            }
        };
        let jwks = args
            .sasl_oauthbearer_jwks
            .clone()
            .or_else(|| file.sasl_oauthbearer_jwks.clone());
        let oauthbearer = match (sasl_mechanisms.contains(&gateway::sasl::Mechanism::OAuthBearer), jwks) {
            (true, Some(jwks)) => Some(gateway::sasl::oauthbearer::OAuthConfig {
                jwks,
                issuer: args
                    .sasl_oauthbearer_issuer
                    .clone()
                    .or_else(|| file.sasl_oauthbearer_issuer.clone()),
                audience: args
                    .sasl_oauthbearer_audience
                    .clone()
                    .or_else(|| file.sasl_oauthbearer_audience.clone()),
                principal_claim: args
                    .sasl_oauthbearer_sub_claim
                    .clone()
                    .or_else(|| file.sasl_oauthbearer_sub_claim.clone())
                    .unwrap_or_else(|| "sub".into()),
            }),
            (true, None) => anyhow::bail!(
                "OAUTHBEARER needs --sasl-oauthbearer-jwks: the issuer's public keys its tokens are checked with"
            ),
            (false, Some(_)) => anyhow::bail!(
                "--sasl-oauthbearer-jwks is set but OAUTHBEARER is not in --sasl-mechanisms"
            ),
            (false, None) => None,
        };
        let mut superusers = Vec::new();
        for p in args
            .superusers
            .clone()
            .or_else(|| file.superusers.clone())
            .unwrap_or_default()
        {
            let p = p.trim();
            if p.is_empty() {
                continue;
            }
            if !p
                .split_once(':')
                .is_some_and(|(k, n)| !k.is_empty() && !n.is_empty())
            {
                anyhow::bail!("--superusers takes principals as Type:name (User:alice), not {p}");
            }
            superusers.push(p.to_string());
        }
        if let Some((name, _)) = &admin_user {
            superusers.push(format!("User:{name}"));
        }
        let authz = dataplane::policy::authz::AuthzConfig {
            enabled: !sasl_mechanisms.is_empty()
                || kafka_tls.as_ref().is_some_and(|t| t.client_ca.is_some()),
            superusers,
            allow_if_no_acl: args
                .allow_everyone_if_no_acl_found
                .or(file.allow_everyone_if_no_acl_found)
                .unwrap_or(false),
        };
        let s = Settings {
            data_dir,
            kafka_addr: args
                .kafka_addr
                .or(file.kafka_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9092))),
            advertised_kafka_addr: advertised
                .as_deref()
                .map(|a| parse_host_port(a, "advertised address"))
                .transpose()?,
            native_addr: args
                .native_addr
                .or(file.native_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9091))),
            advertised_native_addr: args
                .advertised_native_addr
                .clone()
                .or_else(|| file.advertised_native_addr.clone())
                .as_deref()
                .map(|a| parse_host_port(a, "advertised native address"))
                .transpose()?,
            native_tls,
            kafka_tls,
            sasl_mechanisms,
            admin_user,
            authz,
            oauthbearer,
            sasl_max_session: args
                .connections_max_reauth_ms
                .or(file.connections_max_reauth_ms)
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            http_addr: args
                .http_addr
                .or(file.http_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9001))),
            node_id,
            shards: args.shards.or(file.shards).unwrap_or(cores),
            auto_create_topics: args
                .auto_create_topics
                .or(file.auto_create_topics)
                .unwrap_or(true),
            num_partitions: args.num_partitions.or(file.num_partitions).unwrap_or(1),
            max_request_bytes: args
                .max_request_bytes
                .or(file.max_request_bytes)
                .unwrap_or(100 * 1024 * 1024),
            group_initial_rebalance_delay_ms: args
                .group_initial_rebalance_delay_ms
                .or(file.group_initial_rebalance_delay_ms)
                .unwrap_or(3000),
            group_min_session_timeout_ms: args
                .group_min_session_timeout_ms
                .or(file.group_min_session_timeout_ms)
                .unwrap_or(6000),
            log: args
                .log
                .clone()
                .or(file.log)
                .unwrap_or_else(|| "info".into()),
            object_store: args.object_store.clone().or(file.object_store),
            cache_memory_bytes: args
                .cache_memory_bytes
                .or(file.cache_memory_bytes)
                .unwrap_or(256 << 20),
            cache_disk_bytes: args
                .cache_disk_bytes
                .or(file.cache_disk_bytes)
                .unwrap_or(1 << 30),
            cache_dir: PathBuf::new(),
            local_disk_limit: args.local_disk_limit.or(file.local_disk_limit),
            upload_concurrency: args
                .upload_concurrency
                .or(file.upload_concurrency)
                .unwrap_or(8),
            object_store_tombstones: args
                .object_store_tombstones
                .or(file.object_store_tombstones)
                .unwrap_or(false),
            write_caching: args.write_caching.or(file.write_caching).unwrap_or(true),
            max_connections: args
                .max_connections
                .or(file.max_connections)
                .unwrap_or(4096),
            max_connections_per_ip: args
                .max_connections_per_ip
                .or(file.max_connections_per_ip)
                .unwrap_or(4096),
            connections_max_idle_ms: args
                .connections_max_idle_ms
                .or(file.connections_max_idle_ms)
                .unwrap_or(600_000),
            replica_lag_time_max_ms: args
                .replica_lag_time_max_ms
                .or(file.replica_lag_time_max_ms)
                .unwrap_or(30_000),
            partition_moves: args
                .partition_moves
                .or(file.partition_moves)
                .unwrap_or(metastore::balance::DEFAULT_MAX_IN_FLIGHT),
            agent_lease_ms: args.agent_lease_ms.or(file.agent_lease_ms).unwrap_or(3_000),
            queued_max_request_bytes: args
                .queued_max_request_bytes
                .or(file.queued_max_request_bytes)
                .unwrap_or(512 << 20),
            rack: args.rack.clone().or(file.rack),
            load_balanced: args.load_balanced.or(file.load_balanced).unwrap_or(false),
            cluster,
            otlp_endpoint: args
                .otlp_endpoint
                .clone()
                .or(file.otlp_endpoint)
                .filter(|e| !e.trim().is_empty()),
            otlp_sample_ratio: args
                .otlp_sample_ratio
                .or(file.otlp_sample_ratio)
                .unwrap_or(0.01),
            otlp_export_interval_ms: args
                .otlp_export_interval_ms
                .or(file.otlp_export_interval_ms)
                .unwrap_or(10_000),
            metrics_max_series: args
                .metrics_max_series
                .or(file.metrics_max_series)
                .unwrap_or(gateway::broker::DEFAULT_METRICS_MAX_SERIES),
            #[cfg(feature = "fault-injection")]
            object_store_faults: args.object_store_faults.unwrap_or(false),
        };
        let s = Settings {
            cache_dir: args
                .cache_dir
                .clone()
                .or(file.cache_dir)
                .unwrap_or_else(|| s.data_dir.join("cache")),
            ..s
        };
        if let Some(rack) = &s.rack {
            anyhow::ensure!(
                !rack.trim().is_empty(),
                "--rack is empty; leave it out or name the rack"
            );
        }
        anyhow::ensure!(
            !s.load_balanced || s.cluster.is_some(),
            "--load-balanced needs a cluster (--voters): one agent has no other agent to forward to"
        );
        anyhow::ensure!(
            s.upload_concurrency >= 1,
            "--upload-concurrency must be at least 1"
        );
        anyhow::ensure!(
            s.cache_memory_bytes >= 1 << 20,
            "--cache-memory-bytes must be at least 1MiB"
        );
        anyhow::ensure!(
            s.cache_disk_bytes == 0 || s.cache_disk_bytes >= 64 << 20,
            "--cache-disk-bytes must be 0 (no disk tier) or at least 64MiB"
        );
        anyhow::ensure!(s.shards >= 1, "--shards must be at least 1");
        anyhow::ensure!(s.num_partitions >= 1, "--num-partitions must be at least 1");
        anyhow::ensure!(
            s.max_request_bytes >= 1024,
            "--max-request-bytes must be at least 1024"
        );
        anyhow::ensure!(
            s.max_connections >= 1,
            "--max-connections must be at least 1"
        );
        anyhow::ensure!(
            s.max_connections_per_ip >= 1,
            "--max-connections-per-ip must be at least 1"
        );
        anyhow::ensure!(
            s.connections_max_idle_ms >= 1000,
            "--connections-max-idle-ms must be at least 1000"
        );
        anyhow::ensure!(
            s.replica_lag_time_max_ms >= 100,
            "--replica-lag-time-max-ms must be at least 100"
        );
        anyhow::ensure!(
            s.agent_lease_ms >= 500,
            "--agent-lease-ms must be at least 500 (an agent heartbeats several times per lease)"
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&s.otlp_sample_ratio),
            "--otlp-sample-ratio must be between 0 and 1"
        );
        anyhow::ensure!(
            s.otlp_export_interval_ms >= 100,
            "--otlp-export-interval-ms must be at least 100"
        );
        anyhow::ensure!(
            s.metrics_max_series >= 1,
            "--metrics-max-series must be at least 1"
        );
        if let Some(e) = &s.otlp_endpoint {
            anyhow::ensure!(
                e.starts_with("http://") || e.starts_with("https://"),
                "--otlp-endpoint must be an http:// or https:// URL, not {e}"
            );
        }
        anyhow::ensure!(
            s.queued_max_request_bytes >= 1 << 20,
            "--queued-max-request-bytes must be at least 1MiB"
        );
        Ok(s)
    }
}

fn read_file(path: &Path) -> anyhow::Result<FileSettings> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {} is invalid", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "node_id = 7\nshards = 3\nkafka_addr = \"127.0.0.1:19092\""
        )
        .expect("write");
        let args = ServeArgs {
            config: Some(f.path().to_path_buf()),
            shards: Some(2),
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("valid");
        assert_eq!(s.shards, 2, "flag wins");
        assert_eq!(s.node_id, 7, "file wins over default");
        assert_eq!(s.kafka_addr.port(), 19092);
        assert_eq!(s.data_dir, PathBuf::from("./data"), "default");
    }

    #[test]
    fn unknown_file_keys_and_bad_addresses_are_errors() {
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(f, "no_such_setting = 1").expect("write");
        let args = ServeArgs {
            config: Some(f.path().to_path_buf()),
            ..Default::default()
        };
        assert!(Settings::resolve(&args).is_err());
        let args = ServeArgs {
            advertised_kafka_addr: Some("nohost".into()),
            ..Default::default()
        };
        assert!(Settings::resolve(&args).is_err());
    }

    #[test]
    fn telemetry_is_off_by_default_and_set_from_the_file_or_flags() {
        let s = Settings::resolve(&ServeArgs::default()).expect("valid");
        assert_eq!(s.otlp_endpoint, None, "nothing exported unless asked");
        assert_eq!(s.otlp_sample_ratio, 0.01);
        assert_eq!(s.metrics_max_series, 1000);
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "otlp_endpoint = \"http://collector:4318\"\notlp_sample_ratio = 0.5\nmetrics_max_series = 20\notlp_export_interval_ms = 2000"
        )
        .expect("write");
        let args = ServeArgs {
            config: Some(f.path().to_path_buf()),
            otlp_sample_ratio: Some(1.0),
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("valid");
        assert_eq!(s.otlp_endpoint.as_deref(), Some("http://collector:4318"));
        assert_eq!(s.otlp_sample_ratio, 1.0, "flag wins");
        assert_eq!(s.metrics_max_series, 20);
        assert_eq!(s.otlp_export_interval_ms, 2000);
        for bad in [
            ServeArgs {
                otlp_sample_ratio: Some(1.5),
                ..Default::default()
            },
            ServeArgs {
                otlp_endpoint: Some("collector:4318".into()),
                ..Default::default()
            },
            ServeArgs {
                metrics_max_series: Some(0),
                ..Default::default()
            },
        ] {
            assert!(Settings::resolve(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn byte_counts_take_binary_units() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("1 kb"), Ok(1024));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("MiB").is_err());
        assert!(parse_bytes("99999999999TiB").is_err());
    }

    #[test]
    fn tiering_settings_default_under_the_data_dir_and_read_units_from_the_file() {
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "data_dir = \"/d\"\ncache_disk_bytes = \"128MiB\"\nlocal_disk_limit = 4096000000"
        )
        .expect("write");
        let args = ServeArgs {
            config: Some(f.path().to_path_buf()),
            object_store: Some("s3://b/p".into()),
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("valid");
        assert_eq!(s.cache_dir, PathBuf::from("/d/cache"));
        assert_eq!(s.cache_disk_bytes, 128 << 20);
        assert_eq!(s.local_disk_limit, Some(4_096_000_000));
        assert_eq!(s.object_store.as_deref(), Some("s3://b/p"));
        assert_eq!(s.upload_concurrency, 8);
        let tiny = ServeArgs {
            cache_disk_bytes: Some(1 << 20),
            ..Default::default()
        };
        assert!(
            Settings::resolve(&tiny).is_err(),
            "a disk tier below 64MiB is refused"
        );
    }

    #[test]
    fn kafka_tls_files_come_both_or_neither_and_the_client_ca_only_with_them() {
        assert_eq!(
            Settings::resolve(&ServeArgs::default())
                .expect("valid")
                .kafka_tls,
            None
        );
        let s = Settings::resolve(&ServeArgs {
            kafka_tls_cert: Some("/c.pem".into()),
            kafka_tls_key: Some("/k.pem".into()),
            kafka_tls_client_ca: Some("/ca.pem".into()),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!(
            s.kafka_tls,
            Some(KafkaTlsFiles {
                cert: "/c.pem".into(),
                key: "/k.pem".into(),
                client_ca: Some("/ca.pem".into()),
            })
        );
        let err = error_of(&ServeArgs {
            kafka_tls_cert: Some("/c.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--kafka-tls-key is not"), "{err}");
        let err = error_of(&ServeArgs {
            kafka_tls_key: Some("/k.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--kafka-tls-cert is not"), "{err}");
        let err = error_of(&ServeArgs {
            kafka_tls_client_ca: Some("/ca.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--kafka-tls-cert is not"), "{err}");

        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "kafka_tls_cert = \"/f/cert.pem\"\nkafka_tls_key = \"/f/key.pem\""
        )
        .expect("write");
        let s = Settings::resolve(&ServeArgs {
            config: Some(f.path().to_path_buf()),
            ..Default::default()
        })
        .expect("valid");
        let files = s.kafka_tls.expect("from the file");
        assert_eq!(
            (files.cert, files.client_ca),
            (PathBuf::from("/f/cert.pem"), None)
        );
    }

    #[test]
    fn native_tls_files_come_both_or_neither() {
        assert_eq!(
            Settings::resolve(&ServeArgs::default())
                .expect("valid")
                .native_tls,
            None
        );
        let s = Settings::resolve(&ServeArgs {
            native_tls_cert: Some("/etc/a/cert.pem".into()),
            native_tls_key: Some("/etc/a/key.pem".into()),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!(
            s.native_tls,
            Some(NativeTlsFiles {
                cert: "/etc/a/cert.pem".into(),
                key: "/etc/a/key.pem".into()
            })
        );
        let err = error_of(&ServeArgs {
            native_tls_cert: Some("/c.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--native-tls-key is not"), "{err}");
        let err = error_of(&ServeArgs {
            native_tls_key: Some("/k.pem".into()),
            ..Default::default()
        });
        assert!(err.contains("--native-tls-cert is not"), "{err}");

        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "native_tls_cert = \"/f/cert.pem\"\nnative_tls_key = \"/f/key.pem\""
        )
        .expect("write");
        let s = Settings::resolve(&ServeArgs {
            config: Some(f.path().to_path_buf()),
            native_tls_key: Some("/flag/key.pem".into()),
            ..Default::default()
        })
        .expect("valid");
        let files = s.native_tls.expect("from the file");
        assert_eq!(files.cert, PathBuf::from("/f/cert.pem"));
        assert_eq!(files.key, PathBuf::from("/flag/key.pem"), "the flag wins");
    }

    #[test]
    fn advertised_address_splits_host_and_port() {
        assert_eq!(
            parse_host_port("broker-1:9093", "address").expect("ok"),
            ("broker-1".to_string(), 9093)
        );
        assert_eq!(
            parse_host_port("[::1]:9093", "address").expect("ok"),
            ("::1".to_string(), 9093)
        );
    }

    fn cluster_args(node_id: i32, voters: &str) -> ServeArgs {
        ServeArgs {
            node_id: Some(node_id),
            voters: Some(voters.into()),
            ..Default::default()
        }
    }

    fn error_of(args: &ServeArgs) -> String {
        format!("{:#}", Settings::resolve(args).expect_err("refused"))
    }

    #[test]
    fn without_voters_the_agent_is_the_embedded_single_node() {
        let s = Settings::resolve(&ServeArgs::default()).expect("valid");
        assert_eq!(s.cluster, None);
        assert_eq!(s.rack, None);
        let err = error_of(&ServeArgs {
            cluster_addr: Some("127.0.0.1:9093".parse().expect("addr")),
            ..Default::default()
        });
        assert!(err.contains("--voters is not"), "{err}");
    }

    #[test]
    fn a_voter_advertises_its_entry_and_a_learner_its_cluster_address() {
        let voters = "1@127.0.0.1:19093, 2@127.0.0.1:29093,3@[::1]:39093";
        let s = Settings::resolve(&ServeArgs {
            rack: Some("az-1".into()),
            ..cluster_args(2, voters)
        })
        .expect("valid");
        let c = s.cluster.expect("cluster mode");
        assert_eq!(c.voters.len(), 3);
        assert_eq!(c.voters[&3], "[::1]:39093");
        assert!(c.is_voter(2));
        assert_eq!(
            c.advertised_cluster_addr, "127.0.0.1:29093",
            "from --voters"
        );
        assert_eq!(c.cluster_addr.port(), 9093, "default bind");
        assert_eq!(c.certs_dir, PathBuf::from("./data/certs"));
        assert_eq!(s.rack.as_deref(), Some("az-1"));

        let s = Settings::resolve(&ServeArgs {
            cluster_addr: Some("127.0.0.1:49093".parse().expect("addr")),
            cluster_certs: Some("/etc/aerostream/certs".into()),
            ..cluster_args(4, voters)
        })
        .expect("valid");
        let c = s.cluster.expect("cluster mode");
        assert!(!c.is_voter(4));
        assert_eq!(c.advertised_cluster_addr, "127.0.0.1:49093");
        assert_eq!(c.certs_dir, PathBuf::from("/etc/aerostream/certs"));
    }

    #[test]
    fn bad_voter_lists_are_refused_with_the_reason() {
        for (voters, expected) in [
            ("1@a:1,2@b:2", "needs 1, 3 or 5"),
            (
                "1@a:1,2@b:2,3@c:3,4@d:4,5@e:5,6@f:6,7@g:7",
                "needs 1, 3 or 5",
            ),
            ("1@a:1,1@b:2,3@c:3", "node 1 appears twice"),
            ("1@a:1,2@a:1,3@c:3", "address a:1 appears twice"),
            ("1-a:1", "is not ID@HOST:PORT"),
            ("x@a:1", "not a number"),
            ("1@a", "is not HOST:PORT"),
            ("1@a:port", "bad port"),
            ("3000000000@a:1", "fit a Kafka broker id"),
            (" , ", "--voters is empty"),
        ] {
            let err = error_of(&cluster_args(1, voters));
            assert!(err.contains(expected), "{voters}: {err}");
        }
    }

    #[test]
    fn a_voter_advertising_another_address_than_its_entry_is_refused() {
        let err = error_of(&ServeArgs {
            advertised_cluster_addr: Some("10.0.0.9:9093".into()),
            ..cluster_args(1, "1@10.0.0.1:9093")
        });
        assert!(err.contains("must be the same"), "{err}");
        let err = error_of(&ServeArgs {
            cluster_addr: Some("0.0.0.0:9093".parse().expect("addr")),
            ..cluster_args(4, "1@10.0.0.1:9093")
        });
        assert!(err.contains("--advertised-cluster-addr"), "{err}");
    }

    #[test]
    fn cluster_settings_come_from_the_file_too() {
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "node_id = 3\nvoters = [\"1@h1:9093\", \"2@h2:9093\", \"3@h3:9093\"]\n\
             cluster_addr = \"0.0.0.0:9093\"\nrack = \"b\"\ncluster_certs = \"/c\""
        )
        .expect("write");
        let s = Settings::resolve(&ServeArgs {
            config: Some(f.path().to_path_buf()),
            ..Default::default()
        })
        .expect("valid");
        let c = s.cluster.expect("cluster mode");
        assert_eq!(c.advertised_cluster_addr, "h3:9093");
        assert_eq!(c.cluster_addr.to_string(), "0.0.0.0:9093");
        assert_eq!(c.certs_dir, PathBuf::from("/c"));
        assert_eq!(s.rack.as_deref(), Some("b"));
    }
}
