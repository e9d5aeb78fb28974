//! One module per Kafka API or family of APIs (`produce.rs`, `fetch.rs`,
//! `init_producer_id.rs`, ...). [`dispatch`] decodes a request frame with
//! `kafka-protocol`, calls the handler and encodes its answer.

mod acls;
mod api_versions;
pub(crate) mod bridge;
mod client_quotas;
mod configs;
mod consumer_groups;
mod fetch;
mod group_offsets;
mod group_routing;
mod groups;
mod init_producer_id;
mod leader_hints;
mod metadata;
mod offsets;
mod produce;
mod produce_forward;
mod reassignments;
mod route;
mod routing;
mod schema_validation;
mod scram_users;
mod topics;
mod txn;
pub(crate) mod txn_claims;
pub(crate) mod txn_coordinator;
mod txn_implicit;
mod txn_markers;
mod unregister_broker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsResponse, ApiKey, DescribeUserScramCredentialsResponse,
    ListPartitionReassignmentsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::sync::Notify;

use metastore::acl::{AclOperation, ResourceType};

use super::response::ResponseFrame;
use super::versions;
use crate::broker::{Broker, Metrics};
use security::authz::{Requester, ANONYMOUS, CLUSTER_RESOURCE};
use security::quota::Traffic;

/// The connection a request arrived on.
#[derive(Debug, Clone)]
pub struct Client {
    /// Peer address as Kafka prints it, e.g. `/127.0.0.1`.
    pub host: String,
    /// Never reused while the process runs; state bound to a connection
    /// (fetch sessions) names it.
    pub connection: u64,
    /// Forwarded by another agent (load-balancer mode): served here, never
    /// forwarded again.
    pub forwarded: bool,
    /// Notified when whoever waits for the answer wants it now: a long poll
    /// then answers with what it has.
    pub hurry: Option<Arc<Notify>>,
    /// Who the client authenticated as (`User:alice`); [`ANONYMOUS`] until
    /// it does, or when the listener authenticates no one.
    pub principal: Arc<str>,
    /// Milliseconds a quota asks the connection to stay unread after the
    /// response it is about to get; the connection takes (and zeroes) it.
    pub throttle: Arc<AtomicU64>,
    /// The zone the client named last (see `client_zone`).
    pub zone: Arc<crate::client_zone::ClientZone>,
}

impl Client {
    /// A client connection of this agent's own listener.
    pub fn direct(host: String, connection: u64) -> Client {
        Client {
            host,
            connection,
            forwarded: false,
            hurry: None,
            principal: Arc::from(ANONYMOUS),
            throttle: Arc::default(),
            zone: Arc::default(),
        }
    }
}

/// Who sent a request, for handlers that record it.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_version: i16,
    pub client_id: String,
    /// Peer address as Kafka prints it, e.g. `/127.0.0.1`.
    pub client_host: String,
    pub connection: u64,
    /// See [`Client::forwarded`].
    pub forwarded: bool,
    /// See [`Client::hurry`].
    pub hurry: Option<Arc<Notify>>,
    /// See [`Client::principal`].
    pub principal: Arc<str>,
    /// See [`Client::zone`].
    pub zone: Option<Arc<str>>,
}

impl RequestContext {
    /// Whether the client may perform `operation` on the resource (always,
    /// with authorization off).
    pub(crate) fn may(
        &self,
        broker: &Broker,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let who = Requester::new(&self.principal, &self.client_host);
        broker.may(who, operation, resource_type, name)
    }

    /// Whether the client may perform `operation` on at least one resource
    /// of the type (Kafka's `authorizeByResourceType`).
    pub(crate) fn may_on_some(
        &self,
        broker: &Broker,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let config = &broker.config.authz;
        if !config.enabled {
            return true;
        }
        let who = Requester::new(&self.principal, &self.client_host);
        broker.node.catalog.read(|s| {
            let all: Vec<&metastore::acl::AclBinding> = s.acls().collect();
            security::authz::decide_on_some(
                config,
                all.iter().copied(),
                who,
                operation,
                resource_type,
            )
        })
    }

