//! Load-balancer mode: requests for data or groups another agent owns are
//! forwarded to it (see [`crate::forward`]).
//!
//! A request naming partitions (Produce, ListOffsets, OffsetForLeaderEpoch,
//! DeleteRecords) is split by partition leader: this agent serves its own
//! partitions, each other leader gets a request of the same API and version
//! holding only its partitions, and the answers are put back together in
//! the order the client asked. Group requests go to the groups'
//! coordinators (`group_routing.rs`); [`super::route`] decides which way a
//! request goes. Fetch splits the same way inside [`super::fetch`], after
//! fetch sessions are applied. An owner that cannot be reached answers for
//! its partitions with Kafka's retriable errors (NOT_LEADER_OR_FOLLOWER,
//! COORDINATOR_NOT_AVAILABLE), and the client retries as it would against
//! a Kafka broker that moved; a produce is first sent again to the leader
//! named now ([`super::produce_forward`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::delete_records_request::DeleteRecordsTopic;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::list_offsets_request::ListOffsetsTopic;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderTopic;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use metastore::{AgentId, TopicInfo, Topics};
use uuid::Uuid;

use super::RequestContext;
use crate::broker::Broker;
use crate::forward::client::{ForwardError, Forwarder};
use crate::kafka::response::ResponseFrame;

/// What routing decided for a request.
pub(super) enum Routed {
    /// This agent serves it.
    Local(Box<RequestKind>),
    /// Answered by forwarding (`None`: no response is due).
    Answered(Option<ResponseFrame>),
}

/// Longest a forwarded request other than a group join may take.
pub(super) const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// The agent leading `partition` of `topic`, when it is not this one.
pub(super) fn remote_leader(
    b: &Broker,
    topic: Option<&TopicInfo>,
    partition: i32,
) -> Option<AgentId> {
    let p = usize::try_from(partition)
        .ok()
        .and_then(|i| topic?.partitions.get(i))?;
    p.leader.filter(|_| !b.node.leads(p))
}

fn lookup(b: &Broker, by_id: bool, name: &str, id: Uuid) -> Option<Arc<TopicInfo>> {
    if by_id {
        b.node.catalog.topic_by_id(id)
    } else {
        b.node.catalog.topic(name)
    }
}

/// A request frame of `api` at the client's version, for `owner`.
fn request_frame<R: Encodable>(
    ctx: &RequestContext,
    header: &RequestHeader,
    api: ApiKey,
    body: &R,
) -> Result<Bytes, ForwardError> {
    let v = ctx.api_version;
    let mut buf = BytesMut::with_capacity(256);
    header
        .encode(&mut buf, api.request_header_version(v))
        .map_err(|e| ForwardError::Encode(e.to_string()))?;
    body.encode(&mut buf, v)
        .map_err(|e| ForwardError::Encode(e.to_string()))?;
    Ok(buf.freeze())
}

