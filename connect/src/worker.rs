//! The worker every agent runs: every second it reads the connectors and
//! the live agents from its metastore replica, works out which connector
//! instances and tasks are its own ([`assign::owner`]), starts the task
//! runners it lacks, stops the ones it no longer owns or whose generation
//! or restart count moved on, and reports state changes into the
//! metastore, where every agent's REST API reads them.
//!
//! An agent that is not live (its lease lapsed, so it is cut off from the
//! metastore majority) owns nothing and stops its tasks: the agents that
//! are live take them over.

pub mod assign;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metastore::connect::{ConnectCommand, Connector, Status, TargetState};
use metastore::{AgentId, AgentInfo, Metastore};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::plugins::Plugin;
use crate::runner;

/// How a worker is set up.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// This agent's id.
    pub node_id: AgentId,
    /// How statuses name this worker: its Connect listener's `host:port`.
    pub worker_id: String,
    /// The native-protocol bootstrap tasks use (`aero://host:port,...`);
    /// None: the live agents' native addresses, this agent's first.
    pub bootstrap: Option<String>,
    /// How often the worker looks at the metastore.
    pub poll: Duration,
    /// This agent's schema registry (the default of the registry
    /// converters' `schema.registry.url` on sources).
    pub schema_registry: crate::convert::DefaultRegistry,
}

/// What identifies one run of a task: a config change, a connector
/// restart or a task restart starts another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    generation: u64,
    restarts: u64,
}

struct Running {
    identity: Identity,
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

/// The worker, running in the background until [`Worker::shutdown`].
pub struct Worker {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
    metrics: Arc<Metrics>,
}

impl Worker {
    pub fn start(meta: Metastore, config: WorkerConfig) -> Worker {
        let (stop, stopped) = watch::channel(false);
        let metrics = Arc::new(Metrics::default());
        let state = State {
            meta,
            config,
            metrics: Arc::clone(&metrics),
            client: None,
            running: BTreeMap::new(),
            reported: BTreeMap::new(),
        };
        let handle = tokio::spawn(state.run(stopped));
        Worker {
            stop,
            handle,
            metrics,
        }
    }

    /// The worker's counters (records, files, bytes, task states).
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Stops every task (a source commits what was acknowledged; a sink
    /// keeps what it had not written for the next owner to read again)
    /// and the worker.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.handle.await;
    }
}

type Unit = (String, u32);

struct State {
    meta: Metastore,
    config: WorkerConfig,
    metrics: Arc<Metrics>,
    client: Option<sdk::Client>,
    running: BTreeMap<Unit, Running>,
    /// What this worker last reported for a connector (`None`) or task,
    /// with the generation: reports are sent on changes only.
    reported: BTreeMap<(String, Option<u32>), (String, u64)>,
}

impl State {
    async fn run(mut self, mut stopped: watch::Receiver<bool>) {
        loop {
            // A step may wait on the metastore (a status report, an
            // assignment) for as long as its write timeout; a stop does not
            // wait for it: what it wrote may still take effect, and the
            // tasks it started are stopped below with the others.
            tokio::select! {
                _ = self.step() => {}
                _ = stopped.changed() => break,
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.poll) => {}
                _ = stopped.changed() => break,
            }
        }
        self.stop_all().await;
    }

    fn live(&self) -> (Vec<AgentId>, Vec<AgentInfo>) {
        let agents: Vec<AgentInfo> = self.meta.read(|s| s.agents().cloned().collect());
        // agents that run no Connect worker (`--connect-addr off`, or its
        // address taken) are given no tasks
        let mut live: Vec<AgentId> = agents
            .iter()
            .filter(|a| !a.fenced && !a.shut_down && a.addrs.connect.is_some())
            .map(|a| a.id)
            .collect();
        live.sort_unstable();
        live.dedup();
        (live, agents)
    }

    /// The native client tasks share, connected on first need.
    async fn client(&mut self, agents: &[AgentInfo]) -> Option<sdk::Client> {
        if let Some(c) = &self.client {
            return Some(c.clone());
        }
        let url = match &self.config.bootstrap {
            Some(url) => url.clone(),
            None => {
                let mut addrs: Vec<(bool, String)> = agents
                    .iter()
                    .filter(|a| !a.fenced)
                    .filter_map(|a| Some((a.id != self.config.node_id, a.addrs.native.clone()?)))
                    .collect();
                addrs.sort();
                if addrs.is_empty() {
                    return None;
                }
                let list: Vec<String> = addrs.into_iter().map(|(_, a)| a).collect();
                format!("aero://{}", list.join(","))
            }
        };
        match sdk::Client::builder(&url)
            .client_id("aerostream-connect")
            .connect()
            .await
        {
            Ok(c) => {
                self.client = Some(c.clone());
                Some(c)
            }
            Err(e) => {
                tracing::warn!(%url, error = %e, "connect worker: the cluster is not reachable yet");
                None
            }
        }
    }

