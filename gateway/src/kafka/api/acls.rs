//! CreateAcls, DescribeAcls and DeleteAcls (KIP-140): the ACLs the
//! authorizer ([`security::authz`]) decides with, kept in the metastore.
//! Managing them needs ALTER on the cluster, reading them DESCRIBE, as in
//! Kafka; with authorization off they answer SECURITY_DISABLED.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use metastore::acl::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternFilter, PatternType, ResourceType,
};
use metastore::Security;

use super::{msg, s, RequestContext};
use crate::broker::Broker;
use crate::codes;

/// Why an ACL request is not served at all, with its message.
fn refused(b: &Broker, ctx: &RequestContext, operation: AclOperation) -> Option<(i16, String)> {
    if !b.config.authz.enabled {
        return Some((
            ResponseError::SecurityDisabled.code(),
            "authorization is off: turn on SASL or mutual TLS on the Kafka listener".into(),
        ));
    }
    (!ctx.may_on_cluster(b, operation)).then(|| {
        (
            ResponseError::ClusterAuthorizationFailed.code(),
            format!("{operation} on the cluster is needed to manage ACLs"),
        )
    })
}

/// A filter field: `None` for ANY, an error for UNKNOWN or a code Kafka
/// does not define.
fn filter_code<T>(code: i8, what: &str, parse: fn(i8) -> Option<T>) -> Result<Option<T>, String> {
    if code == 1 {
        return Ok(None);
    }
    parse(code)
        .map(Some)
        .ok_or_else(|| format!("{what} {code} is not a valid filter value"))
}

fn binding_of(
    c: &kafka_protocol::messages::create_acls_request::AclCreation,
) -> Result<AclBinding, String> {
    let field = |code: i8, what: &str| format!("{what} {code} cannot be created");
    let b = AclBinding {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or_else(|| field(c.resource_type, "resource type"))?,
        resource_name: c.resource_name.to_string(),
        pattern: PatternType::from_code(c.resource_pattern_type)
            .ok_or_else(|| field(c.resource_pattern_type, "pattern type"))?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: AclOperation::from_code(c.operation)
            .ok_or_else(|| field(c.operation, "operation"))?,
        permission: AclPermission::from_code(c.permission_type)
            .ok_or_else(|| field(c.permission_type, "permission type"))?,
    };
    match b.invalid() {
        Some(why) => Err(why),
        None => Ok(b),
    }
}

