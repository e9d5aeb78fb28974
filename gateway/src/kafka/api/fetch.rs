//! Fetch: long-polls on the partitions' high-watermark watches until
//! `min_bytes` are available or `max_wait_ms` passes, honours the response and
//! partition byte limits, serves fetch sessions, and hands record bytes to the
//! connection as spliced parts (sendfile on plain TCP).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;
use storage::StorageError;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use super::{s, DispatchError, RequestContext};
use metastore::acl::{AclOperation, ResourceType};
use metastore::{AgentId, ClusterControl, TopicInfo, Topics};

use crate::broker::{Broker, Metrics};
use crate::codes;
use crate::fetch_session::{SessionError, SessionMode, SessionPartition};
use crate::kafka::response::{marker, splice_records, ResponseFrame};
use dataplane::backend::{LogError, Records};
use dataplane::fetch::{PartitionRead, ReadOutcome, Wait};
use dataplane::node::Unavailable;
use dataplane::partition::{Isolation, PartitionHandle, ReadResult};
use dataplane::telemetry::sampling::{sampled, SPAN_TARGET};
use tracing::Instrument;

#[path = "fetch_forward.rs"]
mod forwarded;
use forwarded::gather;

/// One partition to read.
#[derive(Clone)]
struct Item {
    topic: String,
    topic_id: Uuid,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    handle: Result<PartitionHandle, ResponseError>,
    last_hw: i64,
    last_log_start: i64,
    /// The client's view of the leader epoch (-1: none), passed on when
    /// the read is forwarded.
    current_leader_epoch: i32,
    /// Load-balancer mode: the agent leading the partition, when it is not
    /// this one; the read is forwarded there.
    owner: Option<AgentId>,
    /// KIP-392: an in-sync follower in the consumer's rack, which the
    /// consumer should read from instead (nothing is read here then).
    preferred_replica: Option<i32>,
    /// The request's isolation level.
    isolation: Isolation,
}

struct Outcome {
    error: Option<ResponseError>,
    high_watermark: i64,
    /// -1 when unknown (an error).
    last_stable: i64,
    log_start: i64,
    records: Records,
    /// read_committed: the aborted transactions within `records`.
    aborted: Vec<AbortedTransaction>,
}

impl Outcome {
    fn failed(error: ResponseError, high_watermark: i64, log_start: i64) -> Outcome {
        Outcome {
            error: Some(error),
            high_watermark,
            last_stable: high_watermark,
            log_start,
            records: Records::empty(),
            aborted: Vec::new(),
        }
    }
}

/// The aborted transactions of a read in Kafka's terms.
fn aborted_of(r: &ReadResult) -> Vec<AbortedTransaction> {
    r.aborted
        .iter()
        .map(|t| {
            AbortedTransaction::default()
                .with_producer_id(kafka_protocol::messages::ProducerId(t.producer_id))
                .with_first_offset(t.first_offset)
        })
        .collect()
}

/// The long poll of `dataplane::fetch` over `items`, its outcomes in Kafka's
/// terms, and how long it slept (time request-rate quotas do not count).
async fn long_poll(
    b: &Broker,
    items: &[Item],
    max_total: usize,
    min_bytes: usize,
    deadline: Instant,
    hurry: Option<&Notify>,
) -> (Vec<Outcome>, Duration) {
    let reads: Vec<PartitionRead<'_>> = items
        .iter()
        .map(|it| PartitionRead {
            handle: it.handle.as_ref().ok(),
            offset: it.offset,
            max_bytes: it.max_bytes,
            offsets_only: it.preferred_replica.is_some(),
            isolation: it.isolation,
        })
        .collect();
    let wait = Wait {
        min_bytes,
        deadline,
        hurry,
        stop: b.shutdown_signal(),
    };
    let (outcomes, total, slept) = dataplane::fetch::long_poll(&reads, max_total, wait).await;
    Metrics::add(&b.metrics.fetched_bytes, total as u64);
    let outcomes = items
        .iter()
        .zip(outcomes)
        .map(|(it, o)| match (o, &it.handle) {
            (ReadOutcome::Read(r), _) => Outcome {
                error: None,
                high_watermark: r.high_watermark,
                last_stable: r.last_stable_offset,
                log_start: r.log_start_offset,
                aborted: aborted_of(&r),
                records: r.records,
            },
            (ReadOutcome::Unresolved, Err(e)) => Outcome::failed(*e, -1, -1),
            (ReadOutcome::Unresolved, Ok(_)) => {
                Outcome::failed(ResponseError::UnknownServerError, -1, -1)
            }
            (
                ReadOutcome::Failed(LogError::Storage(StorageError::OffsetOutOfRange {
                    log_start,
                    log_end,
                    ..
                })),
                _,
            ) => Outcome::failed(ResponseError::OffsetOutOfRange, log_end, log_start),
            (ReadOutcome::Failed(e), _) => Outcome::failed(codes::log_error(&e), -1, -1),
        })
        .collect();
    (outcomes, slept)
}

