//! Fetch: long-polls on the partitions' high-watermark watches until
//! `min_bytes` are available or `max_wait_ms` passes, honours the response and
//! partition byte limits, serves fetch sessions, and hands record bytes to the
//! connection as spliced parts (sendfile on plain TCP).

use std::time::Duration;

use bytes::BytesMut;
use futures::future::select_all;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::{s, DispatchError, RequestContext};
use crate::backend::{LogError, Records};
use crate::broker::{Broker, Metrics};
use crate::codes;
use crate::fetch_session::{SessionError, SessionMode, SessionPartition};
use crate::kafka::response::{marker, splice_records, ResponseFrame};
use crate::partition::PartitionHandle;

/// One partition to read.
struct Item {
    topic: String,
    topic_id: Uuid,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    handle: Result<PartitionHandle, ResponseError>,
    last_hw: i64,
    last_log_start: i64,
}

struct Outcome {
    error: Option<ResponseError>,
    high_watermark: i64,
    log_start: i64,
    records: Records,
}

async fn read_all(b: &Broker, items: &[Item], max_total: usize) -> (Vec<Outcome>, usize) {
    let mut total = 0usize;
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        let h = match &it.handle {
            Ok(h) => h,
            Err(e) => {
                out.push(Outcome {
                    error: Some(*e),
                    high_watermark: -1,
                    log_start: -1,
                    records: Records::empty(),
                });
                continue;
            }
        };
        // After the response budget is spent, later partitions report offsets only.
        let budget = if total >= max_total {
            0
        } else {
            (max_total - total).min(it.max_bytes)
        };
        let read = if budget == 0 && total > 0 {
            h.bounds().await.map(|(ls, hw)| {
                Ok(crate::partition::ReadResult {
                    records: Records::empty(),
                    high_watermark: hw,
                    log_start_offset: ls,
                })
            })
        } else {
            crate::tiering::read(b, it.topic_id, it.partition, h, it.offset, budget.max(1)).await
        };
        let o = match read {
            Err(_) => Outcome {
                error: Some(ResponseError::NotLeaderOrFollower),
                high_watermark: -1,
                log_start: -1,
                records: Records::empty(),
            },
            Ok(Err(e)) => {
                let (hw, ls) = match &e {
                    LogError::OffsetOutOfRange { start, end, .. } => (*end, *start),
                    _ => (-1, -1),
                };
                Outcome {
                    error: Some(codes::log_error(&e)),
                    high_watermark: hw,
                    log_start: ls,
                    records: Records::empty(),
                }
            }
            Ok(Ok(r)) => {
                total += r.records.len();
                Outcome {
                    error: None,
                    high_watermark: r.high_watermark,
                    log_start: r.log_start_offset,
                    records: r.records,
                }
            }
        };
        out.push(o);
    }
    Metrics::add(&b.metrics.fetched_bytes, total as u64);
    (out, total)
}

/// Waits until some partition's high watermark moves past its fetch offset, or the deadline.
async fn wait_for_data(b: &Broker, items: &[Item], deadline: Instant) {
    tokio::select! {
        _ = wait_for_hw(items, deadline) => {}
        _ = b.shutdown_started() => {}
    }
}

async fn wait_for_hw(items: &[Item], deadline: Instant) {
    let mut watches: Vec<_> = items
        .iter()
        .filter_map(|it| {
            it.handle
                .as_ref()
                .ok()
                .map(|h| (h.high_watermark(), it.offset))
        })
        .collect();
    if watches.is_empty() {
        tokio::time::sleep_until(deadline).await;
        return;
    }
    if watches.iter().any(|(w, off)| *w.borrow() > *off) {
        return;
    }
    let changed = select_all(watches.iter_mut().map(|(w, _)| Box::pin(w.changed())));
    let _ = tokio::time::timeout_at(deadline, changed).await;
}

