//! `/v1/topics`: list, create, describe and delete topics, authorized as
//! the Kafka APIs that do the same are: Metadata (DESCRIBE on the topic;
//! the list leaves out topics the caller may not describe), CreateTopics
//! (CREATE on the cluster or the topic), DescribeConfigs (DESCRIBE_CONFIGS,
//! else no configs are shown) and DeleteTopics (DELETE on the topic).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use metastore::{TopicInfo, Topics};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ErrorBody};
use crate::broker::Broker;
use crate::http::extension::HttpState;
use crate::http::Caller;
use dataplane::node::Unavailable;
use dataplane::topics::{self, ConfigSource, NewTopic};
use metastore::acl::{AclOperation, ResourceType};

/// One topic of the list.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicSummary {
    pub name: String,
    pub id: String,
    pub partitions: u64,
    pub replication_factor: u64,
}

/// Most partitions a topic created through the REST API may have: the
/// answer lists every partition with its offsets, which for tens of
/// thousands of partitions takes longer than an HTTP client waits. Kafka's
/// CreateTopics takes up to `metastore::MAX_PARTITIONS_PER_TOPIC`.
pub const REST_MAX_PARTITIONS: i32 = 4096;

/// A topic to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTopicBody {
    pub name: String,
    /// Defaults to the broker's `num.partitions`; at most
    /// [`REST_MAX_PARTITIONS`] (larger topics through Kafka's CreateTopics).
    #[schema(maximum = 4096)]
    pub partitions: Option<i32>,
    /// Defaults to the broker's `default.replication.factor`.
    pub replication_factor: Option<i16>,
    /// Topic configs (Kafka's names, e.g. `retention.ms`).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// One partition and its offsets. The offsets are the leader's own when
/// this agent leads the partition; otherwise only the high watermark the
/// leader last recorded in the metastore is known.
#[derive(Debug, Serialize, ToSchema)]
pub struct PartitionView {
    pub partition: i32,
    pub leader: Option<u64>,
    pub leader_epoch: i32,
    pub replicas: Vec<u64>,
    pub isr: Vec<u64>,
    /// The first offset across tiers.
    pub log_start: Option<i64>,
    /// The first offset on the leader's local disk.
    pub local_log_start: Option<i64>,
    /// The first offset in object storage, when object storage holds
    /// offsets below the local start.
    pub tiered_start: Option<i64>,
    /// The next offset to be written.
    pub log_end: Option<i64>,
    /// What consumers may read up to (-1 before anything is known).
    pub high_watermark: i64,
    /// Bytes of record data on the leader's local disk (known only on the
    /// leader, like the offsets).
    pub local_bytes: Option<u64>,
    /// Bytes of the partition's segment objects in object storage, from
    /// the metastore (0 without tiered storage). A segment stays on local
    /// disk for `local.retention.*` after its upload, so the two overlap.
    pub tiered_bytes: u64,
    /// A compacted topic's partition: where compaction stands on the
    /// leader (known only there, like the offsets).
    pub cleaner: Option<CleanerInfo>,
    /// `leader` when the offsets are this agent's own, `metastore` when
    /// another agent leads the partition and only the recorded high
    /// watermark is known, `unavailable` when this agent leads it but its
    /// log cannot answer (offline after a failed write, say).
    pub offsets_from: String,
}

/// Compaction of one partition of a compacted topic.
#[derive(Debug, Serialize, ToSchema)]
pub struct CleanerInfo {
    /// Bytes of sealed segments written since their last compaction over
    /// the bytes of sealed segments (`min.cleanable.dirty.ratio` is
    /// compared with this).
    pub dirty_ratio: f64,
    pub dirty_bytes: u64,
    pub compactable_bytes: u64,
    /// Every offset below this was compacted at least once.
    pub compacted_below: u64,
    /// Compaction runs since the leader opened the log.
    pub runs: u64,
    /// Bytes and records compaction removed since the leader opened the log.
    pub bytes_removed: u64,
    pub records_removed: u64,
}

/// A topic config with its effective value.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConfigView {
    pub name: String,
    pub value: String,
    pub default: String,
    /// `topic` when set on the topic, else `default`.
    pub source: String,
}

/// A topic with its partitions and configs.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicDetail {
    pub name: String,
    pub id: String,
    pub partitions: Vec<PartitionView>,
    pub configs: Vec<ConfigView>,
}

fn summary(t: &TopicInfo) -> TopicSummary {
    TopicSummary {
        name: t.name.clone(),
        id: t.id.to_string(),
        partitions: t.partitions.len() as u64,
        replication_factor: t.partitions.first().map_or(0, |p| p.replicas.len()) as u64,
    }
}

