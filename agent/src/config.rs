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
        };
        anyhow::ensure!(s.shards >= 1, "--shards must be at least 1");
        anyhow::ensure!(s.num_partitions >= 1, "--num-partitions must be at least 1");
        anyhow::ensure!(
            s.max_request_bytes >= 1024,
            "--max-request-bytes must be at least 1024"
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
