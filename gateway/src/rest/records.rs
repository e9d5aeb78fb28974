//! `GET /v1/topics/{name}/records`: browse a partition's records from the
//! leader, up to the high watermark, across both tiers. Reading needs what
//! a Kafka Fetch needs: READ on the topic, checked before the topic is
//! looked up.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use metastore::Topics;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::unavailable;
use super::{ApiError, ErrorBody};
use crate::http::extension::HttpState;
use crate::http::Caller;
use dataplane::partition::{Isolation, OffsetQuery};
use metastore::acl::{AclOperation, ResourceType};

/// Records answered at most per request.
const MAX_LIMIT: usize = 1000;
const DEFAULT_LIMIT: usize = 20;
/// Bytes read from the log per step.
const READ_BYTES: usize = 1 << 20;
/// Reads per request, so a partition of empty (compacted) batches ends.
const MAX_READS: usize = 32;

/// Where to read.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecordsQuery {
    /// Partition (default 0).
    pub partition: Option<i32>,
    /// First offset (default: the log start). Not with `timestamp`.
    pub offset: Option<i64>,
    /// Start at the first record whose timestamp is at or after this many
    /// milliseconds since the epoch, as Kafka's ListOffsets finds it
    /// (across both tiers). With no such record the page is empty and
    /// `next_offset` is the high watermark. Not with `offset`.
    pub timestamp: Option<i64>,
    /// Records at most (default 20, at most 1000).
    pub limit: Option<usize>,
}

/// Bytes as UTF-8 text when they are valid UTF-8, else base64.
#[derive(Debug, Serialize, ToSchema)]
pub struct Payload {
    /// `utf8` or `base64`.
    pub encoding: String,
    pub data: String,
}

impl Payload {
    fn of(b: &Bytes) -> Payload {
        match std::str::from_utf8(b) {
            Ok(s) => Payload {
                encoding: "utf8".into(),
                data: s.to_string(),
            },
            Err(_) => Payload {
                encoding: "base64".into(),
                data: base64::engine::general_purpose::STANDARD.encode(b),
            },
        }
    }
}

/// One record header.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeaderView {
    pub key: String,
    pub value: Option<Payload>,
}

/// One record.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordView {
    pub offset: i64,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    pub key: Option<Payload>,
    pub value: Option<Payload>,
    pub headers: Vec<HeaderView>,
}

/// A page of records.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordsPage {
    pub topic: String,
    pub partition: i32,
    pub log_start: i64,
    pub high_watermark: i64,
    /// The offset to ask for next.
    pub next_offset: i64,
    pub records: Vec<RecordView>,
}

/// Records of one partition from an offset, read on the partition's leader.
#[utoipa::path(
    get,
    path = "/v1/topics/{name}/records",
    tag = "topics",
    params(("name" = String, Path, description = "Topic name"), RecordsQuery),
    responses(
        (status = 200, description = "Records", body = RecordsPage),
        (status = 400, description = "`invalid_request`", body = ErrorBody),
        (status = 403, description = "`forbidden`: no READ on the topic (whether or not it exists)", body = ErrorBody),
        (status = 404, description = "`topic_not_found` or `partition_not_found`", body = ErrorBody),
        (status = 416, description = "`offset_out_of_range`", body = ErrorBody),
        (status = 421, description = "`not_leader`: another agent leads the partition", body = ErrorBody)
    )
)]
pub async fn get_records(
    State(st): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
    query: Result<Query<RecordsQuery>, QueryRejection>,
) -> Result<Json<RecordsPage>, ApiError> {
    let b = &st.broker;
    caller.require(b, AclOperation::Read, ResourceType::Topic, &name)?;
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let t = b
        .node
        .catalog
        .topic(&name)
        .ok_or_else(|| ApiError::topic_not_found(&name))?;
    let partition = q.partition.unwrap_or(0);
    let leader = usize::try_from(partition)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .and_then(|p| p.leader);
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::invalid(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    let h = b
        .node
        .partition(&t, partition)
        .await
        .map_err(|e| unavailable(e, &name, partition, leader))?;
    let fail = |e| {
        unavailable(
            dataplane::node::Unavailable::Log(e),
            &name,
            partition,
            leader,
        )
    };
    let (log_start, high_watermark) = h.bounds().await.map_err(fail)?;
    let start = match (q.offset, q.timestamp) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "give either offset or timestamp, not both",
            ))
        }
        (_, Some(ts)) if ts < 0 => {
            return Err(ApiError::invalid(
                "timestamp is milliseconds since the epoch and cannot be negative",
            ))
        }
        (_, Some(ts)) => h
            .offsets(OffsetQuery::Timestamp(ts))
            .await
            .map_err(fail)?
            .map_or(high_watermark, |found| {
                found.offset.clamp(log_start, high_watermark)
            }),
        (offset, None) => offset.unwrap_or(log_start),
    };
    if start < log_start || start > high_watermark {
        return Err(ApiError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            "offset_out_of_range",
            format!("offset {start} is outside {log_start}..={high_watermark}"),
        ));
    }
    let mut next = start;
    let mut seeking = q.timestamp;
    let mut records = Vec::new();
    for _ in 0..MAX_READS {
        if records.len() >= limit || next >= high_watermark {
            break;
        }
        let read = h
            .read(next, READ_BYTES, true, Isolation::ReadUncommitted)
            .await
            .map_err(fail)?;
        if read.records.is_empty() {
            break;
        }
        let chunk = read.records.clone();
        let mut bytes = tokio::task::spawn_blocking(move || chunk.to_bytes())
            .await
            .map_err(|e| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            })?
            .map_err(|e| {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    format!("reading the log failed: {e}"),
                )
            })?;
        let sets = RecordBatchDecoder::decode_all(&mut bytes).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("a stored batch does not decode: {e}"),
            )
        })?;
        let before = next;
        for r in sets.into_iter().flat_map(|s| s.records) {
            if r.offset < next || r.offset >= high_watermark {
                continue;
            }
            next = r.offset + 1;
            if r.control {
                continue;
            }
            // ListOffsets answers a compressed batch's first offset: skip
            // its records stamped before the timestamp asked for
            if let Some(ts) = seeking {
                if r.timestamp < ts {
                    continue;
                }
                seeking = None;
            }
            records.push(RecordView {
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key.as_ref().map(Payload::of),
                value: r.value.as_ref().map(Payload::of),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| HeaderView {
                        key: k.to_string(),
                        value: v.as_ref().map(Payload::of),
                    })
                    .collect(),
            });
            if records.len() >= limit {
                break;
            }
        }
        if next == before {
            break;
        }
    }
    Ok(Json(RecordsPage {
        topic: name,
        partition,
        log_start,
        high_watermark,
        next_offset: next,
        records,
    }))
}
