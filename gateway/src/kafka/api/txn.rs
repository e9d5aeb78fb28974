//! The transaction coordinator's requests: InitProducerId with a
//! transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
//! TxnOffsetCommit (served by the group's coordinator), DescribeTransactions
//! and ListTransactions.
//!
//! A transactional id is coordinated by the holder of its coordinator slot
//! (FindCoordinator key type 1, as groups); outside load-balancer mode the
//! other agents answer NOT_COORDINATOR, and the holder's writes carry the
//! slot's fence. The records themselves are in the metastore
//! (`metastore::transactions`); markers and completion are in
//! `txn_coordinator.rs`, the adds of clients on transaction version 2 in
//! `txn_implicit.rs`.

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as Listed;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use metastore::acl::{AclOperation, ResourceType};
use metastore::coordinators::SlotFence;
use metastore::transactions::{TxnPartition, TxnRecord, TxnState};
use metastore::{Groups, OffsetCommit, Topics, Transactions};

use super::{s, RequestContext};
use crate::broker::Broker;
use crate::codes;
use dataplane::partition::now_ms;

/// How many times InitProducerId completes an earlier transaction and asks
/// again before answering CONCURRENT_TRANSACTIONS (the client retries).
const INIT_ROUNDS: usize = 3;

/// The fence for this agent's writes on `key`'s transaction: the slot's
/// where this agent holds it; none in load-balancer mode, where any agent
/// serves the transaction (the metastore orders the writes).
fn coordinator_fence(b: &Broker, key: &str) -> Result<Option<SlotFence>, ResponseError> {
    let placement = b
        .node
        .catalog
        .coordinator(key)
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    if i64::try_from(placement.holder.agent).ok() == Some(i64::from(b.config.node_id)) {
        Ok(Some(placement.fence()))
    } else if b.config.load_balanced {
        Ok(None)
    } else {
        Err(ResponseError::NotCoordinator)
    }
}

fn may_write_id(b: &Broker, ctx: &RequestContext, id: &str) -> bool {
    ctx.may(b, AclOperation::Write, ResourceType::TransactionalId, id)
}

fn meta(e: &metastore::MetaError) -> ResponseError {
    codes::meta_error(e)
}

/// InitProducerId for a transactional producer.
pub(super) async fn init_producer_id(
    b: &Broker,
    ctx: &RequestContext,
    id: &str,
    req: &InitProducerIdRequest,
) -> Result<(i64, i16), ResponseError> {
    if !may_write_id(b, ctx, id) {
        return Err(ResponseError::TransactionalIdAuthorizationFailed);
    }
    if req.enable_2_pc || req.keep_prepared_txn {
        return Err(ResponseError::UnsupportedVersion);
    }
    let fence = coordinator_fence(b, id)?;
    let expected = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
    for _ in 0..INIT_ROUNDS {
        let record = b
            .node
            .catalog
            .init_transaction(id, req.transaction_timeout_ms, expected, fence)
            .await
            .map_err(|e| meta(&e))?;
        if record.state.preparing().is_none() {
            return Ok((record.producer_id, record.producer_epoch));
        }
        // the previous producer's transaction must end first
        super::txn_coordinator::complete(b, record).await?;
    }
    Err(ResponseError::ConcurrentTransactions)
}

