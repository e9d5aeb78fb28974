//! OffsetCommit, OffsetFetch and OffsetDelete: committed offsets live in the
//! catalog (the metastore), membership checks in the group coordinator.
//! Only the group's coordinator (the agent holding its coordinator slot)
//! answers them; the others answer NOT_COORDINATOR. Its commits carry the
//! slot's fence, so they fail once the slot has moved.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::ResponseError;

use std::collections::HashSet;

use super::{s, RequestContext};
use crate::broker::Broker;
use crate::codes;
use dataplane::group::admin;
use dataplane::node::GroupHome;
use dataplane::partition::now_ms;
use metastore::acl::{AclOperation, ResourceType};
use metastore::{Groups, OffsetCommit, Topics, Transactions};

/// `offset.metadata.max.bytes`.
const MAX_METADATA: usize = 4096;

pub(super) async fn offset_commit(
    b: &Broker,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group = req.group_id.to_string();
    let (group_error, fence) = if !ctx.may(b, AclOperation::Read, ResourceType::Group, &group) {
        (Some(ResponseError::GroupAuthorizationFailed), None)
    } else {
        let check = b
            .node
            .groups
            .validate_commit(
                group.clone(),
                req.member_id.to_string(),
                req.group_instance_id.as_ref().map(|x| x.to_string()),
                req.generation_id_or_member_epoch,
            )
            .await;
        match check {
            Ok(Ok(fence)) => (None, Some(fence)),
            Ok(Err(e)) => (Some(codes::group_error(e)), None),
            Err(_) => (Some(ResponseError::CoordinatorNotAvailable), None),
        }
    };
    let now = now_ms();
    let mut to_commit = Vec::new();
    let mut topics = Vec::new();
    for t in &req.topics {
        let name = t.name.to_string();
        let topic = b.node.catalog.topic(&name);
        let readable = ctx.may(b, AclOperation::Read, ResourceType::Topic, &name);
        let mut parts = Vec::new();
        for p in &t.partitions {
            let error = if let Some(e) = group_error {
                Some(e)
            } else if !readable {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if topic.as_ref().is_none_or(|tm| {
                p.partition_index < 0 || p.partition_index as usize >= tm.partitions.len()
            }) {
                Some(ResponseError::UnknownTopicOrPartition)
            } else if p
                .committed_metadata
                .as_ref()
                .is_some_and(|m| m.len() > MAX_METADATA)
            {
                Some(ResponseError::OffsetMetadataTooLarge)
            } else {
                to_commit.push(OffsetCommit {
                    topic: name.clone(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    commit_time_ms: now,
                });
                None
            };
            parts.push((p.partition_index, error));
        }
        topics.push((t.name.clone(), t.topic_id, parts));
    }
    let commit_error = if to_commit.is_empty() {
        None
    } else {
        // One failure fails the request: each entry was vetted above.
        let outcome = match b
            .node
            .catalog
            .commit_offsets(&group, fence, to_commit)
            .await
        {
            Ok(results) => results.into_iter().find_map(Result::err),
            Err(e) => Some(e),
        };
        outcome.map(|e| {
            tracing::warn!(group = %group, error = %e, "committing offsets failed");
            codes::meta_error(&e)
        })
    };
    let topics = topics
        .into_iter()
        .map(|(name, id, parts)| {
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_topic_id(id)
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(index, error)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(index)
                                .with_error_code(codes::code(error.or(commit_error)))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

pub(super) async fn offset_fetch(
    b: &Broker,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if ctx.api_version < 8 {
        if !ctx.may(
            b,
            AclOperation::Describe,
            ResourceType::Group,
            req.group_id.as_str(),
        ) {
            return OffsetFetchResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        if let Some(e) = elsewhere(b, req.group_id.as_str()) {
            return offset_fetch_refused(ctx, req, e);
        }
        let topics = req.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.name.to_string(), t.partition_indexes))
                .collect()
        });
        let topics = describable_offsets(b, ctx, req.group_id.as_str(), topics, req.require_stable)
            .into_iter()
            .map(|(name, parts)| {
                OffsetFetchResponseTopic::default()
                    .with_partitions(
                        parts
                            .into_iter()
                            .map(|c| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(c.partition)
                                    .with_committed_offset(c.offset)
                                    .with_committed_leader_epoch(c.leader_epoch)
                                    .with_metadata(Some(s(c.metadata)))
                                    .with_error_code(c.error)
                            })
                            .collect(),
                    )
                    .with_name(TopicName(s(name)))
            })
            .collect();
        return OffsetFetchResponse::default().with_topics(topics);
    }
    let mut groups = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let answer = {
            // not allowed, not coordinated here, or (v9+) a member of a
            // consumer group not at its current epoch
            let refused = if !ctx.may(
                b,
                AclOperation::Describe,
                ResourceType::Group,
                g.group_id.as_str(),
            ) {
                Some(ResponseError::GroupAuthorizationFailed)
            } else if let Some(e) = elsewhere(b, g.group_id.as_str()) {
                Some(e)
            } else {
                member_refusal(b, &g).await
            };
            if let Some(e) = refused {
                groups.push(
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(e.code()),
                );
                continue;
            }
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes))
                    .collect()
            });
            let topics =
                describable_offsets(b, ctx, g.group_id.as_str(), topics, req.require_stable)
                    .into_iter()
                    .map(|(name, parts)| {
                        let topic_id = b
                            .node
                            .catalog
                            .topic(&name)
                            .map(|t| t.id)
                            .unwrap_or_default();
                        OffsetFetchResponseTopics::default()
                            .with_topic_id(topic_id)
                            .with_partitions(
                                parts
                                    .into_iter()
                                    .map(|c| {
                                        OffsetFetchResponsePartitions::default()
                                            .with_partition_index(c.partition)
                                            .with_committed_offset(c.offset)
                                            .with_committed_leader_epoch(c.leader_epoch)
                                            .with_metadata(Some(s(c.metadata)))
                                            .with_error_code(c.error)
                                    })
                                    .collect(),
                            )
                            .with_name(TopicName(s(name)))
                    })
                    .collect();
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id)
                .with_topics(topics)
        };
        groups.push(answer);
    }
    OffsetFetchResponse::default().with_groups(groups)
}

