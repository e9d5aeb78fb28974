//! Load-balancer mode: group requests go to the agents that coordinate the
//! groups, the holders of their coordinator slots (`metastore::coordinators`).
//!
//! - A request about one group (JoinGroup, SyncGroup, Heartbeat,
//!   LeaveGroup, OffsetCommit, OffsetDelete, OffsetFetch before v8) goes
//!   whole to its coordinator. A join waits there for the whole group.
//! - A request naming several groups (DescribeGroups, DeleteGroups,
//!   OffsetFetch v8 and later) is split by coordinator: this agent answers
//!   for the groups it coordinates, every other coordinator gets the same
//!   request naming only its groups, and the answers are put back in the
//!   order the client asked. A coordinator that does not answer gets its
//!   groups COORDINATOR_NOT_AVAILABLE.
//! - ListGroups asks every agent that holds slots for the groups it
//!   coordinates and merges the lists, so the client sees the whole
//!   cluster through any agent. The groups of a holder that does not
//!   answer (or whose lease lapsed) are listed from their committed
//!   offsets, as `Empty`.
//! - A coordinator that lost the slot meanwhile answers NOT_COORDINATOR,
//!   which reaches the client; it looks the coordinator up again (the
//!   balancer), retries, and this agent forwards to the new holder.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::ResponseError;
use metastore::{AgentId, ClusterControl, Groups};

use super::routing::{call, decode_response, Routed, FORWARD_TIMEOUT};
use super::{s, DispatchError, RequestContext};
use crate::broker::Broker;
use crate::forward::client::Forwarder;
use crate::kafka::response::ResponseFrame;
use dataplane::group::admin;
use dataplane::node::GroupHome;

const UNAVAILABLE: ResponseError = ResponseError::CoordinatorNotAvailable;

/// The agent coordinating `group`, when it is not this one.
fn remote_coordinator(b: &Broker, group: &str) -> Option<AgentId> {
    match b.node.group_home(group) {
        GroupHome::Elsewhere(agent) => Some(agent),
        GroupHome::Here(_) | GroupHome::Unassigned => None,
    }
}

/// Routes a group request (any other request is served here).
pub(super) async fn route_group(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    frame: &Bytes,
    request: RequestKind,
) -> Result<Routed, DispatchError> {
    let (group, timeout): (String, Duration) = match request {
        RequestKind::JoinGroup(ref r) => (
            r.group_id.to_string(),
            // a join waits for the whole group, up to the rebalance timeout
            Duration::from_millis(
                u64::try_from(r.rebalance_timeout_ms.max(r.session_timeout_ms)).unwrap_or(0),
            ) + FORWARD_TIMEOUT,
        ),
        RequestKind::SyncGroup(ref r) => (r.group_id.to_string(), FORWARD_TIMEOUT * 2),
        RequestKind::Heartbeat(ref r) => (r.group_id.to_string(), FORWARD_TIMEOUT),
        RequestKind::LeaveGroup(ref r) => (r.group_id.to_string(), FORWARD_TIMEOUT),
        RequestKind::ConsumerGroupHeartbeat(ref r) => (r.group_id.to_string(), FORWARD_TIMEOUT),
        RequestKind::OffsetCommit(ref r) => (r.group_id.to_string(), FORWARD_TIMEOUT),
        RequestKind::OffsetDelete(ref r) => (r.group_id.to_string(), FORWARD_TIMEOUT),
        RequestKind::TxnOffsetCommit(ref r) => (r.group_id.to_string(), FORWARD_TIMEOUT),
        RequestKind::OffsetFetch(ref r) if ctx.api_version < 8 => {
            (r.group_id.to_string(), FORWARD_TIMEOUT)
        }
        RequestKind::OffsetFetch(r) => return split(b, fwd, ctx, header, r).await,
        RequestKind::DescribeGroups(r) => return split(b, fwd, ctx, header, r).await,
        RequestKind::ConsumerGroupDescribe(r) => return split(b, fwd, ctx, header, r).await,
        RequestKind::DeleteGroups(r) => return split(b, fwd, ctx, header, r).await,
        RequestKind::ListGroups(r) => return list_everywhere(b, fwd, ctx, header, frame, r).await,
        other => return Ok(Routed::Local(Box::new(other))),
    };
    let Some(owner) = remote_coordinator(b, &group) else {
        return Ok(Routed::Local(Box::new(request)));
    };
    match fwd.call(owner, ctx.origin(), frame, None, timeout).await {
        Ok(Some(resp)) => {
            let mut frame = ResponseFrame::new();
            frame.push_bytes(resp);
            Ok(Routed::Answered(Some(frame)))
        }
        Ok(None) => Ok(Routed::Answered(None)),
        Err(e) => {
            tracing::debug!(owner, error = %e, "forwarding a group request failed");
            let api = ApiKey::try_from(header.request_api_key)
                .map_err(|_| DispatchError::UnknownApi(header.request_api_key))?;
            super::encode_frame(header, api, &coordinator_unavailable(ctx, request))
                .map(|f| Routed::Answered(Some(f)))
        }
    }
}