    /// Whom a request forwarded for this one is from.
    pub(crate) fn origin(&self) -> crate::forward::Origin<'_> {
        crate::forward::Origin {
            host: &self.client_host,
            principal: &self.principal,
        }
    }

    /// [`Self::may`] on the cluster resource.
    pub(crate) fn may_on_cluster(&self, broker: &Broker, operation: AclOperation) -> bool {
        self.may(broker, operation, ResourceType::Cluster, CLUSTER_RESOURCE)
    }
}

/// Why a request frame could not be served; the connection is closed.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("{api:?} v{version} is not supported")]
    UnsupportedVersion { api: ApiKey, version: i16 },
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("malformed request header: {0}")]
    BadHeader(String),
    #[error("encoding the response failed: {0}")]
    Encode(String),
}

pub(crate) fn encode_frame(
    header: &RequestHeader,
    api: ApiKey,
    body: &ResponseKind,
) -> Result<ResponseFrame, DispatchError> {
    let version = header.request_api_version;
    let mut buf = BytesMut::with_capacity(256);
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut buf, api.response_header_version(version))
        .map_err(|e| DispatchError::Encode(e.to_string()))?;
    body.encode(&mut buf, version)
        .map_err(|e| DispatchError::Encode(e.to_string()))?;
    let mut frame = ResponseFrame::new();
    frame.push_bytes(buf.freeze());
    Ok(frame)
}

/// The ApiVersions answer for a version newer than we know: v0 layout, as Kafka does.
fn api_versions_unsupported(correlation_id: i32) -> Result<ResponseFrame, DispatchError> {
    let body = api_versions::api_versions_body(ResponseError::UnsupportedVersion.code());
    let mut buf = BytesMut::with_capacity(256);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, 0)
        .map_err(|e| DispatchError::Encode(e.to_string()))?;
    body.encode(&mut buf, 0)
        .map_err(|e| DispatchError::Encode(e.to_string()))?;
    let mut frame = ResponseFrame::new();
    frame.push_bytes(buf.freeze());
    Ok(frame)
}