/// The topics a request names, each looked up once however many of its
/// partitions the request lists.
struct TopicCache<'a> {
    b: &'a Broker,
    /// Who reads: each topic is checked for READ.
    ctx: &'a RequestContext,
    by_id: bool,
    seen: HashMap<(String, Uuid), Option<Arc<TopicInfo>>>,
}

impl<'a> TopicCache<'a> {
    fn new(b: &'a Broker, ctx: &'a RequestContext) -> Self {
        TopicCache {
            b,
            ctx,
            by_id: ctx.api_version >= 13,
            seen: HashMap::new(),
        }
    }

    fn get(&mut self, name: &str, id: Uuid) -> Option<&TopicInfo> {
        let key = if self.by_id {
            (String::new(), id)
        } else {
            (name.to_string(), Uuid::nil())
        };
        let (b, by_id) = (self.b, self.by_id);
        self.seen
            .entry(key)
            .or_insert_with(|| {
                if by_id {
                    b.node.catalog.topic_by_id(id)
                } else {
                    b.node.catalog.topic(name)
                }
            })
            .as_deref()
    }
}

async fn resolve(
    b: &Broker,
    topics: &mut TopicCache<'_>,
    name: &str,
    id: Uuid,
    partition: i32,
    leader_epoch: i32,
    reach: Reach,
) -> Resolved {
    let by_id = topics.by_id;
    let ctx = topics.ctx;
    let readable = |name: &str| ctx.may(b, AclOperation::Read, ResourceType::Topic, name);
    // by name, an unreadable topic is refused whether or not it exists
    if !by_id && !readable(name) {
        return (
            name.to_string(),
            id,
            Err(ResponseError::TopicAuthorizationFailed),
            None,
        );
    }
    let Some(topic) = topics.get(name, id) else {
        let e = if by_id {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        return (name.to_string(), id, Err(e), None);
    };
    if by_id && !readable(&topic.name) {
        let e = Err(ResponseError::TopicAuthorizationFailed);
        return (topic.name.clone(), topic.id, e, None);
    }
    let current = usize::try_from(partition)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .map(|p| p.leader_epoch);
    let handle = match current {
        None => Err(ResponseError::UnknownTopicOrPartition),
        Some(cur) if leader_epoch >= 0 && leader_epoch < cur => {
            Err(ResponseError::FencedLeaderEpoch)
        }
        Some(cur) if leader_epoch > cur => Err(ResponseError::UnknownLeaderEpoch),
        Some(_) => match b.node.partition(topic, partition).await {
            Ok(h) => Ok(h),
            // KIP-392: a follower serves consumers up to its own high watermark
            Err(Unavailable::NotLeader) if reach.follower_reads => {
                follower_replica(b, topic, partition).ok_or(ResponseError::NotLeaderOrFollower)
            }
            Err(e) => Err(crate::codes::unavailable(&e)),
        },
    };
    let owner = match handle {
        Err(ResponseError::NotLeaderOrFollower) if reach.forwarding => {
            super::routing::remote_leader(b, Some(topic), partition)
        }
        _ => None,
    };
    (topic.name.clone(), topic.id, handle, owner)
}

/// Where a partition this agent does not lead may still be read.
#[derive(Debug, Clone, Copy)]
struct Reach {
    /// Load-balancer mode: at its leader, by forwarding.
    forwarding: bool,
    /// KIP-392: here, when this agent follows it.
    follower_reads: bool,
}

/// This agent's replica of a partition it follows, if it is open.
fn follower_replica(b: &Broker, topic: &TopicInfo, partition: i32) -> Option<PartitionHandle> {
    let me = u64::try_from(b.config.node_id).ok()?;
    let p = topic.partitions.get(usize::try_from(partition).ok()?)?;
    if !p.replicas.contains(&me) {
        return None;
    }
    b.node
        .partitions
        .get_open(storage::tier::PartitionKey::new(topic.id, partition))
}

/// KIP-392: the in-sync follower a consumer in `rack` should read from,
/// when this agent (the leader) is in another rack and such a follower is
/// alive.
fn preferred_read_replica(
    b: &Broker,
    agents: &[metastore::AgentInfo],
    topic_id: Uuid,
    partition: i32,
    rack: &str,
) -> Option<i32> {
    let me = u64::try_from(b.config.node_id).ok()?;
    let rack_of = |id: u64| {
        agents
            .iter()
            .find(|a| a.id == id && !a.fenced)
            .and_then(|a| a.rack.as_deref())
    };
    if b.config.rack.as_deref() == Some(rack) {
        return None;
    }
    let topic = b.node.catalog.topic_by_id(topic_id)?;
    // the followers of a topic durable in object storage hold nothing
    if metastore::topic_config::object_store_durable(&topic.configs) {
        return None;
    }
    let p = topic.partitions.get(usize::try_from(partition).ok()?)?;
    if p.leader != Some(me) {
        return None;
    }
    p.isr
        .iter()
        .copied()
        .filter(|&r| r != me)
        .find(|&r| rack_of(r) == Some(rack))
        .and_then(|r| i32::try_from(r).ok())
}

/// A partition's name, id, local handle (or why there is none) and, in
/// load-balancer mode, the agent leading it elsewhere.
type Resolved = (
    String,
    Uuid,
    Result<PartitionHandle, ResponseError>,
    Option<AgentId>,
);

/// A fetch response with its records kept apart, and the marker nonce used in it.
pub(super) struct FetchAnswer {
    response: FetchResponse,
    records: Vec<Records>,
    nonce: [u8; 8],
    /// How long the request waited for records (a long poll), or for the
    /// agents it was forwarded to.
    waited: Duration,
}

impl FetchAnswer {
    /// The response, for what is added once it is complete (KIP-951 hints).
    pub(super) fn response_mut(&mut self) -> &mut FetchResponse {
        &mut self.response
    }

    /// How long the request waited rather than worked.
    pub(super) fn waited(&self) -> Duration {
        self.waited
    }

    /// Bytes of records the answer carries (what a fetch quota counts).
    pub(super) fn record_bytes(&self) -> usize {
        self.records.iter().map(Records::len).sum()
    }

    /// Tells the client to wait `ms` before its next fetch (a quota).
    pub(super) fn set_throttle(&mut self, ms: i32) {
        self.response.throttle_time_ms = ms;
    }

    /// The response and, apart, each listed partition's records in order.
    pub(super) fn into_parts(self) -> (FetchResponse, Vec<Records>) {
        (self.response, self.records)
    }
}

fn top_error(e: ResponseError, session_id: i32) -> FetchAnswer {
    FetchAnswer {
        response: FetchResponse::default()
            .with_error_code(e.code())
            .with_session_id(session_id),
        records: Vec::new(),
        nonce: [0; 8],
        waited: Duration::ZERO,
    }
}

/// Serves a Fetch; the records are returned separately, in response order.
/// Serves a Fetch request, timed into the fetch latency histogram and, when
/// sampled, traced as a `fetch` span naming the first partition asked for.
pub(super) async fn fetch(b: &Broker, ctx: &RequestContext, req: FetchRequest) -> FetchAnswer {
    let started = std::time::Instant::now();
    let span = if sampled() {
        let first = req.topics.first();
        // v13 and later name topics by id
        let topic = first.map(|t| {
            if t.topic.is_empty() {
                b.node
                    .catalog
                    .topic_by_id(t.topic_id)
                    .map_or_else(|| t.topic_id.to_string(), |i| i.name.clone())
            } else {
                t.topic.to_string()
            }
        });
        let partition = first
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.partition);
        // signed: the OpenTelemetry layer exports unsigned fields as strings
        let partitions: i64 = req.topics.iter().map(|t| t.partitions.len() as i64).sum();
        tracing::info_span!(
            target: SPAN_TARGET,
            "fetch",
            topic = topic.as_deref().unwrap_or(""),
            partition,
            partitions,
            replica = req.replica_id.0 >= 0,
        )
    } else {
        tracing::Span::none()
    };
    let answer = serve(b, ctx, req).instrument(span).await;
    b.metrics.fetch_latency.record(started.elapsed());
    answer
}