fn resolve(
    b: &Broker,
    v: i16,
    name: &str,
    id: Uuid,
    partition: i32,
    leader_epoch: i32,
) -> (String, Uuid, Result<PartitionHandle, ResponseError>) {
    let topic = if v >= 13 {
        b.catalog.topic_by_id(id)
    } else {
        b.catalog.topic(name)
    };
    let Some(topic) = topic else {
        let e = if v >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        return (name.to_string(), id, Err(e));
    };
    let current = topic
        .partitions
        .get(partition.max(0) as usize)
        .map(|p| p.leader_epoch);
    let handle = match (b.partition(&topic, partition), current) {
        (None, _) | (_, None) => Err(ResponseError::UnknownTopicOrPartition),
        (Some(_), Some(cur)) if leader_epoch >= 0 && leader_epoch < cur => {
            Err(ResponseError::FencedLeaderEpoch)
        }
        (Some(_), Some(cur)) if leader_epoch > cur => Err(ResponseError::UnknownLeaderEpoch),
        (Some(Err(e)), _) => Err(codes::log_error(&e)),
        (Some(Ok(h)), _) => Ok(h),
    };
    (topic.name, topic.id, handle)
}

/// A fetch response with its records kept apart, and the marker nonce used in it.
pub(super) struct FetchAnswer {
    response: FetchResponse,
    records: Vec<Records>,
    nonce: [u8; 8],
}

fn top_error(e: ResponseError, session_id: i32) -> FetchAnswer {
    FetchAnswer {
        response: FetchResponse::default()
            .with_error_code(e.code())
            .with_session_id(session_id),
        records: Vec::new(),
        nonce: [0; 8],
    }
}

