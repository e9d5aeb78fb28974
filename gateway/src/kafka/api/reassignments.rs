//! AlterPartitionReassignments and ListPartitionReassignments (KIP-455):
//! move partitions between agents, or cancel a move, and list the moves
//! under way. The metastore does the work (`metastore/src/state/reassign.rs`);
//! a move completes once every target replica is in sync.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::ResponseError;
use metastore::{AgentId, ClusterControl, PartitionInfo, Topics};

use super::{msg, s, RequestContext};
use crate::broker::Broker;
use crate::codes;

fn broker_ids(agents: &[AgentId]) -> Vec<BrokerId> {
    agents
        .iter()
        .map(|a| BrokerId(i32::try_from(*a).unwrap_or(-1)))
        .collect()
}

/// Why a target cannot be asked of the metastore at all.
fn check_target(
    replicas: &[BrokerId],
    current: &PartitionInfo,
    allow_rf_change: bool,
) -> Result<Vec<AgentId>, (ResponseError, String)> {
    let target: Option<Vec<AgentId>> = replicas
        .iter()
        .map(|b| AgentId::try_from(b.0).ok())
        .collect();
    let Some(target) = target else {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            "agent ids are not negative".to_owned(),
        ));
    };
    let rf = current.original_replicas().len();
    if !allow_rf_change && target.len() != rf {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "the partition has {rf} replicas and the target {}; allowReplicationFactorChange is off",
                target.len()
            ),
        ));
    }
    Ok(target)
}

pub(super) async fn alter_partition_reassignments(
    b: &Broker,
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    // v0 has no such flag and lets the replication factor change
    let allow_rf_change = ctx.api_version < 1 || req.allow_replication_factor_change;
    let mut responses = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let topic = b.node.catalog.topic(t.name.as_str());
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let out =
                ReassignablePartitionResponse::default().with_partition_index(p.partition_index);
            let current = topic
                .as_ref()
                .and_then(|tp| tp.partition(p.partition_index));
            let (Some(topic), Some(current)) = (topic.as_ref(), current) else {
                partitions.push(out.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
                continue;
            };
            let target = match p.replicas.as_deref() {
                None => None,
                Some(r) => match check_target(r, current, allow_rf_change) {
                    Ok(t) => Some(t),
                    Err((code, why)) => {
                        partitions.push(
                            out.with_error_code(code.code())
                                .with_error_message(Some(s(why))),
                        );
                        continue;
                    }
                },
            };
            let result = b
                .node
                .catalog
                .alter_reassignment(topic.id, p.partition_index, target.clone())
                .await;
            match result {
                Ok(_) => {
                    tracing::info!(topic = %topic.name, partition = p.partition_index, ?target, "partition reassignment altered");
                    partitions.push(out);
                }
                Err(e) => partitions.push(
                    out.with_error_code(codes::meta_error(&e).code())
                        .with_error_message(msg(&e)),
                ),
            }
        }
        responses.push(
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_responses(responses)
}

pub(super) fn list_partition_reassignments(
    b: &Broker,
    _ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let ongoing = |p: &PartitionInfo| {
        OngoingPartitionReassignment::default()
            .with_partition_index(p.index)
            .with_replicas(broker_ids(&p.replicas))
            .with_adding_replicas(broker_ids(&p.adding_replicas))
            .with_removing_replicas(broker_ids(&p.removing_replicas))
    };
    let mut topics = Vec::new();
    match req.topics {
        None => {
            for t in b.node.catalog.topics() {
                let partitions: Vec<_> = t
                    .partitions
                    .iter()
                    .filter(|p| p.is_reassigning())
                    .map(ongoing)
                    .collect();
                if !partitions.is_empty() {
                    topics.push((t.name.clone(), partitions));
                }
            }
        }
        Some(wanted) => {
            // as Kafka's controller: unknown topics and partitions are skipped
            for w in wanted {
                let Some(t) = b.node.catalog.topic(w.name.as_str()) else {
                    continue;
                };
                let partitions: Vec<_> = w
                    .partition_indexes
                    .iter()
                    .filter_map(|i| t.partition(*i))
                    .filter(|p| p.is_reassigning())
                    .map(ongoing)
                    .collect();
                if !partitions.is_empty() {
                    topics.push((t.name.clone(), partitions));
                }
            }
        }
    }
    ListPartitionReassignmentsResponse::default().with_topics(
        topics
            .into_iter()
            .map(|(name, partitions)| {
                OngoingTopicReassignment::default()
                    .with_name(TopicName(s(name)))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}
