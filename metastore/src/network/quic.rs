//! The production transport: QUIC via quinn.
//!
//! Why QUIC: it is already the agent-to-agent transport of the design, it
//! multiplexes independent calls on one connection without head-of-line
//! blocking (a large snapshot chunk does not delay a heartbeat), and it brings
//! TLS 1.3. Each call is one bidirectional stream: the request is written and
//! the send side finished; the answer is read to its end. One connection per
//! peer is cached and replaced when it dies.
//!
//! Peers authenticate each other with mutual TLS ([`super::tls`]): a dialed
//! peer must present the certificate of the node it is dialed as, and every
//! request on an accepted connection must come from the node the peer's
//! certificate names. A request may be at most [`MAX_REQUEST_BYTES`], and a
//! peer may have at most [`super::tls::MAX_CONCURRENT_REQUESTS`] open at once.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::services::{ClusterServices, PeerCertificate};
use super::tls::{self, RaftTls};
use super::{
    Envelope, RpcHandler, RpcResponse, Transport, TransportError, MAX_ANSWER_BYTES,
    MAX_REQUEST_BYTES,
};
use crate::error::MetaError;
use crate::raft_types::NodeId;

/// How long a QUIC handshake may take before the peer counts as unreachable.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Where and how a node's QUIC endpoint listens.
#[derive(Debug)]
pub struct QuicSettings {
    /// Address to bind (port 0 picks a free port).
    pub bind: SocketAddr,
    /// Address peers should dial, if not the bound one (e.g. behind NAT).
    pub advertise: Option<String>,
    /// The cluster CA and this node's certificate: there is no QUIC without
    /// mutual TLS.
    pub tls: RaftTls,
    /// An already bound socket to use instead of binding `bind` (lets tests
    /// learn every node's port before any node starts).
    pub socket: Option<UdpSocket>,
    /// ALPN names of the other protocols this endpoint serves (see
    /// [`super::services`]); their handlers are registered later.
    pub service_alpns: Vec<Vec<u8>>,
}

impl QuicSettings {
    pub fn bind(addr: SocketAddr, tls: RaftTls) -> QuicSettings {
        QuicSettings {
            bind: addr,
            advertise: None,
            tls,
            socket: None,
            service_alpns: Vec::new(),
        }
    }

    pub fn from_socket(socket: UdpSocket, tls: RaftTls) -> std::io::Result<QuicSettings> {
        Ok(QuicSettings {
            bind: socket.local_addr()?,
            advertise: None,
            tls,
            socket: Some(socket),
            service_alpns: Vec::new(),
        })
    }
}

/// A node's QUIC endpoint: serves peers and calls them.
pub struct QuicTransport {
    endpoint: quinn::Endpoint,
    conns: Mutex<HashMap<SocketAddr, quinn::Connection>>,
    /// Handlers of the endpoint's other protocols.
    pub(crate) services: ClusterServices,
    /// Client configurations of the other protocols, by ALPN name.
    service_clients: HashMap<Vec<u8>, quinn::ClientConfig>,
}

fn io_err(e: impl std::fmt::Display) -> MetaError {
    MetaError::InvalidSettings {
        reason: format!("raft endpoint: {e}"),
    }
}

impl QuicTransport {
    /// Binds node `id`'s endpoint; refuses a certificate that is not node `id`'s.
    pub(crate) fn bind(
        settings: &mut QuicSettings,
        id: NodeId,
    ) -> Result<QuicTransport, MetaError> {
        let (server, client) = tls::configs_offering(&settings.tls, id, &settings.service_alpns)?;
        let socket = match settings.socket.take() {
            Some(s) => s,
            None => UdpSocket::bind(settings.bind)
                .map_err(|e| io_err(format!("cannot bind {}: {e}", settings.bind)))?,
        };
        let mut t = QuicTransport::with_configs(socket, server, client)?;
        for alpn in &settings.service_alpns {
            let config = tls::service_client_config(&settings.tls, alpn)?;
            t.service_clients.insert(alpn.clone(), config);
        }
        Ok(t)
    }

