//! Wiring of one gateway: shards, listeners, the group coordinator and HTTP.

use std::net::SocketAddr;
use std::sync::Arc;

use metastore::ClusterControl;
use tokio::sync::watch;

use crate::broker::{Broker, BrokerConfig};
use crate::server;
use dataplane::backend::LogFactory;
use dataplane::group::coordinator::{Coordinator, Ownership};
use dataplane::partition::Partitions;
use dataplane::shard::Shards;

/// How to run a gateway.
#[derive(Clone)]
pub struct GatewayOptions {
    /// Kafka listener; port 0 picks a free port.
    pub kafka_addr: SocketAddr,
    /// Host and port given to clients; defaults to the bound Kafka address.
    pub advertised: Option<(String, u16)>,
    /// Native-protocol listener (TCP); `None` disables it, port 0 picks a
    /// free port.
    pub native_addr: Option<SocketAddr>,
    /// Host and port given to native clients; defaults to the bound address.
    pub native_advertised: Option<(String, u16)>,
    /// The certificate of the native protocol's QUIC endpoint, which listens
    /// on the UDP port of the same number as the native TCP listener
    /// (see [`crate::native::quic`]); `None` leaves QUIC off. Needs
    /// `native_addr`.
    pub native_tls: Option<crate::native::quic::NativeTls>,
    /// TLS on the Kafka listener (`SSL`); `None` serves plaintext.
    pub kafka_tls: Option<crate::kafka_tls::KafkaTls>,
    /// Health and metrics listener; `None` disables it.
    pub http_addr: Option<SocketAddr>,
    /// The schema registry's listener and whether failing to bind it
    /// fails the start (an address the operator chose) or only warns (the
    /// default one, which a second agent on the host finds taken).
    pub schema_registry: Option<(SocketAddr, bool)>,
    /// Number of shard runtimes.
    pub shards: usize,
    pub broker: BrokerConfig,
    /// Figures and endpoints the binary adds to the HTTP listener.
    pub http_extensions: Vec<Arc<dyn crate::http::HttpExtension>>,
    /// Bind the Kafka and native listeners but accept no client until
    /// [`Gateway::open_to_clients`]: an agent registers with the metastore
    /// in between, so that its first client cannot find it missing from
    /// the cluster (a topic created then would have no agent to live on).
    /// Connections wait in the listen backlog meanwhile.
    pub hold_clients: bool,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            kafka_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            advertised: None,
            native_addr: None,
            native_advertised: None,
            native_tls: None,
            kafka_tls: None,
            http_addr: None,
            schema_registry: None,
            shards: 1,
            broker: BrokerConfig::default(),
            http_extensions: Vec::new(),
            hold_clients: false,
        }
    }
}

/// Binds the native TCP listener on `addr` and, for QUIC, a UDP socket on
/// the same address and port. With port 0 the TCP port is picked first;
/// if its UDP twin is taken, another pair is tried.
fn bind_native(
    addr: SocketAddr,
    quic: bool,
) -> std::io::Result<(std::net::TcpListener, Option<std::net::UdpSocket>)> {
    let mut attempt = 0;
    loop {
        let tcp = server::first_reuseport_listener(addr)?;
        if !quic {
            return Ok((tcp, None));
        }
        let bound = tcp.local_addr()?;
        match std::net::UdpSocket::bind(bound) {
            Ok(udp) => return Ok((tcp, Some(udp))),
            Err(e) if addr.port() == 0 && attempt < 20 => {
                attempt += 1;
                tracing::debug!(%bound, error = %e, "UDP twin of the native port is taken; trying another port");
            }
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("cannot bind the native QUIC endpoint on UDP {bound}: {e}"),
                ))
            }
        }
    }
}

/// Renders the text `/metrics` serves (`http::render_metrics`), for
/// exports that read it in-process.
#[derive(Clone)]
pub struct MetricsText {
    broker: Arc<Broker>,
    extensions: Vec<Arc<dyn crate::http::HttpExtension>>,
}

impl MetricsText {
    pub fn render(&self) -> String {
        crate::http::render_metrics(&self.broker, &self.extensions)
    }
}

