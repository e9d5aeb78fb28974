//! The KIP-848 consumer group APIs (`group.protocol=consumer`):
//! ConsumerGroupHeartbeat and ConsumerGroupDescribe, translated to and
//! from the group engine's consumer groups (`dataplane::group::consumer`).
//!
//! Authorization is Kafka's: READ on the group for a heartbeat, DESCRIBE on
//! every topic a member subscribes to by name, DESCRIBE on the group to
//! describe it. (A pattern matches every topic of the cluster: reading the
//! matched topics still needs READ on them.)

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member,
    TopicPartitions as DescribedPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::{s, RequestContext};
use crate::broker::Broker;
use crate::codes;
use dataplane::group::assignor::Assignment as Partitions;
use dataplane::group::consumer::{ConsumerHeartbeat, TopicCatalog};
use metastore::acl::{AclOperation, ResourceType};
use metastore::{Groups, Topics};

/// The cluster's topics: name → (id, partitions). The whole catalog, not
/// the requester's view of it: the group's assignment covers every
/// member's subscription, whoever asks (the named topics the requester may
/// not describe are refused before this).
fn catalog(b: &Broker) -> TopicCatalog {
    b.node
        .catalog
        .topics()
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                (t.id, i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)),
            )
        })
        .collect()
}

pub(super) async fn heartbeat(
    b: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let refused = |error: ResponseError, message: String| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(s(message)))
            .with_member_id(Some(req.member_id.clone()))
            .with_member_epoch(req.member_epoch)
    };
    let group = req.group_id.to_string();
    if !ctx.may(b, AclOperation::Read, ResourceType::Group, &group) {
        return refused(
            ResponseError::GroupAuthorizationFailed,
            format!("not authorized to read group {group}"),
        );
    }
    let topics = catalog(b);
    if let Some(names) = &req.subscribed_topic_names {
        let denied: Vec<String> = names
            .iter()
            .map(|n| n.to_string())
            .filter(|n| {
                b.node.catalog.topic(n).is_some()
                    && !ctx.may(b, AclOperation::Describe, ResourceType::Topic, n)
            })
            .collect();
        if !denied.is_empty() {
            return refused(
                ResponseError::TopicAuthorizationFailed,
                format!("not authorized to describe topics {denied:?}"),
            );
        }
    }
    let heartbeat = ConsumerHeartbeat {
        group_id: group,
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|x| x.to_string()),
        rack_id: req.rack_id.as_ref().map(|x| x.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|n| n.iter().map(|t| t.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|x| x.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|x| x.to_string()),
        owned: req.topic_partitions.as_ref().map(|owned| {
            owned
                .iter()
                .map(|tp| (tp.topic_id, tp.partitions.clone()))
                .collect()
        }),
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host.clone(),
        topics: Arc::new(topics),
    };
    match b.node.groups.consumer_heartbeat(heartbeat).await {
        Ok(Ok(a)) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(s(a.member_id)))
            .with_member_epoch(a.member_epoch)
            .with_heartbeat_interval_ms(a.heartbeat_interval_ms)
            .with_assignment(a.assignment.map(|p| {
                Assignment::default().with_topic_partitions(
                    p.into_iter()
                        .map(|(t, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(t)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Ok(Err(r)) => {
            tracing::debug!(
                group = %req.group_id.as_str(),
                member = %req.member_id.as_str(),
                epoch = req.member_epoch,
                error = ?r.error,
                "ConsumerGroupHeartbeat refused: {}",
                r.message
            );
            refused(codes::group_error(r.error), r.message)
        }
        Err(_) => refused(
            ResponseError::CoordinatorNotAvailable,
            "the group coordinator is not running".into(),
        ),
    }
}

/// The names of the topic ids of an assignment, as the catalog has them now.
fn described(names: &BTreeMap<Uuid, String>, p: Partitions) -> DescribedAssignment {
    DescribedAssignment::default().with_topic_partitions(
        p.into_iter()
            .map(|(t, ps)| {
                DescribedPartitions::default()
                    .with_topic_id(t)
                    .with_topic_name(TopicName(s(names.get(&t).cloned().unwrap_or_default())))
                    .with_partitions(ps.into_iter().collect())
            })
            .collect(),
    )
}

pub(super) async fn describe(
    b: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let names: BTreeMap<Uuid, String> = b
        .node
        .catalog
        .topics()
        .iter()
        .map(|t| (t.id, t.name.clone()))
        .collect();
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for g in &req.group_ids {
        let id = g.to_string();
        let base = DescribedGroup::default()
            .with_group_id(GroupId(s(id.clone())))
            .with_authorized_operations(i32::MIN);
        if !ctx.may(b, AclOperation::Describe, ResourceType::Group, &id) {
            groups.push(base.with_error_code(ResponseError::GroupAuthorizationFailed.code()));
            continue;
        }
        let answer = match b.node.groups.consumer_describe(id.clone()).await {
            Ok(a) => a,
            Err(_) => {
                groups.push(base.with_error_code(ResponseError::CoordinatorNotAvailable.code()));
                continue;
            }
        };
        let d = match answer {
            Ok(Some(d)) => d,
            Ok(None) => {
                let classic = b.node.catalog.groups().iter().any(|x| x == &id);
                groups.push(
                    base.with_error_code(ResponseError::GroupIdNotFound.code())
                        .with_error_message(Some(s(if classic {
                            format!("Group {id} is not a consumer group.")
                        } else {
                            format!("Group {id} not found.")
                        }))),
                );
                continue;
            }
            Err(e) => {
                groups.push(base.with_error_code(codes::group_error(e).code()));
                continue;
            }
        };
        groups.push(
            base.with_group_state(s(d.state.as_str().to_string()))
                .with_group_epoch(d.epoch)
                .with_assignment_epoch(d.assignment_epoch)
                .with_assignor_name(s(d.assignor))
                .with_members(
                    d.members
                        .into_iter()
                        .map(|m| {
                            Member::default()
                                .with_member_id(s(m.member_id))
                                .with_instance_id(m.instance_id.map(s))
                                .with_rack_id(m.rack_id.map(s))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(s(m.client_id))
                                .with_client_host(s(m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topic_names
                                        .into_iter()
                                        .map(|n| TopicName(s(n)))
                                        .collect(),
                                )
                                .with_subscribed_topic_regex(m.subscribed_topic_regex.map(s))
                                .with_assignment(described(&names, m.assignment))
                                .with_target_assignment(described(&names, m.target))
                                .with_member_type(1)
                        })
                        .collect(),
                ),
        );
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
