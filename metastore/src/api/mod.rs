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
//! Some concerns are traits of their own, each implemented by `Metastore`
//! alone (import the trait to call its methods):
//!
//! - [`Topics`] (`topics.rs`): topics and their configs;
//! - [`Groups`] (`groups.rs`): consumer groups' committed offsets, producer
//!   ids;
//! - [`Security`] (`security.rs`): SCRAM users, ACLs, client quotas;
//! - [`Manifests`] (`manifests.rs`): tiering manifests and log start floors.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::ChangeMembers;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::command::{runs_within_write_limit, Command, CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::network::{ForwardRequest, ForwardResponse};
use crate::node::Node;
use crate::options::MetastoreConfig;
use crate::raft_types::{MetaNode, NodeId};
use crate::state::MetaState;
use crate::types::{
    AgentId, AgentInfo, AgentRegistration, ClusterInfo, ElectionType, LeaderAndEpoch,
    MembershipInfo, MetaEvent,
};

mod groups;
mod manifests;
mod security;
mod topics;

pub use groups::Groups;
pub use manifests::Manifests;
pub use security::Security;
pub use topics::Topics;

/// A running metastore node. Cheap to clone; clones share the node.
#[derive(Clone)]
pub struct Metastore {
    node: Arc<Node>,
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