async fn serve(b: &Broker, ctx: &RequestContext, req: FetchRequest) -> FetchAnswer {
    let v = ctx.api_version;
    // read_committed exists from v4; older requests read uncommitted
    let isolation = if v >= 4 {
        Isolation::from_wire(req.isolation_level)
    } else {
        Isolation::ReadUncommitted
    };
    let mode = if v >= 7 {
        SessionMode::of(req.session_id, req.session_epoch)
    } else {
        SessionMode::Sessionless
    };
    let mut topics = TopicCache::new(b, ctx);
    let forwarder = b.forwarder(ctx.forwarded);
    // KIP-392: consumers (v11+) may read from a follower; not behind a
    // load balancer, where clients see one broker.
    let follower_reads = v >= 11 && req.replica_id.0 < 0 && !b.config.load_balanced;
    let reach = Reach {
        forwarding: forwarder.is_some(),
        follower_reads,
    };
    let mut items = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let (name, id, handle, owner) = resolve(
                b,
                &mut topics,
                t.topic.as_str(),
                t.topic_id,
                p.partition,
                p.current_leader_epoch,
                reach,
            )
            .await;
            items.push(Item {
                topic: name,
                topic_id: id,
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
                handle,
                last_hw: -1,
                last_log_start: -1,
                current_leader_epoch: p.current_leader_epoch,
                owner,
                preferred_replica: None,
                isolation,
            });
        }
    }
    let session_id = match apply_session(b, ctx, &req, mode, &mut topics, &mut items, reach).await {
        Ok(id) => id,
        Err(e) => return top_error(e, 0),
    };

    if follower_reads && !req.rack_id.is_empty() {
        let agents = b.node.catalog.agents();
        for it in items.iter_mut().filter(|it| it.handle.is_ok()) {
            it.preferred_replica =
                preferred_read_replica(b, &agents, it.topic_id, it.partition, req.rack_id.as_str());
        }
    }
    let max_total = if v >= 3 && req.max_bytes > 0 {
        (req.max_bytes as usize).min(b.config.fetch_max_bytes)
    } else {
        b.config.fetch_max_bytes
    };
    // min_bytes 0 asks for an immediate answer, as in Kafka.
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let (outcomes, waited) = match forwarder.filter(|_| items.iter().any(|it| it.owner.is_some())) {
        Some(fwd) => {
            let started = Instant::now();
            let outcomes = gather(b, fwd, ctx, &items, max_total, min_bytes, deadline).await;
            (outcomes, started.elapsed())
        }
        None => {
            long_poll(
                b,
                &items,
                max_total,
                min_bytes,
                deadline,
                ctx.hurry.as_deref(),
            )
            .await
        }
    };

    let incremental = matches!(mode, SessionMode::Incremental { .. });
    let (mut answer, sent) = build_response(v, &items, outcomes, incremental, session_id);
    answer.waited = waited;
    if session_id != 0 {
        b.fetch_sessions.remember(session_id, &sent);
    }
    answer
}

