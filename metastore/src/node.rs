//! One running metastore node: Raft, its storage, its transport, and the
//! routing of writes and reads to the leader.
//!
//! Writes from any node go to the leader's [`Proposer`]: locally when this
//! node leads, else forwarded over the transport. A write is retried on
//! another leader only when it certainly was not applied (the old leader
//! refused it or truncated it; the request never left). When the outcome is
//! unknown the caller gets [`MetaError::Timeout`] with `maybe_applied`.

use std::fs::File;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use nix::fcntl::{Flock, FlockArg};
use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::raft::AppendEntriesResponse;
use openraft::{ChangeMembers, Config, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::command::Command;
use crate::error::MetaError;
use crate::liveness::Liveness;
#[cfg(any(test, feature = "testing"))]
use crate::network::local::LocalRouter;
use crate::network::quic::QuicTransport;
use crate::network::{
    call_with_timeout, Envelope, ForwardRequest, ForwardResponse, Network, NetworkFaults,
    RpcHandler, RpcRequest, RpcResponse, Transport, TransportError,
};
use crate::options::{Bootstrap, MetastoreConfig, Transport as TransportChoice};
use crate::proposer::{ProposeError, Proposer};
use crate::raft_types::{MetaNode, NodeId, Raft};
use crate::store::log_store::{LogStore, WriterExit};
use crate::store::state_machine::{SharedState, StateMachineStore};
use crate::types::MetaEvent;

const EVENT_BUFFER: usize = 4096;
const MAX_FORWARDED_COMMANDS: usize = 100_000;

/// When this follower last heard from a legitimate leader, and the commit
/// index the leader had then.
#[derive(Default)]
struct Freshness {
    contact: Mutex<Option<(Instant, Option<u64>)>>,
}

impl Freshness {
    fn contact(&self, leader_commit: Option<u64>) {
        *self.contact.lock() = Some((Instant::now(), leader_commit));
    }

    fn staleness(&self, applied: Option<u64>) -> Option<Duration> {
        let (at, commit) = (*self.contact.lock())?;
        if commit > applied {
            return None; // still catching up with what the leader had committed
        }
        Some(at.elapsed())
    }
}

/// Resolves when this node's view of the leader is no longer `leader`.
async fn leader_moves_from(
    metrics: &mut tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, MetaNode>>,
    leader: NodeId,
) {
    loop {
        if metrics.borrow_and_update().current_leader != Some(leader) {
            return;
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// How a failed attempt on the leader ended.
enum Attempt {
    /// Certainly not applied: safe to retry.
    NotApplied,
    /// Perhaps applied: retry only with the same request id.
    Unknown,
}

impl Attempt {
    fn into_error(self, node_id: NodeId, leader: Option<NodeId>) -> MetaError {
        match self {
            Attempt::NotApplied => MetaError::NotLeader { node_id, leader },
            Attempt::Unknown => MetaError::Timeout {
                what: "attempt on the leader".into(),
                maybe_applied: true,
            },
        }
    }
}

/// The network for a node without peers.
struct NoNetwork;

impl Transport for NoNetwork {
    fn call(
        &self,
        _addr: &str,
        envelope: Envelope,
    ) -> BoxFuture<'_, Result<RpcResponse, TransportError>> {
        let node = envelope.to;
        Box::pin(async move {
            Err(TransportError::NotSent {
                node,
                reason: "embedded metastore has no network".into(),
            })
        })
    }
}

pub(crate) struct Node {
    pub(crate) id: NodeId,
    pub(crate) raft: Raft,
    pub(crate) applied: SharedState,
    pub(crate) events: broadcast::Sender<MetaEvent>,
    pub(crate) proposer: Proposer,
    pub(crate) faults: Arc<NetworkFaults>,
    pub(crate) request_timeout: Duration,
    pub(crate) agent_lease: Duration,
    /// When this node, leading, heard each agent (see [`crate::liveness`]).
    pub(crate) liveness: Mutex<Liveness>,
    /// The agents the metastore leader last said it has not heard for a
    /// while, and when that answer came (`Metastore::suspected_agents`).
    pub(crate) silent: Mutex<Option<(std::time::Instant, Vec<crate::types::AgentId>)>>,
    pub(crate) partition_moves: usize,
    pub(crate) raft_addr: Option<SocketAddr>,
    /// The address peers dial this node at (what it puts in the membership).
    pub(crate) advertise: String,
    transport: Arc<dyn Transport>,
    pub(crate) quic: Option<Arc<QuicTransport>>,
    #[cfg(any(test, feature = "testing"))]
    router: Option<LocalRouter>,
    freshness: Freshness,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    wal_exit: Mutex<Option<WriterExit>>,
    dir_lock: Mutex<Option<Flock<File>>>,
    stopped: AtomicBool,
}

fn lock_dir(dir: &std::path::Path) -> Result<Flock<File>, MetaError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| MetaError::storage(&format!("cannot create {}", dir.display()), e))?;
    let path = dir.join("LOCK");
    let file = File::create(&path)
        .map_err(|e| MetaError::storage(&format!("cannot open {}", path.display()), e))?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        MetaError::InvalidSettings {
            reason: format!("{} is in use by another metastore ({errno})", dir.display()),
        }
    })
}