/// The error for an OffsetFetch group naming a member of a consumer group
/// that is unknown or not at its current epoch (Kafka's
/// `validateOffsetFetch`); `None` when the fetch may go on.
async fn member_refusal(b: &Broker, g: &OffsetFetchRequestGroup) -> Option<ResponseError> {
    let member = g
        .member_id
        .as_ref()
        .map(|m| m.to_string())
        .filter(|m| !m.is_empty());
    if member.is_none() && g.member_epoch < 0 {
        return None;
    }
    match b
        .node
        .groups
        .validate_fetch(g.group_id.to_string(), member, g.member_epoch)
        .await
    {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(codes::group_error(e)),
        Err(_) => Some(ResponseError::CoordinatorNotAvailable),
    }
}

/// Why this agent does not answer for `group`: its coordinator slot is
/// held by another agent (NOT_COORDINATOR), or by none yet.
pub(super) fn elsewhere(b: &Broker, group: &str) -> Option<ResponseError> {
    match b.node.group_home(group) {
        GroupHome::Here(_) => None,
        GroupHome::Elsewhere(_) => Some(ResponseError::NotCoordinator),
        GroupHome::Unassigned => Some(ResponseError::CoordinatorNotAvailable),
    }
}

/// An OffsetFetch (v0 to v7) refused with `e`: v2 and later have an error
/// for the whole group, v0 and v1 only one per partition.
fn offset_fetch_refused(
    ctx: &RequestContext,
    req: OffsetFetchRequest,
    e: ResponseError,
) -> OffsetFetchResponse {
    if ctx.api_version >= 2 {
        return OffsetFetchResponse::default().with_error_code(e.code());
    }
    let topics = req
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let parts = t
                .partition_indexes
                .iter()
                .map(|&i| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(i)
                        .with_committed_offset(-1)
                        .with_error_code(e.code())
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(t.name)
                .with_partitions(parts)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

/// One committed offset as OffsetFetch reports it.
struct Reported {
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: String,
    error: i16,
}

/// A group's committed offsets of the topics the client may describe: a
/// topic it asked for by name and may not describe is answered with
/// TOPIC_AUTHORIZATION_FAILED; when it asked for all, such topics are left
/// out, as Kafka does.
fn describable_offsets(
    b: &Broker,
    ctx: &RequestContext,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Vec<(String, Vec<Reported>)> {
    let all = topics.is_none();
    let mut committed = admin::committed_offsets(&b.node, group, topics);
    // KIP-447: a stable fetch answers UNSTABLE_OFFSET_COMMIT for a partition
    // with offsets in a transaction not yet complete (the client retries),
    // never the offset the transaction is about to replace; fetching all,
    // such a partition is listed even when nothing is committed for it yet
    let unstable: HashSet<(String, i32)> = if require_stable {
        b.node
            .catalog
            .pending_txn_offsets(group)
            .into_iter()
            .collect()
    } else {
        HashSet::new()
    };
    if all {
        for (topic, partition) in &unstable {
            let listed = committed.iter().any(|(name, parts)| {
                name == topic && parts.iter().any(|c| c.partition == *partition)
            });
            if !listed {
                let at = match committed.iter().position(|(name, _)| name == topic) {
                    Some(i) => i,
                    None => {
                        committed.push((topic.clone(), Vec::new()));
                        committed.len() - 1
                    }
                };
                committed[at].1.push(admin::Committed {
                    partition: *partition,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                });
            }
        }
    }
    committed
        .into_iter()
        .filter_map(|(name, parts)| {
            let allowed = ctx.may(b, AclOperation::Describe, ResourceType::Topic, &name);
            if !allowed && all {
                return None;
            }
            let parts = parts
                .into_iter()
                .map(|c| match allowed {
                    true if unstable
                        .iter()
                        .any(|(t, p)| *t == name && *p == c.partition) =>
                    {
                        Reported {
                            partition: c.partition,
                            offset: -1,
                            leader_epoch: -1,
                            metadata: String::new(),
                            error: ResponseError::UnstableOffsetCommit.code(),
                        }
                    }
                    true => Reported {
                        partition: c.partition,
                        offset: c.offset,
                        leader_epoch: c.leader_epoch,
                        metadata: c.metadata,
                        error: 0,
                    },
                    false => Reported {
                        partition: c.partition,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                        error: ResponseError::TopicAuthorizationFailed.code(),
                    },
                })
                .collect();
            Some((name, parts))
        })
        .collect()
}

pub(super) async fn offset_delete(
    b: &Broker,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = req.group_id.to_string();
    if !ctx.may(b, AclOperation::Delete, ResourceType::Group, &group) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let refused = |e: ResponseError| OffsetDeleteResponse::default().with_error_code(e.code());
    let fence = match b.node.group_home(&group) {
        GroupHome::Here(fence) => fence,
        GroupHome::Elsewhere(_) => return refused(ResponseError::NotCoordinator),
        GroupHome::Unassigned => return refused(ResponseError::CoordinatorNotAvailable),
    };
    let live_members = match b.node.groups.describe(group.clone()).await {
        Ok(Ok(Some(d))) => !d.members.is_empty(),
        Ok(Ok(None)) => false,
        Ok(Err(e)) => return refused(codes::group_error(e)),
        Err(_) => return refused(ResponseError::CoordinatorNotAvailable),
    };
    let committed = b.node.catalog.committed_offsets(&group);
    if committed.is_empty() && !live_members {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupIdNotFound.code());
    }
    let mut doomed = Vec::new();
    let mut topics = Vec::new();
    for t in req.topics {
        let name = t.name.to_string();
        let exists = b.node.catalog.topic(&name).is_some();
        let readable = ctx.may(b, AclOperation::Read, ResourceType::Topic, &name);
        let parts = t
            .partitions
            .iter()
            .map(|p| {
                // A group with live members may be consuming the topic; Kafka refuses then.
                let code = if !readable {
                    ResponseError::TopicAuthorizationFailed.code()
                } else if !exists {
                    ResponseError::UnknownTopicOrPartition.code()
                } else if live_members {
                    ResponseError::GroupSubscribedToTopic.code()
                } else {
                    doomed.push((name.clone(), p.partition_index));
                    0
                };
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            })
            .collect();
        topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    if !doomed.is_empty() {
        if let Err(e) = b
            .node
            .catalog
            .delete_offsets(&group, Some(fence), doomed)
            .await
            .map(|_| ())
        {
            return OffsetDeleteResponse::default().with_error_code(codes::meta_error(&e).code());
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