    /// Waits until a leader is known and this replica knows the cluster id.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), MetaError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut metrics = self.node.raft.metrics();
        loop {
            let has_leader = metrics.borrow_and_update().current_leader.is_some();
            if has_leader && self.node.applied.read().state.cluster_id().is_some() {
                return Ok(());
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

    async fn leader_command(&self, command: Command) -> Result<LeaderAndEpoch, MetaError> {
        match self.submit_one(command).await? {
            CommandOutput::Leader(l) => Ok(l),
            other => Err(unexpected(other)),
        }
    }

    /// Registers (or re-registers) an agent; it holds a lease from now on.
    pub async fn register_agent(
        &self,
        registration: AgentRegistration,
    ) -> Result<AgentInfo, MetaError> {
        match self
            .submit_one(Command::RegisterAgent { registration })
            .await?
        {
            CommandOutput::Agent(a) => Ok(a),
            other => Err(unexpected(other)),
        }
    }

    /// Renews an agent's lease (and lifts a fence).
    pub async fn heartbeat(&self, agent_id: AgentId) -> Result<(), MetaError> {
        self.unit_command(Command::Heartbeat { agent_id }).await
    }

    /// Registers an agent and keeps heartbeating every `every` until the
    /// returned handle is stopped or dropped. Re-registers if the cluster
    /// forgot the agent.
    pub fn keep_agent_alive(
        &self,
        registration: AgentRegistration,
        every: Duration,
    ) -> AgentKeepAlive {
        let ms = self.clone();
        let task = tokio::spawn(async move {
            let id = registration.id;
            let mut registered = false;
            loop {
                let res = if registered {
                    ms.heartbeat(id).await
                } else {
                    ms.register_agent(registration.clone()).await.map(|_| ())
                };
                match res {
                    Ok(()) => registered = true,
                    Err(MetaError::UnknownAgent { .. }) => registered = false,
                    Err(MetaError::ShuttingDown) => return,
                    Err(e) => tracing::warn!(agent = id, error = %e, "agent heartbeat failed"),
                }
                tokio::time::sleep(every).await;
            }
        });
        AgentKeepAlive { task }
    }

    /// Kafka ElectLeaders for one partition.
    pub async fn elect_leader(
        &self,
        topic: &str,
        partition: i32,
        election: ElectionType,
    ) -> Result<LeaderAndEpoch, MetaError> {
        let id = self
            .topic(topic)
            .map(|t| t.id)
            .ok_or_else(|| MetaError::UnknownTopic {
                name: topic.to_owned(),
            })?;
        self.leader_command(Command::ElectLeader {
            topic_id: id,
            partition,
            election,
        })
        .await
    }

    /// Kafka AlterPartitionReassignments for one partition: move it to
    /// `target`, or cancel the reassignment under way with `None`.
    pub async fn alter_reassignment(
        &self,
        topic_id: Uuid,
        partition: i32,
        target: Option<Vec<AgentId>>,
    ) -> Result<LeaderAndEpoch, MetaError> {
        self.leader_command(Command::AlterReassignment {
            topic_id,
            partition,
            target,
            expected_partition_epoch: None,
        })
        .await
    }

    /// Starts (or stops) draining an agent: the balancer moves its
    /// replicas to other agents, and new topics place none on it.
    pub async fn set_draining(
        &self,
        agent_id: AgentId,
        draining: bool,
    ) -> Result<AgentInfo, MetaError> {
        match self
            .submit_one(Command::SetAgentDraining { agent_id, draining })
            .await?
        {
            CommandOutput::Agent(a) => Ok(a),
            other => Err(unexpected(other)),
        }
    }

    /// Kafka AlterPartition: the leader at `leader_epoch` sets the ISR.
    pub async fn alter_isr(
        &self,
        topic_id: Uuid,
        partition: i32,
        leader: AgentId,
        leader_epoch: i32,
        isr: Vec<AgentId>,
    ) -> Result<LeaderAndEpoch, MetaError> {
        self.leader_command(Command::AlterIsr {
            topic_id,
            partition,
            leader,
            leader_epoch,
            isr,
        })
        .await
    }

    /// Records high watermarks (only forward moves count); returns how many
    /// moved. A list too large for one write goes out as several.
    pub async fn checkpoint_high_watermarks(
        &self,
        entries: Vec<(Uuid, i32, i64)>,
    ) -> Result<usize, MetaError> {
        let mut moved = 0;
        for run in runs_within_write_limit(entries) {
            match self
                .submit_one(Command::CheckpointHighWatermarks { entries: run })
                .await?
            {
                CommandOutput::Count(n) => moved += n,
                other => return Err(unexpected(other)),
            }
        }
        Ok(moved)
    }

    // ---- local reads -----------------------------------------------------------

    /// Runs `f` on the local replica's state (under a read lock: keep it short).
    pub fn read<R>(&self, f: impl FnOnce(&MetaState) -> R) -> R {
        f(&self.node.applied.read().state)
    }

    pub fn agents(&self) -> Vec<AgentInfo> {
        self.read(|s| s.agents().cloned().collect())
    }

    pub fn cluster(&self) -> ClusterInfo {
        let m = self.node.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let info = MembershipInfo {
            voters: voters.iter().copied().collect(),
            learners: membership.learner_ids().collect(),
            addrs: membership
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect(),
        };
        let (cluster_id, agents) = self.read(|s| {
            (
                s.cluster_id().unwrap_or_default().to_owned(),
                s.agents().cloned().collect(),
            )
        });
        ClusterInfo {
            cluster_id,
            node_id: self.node.id,
            controller: m.current_leader,
            agents,
            membership: info,
            agent_lease_ms: u64::try_from(self.node.agent_lease.as_millis()).unwrap_or(u64::MAX),
        }
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

    // ---- membership -----------------------------------------------------------

    /// Raft's own view of this node (terms, log indexes, replication), for metrics.
    pub fn raft_metrics(&self) -> openraft::RaftMetrics<NodeId, MetaNode> {
        self.node.raft.metrics().borrow().clone()
    }

    /// The Raft leader (Kafka's controller), if known.
    pub fn metastore_leader(&self) -> Option<NodeId> {
        self.node.leader_id()
    }

    /// Adds a non-voting member that receives the log (a read replica).
    /// Returns once the change is committed; the learner catches up in the background.
    pub async fn add_learner(
        &self,
        id: NodeId,
        raft_addr: impl Into<String>,
    ) -> Result<(), MetaError> {
        let change = ChangeMembers::AddNodes(
            [(
                id,
                MetaNode {
                    addr: raft_addr.into(),
                },
            )]
            .into(),
        );
        self.change_membership(change, true).await
    }

    /// Joins an existing cluster as a learner (a non-voting member that
    /// receives the log): asks each of `voters` (id -> Raft address) to add
    /// this node under its id and advertised address, until one accepts; a
    /// voter that does not lead hands the request to the leader. Keeps
    /// trying for `timeout`, then returns why each voter refused.
    ///
    /// For a node started with [`crate::Bootstrap::Join`]. Safe to call on
    /// every start: a node whose log already names it as a member returns at
    /// once without asking, and a voter asked again for a member at the same
    /// address changes nothing.
    pub async fn join(
        &self,
        voters: &BTreeMap<NodeId, String>,
        timeout: Duration,
    ) -> Result<(), MetaError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let attempt = Duration::from_secs(3).min(timeout.max(Duration::from_millis(100)));
        loop {
            match self.node.join(voters, attempt).await {
                Ok(()) => return Ok(()),
                Err(MetaError::ShuttingDown) => return Err(MetaError::ShuttingDown),
                Err(e) if tokio::time::Instant::now() + Duration::from_millis(500) >= deadline => {
                    return Err(e)
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Whether this node's log names it as a member (voter or learner).
    pub fn is_member(&self) -> bool {
        self.node.is_member()
    }

    /// Makes these learners voters.
    pub async fn promote_voters(&self, ids: BTreeSet<NodeId>) -> Result<(), MetaError> {
        self.change_membership(ChangeMembers::AddVoterIds(ids), true)
            .await
    }

    /// Removes a node from the cluster (voter or learner).
    pub async fn remove_node(&self, id: NodeId) -> Result<(), MetaError> {
        let voters = self.cluster().membership.voters;
        if voters.contains(&id) {
            // not retained: the voter leaves the node list too
            self.change_membership(ChangeMembers::RemoveVoters([id].into()), false)
                .await
        } else {
            self.change_membership(ChangeMembers::RemoveNodes([id].into()), false)
                .await
        }
    }

    async fn change_membership(
        &self,
        change: ChangeMembers<NodeId, MetaNode>,
        retain: bool,
    ) -> Result<(), MetaError> {
        self.node
            .on_leader(ForwardRequest::ChangeMembership { change, retain })
            .await
            .map(|_| ())
    }

    // ---- the cluster endpoint's other protocols --------------------------------

    /// Serves protocol `alpn` on this node's cluster endpoint (see
    /// [`crate::network::services`]). The name must have been declared in
    /// [`crate::QuicSettings::service_alpns`]; fails on a node without QUIC.
    pub fn register_cluster_service(
        &self,
        alpn: &[u8],
        service: Arc<dyn crate::network::services::ClusterService>,
    ) -> Result<(), MetaError> {
        self.cluster_endpoint()?.services.register(alpn, service);
        Ok(())
    }

    fn cluster_endpoint(&self) -> Result<&crate::network::quic::QuicTransport, MetaError> {
        self.node
            .quic
            .as_deref()
            .ok_or_else(|| MetaError::InvalidSettings {
                reason: "this node has no cluster endpoint (it runs without --voters)".into(),
            })
    }

    /// Opens a connection for protocol `alpn` to node `node` at `addr`; the
    /// peer must hold node `node`'s certificate.
    pub async fn dial_cluster(
        &self,
        addr: &str,
        node: NodeId,
        alpn: &[u8],
    ) -> Result<quinn::Connection, MetaError> {
        self.cluster_endpoint()?.dial(addr, node, alpn).await
    }

    /// Link faults for tests of partitions and failover (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    pub fn fault_injection(&self) -> &crate::network::NetworkFaults {
        &self.node.faults
    }
}

/// Keeps an agent's lease alive; stops when dropped.
#[derive(Debug)]
pub struct AgentKeepAlive {
    task: JoinHandle<()>,
}

impl AgentKeepAlive {
    pub fn stop(self) {}
}

impl Drop for AgentKeepAlive {
    fn drop(&mut self) {
        self.task.abort();
    }
}