pub(super) async fn create_acls(
    b: &Broker,
    ctx: &RequestContext,
    req: CreateAclsRequest,
) -> CreateAclsResponse {
    let failed = |code: i16, why: String| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(Some(s(why)))
    };
    if let Some((code, why)) = refused(b, ctx, AclOperation::Alter) {
        let results = req
            .creations
            .iter()
            .map(|_| failed(code, why.clone()))
            .collect();
        return CreateAclsResponse::default().with_results(results);
    }
    let parsed: Vec<Result<AclBinding, String>> = req.creations.iter().map(binding_of).collect();
    let valid: Vec<AclBinding> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .cloned()
        .collect();
    let mut written = match b.node.catalog.create_acls(valid).await {
        Ok(r) => r.into_iter(),
        Err(e) => {
            let code = codes::meta_error(&e).code();
            let results = parsed.iter().map(|_| failed(code, e.to_string())).collect();
            return CreateAclsResponse::default().with_results(results);
        }
    };
    let results = parsed
        .into_iter()
        .map(|p| match p {
            Err(why) => failed(ResponseError::InvalidRequest.code(), why),
            Ok(binding) => match written.next() {
                Some(Ok(())) => {
                    tracing::info!(?binding, principal = %ctx.principal, "ACL created");
                    AclCreationResult::default()
                }
                Some(Err(e)) => failed(codes::meta_error(&e).code(), e.to_string()),
                None => failed(
                    ResponseError::UnknownServerError.code(),
                    "the metastore returned fewer results than bindings".into(),
                ),
            },
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

/// The filter a DescribeAcls or DeleteAcls request holds.
fn filter_of(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    Ok(AclFilter {
        resource_type: filter_code(resource_type, "resource type", ResourceType::from_code)?,
        resource_name: name.map(|n| n.to_string()),
        pattern: PatternFilter::from_code(pattern)
            .ok_or_else(|| format!("pattern type {pattern} is not a valid filter value"))?,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation: filter_code(operation, "operation", AclOperation::from_code)?,
        permission: filter_code(permission, "permission type", AclPermission::from_code)?,
    })
}

pub(super) fn describe_acls(
    b: &Broker,
    ctx: &RequestContext,
    req: DescribeAclsRequest,
) -> DescribeAclsResponse {
    if let Some((code, why)) = refused(b, ctx, AclOperation::Describe) {
        return DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(s(why)));
    }
    let filter = match filter_of(
        req.resource_type_filter,
        req.resource_name_filter.as_ref(),
        req.pattern_type_filter,
        req.principal_filter.as_ref(),
        req.host_filter.as_ref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => {
            return DescribeAclsResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(msg(&why))
        }
    };
    // grouped by resource pattern, as Kafka answers
    let mut by_resource: BTreeMap<(ResourceType, String, PatternType), Vec<AclDescription>> =
        BTreeMap::new();
    for a in b.node.catalog.acls(&filter) {
        by_resource
            .entry((a.resource_type, a.resource_name, a.pattern))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(s(a.principal))
                    .with_host(s(a.host))
                    .with_operation(a.operation.code())
                    .with_permission_type(a.permission.code()),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((t, name, pattern), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(t.code())
                .with_resource_name(s(name))
                .with_pattern_type(pattern.code())
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

fn delete_filter(f: &DeleteAclsFilter) -> Result<AclFilter, String> {
    filter_of(
        f.resource_type_filter,
        f.resource_name_filter.as_ref(),
        f.pattern_type_filter,
        f.principal_filter.as_ref(),
        f.host_filter.as_ref(),
        f.operation,
        f.permission_type,
    )
}

pub(super) async fn delete_acls(
    b: &Broker,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let failed = |code: i16, why: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(s(why)))
    };
    if let Some((code, why)) = refused(b, ctx, AclOperation::Alter) {
        let results = req
            .filters
            .iter()
            .map(|_| failed(code, why.clone()))
            .collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    }
    let parsed: Vec<Result<AclFilter, String>> = req.filters.iter().map(delete_filter).collect();
    let valid: Vec<AclFilter> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .cloned()
        .collect();
    let mut deleted = match b.node.catalog.delete_acls(valid).await {
        Ok(r) => r.into_iter(),
        Err(e) => {
            let code = codes::meta_error(&e).code();
            let results = parsed.iter().map(|_| failed(code, e.to_string())).collect();
            return DeleteAclsResponse::default().with_filter_results(results);
        }
    };
    let results = parsed
        .into_iter()
        .map(|p| match p {
            Err(why) => failed(ResponseError::InvalidRequest.code(), why),
            Ok(_) => match deleted.next() {
                Some(Ok(gone)) => {
                    for binding in &gone {
                        tracing::info!(?binding, principal = %ctx.principal, "ACL deleted");
                    }
                    DeleteAclsFilterResult::default().with_matching_acls(
                        gone.into_iter()
                            .map(|a| {
                                DeleteAclsMatchingAcl::default()
                                    .with_resource_type(a.resource_type.code())
                                    .with_resource_name(s(a.resource_name))
                                    .with_pattern_type(a.pattern.code())
                                    .with_principal(s(a.principal))
                                    .with_host(s(a.host))
                                    .with_operation(a.operation.code())
                                    .with_permission_type(a.permission.code())
                            })
                            .collect(),
                    )
                }
                Some(Err(e)) => failed(codes::meta_error(&e).code(), e.to_string()),
                None => failed(
                    ResponseError::UnknownServerError.code(),
                    "the metastore returned fewer results than filters".into(),
                ),
            },
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
