//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics (and a
//! read-only view of the broker's own settings). One broker config can be
//! altered, on any agent for any agent: `aerostream.draining` (true moves
//! the agent's replicas to other agents, see `metastore/src/balance.rs`).

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::topics::{source_number, SOURCE_DEFAULT, SOURCE_TOPIC};
use super::{msg, s, RequestContext};
use crate::broker::Broker;
use crate::codes;
use dataplane::topic_config::{self, ConfigType};
use metastore::acl::{AclOperation, ResourceType};
use metastore::{ClusterControl, ConfigOp, MetaError, Topics};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SOURCE_STATIC_BROKER: i8 = 4;
/// The broker config that drains an agent.
pub const DRAINING: &str = "aerostream.draining";

fn broker_configs(b: &Broker) -> Vec<(&'static str, String, ConfigType)> {
    let c = &b.config;
    vec![
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            ConfigType::Boolean,
        ),
        ("broker.id", c.node_id.to_string(), ConfigType::Int),
        (
            "connections.max.idle.ms",
            c.connections.idle_timeout.as_millis().to_string(),
            ConfigType::Long,
        ),
        (
            "default.replication.factor",
            b.node.default_replication_factor().to_string(),
            ConfigType::Int,
        ),
        (
            "fetch.max.bytes",
            c.fetch_max_bytes.to_string(),
            ConfigType::Int,
        ),
        (
            "group.initial.rebalance.delay.ms",
            c.group.initial_rebalance_delay_ms.to_string(),
            ConfigType::Int,
        ),
        (
            "group.max.session.timeout.ms",
            c.group.max_session_timeout_ms.to_string(),
            ConfigType::Int,
        ),
        (
            "group.min.session.timeout.ms",
            c.group.min_session_timeout_ms.to_string(),
            ConfigType::Int,
        ),
        (
            "max.connections",
            c.connections.max_connections.to_string(),
            ConfigType::Int,
        ),
        (
            "max.connections.per.ip",
            c.connections.max_connections_per_ip.to_string(),
            ConfigType::Int,
        ),
        (
            "num.partitions",
            c.num_partitions.to_string(),
            ConfigType::Int,
        ),
        (
            "queued.max.request.bytes",
            c.connections.queued_max_request_bytes.to_string(),
            ConfigType::Long,
        ),
        (
            "socket.request.max.bytes",
            c.max_request_bytes.to_string(),
            ConfigType::Int,
        ),
        (
            "write.caching",
            c.log_defaults.write_caching.to_string(),
            ConfigType::Boolean,
        ),
    ]
}

/// A topic created through another agent a moment ago may not have reached
/// this agent's metastore replica yet. Rather than answer
/// UNKNOWN_TOPIC_OR_PARTITION for it (which admin clients do not retry),
/// this waits, at most one agent lease, until the replica has applied every
/// write acknowledged before the request arrived.
async fn catch_up_on_unknown_topics(b: &Broker, req: &DescribeConfigsRequest) {
    let catalog = &b.node.catalog;
    let unknown = req.resources.iter().any(|r| {
        r.resource_type == RESOURCE_TOPIC && catalog.topic(r.resource_name.as_str()).is_none()
    });
    if unknown {
        if let Ok(Err(e)) =
            tokio::time::timeout(catalog.agent_lease(), catalog.linearizable_barrier()).await
        {
            tracing::debug!(error = %e, "could not catch up with the metastore before describing configs");
        }
    }
}

fn wanted(keys: &Option<Vec<StrBytes>>, name: &str) -> bool {
    keys.as_ref()
        .is_none_or(|k| k.is_empty() || k.iter().any(|x| x.as_str() == name))
}

