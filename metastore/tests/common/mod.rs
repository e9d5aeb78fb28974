//! Helpers shared by the metastore's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use metastore::{
    AgentAddrs, AgentRegistration, Bootstrap, ClusterCa, LocalRouter, Metastore, MetastoreConfig,
    QuicSettings, RaftTiming, RaftTls, Transport,
};

/// Timers loose enough for a shared two-core machine under parallel builds
/// (openraft also uses the heartbeat interval as the AppendEntries timeout).
pub fn timing() -> RaftTiming {
    RaftTiming::relaxed()
}

/// Agents in tests that are not about leases keep them through slow moments.
pub const AGENT_LEASE: Duration = Duration::from_secs(60);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub fn agent(id: u64) -> AgentRegistration {
    AgentRegistration {
        id,
        addrs: AgentAddrs {
            connect: None,
            kafka: Some(format!("127.0.0.1:{}", 19000 + id)),
            ..AgentAddrs::default()
        },
        rack: None,
        instance: None,
    }
}

pub fn embedded(dir: &Path) -> MetastoreConfig {
    MetastoreConfig {
        timing: timing(),
        agent_lease: AGENT_LEASE,
        ..MetastoreConfig::embedded(dir)
    }
}

/// Polls `check` until it holds, failing the test with `what` after `timeout`.
pub async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Like [`eventually`] for an async check.
pub async fn eventually_async<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A CA made once per test process (key generation is slow in debug builds).
pub fn cluster_ca() -> &'static ClusterCa {
    static CA: std::sync::OnceLock<ClusterCa> = std::sync::OnceLock::new();
    CA.get_or_init(|| ClusterCa::generate().expect("make a cluster CA"))
}

/// Node `id`'s TLS settings from the test cluster CA.
pub fn node_tls(id: u64) -> RaftTls {
    let ca = cluster_ca();
    ca.issue(id).expect("issue a node certificate").tls(ca)
}

/// QUIC settings for node `id` on `socket`, with its certificate.
pub fn quic(id: u64, socket: UdpSocket) -> Transport {
    Transport::Quic(QuicSettings::from_socket(socket, node_tls(id)).unwrap())
}

/// A cluster in this process, over QUIC or the in-process router.
pub struct Cluster {
    pub dirs: BTreeMap<u64, tempfile::TempDir>,
    pub addrs: BTreeMap<u64, String>,
    pub nodes: BTreeMap<u64, Metastore>,
    router: Option<LocalRouter>,
    pub request_timeout: Duration,
    pub snapshot_every: u64,
    pub agent_lease: Duration,
}

impl Cluster {
    pub async fn quic(n: u64) -> Cluster {
        Cluster::quic_snapshotting(n, 10_000).await
    }

    /// A QUIC cluster that snapshots (and purges its log) every `snapshot_every` entries.
    pub async fn quic_snapshotting(n: u64, snapshot_every: u64) -> Cluster {
        let mut sockets = BTreeMap::new();
        for id in 1..=n {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            sockets.insert(id, s);
        }
        let addrs = sockets
            .iter()
            .map(|(id, s)| (*id, s.local_addr().unwrap().to_string()))
            .collect();
        let mut c = Cluster {
            dirs: BTreeMap::new(),
            addrs,
            nodes: BTreeMap::new(),
            router: None,
            request_timeout: Duration::from_secs(30),
            snapshot_every,
            agent_lease: AGENT_LEASE,
        };
        for (id, socket) in sockets {
            c.dirs.insert(id, tempfile::tempdir().unwrap());
            let ms = Metastore::start(c.config(id, quic(id, socket)))
                .await
                .unwrap();
            c.nodes.insert(id, ms);
        }
        c.wait_ready().await;
        c
    }

    pub async fn in_process(n: u64, request_timeout: Duration) -> Cluster {
        Cluster::in_process_leased(n, request_timeout, AGENT_LEASE).await
    }

    /// An in-process cluster whose agents' leases last `agent_lease`.
    pub async fn in_process_leased(
        n: u64,
        request_timeout: Duration,
        agent_lease: Duration,
    ) -> Cluster {
        let router = LocalRouter::new();
        let addrs = (1..=n).map(|id| (id, LocalRouter::addr(id))).collect();
        let mut c = Cluster {
            dirs: BTreeMap::new(),
            addrs,
            nodes: BTreeMap::new(),
            router: Some(router.clone()),
            request_timeout,
            snapshot_every: 10_000,
            agent_lease,
        };
        for id in 1..=n {
            c.dirs.insert(id, tempfile::tempdir().unwrap());
            let ms = Metastore::start(c.config(id, Transport::InProcess(router.clone())))
                .await
                .unwrap();
            c.nodes.insert(id, ms);
        }
        c.wait_ready().await;
        c
    }

    fn config(&self, id: u64, transport: Transport) -> MetastoreConfig {
        MetastoreConfig {
            node_id: id,
            dir: self.dirs[&id].path().to_owned(),
            transport,
            bootstrap: Bootstrap::Members(self.addrs.clone()),
            timing: timing(),
            agent_lease: self.agent_lease,
            request_timeout: self.request_timeout,
            snapshot_every: self.snapshot_every,
            ..MetastoreConfig::default()
        }
    }

    pub async fn wait_ready(&self) {
        for ms in self.nodes.values() {
            ms.wait_ready(Duration::from_secs(20)).await.unwrap();
        }
    }

    pub fn node(&self, id: u64) -> &Metastore {
        &self.nodes[&id]
    }

    /// The leader as seen by a majority of running nodes.
    pub async fn leader(&self) -> u64 {
        let mut found = None;
        eventually_async(
            "a leader known to the running nodes",
            Duration::from_secs(20),
            || {
                let views: Vec<Option<u64>> =
                    self.nodes.values().map(|m| m.metastore_leader()).collect();
                let first = views[0];
                found = first;
                let agreed = first.is_some()
                    && views.iter().all(|v| *v == first)
                    && self.nodes.contains_key(&first.unwrap_or(0));
                async move { agreed }
            },
        )
        .await;
        found.unwrap()
    }

    /// Stops a node as a crash would look to its peers.
    pub async fn kill(&mut self, id: u64) {
        let ms = self.nodes.remove(&id).unwrap();
        ms.shutdown().await.unwrap();
    }

    /// Starts a stopped node again on its old directory and address.
    pub async fn restart(&mut self, id: u64) {
        let transport = match &self.router {
            Some(r) => Transport::InProcess(r.clone()),
            None => {
                // the stopped node's socket closes once its last tasks have unwound
                let addr: SocketAddr = self.addrs[&id].parse().unwrap();
                let start = Instant::now();
                let socket = loop {
                    match UdpSocket::bind(addr) {
                        Ok(s) => break s,
                        Err(e) if start.elapsed() > Duration::from_secs(10) => {
                            panic!("cannot rebind {addr}: {e}")
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                quic(id, socket)
            }
        };
        let ms = Metastore::start(self.config(id, transport)).await.unwrap();
        self.nodes.insert(id, ms);
    }

    pub async fn shutdown(self) {
        for ms in self.nodes.values() {
            ms.shutdown().await.unwrap();
        }
    }
}
