//! Transactions over the native protocol, served by the transaction
//! coordinator Kafka clients use: each operation builds the Kafka request
//! it stands for (InitProducerId v4, AddPartitionsToTxn v3,
//! AddOffsetsToTxn and TxnOffsetCommit v3, EndTxn v3) and hands it to the
//! Kafka handler (`kafka/api/txn.rs`) through the bridge. A transactional
//! id is therefore one id to both protocols: the same metastore record,
//! fencing, timeouts, markers and completion.
//!
//! The coordinator is the holder of the id's coordinator slot, as for
//! Kafka's FindCoordinator with key type 1; FindTxnCoordinator names it at
//! its native address, and the other servers answer NOT_COORDINATOR (in
//! load-balancer mode any server serves the id).

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use metastore::acl::{AclOperation as Op, ResourceType as Rt};
use sdk::proto::{self, ErrorCode};

use super::shared::partition_index;
use crate::broker::Broker;
use crate::kafka::api::{bridge, s, Client};
use crate::native::codes::from_kafka_for_txn;
use crate::native::groups;

fn answer(correlation: u32, code: i16, what: impl FnOnce() -> String) -> proto::TxnResponse {
    let error = from_kafka_for_txn(code);
    proto::TxnResponse {
        correlation,
        error,
        message: if error == ErrorCode::NONE {
            String::new()
        } else {
            what()
        },
    }
}

fn refused(correlation: u32, error: ErrorCode, message: String) -> proto::TxnResponse {
    proto::TxnResponse {
        correlation,
        error,
        message,
    }
}

/// The coordinator of a transactional id, as [`groups::find_coordinator`]
/// finds a group's (ids and groups share the coordinator slots).
pub(super) fn find_coordinator(
    b: &Broker,
    c: &Client,
    f: proto::FindTxnCoordinator,
) -> proto::FindTxnCoordinatorResponse {
    let refuse = |error| proto::FindTxnCoordinatorResponse {
        correlation: f.correlation,
        error,
        ..Default::default()
    };
    if f.transactional_id.is_empty() {
        return refuse(ErrorCode::INVALID_REQUEST);
    }
    if !bridge::may(b, c, Op::Describe, Rt::TransactionalId, &f.transactional_id) {
        return refuse(ErrorCode::UNAUTHORIZED);
    }
    let found = groups::find_coordinator(
        b,
        proto::FindCoordinator {
            correlation: f.correlation,
            group: f.transactional_id,
        },
    );
    proto::FindTxnCoordinatorResponse {
        correlation: found.correlation,
        error: found.error,
        node_id: found.node_id,
        host: found.host,
        port: found.port,
    }
}

pub(super) async fn init(
    b: &Broker,
    c: &Client,
    client_id: &str,
    r: proto::InitTxn,
) -> proto::InitTxnResponse {
    if r.transactional_id.is_empty() {
        return proto::InitTxnResponse {
            correlation: r.correlation,
            error: ErrorCode::INVALID_REQUEST,
            producer_id: -1,
            producer_epoch: -1,
            message: "a transactional producer needs a transactional id".into(),
        };
    }
    let resp = bridge::init_producer_id(
        b,
        c,
        client_id,
        InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(r.transactional_id.clone()))))
            .with_transaction_timeout_ms(i32::try_from(r.timeout_ms).unwrap_or(i32::MAX))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
    .await;
    let error = from_kafka_for_txn(resp.error_code);
    proto::InitTxnResponse {
        correlation: r.correlation,
        error,
        producer_id: resp.producer_id.0,
        producer_epoch: resp.producer_epoch,
        message: if error == ErrorCode::NONE {
            String::new()
        } else {
            format!("initializing transactional id {:?}", r.transactional_id)
        },
    }
}

pub(super) async fn add_partitions(
    b: &Broker,
    c: &Client,
    client_id: &str,
    r: proto::AddTxnPartitions,
) -> proto::AddTxnPartitionsResponse {
    let p = &r.producer;
    let topics = r
        .topics
        .iter()
        .map(|(name, partitions)| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s(name.clone())))
                .with_partitions(partitions.iter().map(|&q| partition_index(q)).collect())
        })
        .collect();
    let resp = bridge::add_partitions_to_txn(
        b,
        c,
        client_id,
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(p.transactional_id.clone())))
            .with_v3_and_below_producer_id(ProducerId(p.producer_id))
            .with_v3_and_below_producer_epoch(p.producer_epoch)
            .with_v3_and_below_topics(topics),
    )
    .await;
    // the first refusal that is not "not attempted" (55) says why
    let failed = resp
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(move |q| (t.name.as_str(), q.partition_index, q.partition_error_code))
        })
        .filter(|(_, _, code)| *code != 0)
        .min_by_key(|(_, _, code)| *code == 55);
    let out = match failed {
        None => answer(r.correlation, 0, String::new),
        Some((topic, partition, code)) => answer(r.correlation, code, || {
            format!(
                "adding {topic}/{partition} to the transaction of {:?}",
                p.transactional_id
            )
        }),
    };
    proto::AddTxnPartitionsResponse(out)
}

