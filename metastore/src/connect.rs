//! The Connect engine's state: connectors (their configs, the task configs
//! the connector was split into, target states), the statuses workers
//! report for them, and source connectors' offsets, replicated through the
//! metastore so every agent's REST API answers the same and a task that
//! moves to another agent resumes where the last one committed.
//!
//! Apache Kafka's Connect keeps the same things in three compacted topics
//! (configs, statuses, offsets) and elects a leader among the workers to
//! assign tasks. Here the metastore is already the replicated,
//! linearisable store every agent reads, and the assignment is a function
//! of its state (the connectors and the live agents), so no worker
//! election or rebalance protocol is needed. Sink connectors' offsets are
//! their consumer group's (`connect-<name>`), as in Connect, and live with
//! the other group offsets.
//!
//! Statuses are written by workers only when a task changes state, and are
//! tagged with the generation they describe: a report about a generation
//! the connector has moved past (a config change or a restart) is dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::MetaError;

/// HTTP statuses the state decides (Connect's REST API answers with the
/// HTTP status in its error bodies' `error_code`).
pub mod code {
    pub const BAD_REQUEST: u16 = 400;
    pub const NOT_FOUND: u16 = 404;
    pub const CONFLICT: u16 = 409;
}

/// The largest config (all keys and values) a connector may have.
pub const MAX_CONFIG_BYTES: usize = 256 << 10;

/// The most tasks one connector may run.
pub const MAX_TASKS: usize = 1024;

/// What a connector is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TargetState {
    Running,
    Paused,
    /// KIP-875: no tasks at all (their configs kept), offsets may be
    /// changed.
    Stopped,
}

impl TargetState {
    /// As Connect spells it (`RUNNING`, `PAUSED`, `STOPPED`).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetState::Running => "RUNNING",
            TargetState::Paused => "PAUSED",
            TargetState::Stopped => "STOPPED",
        }
    }
}

/// A state a worker reports for a connector or one of its tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// `RUNNING`, `PAUSED`, `FAILED`, `UNASSIGNED`, `RESTARTING`, `STOPPED`.
    pub state: String,
    /// The worker (`host:port` of its Connect listener).
    pub worker_id: String,
    /// Why it failed, when it did.
    #[serde(default)]
    pub trace: Option<String>,
    /// The connector generation the report is about.
    pub generation: u64,
}

/// One connector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connector {
    pub config: BTreeMap<String, String>,
    /// One config per task, as the connector split its work.
    pub tasks: Vec<BTreeMap<String, String>>,
    pub target: TargetState,
    /// Bumped on every config change and connector restart: tasks of an
    /// older generation stop, and are started again from the new configs.
    pub generation: u64,
    /// Restart counts per task (`POST .../tasks/{id}/restart`, or a
    /// connector restart with `includeTasks`): a task restarts when its
    /// count changes.
    #[serde(default)]
    pub restarts: BTreeMap<u32, u64>,
    /// The connector instance's status.
    #[serde(default)]
    pub status: Option<Status>,
    /// Each task's status, by task id.
    #[serde(default)]
    pub task_status: BTreeMap<u32, Status>,
    /// Source offsets: the source partition (a JSON object's text) to the
    /// last offset committed for it (a JSON object's text).
    #[serde(default)]
    pub offsets: BTreeMap<String, String>,
    /// When it was created (ms since the epoch, the metastore leader's
    /// clock).
    pub created_ms: i64,
}

impl Connector {
    /// The restart count of task `task`.
    pub fn restarts_of(&self, task: u32) -> u64 {
        self.restarts.get(&task).copied().unwrap_or(0)
    }
}

