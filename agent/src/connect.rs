//! The Connect engine on this agent: Kafka Connect's REST API on
//! `--connect-addr` and the worker that runs this agent's share of the
//! connectors' tasks (the `connect` crate). Off with `--connect-addr off`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use connect::convert::DefaultRegistry;
use connect::metrics::Metrics;
use connect::{Worker, WorkerConfig};
use gateway::http::HttpExtension;
use metastore::Metastore;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Settings;

/// The running engine.
pub struct ConnectEngine {
    addr: SocketAddr,
    routes: axum::Router,
    worker_id: String,
    worker: Worker,
    /// This agent's schema registry URL, set once the gateway has bound
    /// it (sources register schemas there by default).
    schema_registry: DefaultRegistry,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
}

/// The worker's figures on the agent's `/metrics`, and Connect's API under
/// `/connect` on the HTTP listener (for the console, same origin, behind
/// its login).
struct ConnectHttp(Arc<Metrics>, axum::Router);

impl HttpExtension for ConnectHttp {
    fn metrics(&self) -> String {
        self.0.render()
    }

    fn routes(&self) -> Option<(&'static str, axum::Router)> {
        Some(("/connect", self.1.clone()))
    }

    fn handle(&self, _target: &str) -> Option<(u16, String)> {
        None
    }
}

impl ConnectEngine {
    /// Binds the listener and starts the worker; `None` when Connect is
    /// off, or its default address is taken.
    pub async fn start(
        s: &Settings,
        meta: &Metastore,
        node_id: u64,
    ) -> anyhow::Result<Option<ConnectEngine>> {
        let Some((addr, chosen)) = s.connect else {
            return Ok(None);
        };
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) if !chosen => {
                tracing::warn!(%addr, error = %e, "the Connect engine is off: its default address is taken (set --connect-addr)");
                return Ok(None);
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("the Connect engine cannot listen on {addr}"))
            }
        };
        let addr = listener.local_addr()?;
        let worker_id = match &s.advertised_kafka_addr {
            Some((host, _)) => format!("{host}:{}", addr.port()),
            None => addr.to_string(),
        };
        let schema_registry = DefaultRegistry::default();
        let worker = Worker::start(
            meta.clone(),
            WorkerConfig {
                node_id,
                worker_id: worker_id.clone(),
                bootstrap: None,
                poll: Duration::from_secs(1),
                schema_registry: schema_registry.clone(),
            },
        );
        let app = connect::rest::router(
            meta.clone(),
            connect::rest::RestInfo {
                worker_id: worker_id.clone(),
                cluster_id: None,
                schema_registry: schema_registry.clone(),
            },
        );
        let routes = app.clone();
        let (stop, mut stopped) = watch::channel(false);
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.changed().await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::warn!(error = %e, "the Connect listener stopped");
            }
        });
        tracing::info!(%addr, "Connect REST API ready");
        Ok(Some(ConnectEngine {
            addr,
            routes,
            worker_id: worker_id.clone(),
            worker,
            schema_registry,
            stop,
            server,
        }))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How this worker is named in statuses and in the agent's
    /// registration: the advertised host with the Connect port.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// Tells the engine where this agent's schema registry listens, or
    /// that it is off (the registry converters' default URL on source
    /// connectors).
    pub fn set_schema_registry(&self, addr: Option<SocketAddr>) {
        self.schema_registry.set(addr);
    }

    /// The worker's figures for `/metrics`.
    pub fn http(&self) -> Arc<dyn HttpExtension> {
        Arc::new(ConnectHttp(self.worker.metrics(), self.routes.clone()))
    }

    /// Stops the tasks (sources commit what was acknowledged) and the
    /// listener.
    pub async fn shutdown(self) {
        self.worker.shutdown().await;
        let _ = self.stop.send(true);
        let _ = self.server.await;
    }
}
