//! A fetch whose partitions are led by several agents (load-balancer mode).
//!
//! Each other leader gets one sessionless Fetch with its partitions and the
//! client's wait and size limits, and long-polls at home; this agent's own
//! partitions long-poll here. The first part that has data (or an error)
//! hurries the others (their long polls answer at once with what they have),
//! so the client waits as it would on one broker: until something arrived
//! or its `max_wait_ms` passed, never once per leader. The response limit
//! is kept over the whole answer: only the first partition with data may
//! exceed it (Kafka's progress rule); later partitions that do not fit come
//! back empty and are read again next time.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::ResponseError;
use metastore::AgentId;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{long_poll, Item, Outcome};
use crate::broker::Broker;
use crate::forward::client::{ForwardError, Forwarder};
use crate::kafka::api::routing::decode_response;
use crate::kafka::api::RequestContext;
use dataplane::backend::Records;
use dataplane::partition::Isolation;

/// The Fetch version of forwarded reads: names topics, so any client
/// version's request can be forwarded.
const VERSION: i16 = 12;

/// Extra time a forwarded read may take past the client's wait.
const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn request(
    ctx: &RequestContext,
    items: &[&Item],
    max_total: usize,
    min_bytes: usize,
    deadline: Instant,
) -> Result<Bytes, ForwardError> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for it in items {
        if topics.last().is_none_or(|t| t.topic.as_str() != it.topic) {
            topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(it.topic.clone()))),
            );
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(
                FetchPartition::default()
                    .with_partition(it.partition)
                    .with_current_leader_epoch(it.current_leader_epoch)
                    .with_fetch_offset(it.offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(i32::try_from(it.max_bytes).unwrap_or(i32::MAX)),
            );
        }
    }
    let wait = deadline.saturating_duration_since(Instant::now());
    let body = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(i32::try_from(wait.as_millis()).unwrap_or(i32::MAX))
        .with_min_bytes(i32::try_from(min_bytes).unwrap_or(i32::MAX))
        .with_max_bytes(i32::try_from(max_total).unwrap_or(i32::MAX))
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_isolation_level(match items.first().map(|it| it.isolation) {
            Some(Isolation::ReadCommitted) => 1,
            _ => 0,
        })
        .with_topics(topics);
    let mut buf = BytesMut::with_capacity(128);
    RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(VERSION)
        .with_client_id(Some(StrBytes::from_string(ctx.client_id.clone())))
        .encode(&mut buf, ApiKey::Fetch.request_header_version(VERSION))
        .map_err(|e| ForwardError::Encode(e.to_string()))?;
    body.encode(&mut buf, VERSION)
        .map_err(|e| ForwardError::Encode(e.to_string()))?;
    Ok(buf.freeze())
}

/// The owner's answer as one outcome per item (in `items` order).
fn outcomes(items: &[&Item], answer: Result<Option<Bytes>, ForwardError>) -> Vec<Outcome> {
    let unreachable = || Outcome::failed(ResponseError::NotLeaderOrFollower, -1, -1);
    let decoded = answer.and_then(|a| {
        let frame = a.ok_or(ForwardError::NoAnswer)?;
        decode_response::<FetchResponse>(ApiKey::Fetch, VERSION, frame)
    });
    let resp = match decoded {
        Ok(r) if r.error_code == 0 => r,
        Ok(r) => {
            tracing::debug!(error = r.error_code, "a forwarded fetch failed as a whole");
            return items.iter().map(|_| unreachable()).collect();
        }
        Err(e) => {
            tracing::debug!(error = %e, "a forwarded fetch got no answer");
            return items.iter().map(|_| unreachable()).collect();
        }
    };
    let mut found = BTreeMap::new();
    for t in resp.responses {
        for p in t.partitions {
            found.insert((t.topic.to_string(), p.partition_index), p);
        }
    }
    items
        .iter()
        .map(|it| match found.remove(&(it.topic.clone(), it.partition)) {
            Some(p) => Outcome {
                error: (p.error_code != 0)
                    .then(|| ResponseError::try_from_code(p.error_code))
                    .flatten(),
                high_watermark: p.high_watermark,
                last_stable: p.last_stable_offset,
                log_start: p.log_start_offset,
                aborted: p.aborted_transactions.unwrap_or_default(),
                records: Records::Bytes(p.records.unwrap_or_default()),
            },
            None => unreachable(),
        })
        .collect()
}