/// The error when the client may not `operation` the configs of a topic
/// (TOPIC resource) or of a broker (the CLUSTER resource, as in Kafka).
fn refused(
    b: &Broker,
    ctx: &RequestContext,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<ResponseError> {
    match resource_type {
        RESOURCE_TOPIC => (!ctx.may(b, operation, ResourceType::Topic, name))
            .then_some(ResponseError::TopicAuthorizationFailed),
        RESOURCE_BROKER => {
            (!ctx.may_on_cluster(b, operation)).then_some(ResponseError::ClusterAuthorizationFailed)
        }
        _ => None,
    }
}

pub(super) async fn describe_configs(
    b: &Broker,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let v = ctx.api_version;
    catch_up_on_unknown_topics(b, &req).await;
    let mut results = Vec::new();
    for r in req.resources {
        let result = DescribeConfigsResult::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        let entry =
            |name: &str, value: &str, source: i8, kind: ConfigType, default: Option<&str>| {
                let mut synonyms = Vec::new();
                if req.include_synonyms && v >= 1 {
                    if source == SOURCE_TOPIC {
                        synonyms.push(
                            DescribeConfigsSynonym::default()
                                .with_name(s(name))
                                .with_value(Some(s(value)))
                                .with_source(source),
                        );
                    }
                    if let Some(d) = default {
                        synonyms.push(
                            DescribeConfigsSynonym::default()
                                .with_name(s(name))
                                .with_value(Some(s(d)))
                                .with_source(SOURCE_DEFAULT),
                        );
                    }
                }
                DescribeConfigsResourceResult::default()
                    .with_name(s(name))
                    .with_value(Some(s(value)))
                    .with_read_only(source == SOURCE_STATIC_BROKER)
                    .with_config_source(source)
                    .with_is_sensitive(false)
                    .with_config_type(kind.kafka_code())
                    .with_synonyms(synonyms)
            };
        let name = r.resource_name.as_str();
        if let Some(e) = refused(b, ctx, AclOperation::DescribeConfigs, r.resource_type, name) {
            results.push(result.with_error_code(e.code()));
            continue;
        }
        match r.resource_type {
            RESOURCE_TOPIC => {
                let Some(topic) = b.node.catalog.topic(r.resource_name.as_str()) else {
                    results.push(
                        result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(s(format!(
                                "topic '{}' does not exist",
                                r.resource_name.as_str()
                            )))),
                    );
                    continue;
                };
                let configs = dataplane::topics::topic_configs(&b.node, &topic)
                    .into_iter()
                    .filter(|c| wanted(&r.configuration_keys, c.name))
                    .map(|c| {
                        entry(
                            c.name,
                            &c.value,
                            source_number(c.source),
                            c.kind,
                            Some(&c.default),
                        )
                    })
                    .collect();
                results.push(result.with_configs(configs));
            }
            RESOURCE_BROKER => {
                let name = r.resource_name.as_str();
                if !name.is_empty() && name != b.config.node_id.to_string() {
                    results.push(
                        result
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_error_message(Some(s(format!(
                                "this is broker {}",
                                b.config.node_id
                            )))),
                    );
                    continue;
                }
                let configs = broker_configs(b)
                    .into_iter()
                    .filter(|(k, _, _)| wanted(&r.configuration_keys, k))
                    .map(|(k, val, kind)| entry(k, &val, SOURCE_STATIC_BROKER, kind, None))
                    .collect();
                results.push(result.with_configs(configs));
            }
            other => results.push(
                result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(s(format!(
                        "resource type {other} has no configs here"
                    )))),
            ),
        }
    }
    DescribeConfigsResponse::default().with_results(results)
}

