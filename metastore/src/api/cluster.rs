//! [`ClusterControl`]: agents, partition leadership, Raft membership and
//! the cluster endpoint's other protocols.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::ChangeMembers;
use uuid::Uuid;

use super::{unexpected, AgentKeepAlive, Metastore, Topics};
use crate::command::{runs_within_write_limit, Command, CommandOutput};
use crate::error::MetaError;
use crate::network::{ForwardRequest, ForwardResponse};
use crate::raft_types::{MetaNode, NodeId};
use crate::types::{
    AgentId, AgentInfo, AgentRegistration, ClusterInfo, ElectionType, LeaderAndEpoch,
    MembershipInfo,
};

/// The cluster itself: agents and their leases (register, heartbeat,
/// drain), partition leadership (elections, ISR, reassignment, high
/// watermark checkpoints), the metastore's own Raft membership (learners,
/// voters, joining, removal), and the other protocols served on the
/// cluster's QUIC endpoint.
///
/// Agent and partition writes go through Raft (forwarded to the leader,
/// wherever it is) and resolve once committed and applied on this replica
/// too. The state machine checks a partition change against the partition
/// as it is when the change applies: `alter_isr` from a leader whose epoch
/// has moved on gets [`MetaError::FencedLeaderEpoch`], and one proposed at
/// a partition epoch since passed gets [`MetaError::StaleRequest`]. Membership changes
/// resolve once the new membership is committed; a new learner catches up
/// in the background. Agent reads come from the local replica, possibly
/// stale by [`Metastore::staleness`].
#[expect(
    async_fn_in_trait,
    reason = "implemented by Metastore only; callers hold the concrete type, whose futures are Send"
)]
pub trait ClusterControl {
    // ---- agents and partition leadership --------------------------------------

    /// Registers (or re-registers) an agent; it holds a lease from now on.
    async fn register_agent(&self, registration: AgentRegistration)
        -> Result<AgentInfo, MetaError>;

    /// Renews an agent's lease (and lifts a fence): tells the metastore
    /// leader, which times it on its own clock and writes nothing to the
    /// log unless the agent is fenced (see `metastore/src/liveness.rs`).
    /// Fails with [`MetaError::UnknownAgent`] if the agent must register.
    async fn heartbeat(&self, agent_id: AgentId) -> Result<(), MetaError>;

    /// Registers an agent and keeps heartbeating every `every` until the
    /// returned handle is stopped or dropped. Re-registers if the cluster
    /// forgot the agent. A heartbeat that takes longer than half a lease is
    /// abandoned for the next.
    fn keep_agent_alive(&self, registration: AgentRegistration, every: Duration) -> AgentKeepAlive;

    /// Controlled shutdown of an agent that stopped heartbeating (see
    /// `state/leaving.rs`): fences it and moves each partition it leads to
    /// another live in-sync replica. Returns how many leaderships moved.
    async fn shutdown_agent(&self, agent_id: AgentId) -> Result<usize, MetaError>;

    /// Removes a fenced agent for good (Kafka UnregisterBroker); the
    /// balancer re-places its replicas. Refused while it holds its lease.
    async fn remove_agent(&self, agent_id: AgentId) -> Result<(), MetaError>;

    /// Kafka ElectLeaders for one partition.
    async fn elect_leader(
        &self,
        topic: &str,
        partition: i32,
        election: ElectionType,
    ) -> Result<LeaderAndEpoch, MetaError>;

    /// Kafka AlterPartitionReassignments for one partition: move it to
    /// `target`, or cancel the reassignment under way with `None`.
    async fn alter_reassignment(
        &self,
        topic_id: Uuid,
        partition: i32,
        target: Option<Vec<AgentId>>,
    ) -> Result<LeaderAndEpoch, MetaError>;

    /// Starts (or stops) draining an agent: the balancer moves its
    /// replicas to other agents, and new topics place none on it.
    async fn set_draining(&self, agent_id: AgentId, draining: bool)
        -> Result<AgentInfo, MetaError>;

