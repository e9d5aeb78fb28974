//! Running one task: the status reports around it, and the source and
//! sink loops.

mod sink;

pub use sink::group_of;
mod source;
pub mod source_txn;

use std::sync::Arc;

use metastore::connect::{ConnectCommand, Status};
use metastore::Metastore;
use tokio::sync::watch;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::plugins::{Kind, Plugin};

/// What a task runs with.
pub(crate) struct TaskCtx {
    pub meta: Metastore,
    pub client: sdk::Client,
    pub connector: String,
    pub task: u32,
    pub generation: u64,
    /// The task's config.
    pub config: Config,
    pub worker_id: String,
    pub metrics: Arc<Metrics>,
    /// This agent's schema registry, where sources register schemas by
    /// default.
    pub registry: crate::convert::DefaultRegistry,
}

impl TaskCtx {
    async fn report(&self, state: &str, trace: Option<String>) {
        let command = ConnectCommand::ReportStatus {
            name: self.connector.clone(),
            task: Some(self.task),
            status: Status {
                state: state.to_owned(),
                worker_id: self.worker_id.clone(),
                trace,
                generation: self.generation,
            },
        };
        if let Err(e) = self.meta.connect_command(command).await {
            tracing::warn!(connector = %self.connector, task = self.task, error = %e, "connect: task status not reported");
        }
    }
}

/// How a task ended.
pub(crate) enum Ended {
    /// Asked to stop (or superseded by a newer generation).
    Stopped,
}

/// Runs a task until `stop` is set: RUNNING is reported when it starts,
/// FAILED (with the reason as its trace) when it fails. A failed task
/// stays failed until it is restarted through the REST API.
pub(crate) async fn run(ctx: TaskCtx, plugin: Plugin, stop: watch::Receiver<bool>) {
    ctx.report("RUNNING", None).await;
    let outcome = match plugin.kind() {
        Kind::Source => source::run(&ctx, plugin, stop).await,
        Kind::Sink => sink::run(&ctx, plugin, stop).await,
    };
    match outcome {
        Ok(Ended::Stopped) => {
            tracing::info!(connector = %ctx.connector, task = ctx.task, "connect: task stopped");
        }
        Err(reason) => {
            tracing::warn!(connector = %ctx.connector, task = ctx.task, %reason, "connect: task failed");
            ctx.metrics.task_failed();
            ctx.report("FAILED", Some(reason)).await;
        }
    }
}

/// Waits `pause`, or less if `stop` is set meanwhile; true when stopping.
async fn pause_or_stop(stop: &mut watch::Receiver<bool>, pause: std::time::Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(pause) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}