pub(super) async fn add_partitions_to_txn(
    b: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if ctx.api_version <= 3 {
        let results = add_one(
            b,
            ctx,
            req.v3_and_below_transactional_id.as_str(),
            (
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch,
            ),
            req.v3_and_below_topics,
            false,
            false,
        )
        .await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    // v4+: several transactions, from brokers (CLUSTER_ACTION); from v5 an
    // add (not a check) is one for a client on transaction version 2
    if !ctx.may_on_cluster(b, AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut out = Vec::with_capacity(req.transactions.len());
    for t in req.transactions {
        let results = add_one(
            b,
            ctx,
            t.transactional_id.as_str(),
            (t.producer_id.0, t.producer_epoch),
            t.topics,
            t.verify_only,
            ctx.api_version >= 5,
        )
        .await;
        out.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id)
                .with_topic_results(results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(out)
}

fn answer_all(
    topics: &[AddPartitionsToTxnTopic],
    error: impl Fn(&str, i32) -> Option<ResponseError>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(codes::code(error(t.name.as_str(), p)))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Adds (or with `verify_only` checks) the partitions of one transaction;
/// `implicit`: added for a client on transaction version 2.
async fn add_one(
    b: &Broker,
    ctx: &RequestContext,
    id: &str,
    producer: (i64, i16),
    topics: Vec<AddPartitionsToTxnTopic>,
    verify_only: bool,
    implicit: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    if !may_write_id(b, ctx, id) {
        return answer_all(&topics, |_, _| {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        });
    }
    // per partition: refused by ACL or unknown; the rest are not attempted then
    let refusal = |topic: &str, p: i32| {
        if !ctx.may(b, AclOperation::Write, ResourceType::Topic, topic) {
            return Some(ResponseError::TopicAuthorizationFailed);
        }
        let known = b
            .node
            .catalog
            .topic(topic)
            .is_some_and(|t| p >= 0 && (p as usize) < t.partitions.len());
        (!known).then_some(ResponseError::UnknownTopicOrPartition)
    };
    let refused = topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|&p| refusal(t.name.as_str(), p).is_some())
    });
    if refused {
        return answer_all(&topics, |t, p| {
            Some(refusal(t, p).unwrap_or(ResponseError::OperationNotAttempted))
        });
    }
    let partitions: Vec<TxnPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|&p| TxnPartition {
                topic: t.name.to_string(),
                partition: p,
            })
        })
        .collect();
    if verify_only {
        let record = b.node.catalog.transaction(id);
        return answer_all(&topics, |t, p| {
            let part = TxnPartition {
                topic: t.to_owned(),
                partition: p,
            };
            let added = record
                .as_ref()
                .is_some_and(|r| r.admits(producer.0, producer.1, &part));
            (!added).then_some(ResponseError::InvalidTxnState)
        });
    }
    let error = match coordinator_fence(b, id) {
        Err(e) => Some(e),
        Ok(fence) => b
            .node
            .catalog
            .add_txn_partitions(id, producer, partitions, fence, implicit)
            .await
            .err()
            .map(|e| meta(&e)),
    };
    answer_all(&topics, |_, _| error)
}

