//! A minimal Kafka admin client for the `aerostream` command line: drain an
//! agent (the `aerostream.draining` broker config) and watch its replicas
//! leave. It speaks the Kafka protocol to any running agent, one request
//! per connection, so it needs nothing but the agent's Kafka address.

use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{
    incremental_alter_configs_request, ApiKey, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, MetadataRequest, MetadataResponse, RequestHeader,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response the client reads (a Metadata answer of a large cluster).
const MAX_RESPONSE_BYTES: usize = 64 << 20;
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why an admin request failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot reach {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("{api:?} to {addr} failed: {reason}")]
    Request {
        api: ApiKey,
        addr: String,
        reason: String,
    },
    #[error("{api:?} refused with error code {code}: {message}")]
    Refused {
        api: ApiKey,
        code: i16,
        message: String,
    },
}

/// What an agent holds, as a Metadata answer and ListPartitionReassignments show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgentLoad {
    pub replicas: usize,
    pub leaders: usize,
    /// Reassignments under way in the whole cluster.
    pub moving: usize,
}

async fn call<Req: Encodable, Resp: Decodable>(
    addr: &str,
    api: ApiKey,
    version: i16,
    req: &Req,
) -> Result<Resp, AdminError> {
    let fail = |reason: String| AdminError::Request {
        api,
        addr: addr.to_owned(),
        reason,
    };
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("aerostream-cli")))
        .encode(&mut body, api.request_header_version(version))
        .map_err(|e| fail(e.to_string()))?;
    req.encode(&mut body, version)
        .map_err(|e| fail(e.to_string()))?;
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| AdminError::Connect {
                addr: addr.to_owned(),
                reason: e.to_string(),
            })?;
        let len = u32::try_from(body.len()).map_err(|e| fail(e.to_string()))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_u32(len);
        frame.extend_from_slice(&body);
        stream
            .write_all(&frame)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let len = stream.read_u32().await.map_err(|e| fail(e.to_string()))? as usize;
        if len > MAX_RESPONSE_BYTES {
            return Err(fail(format!("a {len}-byte response is too large")));
        }
        let mut buf = vec![0u8; len];
        stream
            .read_exact(&mut buf)
            .await
            .map_err(|e| fail(e.to_string()))?;
        Ok(bytes::Bytes::from(buf))
    };
    let mut bytes = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| fail("timed out".to_owned()))??;
    ResponseHeader::decode(&mut bytes, api.response_header_version(version))
        .map_err(|e| fail(e.to_string()))?;
    let resp = Resp::decode(&mut bytes, version).map_err(|e| fail(e.to_string()))?;
    if bytes.has_remaining() {
        return Err(fail("trailing bytes in the response".to_owned()));
    }
    Ok(resp)
}

/// Starts (or, with `draining` false, stops) draining agent `node`.
pub async fn set_draining(addr: &str, node: i32, draining: bool) -> Result<(), AdminError> {
    let api = ApiKey::IncrementalAlterConfigs;
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_string(node.to_string()))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("aerostream.draining"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(draining.to_string()))),
            ]),
    ]);
    let resp: IncrementalAlterConfigsResponse = call(addr, api, 0, &req).await?;
    match resp.responses.first() {
        Some(r) if r.error_code != 0 => Err(AdminError::Refused {
            api,
            code: r.error_code,
            message: r
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        }),
        Some(_) => Ok(()),
        None => Err(AdminError::Request {
            api,
            addr: addr.to_owned(),
            reason: "empty response".to_owned(),
        }),
    }
}

/// How many replicas and leaderships agent `node` holds, and how many
/// reassignments are under way.
pub async fn load(addr: &str, node: i32) -> Result<AgentLoad, AdminError> {
    let meta: MetadataResponse = call(
        addr,
        ApiKey::Metadata,
        1,
        &MetadataRequest::default().with_topics(None),
    )
    .await?;
    let mut out = AgentLoad::default();
    for p in meta.topics.iter().flat_map(|t| t.partitions.iter()) {
        out.replicas += usize::from(p.replica_nodes.iter().any(|r| r.0 == node));
        out.leaders += usize::from(p.leader_id.0 == node);
    }
    let moving: ListPartitionReassignmentsResponse = call(
        addr,
        ApiKey::ListPartitionReassignments,
        0,
        &ListPartitionReassignmentsRequest::default().with_topics(None),
    )
    .await?;
    out.moving = moving.topics.iter().map(|t| t.partitions.len()).sum();
    Ok(out)
}
