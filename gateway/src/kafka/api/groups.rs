//! FindCoordinator and the classic group membership APIs, translated to and
//! from the group engine's types.
//!
//! FindCoordinator names the agent holding the key's coordinator slot (the
//! balancer, in load-balancer mode). The other APIs answer only for groups
//! this agent coordinates, NOT_COORDINATOR for the rest; ListGroups lists
//! the groups coordinated here, so a client asking every broker (as Kafka's
//! admin clients do) sees each group once, and in load-balancer mode the
//! agent the client reached asks the others (`group_routing.rs`).

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator as CoordinatorEntry;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::ResponseError;

use super::{s, RequestContext};
use crate::broker::Broker;
use crate::brokers;
use crate::codes;
use dataplane::group::admin;
use dataplane::group::engine::{JoinRequest, SyncRequest};
use metastore::acl::{AclOperation, ResourceType};
use metastore::Groups;

const GONE: ResponseError = ResponseError::CoordinatorNotAvailable;

fn opt(v: Option<kafka_protocol::protocol::StrBytes>) -> Option<String> {
    v.map(|x| x.to_string())
}

/// Whether the client may `operation` the group.
fn may(b: &Broker, ctx: &RequestContext, operation: AclOperation, group: &str) -> bool {
    ctx.may(b, operation, ResourceType::Group, group)
}

const REFUSED: ResponseError = ResponseError::GroupAuthorizationFailed;

/// The operations Kafka reports on a group when asked which ones the client
/// may perform (KIP-430; its `AclEntry.supportedOperations`).
const GROUP_OPERATIONS: [AclOperation; 5] = [
    AclOperation::Read,
    AclOperation::Describe,
    AclOperation::Delete,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
];

pub(super) fn find_coordinator(
    b: &Broker,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    // no holder yet, or one whose lease lapsed: the client asks again
    let pick = |key: &str| {
        brokers::coordinator(&b.node.catalog, &b.config, key)
            .and_then(|e| {
                brokers::for_zone(&b.config, ctx.zone.as_deref(), vec![e])
                    .into_iter()
                    .next()
            })
            .map(|e| (BrokerId(e.id), s(e.host), e.port))
            .ok_or(GONE)
    };
    // DESCRIBE on the group, or on the transactional id (key type 1)
    let refused = |key: &str| {
        if req.key_type == 1 {
            let denied = !ctx.may(
                b,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                key,
            );
            denied.then_some(ResponseError::TransactionalIdAuthorizationFailed)
        } else {
            (!may(b, ctx, AclOperation::Describe, key)).then_some(REFUSED)
        }
    };
    let resp = FindCoordinatorResponse::default();
    if ctx.api_version < 4 {
        if let Some(e) = refused(&req.key) {
            return resp
                .with_error_code(e.code())
                .with_node_id(BrokerId(-1))
                .with_port(-1);
        }
        return match pick(&req.key) {
            Ok((node, host, port)) => resp.with_node_id(node).with_host(host).with_port(port),
            Err(e) => resp
                .with_error_code(e.code())
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        };
    }
    let coordinators = req
        .coordinator_keys
        .into_iter()
        .map(|key| {
            if let Some(e) = refused(&key) {
                return CoordinatorEntry::default()
                    .with_key(key)
                    .with_error_code(e.code())
                    .with_node_id(BrokerId(-1))
                    .with_port(-1);
            }
            match pick(&key) {
                Ok((node, host, port)) => CoordinatorEntry::default()
                    .with_key(key)
                    .with_node_id(node)
                    .with_host(host)
                    .with_port(port),
                Err(e) => CoordinatorEntry::default()
                    .with_key(key)
                    .with_error_code(e.code())
                    .with_node_id(BrokerId(-1))
                    .with_port(-1),
            }
        })
        .collect();
    resp.with_coordinators(coordinators)
}