/// Decodes and serves one request frame. `Ok(None)` means no response is due
/// (produce with acks=0).
pub async fn dispatch(
    broker: &Broker,
    client: &Client,
    mut frame: Bytes,
) -> Result<Option<ResponseFrame>, DispatchError> {
    Metrics::add(&broker.metrics.requests, 1);
    if frame.len() < 8 {
        return Err(DispatchError::BadHeader(format!("{} bytes", frame.len())));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = ApiKey::try_from(raw_key).map_err(|_| DispatchError::UnknownApi(raw_key))?;
    let Some((lo, hi)) = versions::range(api) else {
        return Err(DispatchError::UnsupportedVersion { api, version });
    };
    if version < lo || version > hi {
        if api == ApiKey::ApiVersions && version > hi {
            return api_versions_unsupported(correlation_id).map(Some);
        }
        return Err(DispatchError::UnsupportedVersion { api, version });
    }
    let original = frame.clone();
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version))
        .map_err(|e| DispatchError::BadHeader(e.to_string()))?;
    let request =
        RequestKind::decode(api, &mut frame, version).map_err(|e| DispatchError::Malformed {
            api,
            version,
            reason: e.to_string(),
        })?;
    // Apache Kafka ignores bytes after a request's last field, and real
    // clients send them (librdkafka 2.16 adds 3 to its Metadata v12
    // requests), so they are tolerated: counted and logged, not refused.
    if frame.has_remaining() {
        Metrics::add(&broker.metrics.trailing_bytes_requests, 1);
        tracing::debug!(
            ?api,
            version,
            left = frame.remaining(),
            "request has trailing bytes"
        );
    }
    if let Some(zone) = header
        .client_id
        .as_deref()
        .and_then(crate::client_zone::zone_in_client_id)
    {
        client.zone.note(zone);
    }
    if let RequestKind::Fetch(f) = &request {
        if !f.rack_id.is_empty() {
            client.zone.note(f.rack_id.as_str());
        }
    }
    let ctx = RequestContext {
        api_version: version,
        client_id: header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: client.host.clone(),
        connection: client.connection,
        forwarded: client.forwarded,
        hurry: client.hurry.clone(),
        principal: client.principal.clone(),
        zone: client.zone.get(),
    };
    // request-rate quotas count the time until the answer is ready
    let mut clock = RequestClock {
        broker,
        ctx: &ctx,
        client,
        started: std::time::Instant::now(),
        waited: std::time::Duration::ZERO,
    };
    // Quotas count a produce request's size where the client is connected,
    // before it is served (a forwarded request was counted already).
    let produce_wait = match &request {
        RequestKind::Produce(_) if !client.forwarded => {
            quota_wait(broker, &ctx, Traffic::Produce, original.len())
        }
        _ => 0,
    };
    mute(broker, client, produce_wait);
    // Load-balancer mode: data and groups another agent owns are served there.
    let request = match broker.forwarder(client.forwarded) {
        Some(fwd) => match route::route(broker, fwd, &ctx, &header, &original, request).await? {
            routing::Routed::Local(r) => *r,
            routing::Routed::Answered(frame) => return Ok(frame),
        },
        None => request,
    };
    let cluster = |op| ctx.may_on_cluster(broker, op);
    let body: ResponseKind = match request {
        RequestKind::ApiVersions(_) => api_versions::api_versions_body(0).into(),
        RequestKind::Metadata(r) => metadata::metadata(broker, &ctx, r).await.into(),
        RequestKind::DescribeCluster(r) => metadata::describe_cluster(broker, &ctx, r).into(),
        RequestKind::Produce(r) => match produce::produce(broker, &ctx, r).await {
            Some(resp) => {
                let mut resp = resp.with_throttle_time_ms(produce_wait);
                leader_hints::produce(broker, version, ctx.zone.as_deref(), &mut resp);
                resp.into()
            }
            None => return Ok(None),
        },
        RequestKind::Fetch(r) => {
            let mut answer = fetch::fetch(broker, &ctx, r).await;
            leader_hints::fetch(broker, version, ctx.zone.as_deref(), answer.response_mut());
            clock.waited = answer.waited();
            if !client.forwarded {
                let wait = quota_wait(broker, &ctx, Traffic::Fetch, answer.record_bytes());
                answer.set_throttle(wait);
                mute(broker, client, wait);
            }
            return fetch::encode(&header, answer).map(Some);
        }
        RequestKind::ListOffsets(r) => offsets::list_offsets(broker, &ctx, r).await.into(),
        RequestKind::OffsetForLeaderEpoch(r) => offsets::offset_for_leader_epoch(broker, &ctx, r)
            .await
            .into(),
        RequestKind::DeleteRecords(r) => offsets::delete_records(broker, &ctx, r).await.into(),
        RequestKind::DescribeProducers(r) => {
            offsets::describe_producers(broker, &ctx, r).await.into()
        }
        RequestKind::WriteTxnMarkers(r) => {
            txn_markers::write_txn_markers(broker, &ctx, r).await.into()
        }
        RequestKind::InitProducerId(r) => init_producer_id::init_producer_id(broker, &ctx, r)
            .await
            .into(),
        RequestKind::AddPartitionsToTxn(r) => {
            txn::add_partitions_to_txn(broker, &ctx, r).await.into()
        }
        RequestKind::AddOffsetsToTxn(r) => txn::add_offsets_to_txn(broker, &ctx, r).await.into(),
        RequestKind::EndTxn(r) => txn::end_txn(broker, &ctx, r).await.into(),
        RequestKind::TxnOffsetCommit(r) => txn::txn_offset_commit(broker, &ctx, r).await.into(),
        RequestKind::DescribeTransactions(r) => txn::describe_transactions(broker, &ctx, r).into(),
        RequestKind::ListTransactions(r) => txn::list_transactions(broker, &ctx, r).into(),
        RequestKind::CreateTopics(r) => topics::create_topics(broker, &ctx, r).await.into(),
        RequestKind::DeleteTopics(r) => topics::delete_topics(broker, &ctx, r).await.into(),
        RequestKind::CreatePartitions(r) => topics::create_partitions(broker, &ctx, r).await.into(),
        RequestKind::DescribeConfigs(r) => configs::describe_configs(broker, &ctx, r).await.into(),
        RequestKind::AlterConfigs(r) => configs::alter_configs(broker, &ctx, r).await.into(),
        RequestKind::IncrementalAlterConfigs(r) => {
            configs::incremental_alter_configs(broker, &ctx, r)
                .await
                .into()
        }
        RequestKind::FindCoordinator(r) => groups::find_coordinator(broker, &ctx, r).into(),
        RequestKind::JoinGroup(r) => groups::join_group(broker, &ctx, r).await.into(),
        RequestKind::ConsumerGroupHeartbeat(r) => {
            consumer_groups::heartbeat(broker, &ctx, r).await.into()
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            consumer_groups::describe(broker, &ctx, r).await.into()
        }
        RequestKind::SyncGroup(r) => groups::sync_group(broker, &ctx, r).await.into(),
        RequestKind::Heartbeat(r) => groups::heartbeat(broker, &ctx, r).await.into(),
        RequestKind::LeaveGroup(r) => groups::leave_group(broker, &ctx, r).await.into(),
        RequestKind::DescribeGroups(r) => groups::describe_groups(broker, &ctx, r).await.into(),
        RequestKind::ListGroups(r) => groups::list_groups(broker, &ctx, r).await.into(),
        RequestKind::DeleteGroups(r) => groups::delete_groups(broker, &ctx, r).await.into(),
        RequestKind::OffsetCommit(r) => group_offsets::offset_commit(broker, &ctx, r).await.into(),
        RequestKind::OffsetFetch(r) => group_offsets::offset_fetch(broker, &ctx, r).await.into(),
        RequestKind::OffsetDelete(r) => group_offsets::offset_delete(broker, &ctx, r).await.into(),
        RequestKind::AlterPartitionReassignments(_) if !cluster(AclOperation::Alter) => {
            AlterPartitionReassignmentsResponse::default()
                .with_error_code(CLUSTER_REFUSED.code())
                .into()
        }
        RequestKind::AlterPartitionReassignments(r) => {
            reassignments::alter_partition_reassignments(broker, &ctx, r)
                .await
                .into()
        }
        RequestKind::ListPartitionReassignments(_) if !cluster(AclOperation::Describe) => {
            ListPartitionReassignmentsResponse::default()
                .with_error_code(CLUSTER_REFUSED.code())
                .into()
        }
        RequestKind::ListPartitionReassignments(r) => {
            reassignments::list_partition_reassignments(broker, &ctx, r).into()
        }
        RequestKind::DescribeUserScramCredentials(_) if !cluster(AclOperation::Describe) => {
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(CLUSTER_REFUSED.code())
                .into()
        }
        RequestKind::DescribeUserScramCredentials(r) => scram_users::describe(broker, r).into(),
        RequestKind::AlterUserScramCredentials(r) if !cluster(AclOperation::Alter) => {
            scram_users::refuse(r, CLUSTER_REFUSED).into()
        }
        RequestKind::AlterUserScramCredentials(r) => scram_users::alter(broker, r).await.into(),
        RequestKind::DescribeClientQuotas(r) => {
            client_quotas::describe_client_quotas(broker, &ctx, r).into()
        }
        RequestKind::AlterClientQuotas(r) => client_quotas::alter_client_quotas(broker, &ctx, r)
            .await
            .into(),
        RequestKind::UnregisterBroker(r) => unregister_broker::unregister_broker(broker, &ctx, r)
            .await
            .into(),
        RequestKind::CreateAcls(r) => acls::create_acls(broker, &ctx, r).await.into(),
        RequestKind::DescribeAcls(r) => acls::describe_acls(broker, &ctx, r).into(),
        RequestKind::DeleteAcls(r) => acls::delete_acls(broker, &ctx, r).await.into(),
        // The connection's SASL session answers these until it authenticated,
        // and after, with re-authentication on: here SASL is off, or done
        // and re-authentication off.
        RequestKind::SaslHandshake(_) => {
            let code = if broker.config.sasl_mechanisms.is_empty() {
                ResponseError::UnsupportedSaslMechanism
            } else {
                ResponseError::IllegalSaslState
            };
            kafka_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(code.code())
                .into()
        }
        RequestKind::SaslAuthenticate(_) => {
            kafka_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code())
                .with_error_message(Some(s(
                    "this connection is already authenticated, or SASL is off",
                )))
                .into()
        }
        _ => return Err(DispatchError::UnsupportedVersion { api, version }),
    };
    encode_frame(&header, api, &body).map(Some)
}