fn raft_config(config: &MetastoreConfig) -> Result<Config, MetaError> {
    let t = config.timing;
    let cfg = Config {
        cluster_name: "aerostream-meta".into(),
        heartbeat_interval: t.heartbeat_ms,
        election_timeout_min: t.election_min_ms,
        election_timeout_max: t.election_max_ms,
        install_snapshot_timeout: t.election_max_ms.max(1_000),
        snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_every),
        // each chunk must fit in one request (see MAX_REQUEST_BYTES)
        snapshot_max_chunk_size: crate::network::SNAPSHOT_CHUNK_BYTES,
        max_in_snapshot_log_to_keep: config.snapshot_every.min(1_000),
        ..Config::default()
    };
    cfg.validate().map_err(|e| MetaError::InvalidSettings {
        reason: e.to_string(),
    })
}

impl Node {
    pub(crate) async fn start(mut config: MetastoreConfig) -> Result<Arc<Node>, MetaError> {
        config.validate()?;
        let id = config.node_id;
        let dir_lock = lock_dir(&config.dir)?;
        let storage_err =
            |e: crate::raft_types::StorageError| MetaError::storage("opening the raft store", e);
        let (log_store, wal_exit) =
            LogStore::open(&config.dir.join("raft"), config.wal_segment_bytes)
                .map_err(storage_err)?;
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let purged = log_store.last_purged().map(|l| l.index);
        let sm = StateMachineStore::open(&config.dir.join("snapshots"), events.clone(), purged)
            .map_err(storage_err)?;
        let applied = sm.shared();

        #[cfg(any(test, feature = "testing"))]
        let router = match &config.transport {
            TransportChoice::InProcess(r) => Some(r.clone()),
            _ => None,
        };
        let (transport, quic, addr, raft_addr): (Arc<dyn Transport>, _, String, _) =
            match std::mem::take(&mut config.transport) {
                TransportChoice::Embedded => {
                    (Arc::new(NoNetwork), None, "embedded".to_owned(), None)
                }
                TransportChoice::Quic(mut settings) => {
                    let q = Arc::new(QuicTransport::bind(&mut settings, id)?);
                    let bound = q
                        .local_addr()
                        .map_err(|e| MetaError::storage("raft endpoint", e))?;
                    let addr = settings
                        .advertise
                        .clone()
                        .unwrap_or_else(|| bound.to_string());
                    (q.clone(), Some(q), addr, Some(bound))
                }
                #[cfg(any(test, feature = "testing"))]
                TransportChoice::InProcess(r) => (Arc::new(r), None, LocalRouter::addr(id), None),
            };
        let faults = Arc::new(NetworkFaults::default());
        let network = Network {
            id,
            transport: transport.clone(),
            faults: faults.clone(),
        };
        let raft = Raft::new(id, Arc::new(raft_config(&config)?), network, log_store, sm)
            .await
            .map_err(|e| MetaError::storage("starting raft", e))?;
        let (proposer, proposer_task) =
            Proposer::spawn(raft.clone(), config.max_batch, config.max_in_flight);

        let node = Arc::new(Node {
            id,
            raft,
            applied,
            events,
            proposer,
            faults,
            request_timeout: config.request_timeout,
            agent_lease: config.agent_lease,
            liveness: Mutex::new(Liveness::default()),
            silent: Mutex::new(None),
            partition_moves: config.partition_moves,
            raft_addr,
            advertise: addr.clone(),
            transport,
            quic,
            #[cfg(any(test, feature = "testing"))]
            router,
            freshness: Freshness::default(),
            tasks: Mutex::new(vec![proposer_task]),
            wal_exit: Mutex::new(Some(wal_exit)),
            dir_lock: Mutex::new(Some(dir_lock)),
            stopped: AtomicBool::new(false),
        });
        if let Some(q) = &node.quic {
            node.tasks.lock().push(q.serve(id, node.clone()));
        }
        #[cfg(any(test, feature = "testing"))]
        if let Some(r) = &node.router {
            r.register(id, node.clone());
        }
        node.bootstrap(&config.bootstrap, addr).await?;
        // a lone voter need not wait out an election timeout to lead again after a restart
        let lone = {
            let m = node.raft.metrics().borrow().clone();
            m.membership_config.membership().voter_ids().eq([id])
        };
        if lone {
            let _ = node.raft.trigger().elect().await;
        }
        tracing::info!(node = id, raft_addr = ?node.raft_addr, "metastore node started");
        Ok(node)
    }

