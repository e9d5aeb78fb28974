//! CreateTopics, DeleteTopics and CreatePartitions.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::{msg, s, RequestContext};
use crate::broker::Broker;
use crate::codes;
use dataplane::topics::{ConfigSource, NewTopic};
use metastore::acl::{AclOperation, ResourceType};
use metastore::{TopicInfo, Topics};

/// Config source numbers of DescribeConfigs/CreateTopics.
pub(super) const SOURCE_TOPIC: i8 = 1;
pub(super) const SOURCE_DEFAULT: i8 = 5;

fn all_configs(b: &Broker, t: &TopicInfo) -> Vec<CreatableTopicConfigs> {
    dataplane::topics::topic_configs(&b.node, t)
        .into_iter()
        .map(|c| {
            CreatableTopicConfigs::default()
                .with_name(s(c.name))
                .with_value(Some(s(c.value)))
                .with_config_source(source_number(c.source))
        })
        .collect()
}

/// The DescribeConfigs/CreateTopics number of a config source.
pub(super) fn source_number(source: ConfigSource) -> i8 {
    match source {
        ConfigSource::Topic => SOURCE_TOPIC,
        ConfigSource::Default => SOURCE_DEFAULT,
    }
}

/// A CreateTopics entry's replica assignments (Kafka's `assignments`),
/// ordered by partition; empty when it has none. Partition and
/// replica counts may be given alongside only when they agree.
fn explicit_assignments(
    t: &kafka_protocol::messages::create_topics_request::CreatableTopic,
) -> Result<Vec<Vec<metastore::AgentId>>, String> {
    if t.assignments.is_empty() {
        return Ok(Vec::new());
    }
    let n = t.assignments.len();
    if t.num_partitions != -1 && usize::try_from(t.num_partitions) != Ok(n) {
        return Err(format!(
            "{} partitions asked with assignments for {n}",
            t.num_partitions
        ));
    }
    let mut out = vec![None; n];
    for a in &t.assignments {
        let slot = usize::try_from(a.partition_index)
            .ok()
            .and_then(|i| out.get_mut(i))
            .ok_or_else(|| format!("partition {} is outside 0..{n}", a.partition_index))?;
        if slot.is_some() {
            return Err(format!("partition {} is assigned twice", a.partition_index));
        }
        let replicas: Option<Vec<metastore::AgentId>> = a
            .broker_ids
            .iter()
            .map(|b| metastore::AgentId::try_from(b.0).ok())
            .collect();
        *slot = Some(replicas.ok_or("agent ids are not negative")?);
    }
    let out: Vec<Vec<metastore::AgentId>> = out.into_iter().flatten().collect();
    let rf = out.first().map_or(0, Vec::len);
    if t.replication_factor != -1 && usize::try_from(t.replication_factor) != Ok(rf) {
        return Err(format!(
            "replication factor {} asked with assignments of {rf} replicas",
            t.replication_factor
        ));
    }
    Ok(out)
}

pub(super) async fn create_topics(
    b: &Broker,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut results = Vec::new();
    // Kafka: CREATE on the cluster allows every topic, else each topic's own
    let on_cluster = ctx.may_on_cluster(b, AclOperation::Create);
    for t in req.topics {
        let name = t.name.to_string();
        let result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        if !on_cluster && !ctx.may(b, AclOperation::Create, ResourceType::Topic, &name) {
            results.push(result.with_error_code(ResponseError::TopicAuthorizationFailed.code()));
            continue;
        }
        let assignments = match explicit_assignments(&t) {
            Ok(a) => a,
            Err(why) => {
                results.push(
                    result
                        .with_error_code(ResponseError::InvalidReplicaAssignment.code())
                        .with_error_message(Some(s(why))),
                );
                continue;
            }
        };
        let partitions = (t.num_partitions != -1).then_some(t.num_partitions);
        let replication_factor = (t.replication_factor != -1).then_some(t.replication_factor);
        let mut configs = BTreeMap::new();
        let mut null_value = None;
        for c in t.configs {
            match c.value {
                Some(v) => {
                    configs.insert(c.name.to_string(), v.to_string());
                }
                None => null_value = Some(c.name.to_string()),
            }
        }
        if let Some(key) = null_value {
            results.push(
                result
                    .with_error_code(ResponseError::InvalidConfig.code())
                    .with_error_message(Some(s(format!("config {key} has a null value")))),
            );
            continue;
        }
        let spec = NewTopic {
            name,
            partitions,
            replication_factor,
            configs,
            assignments,
        };
        match dataplane::topics::create_topic(&b.node, spec, req.validate_only).await {
            Ok(created) => {
                let meta = created.topic;
                results.push(
                    result
                        .with_topic_id(meta.id)
                        .with_num_partitions(meta.partitions.len() as i32)
                        .with_replication_factor(created.replication_factor)
                        .with_configs(Some(all_configs(b, &meta))),
                );
            }
            Err(e) => results.push(
                result
                    .with_error_code(codes::meta_error(&e).code())
                    .with_error_message(msg(&e)),
            ),
        }
    }
    CreateTopicsResponse::default().with_topics(results)
}

pub(super) async fn delete_topics(
    b: &Broker,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<String>, uuid::Uuid)> = if ctx.api_version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut responses = Vec::new();
    for (name, id) in wanted {
        let meta = match &name {
            Some(n) => b.node.catalog.topic(n),
            None => b.node.catalog.topic_by_id(id),
        };
        let result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(s(n))))
            .with_topic_id(id);
        // by name, refused whether or not it exists; by id, once it is found
        let named = meta.as_ref().map(|m| m.name.as_str()).or(name.as_deref());
        if named.is_some_and(|n| !ctx.may(b, AclOperation::Delete, ResourceType::Topic, n)) {
            responses.push(result.with_error_code(ResponseError::TopicAuthorizationFailed.code()));
            continue;
        }
        let Some(meta) = meta else {
            let e = if name.is_some() {
                ResponseError::UnknownTopicOrPartition
            } else {
                ResponseError::UnknownTopicId
            };
            responses.push(result.with_error_code(e.code()));
            continue;
        };
        match dataplane::topics::delete_topic(&b.node, &meta).await {
            Ok(()) => {
                responses.push(
                    result
                        .with_name(Some(TopicName(s(meta.name.clone()))))
                        .with_topic_id(meta.id),
                );
            }
            Err(e) => responses.push(
                result
                    .with_error_code(codes::meta_error(&e).code())
                    .with_error_message(msg(&e)),
            ),
        }
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

pub(super) async fn create_partitions(
    b: &Broker,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::new();
    for t in req.topics {
        let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        if !ctx.may(b, AclOperation::Alter, ResourceType::Topic, t.name.as_str()) {
            results.push(result.with_error_code(ResponseError::TopicAuthorizationFailed.code()));
            continue;
        }
        match b
            .node
            .catalog
            .create_partitions(t.name.as_str(), t.count, req.validate_only)
            .await
        {
            Ok(_) => results.push(result),
            Err(e) => results.push(
                result
                    .with_error_code(codes::meta_error(&e).code())
                    .with_error_message(msg(&e)),
            ),
        }
    }
    CreatePartitionsResponse::default().with_results(results)
}
