//! WriteTxnMarkers: a transaction coordinator asks the leaders of a
//! transaction's partitions to end it with a COMMIT or ABORT marker. Each
//! marker is a control batch appended by the partition's leader and
//! answered once the in-sync replicas hold it, like an acks=all write; an
//! error is answered per partition, and the coordinator retries those.
//!
//! Only principals with CLUSTER_ACTION on the cluster may ask (as in
//! Kafka, where only brokers do), and the coordinator of another agent
//! ([`COORDINATOR_PRINCIPAL`] on a forwarded request).

use futures::future::join_all;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;
use metastore::acl::AclOperation;
use metastore::Topics;

use dataplane::backend::Marker;
use storage::ControlType;

use super::RequestContext;
use crate::broker::Broker;
use crate::codes;

/// The principal a coordinator's forwarded WriteTxnMarkers carries. No
/// login yields it (every authenticated principal is `User:`), and the
/// leader accepts it only on a request another member forwarded.
pub(crate) const COORDINATOR_PRINCIPAL: &str = "Agent:transaction-coordinator";

/// How long one marker may wait for the in-sync replicas.
const MARKER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub(super) async fn write_txn_markers(
    b: &Broker,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    // a coordinator on another agent, forwarded over the cluster endpoint
    let from_coordinator = ctx.forwarded && &*ctx.principal == COORDINATOR_PRINCIPAL;
    let allowed = from_coordinator || ctx.may_on_cluster(b, AclOperation::ClusterAction);
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = Marker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            control: if m.transaction_result {
                ControlType::Commit
            } else {
                ControlType::Abort
            },
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let writes = t.partition_indexes.iter().map(|&index| {
                let name = t.name.as_str();
                async move {
                    let error = if allowed {
                        write(b, name, index, marker).await
                    } else {
                        Some(ResponseError::ClusterAuthorizationFailed)
                    };
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(codes::code(error))
                }
            });
            let partitions = join_all(writes).await;
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// Writes one marker where this agent leads; the error, if any.
pub(super) async fn write(
    b: &Broker,
    topic: &str,
    index: i32,
    marker: Marker,
) -> Option<ResponseError> {
    let Some(info) = b.node.catalog.topic(topic) else {
        return Some(ResponseError::UnknownTopicOrPartition);
    };
    let Some(leader_epoch) = info.partitions.get(index as usize).map(|p| p.leader_epoch) else {
        return Some(ResponseError::UnknownTopicOrPartition);
    };
    let handle = match b.node.partition(&info, index).await {
        Ok(h) => h,
        Err(e) => return Some(codes::unavailable(&e)),
    };
    // The coordinator ended the transaction in the metastore before sending
    // this marker. Once this agent's replica of the metastore holds that
    // too, a late write of the transaction verified from now on sees it
    // ended; one verified earlier is refused by the partition's guard
    // (`dataplane::partition::TxnGuard`).
    if let Err(e) = b.node.catalog.linearizable_barrier().await {
        tracing::debug!(topic, partition = index, error = %e, "transaction marker not written: the metastore could not be caught up with");
        return Some(codes::meta_error(&e));
    }
    match tokio::time::timeout(MARKER_TIMEOUT, handle.write_marker(marker, leader_epoch)).await {
        Err(_) => Some(ResponseError::RequestTimedOut),
        Ok(Ok(offset)) => {
            tracing::debug!(
                topic,
                partition = index,
                producer_id = marker.producer_id,
                control = ?marker.control,
                offset,
                "transaction marker written"
            );
            None
        }
        Ok(Err(e)) => {
            tracing::debug!(topic, partition = index, error = %e, "transaction marker refused");
            Some(codes::log_error(&e))
        }
    }
}
