//! `GET /v1/cluster`: the agents, their liveness and roles, and the
//! metastore leader. Needs DESCRIBE on the cluster.

use axum::extract::State;
use axum::Json;
use metastore::{ClusterControl, Topics};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ErrorBody};
use crate::http::extension::HttpState;
use crate::http::Caller;
use metastore::acl::AclOperation;

/// One agent of the cluster.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    pub id: u64,
    /// Where Kafka clients reach it (`host:port`).
    pub kafka_address: Option<String>,
    pub rack: Option<String>,
    /// Holds its lease (not fenced).
    pub live: bool,
    /// An operator asked for its replicas to move elsewhere.
    pub draining: bool,
    /// The metastore leader's clock when its lease was last renewed in the
    /// metastore's log (ms since the epoch): its registration, or a
    /// heartbeat that lifted a fence. Heartbeats themselves are not logged;
    /// `live` says whether it holds its lease.
    pub last_heartbeat_ms: i64,
    /// Partitions it leads.
    pub leader_of: u64,
    /// Partitions it holds a follower replica of.
    pub follower_of: u64,
    /// Whether this is the agent that answered.
    pub this_agent: bool,
}

/// The cluster as this agent's metastore replica sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterView {
    pub cluster_id: String,
    /// The agent that answered.
    pub node_id: i32,
    /// The metastore (Raft) leader, Kafka's controller; absent during an election.
    pub metastore_leader: Option<u64>,
    pub topics: u64,
    pub partitions: u64,
    pub agents: Vec<AgentView>,
}

/// The agents with liveness, racks and partition roles, and the metastore leader.
#[utoipa::path(
    get,
    path = "/v1/cluster",
    tag = "cluster",
    responses(
        (status = 200, description = "The cluster", body = ClusterView),
        (status = 403, description = "`forbidden`: no DESCRIBE on the cluster", body = ErrorBody)
    )
)]
pub async fn get_cluster(
    State(st): State<HttpState>,
    caller: Caller,
) -> Result<Json<ClusterView>, ApiError> {
    let b = &st.broker;
    caller.require_on_cluster(b, AclOperation::Describe)?;
    let topics = b.node.catalog.topics();
    let partitions = topics.iter().flat_map(|t| t.partitions.iter());
    let me = u64::try_from(b.config.node_id).ok();
    let agents = b
        .node
        .catalog
        .agents()
        .into_iter()
        .map(|a| {
            let (mut leader_of, mut follower_of) = (0, 0);
            for p in partitions.clone() {
                if p.leader == Some(a.id) {
                    leader_of += 1;
                } else if p.replicas.contains(&a.id) {
                    follower_of += 1;
                }
            }
            AgentView {
                id: a.id,
                kafka_address: a.addrs.kafka.clone(),
                rack: a.rack.clone(),
                live: !a.fenced,
                draining: a.draining,
                last_heartbeat_ms: a.last_heartbeat_ms,
                leader_of,
                follower_of,
                this_agent: Some(a.id) == me,
            }
        })
        .collect();
    Ok(Json(ClusterView {
        cluster_id: b.node.catalog.cluster().cluster_id,
        node_id: b.config.node_id,
        metastore_leader: b.node.catalog.metastore_leader(),
        topics: topics.len() as u64,
        partitions: partitions.count() as u64,
        agents,
    }))
}
