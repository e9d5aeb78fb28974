//! The forwarding side: sends a request frame to its owner and waits for
//! the answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use metastore::{AgentId, ClusterControl, Metastore};
use std::sync::Mutex;
use tokio::sync::Notify;

use super::{Origin, ALPN, MAX_HOST_BYTES, MAX_PRINCIPAL_BYTES};

/// Why a forwarded request got no answer from its owner.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("agent {0} has no cluster address registered")]
    NoAddress(AgentId),
    #[error("cannot reach agent {agent}: {reason}")]
    Unreachable { agent: AgentId, reason: String },
    #[error("agent {agent} did not answer within {waited_ms} ms")]
    TimedOut { agent: AgentId, waited_ms: u64 },
    #[error("the exchange with agent {agent} broke: {reason}")]
    Broken { agent: AgentId, reason: String },
    /// The request could not be encoded at the client's version (the
    /// codec's words).
    #[error("the forwarded request could not be encoded: {0}")]
    Encode(String),
    /// The owner's answer is not a response of the kind asked for.
    #[error("the owner's answer could not be decoded: {0}")]
    Decode(String),
    /// The owner had no answer where one was due.
    #[error("the owner sent no answer where one was due")]
    NoAnswer,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct ForwardCounters {
    /// Requests this agent sent to owners.
    pub sent: AtomicU64,
    /// Of those, how many got no answer.
    pub failed: AtomicU64,
    /// Requests this agent served for other agents.
    pub served: AtomicU64,
    /// Forwarded frames' bytes per peer, both ways and both roles.
    pub peers: dataplane::traffic::PeerTraffic,
}

/// Sends requests to their owners; one QUIC connection per owner, reused.
pub struct Forwarder {
    meta: Metastore,
    conns: Mutex<HashMap<AgentId, quinn::Connection>>,
    counters: Arc<ForwardCounters>,
    max_response_bytes: usize,
}

impl Forwarder {
    /// `max_response_bytes` bounds what an owner may send back (the largest
    /// fetch response plus room for its headers).
    pub fn new(
        meta: Metastore,
        counters: Arc<ForwardCounters>,
        max_response_bytes: usize,
    ) -> Arc<Forwarder> {
        Arc::new(Forwarder {
            meta,
            conns: Mutex::new(HashMap::new()),
            counters,
            max_response_bytes,
        })
    }

    async fn connection(&self, agent: AgentId) -> Result<quinn::Connection, ForwardError> {
        let cached = self.conns.lock().ok().and_then(|c| c.get(&agent).cloned());
        if let Some(c) = cached.filter(|c| c.close_reason().is_none()) {
            return Ok(c);
        }
        let addr = self
            .meta
            .agents()
            .into_iter()
            .find(|a| a.id == agent)
            .and_then(|a| a.addrs.quic)
            .ok_or(ForwardError::NoAddress(agent))?;
        let conn = self
            .meta
            .dial_cluster(&addr, agent, ALPN)
            .await
            .map_err(|e| ForwardError::Unreachable {
                agent,
                reason: e.to_string(),
            })?;
        if let Ok(mut conns) = self.conns.lock() {
            conns.insert(agent, conn.clone());
        }
        Ok(conn)
    }

    /// Sends one Kafka request frame (header and body, no size prefix) to
    /// `agent` and returns its response frame (header and body, no size
    /// prefix), `None` when none is due.
    /// `hurry`, once notified, asks the owner to answer now. Gives up after
    /// `timeout`.
    pub async fn call(
        &self,
        agent: AgentId,
        origin: Origin<'_>,
        frame: &[u8],
        hurry: Option<Arc<Notify>>,
        timeout: Duration,
    ) -> Result<Option<Bytes>, ForwardError> {
        Metrics::bump(&self.counters.sent);
        let answer = tokio::time::timeout(timeout, self.exchange(agent, origin, frame, hurry))
            .await
            .unwrap_or_else(|_| {
                Err(ForwardError::TimedOut {
                    agent,
                    waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                })
            });
        if let Err(e) = &answer {
            Metrics::bump(&self.counters.failed);
            tracing::debug!(agent, error = %e, "forwarded request failed");
            if !matches!(e, ForwardError::TimedOut { .. }) {
                if let Ok(mut conns) = self.conns.lock() {
                    conns.remove(&agent);
                }
            }
        }
        answer
    }

    async fn exchange(
        &self,
        agent: AgentId,
        origin: Origin<'_>,
        frame: &[u8],
        hurry: Option<Arc<Notify>>,
    ) -> Result<Option<Bytes>, ForwardError> {
        let broken = |reason: String| ForwardError::Broken { agent, reason };
        let principal = origin.principal.as_bytes();
        if principal.len() > MAX_PRINCIPAL_BYTES {
            return Err(broken(format!(
                "a principal of {} bytes is longer than {MAX_PRINCIPAL_BYTES}",
                principal.len()
            )));
        }
        let conn = self.connection(agent).await?;
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| broken(e.to_string()))?;
        let host = &origin.host.as_bytes()[..origin.host.len().min(MAX_HOST_BYTES)];
        let frame_len = u32::try_from(frame.len()).map_err(|_| broken("frame too large".into()))?;
        let mut head = BytesMut::with_capacity(8 + host.len() + principal.len());
        for field in [host, principal] {
            head.extend_from_slice(&(field.len() as u16).to_be_bytes());
            head.extend_from_slice(field);
        }
        head.extend_from_slice(&frame_len.to_be_bytes());
        send.write_all(&head)
            .await
            .map_err(|e| broken(e.to_string()))?;
        send.write_all(frame)
            .await
            .map_err(|e| broken(e.to_string()))?;
        self.counters
            .peers
            .sent(agent, (head.len() + frame.len()) as u64);
        let read = recv.read_to_end(self.max_response_bytes);
        tokio::pin!(read);
        let bytes = match hurry {
            None => {
                let _ = send.finish();
                read.await
            }
            Some(h) => tokio::select! {
                r = &mut read => r,
                _ = h.notified() => {
                    let _ = send.finish();
                    read.await
                }
            },
        }
        .map_err(|e| broken(e.to_string()))?;
        self.counters.peers.received(agent, bytes.len() as u64);
        if bytes.is_empty() {
            return Ok(None);
        }
        // A Kafka response frame: its size, then header and body.
        let declared = bytes
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
            .and_then(|n| usize::try_from(n).ok());
        if declared != Some(bytes.len() - 4) {
            return Err(broken(format!(
                "a response frame of {} bytes declares {declared:?}",
                bytes.len()
            )));
        }
        Ok(Some(Bytes::from(bytes).slice(4..)))
    }
}

pub(crate) struct Metrics;

impl Metrics {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}
