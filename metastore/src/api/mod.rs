//! [`Metastore`]: the handle the rest of AeroStream uses.
//!
//! Writes are linearizable: they go through the Raft leader (wherever it
//! is) and return once applied; on return the local replica has applied them
//! too (read-your-writes on every node). Reads are served from the local
//! replica: [`Metastore::staleness`] says how far behind it may be,
//! [`Metastore::ensure_fresh`] bounds that, and
//! [`Metastore::linearizable_barrier`] makes the next reads linearizable.
//!
//! The handle itself holds the core: starting and stopping the node, raw
//! batches of commands ([`Metastore::submit`]), local reads
//! ([`Metastore::read`]), the change stream, freshness and Raft's own view.
//! The rest is one trait per concern, each implemented by `Metastore` alone
//! (import the trait to call its methods):
//!
//! - [`Topics`] (`topics.rs`): topics and their configs;
//! - [`Groups`] (`groups.rs`): consumer groups' committed offsets, producer
//!   ids;
//! - [`Security`] (`security.rs`): SCRAM users, ACLs, client quotas;
//! - [`ClusterControl`] (`cluster.rs`): agents and their leases, partition
//!   leadership, ISR and reassignment, Raft membership, the cluster
//!   endpoint's other protocols;
//! - [`Manifests`] (`manifests.rs`): tiering manifests and log start floors;
//! - [`Transactions`] (`transactions.rs`): the transaction coordinator's
//!   records.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::command::{Command, CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::network::{ForwardRequest, ForwardResponse};
use crate::node::Node;
use crate::options::MetastoreConfig;
use crate::raft_types::{MetaNode, NodeId};
use crate::state::MetaState;
use crate::types::{AgentId, MetaEvent};

mod cluster;
mod connect;
mod groups;
mod manifests;
mod processors;
mod registry;
mod security;
mod topics;
mod transactions;

pub use cluster::ClusterControl;
pub use groups::Groups;
pub use manifests::Manifests;
pub use security::Security;
pub use topics::Topics;
pub use transactions::Transactions;

/// A running metastore node. Cheap to clone; clones share the node.
#[derive(Clone)]
pub struct Metastore {
    pub(crate) node: Arc<Node>,
}

impl std::fmt::Debug for Metastore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metastore")
            .field("node_id", &self.node.id)
            .finish()
    }
}

fn unexpected(out: CommandOutput) -> MetaError {
    MetaError::Storage {
        reason: format!("state machine returned an unexpected {out:?}"),
    }
}

impl Metastore {
    /// Opens the node's storage (recovering it), joins or forms the cluster
    /// as configured, and starts serving. A single-node metastore returns
    /// once it leads and has its cluster id.
    pub async fn start(config: MetastoreConfig) -> Result<Metastore, MetaError> {
        let single = matches!(&config.bootstrap, crate::options::Bootstrap::SingleNode)
            || matches!(&config.bootstrap, crate::options::Bootstrap::Members(m) if m.len() == 1);
        let timeout = config.request_timeout;
        let node = Node::start(config).await?;
        node.spawn_task(crate::lease_driver::run(node.clone()));
        let ms = Metastore { node };
        if single {
            ms.wait_ready(timeout).await?;
        }
        Ok(ms)
    }

    /// Stops Raft, closes the network and the log files. Idempotent.
    pub async fn shutdown(&self) -> Result<(), MetaError> {
        self.node.shutdown().await
    }

    pub fn node_id(&self) -> NodeId {
        self.node.id
    }

    /// The bound Raft (QUIC) address, when this node has one.
    pub fn raft_addr(&self) -> Option<SocketAddr> {
        self.node.raft_addr
    }