/// KIP-227 sessions: starts, closes or applies the request to a session.
/// An incremental request's items become every partition the session
/// holds. Returns the session id to answer with (0 for none).
async fn apply_session(
    b: &Broker,
    ctx: &RequestContext,
    req: &FetchRequest,
    mode: SessionMode,
    topics: &mut TopicCache<'_>,
    items: &mut Vec<Item>,
    reach: Reach,
) -> Result<i32, ResponseError> {
    let isolation = Isolation::from_wire(req.isolation_level);
    let to_session = |it: &Item| SessionPartition {
        topic: it.topic.clone(),
        topic_id: it.topic_id,
        partition: it.partition,
        fetch_offset: it.offset,
        max_bytes: it.max_bytes as i32,
        last_high_watermark: -1,
        last_log_start: -1,
    };
    Ok(match mode {
        SessionMode::Sessionless => {
            if req.session_id != 0 {
                b.fetch_sessions.close(ctx.connection, req.session_id);
            }
            0
        }
        SessionMode::New => {
            // a full fetch naming a session replaces it
            if req.session_id != 0 {
                b.fetch_sessions.close(ctx.connection, req.session_id);
            }
            b.fetch_sessions
                .create(ctx.connection, items.iter().map(to_session).collect())
                .unwrap_or(0)
        }
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
            match b
                .fetch_sessions
                .update(ctx.connection, id, epoch, updates, &forgotten)
            {
                Err(SessionError::NotFound) => return Err(ResponseError::FetchSessionIdNotFound),
                Err(SessionError::InvalidEpoch) => {
                    return Err(ResponseError::InvalidFetchSessionEpoch)
                }
                Ok(all) => {
                    let mut listed: HashMap<(Uuid, i32), Item> = items
                        .drain(..)
                        .map(|it| ((it.topic_id, it.partition), it))
                        .collect();
                    let mut merged = Vec::with_capacity(all.len());
                    for sp in all {
                        if let Some(mut it) = listed.remove(&(sp.topic_id, sp.partition)) {
                            it.last_hw = sp.last_high_watermark;
                            it.last_log_start = sp.last_log_start;
                            merged.push(it);
                        } else {
                            let (name, tid, handle, owner) =
                                resolve(b, topics, &sp.topic, sp.topic_id, sp.partition, -1, reach)
                                    .await;
                            merged.push(Item {
                                topic: name,
                                topic_id: tid,
                                partition: sp.partition,
                                offset: sp.fetch_offset,
                                max_bytes: sp.max_bytes.max(0) as usize,
                                handle,
                                last_hw: sp.last_high_watermark,
                                last_log_start: sp.last_log_start,
                                current_leader_epoch: -1,
                                owner,
                                preferred_replica: None,
                                isolation,
                            });
                        }
                    }
                    // Listed partitions the session does not hold (unknown topics).
                    merged.extend(listed.into_values());
                    *items = merged;
                    id
                }
            }
        }
    })
}

