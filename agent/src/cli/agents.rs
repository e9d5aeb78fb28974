//! What `aerostream drain` and `aerostream cluster remove-agent` ask of
//! the cluster: set an agent's `aerostream.draining` broker config or
//! unregister it (UnregisterBroker), and count what it still holds.

use anyhow::bail;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
    BrokerId, IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
    UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::client::{describe_error, Client};

/// Kafka's resource type of a broker in config requests.
const BROKER_RESOURCE: i8 = 4;

/// What an agent holds, as a Metadata answer and ListPartitionReassignments show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgentLoad {
    pub replicas: usize,
    pub leaders: usize,
    /// Reassignments under way in the whole cluster.
    pub moving: usize,
}

/// Starts (or, with `draining` false, stops) draining agent `node`.
pub async fn set_draining(client: &mut Client, node: i32, draining: bool) -> anyhow::Result<()> {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(BROKER_RESOURCE)
            .with_resource_name(StrBytes::from_string(node.to_string()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_static_str("aerostream.draining"))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(draining.to_string())))]),
    ]);
    let addr = client.bootstrap().to_owned();
    let resp = client.call(&addr, &req, 0, 1).await?;
    match resp.responses.first() {
        Some(r) if r.error_code != 0 => bail!(describe_error(
            &format!("agent {node}"),
            r.error_code,
            r.error_message.as_ref()
        )),
        Some(_) => Ok(()),
        None => bail!("the broker did not answer for agent {node}"),
    }
}

/// How many replicas and leaderships agent `node` holds, and how many
/// reassignments are under way.
pub async fn load(client: &mut Client, node: i32) -> anyhow::Result<AgentLoad> {
    let meta = client.metadata(None, false).await?;
    let mut out = AgentLoad::default();
    for p in meta.topics.iter().flat_map(|t| t.partitions.iter()) {
        out.replicas += usize::from(p.replica_nodes.iter().any(|r| r.0 == node));
        out.leaders += usize::from(p.leader_id.0 == node);
    }
    let addr = client.bootstrap().to_owned();
    let moving = client
        .call(
            &addr,
            &ListPartitionReassignmentsRequest::default().with_topics(None),
            0,
            0,
        )
        .await?;
    out.moving = moving.topics.iter().map(|t| t.partitions.len()).sum();
    Ok(out)
}

/// Flags of `aerostream cluster remove-agent`.
#[derive(clap::Args)]
pub struct RemoveAgentArgs {
    /// The agent (node id) to remove; it must be stopped.
    #[arg(long)]
    pub node: i32,
    /// Return once the agent is removed instead of waiting until its
    /// replicas are placed elsewhere.
    #[arg(long)]
    pub no_wait: bool,
    /// Give up waiting after this many seconds (0: wait as long as it takes).
    #[arg(long, default_value_t = 0)]
    pub timeout_secs: u64,
}

/// Unregisters agent `node`, then prints what it still holds every time
/// that changes, until it holds no replica.
pub async fn remove(common: &super::Common, args: &RemoveAgentArgs) -> anyhow::Result<()> {
    let node = args.node;
    let mut client = Client::connect_as(
        &common.bootstrap,
        common.tls.config()?,
        common.sasl.login()?,
    )
    .await?;
    let addr = client.bootstrap().to_owned();
    let resp = client
        .call(
            &addr,
            &UnregisterBrokerRequest::default().with_broker_id(BrokerId(node)),
            0,
            0,
        )
        .await?;
    if resp.error_code != 0 {
        bail!(describe_error(
            &format!("agent {node}"),
            resp.error_code,
            resp.error_message.as_ref()
        ));
    }
    println!("removed agent {node}: its replicas move to other agents");
    if args.no_wait {
        return Ok(());
    }
    wait_until_empty(&mut client, node, args.timeout_secs, "").await
}

/// Prints what agent `node` holds every time that changes, until it holds
/// no replica (then says so, followed by `done`); gives up after
/// `timeout_secs` (0: never).
pub async fn wait_until_empty(
    client: &mut Client,
    node: i32,
    timeout_secs: u64,
    done: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = None;
    loop {
        match load(client, node).await {
            Ok(l) if l.replicas == 0 => {
                println!(
                    "agent {node} holds no replicas ({}s){done}",
                    started.elapsed().as_secs()
                );
                return Ok(());
            }
            Ok(l) => {
                if last != Some(l) {
                    println!(
                        "agent {node}: {} replicas, {} leaders; {} partition moves under way ({}s)",
                        l.replicas,
                        l.leaders,
                        l.moving,
                        started.elapsed().as_secs()
                    );
                    last = Some(l);
                }
            }
            Err(e) => println!("cannot read progress yet: {e:#}"),
        }
        if timeout_secs > 0 && started.elapsed() > Duration::from_secs(timeout_secs) {
            bail!(
                "agent {node} still holds replicas after {timeout_secs}s (is there another agent with room for them?)"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
