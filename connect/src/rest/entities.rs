//! The JSON bodies Connect answers with (`ConnectorInfo`, `TaskInfo`,
//! `ConnectorStateInfo`), built from the metastore's view of a connector.
//!
//! Statuses are what workers last reported for the connector's current
//! generation. Anything without such a report is shown from the
//! connector's target: `UNASSIGNED` while it should run (no worker has
//! taken it up yet, or the one that had it has not reported on the new
//! generation), `PAUSED` or `STOPPED` once it was asked to pause or stop.
//! A STOPPED connector has no tasks, as in Connect (its task configs are
//! kept, and come back when it resumes).

use std::collections::BTreeMap;

use metastore::connect::{Connector, Status, TargetState};
use serde::Serialize;

use crate::config::Config;
use crate::plugins::Plugin;

/// `{"connector": ..., "task": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskId {
    pub connector: String,
    pub task: u32,
}

/// Connect's `ConnectorInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectorInfo {
    pub name: String,
    pub config: Config,
    pub tasks: Vec<TaskId>,
    /// `source`, `sink` or `unknown`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// Connect's `TaskInfo` (`GET /connectors/{name}/tasks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskInfo {
    pub id: TaskId,
    pub config: Config,
}

/// The state of a connector instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct State {
    pub state: String,
    pub worker_id: String,
    /// Left out when empty, as Connect does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// The state of one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskState {
    pub id: u32,
    pub state: String,
    pub worker_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// Connect's `ConnectorStateInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateInfo {
    pub name: String,
    pub connector: State,
    pub tasks: Vec<TaskState>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// `source`, `sink`, or `unknown` for a class this engine does not know.
pub fn kind_of(config: &BTreeMap<String, String>) -> &'static str {
    config
        .get("connector.class")
        .and_then(|c| Plugin::find(c))
        .map_or("unknown", |p| p.kind().as_str())
}

/// The ids of the tasks the connector has now: none while STOPPED.
pub fn task_ids(c: &Connector) -> std::ops::Range<u32> {
    let n = match c.target {
        TargetState::Stopped => 0,
        TargetState::Running | TargetState::Paused => c.tasks.len(),
    };
    0..u32::try_from(n).unwrap_or(u32::MAX)
}

pub fn info(name: &str, c: &Connector) -> ConnectorInfo {
    ConnectorInfo {
        name: name.to_owned(),
        config: c.config.clone(),
        tasks: task_ids(c)
            .map(|task| TaskId {
                connector: name.to_owned(),
                task,
            })
            .collect(),
        kind: kind_of(&c.config),
    }
}

pub fn task_infos(name: &str, c: &Connector) -> Vec<TaskInfo> {
    task_ids(c)
        .filter_map(|task| {
            c.tasks.get(task as usize).map(|config| TaskInfo {
                id: TaskId {
                    connector: name.to_owned(),
                    task,
                },
                config: config.clone(),
            })
        })
        .collect()
}

/// What a report (or its absence) shows. `worker` is this listener's id,
/// shown for work nobody has reported on.
fn shown(c: &Connector, report: Option<&Status>, worker: &str) -> State {
    match report {
        Some(s) if s.generation >= c.generation => State {
            state: s.state.clone(),
            worker_id: s.worker_id.clone(),
            trace: s.trace.clone().filter(|t| !t.is_empty()),
        },
        stale => {
            let (state, worker_id) = match c.target {
                TargetState::Running => ("UNASSIGNED", worker),
                // the worker that ran it, until it reports the pause
                TargetState::Paused => ("PAUSED", stale.map_or(worker, |s| &s.worker_id)),
                TargetState::Stopped => ("STOPPED", stale.map_or(worker, |s| &s.worker_id)),
            };
            State {
                state: state.to_owned(),
                worker_id: worker_id.to_owned(),
                trace: None,
            }
        }
    }
}

pub fn task_state(c: &Connector, task: u32, worker: &str) -> TaskState {
    let State {
        state,
        worker_id,
        trace,
    } = shown(c, c.task_status.get(&task), worker);
    TaskState {
        id: task,
        state,
        worker_id,
        trace,
    }
}

pub fn status(name: &str, c: &Connector, worker: &str) -> StateInfo {
    StateInfo {
        name: name.to_owned(),
        connector: shown(c, c.status.as_ref(), worker),
        tasks: task_ids(c).map(|t| task_state(c, t, worker)).collect(),
        kind: kind_of(&c.config),
    }
}

/// The worker ids of agents that are gone (their lease lapsed, or they
/// shut down) and not back under the same id: what they last reported is
/// no longer true.
pub fn gone_workers(agents: &[metastore::AgentInfo]) -> std::collections::BTreeSet<String> {
    let live: std::collections::BTreeSet<&str> = agents
        .iter()
        .filter(|a| !a.fenced && !a.shut_down)
        .filter_map(|a| a.addrs.connect.as_deref())
        .collect();
    agents
        .iter()
        .filter(|a| a.fenced || a.shut_down)
        .filter_map(|a| a.addrs.connect.clone())
        .filter(|w| !live.contains(w.as_str()))
        .collect()
}

/// A running or paused state reported by a worker that is gone is shown
/// as `UNASSIGNED` (its work is waiting for a live worker to take it up);
/// a failure stays shown as it was reported.
fn unassign_if_gone(state: &mut String, worker: &str, gone: &std::collections::BTreeSet<String>) {
    if state != "FAILED" && gone.contains(worker) {
        *state = "UNASSIGNED".to_owned();
    }
}

impl StateInfo {
    pub fn unassign_gone(mut self, gone: &std::collections::BTreeSet<String>) -> Self {
        unassign_if_gone(&mut self.connector.state, &self.connector.worker_id, gone);
        for t in &mut self.tasks {
            unassign_if_gone(&mut t.state, &t.worker_id, gone);
        }
        self
    }
}

impl TaskState {
    pub fn unassign_gone(mut self, gone: &std::collections::BTreeSet<String>) -> Self {
        unassign_if_gone(&mut self.state, &self.worker_id, gone);
        self
    }
}

#[cfg(test)]
#[path = "entities_tests.rs"]
mod tests;
