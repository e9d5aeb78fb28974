//! Where a run begins: one process running a whole pipeline, or one
//! worker of a distributed one ([`crate::distribute`]).

use std::future::Future;

use anyhow::Context;

use crate::pipeline::Pipeline;
use crate::run::{run_scoped, Options};

/// Runs `pipeline` until `shutdown` completes, then takes a last
/// checkpoint. An error only for what the processor cannot go on from.
/// A pipeline with `distribution` runs as one of its workers
/// ([`crate::distribute`]).
pub async fn run(
    pipeline: Pipeline,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    if pipeline.distribution.is_some() {
        return crate::distribute::run(pipeline, options, shutdown).await;
    }
    run_scoped(pipeline, None, options, None, shutdown).await
}

/// [`run`] until SIGTERM or SIGINT.
pub async fn run_until_signalled(pipeline: Pipeline, options: Options) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch for SIGINT")?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    run(pipeline, options, shutdown).await
}