    /// Waits until a leader is known, this replica knows the cluster id and
    /// has applied every write acknowledged before the call: after a restart,
    /// writes that were in the log but not yet known committed are applied
    /// only once a leader commits an entry of its own term.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), MetaError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut metrics = self.node.raft.metrics();
        loop {
            let has_leader = metrics.borrow_and_update().current_leader.is_some();
            if has_leader && self.node.applied.read().state.cluster_id().is_some() {
                let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
                match tokio::time::timeout(remaining, self.linearizable_barrier()).await {
                    Ok(Ok(())) => return Ok(()),
                    // an election in between, or a leader without its quorum yet: wait on
                    Ok(Err(MetaError::NotLeader { .. } | MetaError::Timeout { .. })) | Err(_) => {}
                    Ok(Err(e)) => return Err(e),
                }
            }
            if self.node.is_stopped() {
                return Err(MetaError::ShuttingDown);
            }
            let step = tokio::time::sleep_until(
                deadline.min(tokio::time::Instant::now() + Duration::from_millis(20)),
            );
            tokio::select! {
                _ = step => {}
                _ = metrics.changed() => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(MetaError::Timeout {
                    what: "waiting for a metastore leader".into(),
                    maybe_applied: false,
                });
            }
        }
    }

    // ---- writes --------------------------------------------------------------
    //
    // The facets' writes are built on `submit_one` and `unit_command`; the
    // helpers only one facet needs live in that facet's file.

    /// Proposes commands as one batch; one result per command.
    pub async fn submit(&self, commands: Vec<Command>) -> Result<Vec<CommandResult>, MetaError> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        // refused here rather than forwarded: no leader would take it
        crate::command::check_write_size(&commands)?;
        let n = commands.len();
        match self
            .node
            .on_leader(ForwardRequest::Write {
                // writes that may apply twice harmlessly skip the dedup table
                request: (!commands.iter().all(Command::is_idempotent)).then(Uuid::new_v4),
                commands,
            })
            .await?
        {
            ForwardResponse::Written { results, .. } if results.len() == n => Ok(results),
            other => Err(MetaError::Storage {
                reason: format!("write answered with {other:?}"),
            }),
        }
    }

    async fn submit_one(&self, command: Command) -> CommandResult {
        let mut results = self.submit(vec![command]).await?;
        results.pop().unwrap_or_else(|| {
            Err(MetaError::Storage {
                reason: "write returned no result".into(),
            })
        })
    }

    async fn unit_command(&self, command: Command) -> Result<(), MetaError> {
        self.submit_one(command).await.map(|_| ())
    }

    // ---- local reads -----------------------------------------------------------

    /// Runs `f` on the local replica's state (under a read lock: keep it short).
    pub fn read<R>(&self, f: impl FnOnce(&MetaState) -> R) -> R {
        f(&self.node.applied.read().state)
    }

    /// Changes applied on this replica, in log order.
    pub fn subscribe(&self) -> broadcast::Receiver<MetaEvent> {
        self.node.events.subscribe()
    }

    /// An upper bound on how old local reads are: time since the leader last
    /// confirmed this replica was up to date. `None` when unknown (no
    /// contact, or still catching up).
    pub fn staleness(&self) -> Option<Duration> {
        self.node.staleness()
    }

    /// Returns once local reads are at most `max_staleness` old, doing a
    /// linearizable barrier if the replica cannot vouch for that itself.
    pub async fn ensure_fresh(&self, max_staleness: Duration) -> Result<(), MetaError> {
        match self.staleness() {
            Some(s) if s <= max_staleness => Ok(()),
            _ => self.linearizable_barrier().await,
        }
    }

    /// After this returns, local reads see every write acknowledged before it was called.
    pub async fn linearizable_barrier(&self) -> Result<(), MetaError> {
        self.node
            .on_leader(ForwardRequest::ReadIndex)
            .await
            .map(|_| ())
    }

    // ---- Raft -----------------------------------------------------------------

    /// Raft's own view of this node (terms, log indexes, replication), for metrics.
    pub fn raft_metrics(&self) -> openraft::RaftMetrics<NodeId, MetaNode> {
        self.node.raft.metrics().borrow().clone()
    }

    /// The Raft leader (Kafka's controller), if known.
    pub fn metastore_leader(&self) -> Option<NodeId> {
        self.node.leader_id()
    }

    /// How long an agent keeps its partitions once the metastore leader
    /// stops hearing it.
    pub fn agent_lease(&self) -> Duration {
        self.node.agent_lease
    }

    /// The agents the metastore leader has not heard from for
    /// [`crate::options::agent_suspect_after`], fenced ones included, as
    /// its answer to this agent's last heartbeat said; empty when that
    /// answer is older than a lease (this agent cannot tell then) or this
    /// node runs no agent.
    pub fn suspected_agents(&self) -> Vec<AgentId> {
        match &*self.node.silent.lock() {
            Some((at, silent)) if at.elapsed() < self.node.agent_lease => silent.clone(),
            _ => Vec::new(),
        }
    }
}

/// Keeps an agent's lease alive; stops when dropped.
#[derive(Debug)]
pub struct AgentKeepAlive {
    pub(crate) task: Option<JoinHandle<()>>,
    pub(crate) stop: tokio::sync::watch::Sender<bool>,
}

impl AgentKeepAlive {
    pub fn stop(self) {}

    /// Stops heartbeating and returns once the heartbeat under way, if
    /// any, has its answer, so that no heartbeat of this agent is proposed
    /// after it returns (a controlled shutdown fences the agent next, and a
    /// late heartbeat would lift that fence).
    pub async fn finish(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for AgentKeepAlive {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
