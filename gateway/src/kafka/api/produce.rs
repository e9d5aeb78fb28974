//! Produce: each partition's batches go to its partition task, all partitions
//! in parallel; a failure in one partition is that partition's error code.

use bytes::BytesMut;
use futures::future::join_all;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::{Broker, Metrics};
use crate::codes;
use dataplane::backend::LogError;
use dataplane::partition::Acks;
use dataplane::telemetry::sampling::{sampled, SPAN_TARGET};
use dataplane::topic_config;
use metastore::acl::{AclOperation, ResourceType};
use metastore::{TopicInfo, Topics};
use tracing::Instrument;

fn failed(index: i32, e: ResponseError, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(e.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(super::s))
}

/// Kafka's rule for Produce v3 and later: each partition carries exactly one
/// record batch. Several would let an idempotent retry among them decide the
/// fate of the others, so they are refused as Kafka does.
fn single_batch(records: &[u8]) -> Result<(), String> {
    let declared = records
        .get(8..12)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_be_bytes)
        .ok_or_else(|| "the record batch is shorter than its header".to_string())?;
    let first = usize::try_from(declared)
        .ok()
        .and_then(|n| n.checked_add(12))
        .ok_or_else(|| format!("record batch length {declared} is invalid"))?;
    if records.len() > first {
        return Err(format!(
            "produce requests carry exactly one record batch per partition; this one has {} bytes after the first batch",
            records.len() - first
        ));
    }
    Ok(())
}

/// The producer id and epoch of a batch (its header's bytes 43..53).
fn producer_of(records: &[u8]) -> Option<(i64, i16)> {
    let id = records.get(43..51)?;
    let epoch = records.get(51..53)?;
    Some((
        i64::from_be_bytes(<[u8; 8]>::try_from(id).ok()?),
        i16::from_be_bytes(<[u8; 2]>::try_from(epoch).ok()?),
    ))
}

/// KIP-890 part 1: a transactional batch is written only when its producer
/// is the transactional id's current one and added this partition to its
/// ongoing transaction, so a late write of a transaction already ended
/// cannot join the next one. The coordinator's write may be milliseconds
/// ahead of this replica of the metastore: a miss waits for it once.
///
/// KIP-890 part 2 (`implicit_add`: Produce v12, from a client on
/// transaction version 2): the client adds no partitions itself, so on a
/// miss this leader adds the partition before the write
/// (`txn_implicit.rs`).
async fn verify_transactional(
    b: &Broker,
    id: Option<&str>,
    topic: &str,
    partition: i32,
    records: &[u8],
    implicit_add: bool,
) -> Result<(), (ResponseError, String)> {
    let Some(id) = id else {
        return Err((
            ResponseError::TransactionalIdAuthorizationFailed,
            "a transactional batch needs the request's transactional id".into(),
        ));
    };
    let Some((producer_id, epoch)) = producer_of(records) else {
        return Err((
            ResponseError::CorruptMessage,
            "truncated batch header".into(),
        ));
    };
    let part = metastore::transactions::TxnPartition {
        topic: topic.to_owned(),
        partition,
    };
    let admitted = |b: &Broker| {
        b.node.catalog.read(|s| {
            s.transaction(id)
                .is_some_and(|r| r.admits(producer_id, epoch, &part))
        })
    };
    if admitted(b) {
        return Ok(());
    }
    if implicit_add {
        return super::txn_implicit::add_partition(b, id, (producer_id, epoch), part).await;
    }
    if b.node.catalog.linearizable_barrier().await.is_ok() && admitted(b) {
        return Ok(());
    }
    let fenced_by = b.node.catalog.read(|s| {
        s.transaction(id)
            .filter(|r| r.producer_id == producer_id && r.producer_epoch > epoch)
            .map(|r| r.producer_epoch)
    });
    if let Some(current) = fenced_by {
        // a zombie: Kafka answers INVALID_PRODUCER_EPOCH, which clients
        // take as being fenced
        return Err((
            ResponseError::InvalidProducerEpoch,
            format!("producer {producer_id} epoch {epoch} was fenced by epoch {current} of '{id}'"),
        ));
    }
    Err((
        ResponseError::InvalidTxnState,
        format!(
            "producer {producer_id} (epoch {epoch}) has no ongoing transaction of '{id}' that includes {topic}-{partition}: add the partition first (AddPartitionsToTxn)"
        ),
    ))
}

/// Whether the batch carries the transactional attribute (bit 4).
fn is_transactional(records: &[u8]) -> bool {
    records
        .get(21..23)
        .is_some_and(|a| i16::from_be_bytes([a[0], a[1]]) & 0x10 != 0)
}

/// Whether a refused write is a sequence gap of an idempotent producer: the
/// answer (OUT_OF_ORDER_SEQUENCE_NUMBER) that clients take as fatal when it
/// comes for their oldest batch in flight.
fn is_sequence_gap(e: &LogError) -> bool {
    matches!(
        e,
        LogError::Storage(storage::StorageError::OutOfOrderSequence { .. })
    )
}