pub(super) async fn join_group(
    b: &Broker,
    ctx: &RequestContext,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    if !may(b, ctx, AclOperation::Read, req.group_id.as_str()) {
        return JoinGroupResponse::default()
            .with_error_code(REFUSED.code())
            .with_generation_id(-1)
            .with_member_id(req.member_id);
    }
    let v = ctx.api_version;
    let join = JoinRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        group_instance_id: opt(req.group_instance_id),
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host.clone(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if v >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            // The coordinator keeps these for the member's lifetime: copy them
            // out of the request frame rather than pin the whole frame.
            .map(|p| (p.name.to_string(), Bytes::copy_from_slice(&p.metadata)))
            .collect(),
        require_known_member_id: v >= 4,
        supports_skip_assignment: v >= 9,
    };
    let resp = match b.node.groups.join(join).await {
        Ok(r) => r,
        Err(_) => {
            return JoinGroupResponse::default()
                .with_error_code(GONE.code())
                .with_generation_id(-1)
                .with_member_id(req.member_id)
        }
    };
    JoinGroupResponse::default()
        .with_error_code(codes::code(resp.error.map(codes::group_error)))
        .with_generation_id(resp.generation_id)
        .with_protocol_type(resp.protocol_type.map(s))
        .with_protocol_name(resp.protocol_name.map(s))
        .with_leader(s(resp.leader))
        .with_member_id(s(resp.member_id))
        .with_skip_assignment(resp.skip_assignment)
        .with_members(
            resp.members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(s(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(s))
                        .with_metadata(m.metadata)
                })
                .collect(),
        )
}

pub(super) async fn sync_group(
    b: &Broker,
    ctx: &RequestContext,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    if !may(b, ctx, AclOperation::Read, req.group_id.as_str()) {
        return SyncGroupResponse::default().with_error_code(REFUSED.code());
    }
    let sync = SyncRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        group_instance_id: opt(req.group_instance_id),
        generation_id: req.generation_id,
        protocol_type: opt(req.protocol_type),
        protocol_name: opt(req.protocol_name),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| {
                (
                    a.member_id.to_string(),
                    Bytes::copy_from_slice(&a.assignment),
                )
            })
            .collect(),
    };
    match b.node.groups.sync(sync).await {
        Ok(r) => SyncGroupResponse::default()
            .with_error_code(codes::code(r.error.map(codes::group_error)))
            .with_protocol_type(r.protocol_type.map(s))
            .with_protocol_name(r.protocol_name.map(s))
            .with_assignment(r.assignment),
        Err(_) => SyncGroupResponse::default().with_error_code(GONE.code()),
    }
}

pub(super) async fn heartbeat(
    b: &Broker,
    ctx: &RequestContext,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    if !may(b, ctx, AclOperation::Read, req.group_id.as_str()) {
        return HeartbeatResponse::default().with_error_code(REFUSED.code());
    }
    let code = match b
        .node
        .groups
        .heartbeat(
            req.group_id.to_string(),
            req.member_id.to_string(),
            opt(req.group_instance_id),
            req.generation_id,
        )
        .await
    {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => codes::group_error(e).code(),
        Err(_) => GONE.code(),
    };
    HeartbeatResponse::default().with_error_code(code)
}

