//! The production transport: QUIC via quinn.
//!
//! Why QUIC: it is already the agent-to-agent transport of the design, it
//! multiplexes independent calls on one connection without head-of-line
//! blocking (a large snapshot chunk does not delay a heartbeat), and it brings
//! TLS 1.3. Each call is one bidirectional stream: the request is written and
//! the send side finished; the answer is read to its end. One connection per
//! peer is cached and replaced when it dies.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::tls::{self, RaftTls, SERVER_NAME};
use super::{Envelope, RpcHandler, RpcResponse, Transport, TransportError, MAX_FRAME};
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
    pub tls: RaftTls,
    /// An already bound socket to use instead of binding `bind` (lets tests
    /// learn every node's port before any node starts).
    pub socket: Option<UdpSocket>,
}

impl QuicSettings {
    pub fn bind(addr: SocketAddr) -> QuicSettings {
        QuicSettings {
            bind: addr,
            advertise: None,
            tls: RaftTls::default(),
            socket: None,
        }
    }

    pub fn from_socket(socket: UdpSocket) -> std::io::Result<QuicSettings> {
        Ok(QuicSettings {
            bind: socket.local_addr()?,
            advertise: None,
            tls: RaftTls::default(),
            socket: Some(socket),
        })
    }
}

/// A node's QUIC endpoint: serves peers and calls them.
pub struct QuicTransport {
    endpoint: quinn::Endpoint,
    conns: Mutex<HashMap<SocketAddr, quinn::Connection>>,
}

fn io_err(e: impl std::fmt::Display) -> MetaError {
    MetaError::InvalidSettings {
        reason: format!("raft endpoint: {e}"),
    }
}

impl QuicTransport {
    pub(crate) fn bind(settings: &mut QuicSettings) -> Result<QuicTransport, MetaError> {
        let (server, client) = tls::configs(&settings.tls)?;
        let socket = match settings.socket.take() {
            Some(s) => s,
            None => UdpSocket::bind(settings.bind)
                .map_err(|e| io_err(format!("cannot bind {}: {e}", settings.bind)))?,
        };
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
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Accepts peers until [`QuicTransport::close`].
    pub(crate) fn serve(&self, id: NodeId, handler: Arc<dyn RpcHandler>) -> JoinHandle<()> {
        let endpoint = self.endpoint.clone();
        tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let handler = handler.clone();
                tokio::spawn(async move {
                    let conn = match incoming.await {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::debug!(error = %e, "raft handshake failed");
                            return;
                        }
                    };
                    while let Ok((send, recv)) = conn.accept_bi().await {
                        tokio::spawn(serve_stream(id, handler.clone(), send, recv));
                    }
                });
            }
        })
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
        let connecting = self
            .endpoint
            .connect(addr, SERVER_NAME)
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
        let answer = match recv.read_to_end(MAX_FRAME).await {
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
    handler: Arc<dyn RpcHandler>,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let request = match recv.read_to_end(MAX_FRAME).await {
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
