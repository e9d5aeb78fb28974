//! The Kafka handlers as other front ends call them: the native protocol
//! builds the Kafka request its operation stands for and gets the same
//! validation, limits and answers a Kafka client gets, without a Kafka
//! frame being encoded or decoded.
//!
//! Each call names the Kafka API version whose semantics it wants; the
//! handlers read fields by that version.

use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    FetchRequest, FetchResponse, InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest,
    ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, ProduceRequest,
    ProduceResponse,
};

use super::{Client, RequestContext};
use crate::backend::Records;
use crate::broker::{Broker, Metrics};

fn ctx(client: &Client, client_id: &str, api_version: i16) -> RequestContext {
    RequestContext {
        api_version,
        client_id: client_id.to_string(),
        client_host: client.host.clone(),
        connection: client.connection,
        forwarded: client.forwarded,
        hurry: client.hurry.clone(),
        principal: client.principal.clone(),
    }
}

/// Produce v9 (topics by name); `None` for acks=0.
pub(crate) async fn produce(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: ProduceRequest,
) -> Option<ProduceResponse> {
    Metrics::add(&b.metrics.requests, 1);
    super::produce::produce(b, &ctx(client, client_id, 9), req).await
}

/// Sessionless Fetch v12 (topics by name): the response, and each listed
/// partition's records apart, in response order, to be spliced in
/// (sendfile on TCP).
pub(crate) async fn fetch(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: FetchRequest,
) -> (FetchResponse, Vec<Records>) {
    Metrics::add(&b.metrics.requests, 1);
    super::fetch::fetch(b, &ctx(client, client_id, 12), req)
        .await
        .into_parts()
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

/// InitProducerId v4, for an idempotent producer (no transactional id).
pub(crate) async fn init_producer_id(
    b: &Broker,
    client: &Client,
    client_id: &str,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    Metrics::add(&b.metrics.requests, 1);
    super::init_producer_id::init_producer_id(b, &ctx(client, client_id, 4), req).await
}