/// A request naming several groups, each answered by its coordinator.
trait Batch: Clone + Encodable + Into<RequestKind> {
    type Answer: Decodable;
    type Item;
    const API: ApiKey;
    /// The groups named, in order.
    fn groups(&self) -> Vec<String>;
    /// The same request naming only the groups at `indexes`.
    fn only(&self, indexes: &[usize]) -> Self;
    /// This agent's answer.
    async fn serve_here(self, b: &Broker, ctx: &RequestContext) -> Self::Answer;
    fn items(answer: Self::Answer) -> Vec<Self::Item>;
    fn group_of(item: &Self::Item) -> &str;
    /// The answer for a group whose coordinator did not answer.
    fn unreachable(group: String) -> Self::Item;
    fn answer(items: Vec<Self::Item>) -> ResponseKind;
}

fn pick<T: Clone>(all: &[T], indexes: &[usize]) -> Vec<T> {
    indexes
        .iter()
        .filter_map(|&i| all.get(i).cloned())
        .collect()
}

impl Batch for DescribeGroupsRequest {
    type Answer = DescribeGroupsResponse;
    type Item = DescribedGroup;
    const API: ApiKey = ApiKey::DescribeGroups;
    fn groups(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.to_string()).collect()
    }
    fn only(&self, indexes: &[usize]) -> Self {
        self.clone().with_groups(pick(&self.groups, indexes))
    }
    async fn serve_here(self, b: &Broker, ctx: &RequestContext) -> Self::Answer {
        super::groups::describe_groups(b, ctx, self).await
    }
    fn items(answer: Self::Answer) -> Vec<Self::Item> {
        answer.groups
    }
    fn group_of(item: &Self::Item) -> &str {
        item.group_id.as_str()
    }
    fn unreachable(group: String) -> Self::Item {
        DescribedGroup::default()
            .with_group_id(GroupId(s(group)))
            .with_error_code(UNAVAILABLE.code())
            .with_authorized_operations(i32::MIN)
    }
    fn answer(items: Vec<Self::Item>) -> ResponseKind {
        DescribeGroupsResponse::default().with_groups(items).into()
    }
}

impl Batch for ConsumerGroupDescribeRequest {
    type Answer = ConsumerGroupDescribeResponse;
    type Item = kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
    const API: ApiKey = ApiKey::ConsumerGroupDescribe;
    fn groups(&self) -> Vec<String> {
        self.group_ids.iter().map(|g| g.to_string()).collect()
    }
    fn only(&self, indexes: &[usize]) -> Self {
        self.clone().with_group_ids(pick(&self.group_ids, indexes))
    }
    async fn serve_here(self, b: &Broker, ctx: &RequestContext) -> Self::Answer {
        super::consumer_groups::describe(b, ctx, self).await
    }
    fn items(answer: Self::Answer) -> Vec<Self::Item> {
        answer.groups
    }
    fn group_of(item: &Self::Item) -> &str {
        item.group_id.as_str()
    }
    fn unreachable(group: String) -> Self::Item {
        Self::Item::default()
            .with_group_id(GroupId(s(group)))
            .with_error_code(UNAVAILABLE.code())
            .with_authorized_operations(i32::MIN)
    }
    fn answer(items: Vec<Self::Item>) -> ResponseKind {
        ConsumerGroupDescribeResponse::default()
            .with_groups(items)
            .into()
    }
}

