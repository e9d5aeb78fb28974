//! Produce in load-balancer mode: each partition's batch goes to its
//! leader (see [`super::routing`]), and a partition the leader refused
//! because leadership moved is sent again to the leader the metastore
//! names now.
//!
//! A client behind the load balancer sees one broker that never moves, so
//! NOT_LEADER_OR_FOLLOWER would only make it wait for a metadata refresh
//! that shows nothing new. When a leader hands its partitions over (a
//! controlled shutdown, a preferred leader's return) or cannot be reached,
//! this agent re-reads the leader from its metastore view and forwards the
//! refused partitions again, backing off from 10 ms to 200 ms, for at most
//! half the request's timeout (10 s at most); what is still refused then
//! is answered as before, and the client retries as it would against Kafka.
//!
//! Sending a batch again is what the client would do on that answer: an
//! idempotent producer's retry is recognised by the new leader, and no
//! partition that was acknowledged is sent again.

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, RequestHeader, RequestKind,
};
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::routing::{split_by_leader, Routed};
use super::{DispatchError, RequestContext};
use crate::broker::Broker;
use crate::forward::client::Forwarder;

/// The first pause before a refused partition is sent again, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(200);
/// The longest a produce is retried at new leaders.
const MAX_RETRY_WINDOW: Duration = Duration::from_secs(10);

fn unreachable(index: i32) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(ResponseError::NotLeaderOrFollower.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(Some(super::s(
            "the partition's leader could not be reached; retry",
        )))
}

/// A topic as requests and answers name it: by id from Produce v13, else by name.
fn key(by_id: bool, name: &str, id: Uuid) -> (String, Uuid) {
    if by_id {
        (String::new(), id)
    } else {
        (name.to_owned(), Uuid::nil())
    }
}

/// Sends `r` split by leader: `Err(r)` when this agent leads every
/// partition, else the answers in the order asked.
async fn send(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    r: ProduceRequest,
    timeout: Duration,
) -> Result<Vec<TopicProduceResponse>, ProduceRequest> {
    split_by_leader(
        b,
        fwd,
        ctx,
        header,
        ApiKey::Produce,
        ctx.api_version >= 13,
        r,
        |r| &mut r.topic_data,
        |r| async move {
            super::produce::produce(b, ctx, r)
                .await
                .map(|a| a.responses)
                .unwrap_or_default()
        },
        |a: ProduceResponse| a.responses,
        unreachable,
        timeout,
    )
    .await
}

/// The partitions answered NOT_LEADER_OR_FOLLOWER.
fn refused(by_id: bool, topics: &[TopicProduceResponse]) -> BTreeSet<((String, Uuid), i32)> {
    let code = ResponseError::NotLeaderOrFollower.code();
    topics
        .iter()
        .flat_map(|t| {
            let k = key(by_id, t.name.as_str(), t.topic_id);
            t.partition_responses
                .iter()
                .filter(move |p| p.error_code == code)
                .map(move |p| (k.clone(), p.index))
        })
        .collect()
}

/// `original` with only the partitions in `keep`.
fn subset(
    by_id: bool,
    original: &ProduceRequest,
    keep: &BTreeSet<((String, Uuid), i32)>,
) -> ProduceRequest {
    let mut r = original.clone();
    for t in &mut r.topic_data {
        let k = key(by_id, t.name.as_str(), t.topic_id);
        t.partition_data
            .retain(|p| keep.contains(&(k.clone(), p.index)));
    }
    r.topic_data.retain(|t| !t.partition_data.is_empty());
    r
}

/// Puts the answers of a retry in place of the earlier ones.
fn replace(by_id: bool, topics: &mut [TopicProduceResponse], answers: Vec<TopicProduceResponse>) {
    for a in answers {
        let k = key(by_id, a.name.as_str(), a.topic_id);
        let Some(t) = topics
            .iter_mut()
            .find(|t| key(by_id, t.name.as_str(), t.topic_id) == k)
        else {
            continue;
        };
        for p in a.partition_responses {
            if let Some(old) = t
                .partition_responses
                .iter_mut()
                .find(|o| o.index == p.index)
            {
                *old = p;
            }
        }
    }
}

/// Routes a client's Produce (load-balancer mode).
pub(super) async fn route(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    r: ProduceRequest,
) -> Result<Routed, DispatchError> {
    let started = Instant::now();
    let acks_none = r.acks == 0;
    let asked = Duration::from_millis(u64::try_from(r.timeout_ms).unwrap_or(0));
    let timeout = asked.max(Duration::from_secs(1)) + Duration::from_secs(5);
    let retry_until = started + (asked / 2).min(MAX_RETRY_WINDOW);
    let by_id = ctx.api_version >= 13;
    // Bytes inside: a clone shares the batches
    let original = (!acks_none).then(|| r.clone());
    let mut topics = match send(b, fwd, ctx, header, r, timeout).await {
        Err(r) => return Ok(Routed::Local(Box::new(RequestKind::Produce(r)))),
        Ok(topics) => topics,
    };
    let Some(original) = original else {
        return Ok(Routed::Answered(None));
    };
    let mut backoff = FIRST_BACKOFF;
    loop {
        let again = refused(by_id, &topics);
        if again.is_empty() || Instant::now() + backoff >= retry_until {
            break;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        let retry = subset(by_id, &original, &again);
        let left = retry_until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let answers = match send(b, fwd, ctx, header, retry, left).await {
            Ok(answers) => answers,
            // this agent leads them all now
            Err(r) => super::produce::produce(b, ctx, r)
                .await
                .map(|a| a.responses)
                .unwrap_or_default(),
        };
        replace(by_id, &mut topics, answers);
    }
    let mut resp = ProduceResponse::default().with_responses(topics);
    super::leader_hints::produce(b, ctx.api_version, ctx.zone.as_deref(), &mut resp);
    super::encode_frame(header, ApiKey::Produce, &resp.into()).map(|f| Routed::Answered(Some(f)))
}

#[cfg(test)]
#[path = "produce_forward_tests.rs"]
mod tests;
