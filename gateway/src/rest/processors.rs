//! `/v1/processors`: the stream processor's workers heartbeat here and are
//! told which source partitions they hold (leases kept in the metastore,
//! [`metastore::processors`]); the list shows every pipeline's workers and
//! leases.
//!
//! A pipeline's workers read its source and commit offsets for its group
//! `aerostream-process-<pipeline>`, so they are authorized as members of
//! that group are: a heartbeat or a leave needs READ on the group, the
//! list shows the pipelines whose group the caller may DESCRIBE.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use metastore::acl::{AclOperation, ResourceType};
use metastore::processors::{Assignment, ProcessorCommand, ProcessorOutput};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ErrorBody};
use crate::http::extension::HttpState;
use crate::http::Caller;

/// The consumer group a pipeline's workers commit offsets for.
pub fn group_of(pipeline: &str) -> String {
    format!("aerostream-process-{pipeline}")
}

/// A worker's heartbeat.
#[derive(Debug, Deserialize, ToSchema)]
pub struct HeartbeatRequest {
    /// The worker's id, unique among the pipeline's workers.
    pub worker: String,
    /// How long the worker stays live without another heartbeat (ms,
    /// 1,000 to 300,000).
    pub ttl_ms: i64,
    /// The source topic's partitions as the worker sees them.
    #[serde(default)]
    pub partitions: Vec<i32>,
    /// Partitions the worker has checkpointed and gives up.
    #[serde(default)]
    pub release: Vec<i32>,
}

/// What a heartbeat answers.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatResponse {
    /// The partitions the worker holds, with the generation of their grant.
    pub held: BTreeMap<i32, u64>,
    /// Held partitions to checkpoint and release.
    pub revoke: Vec<i32>,
    /// The pipeline's live workers.
    pub workers: Vec<String>,
}

impl From<Assignment> for HeartbeatResponse {
    fn from(a: Assignment) -> Self {
        HeartbeatResponse {
            held: a.held,
            revoke: a.revoke,
            workers: a.workers,
        }
    }
}

/// A worker leaving.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LeaveRequest {
    pub worker: String,
}

/// One pipeline's workers and leases.
#[derive(Debug, Serialize, ToSchema)]
pub struct PipelineView {
    pub pipeline: String,
    /// Worker id -> when its time to live runs out (ms since the epoch).
    pub workers: BTreeMap<String, i64>,
    /// Partition -> the worker holding it.
    pub leases: BTreeMap<i32, String>,
    /// The source's partitions no worker holds.
    pub unassigned: Vec<i32>,
}

/// A worker's heartbeat: it stays live, releases what it gave up, and
/// learns what it holds and what to give up.
#[utoipa::path(
    post,
    path = "/v1/processors/{pipeline}/heartbeat",
    tag = "processors",
    params(("pipeline" = String, Path, description = "Pipeline name")),
    request_body = HeartbeatRequest,
    responses(
        (status = 200, description = "The worker's partitions", body = HeartbeatResponse),
        (status = 400, description = "`invalid_request`", body = ErrorBody),
        (status = 403, description = "`forbidden`: no READ on the pipeline's group", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody)
    )
)]
pub async fn heartbeat(
    State(st): State<HttpState>,
    caller: Caller,
    Path(pipeline): Path<String>,
    body: Bytes,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let b = &st.broker;
    // who may ask is checked before what is asked is read
    caller.require(
        b,
        AclOperation::Read,
        ResourceType::Group,
        &group_of(&pipeline),
    )?;
    let req: HeartbeatRequest = parse(&body)?;
    let out = b
        .node
        .catalog
        .processor_command(ProcessorCommand::Heartbeat {
            pipeline,
            worker: req.worker,
            ttl_ms: req.ttl_ms,
            partitions: req.partitions,
            release: req.release,
        })
        .await?;
    match out {
        ProcessorOutput::Assignment(a) => Ok(Json(a.into())),
        ProcessorOutput::Left => Err(ApiError::invalid("a heartbeat was answered as a leave")),
    }
}

/// A worker stops: its partitions go to the others at once.
#[utoipa::path(
    post,
    path = "/v1/processors/{pipeline}/leave",
    tag = "processors",
    params(("pipeline" = String, Path, description = "Pipeline name")),
    request_body = LeaveRequest,
    responses(
        (status = 204, description = "Left"),
        (status = 400, description = "`invalid_request`: no worker in the body", body = ErrorBody),
        (status = 403, description = "`forbidden`: no READ on the pipeline's group", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody)
    )
)]
pub async fn leave(
    State(st): State<HttpState>,
    caller: Caller,
    Path(pipeline): Path<String>,
    body: Bytes,
) -> Result<axum::http::StatusCode, ApiError> {
    let b = &st.broker;
    caller.require(
        b,
        AclOperation::Read,
        ResourceType::Group,
        &group_of(&pipeline),
    )?;
    let req: LeaveRequest = parse(&body)?;
    b.node
        .catalog
        .processor_command(ProcessorCommand::Leave {
            pipeline,
            worker: req.worker,
        })
        .await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// Every pipeline with live workers whose group the caller may describe.
#[utoipa::path(
    get,
    path = "/v1/processors",
    tag = "processors",
    responses(
        (status = 200, description = "The pipelines", body = Vec<PipelineView>)
    )
)]
pub async fn list_processors(
    State(st): State<HttpState>,
    caller: Caller,
) -> Json<Vec<PipelineView>> {
    let b = &st.broker;
    let now_ms = wall_clock_ms();
    let all: Vec<PipelineView> = b.node.catalog.read(|s| {
        s.processors()
            .pipelines
            .iter()
            .map(|(name, p)| {
                // workers whose time ran out are only dropped at the next
                // command: leave them out here already
                let live: BTreeMap<String, i64> = p
                    .workers
                    .iter()
                    .filter(|(_, w)| w.expires_ms > now_ms)
                    .map(|(id, w)| (id.clone(), w.expires_ms))
                    .collect();
                let leases: BTreeMap<i32, String> = p
                    .leases
                    .iter()
                    .filter(|(_, l)| live.contains_key(&l.worker))
                    .map(|(part, l)| (*part, l.worker.clone()))
                    .collect();
                let unassigned = p
                    .partitions
                    .iter()
                    .filter(|part| !leases.contains_key(part))
                    .copied()
                    .collect();
                PipelineView {
                    pipeline: name.clone(),
                    workers: live,
                    leases,
                    unassigned,
                }
            })
            .filter(|v| !v.workers.is_empty())
            .collect()
    });
    Json(
        all.into_iter()
            .filter(|v| {
                caller.may(
                    b,
                    AclOperation::Describe,
                    ResourceType::Group,
                    &group_of(&v.pipeline),
                )
            })
            .collect(),
    )
}

/// A JSON body, or `invalid_request` saying what is wrong with it.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("the body: {e}")))
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
