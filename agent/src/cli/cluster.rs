//! `aerostream cluster info` and `aerostream cluster remove-agent`.

use serde::Serialize;

use super::client::Client;
use super::output::{print_json, print_text, Format, Table};
use super::Common;

#[derive(clap::Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Cluster id, controller, brokers (addresses and racks) and topic count.
    Info,
    /// Remove an agent that failed for good: it must be stopped (its lease
    /// ran out); its replicas are placed on the other agents, and progress
    /// is printed until it holds none.
    RemoveAgent(super::agents::RemoveAgentArgs),
}

#[derive(Serialize)]
struct BrokerInfo {
    id: i32,
    host: String,
    port: i32,
    rack: Option<String>,
}

#[derive(Serialize)]
struct ClusterInfo {
    cluster_id: Option<String>,
    controller_id: i32,
    brokers: Vec<BrokerInfo>,
    topics: usize,
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<()> {
    if let ClusterCommand::RemoveAgent(remove) = &args.command {
        return super::agents::remove(&args.common, remove).await;
    }
    let mut client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    let meta = client.metadata(None, false).await?;
    let mut brokers: Vec<BrokerInfo> = meta
        .brokers
        .iter()
        .map(|b| BrokerInfo {
            id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    let info = ClusterInfo {
        cluster_id: meta.cluster_id.as_ref().map(|c| c.to_string()),
        controller_id: meta.controller_id.0,
        brokers,
        topics: meta.topics.iter().filter(|t| !t.is_internal).count(),
    };
    if args.common.output == Format::Json {
        return print_json(&info);
    }
    let mut text = format!(
        "Cluster id: {}\nController: {}\nTopics: {}\n\n",
        info.cluster_id.as_deref().unwrap_or("(none)"),
        info.controller_id,
        info.topics
    );
    let mut table = Table::new(&["BROKER", "ADDRESS", "RACK", "CONTROLLER"]);
    for b in &info.brokers {
        table.row(vec![
            b.id.to_string(),
            format!("{}:{}", b.host, b.port),
            b.rack.clone().unwrap_or_else(|| "-".to_owned()),
            if b.id == info.controller_id {
                "yes"
            } else {
                ""
            }
            .to_owned(),
        ]);
    }
    text.push_str(&table.render());
    print_text(&text);
    Ok(())
}
