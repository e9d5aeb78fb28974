//! What `aerostream drain` asks of the cluster: set an agent's
//! `aerostream.draining` broker config and count what it still holds.

use anyhow::bail;
use kafka_protocol::messages::{
    incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
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
