//! KIP-875's offsets endpoints.
//!
//! A source connector's offsets are its own (the metastore keeps each
//! source partition's last committed offset as JSON text). A sink
//! connector's are its consumer group's, `connect-<name>`, as in Connect:
//! read and changed through the metastore's group offsets, which is where
//! the sink tasks commit them. Either may be changed only while the
//! connector is STOPPED (the metastore refuses otherwise for sources; the
//! check is made here for sinks, whose group offsets do not know about
//! connectors).

use axum::extract::State;
use axum::Json;
use metastore::connect::{ConnectCommand, Connector, TargetState};
use metastore::{Groups, MetaError, OffsetCommit, Topics};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::connectors::read;
use super::{ApiError, Body, Params, Rest};
use crate::plugins::{Kind, Plugin};

/// The body of `PATCH /connectors/{name}/offsets`, and the shape of
/// `GET`'s answer: Connect's `ConnectorOffsets`.
#[derive(Debug, Deserialize)]
pub(super) struct OffsetsBody {
    #[serde(default)]
    offsets: Option<Vec<OffsetEntry>>,
}

#[derive(Debug, Deserialize, Serialize)]
struct OffsetEntry {
    #[serde(default)]
    partition: Option<Value>,
    /// Null (or left out) when altering removes the partition's offset.
    #[serde(default)]
    offset: Option<Value>,
}

/// Connect's `Message`.
#[derive(Debug, Serialize)]
pub(super) struct Message {
    message: &'static str,
}

const ALTERED: &str = "The offsets for this connector have been altered successfully";
const RESET: &str = "The offsets for this connector have been reset successfully";

/// The consumer group of a sink connector.
pub fn sink_group(name: &str) -> String {
    format!("connect-{name}")
}

fn is_sink(c: &Connector) -> bool {
    c.config
        .get("connector.class")
        .and_then(|class| Plugin::find(class))
        .is_some_and(|p| p.kind() == Kind::Sink)
}

fn require_stopped(name: &str, c: &Connector) -> Result<(), ApiError> {
    if c.target == TargetState::Stopped {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "Connectors must be in the STOPPED state before their offsets can be modified; \
         connector {name} is not (stop it with PUT /connectors/{name}/stop)"
    )))
}

/// JSON text as stored, as JSON (text that is not JSON, which no task
/// writes, is shown as a string rather than hidden).
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `GET /connectors/{name}/offsets`.
pub(super) async fn get(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let c = read(&rest, &name)?;
    let offsets: Vec<OffsetEntry> = if is_sink(&c) {
        rest.meta
            .committed_offsets(&sink_group(&name))
            .into_iter()
            .map(|((topic, partition), committed)| OffsetEntry {
                partition: Some(json!({"kafka_topic": topic, "kafka_partition": partition})),
                offset: Some(json!({"kafka_offset": committed.offset})),
            })
            .collect()
    } else {
        c.offsets
            .iter()
            .map(|(partition, offset)| OffsetEntry {
                partition: Some(parsed(partition)),
                offset: Some(parsed(offset)),
            })
            .collect()
    };
    Ok(Json(json!({ "offsets": offsets })))
}

/// `PATCH /connectors/{name}/offsets`: sets (or, for a null offset,
/// removes) the offsets of the partitions given; 200.
pub(super) async fn alter(
    State(rest): State<Rest>,
    Params(name): Params<String>,
    Body(body): Body<OffsetsBody>,
) -> Result<Json<Message>, ApiError> {
    let entries = match body.offsets {
        Some(e) if !e.is_empty() => e,
        _ => {
            return Err(ApiError::bad_request(
                "Partitions / offsets need to be provided for an alter offsets request",
            ))
        }
    };
    let c = read(&rest, &name)?;
    if is_sink(&c) {
        require_stopped(&name, &c)?;
        alter_sink(&rest, &name, entries).await?;
    } else {
        let offsets = entries
            .into_iter()
            .map(source_change)
            .collect::<Result<Vec<_>, _>>()?;
        rest.meta
            .connect_command(ConnectCommand::CommitOffsets {
                name,
                generation: None,
                offsets,
            })
            .await?;
    }
    Ok(Json(Message { message: ALTERED }))
}

