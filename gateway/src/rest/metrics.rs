//! `GET /v1/metrics`: this agent's traffic counters, request latency
//! histograms and storage by tier, as JSON for the console's live charts
//! (Prometheus scrapes the same counters on `/metrics`).
//!
//! Counters are totals since the agent started: a reader takes two samples
//! and divides the difference by the time between them (`at_ms`), the same
//! way Prometheus' `rate()` does, and the same for the histograms' buckets.
//!
//! Needs DESCRIBE on the cluster; the storage per topic names only topics
//! the caller may describe (the totals count every topic).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::Json;
use metastore::Topics;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ErrorBody};
use crate::http::extension::HttpState;
use crate::http::Caller;
use dataplane::telemetry::{LatencyHistogram, BOUNDS_MICROS};
use metastore::acl::{AclOperation, ResourceType};

/// A latency histogram: counts per bucket since the agent started.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistogramView {
    /// Upper bounds of the buckets in seconds; `counts` has one more entry,
    /// for durations above the last bound.
    pub bounds_seconds: Vec<f64>,
    /// Requests per bucket (not cumulative).
    pub counts: Vec<u64>,
    pub sum_seconds: f64,
}

impl HistogramView {
    fn of(h: &LatencyHistogram) -> Self {
        let s = h.snapshot();
        HistogramView {
            bounds_seconds: BOUNDS_MICROS.iter().map(|&b| b as f64 / 1e6).collect(),
            counts: s.buckets.to_vec(),
            sum_seconds: s.sum_micros as f64 / 1e6,
        }
    }
}

/// One topic's bytes in each tier.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicStorage {
    pub topic: String,
    /// Record bytes of the topic's replicas on this agent's local disk.
    pub local_bytes: u64,
    /// Bytes of the topic's segment objects in object storage (the whole
    /// cluster's, from the metastore).
    pub tiered_bytes: u64,
}

/// Bytes by tier.
#[derive(Debug, Serialize, ToSchema)]
pub struct StorageView {
    /// Record bytes of every replica on this agent's local disk (leaders
    /// and followers).
    pub local_bytes: u64,
    /// Bytes of every segment object in object storage, from the metastore.
    /// A segment stays on local disk for `local.retention.*` after its
    /// upload, so the tiers overlap.
    pub tiered_bytes: u64,
    /// Per topic, by name: the topics the caller may describe.
    pub topics: Vec<TopicStorage>,
}

/// This agent's figures at one moment.
#[derive(Debug, Serialize, ToSchema)]
pub struct MetricsView {
    /// The agent that answered.
    pub node_id: i32,
    /// When the figures were read (ms since the epoch).
    pub at_ms: i64,
    /// Record bytes written by Kafka produce requests on this agent.
    pub produced_bytes: u64,
    /// Records appended to the partitions this agent holds open now (a
    /// partition that closes takes its count with it).
    pub produced_records: u64,
    /// Record bytes sent to Kafka consumers by this agent (each fetch
    /// answer counted once, however long it waited).
    pub fetched_bytes: u64,
    pub kafka_requests: u64,
    pub open_connections: u64,
    /// Produce requests, from decoded to answered (acks=all includes the
    /// wait for the in-sync replicas).
    pub produce_latency: HistogramView,
    /// Fetch requests, from decoded to answered, including the long-poll
    /// wait for `min_bytes`.
    pub fetch_latency: HistogramView,
    pub storage: StorageView,
}

/// Bytes on this agent's local disk and in object storage (the cluster's),
/// as `/v1/metrics` totals them.
pub(super) async fn storage_totals(b: &crate::broker::Broker) -> (u64, u64) {
    let mut local = 0;
    for h in b.node.partitions.open_handles() {
        // a log closing under the request counts as empty
        local += h.local_bytes().await.unwrap_or(0);
    }
    let tiered = b
        .node
        .catalog
        .topics()
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| dataplane::topics::tiered_bytes(&b.node, t, p.index))
        })
        .sum();
    (local, tiered)
}

/// Traffic totals, latency histograms and storage by tier on this agent.
#[utoipa::path(
    get,
    path = "/v1/metrics",
    tag = "cluster",
    responses(
        (status = 200, description = "This agent's figures", body = MetricsView),
        (status = 403, description = "`forbidden`: no DESCRIBE on the cluster", body = ErrorBody)
    )
)]
pub async fn get_metrics(
    State(st): State<HttpState>,
    caller: Caller,
) -> Result<Json<MetricsView>, ApiError> {
    let b = &st.broker;
    caller.require_on_cluster(b, AclOperation::Describe)?;
    let m = &b.metrics;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let handles = b.node.partitions.open_handles();
    let mut per_topic: BTreeMap<String, TopicStorage> = BTreeMap::new();
    let mut produced_records = 0;
    for h in &handles {
        let stats = h.stats();
        produced_records += stats.records_in.load(Ordering::Relaxed);
        // a log closing under the request counts as empty
        let local = h.local_bytes().await.unwrap_or(0);
        per_topic
            .entry(stats.topic.to_string())
            .or_insert_with(|| TopicStorage {
                topic: stats.topic.to_string(),
                local_bytes: 0,
                tiered_bytes: 0,
            })
            .local_bytes += local;
    }
    for t in b.node.catalog.topics() {
        let tiered: u64 = t
            .partitions
            .iter()
            .map(|p| dataplane::topics::tiered_bytes(&b.node, &t, p.index))
            .sum();
        per_topic
            .entry(t.name.clone())
            .or_insert_with(|| TopicStorage {
                topic: t.name.clone(),
                local_bytes: 0,
                tiered_bytes: 0,
            })
            .tiered_bytes += tiered;
    }
    let topics: Vec<TopicStorage> = per_topic.into_values().collect();
    let (local_bytes, tiered_bytes) = (
        topics.iter().map(|t| t.local_bytes).sum(),
        topics.iter().map(|t| t.tiered_bytes).sum(),
    );
    let topics = topics
        .into_iter()
        .filter(|t| caller.may(b, AclOperation::Describe, ResourceType::Topic, &t.topic))
        .collect();
    let opened = load(&m.connections_opened);
    let closed = load(&m.connections_closed);
    Ok(Json(MetricsView {
        node_id: b.config.node_id,
        at_ms: dataplane::partition::now_ms(),
        produced_bytes: load(&m.produced_bytes),
        produced_records,
        fetched_bytes: load(&m.fetched_bytes),
        kafka_requests: load(&m.requests),
        open_connections: opened.saturating_sub(closed),
        produce_latency: HistogramView::of(&m.produce_latency),
        fetch_latency: HistogramView::of(&m.fetch_latency),
        storage: StorageView {
            local_bytes,
            tiered_bytes,
            topics,
        },
    }))
}
