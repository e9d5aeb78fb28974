//! InitProducerId: producer ids (in blocks from the metastore) and epoch
//! bumps for idempotent producers; a transactional id goes to the
//! transaction coordinator (`txn.rs`).

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use metastore::acl::{AclOperation, ResourceType};

use super::RequestContext;
use crate::broker::Broker;
use crate::codes;

pub(super) async fn init_producer_id(
    b: &Broker,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
        .with_ongoing_txn_producer_id(ProducerId(-1))
        .with_ongoing_txn_producer_epoch(-1);
    if let Some(id) = req.transactional_id.as_ref().filter(|id| !id.is_empty()) {
        return match super::txn::init_producer_id(b, ctx, id.as_str(), &req).await {
            Ok((producer_id, epoch)) => resp
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch),
            Err(e) => resp.with_error_code(e.code()),
        };
    }
    // Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    if !ctx.may_on_cluster(b, AclOperation::IdempotentWrite)
        && !ctx.may_on_some(b, AclOperation::Write, ResourceType::Topic)
    {
        return resp.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    // KIP-360: a known idempotent producer may bump its epoch instead of taking a new id.
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
        return resp
            .with_producer_id(req.producer_id)
            .with_producer_epoch(req.producer_epoch + 1);
    }
    match b.node.next_producer_id().await {
        Ok(id) => resp.with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => {
            tracing::warn!(error = %e, "producer id allocation failed");
            resp.with_error_code(codes::meta_error(&e).code())
        }
    }
}
