//! Statuses, task configs, restarts, and pause, resume and stop.
//!
//! Restarts and target changes are metastore commands; the workers see
//! them in the replicated state and act on them (a new generation, a
//! task's restart count changed, a new target).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use metastore::connect::{ConnectCommand, TargetState};

use super::connectors::read;
use super::entities::{self, StateInfo, TaskInfo, TaskState};
use super::{empty, ApiError, Params, QueryParams, Rest};

const RESTARTING: &str = "RESTARTING";

/// The workers of agents that are gone (see [`entities::gone_workers`]).
fn gone(rest: &Rest) -> std::collections::BTreeSet<String> {
    let agents: Vec<metastore::AgentInfo> = rest.meta.read(|s| s.agents().cloned().collect());
    entities::gone_workers(&agents)
}
const FAILED: &str = "FAILED";

/// `GET /connectors/{name}/status`.
pub(super) async fn status(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Json<StateInfo>, ApiError> {
    let c = read(&rest, &name)?;
    Ok(Json(
        entities::status(&name, &c, &rest.info.worker_id).unassign_gone(&gone(&rest)),
    ))
}

/// `GET /connectors/{name}/tasks`: each task's id and config.
pub(super) async fn tasks(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Json<Vec<TaskInfo>>, ApiError> {
    let c = read(&rest, &name)?;
    Ok(Json(entities::task_infos(&name, &c)))
}

fn task_not_found(name: &str, task: u32) -> ApiError {
    ApiError::not_found(format!("No status found for task {name}-{task}"))
}

/// `GET /connectors/{name}/tasks/{task}/status`.
pub(super) async fn task_status(
    State(rest): State<Rest>,
    Params((name, task)): Params<(String, u32)>,
) -> Result<Json<TaskState>, ApiError> {
    let c = read(&rest, &name)?;
    if !entities::task_ids(&c).contains(&task) {
        return Err(task_not_found(&name, task));
    }
    Ok(Json(
        entities::task_state(&c, task, &rest.info.worker_id).unassign_gone(&gone(&rest)),
    ))
}

/// `POST /connectors/{name}/restart`. Without `includeTasks` and
/// `onlyFailed`, the connector instance restarts: 204. Otherwise the
/// connector (unless `onlyFailed` and it has not failed) and, with
/// `includeTasks`, its tasks (only the failed ones with `onlyFailed`)
/// restart: 202 with the status, what restarts shown as RESTARTING.
pub(super) async fn restart(
    State(rest): State<Rest>,
    Params(name): Params<String>,
    query: QueryParams,
) -> Result<Response, ApiError> {
    let include_tasks = query.flag("includeTasks", false);
    let only_failed = query.flag("onlyFailed", false);
    if !include_tasks && !only_failed {
        rest.meta
            .connect_command(ConnectCommand::Restart {
                name,
                connector: true,
                tasks: Vec::new(),
            })
            .await?;
        return Ok(empty(StatusCode::NO_CONTENT));
    }
    let c = read(&rest, &name)?;
    let mut status = entities::status(&name, &c, &rest.info.worker_id).unassign_gone(&gone(&rest));
    let connector = !only_failed || status.connector.state == FAILED;
    let mut restarted = Vec::new();
    if include_tasks {
        for t in &mut status.tasks {
            if !only_failed || t.state == FAILED {
                restarted.push(t.id);
                t.state = RESTARTING.to_owned();
            }
        }
    }
    if connector {
        status.connector.state = RESTARTING.to_owned();
    }
    if connector || !restarted.is_empty() {
        rest.meta
            .connect_command(ConnectCommand::Restart {
                name,
                connector,
                tasks: restarted,
            })
            .await?;
    }
    Ok((StatusCode::ACCEPTED, Json(status)).into_response())
}

/// `POST /connectors/{name}/tasks/{task}/restart`: 204; 404 for a task
/// the connector does not have now (a STOPPED connector has none).
pub(super) async fn restart_task(
    State(rest): State<Rest>,
    Params((name, task)): Params<(String, u32)>,
) -> Result<Response, ApiError> {
    if !entities::task_ids(&read(&rest, &name)?).contains(&task) {
        return Err(ApiError::not_found(format!("Task {name}-{task} not found")));
    }
    rest.meta
        .connect_command(ConnectCommand::Restart {
            name,
            connector: false,
            tasks: vec![task],
        })
        .await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

async fn set_target(rest: &Rest, name: String, target: TargetState) -> Result<Response, ApiError> {
    rest.meta
        .connect_command(ConnectCommand::SetTarget { name, target })
        .await?;
    Ok(empty(StatusCode::ACCEPTED))
}

/// `PUT /connectors/{name}/pause`: 202.
pub(super) async fn pause(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Response, ApiError> {
    set_target(&rest, name, TargetState::Paused).await
}

/// `PUT /connectors/{name}/resume`: 202.
pub(super) async fn resume(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Response, ApiError> {
    set_target(&rest, name, TargetState::Running).await
}

/// `PUT /connectors/{name}/stop` (KIP-875): 202.
pub(super) async fn stop(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Response, ApiError> {
    set_target(&rest, name, TargetState::Stopped).await
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
