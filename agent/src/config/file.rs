//! The TOML file given with `--config`: the flags' settings under the same
//! names, with byte counts and the voter list also in the forms TOML
//! writes naturally (numbers, arrays). Unknown keys are errors, so a
//! misspelt setting is not silently ignored.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use super::byte_count::parse_bytes;

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
pub(super) struct FileSettings {
    pub(super) data_dir: Option<PathBuf>,
    pub(super) kafka_addr: Option<SocketAddr>,
    pub(super) advertised_kafka_addr: Option<String>,
    pub(super) native_addr: Option<SocketAddr>,
    pub(super) advertised_native_addr: Option<String>,
    pub(super) native_tls_cert: Option<PathBuf>,
    pub(super) native_tls_key: Option<PathBuf>,
    pub(super) kafka_tls_cert: Option<PathBuf>,
    pub(super) kafka_tls_key: Option<PathBuf>,
    pub(super) kafka_tls_client_ca: Option<PathBuf>,
    pub(super) sasl_mechanisms: Option<Vec<String>>,
    pub(super) admin_user: Option<String>,
    pub(super) superusers: Option<Vec<String>>,
    pub(super) allow_everyone_if_no_acl_found: Option<bool>,
    pub(super) connections_max_reauth_ms: Option<u64>,
    pub(super) sasl_oauthbearer_jwks: Option<PathBuf>,
    pub(super) sasl_oauthbearer_issuer: Option<String>,
    pub(super) sasl_oauthbearer_audience: Option<String>,
    pub(super) sasl_oauthbearer_sub_claim: Option<String>,
    pub(super) http_addr: Option<SocketAddr>,
    pub(super) schema_registry_addr: Option<String>,
    pub(super) connect_addr: Option<String>,
    pub(super) node_id: Option<i32>,
    pub(super) shards: Option<usize>,
    pub(super) auto_create_topics: Option<bool>,
    pub(super) num_partitions: Option<i32>,
    pub(super) max_request_bytes: Option<usize>,
    pub(super) group_initial_rebalance_delay_ms: Option<i64>,
    pub(super) group_min_session_timeout_ms: Option<i32>,
    pub(super) group_consumer_heartbeat_interval_ms: Option<i32>,
    pub(super) group_consumer_session_timeout_ms: Option<i32>,
    pub(super) log: Option<String>,
    pub(super) object_store: Option<String>,
    #[serde(default, deserialize_with = "bytes_de")]
    pub(super) cache_memory_bytes: Option<u64>,
    #[serde(default, deserialize_with = "bytes_de")]
    pub(super) cache_disk_bytes: Option<u64>,
    pub(super) cache_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "bytes_de")]
    pub(super) local_disk_limit: Option<u64>,
    pub(super) upload_concurrency: Option<usize>,
    #[serde(default, deserialize_with = "bytes_de")]
    pub(super) pack_target_bytes: Option<u64>,
    #[serde(default, deserialize_with = "bytes_de")]
    pub(super) pack_floor_bytes: Option<u64>,
    pub(super) pack_max_wait_ms: Option<u64>,
    pub(super) pack_grace_ms: Option<u64>,
    pub(super) wal_linger_ms: Option<u64>,
    pub(super) object_store_tombstones: Option<bool>,
    pub(super) tiered_compaction_grace_ms: Option<u64>,
    pub(super) write_caching: Option<bool>,
    pub(super) max_connections: Option<usize>,
    pub(super) max_connections_per_ip: Option<usize>,
    pub(super) connections_max_idle_ms: Option<u64>,
    pub(super) login_timeout_ms: Option<u64>,
    pub(super) replica_lag_time_max_ms: Option<u64>,
    pub(super) partition_moves: Option<usize>,
    pub(super) agent_lease_ms: Option<u64>,
    pub(super) raft_heartbeat_ms: Option<u64>,
    pub(super) raft_election_timeout_min_ms: Option<u64>,
    pub(super) raft_election_timeout_max_ms: Option<u64>,
    #[serde(default, deserialize_with = "bytes_de")]
    pub(super) queued_max_request_bytes: Option<u64>,
    pub(super) cluster_addr: Option<SocketAddr>,
    pub(super) advertised_cluster_addr: Option<String>,
    #[serde(default, deserialize_with = "voters_de")]
    pub(super) voters: Option<String>,
    pub(super) rack: Option<String>,
    pub(super) load_balanced: Option<bool>,
    /// `[advertised_kafka_addr_zones]`: ZONE = "HOST:PORT".
    pub(super) advertised_kafka_addr_zones: Option<std::collections::BTreeMap<String, String>>,
    pub(super) cluster_certs: Option<PathBuf>,
    pub(super) otlp_endpoint: Option<String>,
    pub(super) otlp_sample_ratio: Option<f64>,
    pub(super) otlp_export_interval_ms: Option<u64>,
    pub(super) metrics_max_series: Option<usize>,
    /// `[cost_prices]`: KEY = USD, as `--cost-price` takes them.
    pub(super) cost_prices: Option<std::collections::BTreeMap<String, f64>>,
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

pub(super) fn read_file(path: &Path) -> anyhow::Result<FileSettings> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {} is invalid", path.display()))
}