    /// Kafka AlterPartition: the leader at `leader_epoch`, which last saw
    /// the partition at `partition_epoch`, sets the ISR. Refused with
    /// [`MetaError::StaleRequest`] once the partition epoch moved on. After
    /// an error whose outcome is unknown ([`MetaError::outcome_unknown`])
    /// the change may still apply, until the partition epoch moves.
    async fn alter_isr(
        &self,
        topic_id: Uuid,
        partition: i32,
        leader: (AgentId, i32),
        partition_epoch: i32,
        isr: Vec<AgentId>,
    ) -> Result<LeaderAndEpoch, MetaError>;

    /// Records high watermarks (only forward moves count); returns how many
    /// moved. A list too large for one write goes out as several.
    async fn checkpoint_high_watermarks(
        &self,
        entries: Vec<(Uuid, i32, i64)>,
    ) -> Result<usize, MetaError>;

    fn agents(&self) -> Vec<AgentInfo>;

    fn cluster(&self) -> ClusterInfo;

    // ---- membership -----------------------------------------------------------

    /// Adds a non-voting member that receives the log (a read replica).
    /// Returns once the change is committed; the learner catches up in the background.
    async fn add_learner(&self, id: NodeId, raft_addr: impl Into<String>) -> Result<(), MetaError>;

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
    async fn join(
        &self,
        voters: &BTreeMap<NodeId, String>,
        timeout: Duration,
    ) -> Result<(), MetaError>;

    /// Whether this node's log names it as a member (voter or learner).
    fn is_member(&self) -> bool;

    /// Whether this node's view of the membership names node `id` (voter
    /// or learner); a node removed from the cluster is no longer one.
    fn has_member(&self, id: NodeId) -> bool;

    /// Makes these learners voters.
    async fn promote_voters(&self, ids: BTreeSet<NodeId>) -> Result<(), MetaError>;

    /// Removes a node from the cluster (voter or learner).
    async fn remove_node(&self, id: NodeId) -> Result<(), MetaError>;

    // ---- the cluster endpoint's other protocols --------------------------------

    /// Serves protocol `alpn` on this node's cluster endpoint (see
    /// [`crate::network::services`]). The name must have been declared in
    /// [`crate::QuicSettings::service_alpns`]; fails on a node without QUIC.
    fn register_cluster_service(
        &self,
        alpn: &[u8],
        service: Arc<dyn crate::network::services::ClusterService>,
    ) -> Result<(), MetaError>;

    /// Opens a connection for protocol `alpn` to node `node` at `addr`; the
    /// peer must hold node `node`'s certificate.
    async fn dial_cluster(
        &self,
        addr: &str,
        node: NodeId,
        alpn: &[u8],
    ) -> Result<quinn::Connection, MetaError>;

    /// Link faults for tests of partitions and failover (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    fn fault_injection(&self) -> &crate::network::NetworkFaults;
}