pub(super) async fn leave_group(
    b: &Broker,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    if !may(b, ctx, AclOperation::Read, req.group_id.as_str()) {
        return LeaveGroupResponse::default().with_error_code(REFUSED.code());
    }
    let batched = ctx.api_version >= 3;
    let members: Vec<(String, Option<String>)> = if batched {
        req.members
            .iter()
            .map(|m| (m.member_id.to_string(), opt(m.group_instance_id.clone())))
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let results = match b
        .node
        .groups
        .leave(req.group_id.to_string(), members.clone())
        .await
    {
        Ok(r) => r,
        Err(_) => return LeaveGroupResponse::default().with_error_code(GONE.code()),
    };
    if !batched {
        let code = results
            .first()
            .and_then(|r| r.err())
            .map(|e| codes::group_error(e).code())
            .unwrap_or(0);
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let responses = members
        .into_iter()
        .zip(results)
        .map(|((member, instance), r)| {
            MemberResponse::default()
                .with_member_id(s(member))
                .with_group_instance_id(instance.map(s))
                .with_error_code(r.err().map(|e| codes::group_error(e).code()).unwrap_or(0))
        })
        .collect();
    LeaveGroupResponse::default().with_members(responses)
}

pub(super) async fn describe_groups(
    b: &Broker,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut groups = Vec::new();
    for g in req.groups {
        let name = g.to_string();
        let base = DescribedGroup::default()
            .with_group_id(g)
            .with_authorized_operations(i32::MIN);
        if !may(b, ctx, AclOperation::Describe, &name) {
            groups.push(base.with_error_code(REFUSED.code()));
            continue;
        }
        let d = match admin::describe_group(&b.node, &name).await {
            Ok(d) if d.here => d,
            Ok(_) => {
                groups.push(base.with_error_code(ResponseError::NotCoordinator.code()));
                continue;
            }
            Err(_) => {
                groups.push(base.with_error_code(GONE.code()));
                continue;
            }
        };
        // KIP-430 (v3+), for a group the client may describe
        let operations = if ctx.api_version >= 3 && req.include_authorized_operations {
            super::metadata::authorized(b, ctx, &GROUP_OPERATIONS, ResourceType::Group, &name)
        } else {
            i32::MIN
        };
        let entry = base
            .with_authorized_operations(operations)
            .with_group_state(s(d.state))
            .with_protocol_type(s(d.protocol_type))
            .with_protocol_data(s(d.protocol))
            .with_members(
                d.members
                    .into_iter()
                    .map(|m| {
                        DescribedGroupMember::default()
                            .with_member_id(s(m.member_id))
                            .with_group_instance_id(m.group_instance_id.map(s))
                            .with_client_id(s(m.client_id))
                            .with_client_host(s(m.client_host))
                            .with_member_metadata(m.metadata)
                            .with_member_assignment(m.assignment)
                    })
                    .collect(),
            );
        groups.push(entry);
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

pub(super) async fn list_groups(
    b: &Broker,
    ctx: &RequestContext,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let all = match admin::list_groups(&b.node).await {
        Ok(l) => l,
        Err(_) => return ListGroupsResponse::default().with_error_code(GONE.code()),
    };
    let here = all.into_iter().filter(|g| g.here);
    ListGroupsResponse::default().with_groups(listed(b, ctx, &req, here))
}

/// The groups of `all` that ListGroups lists: in a state the client asked
/// for, and that it may describe.
pub(super) fn listed(
    b: &Broker,
    ctx: &RequestContext,
    req: &ListGroupsRequest,
    all: impl IntoIterator<Item = admin::ListedGroup>,
) -> Vec<ListedGroup> {
    // Kafka: DESCRIBE on the cluster lists every group, else those the
    // client may describe
    let every = ctx.may_on_cluster(b, AclOperation::Describe);
    let states: Vec<String> = req.states_filter.iter().map(|x| x.to_string()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|x| x.to_string()).collect();
    all.into_iter()
        .filter(|g| states.is_empty() || states.iter().any(|f| f.eq_ignore_ascii_case(&g.state)))
        .filter(|g| types.is_empty() || types.iter().any(|f| f.eq_ignore_ascii_case(&g.group_type)))
        .filter(|g| every || may(b, ctx, AclOperation::Describe, &g.group_id))
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(s(g.group_id)))
                .with_protocol_type(s(g.protocol_type))
                .with_group_state(s(g.state))
                .with_group_type(s(g.group_type))
        })
        .collect()
}

pub(super) async fn delete_groups(
    b: &Broker,
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::new();
    for g in req.groups_names {
        let name = g.to_string();
        if !may(b, ctx, AclOperation::Delete, &name) {
            results.push(
                DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(REFUSED.code()),
            );
            continue;
        }
        let has_offsets = b.node.catalog.groups().contains(&name);
        let code = match b.node.groups.delete(name.clone()).await {
            Err(_) => GONE.code(),
            Ok(Ok(d)) if !d.had_state && !has_offsets => ResponseError::GroupIdNotFound.code(),
            Ok(Ok(d)) => match b.node.catalog.delete_group(&name, Some(d.fence)).await {
                Ok(()) | Err(metastore::MetaError::GroupIdNotFound { .. }) => 0,
                Err(e) => codes::meta_error(&e).code(),
            },
            Ok(Err(e)) => codes::group_error(e).code(),
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