/// Whether this agent still leads partition `index` of `topic` at
/// `leader_epoch`, as the metastore says after a linearizable barrier.
///
/// A sequence gap is judged against this replica's log, which is the
/// partition's only while no newer leader took writes. A leader cut off
/// from the metastore keeps its role until it hears of its successor; a
/// producer that reached the successor meanwhile (say, through a request
/// delivered late, once the link came back) and then returns here sends a
/// sequence this log has never seen the predecessors of. Answering that
/// with OUT_OF_ORDER_SEQUENCE_NUMBER would end the producer for nothing:
/// the missing batches are acknowledged and safe at the successor. So the
/// gap is confirmed first: once the barrier shows no newer leader epoch,
/// none had written before the gap was found, and the gap is real.
/// Without an answer within one agent lease (after which the metastore
/// would have fenced an agent that cannot reach it) the leadership is not
/// confirmed, and the client is told NOT_LEADER_OR_FOLLOWER: it refreshes
/// its metadata and retries the same sequences, nothing having been
/// written.
async fn still_leads(b: &Broker, topic: &TopicInfo, index: i32, leader_epoch: i32) -> bool {
    let catalog = &b.node.catalog;
    match tokio::time::timeout(catalog.agent_lease(), catalog.linearizable_barrier()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!(topic = %topic.name, partition = index, error = %e, "could not confirm the partition's leadership");
            return false;
        }
        Err(_) => {
            tracing::debug!(topic = %topic.name, partition = index, "the metastore did not confirm the partition's leadership within a lease");
            return false;
        }
    }
    catalog.topic_by_id(topic.id).is_some_and(|t| {
        t.partition(index)
            .is_some_and(|p| b.node.leads(p) && p.leader_epoch == leader_epoch)
    })
}

/// A Produce request's transactional id, and whether a partition missing
/// from the transaction is added here (Produce v12, KIP-890 part 2).
#[derive(Debug, Clone, Copy)]
struct Transactional<'a> {
    id: Option<&'a str>,
    implicit_add: bool,
}

async fn produce_partition(
    b: &Broker,
    topic: Option<&TopicInfo>,
    index: i32,
    records: Option<bytes::Bytes>,
    acks: Acks,
    timeout: std::time::Duration,
    txn: Transactional<'_>,
) -> PartitionProduceResponse {
    let Some(topic) = topic else {
        return failed(index, ResponseError::UnknownTopicOrPartition, None);
    };
    let handle = match b.node.partition(topic, index).await {
        Ok(h) => h,
        Err(e) => return failed(index, crate::codes::unavailable(&e), Some(e.to_string())),
    };
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return failed(
            index,
            ResponseError::CorruptMessage,
            Some("no records".into()),
        );
    };
    if let Err(reason) = single_batch(&records) {
        return failed(index, ResponseError::InvalidRecord, Some(reason));
    }
    let mut guard = None;
    if is_transactional(&records) {
        // taken before the check: a marker written since refuses the write
        let verified_at = std::time::Instant::now();
        if let Err((e, why)) =
            verify_transactional(b, txn.id, &topic.name, index, &records, txn.implicit_add).await
        {
            return failed(index, e, Some(why));
        }
        guard = producer_of(&records).map(|(producer_id, _)| dataplane::partition::TxnGuard {
            producer_id,
            verified_at,
        });
    }
    if acks == Acks::All {
        let isr = topic
            .partitions
            .get(index as usize)
            .map(|p| p.isr.len())
            .unwrap_or(0);
        if isr < topic_config::min_insync_replicas(&topic.configs) {
            return failed(index, ResponseError::NotEnoughReplicas, None);
        }
    }
    let len = records.len();
    let schemas = super::schema_validation::rule(b, topic);
    let leader_epoch = topic
        .partitions
        .get(index as usize)
        .map(|p| p.leader_epoch)
        .unwrap_or(0);
    // The log stamps the base offset and leader epoch into the batch in
    // place, and the request frame is shared by every partition's slice, so
    // the batch gets a buffer of its own (one copy, which the append writes).
    // acks=all waits for the in-sync replicas at most the request's timeout
    // (Kafka's REQUEST_TIMED_OUT; the data may still be committed later)
    let appended = tokio::time::timeout(
        timeout,
        handle.append_checked(
            BytesMut::from(&records[..]),
            leader_epoch,
            acks,
            schemas,
            guard,
        ),
    )
    .await;
    let Ok(appended) = appended else {
        return failed(
            index,
            ResponseError::RequestTimedOut,
            Some(
                "the in-sync replicas did not confirm the write within the request's timeout"
                    .into(),
            ),
        );
    };
    if let Err(e) = &appended {
        if is_sequence_gap(e) && !still_leads(b, topic, index, leader_epoch).await {
            tracing::debug!(topic = %topic.name, partition = index, error = %e, "produce refused: a sequence gap this agent could not confirm as leader");
            return failed(
                index,
                ResponseError::NotLeaderOrFollower,
                Some(format!(
                    "{e}, but this agent could not confirm that it still leads the partition at leader epoch {leader_epoch}: a newer leader may hold the missing sequences"
                )),
            );
        }
    }
    match appended {
        Err(e) => {
            tracing::debug!(topic = %topic.name, partition = index, error = %e, "produce refused");
            let answer = failed(index, codes::log_error(&e), Some(e.to_string()));
            match &e {
                // KIP-467: each record that failed, by its index in the batch
                LogError::Storage(storage::StorageError::KeylessRecords { indexes, .. }) => answer
                    .with_record_errors(
                        indexes
                            .iter()
                            .map(|i| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(*i)
                                    .with_batch_index_error_message(Some(super::s(
                                        "Compacted topic cannot accept message without key",
                                    )))
                            })
                            .collect(),
                    ),
                LogError::Storage(storage::StorageError::SchemaValidation { records, .. }) => {
                    answer.with_record_errors(
                        records
                            .iter()
                            .map(|(i, why)| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(*i)
                                    .with_batch_index_error_message(Some(super::s(why.clone())))
                            })
                            .collect(),
                    )
                }
                _ => answer,
            }
        }
        Ok((appended, log_start)) => {
            if !appended.duplicate {
                Metrics::add(&b.metrics.produced_bytes, len as u64);
                let records = appended.last_offset - appended.base_offset + 1;
                handle
                    .stats()
                    .appended(len as u64, u64::try_from(records).unwrap_or(0));
            }
            PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(appended.base_offset)
                .with_log_append_time_ms(appended.log_append_time_ms)
                .with_log_start_offset(log_start)
        }
    }
}