    async fn step(&mut self) {
        let (live, agents) = self.live();
        let me = self.config.node_id;
        let mine = |name: &str, task: Option<u32>| assign::owner(name, task, &live) == Some(me);
        let connectors: Vec<(String, Connector)> = self.meta.read(|s| {
            s.connect()
                .connectors()
                .map(|(n, c)| (n.to_owned(), c.clone()))
                .collect()
        });

        // what should run here, and as which identity
        let mut wanted: BTreeMap<Unit, (Identity, Config, Plugin)> = BTreeMap::new();
        let mut statuses: Vec<(String, Option<u32>, &'static str, u64)> = Vec::new();
        for (name, c) in &connectors {
            let Some(plugin) = c
                .config
                .get("connector.class")
                .and_then(|k| Plugin::find(k))
            else {
                continue;
            };
            if mine(name, None) {
                statuses.push((name.clone(), None, c.target.as_str(), c.generation));
            }
            for (t, task_config) in c.tasks.iter().enumerate() {
                let Ok(t) = u32::try_from(t) else { break };
                if !mine(name, Some(t)) {
                    continue;
                }
                match c.target {
                    TargetState::Running => {
                        let identity = Identity {
                            generation: c.generation,
                            restarts: c.restarts_of(t),
                        };
                        wanted.insert((name.clone(), t), (identity, task_config.clone(), plugin));
                    }
                    TargetState::Paused => {
                        statuses.push((name.clone(), Some(t), "PAUSED", c.generation));
                    }
                    TargetState::Stopped => {}
                }
            }
        }

        // stop what is no longer ours or is of an older identity
        let stale: Vec<Unit> = self
            .running
            .iter()
            .filter(|(unit, r)| wanted.get(*unit).is_none_or(|(id, _, _)| *id != r.identity))
            .map(|(unit, _)| unit.clone())
            .collect();
        for unit in stale {
            if let Some(r) = self.running.remove(&unit) {
                let _ = r.stop.send(true);
                // not awaited: a task stops within a poll, and a stopped
                // source's last offsets are committed by its own generation
                drop(r.handle);
            }
        }

        // start what is missing
        let missing: Vec<(Unit, Identity, Config, Plugin)> = wanted
            .into_iter()
            .filter(|(unit, _)| !self.running.contains_key(unit))
            .map(|(unit, (id, config, plugin))| (unit, id, config, plugin))
            .collect();
        if !missing.is_empty() {
            if let Some(client) = self.client(&agents).await {
                for ((name, t), identity, config, plugin) in missing {
                    let (stop, stopped) = watch::channel(false);
                    let ctx = runner::TaskCtx {
                        meta: self.meta.clone(),
                        client: client.clone(),
                        connector: name.clone(),
                        task: t,
                        generation: identity.generation,
                        config,
                        worker_id: self.config.worker_id.clone(),
                        metrics: Arc::clone(&self.metrics),
                        registry: self.config.schema_registry.clone(),
                    };
                    tracing::info!(connector = %name, task = t, generation = identity.generation, "connect: starting task");
                    let handle = tokio::spawn(runner::run(ctx, plugin, stopped));
                    self.running.insert(
                        (name, t),
                        Running {
                            identity,
                            stop,
                            handle,
                        },
                    );
                }
            }
        }

        // a unit that moved away and back is reported again
        self.reported
            .retain(|(n, t), _| statuses.iter().any(|(sn, st, _, _)| sn == n && st == t));
        for (name, task, state, generation) in statuses {
            self.report(&name, task, state, generation).await;
        }
        self.metrics.set_tasks_running(self.running.len());
    }

    /// Reports a connector's or a paused task's state, when it changed.
    async fn report(&mut self, name: &str, task: Option<u32>, state: &str, generation: u64) {
        let key = (name.to_owned(), task);
        if self
            .reported
            .get(&key)
            .is_some_and(|(s, g)| s == state && *g == generation)
        {
            return;
        }
        let status = Status {
            state: state.to_owned(),
            worker_id: self.config.worker_id.clone(),
            trace: None,
            generation,
        };
        let command = ConnectCommand::ReportStatus {
            name: name.to_owned(),
            task,
            status,
        };
        match self.meta.connect_command(command).await {
            Ok(_) => {
                self.reported.insert(key, (state.to_owned(), generation));
            }
            Err(e) => {
                tracing::debug!(connector = name, error = %e, "connect: status not reported yet")
            }
        }
    }

    async fn stop_all(&mut self) {
        let running = std::mem::take(&mut self.running);
        for r in running.values() {
            let _ = r.stop.send(true);
        }
        for (_, r) in running {
            let _ = tokio::time::timeout(Duration::from_secs(10), r.handle).await;
        }
    }
}