impl Batch for DeleteGroupsRequest {
    type Answer = DeleteGroupsResponse;
    type Item = DeletableGroupResult;
    const API: ApiKey = ApiKey::DeleteGroups;
    fn groups(&self) -> Vec<String> {
        self.groups_names.iter().map(|g| g.to_string()).collect()
    }
    fn only(&self, indexes: &[usize]) -> Self {
        self.clone()
            .with_groups_names(pick(&self.groups_names, indexes))
    }
    async fn serve_here(self, b: &Broker, ctx: &RequestContext) -> Self::Answer {
        super::groups::delete_groups(b, ctx, self).await
    }
    fn items(answer: Self::Answer) -> Vec<Self::Item> {
        answer.results
    }
    fn group_of(item: &Self::Item) -> &str {
        item.group_id.as_str()
    }
    fn unreachable(group: String) -> Self::Item {
        DeletableGroupResult::default()
            .with_group_id(GroupId(s(group)))
            .with_error_code(UNAVAILABLE.code())
    }
    fn answer(items: Vec<Self::Item>) -> ResponseKind {
        DeleteGroupsResponse::default().with_results(items).into()
    }
}

/// OffsetFetch v8 and later, which names groups.
impl Batch for OffsetFetchRequest {
    type Answer = OffsetFetchResponse;
    type Item = OffsetFetchResponseGroup;
    const API: ApiKey = ApiKey::OffsetFetch;
    fn groups(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.group_id.to_string()).collect()
    }
    fn only(&self, indexes: &[usize]) -> Self {
        self.clone().with_groups(pick(&self.groups, indexes))
    }
    async fn serve_here(self, b: &Broker, ctx: &RequestContext) -> Self::Answer {
        super::group_offsets::offset_fetch(b, ctx, self).await
    }
    fn items(answer: Self::Answer) -> Vec<Self::Item> {
        answer.groups
    }
    fn group_of(item: &Self::Item) -> &str {
        item.group_id.as_str()
    }
    fn unreachable(group: String) -> Self::Item {
        OffsetFetchResponseGroup::default()
            .with_group_id(GroupId(s(group)))
            .with_error_code(UNAVAILABLE.code())
    }
    fn answer(items: Vec<Self::Item>) -> ResponseKind {
        OffsetFetchResponse::default().with_groups(items).into()
    }
}

/// Splits a request naming several groups by coordinator (see the module
/// documentation).
async fn split<Q: Batch>(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    req: Q,
) -> Result<Routed, DispatchError> {
    let groups = req.groups();
    let mut here = Vec::new();
    let mut remote: BTreeMap<AgentId, Vec<usize>> = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        match remote_coordinator(b, g) {
            Some(owner) => remote.entry(owner).or_default().push(i),
            None => here.push(i),
        }
    }
    if remote.is_empty() {
        return Ok(Routed::Local(Box::new(req.into())));
    }
    let local = async {
        match here.is_empty() {
            true => Vec::new(),
            false => Q::items(req.only(&here).serve_here(b, ctx).await),
        }
    };
    let remote = futures::future::join_all(remote.into_iter().map(|(owner, indexes)| {
        let r = req.only(&indexes);
        async move {
            let answer = call::<Q, Q::Answer>(fwd, ctx, header, Q::API, owner, &r, FORWARD_TIMEOUT);
            let answer = answer.await;
            if let Err(e) = &answer {
                tracing::debug!(owner, api = ?Q::API, error = %e, "a forwarded group request failed");
            }
            answer
        }
    }));
    let (mut items, answers) = tokio::join!(local, remote);
    items.extend(answers.into_iter().flatten().flatten().flat_map(Q::items));
    let merged = groups
        .into_iter()
        .map(
            |g| match items.iter().position(|i| Q::group_of(i) == g.as_str()) {
                Some(at) => items.swap_remove(at),
                None => Q::unreachable(g),
            },
        )
        .collect();
    super::encode_frame(header, Q::API, &Q::answer(merged)).map(|f| Routed::Answered(Some(f)))
}

