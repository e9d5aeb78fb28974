//! The resolved settings: each one taken from the first of flags,
//! environment, file and default that has it, then checked as a whole.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::address::parse_host_port;
use super::args::ServeArgs;
use super::cluster::{resolve_cluster, ClusterSettings};
use super::file::{read_file, FileSettings};
use super::security::{
    resolve_auth, resolve_kafka_tls, resolve_native_tls, Auth, KafkaTlsFiles, NativeTlsFiles,
};

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
    pub authz: security::authz::AuthzConfig,
    /// How OAUTHBEARER tokens are checked, with that mechanism on.
    pub oauthbearer: Option<security::oauthbearer::OAuthConfig>,
    /// connections.max.reauth.ms; `None` for 0.
    pub sasl_max_session: Option<Duration>,
    pub http_addr: SocketAddr,
    /// The schema registry's address, and whether it was chosen (a bind
    /// failure then fails the start); `None`: off.
    pub schema_registry: Option<(SocketAddr, bool)>,
    /// The Connect listener's address, and whether it was chosen (a bind
    /// failure then fails the start); `None`: off.
    pub connect: Option<(SocketAddr, bool)>,
    pub node_id: i32,
    pub shards: usize,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    pub max_request_bytes: usize,
    pub group_initial_rebalance_delay_ms: i64,
    pub group_min_session_timeout_ms: i32,
    pub group_consumer_heartbeat_interval_ms: i32,
    pub group_consumer_session_timeout_ms: i32,
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
    /// 0: no packing (see `storage::tier::pack`).
    pub pack_target_bytes: u64,
    pub pack_floor_bytes: u64,
    pub pack_max_wait_ms: u64,
    pub pack_grace_ms: u64,
    /// Linger of the write-ahead writer (`storage::tier::wal`).
    pub wal_linger_ms: u64,
    pub object_store_tombstones: bool,
    /// How long objects a compacted copy replaced stay in object storage.
    pub tiered_compaction_grace_ms: u64,
    pub write_caching: bool,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub connections_max_idle_ms: u64,
    pub login_timeout_ms: u64,
    pub replica_lag_time_max_ms: u64,
    pub partition_moves: usize,
    pub agent_lease_ms: u64,
    /// The metastore's Raft timers (heartbeat, election timeouts).
    pub raft_timing: metastore::RaftTiming,
    pub queued_max_request_bytes: u64,
    /// Kafka's broker.rack.
    pub rack: Option<String>,
    /// Load-balancer mode (forwarding to owners).
    pub load_balanced: bool,
    /// Load-balancer mode: the balancer's address per client zone.
    pub advertised_kafka_addr_zones: std::collections::BTreeMap<String, (String, u16)>,
    /// `None`: the embedded one-node metastore (no --voters).
    pub cluster: Option<ClusterSettings>,
    /// `None`: no OpenTelemetry export.
    pub otlp_endpoint: Option<String>,
    pub otlp_sample_ratio: f64,
    pub otlp_export_interval_ms: u64,
    pub metrics_max_series: usize,
    /// Prices of the cost report: the file's `[cost_prices]`, then the flags.
    pub cost_prices: gateway::cost::Prices,
    #[cfg(feature = "fault-injection")]
    pub object_store_faults: bool,
}

/// The cost report's prices: the defaults, then the config file's
/// `[cost_prices]`, then `--cost-price` flags.
fn resolve_prices(args: &ServeArgs, file: &FileSettings) -> anyhow::Result<gateway::cost::Prices> {
    let mut prices = gateway::cost::Prices::default();
    for (key, value) in file.cost_prices.iter().flatten() {
        prices
            .set(key, &value.to_string())
            .map_err(|e| anyhow::anyhow!("config file [cost_prices]: {e}"))?;
    }
    prices
        .apply(args.cost_prices.as_deref().unwrap_or_default())
        .map_err(|e| anyhow::anyhow!("--cost-price: {e}"))?;
    Ok(prices)
}