/// Whether a part's answer ends the whole fetch's wait.
fn satisfies(outcomes: &[Outcome], min_bytes: usize) -> bool {
    let bytes: usize = outcomes.iter().map(|o| o.records.len()).sum();
    bytes >= min_bytes.max(1) || outcomes.iter().any(|o| o.error.is_some())
}

/// Reads `items` here and at their leaders; one outcome per item, in order.
pub(super) async fn gather(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    items: &[Item],
    max_total: usize,
    min_bytes: usize,
    deadline: Instant,
) -> Vec<Outcome> {
    let mut groups: BTreeMap<Option<AgentId>, Vec<usize>> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        groups.entry(it.owner).or_default().push(i);
    }
    let local: Vec<Item> = groups
        .get(&None)
        .map(|idx| idx.iter().filter_map(|&i| items.get(i).cloned()).collect())
        .unwrap_or_default();
    let hurries: Vec<Arc<Notify>> = groups.keys().map(|_| Arc::new(Notify::new())).collect();
    let mut parts: FuturesUnordered<BoxFuture<'_, (usize, Vec<Outcome>)>> = FuturesUnordered::new();
    for (n, (owner, idx)) in groups.iter().enumerate() {
        let hurry = hurries[n].clone();
        match owner {
            None => {
                let local = &local;
                parts.push(Box::pin(async move {
                    let (out, _) =
                        long_poll(b, local, max_total, min_bytes, deadline, Some(&hurry)).await;
                    (n, out)
                }));
            }
            Some(owner) => {
                let owned: Vec<&Item> = idx.iter().filter_map(|&i| items.get(i)).collect();
                let owner = *owner;
                parts.push(Box::pin(async move {
                    let answer = match request(ctx, &owned, max_total, min_bytes, deadline) {
                        Ok(frame) => {
                            let timeout =
                                deadline.saturating_duration_since(Instant::now()) + GRACE;
                            fwd.call(owner, ctx.origin(), &frame, Some(hurry), timeout)
                                .await
                        }
                        Err(e) => Err(e),
                    };
                    (n, outcomes(&owned, answer))
                }));
            }
        }
    }
    let mut answers: Vec<Option<Vec<Outcome>>> = groups.keys().map(|_| None).collect();
    let mut hurried = false;
    while let Some((n, out)) = parts.next().await {
        if !hurried && satisfies(&out, min_bytes) {
            hurried = true;
            for h in &hurries {
                h.notify_one();
            }
        }
        if let Some(slot) = answers.get_mut(n) {
            *slot = Some(out);
        }
    }
    // Back in request order, keeping the response within its limit.
    let mut merged: Vec<Option<Outcome>> = items.iter().map(|_| None).collect();
    for ((_, idx), out) in groups.iter().zip(answers) {
        for (&i, o) in idx.iter().zip(out.unwrap_or_default()) {
            if let Some(slot) = merged.get_mut(i) {
                *slot = Some(o);
            }
        }
    }
    let mut total = 0usize;
    merged
        .into_iter()
        .map(|o| {
            let mut o =
                o.unwrap_or_else(|| Outcome::failed(ResponseError::NotLeaderOrFollower, -1, -1));
            let len = o.records.len();
            if len > 0 && total > 0 && total + len > max_total {
                o.records = Records::empty();
            } else {
                total += len;
            }
            o
        })
        .collect()
}