/// Milliseconds the client must wait after `bytes` of `traffic`, by the
/// quota that applies to it (0 when none does).
pub(crate) fn quota_wait(
    broker: &Broker,
    ctx: &RequestContext,
    traffic: Traffic,
    bytes: usize,
) -> i32 {
    let user = ctx
        .principal
        .strip_prefix("User:")
        .unwrap_or(&ctx.principal);
    let quota = broker.node.catalog.read(|s| {
        let table = s.client_quotas();
        if table.is_empty() {
            return None;
        }
        security::quota::applicable(table, traffic, user, &ctx.client_id)
    });
    let Some((entity, limit)) = quota else {
        return 0;
    };
    let wait = broker
        .quotas
        .record(entity, traffic, limit, bytes, std::time::Instant::now());
    i32::try_from(wait.as_millis()).unwrap_or(i32::MAX)
}

/// Counts the time a request took, less what a fetch spent waiting for
/// records, against the client's request-rate quota (`request_percentage`)
/// when it is dropped: the request was answered (or failed).
struct RequestClock<'a> {
    broker: &'a Broker,
    ctx: &'a RequestContext,
    client: &'a Client,
    started: std::time::Instant,
    waited: std::time::Duration,
}

impl Drop for RequestClock<'_> {
    fn drop(&mut self) {
        if self.client.forwarded {
            // counted where the client is connected
            return;
        }
        let worked = self.started.elapsed().saturating_sub(self.waited);
        let micros = usize::try_from(worked.as_micros()).unwrap_or(usize::MAX);
        let wait = quota_wait(self.broker, self.ctx, Traffic::Request, micros);
        mute(self.broker, self.client, wait);
    }
}