/// ListGroups of the whole cluster: this agent's groups, every other slot
/// holder's, and, for holders that do not answer, the groups that only
/// their committed offsets show.
async fn list_everywhere(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    frame: &Bytes,
    req: ListGroupsRequest,
) -> Result<Routed, DispatchError> {
    let me = b.node.agent_id();
    let holders: BTreeSet<AgentId> = b.node.catalog.read(|s| {
        s.coordinator_slots()
            .iter()
            .map(|(_, h)| h.agent)
            .filter(|a| *a != me)
            .collect()
    });
    let live: BTreeSet<AgentId> = b
        .node
        .catalog
        .agents()
        .into_iter()
        .filter(|a| !a.fenced)
        .map(|a| a.id)
        .collect();
    let asked: Vec<AgentId> = holders.intersection(&live).copied().collect();
    let remote = futures::future::join_all(asked.iter().map(|&owner| async move {
        let answer = fwd
            .call(owner, ctx.origin(), frame, None, FORWARD_TIMEOUT)
            .await
            .and_then(|r| {
                r.map(|r| {
                    decode_response::<ListGroupsResponse>(ApiKey::ListGroups, ctx.api_version, r)
                })
                .transpose()
            });
        (owner, answer)
    }));
    let (local, remote) = tokio::join!(super::groups::list_groups(b, ctx, req.clone()), remote);
    if local.error_code != 0 {
        return super::encode_frame(header, ApiKey::ListGroups, &local.into())
            .map(|f| Routed::Answered(Some(f)));
    }
    let mut listed = local.groups;
    let mut silent: BTreeSet<AgentId> = holders.difference(&live).copied().collect();
    for (owner, answer) in remote {
        match answer {
            Ok(Some(r)) if r.error_code == 0 => listed.extend(r.groups),
            other => {
                tracing::debug!(owner, answer = ?other.map(|r| r.map(|r| r.error_code)), "an agent did not list its groups");
                silent.insert(owner);
            }
        }
    }
    if !silent.is_empty() {
        let from_offsets = b
            .node
            .catalog
            .groups()
            .into_iter()
            .filter(|g| remote_coordinator(b, g).is_some_and(|h| silent.contains(&h)))
            .map(|group_id| admin::ListedGroup {
                group_id,
                state: dataplane::group::engine::GroupState::Empty
                    .as_str()
                    .to_string(),
                protocol_type: String::new(),
                group_type: "classic".to_string(),
                here: true,
            });
        listed.extend(super::groups::listed(b, ctx, &req, from_offsets));
    }
    let mut seen = BTreeSet::new();
    listed.retain(|g| seen.insert(g.group_id.to_string()));
    let answer = ListGroupsResponse::default().with_groups(listed);
    super::encode_frame(header, ApiKey::ListGroups, &answer.into())
        .map(|f| Routed::Answered(Some(f)))
}

/// The answer to a group request whose coordinator could not be reached:
/// COORDINATOR_NOT_AVAILABLE, on which clients look the coordinator up again.
fn coordinator_unavailable(ctx: &RequestContext, request: RequestKind) -> ResponseKind {
    let code = UNAVAILABLE.code();
    match request {
        RequestKind::JoinGroup(_) => JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .into(),
        RequestKind::SyncGroup(_) => SyncGroupResponse::default().with_error_code(code).into(),
        RequestKind::Heartbeat(_) => HeartbeatResponse::default().with_error_code(code).into(),
        RequestKind::ConsumerGroupHeartbeat(_) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code)
            .into(),
        RequestKind::LeaveGroup(_) => LeaveGroupResponse::default().with_error_code(code).into(),
        RequestKind::OffsetDelete(_) => {
            OffsetDeleteResponse::default().with_error_code(code).into()
        }
        RequestKind::OffsetCommit(r) => OffsetCommitResponse::default()
            .with_topics(
                r.topics
                    .into_iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name)
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into(),
        RequestKind::OffsetFetch(_) if ctx.api_version >= 2 => {
            OffsetFetchResponse::default().with_error_code(code).into()
        }
        RequestKind::OffsetFetch(r) => OffsetFetchResponse::default()
            .with_topics(
                r.topics
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| {
                        OffsetFetchResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partition_indexes
                                    .iter()
                                    .map(|&i| {
                                        OffsetFetchResponsePartition::default()
                                            .with_partition_index(i)
                                            .with_committed_offset(-1)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into(),
        RequestKind::TxnOffsetCommit(r) => TxnOffsetCommitResponse::default()
            .with_topics(
                r.topics
                    .into_iter()
                    .map(|t| {
                        let partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect();
                        txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .into(),
        // route_group forwards nothing else whole
        _ => HeartbeatResponse::default().with_error_code(code).into(),
    }
}
