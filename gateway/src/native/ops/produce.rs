//! Produce: many partitions per frame, answered per partition.

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use sdk::proto::{self, ErrorCode};

use super::shared::{partition_index, refine};
use crate::broker::Broker;
use crate::kafka::api::{bridge, s, Client};
use crate::native::{frame_of, Answer};

/// A produce; with a transactional id, of transactional batches (TxnProduce,
/// answered with its own operation code).
pub(super) async fn produce(
    b: &Broker,
    c: &Client,
    client_id: &str,
    p: proto::Produce,
    transactional_id: Option<String>,
) -> Answer {
    let txn = transactional_id.is_some();
    let answer = move |resp: proto::ProduceResponse| {
        if txn {
            Answer::Frame(frame_of(&proto::TxnProduceResponse(resp)))
        } else {
            Answer::Frame(frame_of(&resp))
        }
    };
    let Some(acks) = proto::Acks::from_wire(p.acks) else {
        let topics = p
            .topics
            .into_iter()
            .map(|t| proto::TopicProduced {
                partitions: t
                    .partitions
                    .iter()
                    .map(|q| proto::PartitionProduced {
                        partition: q.partition,
                        error: ErrorCode::INVALID_ACKS,
                        base_offset: -1,
                        log_append_time_ms: -1,
                        log_start_offset: -1,
                        message: format!("acks {} is not 0, 1 or -1", p.acks),
                    })
                    .collect(),
                name: t.name,
            })
            .collect();
        return answer(proto::ProduceResponse {
            correlation: p.correlation,
            topics,
        });
    };
    let topic_data = p
        .topics
        .into_iter()
        .map(|t| {
            TopicProduceData::default()
                .with_name(TopicName(s(t.name)))
                .with_partition_data(
                    t.partitions
                        .into_iter()
                        .map(|q| {
                            PartitionProduceData::default()
                                .with_index(partition_index(q.partition))
                                .with_records(Some(q.batch))
                        })
                        .collect(),
                )
        })
        .collect();
    let req = ProduceRequest::default()
        .with_acks(i16::from(acks.to_wire()))
        .with_transactional_id(transactional_id.map(|id| TransactionalId(s(id))))
        .with_timeout_ms(i32::try_from(p.timeout_ms).unwrap_or(i32::MAX))
        .with_topic_data(topic_data);
    let Some(resp) = bridge::produce(b, c, client_id, req).await else {
        return Answer::Nothing;
    };
    if acks == proto::Acks::None {
        return Answer::Nothing;
    }
    let topics = resp
        .responses
        .into_iter()
        .map(|t| {
            let name = t.name.to_string();
            proto::TopicProduced {
                partitions: t
                    .partition_responses
                    .into_iter()
                    .map(|r| proto::PartitionProduced {
                        partition: u32::try_from(r.index).unwrap_or(u32::MAX),
                        error: refine(b, &name, r.error_code),
                        base_offset: r.base_offset,
                        log_append_time_ms: r.log_append_time_ms,
                        log_start_offset: r.log_start_offset,
                        message: r.error_message.map(|m| m.to_string()).unwrap_or_default(),
                    })
                    .collect(),
                name,
            }
        })
        .collect();
    answer(proto::ProduceResponse {
        correlation: p.correlation,
        topics,
    })
}
