//! `GET /v1/cost`: this agent's object-store requests, bytes by tier and
//! cross-zone bytes since it started, their rates per hour and a monthly
//! estimate at the agent's prices (`--cost-price`, list prices by default).
//! The model and its arithmetic are in [`crate::cost`]. Needs DESCRIBE on
//! the cluster.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;

use super::{ApiError, ErrorBody};
use crate::broker::Broker;
use crate::cost::{CostReport, CrossZoneUsage, ObjectStoreUsage, PeerUsage, StorageUsage};
use crate::http::extension::HttpState;
use crate::http::Caller;
use metastore::acl::AclOperation;
use metastore::ClusterControl;

/// Bytes exchanged with each peer, classed by the racks registered in the
/// metastore (this agent's own registration first, then its `--rack`).
pub fn cross_zone(b: &Broker) -> CrossZoneUsage {
    let agents = b.node.catalog.agents();
    let me = u64::try_from(b.config.node_id).ok();
    let own = agents
        .iter()
        .find(|a| Some(a.id) == me)
        .and_then(|a| a.rack.clone())
        .or_else(|| b.config.rack.clone());
    let mut peers: BTreeMap<u64, PeerUsage> = BTreeMap::new();
    for (id, bytes) in b.node.partitions.counters().replica_peers.snapshot() {
        let p = peer(&mut peers, &agents, id);
        p.replication_sent_bytes += bytes.sent;
        p.replication_received_bytes += bytes.received;
    }
    for (id, bytes) in b.forward_counters.peers.snapshot() {
        let p = peer(&mut peers, &agents, id);
        p.forwarding_sent_bytes += bytes.sent;
        p.forwarding_received_bytes += bytes.received;
    }
    CrossZoneUsage::of(own.as_deref(), peers.into_values().collect())
}

fn peer<'a>(
    peers: &'a mut BTreeMap<u64, PeerUsage>,
    agents: &[metastore::AgentInfo],
    id: u64,
) -> &'a mut PeerUsage {
    peers.entry(id).or_insert_with(|| PeerUsage {
        agent: id,
        rack: agents
            .iter()
            .find(|a| a.id == id)
            .and_then(|a| a.rack.clone()),
        ..PeerUsage::default()
    })
}

/// Object-store requests, storage by tier and cross-zone bytes, with a
/// monthly estimate.
#[utoipa::path(
    get,
    path = "/v1/cost",
    tag = "cluster",
    responses(
        (status = 200, description = "This agent's counts, rates and monthly estimate", body = CostReport),
        (status = 403, description = "`forbidden`: no DESCRIBE on the cluster", body = ErrorBody)
    )
)]
pub async fn get_cost(
    State(st): State<HttpState>,
    caller: Caller,
) -> Result<Json<CostReport>, ApiError> {
    let b = &st.broker;
    caller.require_on_cluster(b, AclOperation::Describe)?;
    // no object store wired (a test broker): nothing was asked of one
    let requests = st
        .extensions
        .iter()
        .find_map(|x| x.object_requests())
        .unwrap_or_default();
    let (local_bytes, object_bytes) = super::metrics::storage_totals(b).await;
    let report = CostReport {
        node_id: b.config.node_id,
        rack: b.config.rack.clone(),
        at_ms: dataplane::partition::now_ms(),
        uptime_seconds: b.started.elapsed().as_secs_f64(),
        object_store: ObjectStoreUsage::of(requests),
        storage: StorageUsage {
            local_bytes,
            object_bytes,
        },
        cross_zone: cross_zone(b),
        ..CostReport::default()
    };
    Ok(Json(report.valued(b.config.cost_prices.clone())))
}