    async fn bootstrap(&self, bootstrap: &Bootstrap, addr: String) -> Result<(), MetaError> {
        let initialized = self
            .raft
            .is_initialized()
            .await
            .map_err(|e| MetaError::storage("raft", e))?;
        if initialized {
            return Ok(());
        }
        let members: std::collections::BTreeMap<NodeId, MetaNode> = match bootstrap {
            Bootstrap::SingleNode => [(self.id, MetaNode { addr })].into(),
            Bootstrap::Members(m) => m
                .iter()
                .map(|(id, a)| (*id, MetaNode { addr: a.clone() }))
                .collect(),
            Bootstrap::Join => return Ok(()),
        };
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            // a peer got there first and already replicated to us
            Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(MetaError::Membership {
                reason: e.to_string(),
            }),
        }
    }

    /// Runs `task` until the node shuts down.
    pub(crate) fn spawn_task(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task);
        let mut tasks = self.tasks.lock();
        if self.is_stopped() {
            handle.abort();
        } else {
            tasks.push(handle);
        }
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    pub(crate) async fn shutdown(&self) -> Result<(), MetaError> {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        #[cfg(any(test, feature = "testing"))]
        if let Some(r) = &self.router {
            r.unregister(self.id);
        }
        if let Some(q) = &self.quic {
            q.close();
        }
        let res = self.raft.shutdown().await;
        let exit = self.wal_exit.lock().take();
        if let Some(exit) = exit {
            let _ = tokio::time::timeout(Duration::from_secs(10), exit).await;
        }
        drop(self.dir_lock.lock().take());
        tracing::info!(node = self.id, "metastore node stopped");
        res.map_err(|e| MetaError::storage("stopping raft", e))
    }

    // ---- routing ----------------------------------------------------------

    fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    fn member_addr(&self, id: NodeId) -> Option<String> {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.addr.clone())
    }

    /// Runs `req` on the leader, wherever it is, waiting out elections up to
    /// the request timeout. Writes carry a request id, so an attempt whose
    /// outcome is unknown is simply retried: it applies once either way.
    pub(crate) async fn on_leader(
        &self,
        req: ForwardRequest,
    ) -> Result<ForwardResponse, MetaError> {
        let deadline = Instant::now() + self.request_timeout;
        let mut metrics = self.raft.metrics();
        let mut maybe_applied = false;
        loop {
            if self.is_stopped() {
                return Err(MetaError::ShuttingDown);
            }
            let leader = metrics.borrow_and_update().current_leader;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let attempt = match leader {
                Some(l) if l == self.id => {
                    match tokio::time::timeout(remaining, self.serve_forward(req.clone())).await {
                        Ok(r) => r,
                        // a leader cut off from its quorum keeps the entry pending: it may still commit
                        Err(_) => Err(Attempt::Unknown.into_error(self.id, leader)),
                    }
                }
                Some(l) => match self.member_addr(l) {
                    // give up on a leader as soon as this node hears of another (or of
                    // an election): the retry is safe, the request id dedupes it
                    Some(addr) => tokio::select! {
                        r = self.forward(l, &addr, req.clone(), remaining) => r,
                        _ = leader_moves_from(&mut metrics, l) => Err(Attempt::Unknown.into_error(self.id, leader)),
                    },
                    None => Err(Attempt::NotApplied.into_error(self.id, leader)),
                },
                None => Err(Attempt::NotApplied.into_error(self.id, leader)),
            };
            match attempt {
                Ok(resp) => return Ok(resp),
                Err(MetaError::NotLeader { .. }) => {}
                Err(MetaError::Timeout {
                    maybe_applied: true,
                    ..
                }) => maybe_applied = true,
                Err(e) => return Err(e),
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                if maybe_applied && matches!(req, ForwardRequest::Write { .. }) {
                    return Err(MetaError::Timeout {
                        what: "metastore write".into(),
                        maybe_applied: true,
                    });
                }
                return Err(MetaError::NotLeader {
                    node_id: self.id,
                    leader,
                });
            }
            let _ =
                tokio::time::timeout(remaining.min(Duration::from_millis(50)), metrics.changed())
                    .await;
        }
    }

    /// Sends `req` to the leader `to`. `NotLeader` and `Timeout { maybe_applied: true }`
    /// mean "try again, on whoever leads by then".
    async fn forward(
        &self,
        to: NodeId,
        addr: &str,
        req: ForwardRequest,
        timeout: Duration,
    ) -> Result<ForwardResponse, MetaError> {
        let envelope = Envelope {
            from: self.id,
            to,
            body: RpcRequest::Forward(req),
        };
        let res = call_with_timeout(
            self.transport.as_ref(),
            &self.faults,
            addr,
            envelope,
            timeout,
        )
        .await;
        let resp = match res {
            // the leader stopped while handling it: the write may or may not have landed
            Ok(RpcResponse::Forward(Err(MetaError::ShuttingDown)))
            | Err(TransportError::Lost { .. }) => {
                return Err(Attempt::Unknown.into_error(self.id, Some(to)))
            }
            Ok(RpcResponse::Forward(r)) => r?,
            Ok(RpcResponse::Refused(_)) | Err(TransportError::NotSent { .. }) => {
                return Err(Attempt::NotApplied.into_error(self.id, Some(to)))
            }
            Err(e @ TransportError::TooLarge { .. }) => {
                return Err(MetaError::invalid_request(e.to_string()))
            }
            Ok(other) => {
                return Err(MetaError::Network {
                    node_id: to,
                    reason: format!("unexpected answer {other:?}"),
                })
            }
        };
        // read-your-writes: let the local replica catch up with what the leader applied
        let index = match &resp {
            ForwardResponse::Written { log_index, .. }
            | ForwardResponse::MembershipChanged { log_index } => Some(*log_index),
            ForwardResponse::ReadIndex { index } => *index,
            ForwardResponse::Heartbeat { log_index, .. } => *log_index,
        };
        if let Some(index) = index {
            self.wait_applied(index, self.request_timeout).await;
        }
        Ok(resp)
    }

    pub(crate) async fn wait_applied(&self, index: u64, timeout: Duration) {
        let waited = self
            .raft
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "catch up")
            .await;
        if let Err(e) = waited {
            tracing::debug!(node = self.id, index, error = %e, "local replica did not catch up in time");
        }
    }

    /// Handles a forwarded request as if this node were the leader.
    async fn serve_forward(&self, req: ForwardRequest) -> Result<ForwardResponse, MetaError> {
        let not_leader = |leader: Option<NodeId>| MetaError::NotLeader {
            node_id: self.id,
            leader,
        };
        match req {
            ForwardRequest::Write { request, commands } => {
                if commands.is_empty() || commands.len() > MAX_FORWARDED_COMMANDS {
                    return Err(MetaError::invalid_request(format!(
                        "{} commands in one write",
                        commands.len()
                    )));
                }
                // an agent that registers is heard from (liveness rule 1)
                for c in &commands {
                    if let Command::RegisterAgent { registration } = c {
                        self.registering(registration.id);
                    }
                }
                match self.proposer.propose(request, commands).await {
                    Ok(w) => Ok(ForwardResponse::Written {
                        log_index: w.log_index,
                        results: w.results,
                    }),
                    Err(ProposeError::NotLeader { leader }) => Err(not_leader(leader)),
                    Err(ProposeError::Failed(e)) => Err(e),
                }
            }
            ForwardRequest::Heartbeat { agent_id } => self.serve_heartbeat(agent_id).await,
            ForwardRequest::ReadIndex => match self.raft.ensure_linearizable().await {
                Ok(log_id) => Ok(ForwardResponse::ReadIndex {
                    index: log_id.map(|l| l.index),
                }),
                Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                    Err(not_leader(f.leader_id))
                }
                Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q))) => {
                    Err(MetaError::Timeout {
                        what: format!("confirming leadership ({q})"),
                        maybe_applied: false,
                    })
                }
                Err(RaftError::Fatal(_)) => Err(MetaError::ShuttingDown),
            },
            ForwardRequest::ChangeMembership { change, retain } => {
                match self.raft.change_membership(change, retain).await {
                    Ok(r) => Ok(ForwardResponse::MembershipChanged {
                        log_index: r.log_id.index,
                    }),
                    Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                        Err(not_leader(f.leader_id))
                    }
                    Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(c))) => {
                        Err(MetaError::Membership {
                            reason: c.to_string(),
                        })
                    }
                    Err(RaftError::Fatal(_)) => Err(MetaError::ShuttingDown),
                }
            }
        }
    }

    // ---- joining ----------------------------------------------------------

    /// Whether this node is in the membership it knows (as voter or learner).
    pub(crate) fn is_member(&self) -> bool {
        self.has_member(self.id)
    }

    pub(crate) fn has_member(&self, id: NodeId) -> bool {
        self.member_addr(id).is_some()
    }

    /// Adds node `id`, which asked to join from outside the cluster, as a
    /// learner at `addr`, through the leader wherever it is. A node already
    /// in the membership at that address is left as it is, so a learner that
    /// asks again after a restart is not added twice.
    /// The cluster address of agent `id` when it holds its lease there,
    /// not at `addr`.
    fn live_agent_elsewhere(&self, id: NodeId, addr: &str) -> Option<String> {
        let applied = self.applied.read();
        let a = applied.state.agent(id).filter(|a| !a.fenced)?;
        a.addrs.quic.clone().filter(|q| q != addr)
    }

    async fn admit(&self, id: NodeId, addr: String) -> Result<ForwardResponse, MetaError> {
        let (known, is_voter, in_cluster, index) = {
            let m = self.raft.metrics().borrow().clone();
            let membership = m.membership_config.membership();
            (
                membership.get_node(&id).map(|n| n.addr.clone()),
                membership.voter_ids().any(|v| v == id),
                membership.voter_ids().next().is_some(),
                m.membership_config.log_id().map_or(0, |l| l.index),
            )
        };
        if !in_cluster {
            // not initialised yet: the joiner asks another voter
            return Err(MetaError::NotLeader {
                node_id: self.id,
                leader: None,
            });
        }
        let node = MetaNode { addr: addr.clone() };
        let change = match known {
            Some(a) if a == addr => {
                return Ok(ForwardResponse::MembershipChanged { log_index: index })
            }
            Some(a) if is_voter => {
                return Err(MetaError::Membership {
                    reason: format!(
                        "node {id} is a voter at {a}; a voter cannot join again at {addr}"
                    ),
                })
            }
            // a learner that moved: safe to re-address, it does not vote,
            // unless its agent still runs at the old address (a second
            // process started with the same id would take its place)
            Some(_) => {
                if let Some(running) = self.live_agent_elsewhere(id, &addr) {
                    return Err(MetaError::DuplicateAgent {
                        agent_id: id,
                        addr: running,
                    });
                }
                ChangeMembers::SetNodes([(id, node)].into())
            }
            None => ChangeMembers::AddNodes([(id, node)].into()),
        };
        tracing::info!(node = id, addr = %addr, "a node asks to join the metastore as a learner");
        self.on_leader(ForwardRequest::ChangeMembership {
            change,
            retain: true,
        })
        .await
    }

    /// Asks each of `voters` (id -> address) in turn to add this node as a
    /// learner, until one accepts. Returns at once when this node is already
    /// a member (its log holds a membership naming it). The error names
    /// every voter asked and why it did not accept.
    pub(crate) async fn join(
        &self,
        voters: &std::collections::BTreeMap<NodeId, String>,
        attempt_timeout: Duration,
    ) -> Result<(), MetaError> {
        if self.is_member() {
            return Ok(());
        }
        let mut refusals = Vec::new();
        for (&voter, addr) in voters.iter().filter(|(id, _)| **id != self.id) {
            if self.is_stopped() {
                return Err(MetaError::ShuttingDown);
            }
            let envelope = Envelope {
                from: self.id,
                to: voter,
                body: RpcRequest::Join {
                    addr: self.advertise.clone(),
                },
            };
            let res = call_with_timeout(
                self.transport.as_ref(),
                &self.faults,
                addr,
                envelope,
                attempt_timeout,
            )
            .await;
            let why = match res {
                Ok(RpcResponse::Forward(Ok(_))) => {
                    tracing::info!(node = self.id, voter, "joined the metastore as a learner");
                    return Ok(());
                }
                Ok(RpcResponse::Forward(Err(e @ MetaError::DuplicateAgent { .. }))) => {
                    return Err(e)
                }
                Ok(RpcResponse::Forward(Err(e))) => e.to_string(),
                Ok(RpcResponse::Refused(reason)) => reason,
                Ok(other) => format!("unexpected answer {other:?}"),
                Err(e) => e.to_string(),
            };
            refusals.push(format!("voter {voter} at {addr}: {why}"));
        }
        if self.is_member() {
            // an earlier attempt landed although its answer was lost
            return Ok(());
        }
        Err(MetaError::Membership {
            reason: format!(
                "node {} could not join the metastore ({})",
                self.id,
                refusals.join("; ")
            ),
        })
    }

    // ---- freshness -------------------------------------------------------

    /// How old the local replica's view may be, if known.
    pub(crate) fn staleness(&self) -> Option<Duration> {
        let m = self.raft.metrics().borrow().clone();
        if m.state == ServerState::Leader {
            // until the leader applies an entry of its own term, entries it
            // inherited may be committed without being applied here yet
            if m.last_applied
                .is_none_or(|l| l.leader_id.term != m.current_term)
            {
                return None;
            }
            let voters: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
            if voters == [self.id] {
                return Some(Duration::ZERO);
            }
            return m.millis_since_quorum_ack.map(Duration::from_millis);
        }
        self.freshness.staleness(m.last_applied.map(|l| l.index))
    }

    pub(crate) fn leader_id(&self) -> Option<NodeId> {
        self.leader()
    }
}

