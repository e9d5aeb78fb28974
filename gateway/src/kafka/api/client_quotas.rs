//! DescribeClientQuotas and AlterClientQuotas (KIP-546): the quotas
//! [`security::quota`] enforces, per user, client id or both, kept in the
//! metastore. Reading needs DESCRIBE_CONFIGS on the cluster and changing
//! ALTER_CONFIGS, as in Kafka.

use kafka_protocol::messages::alter_client_quotas_request::EntityData as AlterEntity;
use kafka_protocol::messages::{
    alter_client_quotas_response, describe_client_quotas_response, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::ResponseError;
use metastore::quota::{EntityName, QuotaEntity, QuotaOps, QuotaValue, CLIENT_ID, USER};
use metastore::{acl::AclOperation, Security};

use super::{s, RequestContext};
use crate::broker::Broker;
use crate::codes;

/// The entity an AlterClientQuotas entry names.
fn entity_of(parts: &[AlterEntity]) -> Result<QuotaEntity, String> {
    let mut e = QuotaEntity {
        user: None,
        client_id: None,
    };
    for p in parts {
        let name = Some(EntityName::from_wire(p.entity_name.as_deref()));
        let side = match p.entity_type.as_str() {
            USER => &mut e.user,
            CLIENT_ID => &mut e.client_id,
            other => {
                return Err(format!(
                    "entity type {other} is not supported: use {USER} or {CLIENT_ID}"
                ))
            }
        };
        if side.is_some() {
            return Err(format!(
                "entity type {} is named twice",
                p.entity_type.as_str()
            ));
        }
        *side = name;
    }
    match e.invalid() {
        Some(why) => Err(why),
        None => Ok(e),
    }
}

fn wire_entity(e: &QuotaEntity) -> Vec<(&'static str, Option<String>)> {
    let mut out = Vec::new();
    if let Some(u) = &e.user {
        out.push((USER, u.to_wire().map(str::to_string)));
    }
    if let Some(c) = &e.client_id {
        out.push((CLIENT_ID, c.to_wire().map(str::to_string)));
    }
    out
}

pub(super) async fn alter_client_quotas(
    b: &Broker,
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let answer = |parts: &[AlterEntity], code: i16, why: Option<String>| {
        alter_client_quotas_response::EntryData::default()
            .with_error_code(code)
            .with_error_message(why.map(s))
            .with_entity(
                parts
                    .iter()
                    .map(|p| {
                        alter_client_quotas_response::EntityData::default()
                            .with_entity_type(p.entity_type.clone())
                            .with_entity_name(p.entity_name.clone())
                    })
                    .collect(),
            )
    };
    if !ctx.may_on_cluster(b, AclOperation::AlterConfigs) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let entries = req
            .entries
            .iter()
            .map(|e| answer(&e.entity, code, None))
            .collect();
        return AlterClientQuotasResponse::default().with_entries(entries);
    }
    // checked here, so one bad entry does not fail the others' write
    let parsed: Vec<Result<(QuotaEntity, QuotaOps), String>> = req
        .entries
        .iter()
        .map(|e| {
            let entity = entity_of(&e.entity)?;
            let mut ops = Vec::with_capacity(e.ops.len());
            for op in &e.ops {
                let key = op.key.to_string();
                if !op.remove {
                    if let Some(why) = metastore::quota::invalid_value(&key, op.value) {
                        return Err(why);
                    }
                } else if !metastore::quota::KEYS.contains(&key.as_str()) {
                    return Err(format!("quota {key} is not supported"));
                }
                ops.push((key, (!op.remove).then_some(QuotaValue(op.value))));
            }
            Ok((entity, ops))
        })
        .collect();
    let valid: Vec<_> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .cloned()
        .collect();
    let mut written = if req.validate_only || valid.is_empty() {
        Vec::new().into_iter()
    } else {
        match b.node.catalog.alter_client_quotas(valid).await {
            Ok(r) => r.into_iter(),
            Err(e) => {
                let code = codes::meta_error(&e).code();
                let entries = req
                    .entries
                    .iter()
                    .map(|x| answer(&x.entity, code, Some(e.to_string())))
                    .collect();
                return AlterClientQuotasResponse::default().with_entries(entries);
            }
        }
    };
    let entries = req
        .entries
        .iter()
        .zip(parsed)
        .map(|(e, p)| match p {
            Err(why) => answer(&e.entity, ResponseError::InvalidRequest.code(), Some(why)),
            Ok(_) if req.validate_only => answer(&e.entity, 0, None),
            Ok((entity, ops)) => match written.next() {
                Some(Ok(())) => {
                    tracing::info!(?entity, ?ops, principal = %ctx.principal, "client quota altered");
                    answer(&e.entity, 0, None)
                }
                Some(Err(err)) => answer(
                    &e.entity,
                    codes::meta_error(&err).code(),
                    Some(err.to_string()),
                ),
                None => answer(
                    &e.entity,
                    ResponseError::UnknownServerError.code(),
                    Some("the metastore returned fewer results than entries".into()),
                ),
            },
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// Whether one side of an entity passes a filter component (match type 0:
/// this name, 1: the default, 2: any given name or the default).
fn side_matches(side: &Option<EntityName>, match_type: i8, name: Option<&str>) -> bool {
    match (side, match_type) {
        (None, _) => false,
        (Some(n), 0) => name.is_some_and(|want| n == &EntityName::Named(want.to_string())),
        (Some(n), 1) => n == &EntityName::Default,
        (Some(_), 2) => true,
        _ => false,
    }
}

pub(super) fn describe_client_quotas(
    b: &Broker,
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let failed = |code: ResponseError, why: String| {
        DescribeClientQuotasResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(s(why)))
            .with_entries(None)
    };
    if !ctx.may_on_cluster(b, AclOperation::DescribeConfigs) {
        return failed(
            ResponseError::ClusterAuthorizationFailed,
            "DESCRIBE_CONFIGS on the cluster is needed to read quotas".into(),
        );
    }
    for c in &req.components {
        if ![USER, CLIENT_ID].contains(&c.entity_type.as_str()) {
            return failed(
                ResponseError::InvalidRequest,
                format!("entity type {} is not supported", c.entity_type.as_str()),
            );
        }
        if !(0..=2).contains(&c.match_type) {
            return failed(
                ResponseError::InvalidRequest,
                format!("match type {} is not defined", c.match_type),
            );
        }
    }
    let table = b.node.catalog.client_quotas();
    let entries = table
        .iter()
        .filter(|(e, _)| {
            let passes = req.components.iter().all(|c| {
                let side = if c.entity_type.as_str() == USER {
                    &e.user
                } else {
                    &e.client_id
                };
                side_matches(side, c.match_type, c._match.as_deref())
            });
            // strict: the entity has no type the filter does not name
            let named = |t: &str| req.components.iter().any(|c| c.entity_type.as_str() == t);
            let extra =
                (e.user.is_some() && !named(USER)) || (e.client_id.is_some() && !named(CLIENT_ID));
            passes && !(req.strict && extra)
        })
        .map(|(e, values)| {
            describe_client_quotas_response::EntryData::default()
                .with_entity(
                    wire_entity(e)
                        .into_iter()
                        .map(|(t, n)| {
                            describe_client_quotas_response::EntityData::default()
                                .with_entity_type(s(t))
                                .with_entity_name(n.map(s))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(k, v)| {
                            describe_client_quotas_response::ValueData::default()
                                .with_key(s(k.clone()))
                                .with_value(v.0)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}