/// The topic as the caller may see it: its configs only with
/// DESCRIBE_CONFIGS on it (as Kafka's CreateTopics answer shows them).
async fn detail(b: &Broker, caller: &Caller, t: &TopicInfo) -> Result<TopicDetail, ApiError> {
    let mut partitions = Vec::with_capacity(t.partitions.len());
    for p in &t.partitions {
        let mut view = PartitionView {
            partition: p.index,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            log_start: None,
            local_log_start: None,
            tiered_start: None,
            log_end: None,
            high_watermark: p.high_watermark,
            local_bytes: None,
            cleaner: None,
            tiered_bytes: topics::tiered_bytes(&b.node, t, p.index),
            offsets_from: "metastore".into(),
        };
        match topics::partition_offsets(&b.node, t, p.index).await {
            Ok(o) => {
                view.log_start = Some(o.log_start);
                view.local_log_start = Some(o.local_log_start);
                view.tiered_start = o.tiered_start;
                view.log_end = Some(o.log_end);
                view.high_watermark = o.high_watermark;
                view.local_bytes = Some(o.local_bytes);
                view.cleaner = o.cleaner.map(|c| CleanerInfo {
                    dirty_ratio: c.dirty_ratio,
                    dirty_bytes: c.dirty_bytes,
                    compactable_bytes: c.compactable_bytes,
                    compacted_below: c.compacted_below,
                    runs: c.runs,
                    bytes_removed: c.bytes_removed,
                    records_removed: c.records_removed,
                });
                view.offsets_from = "leader".into();
            }
            Err(Unavailable::NotLeader) => {}
            // One offline log leaves the rest of the topic readable.
            Err(e) => {
                tracing::warn!(topic = %t.name, partition = p.index, error = %e, "partition offsets unavailable");
                view.offsets_from = "unavailable".into();
            }
        }
        partitions.push(view);
    }
    let configs = if caller.may(
        b,
        AclOperation::DescribeConfigs,
        ResourceType::Topic,
        &t.name,
    ) {
        topics::topic_configs(&b.node, t)
    } else {
        Vec::new()
    };
    let configs = configs
        .into_iter()
        .map(|c| ConfigView {
            name: c.name.to_string(),
            value: c.value,
            default: c.default,
            source: match c.source {
                ConfigSource::Topic => "topic",
                ConfigSource::Default => "default",
            }
            .into(),
        })
        .collect();
    Ok(TopicDetail {
        name: t.name.clone(),
        id: t.id.to_string(),
        partitions,
        configs,
    })
}

/// Every topic the caller may describe, by name.
#[utoipa::path(
    get,
    path = "/v1/topics",
    tag = "topics",
    responses((status = 200, description = "The topics", body = Vec<TopicSummary>))
)]
pub async fn list_topics(State(st): State<HttpState>, caller: Caller) -> Json<Vec<TopicSummary>> {
    let b = &st.broker;
    let mut topics: Vec<TopicSummary> = b
        .node
        .catalog
        .topics()
        .iter()
        .filter(|t| caller.may(b, AclOperation::Describe, ResourceType::Topic, &t.name))
        .map(|t| summary(t))
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    Json(topics)
}

/// Creates a topic (as Kafka's CreateTopics does).
#[utoipa::path(
    post,
    path = "/v1/topics",
    tag = "topics",
    request_body = CreateTopicBody,
    responses(
        (status = 201, description = "Created", body = TopicDetail),
        (status = 400, description = "`invalid_request`, `invalid_topic_name`, `invalid_partitions`, `invalid_replication_factor` or `invalid_config`", body = ErrorBody),
        (status = 403, description = "`forbidden`: no CREATE on the cluster or the topic; `cross_origin`: sent from another site's page", body = ErrorBody),
        (status = 409, description = "`topic_exists`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not sent as JSON", body = ErrorBody)
    )
)]
pub async fn create_topic(
    State(st): State<HttpState>,
    caller: Caller,
    body: Bytes,
) -> Result<(StatusCode, Json<TopicDetail>), ApiError> {
    let req: CreateTopicBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid(format!("the body is not a topic to create: {e}")))?;
    let b = &st.broker;
    // Kafka: CREATE on the cluster or on the topic
    if !caller.may_on_cluster(b, AclOperation::Create)
        && !caller.may(b, AclOperation::Create, ResourceType::Topic, &req.name)
    {
        return Err(caller.forbidden(format!("CREATE on the cluster or on topic '{}'", req.name)));
    }
    if req.partitions.is_some_and(|n| n > REST_MAX_PARTITIONS) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_partitions",
            format!(
                "the REST API creates topics of at most {REST_MAX_PARTITIONS} partitions; create larger ones with Kafka's CreateTopics"
            ),
        ));
    }
    let created = topics::create_topic(
        &b.node,
        NewTopic {
            name: req.name,
            partitions: req.partitions,
            replication_factor: req.replication_factor,
            configs: req.configs,
            assignments: Vec::new(),
        },
        false,
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(detail(b, &caller, &created.topic).await?),
    ))
}

/// A topic's partitions (leader, replicas, ISR, offsets) and configs.
#[utoipa::path(
    get,
    path = "/v1/topics/{name}",
    tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    responses(
        (status = 200, description = "The topic", body = TopicDetail),
        (status = 403, description = "`forbidden`: no DESCRIBE on the topic (whether or not it exists)", body = ErrorBody),
        (status = 404, description = "`topic_not_found`", body = ErrorBody)
    )
)]
pub async fn get_topic(
    State(st): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<TopicDetail>, ApiError> {
    let b = &st.broker;
    caller.require(b, AclOperation::Describe, ResourceType::Topic, &name)?;
    let t = b
        .node
        .catalog
        .topic(&name)
        .ok_or_else(|| ApiError::topic_not_found(&name))?;
    Ok(Json(detail(b, &caller, &t).await?))
}

/// Deletes a topic and its data (as Kafka's DeleteTopics does).
#[utoipa::path(
    delete,
    path = "/v1/topics/{name}",
    tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "`forbidden`: no DELETE on the topic (whether or not it exists); `cross_origin`: sent from another site's page", body = ErrorBody),
        (status = 404, description = "`topic_not_found`", body = ErrorBody)
    )
)]
pub async fn delete_topic(
    State(st): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let b = &st.broker;
    caller.require(b, AclOperation::Delete, ResourceType::Topic, &name)?;
    let t = b
        .node
        .catalog
        .topic(&name)
        .ok_or_else(|| ApiError::topic_not_found(&name))?;
    topics::delete_topic(&b.node, &t).await?;
    Ok(StatusCode::NO_CONTENT)
}