/// Decodes an owner's response frame of `api` at `version`.
pub(super) fn decode_response<R: Decodable>(
    api: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<R, ForwardError> {
    ResponseHeader::decode(&mut frame, api.response_header_version(version))
        .map_err(|e| ForwardError::Decode(e.to_string()))?;
    R::decode(&mut frame, version).map_err(|e| ForwardError::Decode(e.to_string()))
}

/// Sends `body` to `owner` and decodes its answer (`Ok(None)`: none due).
pub(super) async fn call<Q: Encodable, R: Decodable>(
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    api: ApiKey,
    owner: AgentId,
    body: &Q,
    timeout: Duration,
) -> Result<Option<R>, ForwardError> {
    let frame = request_frame(ctx, header, api, body)?;
    match fwd.call(owner, ctx.origin(), &frame, None, timeout).await? {
        Some(resp) => decode_response(api, ctx.api_version, resp).map(Some),
        None => Ok(None),
    }
}

/// A topic entry of a request or response that lists partitions.
pub(super) trait Topic: Default {
    type Part;
    fn name(&self) -> &str;
    fn id(&self) -> Uuid;
    fn named(name: &TopicName, id: Uuid) -> Self;
    fn parts(&mut self) -> &mut Vec<Self::Part>;
    fn index(p: &Self::Part) -> i32;
}

macro_rules! topic_entry {
    ($t:ty, $part:ty, $name:ident, $parts:ident, $index:ident $(, $id:ident)?) => {
        impl Topic for $t {
            type Part = $part;
            fn name(&self) -> &str {
                self.$name.as_str()
            }
            fn id(&self) -> Uuid {
                $(return self.$id;)?
                #[allow(unreachable_code)]
                Uuid::nil()
            }
            fn named(name: &TopicName, id: Uuid) -> Self {
                let mut t = <$t>::default();
                t.$name = name.clone();
                $(t.$id = id;)?
                let _ = id;
                t
            }
            fn parts(&mut self) -> &mut Vec<$part> {
                &mut self.$parts
            }
            fn index(p: &$part) -> i32 {
                p.$index
            }
        }
    };
}

topic_entry!(
    TopicProduceData,
    produce_request::PartitionProduceData,
    name,
    partition_data,
    index,
    topic_id
);
topic_entry!(
    TopicProduceResponse,
    PartitionProduceResponse,
    name,
    partition_responses,
    index,
    topic_id
);
topic_entry!(
    ListOffsetsTopic,
    list_offsets_request::ListOffsetsPartition,
    name,
    partitions,
    partition_index
);
topic_entry!(
    ListOffsetsTopicResponse,
    ListOffsetsPartitionResponse,
    name,
    partitions,
    partition_index
);
topic_entry!(
    OffsetForLeaderTopic,
    offset_for_leader_epoch_request::OffsetForLeaderPartition,
    topic,
    partitions,
    partition
);
topic_entry!(
    OffsetForLeaderTopicResult,
    EpochEndOffset,
    topic,
    partitions,
    partition
);
topic_entry!(
    DeleteRecordsTopic,
    delete_records_request::DeleteRecordsPartition,
    name,
    partitions,
    partition_index
);
topic_entry!(
    DeleteRecordsTopicResult,
    DeleteRecordsPartitionResult,
    name,
    partitions,
    partition_index
);
topic_entry!(
    describe_producers_response::TopicResponse,
    describe_producers_response::PartitionResponse,
    name,
    partitions,
    partition_index
);

/// DescribeProducers names its partitions by bare index.
impl Topic for describe_producers_request::TopicRequest {
    type Part = i32;
    fn name(&self) -> &str {
        self.name.as_str()
    }
    fn id(&self) -> Uuid {
        Uuid::nil()
    }
    fn named(name: &TopicName, _id: Uuid) -> Self {
        Self::default().with_name(name.clone())
    }
    fn parts(&mut self) -> &mut Vec<i32> {
        &mut self.partition_indexes
    }
    fn index(p: &i32) -> i32 {
        *p
    }
}

/// How a topic is matched between request and answer.
fn same_topic(by_id: bool, a: (&str, Uuid), b: (&str, Uuid)) -> bool {
    if by_id {
        a.1 == b.1
    } else {
        a.0 == b.0
    }
}

/// The partitions of `topics` split by leader: those served here, and those
/// of each other leader. `None` when every partition is served here.
#[allow(clippy::type_complexity)]
fn split<T: Topic>(
    b: &Broker,
    by_id: bool,
    topics: &mut Vec<T>,
) -> Option<(Vec<T>, BTreeMap<AgentId, Vec<T>>)> {
    let owners: Vec<Vec<Option<AgentId>>> = topics
        .iter_mut()
        .map(|t| {
            let info = lookup(b, by_id, t.name(), t.id());
            let indexes: Vec<i32> = t.parts().iter().map(T::index).collect();
            indexes
                .into_iter()
                .map(|i| remote_leader(b, info.as_deref(), i))
                .collect()
        })
        .collect();
    if owners.iter().flatten().all(Option::is_none) {
        return None;
    }
    let mut local = Vec::new();
    let mut remote: BTreeMap<AgentId, Vec<T>> = BTreeMap::new();
    for (mut t, owners) in std::mem::take(topics).into_iter().zip(owners) {
        let name = TopicName(super::s(t.name()));
        let id = t.id();
        let mut here = T::named(&name, id);
        for (p, owner) in std::mem::take(t.parts()).into_iter().zip(owners) {
            let dest = match owner {
                None => &mut here,
                Some(o) => {
                    let list = remote.entry(o).or_default();
                    if !list
                        .last()
                        .is_some_and(|l| same_topic(by_id, (l.name(), l.id()), (name.as_str(), id)))
                    {
                        list.push(T::named(&name, id));
                    }
                    match list.last_mut() {
                        Some(l) => l,
                        None => continue,
                    }
                }
            };
            dest.parts().push(p);
        }
        if !here.parts().is_empty() {
            local.push(here);
        }
    }
    Some((local, remote))
}

/// The request's layout: each topic with its partition indexes, in order.
fn layout<T: Topic>(topics: &mut [T]) -> Vec<(String, Uuid, Vec<i32>)> {
    topics
        .iter_mut()
        .map(|t| {
            let parts = t.parts().iter().map(T::index).collect();
            (t.name().to_string(), t.id(), parts)
        })
        .collect()
}

/// The answers put back in the request's order; a partition no answer
/// covers gets `missing(index)`.
fn merge<R: Topic>(
    by_id: bool,
    layout: &[(String, Uuid, Vec<i32>)],
    answers: Vec<R>,
    missing: impl Fn(i32) -> R::Part,
) -> Vec<R> {
    let mut found: Vec<((String, Uuid), i32, R::Part)> = Vec::new();
    for mut t in answers {
        let key = (t.name().to_string(), t.id());
        for p in std::mem::take(t.parts()) {
            found.push((key.clone(), R::index(&p), p));
        }
    }
    layout
        .iter()
        .map(|(name, id, parts)| {
            let mut t = R::named(&TopicName(super::s(name.clone())), *id);
            for &i in parts {
                let pos = found.iter().position(|(k, pi, _)| {
                    *pi == i && same_topic(by_id, (k.0.as_str(), k.1), (name, *id))
                });
                let part = match pos {
                    Some(pos) => found.swap_remove(pos).2,
                    None => missing(i),
                };
                t.parts().push(part);
            }
            t
        })
        .collect()
}

/// A request for partitions split by leader: `Err(req)` when this agent
/// leads them all (serve it as usual), else the answer's topics in the
/// order the client asked, `unreachable` standing in for partitions whose
/// leader did not answer. `serve_here` serves this agent's share.
#[allow(clippy::too_many_arguments)]
pub(super) async fn split_by_leader<Q, T, A, R, Fut>(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    api: ApiKey,
    by_id: bool,
    mut req: Q,
    topics: fn(&mut Q) -> &mut Vec<T>,
    serve_here: impl FnOnce(Q) -> Fut,
    answer_topics: fn(A) -> Vec<R>,
    unreachable: fn(i32) -> R::Part,
    timeout: Duration,
) -> Result<Vec<R>, Q>
where
    Q: Clone + Encodable,
    T: Topic,
    A: Decodable,
    R: Topic,
    Fut: std::future::Future<Output = Vec<R>>,
{
    let layout = layout(topics(&mut req));
    let Some((local, remote)) = split(b, by_id, topics(&mut req)) else {
        return Err(req);
    };
    let here = (!local.is_empty()).then(|| {
        let mut r = req.clone();
        *topics(&mut r) = local;
        r
    });
    let local_answer = async {
        match here {
            Some(r) => serve_here(r).await,
            None => Vec::new(),
        }
    };
    let remote_answers = futures::future::join_all(remote.into_iter().map(|(owner, t)| {
        let mut r = req.clone();
        *topics(&mut r) = t;
        async move {
            let answer = call::<_, A>(fwd, ctx, header, api, owner, &r, timeout).await;
            if let Err(e) = &answer {
                tracing::debug!(owner, ?api, error = %e, "a forwarded request failed");
            }
            answer
        }
    }));
    let (mut answered, remote_answers) = tokio::join!(local_answer, remote_answers);
    answered.extend(
        remote_answers
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(answer_topics),
    );
    Ok(merge(by_id, &layout, answered, unreachable))
}

#[cfg(test)]
#[path = "routing_tests.rs"]
mod tests;
