//! The flags of `aerostream serve`, each with the `AEROSTREAM_*`
//! environment variable clap falls back to.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::byte_count::parse_bytes;

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
    /// The schema registry's listener (Confluent's Schema Registry API), or
    /// `off` [default: 127.0.0.1:8081, as Confluent's; when that is taken,
    /// the agent starts without it and says so].
    #[arg(long, env = "AEROSTREAM_SCHEMA_REGISTRY_ADDR")]
    pub schema_registry_addr: Option<String>,
    /// The Connect engine's REST listener (Kafka Connect's API), or `off`
    /// (no listener and no worker on this agent) [default: 127.0.0.1:8083,
    /// as Connect's; when that is taken, the agent starts without it and
    /// says so].
    #[arg(long, env = "AEROSTREAM_CONNECT_ADDR")]
    pub connect_addr: Option<String>,
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
    /// How often members of consumer-protocol groups (KIP-848) heartbeat (group.consumer.heartbeat.interval.ms) [default: 5000].
    #[arg(long, env = "AEROSTREAM_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS")]
    pub group_consumer_heartbeat_interval_ms: Option<i32>,
    /// A consumer-protocol member silent this long is removed (group.consumer.session.timeout.ms) [default: 45000].
    #[arg(long, env = "AEROSTREAM_GROUP_CONSUMER_SESSION_TIMEOUT_MS")]
    pub group_consumer_session_timeout_ms: Option<i32>,
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
    /// Pack sealed segments of many partitions into shared objects of about
    /// this size, one PUT each (0: each segment goes up as its own objects)
    /// [default: 64MiB with a cloud object store, 0 with the local folder].
    #[arg(long, env = "AEROSTREAM_PACK_TARGET_BYTES", value_parser = parse_bytes)]
    pub pack_target_bytes: Option<u64>,
    /// No packed object smaller than this unless a segment has waited
    /// --pack-max-wait-ms [default: 8MiB].
    #[arg(long, env = "AEROSTREAM_PACK_FLOOR_BYTES", value_parser = parse_bytes)]
    pub pack_floor_bytes: Option<u64>,
    /// Longest a sealed segment waits for others to pack with [default: 60000].
    #[arg(long, env = "AEROSTREAM_PACK_MAX_WAIT_MS")]
    pub pack_max_wait_ms: Option<u64>,
    /// How long the first write of a topic with durability=object-store
    /// waits for others (of any partition) to share its write-ahead object
    /// with: longer lingers spend fewer PUTs and add latency [default: 5].
    #[arg(long, env = "AEROSTREAM_WAL_LINGER_MS")]
    pub wal_linger_ms: Option<u64>,
    /// How long a packed object no segment reads from any more stays before
    /// it is deleted (uploads still committing, reads under way); the sweep
    /// looking for such objects runs every half of this, at most every five
    /// minutes [default: 600000].
    #[arg(long, env = "AEROSTREAM_PACK_GRACE_MS")]
    pub pack_grace_ms: Option<u64>,
    /// Move deleted objects under PREFIX/tombstones/ (for a bucket lifecycle
    /// rule to expire) instead of deleting them [default: false].
    #[arg(long, env = "AEROSTREAM_OBJECT_STORE_TOMBSTONES")]
    pub object_store_tombstones: Option<bool>,
    /// How long the objects of a tiered segment replaced by its compacted
    /// copy stay, for cold reads that looked the old copy up [default: 60000].
    #[arg(long, env = "AEROSTREAM_TIERED_COMPACTION_GRACE_MS")]
    pub tiered_compaction_grace_ms: Option<u64>,
    /// Acknowledge acks=all writes once in the page cache (true), or only
    /// after an fdatasync shared by the produce requests waiting at that
    /// moment, with consumers seeing only fsynced data (false). The default
    /// of every topic's `write.caching` [default: true].
    #[arg(long, env = "AEROSTREAM_WRITE_CACHING")]
    pub write_caching: Option<bool>,
    /// Kafka connections open at once, across all listeners (max.connections) [default: 4096].
    #[arg(long, env = "AEROSTREAM_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Kafka connections open at once from one address (max.connections.per.ip)
    /// [default: 256, at most --max-connections; --max-connections with
    /// --load-balanced, where every client comes from the balancer].
    #[arg(long, env = "AEROSTREAM_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<usize>,
    /// Close a connection that sends no complete request for this long
    /// (connections.max.idle.ms) [default: 600000].
    #[arg(long, env = "AEROSTREAM_CONNECTIONS_MAX_IDLE_MS")]
    pub connections_max_idle_ms: Option<u64>,
    /// Close a connection that has not logged in this long after it
    /// connected: the native hello, and the SASL authentication a listener
    /// requires [default: 10000].
    #[arg(long, env = "AEROSTREAM_LOGIN_TIMEOUT_MS")]
    pub login_timeout_ms: Option<u64>,
    /// An agent the metastore leader has not heard a heartbeat from for
    /// this long is fenced and its partitions move to other in-sync
    /// replicas; it heartbeats eight times per lease; the same on every
    /// agent [default: 800].
    #[arg(long, env = "AEROSTREAM_AGENT_LEASE_MS")]
    pub agent_lease_ms: Option<u64>,
    /// How often the metastore's Raft leader sends heartbeats to the other
    /// metastore members, and how long it waits for each append's answer;
    /// the same on every agent [default: 100].
    #[arg(long, env = "AEROSTREAM_RAFT_HEARTBEAT_MS")]
    pub raft_heartbeat_ms: Option<u64>,
    /// Shortest Raft election timeout: a voter that hears no leader for
    /// the largest election timeout plus a random one between the two
    /// starts an election; above --raft-heartbeat-ms [default: 200].
    #[arg(long, env = "AEROSTREAM_RAFT_ELECTION_TIMEOUT_MIN_MS")]
    pub raft_election_timeout_min_ms: Option<u64>,
    /// Largest Raft election timeout; above the shortest [default: 400].
    #[arg(long, env = "AEROSTREAM_RAFT_ELECTION_TIMEOUT_MAX_MS")]
    pub raft_election_timeout_max_ms: Option<u64>,
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
    /// With --load-balanced: the balancer's address in a zone, ZONE=HOST:PORT
    /// (repeatable or comma-separated). A Kafka client that names its zone
    /// (aerostream_az=ZONE in its client.id, or client.rack) is told this
    /// address instead of --advertised-kafka-addr, so its connections stay
    /// in its zone [default: none].
    #[arg(
        long = "advertised-kafka-addr-zone",
        env = "AEROSTREAM_ADVERTISED_KAFKA_ADDR_ZONES",
        value_delimiter = ','
    )]
    pub advertised_kafka_addr_zones: Option<Vec<String>>,
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
    /// A price the cost report (/v1/cost) values its counts at, KEY=USD;
    /// repeatable, or comma-separated in the environment. Keys:
    /// put_per_1000, get_per_1000, delete_per_1000, storage_per_gb_month,
    /// local_storage_per_gb_month, cross_zone_per_gb [default: AWS S3
    /// Standard us-east-1 and inter-AZ list prices, checked 2026-12].
    #[arg(
        long = "cost-price",
        env = "AEROSTREAM_COST_PRICES",
        value_delimiter = ','
    )]
    pub cost_prices: Option<Vec<String>>,
    /// Testing only: wrap the object store in a fault injector controlled at
    /// HTTP /admin/object-store/faults.
    #[cfg(feature = "fault-injection")]
    #[arg(long, env = "AEROSTREAM_OBJECT_STORE_FAULTS", hide = true)]
    pub object_store_faults: Option<bool>,
}