pub(super) async fn add_offsets_to_txn(
    b: &Broker,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let id = req.transactional_id.as_str();
    let group = req.group_id.as_str();
    let error = if !may_write_id(b, ctx, id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !ctx.may(b, AclOperation::Read, ResourceType::Group, group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        match coordinator_fence(b, id) {
            Err(e) => Some(e),
            Ok(fence) => b
                .node
                .catalog
                .add_txn_group(id, (req.producer_id.0, req.producer_epoch), group, fence)
                .await
                .err()
                .map(|e| meta(&e)),
        }
    };
    AddOffsetsToTxnResponse::default().with_error_code(codes::code(error))
}

/// EndTxn. From v5 (transaction version 2) the outcome bumps the producer's
/// epoch, and the answer names the producer id and epoch the client goes on
/// with (a new id when the epoch was exhausted).
pub(super) async fn end_txn(
    b: &Broker,
    ctx: &RequestContext,
    req: EndTxnRequest,
) -> EndTxnResponse {
    let id = req.transactional_id.as_str();
    let producer = (req.producer_id.0, req.producer_epoch);
    let bump_epoch = ctx.api_version >= 5;
    let resp = EndTxnResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if !may_write_id(b, ctx, id) {
        return resp.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let fence = match coordinator_fence(b, id) {
        Ok(f) => f,
        Err(e) => return resp.with_error_code(e.code()),
    };
    let record = match b
        .node
        .catalog
        .end_transaction(id, producer, req.committed, fence, bump_epoch)
        .await
    {
        Ok(r) => r,
        Err(e) => return resp.with_error_code(meta(&e).code()),
    };
    // The outcome is durable once logged; the markers follow here, so that
    // read_committed consumers see a commit by the time it is answered. If
    // they cannot all be written now the sweep finishes them, and the
    // producer's next transaction waits (CONCURRENT_TRANSACTIONS) until then.
    let (producer_id, epoch) = match super::txn_coordinator::complete(b, record.clone()).await {
        Ok(done) => (done.producer_id, done.producer_epoch),
        Err(e) => {
            tracing::debug!(transactional_id = id, error = ?e, "transaction markers left to the sweep");
            record.producer_after_completion()
        }
    };
    resp.with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
}

/// A partition of a TxnOffsetCommit and its refusal, if any.
type PartitionAnswer = (i32, Option<ResponseError>);

pub(super) async fn txn_offset_commit(
    b: &Broker,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let id = req.transactional_id.as_str();
    let group = req.group_id.to_string();
    let request_error = if !may_write_id(b, ctx, id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !ctx.may(b, AclOperation::Read, ResourceType::Group, &group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    // KIP-447: a member and generation are checked as an OffsetCommit's
    // are, so a zombie of an older generation cannot commit; without them
    // (older clients) only the producer's epoch fences.
    let mut fence = None;
    let request_error = match request_error {
        Some(e) => Some(e),
        None => {
            let check = b
                .node
                .groups
                .validate_commit(
                    group.clone(),
                    req.member_id.to_string(),
                    req.group_instance_id.as_ref().map(|x| x.to_string()),
                    req.generation_id,
                )
                .await;
            match check {
                Ok(Ok(f)) => {
                    fence = Some(f);
                    None
                }
                Ok(Err(e)) => Some(codes::group_error(e)),
                Err(_) => Some(ResponseError::CoordinatorNotAvailable),
            }
        }
    };
    let now = now_ms();
    let mut offsets = Vec::new();
    let mut answers: Vec<(TopicName, Vec<PartitionAnswer>)> = Vec::new();
    for t in &req.topics {
        let name = t.name.to_string();
        let readable = ctx.may(b, AclOperation::Read, ResourceType::Topic, &name);
        let mut parts = Vec::new();
        for p in &t.partitions {
            let error = if request_error.is_some() {
                request_error
            } else if !readable {
                Some(ResponseError::TopicAuthorizationFailed)
            } else {
                offsets.push(OffsetCommit {
                    topic: name.clone(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    commit_time_ms: now,
                });
                None
            };
            parts.push((p.partition_index, error));
        }
        answers.push((t.name.clone(), parts));
    }
    let mut results = Vec::new().into_iter();
    let mut whole = None;
    if !offsets.is_empty() {
        match b
            .node
            .catalog
            .txn_offset_commit(
                id,
                (req.producer_id.0, req.producer_epoch),
                &group,
                offsets,
                fence,
                // v5 (transaction version 2): the group joins the
                // transaction here, with no AddOffsetsToTxn before
                ctx.api_version >= 5,
            )
            .await
        {
            Ok(r) => results = r.into_iter(),
            Err(e) => whole = Some(meta(&e)),
        }
    }
    let topics = answers
        .into_iter()
        .map(|(name, parts)| {
            let partitions = parts
                .into_iter()
                .map(|(index, error)| {
                    let error = error
                        .or(whole)
                        .or_else(|| results.next().and_then(|r| r.err()).map(|e| meta(&e)));
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(codes::code(error))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

fn described(r: &TxnRecord) -> TransactionState {
    let mut topics: Vec<TopicData> = Vec::new();
    for p in &r.partitions {
        match topics.last_mut() {
            Some(t) if t.topic.as_str() == p.topic => t.partitions.push(p.partition),
            _ => topics.push(
                TopicData::default()
                    .with_topic(TopicName(s(p.topic.clone())))
                    .with_partitions(vec![p.partition]),
            ),
        }
    }
    let ongoing = !matches!(
        r.state,
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
    );
    TransactionState::default()
        .with_transactional_id(TransactionalId(s(r.transactional_id.clone())))
        .with_transaction_state(s(r.state.name()))
        .with_transaction_timeout_ms(r.timeout_ms)
        .with_transaction_start_time_ms(if ongoing { r.started_ms } else { -1 })
        .with_producer_id(ProducerId(r.producer_id))
        .with_producer_epoch(r.producer_epoch)
        .with_topics(topics)
}

pub(super) fn describe_transactions(
    b: &Broker,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let fail = |e: ResponseError| {
                TransactionState::default()
                    .with_transactional_id(id.clone())
                    .with_error_code(e.code())
                    .with_transaction_state(s(""))
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1)
            };
            if !ctx.may(
                b,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                id.as_str(),
            ) {
                return fail(ResponseError::TransactionalIdAuthorizationFailed);
            }
            if let Err(e) = coordinator_fence(b, id.as_str()) {
                return fail(e);
            }
            match b.node.catalog.transaction(id.as_str()) {
                Some(r) => described(&r),
                None => fail(ResponseError::TransactionalIdNotFound),
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// Whether ListTransactions on this agent names the transaction `id`: the
/// one whose coordinator slot it holds. Kafka's brokers each list the
/// transactions they coordinate and the admin client asks every broker and
/// merges the answers, so the records being shared, listing them all on
/// every agent would name each transaction once per agent. Behind a load
/// balancer, the one broker clients see lists them all; so does every agent
/// while the slots are not placed yet.
fn listed_here(b: &Broker, id: &str) -> bool {
    b.config.load_balanced
        || b.node.catalog.coordinator(id).is_none_or(|placement| {
            i64::try_from(placement.holder.agent).ok() == Some(i64::from(b.config.node_id))
        })
}

/// The transactions this agent coordinates ([`listed_here`]), filtered as
/// asked.
pub(super) fn list_transactions(
    b: &Broker,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    const STATES: [TxnState; 6] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ];
    let unknown: Vec<_> = req
        .state_filters
        .iter()
        .filter(|f| !STATES.iter().any(|st| st.name() == f.as_str()))
        .cloned()
        .collect();
    let pattern = match req
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        None => None,
        Some(p) => match regex::Regex::new(&format!("^(?:{p})$")) {
            Ok(r) => Some(r),
            Err(_) => {
                return ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code())
            }
        },
    };
    let now = now_ms();
    let listed = b
        .node
        .catalog
        .transactions()
        .into_iter()
        .filter(|r| {
            req.state_filters.is_empty()
                || req
                    .state_filters
                    .iter()
                    .any(|f| f.as_str() == r.state.name())
        })
        .filter(|r| {
            req.producer_id_filters.is_empty()
                || req.producer_id_filters.iter().any(|p| p.0 == r.producer_id)
        })
        .filter(|r| {
            // v1: only transactions running longer than this
            req.duration_filter < 0
                || (r.state == TxnState::Ongoing
                    && now.saturating_sub(r.started_ms) > req.duration_filter)
        })
        .filter(|r| {
            pattern
                .as_ref()
                .is_none_or(|p| p.is_match(&r.transactional_id))
        })
        .filter(|r| listed_here(b, &r.transactional_id))
        .filter(|r| {
            ctx.may(
                b,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &r.transactional_id,
            )
        })
        .map(|r| {
            Listed::default()
                .with_transactional_id(TransactionalId(s(r.transactional_id.clone())))
                .with_producer_id(ProducerId(r.producer_id))
                .with_transaction_state(s(r.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed)
}