    pub(crate) fn with_configs(
        socket: UdpSocket,
        server: quinn::ServerConfig,
        client: quinn::ClientConfig,
    ) -> Result<QuicTransport, MetaError> {
        let runtime = Arc::new(quinn::TokioRuntime);
        let mut endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(server),
            socket,
            runtime,
        )
        .map_err(io_err)?;
        endpoint.set_default_client_config(client);
        Ok(QuicTransport {
            endpoint,
            conns: Mutex::new(HashMap::new()),
            services: ClusterServices::default(),
            service_clients: HashMap::new(),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Accepts peers until [`QuicTransport::close`].
    pub(crate) fn serve(&self, id: NodeId, handler: Arc<dyn RpcHandler>) -> JoinHandle<()> {
        let endpoint = self.endpoint.clone();
        let services = self.services.clone();
        tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let handler = handler.clone();
                let services = services.clone();
                tokio::spawn(async move {
                    let conn = match incoming.await {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::info!(error = %e, "raft peer refused in the TLS handshake");
                            return;
                        }
                    };
                    // the handshake demands a certificate from the CA: there is always one
                    let Some(peer) = tls::peer_certificate(&conn) else {
                        conn.close(1u32.into(), b"no client certificate");
                        return;
                    };
                    let peer = Arc::new(peer);
                    let protocol = negotiated_protocol(&conn);
                    if protocol.as_deref() != Some(tls::ALPN) {
                        let service = protocol.as_deref().and_then(|p| services.get(p));
                        match service {
                            Some(s) => s.serve(PeerCertificate(peer), conn).await,
                            None => conn.close(2u32.into(), b"protocol not served yet"),
                        }
                        return;
                    }
                    while let Ok((send, recv)) = conn.accept_bi().await {
                        tokio::spawn(serve_stream(id, peer.clone(), handler.clone(), send, recv));
                    }
                });
            }
        })
    }

    /// Opens a connection to node `node` at `addr` for another protocol of
    /// the endpoint (not cached: the caller keeps it). The peer must prove
    /// it is `node`.
    pub(crate) async fn dial(
        &self,
        addr: &str,
        node: NodeId,
        alpn: &[u8],
    ) -> Result<quinn::Connection, MetaError> {
        let unreachable = |reason: String| MetaError::Network {
            node_id: node,
            reason: format!("cannot reach it at {addr}: {reason}"),
        };
        let config =
            self.service_clients
                .get(alpn)
                .cloned()
                .ok_or_else(|| MetaError::InvalidSettings {
                    reason: format!(
                        "the cluster endpoint was not set up for protocol {}",
                        String::from_utf8_lossy(alpn)
                    ),
                })?;
        let sock = resolve(addr).await.map_err(unreachable)?;
        let connecting = self
            .endpoint
            .connect_with(config, sock, &tls::node_name(node))
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::time::timeout(CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| unreachable(format!("no handshake within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| unreachable(e.to_string()))
    }

    pub(crate) fn close(&self) {
        self.endpoint.close(0u32.into(), b"shutdown");
        self.conns.lock().clear();
    }

    async fn connection(
        &self,
        addr: SocketAddr,
        node: NodeId,
    ) -> Result<quinn::Connection, TransportError> {
        let cached = self.conns.lock().get(&addr).cloned();
        if let Some(c) = cached {
            if c.close_reason().is_none() {
                return Ok(c);
            }
        }
        let not_sent = |e: String| TransportError::NotSent { node, reason: e };
        // the peer must prove it is `node`, not merely a member of the cluster
        let connecting = self
            .endpoint
            .connect(addr, &tls::node_name(node))
            .map_err(|e| not_sent(e.to_string()))?;
        // a dead peer never answers the handshake; do not wait for the idle timeout
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| not_sent(format!("no handshake within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| not_sent(e.to_string()))?;
        self.conns.lock().insert(addr, conn.clone());
        Ok(conn)
    }

    fn forget(&self, addr: SocketAddr, conn: &quinn::Connection) {
        let mut conns = self.conns.lock();
        if conns
            .get(&addr)
            .is_some_and(|c| c.stable_id() == conn.stable_id())
        {
            conns.remove(&addr);
        }
    }

    async fn call_inner(
        &self,
        addr: &str,
        envelope: Envelope,
    ) -> Result<RpcResponse, TransportError> {
        let node = envelope.to;
        let not_sent = |reason: String| TransportError::NotSent { node, reason };
        let lost = |reason: String| TransportError::Lost { node, reason };
        let bytes = serde_json::to_vec(&envelope).map_err(|e| not_sent(e.to_string()))?;
        if bytes.len() > MAX_REQUEST_BYTES {
            return Err(TransportError::TooLarge {
                node,
                bytes: bytes.len(),
                limit: MAX_REQUEST_BYTES,
            });
        }
        let sock = resolve(addr).await.map_err(not_sent)?;
        let conn = self.connection(sock, node).await?;
        let (mut send, mut recv) = match conn.open_bi().await {
            Ok(s) => s,
            Err(e) => {
                self.forget(sock, &conn);
                return Err(not_sent(e.to_string()));
            }
        };
        if let Err(e) = send.write_all(&bytes).await {
            self.forget(sock, &conn);
            return Err(lost(e.to_string()));
        }
        let _ = send.finish();
        let answer = match recv.read_to_end(MAX_ANSWER_BYTES).await {
            Ok(a) => a,
            Err(e) => {
                self.forget(sock, &conn);
                return Err(lost(e.to_string()));
            }
        };
        serde_json::from_slice(&answer).map_err(|e| lost(format!("undecodable answer: {e}")))
    }
}

impl Transport for QuicTransport {
    fn call(
        &self,
        addr: &str,
        envelope: Envelope,
    ) -> BoxFuture<'_, Result<RpcResponse, TransportError>> {
        let addr = addr.to_owned();
        Box::pin(async move { self.call_inner(&addr, envelope).await })
    }
}

/// The ALPN name the handshake settled on.
fn negotiated_protocol(conn: &quinn::Connection) -> Option<Vec<u8>> {
    conn.handshake_data()?
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()?
        .protocol
}

async fn resolve(addr: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = addr.parse() {
        return Ok(a);
    }
    tokio::net::lookup_host(addr)
        .await
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} resolves to nothing"))
}

async fn serve_stream(
    id: NodeId,
    peer: Arc<rustls::pki_types::CertificateDer<'static>>,
    handler: Arc<dyn RpcHandler>,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let request = match recv.read_to_end(MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            tracing::debug!(error = %e, "raft request stream failed");
            return;
        }
    };
    let answer = match serde_json::from_slice::<Envelope>(&request) {
        Err(e) => RpcResponse::Refused(format!("undecodable request: {e}")),
        Ok(env) if env.to != id => {
            RpcResponse::Refused(format!("this is node {id}, not node {}", env.to))
        }
        Ok(env) if !tls::peer_names_node(&peer, env.from) => {
            tracing::warn!(
                claimed = env.from,
                "refused a raft request whose sender is not the node its certificate names"
            );
            RpcResponse::Refused(format!(
                "the peer's certificate does not name node {}",
                env.from
            ))
        }
        Ok(env) => handler.handle(env).await,
    };
    match serde_json::to_vec(&answer) {
        Ok(bytes) => {
            if send.write_all(&bytes).await.is_ok() {
                let _ = send.finish();
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot encode raft answer"),
    }
}

#[cfg(test)]
#[path = "quic_tests.rs"]
mod tests;
