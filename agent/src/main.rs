//! `aerostream`: the AeroStream broker binary. This crate is the composition
//! root only: it reads settings, builds the runtimes, wires the gateway to the
//! storage and metastore backends, and shuts everything down on SIGTERM/SIGINT.

mod admin_user;
mod bucket;
mod cli;
mod cluster;
mod config;
mod connect;
mod drain;
mod otel;
mod process;
mod tiering;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use metastore::ClusterControl;

use config::{oauthbearer_warning, ServeArgs, Settings};
use dataplane::group::engine::GroupLimits;
use dataplane::partition::replication::manager::ReplicationSettings;
use dataplane::topic_config::LogDefaults;
use gateway::broker::BrokerConfig;
use gateway::connections::ConnectionLimits;
use gateway::native::quic::{NativeCa, NativeTls};
use gateway::{Gateway, GatewayOptions};

/// The longest each metastore step of a controlled shutdown waits (the last
/// heartbeat's answer, then the hand-over itself).
const HAND_OVER_WAIT: Duration = Duration::from_secs(3);
/// How long a stopping agent waits for its Connect tasks to stop.
const CONNECT_STOP_WAIT: Duration = Duration::from_secs(5);

/// Keeps element counts declared by hostile frames from aborting the process
/// (see `gateway::alloc`).
#[global_allocator]
static ALLOC: gateway::alloc::WireSafeAlloc = gateway::alloc::WireSafeAlloc;

#[derive(Parser)]
#[command(
    name = "aerostream",
    version,
    about = "AeroStream: a Kafka-compatible streaming broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker node (the default command).
    Serve(Box<ServeArgs>),
    /// Create the cluster CA and node certificates that agents started with
    /// --voters need (reuses the CA already in DIR, adds missing nodes).
    ClusterCa(cluster::ClusterCaArgs),
    /// Drain an agent: move its replicas to other agents and wait until it
    /// holds none (`--undo` lets it take replicas again).
    Drain(drain::DrainArgs),
    /// Topics: list, create, describe, delete, alter-config.
    Topic(cli::TopicArgs),
    /// Consumer groups: list, describe (members, committed offsets, lag).
    Group(cli::GroupArgs),
    /// Produce stdin's lines to a topic, one record per line.
    Produce(cli::ProduceArgs),
    /// Print a topic's records (kcat-like).
    Consume(cli::ConsumeArgs),
    /// Cluster id, controller and brokers.
    Cluster(cli::ClusterArgs),
    /// Client quotas (bytes/s per user or client id): set, remove, list.
    Quota(cli::QuotaArgs),
    /// SASL/SCRAM users (Kafka's AlterUserScramCredentials): set, delete, list.
    User(cli::UserArgs),
    /// Transactions (Kafka's kafka-transactions.sh): list, describe, abort.
    Transaction(cli::TransactionArgs),
    /// The schema registry (Confluent's API on any agent): list, get,
    /// register, check.
    Schema(cli::SchemaArgs),
    /// Connectors on the Connect engine (Kafka Connect's REST API).
    Connect(cli::ConnectArgs),
    /// This agent's object-store requests, storage by tier and cross-zone
    /// bytes, with a monthly estimate at list (or given) prices; several
    /// agents summed with `--http` once per agent.
    Cost(cli::CostArgs),
    /// Bucket lifecycle rules: `bucket check --object-store URL [--apply]`.
    Bucket(bucket::BucketArgs),
    /// Run a stream-processing pipeline (windowed aggregation of a topic
    /// into Parquet files) until killed: `process --pipeline FILE`.
    Process(process::ProcessArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // `aerostream` alone means `aerostream serve` (environment variables still apply).
    let command = match cli.command {
        Some(c) => c,
        None => Cli::parse_from(["aerostream", "serve"])
            .command
            .context("serve is the default command")?,
    };
    let args = match command {
        Command::Serve(args) => *args,
        Command::ClusterCa(args) => return cluster::create_certificates(&args),
        Command::Drain(args) => return drain::run(&args),
        Command::Topic(args) => return cli::run(cli::Admin::Topic(args)),
        Command::Group(args) => return cli::run(cli::Admin::Group(args)),
        Command::Produce(args) => return cli::run(cli::Admin::Produce(args)),
        Command::Consume(args) => return cli::run(cli::Admin::Consume(args)),
        Command::Cluster(args) => return cli::run(cli::Admin::Cluster(args)),
        Command::Quota(args) => return cli::run(cli::Admin::Quota(args)),
        Command::User(args) => return cli::run(cli::Admin::User(args)),
        Command::Transaction(args) => return cli::run(cli::Admin::Transaction(args)),
        Command::Schema(args) => return cli::run(cli::Admin::Schema(args)),
        Command::Connect(args) => return cli::run(cli::Admin::Connect(args)),
        Command::Cost(args) => return cli::run(cli::Admin::Cost(args)),
        Command::Bucket(args) => std::process::exit(bucket::run(&args)),
        Command::Process(args) => return process::run(&args),
    };
    let settings = Settings::resolve(&args)?;
    // before any runtime starts: as many arenas as shards, and one more
    let arenas = gateway::alloc::cap_malloc_arenas(settings.shards + 1);
    let otel = otel::init_logging(&settings)?;
    if let Some(warning) = settings.oauthbearer.as_ref().and_then(oauthbearer_warning) {
        tracing::warn!("{warning}");
    }
    tracing::debug!(?arenas, "malloc arenas");
    // Control plane: metastore, group coordinator, HTTP. Shards get their own threads.
    let control = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("control")
        .enable_all()
        .build()
        .context("cannot start the control runtime")?;
    let served = control.block_on(serve(settings, otel.as_ref()));
    // the exporters' last flush blocks: outside the runtime
    if let Some(o) = otel {
        o.shutdown();
    }
    if let Err(e) = &served {
        if let Some(dup) = e.downcast_ref::<cluster::DuplicateNodeId>() {
            eprintln!("Error: {dup}");
            std::process::exit(cluster::DuplicateNodeId::EXIT_CODE);
        }
    }
    served
}

