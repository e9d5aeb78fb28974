//! `/v1/groups`: consumer groups, their members and assignments, and their
//! committed offsets with the lag behind each partition's high watermark.
//!
//! Authorized as Kafka's ListGroups, DescribeGroups and OffsetFetch are:
//! the list is every group with DESCRIBE on the cluster, else the groups
//! the caller may describe; a group's detail needs DESCRIBE on the group
//! (checked before it is looked up), and shows offsets and assignments
//! only of topics the caller may describe.

use axum::extract::{Path, State};
use axum::Json;
use metastore::{Groups, Topics};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ErrorBody};
use crate::broker::Broker;
use crate::brokers;
use crate::http::extension::HttpState;
use crate::http::Caller;
use crate::kafka::consumer_protocol::decode_consumer_assignment;
use dataplane::group::admin;
use dataplane::topics::partition_offsets;
use metastore::acl::{AclOperation, ResourceType};

/// One group of the list.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupSummary {
    pub group_id: String,
    /// Kafka's state name: `Stable`, `PreparingRebalance`,
    /// `CompletingRebalance`, `Empty`.
    pub state: String,
    /// `consumer` for consumer groups; empty when only offsets remain.
    pub protocol_type: String,
}

/// Partitions of one topic.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

/// One member of a group.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberView {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// What the member consumes; absent when the assignment is not in
    /// Kafka's consumer protocol.
    pub assignment: Option<Vec<TopicPartitions>>,
}

/// A committed offset and how far it is behind.
#[derive(Debug, Serialize, ToSchema)]
pub struct OffsetView {
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    pub metadata: String,
    /// The partition's high watermark: the leader's own when this agent
    /// leads it, else the one last recorded in the metastore.
    pub high_watermark: Option<i64>,
    /// `high_watermark - committed_offset`, when both are known.
    pub lag: Option<i64>,
}

/// A group in detail.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupDetail {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    /// The assignor the members agreed on (`range`, ...).
    pub protocol: String,
    /// The agent that coordinates the group; members are only known when
    /// it is the agent that answered.
    pub coordinator: i32,
    pub members: Vec<MemberView>,
    pub offsets: Vec<OffsetView>,
    /// Sum of the known lags.
    pub total_lag: i64,
}

/// Every consumer group the caller may describe.
#[utoipa::path(
    get,
    path = "/v1/groups",
    tag = "groups",
    responses(
        (status = 200, description = "The groups", body = Vec<GroupSummary>),
        (status = 503, description = "`unavailable`", body = ErrorBody)
    )
)]
pub async fn list_groups(
    State(st): State<HttpState>,
    caller: Caller,
) -> Result<Json<Vec<GroupSummary>>, ApiError> {
    let b = &st.broker;
    // Kafka: DESCRIBE on the cluster lists every group, else those the
    // caller may describe
    let every = caller.may_on_cluster(b, AclOperation::Describe);
    let mut groups: Vec<GroupSummary> = admin::list_groups(&b.node)
        .await?
        .into_iter()
        .filter(|g| {
            every || caller.may(b, AclOperation::Describe, ResourceType::Group, &g.group_id)
        })
        .map(|g| GroupSummary {
            group_id: g.group_id,
            state: g.state,
            protocol_type: g.protocol_type,
        })
        .collect();
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    Ok(Json(groups))
}

/// The high watermark of a partition: the leader's own when this agent
/// leads it, else the last one recorded in the metastore.
async fn high_watermark(b: &Broker, topic: &str, partition: i32) -> Option<i64> {
    let t = b.node.catalog.topic(topic)?;
    let p = usize::try_from(partition)
        .ok()
        .and_then(|i| t.partitions.get(i))?;
    if b.node.leads(p) {
        if let Ok(o) = partition_offsets(&b.node, &t, partition).await {
            return Some(o.high_watermark);
        }
    }
    (p.high_watermark >= 0).then_some(p.high_watermark)
}

/// A group's members, assignment, committed offsets and lag per partition.
#[utoipa::path(
    get,
    path = "/v1/groups/{id}",
    tag = "groups",
    params(("id" = String, Path, description = "Group id")),
    responses(
        (status = 200, description = "The group", body = GroupDetail),
        (status = 403, description = "`forbidden`: no DESCRIBE on the group (whether or not it exists)", body = ErrorBody),
        (status = 404, description = "`group_not_found`", body = ErrorBody),
        (status = 503, description = "`unavailable`", body = ErrorBody)
    )
)]
pub async fn get_group(
    State(st): State<HttpState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<GroupDetail>, ApiError> {
    let b = &st.broker;
    caller.require(b, AclOperation::Describe, ResourceType::Group, &id)?;
    let describable =
        |topic: &str| caller.may(b, AclOperation::Describe, ResourceType::Topic, topic);
    let d = admin::describe_group(&b.node, &id).await?;
    if !d.exists() {
        return Err(ApiError::group_not_found(&id));
    }
    let members = d
        .members
        .into_iter()
        .map(|m| MemberView {
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            assignment: decode_consumer_assignment(m.assignment).map(|a| {
                a.into_iter()
                    .filter(|(topic, _)| describable(topic))
                    .map(|(topic, partitions)| TopicPartitions { topic, partitions })
                    .collect()
            }),
        })
        .collect();
    let mut offsets = Vec::new();
    // as OffsetFetch for all topics: those the caller may not describe are
    // left out
    for (topic, parts) in admin::committed_offsets(&b.node, &id, None) {
        if !describable(&topic) {
            continue;
        }
        for c in parts {
            let hw = high_watermark(b, &topic, c.partition).await;
            offsets.push(OffsetView {
                lag: hw.map(|h| (h - c.offset).max(0)),
                high_watermark: hw,
                topic: topic.clone(),
                partition: c.partition,
                committed_offset: c.offset,
                metadata: c.metadata,
            });
        }
    }
    let coordinator = b
        .node
        .catalog
        .coordinator(&id)
        .and_then(|p| i32::try_from(p.holder.agent).ok())
        .map_or(b.config.node_id, |agent| {
            brokers::shown_id(&b.config, agent)
        });
    Ok(Json(GroupDetail {
        group_id: id,
        state: d.state,
        protocol_type: d.protocol_type,
        protocol: d.protocol,
        coordinator,
        total_lag: offsets.iter().filter_map(|o| o.lag).sum(),
        members,
        offsets,
    }))
}