impl Metastore {
    async fn leader_command(&self, command: Command) -> Result<LeaderAndEpoch, MetaError> {
        match self.submit_one(command).await? {
            CommandOutput::Leader(l) => Ok(l),
            other => Err(unexpected(other)),
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

    fn cluster_endpoint(&self) -> Result<&crate::network::quic::QuicTransport, MetaError> {
        self.node
            .quic
            .as_deref()
            .ok_or_else(|| MetaError::InvalidSettings {
                reason: "this node has no cluster endpoint (it runs without --voters)".into(),
            })
    }
}

impl ClusterControl for Metastore {
    async fn register_agent(
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

    async fn heartbeat(&self, agent_id: AgentId) -> Result<(), MetaError> {
        match self
            .node
            .on_leader(ForwardRequest::Heartbeat { agent_id })
            .await?
        {
            ForwardResponse::Heartbeat { silent, .. } => {
                *self.node.silent.lock() = Some((std::time::Instant::now(), silent));
                Ok(())
            }
            other => Err(MetaError::Storage {
                reason: format!("heartbeat answered with {other:?}"),
            }),
        }
    }

    fn keep_agent_alive(&self, registration: AgentRegistration, every: Duration) -> AgentKeepAlive {
        let ms = self.clone();
        let attempt = (self.node.agent_lease / 2).max(every);
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let id = registration.id;
            let mut registered = false;
            // a steady beat whatever each call takes (up to `every`)
            let mut beat = tokio::time::interval(every);
            beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = beat.tick() => {}
                    _ = stopped.changed() => {}
                }
                if *stopped.borrow() {
                    return;
                }
                let res = if registered {
                    tokio::time::timeout(attempt, ms.heartbeat(id))
                        .await
                        .unwrap_or_else(|_| {
                            Err(MetaError::Timeout {
                                what: "agent heartbeat".into(),
                                maybe_applied: false,
                            })
                        })
                } else {
                    ms.register_agent(registration.clone()).await.map(|_| ())
                };
                match res {
                    Ok(()) => registered = true,
                    Err(MetaError::UnknownAgent { .. }) => registered = false,
                    Err(MetaError::ShuttingDown) => return,
                    Err(e) => tracing::warn!(agent = id, error = %e, "agent heartbeat failed"),
                }
            }
        });
        AgentKeepAlive {
            task: Some(task),
            stop,
        }
    }

    async fn shutdown_agent(&self, agent_id: AgentId) -> Result<usize, MetaError> {
        match self.submit_one(Command::ShutdownAgent { agent_id }).await? {
            CommandOutput::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    async fn remove_agent(&self, agent_id: AgentId) -> Result<(), MetaError> {
        self.unit_command(Command::RemoveAgent { agent_id }).await
    }

    async fn elect_leader(
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

    async fn alter_reassignment(
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

    async fn set_draining(
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

    async fn alter_isr(
        &self,
        topic_id: Uuid,
        partition: i32,
        (leader, leader_epoch): (AgentId, i32),
        partition_epoch: i32,
        isr: Vec<AgentId>,
    ) -> Result<LeaderAndEpoch, MetaError> {
        self.leader_command(Command::AlterIsr {
            topic_id,
            partition,
            leader,
            leader_epoch,
            isr,
            expected_partition_epoch: Some(partition_epoch),
        })
        .await
    }

    async fn checkpoint_high_watermarks(
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

    fn agents(&self) -> Vec<AgentInfo> {
        self.read(|s| s.agents().cloned().collect())
    }

    fn cluster(&self) -> ClusterInfo {
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

    async fn add_learner(&self, id: NodeId, raft_addr: impl Into<String>) -> Result<(), MetaError> {
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

    async fn join(
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

    fn is_member(&self) -> bool {
        self.node.is_member()
    }

    fn has_member(&self, id: NodeId) -> bool {
        self.node.has_member(id)
    }

    async fn promote_voters(&self, ids: BTreeSet<NodeId>) -> Result<(), MetaError> {
        self.change_membership(ChangeMembers::AddVoterIds(ids), true)
            .await
    }

    async fn remove_node(&self, id: NodeId) -> Result<(), MetaError> {
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

    fn register_cluster_service(
        &self,
        alpn: &[u8],
        service: Arc<dyn crate::network::services::ClusterService>,
    ) -> Result<(), MetaError> {
        self.cluster_endpoint()?.services.register(alpn, service);
        Ok(())
    }

    async fn dial_cluster(
        &self,
        addr: &str,
        node: NodeId,
        alpn: &[u8],
    ) -> Result<quinn::Connection, MetaError> {
        self.cluster_endpoint()?.dial(addr, node, alpn).await
    }

    #[cfg(any(test, feature = "testing"))]
    fn fault_injection(&self) -> &crate::network::NetworkFaults {
        &self.node.faults
    }
}
