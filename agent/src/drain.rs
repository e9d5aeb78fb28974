//! `aerostream drain`: asks a running agent to drain one agent of the
//! cluster (or to stop), then prints progress until it holds no replicas.
//! It talks Kafka through the admin command line's client, on one
//! connection for the whole run.

use crate::cli::agents;
use crate::cli::client::Client;
use anyhow::Context;

#[derive(clap::Args)]
pub struct DrainArgs {
    /// The agent (node id) to drain.
    #[arg(long)]
    pub node: i32,
    /// Kafka address of any running agent, `host:port`.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Stop draining: the agent takes replicas again.
    #[arg(long)]
    pub undo: bool,
    /// Return once the drain is started instead of waiting for it to finish.
    #[arg(long)]
    pub no_wait: bool,
    /// Give up waiting after this many seconds (0: wait as long as it takes).
    #[arg(long, default_value_t = 0)]
    pub timeout_secs: u64,
    #[command(flatten)]
    pub tls: crate::cli::client::TlsArgs,
}

pub fn run(args: &DrainArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime")?;
    rt.block_on(drain(args))
}

async fn drain(args: &DrainArgs) -> anyhow::Result<()> {
    let node = args.node;
    let mut client = Client::connect(&args.bootstrap, args.tls.config()?).await?;
    agents::set_draining(&mut client, node, !args.undo)
        .await
        .with_context(|| format!("cannot change the draining state of agent {node}"))?;
    if args.undo {
        println!("agent {node} takes replicas again");
        return Ok(());
    }
    println!("draining agent {node}: its replicas move to other agents");
    if args.no_wait {
        return Ok(());
    }
    agents::wait_until_empty(&mut client, node, args.timeout_secs, "; it can be stopped").await
}
