//! Settings of `aerostream serve`: flags win over `AEROSTREAM_*` environment
//! variables, which win over the TOML file given with `--config`, which wins
//! over the built-in defaults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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
    /// Request bytes being served at once, broker-wide; connections wait for
    /// room before reading more (queued.max.request.bytes) [default: 512MiB].
    #[arg(long, env = "AEROSTREAM_QUEUED_MAX_REQUEST_BYTES", value_parser = parse_bytes)]
    pub queued_max_request_bytes: Option<u64>,
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
    #[serde(default, deserialize_with = "bytes_de")]
    queued_max_request_bytes: Option<u64>,
}

/// Resolved settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub kafka_addr: SocketAddr,
    pub advertised_kafka_addr: Option<(String, u16)>,
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
    pub queued_max_request_bytes: u64,
    #[cfg(feature = "fault-injection")]
    pub object_store_faults: bool,
}

fn parse_host_port(s: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = s
        .rsplit_once(':')
        .with_context(|| format!("advertised address '{s}' is not HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .with_context(|| format!("advertised address '{s}' has a bad port"))?;
    anyhow::ensure!(!host.is_empty(), "advertised address '{s}' has no host");
    Ok((host.trim_matches(['[', ']']).to_string(), port))
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
            .or(file.advertised_kafka_addr);
        let s = Settings {
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from("./data")),
            kafka_addr: args
                .kafka_addr
                .or(file.kafka_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9092))),
            advertised_kafka_addr: advertised.as_deref().map(parse_host_port).transpose()?,
            http_addr: args
                .http_addr
                .or(file.http_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9001))),
            node_id: args.node_id.or(file.node_id).unwrap_or(1),
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
            queued_max_request_bytes: args
                .queued_max_request_bytes
                .or(file.queued_max_request_bytes)
                .unwrap_or(512 << 20),
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
    fn advertised_address_splits_host_and_port() {
        assert_eq!(
            parse_host_port("broker-1:9093").expect("ok"),
            ("broker-1".to_string(), 9093)
        );
        assert_eq!(
            parse_host_port("[::1]:9093").expect("ok"),
            ("::1".to_string(), 9093)
        );
    }
}