/// Keeps the connection unread for `ms` after this response (KIP-219).
pub(crate) fn mute(broker: &Broker, client: &Client, ms: i32) {
    match u64::try_from(ms) {
        Ok(ms) if ms > 0 => {
            Metrics::add(&broker.metrics.quota_throttles, 1);
            client.throttle.fetch_max(ms, Ordering::Relaxed);
        }
        _ => {}
    }
}

/// The answer to a cluster operation the client may not perform.
const CLUSTER_REFUSED: ResponseError = ResponseError::ClusterAuthorizationFailed;

/// Every advertised API as the ApiVersions body lists it.
pub(crate) fn advertised() -> Vec<kafka_protocol::messages::api_versions_response::ApiVersion> {
    versions::supported()
        .into_iter()
        .map(|(k, lo, hi)| {
            kafka_protocol::messages::api_versions_response::ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(lo)
                .with_max_version(hi)
        })
        .collect()
}

/// Shorthand for optional response strings.
pub(crate) fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// An error message for a response field.
pub(crate) fn msg(e: &impl std::fmt::Display) -> Option<StrBytes> {
    Some(s(e.to_string()))
}

#[cfg(test)]
mod acl_tests;
#[cfg(test)]
mod api_tests;
#[cfg(test)]
mod coordinator_tests;
#[cfg(test)]
mod fetch_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod offsets_tests;
#[cfg(test)]
mod produce_tests;
#[cfg(test)]
mod reassignments_tests;
#[cfg(test)]
mod schema_validation_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod topics_tests;

#[cfg(test)]
mod txn_markers_tests;
#[cfg(test)]
mod txn_tests;