/// The balancer's address per zone: the file's
/// `[advertised_kafka_addr_zones]`, then `--advertised-kafka-addr-zone`.
fn resolve_zone_addrs(
    args: &ServeArgs,
    file: &FileSettings,
) -> anyhow::Result<std::collections::BTreeMap<String, (String, u16)>> {
    let mut out = std::collections::BTreeMap::new();
    for (zone, addr) in file.advertised_kafka_addr_zones.iter().flatten() {
        let at = parse_host_port(addr, "config file [advertised_kafka_addr_zones]")?;
        out.insert(zone.clone(), at);
    }
    for item in args.advertised_kafka_addr_zones.iter().flatten() {
        let (zone, addr) = item.split_once('=').with_context(|| {
            format!("--advertised-kafka-addr-zone '{item}' is not ZONE=HOST:PORT")
        })?;
        anyhow::ensure!(
            !zone.trim().is_empty(),
            "--advertised-kafka-addr-zone '{item}' names no zone"
        );
        let at = parse_host_port(addr, "--advertised-kafka-addr-zone")?;
        out.insert(zone.trim().to_string(), at);
    }
    Ok(out)
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
        let Auth {
            sasl_mechanisms,
            admin_user,
            oauthbearer,
            authz,
        } = resolve_auth(args, &file, kafka_tls.as_ref())?;
        let load_balanced = args.load_balanced.or(file.load_balanced).unwrap_or(false);
        let advertised_kafka_addr_zones = resolve_zone_addrs(args, &file)?;
        let cost_prices = resolve_prices(args, &file)?;
        let max_connections = args
            .max_connections
            .or(file.max_connections)
            .unwrap_or(4096);
        let object_store = args.object_store.clone().or(file.object_store.clone());
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
            schema_registry: optional_listener(
                "--schema-registry-addr",
                args.schema_registry_addr
                    .as_deref()
                    .or(file.schema_registry_addr.as_deref()),
                8081,
            )?,
            connect: optional_listener(
                "--connect-addr",
                args.connect_addr
                    .as_deref()
                    .or(file.connect_addr.as_deref()),
                8083,
            )?,
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
            group_consumer_heartbeat_interval_ms: args
                .group_consumer_heartbeat_interval_ms
                .or(file.group_consumer_heartbeat_interval_ms)
                .unwrap_or(5000)
                .max(1),
            group_consumer_session_timeout_ms: args
                .group_consumer_session_timeout_ms
                .or(file.group_consumer_session_timeout_ms)
                .unwrap_or(45_000)
                .max(1),
            log: args
                .log
                .clone()
                .or(file.log)
                .unwrap_or_else(|| "info".into()),
            object_store: object_store.clone(),
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
            pack_target_bytes: args.pack_target_bytes.or(file.pack_target_bytes).unwrap_or(
                match &object_store {
                    Some(url) if !url.starts_with("file:") => 64 << 20,
                    _ => 0,
                },
            ),
            pack_floor_bytes: args
                .pack_floor_bytes
                .or(file.pack_floor_bytes)
                .unwrap_or(8 << 20),
            pack_max_wait_ms: args
                .pack_max_wait_ms
                .or(file.pack_max_wait_ms)
                .unwrap_or(60_000),
            pack_grace_ms: args.pack_grace_ms.or(file.pack_grace_ms).unwrap_or(600_000),
            wal_linger_ms: args.wal_linger_ms.or(file.wal_linger_ms).unwrap_or(5),
            object_store_tombstones: args
                .object_store_tombstones
                .or(file.object_store_tombstones)
                .unwrap_or(false),
            tiered_compaction_grace_ms: args
                .tiered_compaction_grace_ms
                .or(file.tiered_compaction_grace_ms)
                .unwrap_or(60_000),
            write_caching: args.write_caching.or(file.write_caching).unwrap_or(true),
            max_connections,
            max_connections_per_ip: args
                .max_connections_per_ip
                .or(file.max_connections_per_ip)
                .unwrap_or(if load_balanced {
                    max_connections
                } else {
                    gateway::connections::DEFAULT_MAX_CONNECTIONS_PER_IP.min(max_connections)
                }),
            connections_max_idle_ms: args
                .connections_max_idle_ms
                .or(file.connections_max_idle_ms)
                .unwrap_or(600_000),
            login_timeout_ms: args
                .login_timeout_ms
                .or(file.login_timeout_ms)
                .unwrap_or(gateway::connections::DEFAULT_LOGIN_TIMEOUT.as_millis() as u64),
            replica_lag_time_max_ms: args
                .replica_lag_time_max_ms
                .or(file.replica_lag_time_max_ms)
                .unwrap_or(30_000),
            partition_moves: args
                .partition_moves
                .or(file.partition_moves)
                .unwrap_or(metastore::balance::DEFAULT_MAX_IN_FLIGHT),
            agent_lease_ms: args.agent_lease_ms.or(file.agent_lease_ms).unwrap_or(
                u64::try_from(metastore::DEFAULT_AGENT_LEASE.as_millis()).unwrap_or(u64::MAX),
            ),
            raft_timing: {
                let d = metastore::RaftTiming::default();
                metastore::RaftTiming {
                    heartbeat_ms: args
                        .raft_heartbeat_ms
                        .or(file.raft_heartbeat_ms)
                        .unwrap_or(d.heartbeat_ms),
                    election_min_ms: args
                        .raft_election_timeout_min_ms
                        .or(file.raft_election_timeout_min_ms)
                        .unwrap_or(d.election_min_ms),
                    election_max_ms: args
                        .raft_election_timeout_max_ms
                        .or(file.raft_election_timeout_max_ms)
                        .unwrap_or(d.election_max_ms),
                }
            },
            queued_max_request_bytes: args
                .queued_max_request_bytes
                .or(file.queued_max_request_bytes)
                .unwrap_or(512 << 20),
            rack: args.rack.clone().or(file.rack),
            load_balanced,
            advertised_kafka_addr_zones,
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
            cost_prices,
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
            s.load_balanced || s.advertised_kafka_addr_zones.is_empty(),
            "--advertised-kafka-addr-zone is for --load-balanced clusters: without a balancer clients connect to the agents themselves"
        );
        anyhow::ensure!(
            !s.load_balanced || s.cluster.is_some(),
            "--load-balanced needs a cluster (--voters): one agent has no other agent to forward to"
        );
        anyhow::ensure!(
            s.upload_concurrency >= 1,
            "--upload-concurrency must be at least 1"
        );
        anyhow::ensure!(
            s.pack_grace_ms >= 10_000,
            "--pack-grace-ms must be at least 10000: an upload is committed within half of it or uploaded again"
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
            s.login_timeout_ms >= 100,
            "--login-timeout-ms must be at least 100"
        );
        anyhow::ensure!(
            s.replica_lag_time_max_ms >= 100,
            "--replica-lag-time-max-ms must be at least 100"
        );
        anyhow::ensure!(
            s.agent_lease_ms >= 200,
            "--agent-lease-ms must be at least 200 (an agent heartbeats eight times per lease)"
        );
        let t = s.raft_timing;
        anyhow::ensure!(
            t.heartbeat_ms >= 10,
            "--raft-heartbeat-ms must be at least 10"
        );
        anyhow::ensure!(
            t.heartbeat_ms < t.election_min_ms && t.election_min_ms < t.election_max_ms,
            "the Raft timings need --raft-heartbeat-ms ({}) < --raft-election-timeout-min-ms ({}) \
             < --raft-election-timeout-max-ms ({})",
            t.heartbeat_ms,
            t.election_min_ms,
            t.election_max_ms
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

/// A listener that is on by default on 127.0.0.1:`port` (and quietly off
/// when that is taken), on the address given (a bind failure then fails
/// the start), or `off`.
fn optional_listener(
    flag: &str,
    given: Option<&str>,
    port: u16,
) -> anyhow::Result<Option<(SocketAddr, bool)>> {
    Ok(match given {
        None => Some((SocketAddr::from(([127, 0, 0, 1], port)), false)),
        Some(off) if off.eq_ignore_ascii_case("off") => None,
        Some(addr) => Some((
            addr.parse()
                .map_err(|e| anyhow::anyhow!("{flag} {addr}: not an address or `off`: {e}"))?,
            true,
        )),
    })
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
    fn zonal_balancer_addresses_are_zone_host_port_pairs_for_a_balanced_cluster_only() {
        let balanced = |zones: &[&str]| ServeArgs {
            node_id: Some(1),
            voters: Some("1@127.0.0.1:19093".into()),
            load_balanced: Some(true),
            advertised_kafka_addr_zones: Some(zones.iter().map(|z| z.to_string()).collect()),
            ..Default::default()
        };
        let s =
            Settings::resolve(&balanced(&["az-a=lb-a:9092", "az-b=[::1]:9093"])).expect("valid");
        assert_eq!(
            s.advertised_kafka_addr_zones
                .into_iter()
                .collect::<Vec<_>>(),
            [
                ("az-a".to_string(), ("lb-a".to_string(), 9092)),
                ("az-b".to_string(), ("::1".to_string(), 9093)),
            ]
        );
        for (bad, says) in [
            ("lb-a:9092", "not ZONE=HOST:PORT"),
            ("=lb-a:9092", "names no zone"),
            ("az-a=lb-a", "not HOST:PORT"),
        ] {
            let err = Settings::resolve(&balanced(&[bad]))
                .expect_err(bad)
                .to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let err = Settings::resolve(&ServeArgs {
            advertised_kafka_addr_zones: Some(vec!["az-a=lb-a:9092".into()]),
            ..Default::default()
        })
        .expect_err("without --load-balanced")
        .to_string();
        assert!(err.contains("--load-balanced"), "{err}");
    }

    #[test]
    fn one_address_gets_a_fraction_of_the_connections_unless_clients_come_through_a_balancer() {
        let s = Settings::resolve(&ServeArgs::default()).expect("valid");
        assert_eq!((s.max_connections, s.max_connections_per_ip), (4096, 256));
        assert_eq!(s.login_timeout_ms, 10_000);
        let s = Settings::resolve(&ServeArgs {
            max_connections: Some(100),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!(s.max_connections_per_ip, 100, "never above the total");
        let s = Settings::resolve(&ServeArgs {
            node_id: Some(1),
            voters: Some("1@127.0.0.1:19093".into()),
            load_balanced: Some(true),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!(
            s.max_connections_per_ip, 4096,
            "behind a load balancer every client has the balancer's address"
        );
        let s = Settings::resolve(&ServeArgs {
            max_connections_per_ip: Some(4096),
            login_timeout_ms: Some(2500),
            ..Default::default()
        })
        .expect("valid");
        assert_eq!((s.max_connections_per_ip, s.login_timeout_ms), (4096, 2500));
        let bad = ServeArgs {
            login_timeout_ms: Some(10),
            ..Default::default()
        };
        assert!(Settings::resolve(&bad).is_err());
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
    fn lease_and_raft_timings_default_for_fast_failover_and_can_be_relaxed() {
        let s = Settings::resolve(&ServeArgs::default()).expect("valid");
        assert_eq!(s.agent_lease_ms, 800);
        assert_eq!(s.raft_timing, metastore::RaftTiming::default());
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "agent_lease_ms = 3000\nraft_heartbeat_ms = 150\nraft_election_timeout_min_ms = 1000"
        )
        .expect("write");
        let args = ServeArgs {
            config: Some(f.path().to_path_buf()),
            raft_election_timeout_max_ms: Some(2000),
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("valid");
        assert_eq!(s.agent_lease_ms, 3000);
        assert_eq!(
            s.raft_timing,
            metastore::RaftTiming {
                heartbeat_ms: 150,
                election_min_ms: 1000,
                election_max_ms: 2000
            }
        );
        for bad in [
            ServeArgs {
                raft_election_timeout_min_ms: Some(100),
                ..Default::default()
            },
            ServeArgs {
                raft_election_timeout_max_ms: Some(200),
                ..Default::default()
            },
            ServeArgs {
                agent_lease_ms: Some(100),
                ..Default::default()
            },
        ] {
            assert!(Settings::resolve(&bad).is_err(), "{bad:?}");
        }
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
    fn cost_prices_default_to_list_prices_and_take_the_file_then_the_flags() {
        let s = Settings::resolve(&ServeArgs::default()).expect("valid");
        assert_eq!(s.cost_prices, gateway::cost::Prices::default());
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "[cost_prices]\nput_per_1000 = 0.004\nget_per_1000 = 0.001"
        )
        .expect("write");
        let args = ServeArgs {
            config: Some(f.path().to_path_buf()),
            cost_prices: Some(vec!["get_per_1000=0.0005".into()]),
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("valid");
        assert_eq!(s.cost_prices.put_per_1000, 0.004);
        assert_eq!(s.cost_prices.get_per_1000, 0.0005, "flag wins");
        assert_eq!(s.cost_prices.storage_per_gb_month, 0.023);
        let bad = ServeArgs {
            cost_prices: Some(vec!["put=1".into()]),
            ..Default::default()
        };
        let err = Settings::resolve(&bad).expect_err("unknown key");
        assert!(err.to_string().contains("unknown price \"put\""), "{err}");
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
        assert_eq!(
            (s.pack_target_bytes, s.pack_floor_bytes),
            (64 << 20, 8 << 20),
            "a cloud store packs segments"
        );
        let local = Settings::resolve(&ServeArgs::default()).expect("valid");
        assert_eq!(local.pack_target_bytes, 0, "the local folder does not");
        let hasty = ServeArgs {
            pack_grace_ms: Some(500),
            ..Default::default()
        };
        assert!(
            Settings::resolve(&hasty).is_err(),
            "a grace below 10 s is refused"
        );
        let tiny = ServeArgs {
            cache_disk_bytes: Some(1 << 20),
            ..Default::default()
        };
        assert!(
            Settings::resolve(&tiny).is_err(),
            "a disk tier below 64MiB is refused"
        );
    }
}
