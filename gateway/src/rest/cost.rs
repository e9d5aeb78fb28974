//! `GET /v1/cost`: this agent's object-store requests, bytes by tier and
//! cross-zone bytes since it started, their rates per hour and a monthly
//! estimate at the agent's prices (`--cost-price`, list prices by default).
//! The model and its arithmetic are in [`crate::cost`]. Needs DESCRIBE on
//! the cluster.

use axum::extract::State;
use axum::Json;

use super::{ApiError, ErrorBody};
use crate::cost::{CostReport, ObjectStoreUsage, StorageUsage};
use crate::http::extension::HttpState;
use crate::http::Caller;
use metastore::acl::AclOperation;

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
        cross_zone: crate::cross_zone::usage(b),
        ..CostReport::default()
    };
    Ok(Json(report.valued(b.config.cost_prices.clone())))
}