impl RpcHandler for Node {
    fn handle(self: Arc<Self>, envelope: Envelope) -> BoxFuture<'static, RpcResponse> {
        Box::pin(async move {
            if self.faults.drops(envelope.from, &envelope.body) {
                return RpcResponse::Refused("link cut by fault injection".into());
            }
            if envelope.to != self.id {
                return RpcResponse::Refused(format!(
                    "this is node {}, not node {}",
                    self.id, envelope.to
                ));
            }
            if !envelope.body.sent_by(envelope.from) {
                tracing::warn!(
                    from = envelope.from,
                    "refused a raft message that names another sender than its peer"
                );
                return RpcResponse::Refused(format!(
                    "the raft message does not come from node {}",
                    envelope.from
                ));
            }
            match envelope.body {
                RpcRequest::AppendEntries(req) => {
                    let commit = req.leader_commit.map(|c| c.index);
                    let res = self.raft.append_entries(req).await;
                    if matches!(
                        res,
                        Ok(AppendEntriesResponse::Success
                            | AppendEntriesResponse::PartialSuccess(_)
                            | AppendEntriesResponse::Conflict)
                    ) {
                        self.freshness.contact(commit);
                    }
                    RpcResponse::AppendEntries(res)
                }
                RpcRequest::Vote(req) => RpcResponse::Vote(self.raft.vote(req).await),
                RpcRequest::InstallSnapshot(req) => {
                    RpcResponse::InstallSnapshot(self.raft.install_snapshot(req).await)
                }
                RpcRequest::Forward(req) => RpcResponse::Forward(self.serve_forward(req).await),
                RpcRequest::Join { addr } => {
                    RpcResponse::Forward(self.admit(envelope.from, addr).await)
                }
            }
        })
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