/// A source partition and its new offset (None: removed), as JSON text.
fn source_change(e: OffsetEntry) -> Result<(String, Option<String>), ApiError> {
    let partition = match e.partition {
        Some(p @ Value::Object(_)) => p.to_string(),
        _ => {
            return Err(ApiError::bad_request(
                "Source partitions must be JSON objects and may not be null",
            ))
        }
    };
    let offset = match e.offset {
        None => None,
        Some(o @ Value::Object(_)) => Some(o.to_string()),
        Some(_) => {
            return Err(ApiError::bad_request(
                "Source offsets must be JSON objects or null",
            ))
        }
    };
    Ok((partition, offset))
}

/// An integer as Connect takes one in a sink offset: a JSON number or a
/// string holding one.
fn integer(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A sink offset's topic, partition and new offset (None: removed).
fn sink_change(e: &OffsetEntry) -> Result<(String, i32, Option<i64>), ApiError> {
    let Some(Value::Object(p)) = &e.partition else {
        return Err(ApiError::bad_request(
            "The partition for a sink connector offset must be a JSON object and may not be null",
        ));
    };
    let Some(Value::String(topic)) = p.get("kafka_topic") else {
        return Err(ApiError::bad_request(
            "Kafka topic names must be valid strings and may not be null",
        ));
    };
    let partition = integer(p.get("kafka_partition"))
        .and_then(|n| i32::try_from(n).ok())
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            ApiError::bad_request(
                "Kafka partitions must be integers from 0 to 2147483647 and may not be null",
            )
        })?;
    let offset = match &e.offset {
        None => None,
        Some(Value::Object(o)) => Some(
            integer(o.get("kafka_offset"))
                .filter(|n| *n >= 0)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "Kafka offsets must be integers of at least 0 and may not be null",
                    )
                })?,
        ),
        Some(_) => {
            return Err(ApiError::bad_request(
                "The offset for a sink connector must be a JSON object or null",
            ))
        }
    };
    Ok((topic.clone(), partition, offset))
}

async fn alter_sink(rest: &Rest, name: &str, entries: Vec<OffsetEntry>) -> Result<(), ApiError> {
    let changes = entries
        .iter()
        .map(sink_change)
        .collect::<Result<Vec<_>, _>>()?;
    // every partition must exist before anything is written, so that a
    // refusal changes nothing
    for (topic, partition, _) in &changes {
        let exists = rest
            .meta
            .topic(topic)
            .is_some_and(|t| t.partition(*partition).is_some());
        if !exists {
            return Err(ApiError::bad_request(format!(
                "Cannot alter the offset of {topic}-{partition}: no such topic partition"
            )));
        }
    }
    let group = sink_group(name);
    let (commits, removals): (Vec<_>, Vec<_>) = changes.into_iter().partition(|c| c.2.is_some());
    if !commits.is_empty() {
        let offsets = commits
            .into_iter()
            .map(|(topic, partition, offset)| OffsetCommit {
                topic,
                partition,
                offset: offset.unwrap_or_default(),
                leader_epoch: -1,
                metadata: None,
                commit_time_ms: 0,
            })
            .collect();
        let refused: Vec<String> = rest
            .meta
            .commit_offsets(&group, None, offsets)
            .await?
            .into_iter()
            .filter_map(Result::err)
            .map(|e| e.to_string())
            .collect();
        if !refused.is_empty() {
            return Err(ApiError::bad_request(format!(
                "Some offsets could not be altered: {}",
                refused.join("; ")
            )));
        }
    }
    if !removals.is_empty() {
        let partitions = removals.into_iter().map(|(t, p, _)| (t, p)).collect();
        match rest.meta.delete_offsets(&group, None, partitions).await {
            Ok(_) | Err(MetaError::GroupIdNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `DELETE /connectors/{name}/offsets`: removes every offset; 200.
pub(super) async fn reset(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Json<Message>, ApiError> {
    let c = read(&rest, &name)?;
    if is_sink(&c) {
        require_stopped(&name, &c)?;
        // Connect deletes the group; one that never committed is fine
        match rest.meta.delete_group(&sink_group(&name), None).await {
            Ok(()) | Err(MetaError::GroupIdNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    } else {
        rest.meta
            .connect_command(ConnectCommand::ResetOffsets { name })
            .await?;
    }
    Ok(Json(Message { message: RESET }))
}

#[cfg(test)]
#[path = "offsets_tests.rs"]
mod tests;
