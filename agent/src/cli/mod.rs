//! The admin command line: `aerostream topic`, `group`, `produce`,
//! `consume`, `cluster`, `quota`, `user` and `transaction`. Every command speaks only the Kafka protocol
//! (through [`client::Client`]), so it works against AeroStream and against
//! any other Kafka broker; none of it is on the broker's data path.
//!
//! Each command prints an aligned table by default and JSON with
//! `--output json`; a failure prints one `error: ...` line on stderr and
//! exits with status 1.

pub mod agents;
mod cleaner;
pub mod client;
mod cluster;
mod connect;
mod consume;
mod cost;
mod group;
mod http;
mod output;
mod produce;
mod quota;
mod schema;
mod topic;
mod transaction;
mod user;

pub use cluster::ClusterArgs;
pub use connect::ConnectArgs;
pub use consume::ConsumeArgs;
pub use cost::CostArgs;
pub use group::GroupArgs;
pub use produce::ProduceArgs;
pub use quota::QuotaArgs;
pub use schema::SchemaArgs;
pub use topic::TopicArgs;
pub use transaction::TransactionArgs;
pub use user::UserArgs;

use output::Format;

/// Flags every admin command takes.
#[derive(clap::Args, Clone)]
pub struct Common {
    /// Kafka address of any broker of the cluster, `host:port`.
    #[arg(long, default_value = "127.0.0.1:9092", global = true)]
    pub bootstrap: String,
    /// `table` for people, `json` for scripts.
    #[arg(long, value_enum, default_value = "table", global = true)]
    pub output: Format,
    #[command(flatten)]
    pub tls: client::TlsArgs,
    #[command(flatten)]
    pub sasl: client::SaslArgs,
}

/// One admin command, as `main` parsed it.
pub enum Admin {
    Topic(TopicArgs),
    Group(GroupArgs),
    Produce(ProduceArgs),
    Consume(ConsumeArgs),
    Cluster(ClusterArgs),
    Quota(QuotaArgs),
    User(UserArgs),
    Transaction(TransactionArgs),
    Schema(SchemaArgs),
    Cost(CostArgs),
    Connect(ConnectArgs),
}

/// Runs `command` on a small runtime of its own. A failure is printed as one
/// clear line on stderr and ends the process with status 1.
pub fn run(command: Admin) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        match command {
            Admin::Topic(a) => topic::run(a).await,
            Admin::Group(a) => group::run(a).await,
            Admin::Produce(a) => produce::run(a).await,
            Admin::Consume(a) => consume::run(a).await,
            Admin::Cluster(a) => cluster::run(a).await,
            Admin::Quota(a) => quota::run(a).await,
            Admin::User(a) => user::run(a).await,
            Admin::Transaction(a) => transaction::run(a).await,
            Admin::Schema(a) => schema::run(a).await,
            Admin::Cost(a) => cost::run(a).await,
            Admin::Connect(a) => connect::run(a).await,
        }
    });
    // do not wait for a blocking stdin read the command abandoned
    rt.shutdown_background();
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
    Ok(())
}

/// Splits `k=v` (as `--config` and `--set` take it).
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}