/// Serves a Fetch; the records are returned separately, in response order.
pub(super) async fn fetch(b: &Broker, ctx: &RequestContext, req: FetchRequest) -> FetchAnswer {
    let v = ctx.api_version;
    let mode = if v >= 7 {
        SessionMode::of(req.session_id, req.session_epoch)
    } else {
        SessionMode::Sessionless
    };
    let mut items = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let (name, id, handle) = resolve(
                b,
                v,
                t.topic.as_str(),
                t.topic_id,
                p.partition,
                p.current_leader_epoch,
            );
            items.push(Item {
                topic: name,
                topic_id: id,
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
                handle,
                last_hw: -1,
                last_log_start: -1,
            });
        }
    }
    let to_session = |it: &Item| SessionPartition {
        topic: it.topic.clone(),
        topic_id: it.topic_id,
        partition: it.partition,
        fetch_offset: it.offset,
        max_bytes: it.max_bytes as i32,
        last_high_watermark: -1,
        last_log_start: -1,
    };
    let session_id = match mode {
        SessionMode::Sessionless => {
            if req.session_id != 0 {
                b.fetch_sessions.close(req.session_id);
            }
            0
        }
        SessionMode::New => b
            .fetch_sessions
            .create(items.iter().map(to_session).collect())
            .unwrap_or(0),
        SessionMode::Incremental { id, epoch } => {
            let forgotten: Vec<(Uuid, String, i32)> = req
                .forgotten_topics_data
                .iter()
                .flat_map(|f| {
                    f.partitions
                        .iter()
                        .map(move |p| (f.topic_id, f.topic.to_string(), *p))
                })
                .collect();
            let updates = items.iter().map(to_session).collect();
            match b.fetch_sessions.update(id, epoch, updates, &forgotten) {
                Err(SessionError::NotFound) => {
                    return top_error(ResponseError::FetchSessionIdNotFound, 0)
                }
                Err(SessionError::InvalidEpoch) => {
                    return top_error(ResponseError::InvalidFetchSessionEpoch, 0)
                }
                Ok(all) => {
                    let mut merged = Vec::with_capacity(all.len());
                    for sp in all {
                        if let Some(pos) = items.iter().position(|it| {
                            it.topic_id == sp.topic_id && it.partition == sp.partition
                        }) {
                            let mut it = items.remove(pos);
                            it.last_hw = sp.last_high_watermark;
                            it.last_log_start = sp.last_log_start;
                            merged.push(it);
                        } else {
                            let (name, tid, handle) =
                                resolve(b, v, &sp.topic, sp.topic_id, sp.partition, -1);
                            merged.push(Item {
                                topic: name,
                                topic_id: tid,
                                partition: sp.partition,
                                offset: sp.fetch_offset,
                                max_bytes: sp.max_bytes.max(0) as usize,
                                handle,
                                last_hw: sp.last_high_watermark,
                                last_log_start: sp.last_log_start,
                            });
                        }
                    }
                    items.extend(merged);
                    id
                }
            }
        }
    };

    let max_total = if v >= 3 && req.max_bytes > 0 {
        (req.max_bytes as usize).min(b.config.fetch_max_bytes)
    } else {
        b.config.fetch_max_bytes
    };
    let min_bytes = req.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let (mut outcomes, mut total) = read_all(b, &items, max_total).await;
    while total < min_bytes.max(1)
        && outcomes.iter().all(|o| o.error.is_none())
        && Instant::now() < deadline
        && !b.is_shutting_down()
    {
        wait_for_data(b, &items, deadline).await;
        (outcomes, total) = read_all(b, &items, max_total).await;
        if total == 0 && Instant::now() >= deadline {
            break;
        }
    }

    let nonce: [u8; 8] = Uuid::new_v4().as_bytes()[..8]
        .try_into()
        .unwrap_or([0x5a; 8]);
    let incremental = matches!(mode, SessionMode::Incremental { .. });
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut records = Vec::new();
    let mut sent = Vec::new();
    for (it, o) in items.iter().zip(outcomes) {
        // Kafka's rule: a session partition is listed when something changed for it.
        let news = o.error.is_some()
            || !o.records.is_empty()
            || o.high_watermark != it.last_hw
            || o.log_start != it.last_log_start;
        if incremental && !news {
            continue;
        }
        sent.push((it.topic_id, it.partition, o.high_watermark, o.log_start));
        let pd = PartitionData::default()
            .with_partition_index(it.partition)
            .with_error_code(codes::code(o.error))
            .with_high_watermark(o.high_watermark)
            .with_last_stable_offset(o.high_watermark)
            .with_log_start_offset(o.log_start)
            .with_aborted_transactions(if v >= 4 { Some(Vec::new()) } else { None })
            .with_preferred_read_replica(kafka_protocol::messages::BrokerId(-1))
            .with_records(Some(marker(nonce, records.len())));
        records.push(o.records);
        let same_topic = topics.last().is_some_and(|t| {
            if v >= 13 {
                t.topic_id == it.topic_id
            } else {
                t.topic.as_str() == it.topic
            }
        });
        if !same_topic {
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(TopicName(s(it.topic.clone())))
                    .with_topic_id(it.topic_id),
            );
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(pd);
        }
    }
    if session_id != 0 {
        b.fetch_sessions.remember(session_id, &sent);
    }
    FetchAnswer {
        response: FetchResponse::default()
            .with_session_id(session_id)
            .with_responses(topics),
        records,
        nonce,
    }
}

/// Encodes a Fetch response with the records spliced in.
pub(super) fn encode(
    header: &RequestHeader,
    answer: FetchAnswer,
) -> Result<ResponseFrame, DispatchError> {
    let FetchAnswer {
        response: resp,
        records,
        nonce,
    } = answer;
    let version = header.request_api_version;
    let mut buf = BytesMut::with_capacity(256);
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut buf, ApiKey::Fetch.response_header_version(version))
        .map_err(|e| DispatchError::Encode(e.to_string()))?;
    resp.encode(&mut buf, version)
        .map_err(|e| DispatchError::Encode(e.to_string()))?;
    let mut frame = ResponseFrame::new();
    splice_records(&mut frame, buf.freeze(), nonce, records, version >= 12)
        .map_err(|e| DispatchError::Encode(e.to_string()))?;
    Ok(frame)
}
