//! ListOffsets, OffsetForLeaderEpoch, DeleteRecords and DescribeProducers.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeProducersRequest,
    DescribeProducersResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProducerId,
};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::Broker;
use crate::codes;
use dataplane::partition::{OffsetQuery, PartitionHandle};
use metastore::acl::{AclOperation, ResourceType};
use metastore::{TopicInfo, Topics};

/// Finds a partition's task and its current leader epoch, or the error to
/// report; the client must be allowed `operation` on the topic `name`.
async fn locate(
    b: &Broker,
    (ctx, operation, name): (&RequestContext, AclOperation, &str),
    topic: Option<&TopicInfo>,
    index: i32,
) -> Result<(PartitionHandle, i32), ResponseError> {
    if !ctx.may(b, operation, ResourceType::Topic, name) {
        return Err(ResponseError::TopicAuthorizationFailed);
    }
    let topic = topic.ok_or(ResponseError::UnknownTopicOrPartition)?;
    let epoch = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .map(|p| p.leader_epoch)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let h = b
        .node
        .partition(topic, index)
        .await
        .map_err(|e| crate::codes::unavailable(&e))?;
    Ok((h, epoch))
}

fn check_epoch(requested: i32, current: i32) -> Result<(), ResponseError> {
    if requested >= 0 && requested < current {
        Err(ResponseError::FencedLeaderEpoch)
    } else if requested > current {
        Err(ResponseError::UnknownLeaderEpoch)
    } else {
        Ok(())
    }
}

pub(super) async fn list_offsets(
    b: &Broker,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    // The leader epoch field exists from v4 on.
    let has_epoch = ctx.api_version >= 4;
    // read_committed (v2+): LATEST is the last stable offset
    let committed = ctx.api_version >= 2 && req.isolation_level == 1;
    let mut topics = Vec::new();
    for t in req.topics {
        let topic = b.node.catalog.topic(t.name.as_str());
        let mut parts = Vec::new();
        for p in t.partitions {
            let resp = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            let located = locate(
                b,
                (ctx, AclOperation::Describe, t.name.as_str()),
                topic.as_deref(),
                p.partition_index,
            )
            .await
            .and_then(|(h, epoch)| check_epoch(p.current_leader_epoch, epoch).map(|_| (h, epoch)));
            let (h, epoch) = match located.map(|(h, e)| (h, if has_epoch { e } else { -1 })) {
                Ok(x) => x,
                Err(e) => {
                    parts.push(resp.with_error_code(e.code()));
                    continue;
                }
            };
            let query = match p.timestamp {
                -2 => OffsetQuery::Earliest,
                -4 => OffsetQuery::EarliestLocal,
                -1 if committed => OffsetQuery::LastStable,
                -1 => OffsetQuery::Latest,
                -3 => OffsetQuery::MaxTimestamp,
                -5 => OffsetQuery::LatestTiered,
                ts if ts >= 0 => OffsetQuery::Timestamp(ts),
                _ => {
                    parts.push(resp.with_error_code(ResponseError::InvalidRequest.code()));
                    continue;
                }
            };
            let resp = match h.offsets(query).await {
                Err(e) => resp.with_error_code(codes::log_error(&e).code()),
                Ok(None) => resp.with_leader_epoch(epoch),
                Ok(Some(found)) => resp
                    .with_timestamp(found.timestamp)
                    .with_offset(found.offset)
                    .with_leader_epoch(epoch),
            };
            parts.push(resp);
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

pub(super) async fn offset_for_leader_epoch(
    b: &Broker,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut topics = Vec::new();
    for t in req.topics {
        let topic = b.node.catalog.topic(t.topic.as_str());
        let mut parts = Vec::new();
        for p in t.partitions {
            let resp = EpochEndOffset::default()
                .with_partition(p.partition)
                .with_leader_epoch(-1)
                .with_end_offset(-1);
            let located = locate(
                b,
                (ctx, AclOperation::Describe, t.topic.as_str()),
                topic.as_deref(),
                p.partition,
            )
            .await
            .and_then(|(h, epoch)| check_epoch(p.current_leader_epoch, epoch).map(|_| h));
            let resp = match located {
                Err(e) => resp.with_error_code(e.code()),
                Ok(h) => match h.epoch_end(p.leader_epoch).await {
                    Err(e) => resp.with_error_code(codes::log_error(&e).code()),
                    Ok(None) => resp,
                    Ok(Some((epoch, end))) => resp.with_leader_epoch(epoch).with_end_offset(end),
                },
            };
            parts.push(resp);
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(parts),
        );
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

pub(super) async fn delete_records(
    b: &Broker,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::new();
    for t in req.topics {
        let topic = b.node.catalog.topic(t.name.as_str());
        let mut parts = Vec::new();
        for p in t.partitions {
            let resp = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            let h = match locate(
                b,
                (ctx, AclOperation::Delete, t.name.as_str()),
                topic.as_deref(),
                p.partition_index,
            )
            .await
            {
                Ok((h, _)) => h,
                Err(e) => {
                    parts.push(resp.with_error_code(e.code()));
                    continue;
                }
            };
            // -1 means "up to the high watermark".
            let target = if p.offset == -1 {
                match h.bounds().await {
                    Ok((_, hw)) => hw,
                    Err(e) => {
                        parts.push(resp.with_error_code(codes::log_error(&e).code()));
                        continue;
                    }
                }
            } else {
                p.offset
            };
            let resp = match h.delete_before(target).await {
                Err(e) => resp.with_error_code(codes::log_error(&e).code()),
                Ok(low) => resp.with_low_watermark(low),
            };
            parts.push(resp);
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// DescribeProducers (kafka-transactions.sh's `describe-producers` and
/// `find-hanging`): the producers each partition's leader remembers, as
/// Kafka's broker answers it; READ on the topic.
pub(super) async fn describe_producers(
    b: &Broker,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut topics = Vec::new();
    for t in req.topics {
        let topic = b.node.catalog.topic(t.name.as_str());
        let mut parts = Vec::new();
        for index in t.partition_indexes {
            let resp = PartitionResponse::default().with_partition_index(index);
            let located = locate(
                b,
                (ctx, AclOperation::Read, t.name.as_str()),
                topic.as_deref(),
                index,
            )
            .await;
            let resp = match located {
                Err(e) => resp.with_error_code(e.code()),
                Ok((h, _)) => match h.producers().await {
                    Err(e) => resp.with_error_code(codes::log_error(&e).code()),
                    Ok(producers) => resp.with_active_producers(
                        producers
                            .into_iter()
                            .map(|p| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(p.producer_id))
                                    .with_producer_epoch(i32::from(p.epoch))
                                    .with_last_sequence(p.last_sequence)
                                    .with_last_timestamp(p.last_timestamp)
                                    .with_coordinator_epoch(p.coordinator_epoch)
                                    .with_current_txn_start_offset(p.txn_first_offset.unwrap_or(-1))
                            })
                            .collect(),
                    ),
                },
            };
            parts.push(resp);
        }
        topics.push(
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    DescribeProducersResponse::default().with_topics(topics)
}