/// The response, records kept apart, and what it told the client about each
/// partition (for the session). In an incremental session a partition is
/// listed only when something changed for it, as Kafka does.
fn build_response(
    v: i16,
    items: &[Item],
    outcomes: Vec<Outcome>,
    incremental: bool,
    session_id: i32,
) -> (FetchAnswer, Vec<(Uuid, i32, i64, i64)>) {
    let nonce: [u8; 8] = Uuid::new_v4().as_bytes()[..8]
        .try_into()
        .unwrap_or([0x5a; 8]);
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut records = Vec::new();
    let mut sent = Vec::new();
    for (it, o) in items.iter().zip(outcomes) {
        // Kafka's rule: a session partition is listed when something changed for it.
        let news = o.error.is_some()
            || it.preferred_replica.is_some()
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
            .with_last_stable_offset(o.last_stable)
            .with_log_start_offset(o.log_start)
            .with_aborted_transactions(if v >= 4 { Some(o.aborted) } else { None })
            .with_preferred_read_replica(kafka_protocol::messages::BrokerId(
                it.preferred_replica.unwrap_or(-1),
            ))
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
    let answer = FetchAnswer {
        response: FetchResponse::default()
            .with_session_id(session_id)
            .with_responses(topics),
        records,
        nonce,
        waited: Duration::ZERO,
    };
    (answer, sent)
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
        ..
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
