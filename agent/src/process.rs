//! `aerostream process --pipeline FILE`: runs one stream-processing
//! pipeline (the `processor` crate) until SIGTERM or SIGINT, which take a
//! last checkpoint. Logs go to stderr (`--log` or RUST_LOG filters them).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
pub struct ProcessArgs {
    /// The pipeline file (YAML): source topic, window, aggregates, sink.
    /// See docs/processor.md.
    #[arg(long)]
    pub pipeline: PathBuf,
    /// Writes counters and latency percentiles here as JSON every second
    /// and at exit (see docs/processor.md).
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Log filter (tracing's EnvFilter syntax).
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    pub log: String,
}

/// Runs the pipeline; a failure is one `error: ...` line and status 1.
pub fn run(args: &ProcessArgs) -> anyhow::Result<()> {
    let filter =
        tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        // plain text when the log goes to a file
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let result = processor::Pipeline::from_file(&args.pipeline)
        .map_err(anyhow::Error::from)
        .and_then(|pipeline| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("process")
                .enable_all()
                .build()
                .context("cannot start a runtime")?;
            let options = processor::Options {
                stats: args.stats.clone(),
            };
            rt.block_on(processor::run_until_signalled(pipeline, options))
        });
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
    Ok(())
}