/// AddOffsetsToTxn: the group joins the transaction.
pub(super) async fn add_offsets(
    b: &Broker,
    c: &Client,
    client_id: &str,
    r: proto::AddTxnOffsets,
) -> proto::AddTxnOffsetsResponse {
    let p = &r.producer;
    if r.group.is_empty() {
        return proto::AddTxnOffsetsResponse(refused(
            r.correlation,
            ErrorCode::INVALID_GROUP,
            "offsets are committed for a group: the group id is empty".into(),
        ));
    }
    let added = bridge::add_offsets_to_txn(
        b,
        c,
        client_id,
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s(p.transactional_id.clone())))
            .with_producer_id(ProducerId(p.producer_id))
            .with_producer_epoch(p.producer_epoch)
            .with_group_id(GroupId(s(r.group.clone()))),
    )
    .await;
    proto::AddTxnOffsetsResponse(answer(r.correlation, added.error_code, || {
        format!(
            "adding group {:?} to the transaction of {:?}",
            r.group, p.transactional_id
        )
    }))
}

/// TxnOffsetCommit, at the group's coordinator: the offsets are held in
/// the transaction until it ends.
pub(super) async fn offset_commit(
    b: &Broker,
    c: &Client,
    client_id: &str,
    r: proto::TxnOffsetCommit,
) -> proto::TxnOffsetCommitResponse {
    let p = &r.producer;
    // The group's coordinator takes the offsets; ids and groups may have
    // different coordinators.
    if !groups::coordinates(b, &r.group) {
        return proto::TxnOffsetCommitResponse(refused(
            r.correlation,
            ErrorCode::NOT_COORDINATOR,
            format!(
                "this server does not coordinate group {:?}: send the offsets to its coordinator (FindCoordinator)",
                r.group
            ),
        ));
    }
    let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in &r.offsets {
        let part = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(partition_index(*partition))
            .with_committed_offset(*offset)
            .with_committed_leader_epoch(-1);
        match topics.iter_mut().find(|t| t.name.as_str() == topic) {
            Some(t) => t.partitions.push(part),
            None => topics.push(
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(topic.clone())))
                    .with_partitions(vec![part]),
            ),
        }
    }
    let resp = bridge::txn_offset_commit(
        b,
        c,
        client_id,
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s(p.transactional_id.clone())))
            .with_group_id(GroupId(s(r.group.clone())))
            .with_producer_id(ProducerId(p.producer_id))
            .with_producer_epoch(p.producer_epoch)
            .with_generation_id(r.generation)
            .with_member_id(s(r.member_id.clone()))
            .with_topics(topics),
    )
    .await;
    let failed = resp
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |q| (t.name.as_str(), q.partition_index, q.error_code))
        })
        .find(|(_, _, code)| *code != 0);
    let out = match failed {
        None => answer(r.correlation, 0, String::new),
        Some((topic, partition, code)) => answer(r.correlation, code, || {
            format!(
                "committing the offset of {topic}/{partition} for group {:?} in the transaction of {:?}",
                r.group, p.transactional_id
            )
        }),
    };
    proto::TxnOffsetCommitResponse(out)
}

pub(super) async fn end(
    b: &Broker,
    c: &Client,
    client_id: &str,
    r: proto::EndTxn,
) -> proto::EndTxnResponse {
    let p = &r.producer;
    let resp = bridge::end_txn(
        b,
        c,
        client_id,
        EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(p.transactional_id.clone())))
            .with_producer_id(ProducerId(p.producer_id))
            .with_producer_epoch(p.producer_epoch)
            .with_committed(r.commit),
    )
    .await;
    proto::EndTxnResponse(answer(r.correlation, resp.error_code, || {
        format!(
            "{} the transaction of {:?}",
            if r.commit { "committing" } else { "aborting" },
            p.transactional_id
        )
    }))
}