async fn serve(s: Settings, otel: Option<&otel::Otel>) -> anyhow::Result<()> {
    std::fs::create_dir_all(&s.data_dir)
        .with_context(|| format!("cannot create data dir {}", s.data_dir.display()))?;
    let node_id = u64::try_from(s.node_id).context("--node-id must not be negative")?;
    // Watched from the start: a node waiting for its peers stops cleanly too.
    let mut signals = Signals::watch()?;
    let (transport, bootstrap) = cluster::metastore_transport(&s, node_id)?;
    let meta = metastore::Metastore::start(metastore::MetastoreConfig {
        node_id,
        dir: s.data_dir.join("meta"),
        transport,
        bootstrap,
        agent_lease: Duration::from_millis(s.agent_lease_ms),
        timing: s.raft_timing,
        partition_moves: s.partition_moves,
        ..metastore::MetastoreConfig::default()
    })
    .await
    .context("cannot start the metastore")?;
    tokio::select! {
        ready = cluster::wait_for_metastore(&meta, &s, node_id) => ready?,
        _ = signals.recv() => {
            tracing::info!("stopped while waiting for the metastore");
            if let Err(e) = meta.shutdown().await {
                tracing::warn!(error = %e, "metastore shutdown failed");
            }
            return Ok(());
        }
    }
    let instance = cluster::instance_id(&s.data_dir)?;
    if s.cluster.is_some() {
        let lease = Duration::from_millis(s.agent_lease_ms);
        if let Err(e) = cluster::check_node_id_free(&meta, node_id, instance, lease).await {
            let _ = meta.shutdown().await;
            return Err(e);
        }
    }
    if let Some((user, password)) = &s.admin_user {
        admin_user::ensure(&meta, user, password).await?;
    }
    let tiered = tiering::wire(&s, &meta).await?;
    bucket::spawn_startup_check(&s);
    if s.cluster.is_some() {
        // only a partition's leader uploads, and only below its high watermark
        tiered.tier.hold_uploads_until_limited();
    }
    let native_tls = native_tls(&s)?;
    let connect_engine = connect::ConnectEngine::start(&s, &meta, node_id).await?;
    let mut http_extensions = vec![Arc::clone(&tiered.http)];
    http_extensions.extend(connect_engine.as_ref().map(connect::ConnectEngine::http));
    let opts = GatewayOptions {
        kafka_addr: s.kafka_addr,
        advertised: s.advertised_kafka_addr.clone(),
        native_addr: Some(s.native_addr),
        native_advertised: s.advertised_native_addr.clone(),
        native_tls: Some(native_tls),
        kafka_tls: kafka_tls(&s)?,
        http_addr: Some(s.http_addr),
        schema_registry: s.schema_registry,
        shards: s.shards,
        broker: BrokerConfig {
            node_id: s.node_id,
            sasl_mechanisms: s.sasl_mechanisms.clone(),
            authz: s.authz.clone(),
            sasl_max_session: s.sasl_max_session,
            oauthbearer: s
                .oauthbearer
                .clone()
                .map(security::oauthbearer::Validator::new)
                .transpose()
                .map_err(|e| anyhow::anyhow!("OAUTHBEARER: {e}"))?
                .map(std::sync::Arc::new),
            max_request_bytes: s.max_request_bytes,
            auto_create_topics: s.auto_create_topics,
            num_partitions: s.num_partitions,
            group: GroupLimits {
                initial_rebalance_delay_ms: s.group_initial_rebalance_delay_ms,
                min_session_timeout_ms: s.group_min_session_timeout_ms,
                consumer_heartbeat_interval_ms: s.group_consumer_heartbeat_interval_ms,
                consumer_session_timeout_ms: s.group_consumer_session_timeout_ms,
                ..GroupLimits::default()
            },
            rack: s.rack.clone(),
            load_balanced: s.load_balanced,
            zone_addrs: s
                .advertised_kafka_addr_zones
                .iter()
                .map(|(z, (h, p))| (z.clone(), (h.clone(), i32::from(*p))))
                .collect(),
            log_defaults: LogDefaults {
                write_caching: s.write_caching,
            },
            connections: ConnectionLimits {
                max_connections: s.max_connections,
                max_connections_per_ip: s.max_connections_per_ip,
                idle_timeout: Duration::from_millis(s.connections_max_idle_ms),
                login_timeout: Duration::from_millis(s.login_timeout_ms),
                queued_max_request_bytes: usize::try_from(s.queued_max_request_bytes)
                    .unwrap_or(usize::MAX),
                ..ConnectionLimits::default()
            },
            metrics_max_series: s.metrics_max_series,
            cost_prices: s.cost_prices.clone(),
            ..BrokerConfig::default()
        },
        http_extensions,
        // opened once this agent is registered (below)
        hold_clients: true,
    };
    let gw = Gateway::start(opts, meta.clone(), Arc::new(tiered.logs))
        .await
        .context("cannot start the Kafka gateway")?;
    // before clients are let in and before replicas take up their roles
    gw.broker()
        .node
        .partitions
        .set_wal_writer(tiered.wal.clone());
    if let Some(c) = &connect_engine {
        c.set_schema_registry(gw.schema_registry_addr());
    }
    if let Some(o) = otel {
        o.observe_metrics(gw.metrics_text());
    }
    // In a cluster, partitions are replicated: serve followers' fetches and
    // keep every local replica leading or following as the metastore says.
    if s.cluster.is_some() {
        gw.start_forwarding()
            .context("cannot serve forwarded requests")?;
    }
    let replication = match &s.cluster {
        Some(_) => Some(
            gw.broker()
                .node
                .start_replication(ReplicationSettings {
                    lag_max_ms: i64::try_from(s.replica_lag_time_max_ms).unwrap_or(i64::MAX),
                    ..ReplicationSettings::default()
                })
                .context("cannot start partition replication")?,
        ),
        None => None,
    };
    // Partitions are led by live agents: register this node (with its real
    // Kafka address) before clients learn about it, then keep the lease alive.
    let advertised = s
        .advertised_kafka_addr
        .as_ref()
        .map(|(h, p)| format!("{h}:{p}"))
        .unwrap_or_else(|| gw.kafka_addr().to_string());
    let registration = metastore::AgentRegistration {
        id: node_id,
        addrs: metastore::AgentAddrs {
            // only agents that run a worker are given connector tasks
            connect: connect_engine.as_ref().map(|c| c.worker_id().to_owned()),
            kafka: Some(advertised),
            native: s
                .advertised_native_addr
                .as_ref()
                .map(|(h, p)| format!("{h}:{p}"))
                .or_else(|| gw.native_addr().map(|a| a.to_string())),
            quic: s
                .cluster
                .as_ref()
                .map(|c| c.advertised_cluster_addr.clone()),
        },
        rack: s.rack.clone(),
        instance: Some(instance),
    };
    match cluster::register(&meta, &registration).await {
        Ok(_) => {}
        Err(e @ metastore::MetaError::DuplicateAgent { .. }) => {
            gw.shutdown().await;
            let _ = meta.shutdown().await;
            return Err(cluster::DuplicateNodeId(e.to_string()).into());
        }
        Err(e) => return Err(e).context("cannot register this node with the metastore"),
    }
    // several heartbeats per lease, so one lost or late does not fence us
    let heartbeat = metastore::agent_heartbeat_interval(Duration::from_millis(s.agent_lease_ms));
    let keep_alive = meta.keep_agent_alive(registration, heartbeat);
    gw.open_to_clients();
    // Open every partition now rather than on first use, so segments sealed
    // but not yet uploaded before a restart go up without waiting for a client.
    gw.broker().node.open_led_partitions().await;
    tracing::info!(
        kafka = %gw.kafka_addr(),
        native = ?gw.native_addr(),
        native_quic = ?gw.native_quic_addr(),
        http = ?gw.http_addr(),
        schema_registry = ?gw.schema_registry_addr(),
        connect = ?connect_engine.as_ref().map(connect::ConnectEngine::addr),
        data_dir = %s.data_dir.display(),
        "aerostream is serving"
    );
    // A line scripts can wait for.
    println!(
        "aerostream listening kafka={} http={} native={} native_quic={} schema_registry={} connect={}",
        gw.kafka_addr(),
        gw.http_addr().map(|a| a.to_string()).unwrap_or_default(),
        gw.native_addr().map(|a| a.to_string()).unwrap_or_default(),
        gw.native_quic_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        gw.schema_registry_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        connect_engine
            .as_ref()
            .map(|c| c.addr().to_string())
            .unwrap_or_default()
    );
    signals.recv().await;
    tracing::info!("shutting down");
    // Connect's tasks stop first, while this agent's partitions still take
    // records: a source commits what was acknowledged, and the other agents
    // take the tasks over once this one has left
    // (bounded: without a metastore quorum a task's last writes only time
    // out, and what they leave is what a crash leaves, which the tasks'
    // next generation recovers from)
    if let Some(c) = connect_engine {
        if tokio::time::timeout(CONNECT_STOP_WAIT, c.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                waited_ms = u64::try_from(CONNECT_STOP_WAIT.as_millis()).unwrap_or(u64::MAX),
                "Connect's tasks did not stop in time; closing without them"
            );
        }
    }
    // Controlled shutdown: partitions move to in-sync followers before the
    // logs close (gateway/src/shutdown.rs); a second signal skips the wait.
    let keep_alive = match &s.cluster {
        Some(_) => {
            tokio::select! {
                h = gw.hand_over(Some(keep_alive), HAND_OVER_WAIT) => tracing::info!(
                    moved = h.moved,
                    kept_here = h.kept,
                    applied = h.applied,
                    took_ms = u64::try_from(h.took.as_millis()).unwrap_or(u64::MAX),
                    "handed partition leadership over to in-sync replicas"
                ),
                _ = signals.recv() => tracing::warn!("second signal: closing without waiting for the hand-over"),
            }
            None
        }
        None => Some(keep_alive),
    };
    drop(replication);
    gw.shutdown().await;
    tiered.tier.shutdown().await;
    drop(keep_alive);
    if let Err(e) = meta.shutdown().await {
        tracing::warn!(error = %e, "metastore shutdown failed");
    }
    tracing::info!("stopped cleanly");
    Ok(())
}

