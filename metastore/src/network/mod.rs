//! Traffic between metastore nodes: Raft RPCs, and client requests forwarded
//! to the leader.
//!
//! The seam is [`Transport`]: one call carries one [`Envelope`] to a peer
//! and brings back its [`RpcResponse`]. Two implementations:
//! - [`quic::QuicTransport`], the production one: QUIC (quinn) with mutual
//!   TLS 1.3 ([`tls`]: only the holder of node N's certificate can send as
//!   node N), one bidirectional stream per call over a cached connection per
//!   peer, within [`MAX_REQUEST_BYTES`];
//! - `local::LocalRouter`, an in-process router for tests that need many
//!   nodes in one process without sockets (feature `testing`).
//!
//! [`RaftNetworkFactory`] / [`RaftNetwork`] are implemented once, over the
//! seam. With the `testing` feature every node also owns a `NetworkFaults`,
//! checked on both ends of every call whichever transport is used, so tests
//! can cut links; without it the checks compile to nothing.

pub mod certs;
mod faults;
#[cfg(any(test, feature = "testing"))]
pub mod local;
pub mod quic;
pub mod services;
pub mod tls;

#[cfg(not(any(test, feature = "testing")))]
pub(crate) use faults::NetworkFaults;
#[cfg(any(test, feature = "testing"))]
pub use faults::NetworkFaults;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{Backoff, RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::ChangeMembers;
use serde::{Deserialize, Serialize};

use crate::command::{Command, CommandResult};
use crate::error::MetaError;
use crate::raft_types::{MetaNode, NodeId, TypeConfig};

/// Largest request a node accepts from a peer (and sends to one). What
/// bounds each kind of request below it:
/// - a forwarded write: at most [`crate::command::MAX_WRITE_BYTES`] of
///   commands, checked before it is forwarded;
/// - AppendEntries: openraft sends up to 300 entries at once; a batch over
///   this limit is not sent, and openraft is told to retry with fewer
///   entries ([`PayloadTooLarge`]), down to one entry, which is at most
///   [`crate::command::MAX_WRITE_BYTES`] plus its log id;
/// - InstallSnapshot: one chunk of [`SNAPSHOT_CHUNK_BYTES`], which JSON
///   writes as an array of numbers (at most 4 bytes per byte, `255,`), plus
///   the snapshot's metadata;
/// - Vote and read-index requests: a few dozen bytes.
///
/// With [`tls::MAX_CONCURRENT_REQUESTS`] requests open at once, a peer can
/// make a node buffer at most 256 MiB (it was 1024 streams of 64 MiB).
pub const MAX_REQUEST_BYTES: usize = 8 << 20;

/// Largest answer read from a peer this node called (and authenticated as
/// the node it meant to call). Answers to forwarded writes carry the results,
/// such as a created topic's `TopicInfo`: about 110 bytes per partition, so
/// 11 MB for a topic of 100,000 partitions. Raft answers are tiny.
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Bytes of snapshot data per InstallSnapshot request.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1 << 20;

/// One request between nodes, addressed so a misrouted or partitioned call can be refused.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub from: NodeId,
    pub to: NodeId,
    pub body: RpcRequest,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    Forward(ForwardRequest),
    /// A node outside the cluster asks to be added as a learner, under its
    /// own id (the envelope's `from`, which its certificate proves), at
    /// `addr`. The receiving member hands the change to the leader; the
    /// answer is a [`RpcResponse::Forward`].
    Join {
        addr: String,
    },
}

impl RpcRequest {
    /// Whether this message names `node` as its sender: a Raft message carries
    /// the vote of the leader (or candidate) that sent it; forwarded requests
    /// may come from any member. A receiver refuses a Raft message that names
    /// another node than the envelope's (authenticated) `from`.
    pub fn sent_by(&self, node: NodeId) -> bool {
        let vote = match self {
            RpcRequest::AppendEntries(r) => &r.vote,
            RpcRequest::Vote(r) => &r.vote,
            RpcRequest::InstallSnapshot(r) => &r.vote,
            RpcRequest::Forward(_) | RpcRequest::Join { .. } => return true,
        };
        vote.leader_id().voted_for() == Some(node)
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Forward(Result<ForwardResponse, MetaError>),
    /// The receiver would not handle the call (wrong node id, link cut by a fault).
    Refused(String),
}

/// Work a node hands to the leader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardRequest {
    /// Commands to propose; the leader stamps them with its clock. The
    /// request id stays the same across retries so they apply once; it is
    /// left out when applying twice is harmless.
    Write {
        request: Option<uuid::Uuid>,
        commands: Vec<Command>,
    },
    /// The leader's committed index after confirming its leadership (read index).
    ReadIndex,
    /// An agent's heartbeat: the leader notes when it heard the agent, on
    /// its own clock, and logs nothing unless the agent is fenced or a
    /// fence of it is under way (see [`crate::liveness`]).
    Heartbeat { agent_id: crate::types::AgentId },
    /// A membership change.
    ChangeMembership {
        change: ChangeMembers<NodeId, MetaNode>,
        retain: bool,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardResponse {
    Written {
        log_index: u64,
        results: Vec<CommandResult>,
    },
    ReadIndex {
        index: Option<u64>,
    },
    MembershipChanged {
        log_index: u64,
    },
    /// The heartbeat was heard; `log_index` is the entry that renewed the
    /// lease in the log, when one was written. `silent`: the agents the
    /// leader has not heard for [`crate::options::agent_suspect_after`]
    /// (fenced ones included), so that agents can tell clients a leader is
    /// in doubt before its lease runs out (`Metastore::suspected_agents`).
    Heartbeat {
        log_index: Option<u64>,
        silent: Vec<crate::types::AgentId>,
    },
}

/// Why a call failed on the way.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    /// The request certainly did not reach the peer's handler.
    #[error("node {node} unreachable: {reason}")]
    NotSent { node: NodeId, reason: String },
    /// The request may have been handled; its answer was lost.
    #[error("call to node {node} failed: {reason}")]
    Lost { node: NodeId, reason: String },
    /// The request was not sent: it is larger than a peer accepts.
    #[error("a request of {bytes} bytes to node {node} exceeds the limit of {limit}")]
    TooLarge {
        node: NodeId,
        bytes: usize,
        limit: usize,
    },
}

/// Carries envelopes to peers.
pub trait Transport: Send + Sync + 'static {
    fn call(
        &self,
        addr: &str,
        envelope: Envelope,
    ) -> BoxFuture<'_, Result<RpcResponse, TransportError>>;
}