/// A running gateway.
pub struct Gateway {
    broker: Arc<Broker>,
    shards: Option<Shards>,
    stop: watch::Sender<bool>,
    kafka_addr: SocketAddr,
    native_addr: Option<SocketAddr>,
    /// The native QUIC endpoint's address and its accept task.
    native_quic: Option<(SocketAddr, tokio::task::JoinHandle<()>)>,
    http_addr: Option<SocketAddr>,
    schema_registry_addr: Option<SocketAddr>,
    /// What `/metrics` appends after the broker's own figures.
    http_extensions: Vec<Arc<dyn crate::http::HttpExtension>>,
}

impl Gateway {
    /// Binds the listeners and starts serving. Must be called inside a tokio
    /// runtime, which then hosts the control work (group coordinator, HTTP).
    pub async fn start(
        opts: GatewayOptions,
        catalog: metastore::Metastore,
        logs: Arc<dyn LogFactory>,
    ) -> std::io::Result<Gateway> {
        let shards = Shards::start(opts.shards)?;
        let first = server::first_reuseport_listener(opts.kafka_addr)?;
        let kafka_addr = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..shards.len() {
            listeners.push(server::reuseport_listener(kafka_addr)?);
        }
        let mut config = opts.broker.clone();
        let (host, port) = opts
            .advertised
            .clone()
            .unwrap_or_else(|| (kafka_addr.ip().to_string(), kafka_addr.port()));
        config.advertised_host = host;
        config.advertised_port = i32::from(port);
        if opts.native_tls.is_some() && opts.native_addr.is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "native QUIC needs the native listener's address (native_addr)",
            ));
        }
        let native = match opts.native_addr {
            Some(addr) => {
                let (first, udp) = bind_native(addr, opts.native_tls.is_some())?;
                let bound = first.local_addr()?;
                let mut listeners = vec![first];
                for _ in 1..shards.len() {
                    listeners.push(server::reuseport_listener(bound)?);
                }
                let (host, port) = opts
                    .native_advertised
                    .clone()
                    .unwrap_or_else(|| (bound.ip().to_string(), bound.port()));
                config.native_advertised = Some((host, i32::from(port)));
                Some((listeners, bound, udp))
            }
            None => None,
        };
        let partitions = Arc::new(Partitions::new(shards.handles(), logs));
        let prefix = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        let ownership = Ownership {
            catalog: catalog.clone(),
            agent: u64::try_from(config.node_id).unwrap_or(u64::MAX),
        };
        let groups = Coordinator::start(config.group.clone(), prefix, ownership);
        let broker = Arc::new(Broker::new(config, catalog, partitions, groups));
        if opts.hold_clients {
            broker.hold_clients();
        }
        let (stop, stop_rx) = watch::channel(false);
        tokio::spawn(dataplane::partition::hw_checkpoint::run(
            broker.node.catalog.clone(),
            broker.node.partitions.clone(),
            broker.node.agent_id(),
            dataplane::partition::hw_checkpoint::INTERVAL,
            stop_rx.clone(),
        ));
        crate::kafka::api::txn_coordinator::spawn_sweeper(broker.clone());
        let kafka_tls = opts.kafka_tls.as_ref().map(|t| t.acceptor());
        if let Some(t) = &opts.kafka_tls {
            tokio::spawn(
                t.clone()
                    .watch(crate::kafka_tls::RELOAD_CHECK, stop_rx.clone()),
            );
        }
        for (listener, handle) in listeners.into_iter().zip(shards.handles()) {
            listener.set_nonblocking(true)?;
            let b = broker.clone();
            let rx = stop_rx.clone();
            handle.spawn(server::serve(listener, b, rx, kafka_tls.clone()));
        }
        let mut native_quic = None;
        let native_addr = match native {
            Some((listeners, bound, udp)) => {
                // as for Kafka: one listener per shard on the same port, the
                // kernel spreading connections over them
                for (l, handle) in listeners.into_iter().zip(shards.handles()) {
                    l.set_nonblocking(true)?;
                    handle.spawn(crate::native::serve(l, broker.clone(), stop_rx.clone()));
                }
                tracing::info!(native_addr = %bound, "native listener ready");
                if let (Some(udp), Some(tls)) = (udp, &opts.native_tls) {
                    let endpoint = crate::native::quic::endpoint(udp, tls)?;
                    let quic_addr = endpoint.local_addr()?;
                    let task = tokio::spawn(crate::native::quic::serve(
                        endpoint,
                        broker.clone(),
                        stop_rx.clone(),
                        shards.handles(),
                    ));
                    tracing::info!(native_quic_addr = %quic_addr, alpn = "aerostream/1", "native QUIC endpoint ready");
                    native_quic = Some((quic_addr, task));
                }
                Some(bound)
            }
            None => None,
        };
        // the bounded per-partition and per-group series come first, then
        // what the binary adds
        let mut http_extensions: Vec<Arc<dyn crate::http::HttpExtension>> =
            vec![Arc::new(dataplane::telemetry::Series::new(
                broker.node.catalog.clone(),
                broker.node.partitions.clone(),
                broker.node.agent_id(),
                broker.config.metrics_max_series,
            ))];
        http_extensions.extend(opts.http_extensions.iter().cloned());
        let http_addr = match opts.http_addr {
            Some(addr) => {
                let l = tokio::net::TcpListener::bind(addr).await?;
                let bound = l.local_addr()?;
                tokio::spawn(crate::http::serve(
                    l,
                    broker.clone(),
                    http_extensions.clone(),
                    stop_rx.clone(),
                ));
                Some(bound)
            }
            None => None,
        };
        let schema_registry_addr = match opts.schema_registry {
            Some((addr, required)) => match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => {
                    let bound = l.local_addr()?;
                    tokio::spawn(crate::http::registry::serve(
                        l,
                        broker.clone(),
                        stop_rx.clone(),
                    ));
                    Some(bound)
                }
                Err(e) if !required => {
                    tracing::warn!(%addr, error = %e, "the schema registry is off: its default address is taken (set --schema-registry-addr)");
                    None
                }
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("the schema registry cannot listen on {addr}: {e}"),
                    ))
                }
            },
            None => None,
        };
        tracing::info!(%kafka_addr, shards = shards.len(), "Kafka listener ready");
        Ok(Gateway {
            broker,
            shards: Some(shards),
            stop,
            kafka_addr,
            native_addr,
            native_quic,
            http_addr,
            schema_registry_addr,
            http_extensions,
        })
    }

    /// Starts accepting Kafka and native clients held back by
    /// [`GatewayOptions::hold_clients`].
    pub fn open_to_clients(&self) {
        self.broker.open_to_clients();
    }

    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka_addr
    }

    /// The bound native-protocol address, when that listener is on.
    pub fn native_addr(&self) -> Option<SocketAddr> {
        self.native_addr
    }

    /// The bound UDP address of the native QUIC endpoint, when it is on
    /// (the same port number as [`Gateway::native_addr`]).
    pub fn native_quic_addr(&self) -> Option<SocketAddr> {
        self.native_quic.as_ref().map(|(a, _)| *a)
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The bound schema registry address, when it is on.
    pub fn schema_registry_addr(&self) -> Option<SocketAddr> {
        self.schema_registry_addr
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// What renders the Prometheus text `/metrics` serves, for exports that
    /// read it in-process (the binary's OpenTelemetry metrics).
    pub fn metrics_text(&self) -> MetricsText {
        MetricsText {
            broker: self.broker.clone(),
            extensions: self.http_extensions.clone(),
        }
    }

    /// Serves requests other agents forward here on the metastore's cluster
    /// endpoint (which must offer [`crate::forward::ALPN`]) and, when the
    /// broker runs in load-balancer mode, forwards its clients' requests
    /// for data and groups other agents own (see [`crate::forward`]).
    pub fn start_forwarding(&self) -> Result<(), metastore::MetaError> {
        let b = &self.broker;
        b.node.catalog.register_cluster_service(
            crate::forward::ALPN,
            crate::forward::service::ForwardService::new(b),
        )?;
        b.set_forwarder(crate::forward::client::Forwarder::new(
            b.node.catalog.clone(),
            b.forward_counters.clone(),
            b.config.fetch_max_bytes.saturating_add(1 << 20),
        ));
        Ok(())
    }

    /// Stops accepting, lets connections finish their in-flight request, then
    /// closes every partition log (flush and clean-shutdown marker).
    pub async fn shutdown(mut self) {
        self.broker.begin_shutdown();
        let _ = self.stop.send(true);
        // Let requests already being served finish (long polls end early once
        // shutdown begins), then close the logs under them.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while self
            .broker
            .metrics
            .in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // QUIC streams write their last answers and the endpoint closes
        // (bounded inside) before the logs close and the shards stop.
        if let Some((_, task)) = self.native_quic.take() {
            let _ = task.await;
        }
        self.broker.node.partitions.close_all().await;
        if let Some(shards) = self.shards.take() {
            let _ = tokio::task::spawn_blocking(move || shards.stop()).await;
        }
    }
}
