//! Load-balancer mode: where a client's request is served, this agent or
//! the partition leaders and group coordinators it names (the ways are in
//! [`super::routing`], [`super::produce_forward`] and
//! [`super::group_routing`]).

use bytes::Bytes;
use kafka_protocol::messages::delete_records_response::DeleteRecordsPartitionResult;
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

use super::routing::{split_by_leader, Routed, FORWARD_TIMEOUT};
use super::{DispatchError, RequestContext};
use crate::broker::Broker;
use crate::forward::client::Forwarder;

/// Decides where a client's request is served (load-balancer mode only).
pub(super) async fn route(
    b: &Broker,
    fwd: &Forwarder,
    ctx: &RequestContext,
    header: &RequestHeader,
    frame: &Bytes,
    request: RequestKind,
) -> Result<Routed, DispatchError> {
    let answered = |api: ApiKey, body: ResponseKind| -> Result<Routed, DispatchError> {
        super::encode_frame(header, api, &body).map(|f| Routed::Answered(Some(f)))
    };
    let local = |r: RequestKind| Ok(Routed::Local(Box::new(r)));
    match request {
        RequestKind::Produce(r) => super::produce_forward::route(b, fwd, ctx, header, r).await,
        RequestKind::ListOffsets(r) => {
            let split = split_by_leader(
                b,
                fwd,
                ctx,
                header,
                ApiKey::ListOffsets,
                false,
                r,
                |r| &mut r.topics,
                |r| async move { super::offsets::list_offsets(b, ctx, r).await.topics },
                |a: ListOffsetsResponse| a.topics,
                |i| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(i)
                        .with_error_code(ResponseError::NotLeaderOrFollower.code())
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1)
                },
                FORWARD_TIMEOUT,
            )
            .await;
            match split {
                Err(r) => local(RequestKind::ListOffsets(r)),
                Ok(topics) => answered(
                    ApiKey::ListOffsets,
                    ListOffsetsResponse::default().with_topics(topics).into(),
                ),
            }
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            let split = split_by_leader(
                b,
                fwd,
                ctx,
                header,
                ApiKey::OffsetForLeaderEpoch,
                false,
                r,
                |r| &mut r.topics,
                |r| async move {
                    super::offsets::offset_for_leader_epoch(b, ctx, r)
                        .await
                        .topics
                },
                |a: OffsetForLeaderEpochResponse| a.topics,
                |i| {
                    EpochEndOffset::default()
                        .with_partition(i)
                        .with_error_code(ResponseError::NotLeaderOrFollower.code())
                        .with_leader_epoch(-1)
                        .with_end_offset(-1)
                },
                FORWARD_TIMEOUT,
            )
            .await;
            match split {
                Err(r) => local(RequestKind::OffsetForLeaderEpoch(r)),
                Ok(topics) => answered(
                    ApiKey::OffsetForLeaderEpoch,
                    OffsetForLeaderEpochResponse::default()
                        .with_topics(topics)
                        .into(),
                ),
            }
        }
        RequestKind::DeleteRecords(r) => {
            let split = split_by_leader(
                b,
                fwd,
                ctx,
                header,
                ApiKey::DeleteRecords,
                false,
                r,
                |r| &mut r.topics,
                |r| async move { super::offsets::delete_records(b, ctx, r).await.topics },
                |a: DeleteRecordsResponse| a.topics,
                |i| {
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(i)
                        .with_error_code(ResponseError::NotLeaderOrFollower.code())
                        .with_low_watermark(-1)
                },
                FORWARD_TIMEOUT,
            )
            .await;
            match split {
                Err(r) => local(RequestKind::DeleteRecords(r)),
                Ok(topics) => answered(
                    ApiKey::DeleteRecords,
                    DeleteRecordsResponse::default().with_topics(topics).into(),
                ),
            }
        }
        RequestKind::DescribeProducers(r) => {
            let split = split_by_leader(
                b,
                fwd,
                ctx,
                header,
                ApiKey::DescribeProducers,
                false,
                r,
                |r| &mut r.topics,
                |r| async move { super::offsets::describe_producers(b, ctx, r).await.topics },
                |a: DescribeProducersResponse| a.topics,
                |i| {
                    describe_producers_response::PartitionResponse::default()
                        .with_partition_index(i)
                        .with_error_code(ResponseError::NotLeaderOrFollower.code())
                },
                FORWARD_TIMEOUT,
            )
            .await;
            match split {
                Err(r) => local(RequestKind::DescribeProducers(r)),
                Ok(topics) => answered(
                    ApiKey::DescribeProducers,
                    DescribeProducersResponse::default()
                        .with_topics(topics)
                        .into(),
                ),
            }
        }
        // boxed: the group routes nest many futures, and the request
        // future would otherwise be too deep for the compiler to lay out
        other => {
            Box::pin(super::group_routing::route_group(
                b, fwd, ctx, header, frame, other,
            ))
            .await
        }
    }
}
