//! The Kafka handlers as other front ends call them: the native protocol
//! builds the Kafka request its operation stands for and gets the same
//! validation, limits and answers a Kafka client gets, without a Kafka
//! frame being encoded or decoded.
//!
//! Each call names the Kafka API version whose semantics it wants; the
//! handlers read fields by that version.

use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    FetchRequest, FetchResponse, InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest,
    ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, ProduceRequest,
    ProduceResponse,
};

use super::{Client, RequestContext};
use crate::broker::{Broker, Metrics};
use dataplane::backend::Records;
use security::quota::Traffic;

fn ctx(client: &Client, client_id: &str, api_version: i16) -> RequestContext {
    RequestContext {
        api_version,
        client_id: client_id.to_string(),
        client_host: client.host.clone(),
        connection: client.connection,
        forwarded: client.forwarded,
        hurry: client.hurry.clone(),
        principal: client.principal.clone(),
        zone: client.zone.get(),
    }
}

/// Whether the client may perform `operation` on a resource, by the ACLs
/// (always, with authorization off): for operations that call no Kafka
/// handler (subscriptions, native groups, metadata).
pub(crate) fn may(
    b: &Broker,
    client: &Client,
    operation: metastore::acl::AclOperation,
    resource_type: metastore::acl::ResourceType,
    name: &str,
) -> bool {
    ctx(client, "", 0).may(b, operation, resource_type, name)
}

/// Produce v9 (topics by name); `None` for acks=0.
pub(crate) async fn produce(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: ProduceRequest,
) -> Option<ProduceResponse> {
    Metrics::add(&b.metrics.requests, 1);
    let ctx = ctx(client, client_id, 9);
    // counted where the client is connected, as a Kafka produce is; the
    // connection stays unread for the wait (`Client::throttle`)
    if !client.forwarded {
        let bytes = req
            .topic_data
            .iter()
            .flat_map(|t| &t.partition_data)
            .filter_map(|p| p.records.as_ref().map(|r| r.len()))
            .sum();
        let wait = super::quota_wait(b, &ctx, Traffic::Produce, bytes);
        super::mute(b, client, wait);
    }
    super::produce::produce(b, &ctx, req).await
}

/// Sessionless Fetch v12 (topics by name): the response, each listed
/// partition's records apart, in response order, to be spliced in
/// (sendfile on TCP), and the milliseconds a consumer byte-rate quota asks
/// the client to wait before fetching again (0: none).
pub(crate) async fn fetch(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: FetchRequest,
) -> (FetchResponse, Vec<Records>, u64) {
    Metrics::add(&b.metrics.requests, 1);
    let ctx = ctx(client, client_id, 12);
    let answer = super::fetch::fetch(b, &ctx, req).await;
    let wait = if client.forwarded {
        0
    } else {
        super::quota_wait(b, &ctx, Traffic::Fetch, answer.record_bytes())
    };
    if wait > 0 {
        Metrics::add(&b.metrics.quota_throttles, 1);
    }
    let (resp, records) = answer.into_parts();
    (resp, records, u64::try_from(wait).unwrap_or(0))
}

/// ListOffsets v4.
pub(crate) async fn list_offsets(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::offsets::list_offsets(b, &ctx(client, client_id, 4), req).await
}

/// CreateTopics v5.
pub(crate) async fn create_topics(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::topics::create_topics(b, &ctx(client, client_id, 5), req).await
}

/// DeleteTopics v5 (topics by name).
pub(crate) async fn delete_topics(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::topics::delete_topics(b, &ctx(client, client_id, 5), req).await
}

/// OffsetCommit v8 (a generation of -1 commits outside group membership).
pub(crate) async fn offset_commit(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::group_offsets::offset_commit(b, &ctx(client, client_id, 8), req).await
}

/// InitProducerId v4: for an idempotent producer without transactional
/// id, for a transactional one with it.
pub(crate) async fn init_producer_id(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::init_producer_id::init_producer_id(b, &ctx(client, client_id, 4), req).await
}

/// AddPartitionsToTxn v3 (one transaction, from its producer).
pub(crate) async fn add_partitions_to_txn(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::txn::add_partitions_to_txn(b, &ctx(client, client_id, 3), req).await
}

/// AddOffsetsToTxn v3.
pub(crate) async fn add_offsets_to_txn(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::txn::add_offsets_to_txn(b, &ctx(client, client_id, 3), req).await
}

/// TxnOffsetCommit v3 (with the member and generation of KIP-447).
pub(crate) async fn txn_offset_commit(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::txn::txn_offset_commit(b, &ctx(client, client_id, 3), req).await
}

/// EndTxn v3: answered once the markers are written.
pub(crate) async fn end_txn(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: EndTxnRequest,
) -> EndTxnResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::txn::end_txn(b, &ctx(client, client_id, 3), req).await
}