/// A change to the Connect state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectCommand {
    /// Creates a connector, or replaces its config and task configs
    /// (`create_only` refuses an existing name, as `POST /connectors`
    /// does). A new connector starts in `initial` (RUNNING unless asked
    /// otherwise, KIP-980).
    Put {
        name: String,
        config: BTreeMap<String, String>,
        tasks: Vec<BTreeMap<String, String>>,
        create_only: bool,
        initial: TargetState,
    },
    /// Removes a connector with its statuses and source offsets.
    Delete { name: String },
    /// Pause, resume or stop.
    SetTarget { name: String, target: TargetState },
    /// Restarts the connector instance (a new generation) and/or tasks.
    Restart {
        name: String,
        connector: bool,
        tasks: Vec<u32>,
    },
    /// A worker's report on the connector (`task` None) or one task.
    ReportStatus {
        name: String,
        task: Option<u32>,
        status: Status,
    },
    /// Source offsets a task has seen acknowledged. `None` removes a
    /// partition's offset. Refused while the connector is not in the
    /// generation given (a task of an older config must not commit), unless
    /// `generation` is None (the REST API altering offsets, KIP-875, which
    /// needs the connector STOPPED).
    CommitOffsets {
        name: String,
        generation: Option<u64>,
        offsets: Vec<(String, Option<String>)>,
    },
    /// Removes every source offset (KIP-875 `DELETE .../offsets`); needs
    /// the connector STOPPED.
    ResetOffsets { name: String },
}

/// What a Connect command answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectOutput {
    /// `Put`: whether the connector was created (not updated).
    Put {
        created: bool,
    },
    Done,
    /// A status or offset commit that was dropped because it describes an
    /// older generation.
    Stale,
}

/// Every connector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectState {
    #[serde(default)]
    connectors: BTreeMap<String, Arc<Connector>>,
}

fn error(status: u16, message: impl Into<String>) -> MetaError {
    MetaError::Connect {
        status,
        message: message.into(),
    }
}

/// Sets (or, for `None`, removes) source partitions' offsets.
fn set_offsets(c: &mut Connector, offsets: Vec<(String, Option<String>)>) {
    for (partition, offset) in offsets {
        match offset {
            Some(o) => {
                c.offsets.insert(partition, o);
            }
            None => {
                c.offsets.remove(&partition);
            }
        }
    }
}

fn not_found(name: &str) -> MetaError {
    error(code::NOT_FOUND, format!("Connector {name} not found"))
}

fn config_bytes(config: &BTreeMap<String, String>) -> usize {
    config.iter().map(|(k, v)| k.len() + v.len()).sum()
}

impl ConnectState {
    pub fn connectors(&self) -> impl Iterator<Item = (&str, &Connector)> {
        self.connectors.iter().map(|(n, c)| (n.as_str(), &**c))
    }

    pub fn connector(&self, name: &str) -> Option<&Connector> {
        self.connectors.get(name).map(|c| &**c)
    }

    /// Source offsets a committed transaction carried (KIP-618): applied
    /// whatever the connector's generation or target state, as its
    /// records are committed; nothing for a connector deleted since.
    pub(crate) fn commit_transactional(
        &mut self,
        name: &str,
        offsets: Vec<(String, Option<String>)>,
    ) {
        if let Some(c) = self.connectors.get_mut(name).map(Arc::make_mut) {
            set_offsets(c, offsets);
        }
    }

    fn existing(&mut self, name: &str) -> Result<&mut Connector, MetaError> {
        self.connectors
            .get_mut(name)
            .map(Arc::make_mut)
            .ok_or_else(|| not_found(name))
    }