/// Handles envelopes that reach a node.
pub trait RpcHandler: Send + Sync + 'static {
    fn handle(self: Arc<Self>, envelope: Envelope) -> BoxFuture<'static, RpcResponse>;
}

/// Sends an envelope with a deadline, honouring the sender's faults.
pub(crate) async fn call_with_timeout(
    transport: &dyn Transport,
    faults: &NetworkFaults,
    addr: &str,
    envelope: Envelope,
    timeout: Duration,
) -> Result<RpcResponse, TransportError> {
    let node = envelope.to;
    if faults.drops(node, &envelope.body) {
        return Err(TransportError::NotSent {
            node,
            reason: "link cut by fault injection".into(),
        });
    }
    match tokio::time::timeout(timeout, transport.call(addr, envelope)).await {
        Ok(r) => r,
        Err(_) => Err(TransportError::Lost {
            node,
            reason: format!("no answer within {timeout:?}"),
        }),
    }
}

/// openraft's network factory over a [`Transport`].
#[derive(Clone)]
pub(crate) struct Network {
    pub(crate) id: NodeId,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) faults: Arc<NetworkFaults>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &MetaNode) -> PeerClient {
        PeerClient {
            net: self.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

/// openraft's client for one peer.
pub(crate) struct PeerClient {
    net: Network,
    target: NodeId,
    addr: String,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, MetaNode, RaftError<NodeId, E>>;

impl PeerClient {
    async fn send<E: std::error::Error>(
        &self,
        body: RpcRequest,
        option: &RPCOption,
        action: RPCTypes,
    ) -> Result<RpcResponse, RpcErr<E>> {
        let entries = match &body {
            RpcRequest::AppendEntries(r) => r.entries.len(),
            _ => 0,
        };
        let envelope = Envelope {
            from: self.net.id,
            to: self.target,
            body,
        };
        let ttl = option.hard_ttl();
        let res = call_with_timeout(
            self.net.transport.as_ref(),
            &self.net.faults,
            &self.addr,
            envelope,
            ttl,
        )
        .await;
        match res {
            Ok(RpcResponse::Refused(reason)) => Err(RPCError::Unreachable(Unreachable::new(
                &TransportError::NotSent {
                    node: self.target,
                    reason,
                },
            ))),
            Ok(r) => Ok(r),
            Err(e @ TransportError::NotSent { .. }) => {
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(TransportError::Lost { reason, .. }) if reason.starts_with("no answer") => {
                Err(RPCError::Timeout(Timeout {
                    action,
                    id: self.net.id,
                    target: self.target,
                    timeout: ttl,
                }))
            }
            Err(e @ TransportError::Lost { .. }) => Err(RPCError::Network(NetworkError::new(&e))),
            Err(TransportError::TooLarge { bytes, limit, .. }) if entries > 1 => {
                // openraft retries at once with at most this many entries
                let fits = entries.saturating_mul(limit) / bytes.max(1);
                let hint = (fits.saturating_mul(9) / 10).clamp(1, entries - 1);
                Err(RPCError::PayloadTooLarge(
                    PayloadTooLarge::new_entries_hint(u64::try_from(hint).unwrap_or(1)),
                ))
            }
            Err(e @ TransportError::TooLarge { .. }) => {
                tracing::error!(error = %e, "a raft message cannot be sent at any size");
                Err(RPCError::Network(NetworkError::new(&e)))
            }
        }
    }

    fn unexpected<E: std::error::Error>(&self, got: &RpcResponse) -> RpcErr<E> {
        let e = TransportError::Lost {
            node: self.target,
            reason: format!("unexpected answer {got:?}"),
        };
        RPCError::Network(NetworkError::new(&e))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        match self
            .send(
                RpcRequest::AppendEntries(rpc),
                &option,
                RPCTypes::AppendEntries,
            )
            .await?
        {
            RpcResponse::AppendEntries(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.unexpected(&other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        match self
            .send(
                RpcRequest::InstallSnapshot(rpc),
                &option,
                RPCTypes::InstallSnapshot,
            )
            .await?
        {
            RpcResponse::InstallSnapshot(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.unexpected(&other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        match self
            .send(RpcRequest::Vote(rpc), &option, RPCTypes::Vote)
            .await?
        {
            RpcResponse::Vote(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(self.unexpected(&other)),
        }
    }

    fn backoff(&self) -> Backoff {
        // a restarted peer is picked up again quickly; a dead one costs little
        Backoff::new(std::iter::repeat(Duration::from_millis(200)))
    }
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod tests;