/// Serves a Produce request; `None` when acks=0 asks for no response.
pub(super) async fn produce(
    b: &Broker,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Option<ProduceResponse> {
    let started = std::time::Instant::now();
    let answer = serve(b, ctx, req).await;
    b.metrics.produce_latency.record(started.elapsed());
    answer
}

/// Serves a Produce request; when sampled, each partition's append is
/// traced as a `produce` span.
async fn serve(b: &Broker, ctx: &RequestContext, req: ProduceRequest) -> Option<ProduceResponse> {
    let acks = Acks::from_wire(req.acks);
    // a client's timeout of 0 or less still lets a local append finish
    let timeout = std::time::Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0))
        .max(std::time::Duration::from_secs(1));
    let mut responses = Vec::with_capacity(req.topic_data.len());
    let transactional_id = req
        .transactional_id
        .as_ref()
        .map(|id| id.as_str())
        .filter(|id| !id.is_empty());
    for t in req.topic_data {
        let topic = if ctx.api_version >= 13 {
            b.node.catalog.topic_by_id(t.topic_id)
        } else {
            b.node.catalog.topic(t.name.as_str())
        };
        let name = topic
            .as_deref()
            .map_or(t.name.as_str(), |i| i.name.as_str());
        let parts = if acks.is_none() {
            t.partition_data
                .iter()
                .map(|p| failed(p.index, ResponseError::InvalidRequiredAcks, None))
                .collect()
        } else if transactional_id
            .is_some_and(|id| !ctx.may(b, AclOperation::Write, ResourceType::TransactionalId, id))
        {
            t.partition_data
                .iter()
                .map(|p| {
                    failed(
                        p.index,
                        ResponseError::TransactionalIdAuthorizationFailed,
                        None,
                    )
                })
                .collect()
        } else if !ctx.may(b, AclOperation::Write, ResourceType::Topic, name) {
            t.partition_data
                .iter()
                .map(|p| failed(p.index, ResponseError::TopicAuthorizationFailed, None))
                .collect()
        } else {
            join_all(t.partition_data.into_iter().map(|p| {
                let acks = acks.unwrap_or(Acks::All);
                let span = if sampled() {
                    tracing::info_span!(
                        target: SPAN_TARGET,
                        "produce",
                        topic = name,
                        partition = p.index,
                        bytes = p.records.as_ref().map_or(0, |r| r.len() as i64),
                    )
                } else {
                    tracing::Span::none()
                };
                produce_partition(
                    b,
                    topic.as_deref(),
                    p.index,
                    p.records,
                    acks,
                    timeout,
                    Transactional {
                        id: transactional_id,
                        implicit_add: ctx.api_version >= 12,
                    },
                )
                .instrument(span)
            }))
            .await
        };
        let mut resp = TopicProduceResponse::default()
            .with_name(t.name)
            .with_topic_id(t.topic_id)
            .with_partition_responses(parts);
        if ctx.api_version >= 13 && topic.is_none() {
            for p in &mut resp.partition_responses {
                p.error_code = ResponseError::UnknownTopicId.code();
            }
        }
        responses.push(resp);
    }
    if acks == Some(Acks::None) {
        return None;
    }
    Some(ProduceResponse::default().with_responses(responses))
}