    pub(crate) fn apply(
        &mut self,
        now_ms: i64,
        command: ConnectCommand,
    ) -> Result<ConnectOutput, MetaError> {
        match command {
            ConnectCommand::Put {
                name,
                config,
                tasks,
                create_only,
                initial,
            } => self.put(now_ms, name, config, tasks, create_only, initial),
            ConnectCommand::Delete { name } => {
                self.connectors
                    .remove(&name)
                    .ok_or_else(|| not_found(&name))?;
                Ok(ConnectOutput::Done)
            }
            ConnectCommand::SetTarget { name, target } => {
                let c = self.existing(&name)?;
                if c.target != target {
                    c.target = target;
                    // stopping drops the tasks (their configs stay); a
                    // connector resumed from STOPPED starts a new generation
                    c.generation += 1;
                }
                Ok(ConnectOutput::Done)
            }
            ConnectCommand::Restart {
                name,
                connector,
                tasks,
            } => {
                let c = self.existing(&name)?;
                if let Some(bad) = tasks.iter().find(|t| **t as usize >= c.tasks.len()) {
                    return Err(error(
                        code::NOT_FOUND,
                        format!("Task {name}-{bad} not found"),
                    ));
                }
                if connector {
                    c.generation += 1;
                }
                for t in tasks {
                    *c.restarts.entry(t).or_insert(0) += 1;
                    c.task_status.remove(&t);
                }
                Ok(ConnectOutput::Done)
            }
            ConnectCommand::ReportStatus { name, task, status } => {
                let Some(c) = self.connectors.get_mut(&name).map(Arc::make_mut) else {
                    return Ok(ConnectOutput::Stale);
                };
                if status.generation < c.generation {
                    return Ok(ConnectOutput::Stale);
                }
                match task {
                    None => c.status = Some(status),
                    Some(t) if (t as usize) < c.tasks.len() => {
                        c.task_status.insert(t, status);
                    }
                    Some(_) => return Ok(ConnectOutput::Stale),
                }
                Ok(ConnectOutput::Done)
            }
            ConnectCommand::CommitOffsets {
                name,
                generation,
                offsets,
            } => {
                let c = self.existing(&name)?;
                match generation {
                    Some(g) if g != c.generation || c.target == TargetState::Stopped => {
                        return Ok(ConnectOutput::Stale)
                    }
                    None if c.target != TargetState::Stopped => {
                        return Err(stopped_only(&name));
                    }
                    _ => {}
                }
                set_offsets(c, offsets);
                Ok(ConnectOutput::Done)
            }
            ConnectCommand::ResetOffsets { name } => {
                let c = self.existing(&name)?;
                if c.target != TargetState::Stopped {
                    return Err(stopped_only(&name));
                }
                c.offsets.clear();
                Ok(ConnectOutput::Done)
            }
        }
    }

    fn put(
        &mut self,
        now_ms: i64,
        name: String,
        config: BTreeMap<String, String>,
        tasks: Vec<BTreeMap<String, String>>,
        create_only: bool,
        initial: TargetState,
    ) -> Result<ConnectOutput, MetaError> {
        if name.is_empty() || name.len() > 249 || name.chars().any(char::is_control) {
            return Err(error(
                code::BAD_REQUEST,
                "A connector name must be 1 to 249 characters, without control characters",
            ));
        }
        if config_bytes(&config) + tasks.iter().map(config_bytes).sum::<usize>() > MAX_CONFIG_BYTES
        {
            return Err(error(
                code::BAD_REQUEST,
                format!("Connector {name}'s config is larger than {MAX_CONFIG_BYTES} bytes"),
            ));
        }
        if tasks.len() > MAX_TASKS {
            return Err(error(
                code::BAD_REQUEST,
                format!("Connector {name} asks for more than {MAX_TASKS} tasks"),
            ));
        }
        match self.connectors.get_mut(&name).map(Arc::make_mut) {
            Some(_) if create_only => Err(error(
                code::CONFLICT,
                format!("Connector {name} already exists"),
            )),
            Some(c) => {
                c.config = config;
                c.tasks = tasks;
                c.generation += 1;
                c.task_status.retain(|t, _| (*t as usize) < c.tasks.len());
                Ok(ConnectOutput::Put { created: false })
            }
            None => {
                self.connectors.insert(
                    name,
                    Arc::new(Connector {
                        config,
                        tasks,
                        target: initial,
                        generation: 1,
                        restarts: BTreeMap::new(),
                        status: None,
                        task_status: BTreeMap::new(),
                        offsets: BTreeMap::new(),
                        created_ms: now_ms,
                    }),
                );
                Ok(ConnectOutput::Put { created: true })
            }
        }
    }
}

fn stopped_only(name: &str) -> MetaError {
    error(
        code::BAD_REQUEST,
        format!(
            "Connectors must be in the STOPPED state before their offsets can be modified; \
             connector {name} is not (stop it with PUT /connectors/{name}/stop)"
        ),
    )
}

#[cfg(test)]
#[path = "connect_tests.rs"]
mod tests;