/// The certificate of the native QUIC endpoint: the files given, or one
/// issued now by the agent's own CA (kept in DATA_DIR/native-tls, made on
/// first start) for the names a local client or the advertised native
/// address dials.
/// TLS for the Kafka listener, when its files are given.
fn kafka_tls(s: &Settings) -> anyhow::Result<Option<gateway::kafka_tls::KafkaTls>> {
    let Some(files) = &s.kafka_tls else {
        return Ok(None);
    };
    let tls =
        gateway::kafka_tls::KafkaTls::load(&files.cert, &files.key, files.client_ca.as_deref())
            .context("the Kafka listener's TLS settings")?;
    tracing::info!(
        cert = %files.cert.display(),
        mutual = tls.mutual,
        "Kafka listener speaks TLS"
    );
    Ok(Some(tls))
}

fn native_tls(s: &Settings) -> anyhow::Result<NativeTls> {
    if let Some(files) = &s.native_tls {
        let tls = NativeTls::load(&files.cert, &files.key)
            .context("cannot use --native-tls-cert and --native-tls-key")?;
        tracing::info!(cert = %files.cert.display(), "native QUIC endpoint uses the given certificate");
        return Ok(tls);
    }
    let dir = s.data_dir.join("native-tls");
    let loaded = NativeCa::load_or_create(&dir)
        .with_context(|| format!("cannot set up the native TLS CA in {}", dir.display()))?;
    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    let advertised = match &s.advertised_native_addr {
        Some((host, _)) => Some(host.clone()),
        None => (!s.native_addr.ip().is_unspecified()).then(|| s.native_addr.ip().to_string()),
    };
    names.extend(advertised);
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    let tls = loaded
        .ca
        .issue(&names)
        .context("cannot issue the native QUIC certificate")?;
    tracing::info!(
        ca = %loaded.cert_path.display(),
        new_ca = loaded.created,
        names = ?names,
        "native QUIC certificate issued by the agent's own CA: clients trust {}",
        loaded.cert_path.display()
    );
    Ok(tls)
}

/// SIGTERM and SIGINT, watched from start to shutdown.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn watch() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