/// Applies config changes to one topic and pushes the new settings to its partitions.
async fn alter_topic(
    b: &Broker,
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    ops: Result<Vec<ConfigOp>, MetaError>,
    replace_all: bool,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    if let Some(e) = refused(b, ctx, AclOperation::AlterConfigs, resource_type, name) {
        return (e.code(), None);
    }
    if resource_type == RESOURCE_BROKER {
        return alter_broker(b, name, ops, validate_only).await;
    }
    if resource_type != RESOURCE_TOPIC {
        return (
            ResponseError::InvalidRequest.code(),
            Some(s(
                "only topic configs can be altered; broker settings are static",
            )),
        );
    }
    let result = match ops {
        Ok(ops) => {
            b.node
                .catalog
                .alter_topic_configs(name, ops, replace_all, validate_only)
                .await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(meta) => {
            if !validate_only {
                b.node
                    .partitions
                    .update_settings(
                        meta.id,
                        &topic_config::log_settings(&meta.configs, &b.config.log_defaults),
                    )
                    .await;
            }
            (0, None)
        }
        Err(e) => (codes::meta_error(&e).code(), msg(&e)),
    }
}

/// Starts or stops draining agent `name`; every other broker config is static.
async fn alter_broker(
    b: &Broker,
    name: &str,
    ops: Result<Vec<ConfigOp>, MetaError>,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let invalid = |code: ResponseError, why: String| (code.code(), Some(s(why)));
    let Some(agent) = name
        .parse::<u64>()
        .ok()
        .filter(|id| b.node.catalog.agents().iter().any(|a| a.id == *id))
    else {
        return invalid(
            ResponseError::InvalidRequest,
            format!("'{name}' names no registered agent"),
        );
    };
    let ops = match ops {
        Ok(ops) => ops,
        Err(e) => return (codes::meta_error(&e).code(), msg(&e)),
    };
    let mut draining = None;
    for op in ops {
        draining = Some(match op {
            ConfigOp::Set(k, v) if k == DRAINING => match v.as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return invalid(
                        ResponseError::InvalidConfig,
                        format!("{DRAINING} is true or false, not '{v}'"),
                    )
                }
            },
            ConfigOp::Delete(k) if k == DRAINING => false,
            other => {
                return invalid(
                    ResponseError::InvalidConfig,
                    format!(
                        "broker settings are static; only {DRAINING} can be set, not {other:?}"
                    ),
                )
            }
        });
    }
    let Some(draining) = draining.filter(|_| !validate_only) else {
        return (0, None);
    };
    match b.node.catalog.set_draining(agent, draining).await {
        Ok(_) => {
            tracing::info!(agent, draining, "agent draining changed");
            (0, None)
        }
        Err(e) => (codes::meta_error(&e).code(), msg(&e)),
    }
}

pub(super) async fn alter_configs(
    b: &Broker,
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::new();
    for r in req.resources {
        let ops = r
            .configs
            .iter()
            .map(|c| match &c.value {
                Some(v) => Ok(ConfigOp::Set(c.name.to_string(), v.to_string())),
                None => Ok(ConfigOp::Delete(c.name.to_string())),
            })
            .collect();
        let (code, message) = alter_topic(
            b,
            ctx,
            r.resource_type,
            r.resource_name.as_str(),
            ops,
            true,
            req.validate_only,
        )
        .await;
        responses.push(
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

pub(super) async fn incremental_alter_configs(
    b: &Broker,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::new();
    for r in req.resources {
        let topic = r.resource_name.to_string();
        // APPEND and SUBTRACT are applied by the metastore to the value it
        // holds, in the same write, so concurrent changes cannot lose one.
        let ops: Result<Vec<ConfigOp>, MetaError> = r
            .configs
            .iter()
            .map(|c| {
                let key = c.name.to_string();
                let value = c.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
                match c.config_operation {
                    0 => Ok(ConfigOp::Set(key, value)),
                    1 => Ok(ConfigOp::Delete(key)),
                    2 => Ok(ConfigOp::Append(key, value)),
                    3 => Ok(ConfigOp::Subtract(key, value)),
                    op => Err(MetaError::InvalidConfig {
                        key,
                        reason: format!("unknown operation {op}"),
                    }),
                }
            })
            .collect();
        let (code, message) = alter_topic(
            b,
            ctx,
            r.resource_type,
            &topic,
            ops,
            false,
            req.validate_only,
        )
        .await;
        responses.push(
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
