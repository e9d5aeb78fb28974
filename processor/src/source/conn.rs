//! One plaintext Kafka-protocol connection: requests framed with their
//! header, one at a time, at the highest version both ends know (learned
//! from the broker's ApiVersions answer when the connection opens).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest answer read (a fetch of several partitions).
const MAX_RESPONSE_BYTES: usize = 256 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longer than any `max_wait_ms` the source sends.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CLIENT_ID: &str = "aerostream-processor";

pub struct Conn {
    addr: String,
    stream: TcpStream,
    /// api key -> (min, max) version the broker accepts
    versions: HashMap<i16, (i16, i16)>,
    next_correlation: i32,
}

impl Conn {
    /// Connects to `addr` and learns the versions its broker accepts.
    pub async fn open(addr: &str) -> anyhow::Result<Conn> {
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => bail!("cannot reach a broker at {addr}: {e}"),
            Err(_) => bail!("cannot reach a broker at {addr}: no answer within 10s"),
        };
        // best effort: small requests should not wait for Nagle
        let _ = stream.set_nodelay(true);
        let mut conn = Conn {
            addr: addr.to_owned(),
            stream,
            versions: HashMap::new(),
            next_correlation: 1,
        };
        conn.versions = conn.api_versions().await?;
        Ok(conn)
    }

    /// Sends `req` at the highest version within `min..=max` both ends
    /// know and reads its answer.
    pub async fn call<R: Request>(
        &mut self,
        req: &R,
        min: i16,
        max: i16,
    ) -> anyhow::Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow!("unknown API key {}", R::KEY))?;
        let Some(&(theirs_min, theirs_max)) = self.versions.get(&R::KEY) else {
            bail!(
                "the broker at {} does not support {key:?} requests",
                self.addr
            );
        };
        let version = max.min(theirs_max).min(R::VERSIONS.max);
        if version < min.max(theirs_min).max(R::VERSIONS.min) {
            bail!(
                "the broker at {} supports {key:?} versions {theirs_min}-{theirs_max}, \
                 the processor {min}-{max}",
                self.addr
            );
        }
        let correlation = self.send(key, version, req).await?;
        let mut body = self
            .receive(correlation, key.response_header_version(version))
            .await?;
        R::Response::decode(&mut body, version)
            .map_err(|e| anyhow!("cannot decode the {key:?} v{version} answer: {e}"))
    }

    /// ApiVersions v3, or v0 when the broker refuses v3.
    async fn api_versions(&mut self) -> anyhow::Result<HashMap<i16, (i16, i16)>> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        for version in [3, 0] {
            let key = ApiKey::ApiVersions;
            let correlation = self.send(key, version, &req).await?;
            let mut body = self
                .receive(correlation, key.response_header_version(version))
                .await?;
            // an UNSUPPORTED_VERSION answer is always in v0
            let peek = body.clone().try_get_i16().unwrap_or(0);
            let decode_version = if peek == 35 { 0 } else { version };
            let resp = ApiVersionsResponse::decode(&mut body, decode_version)
                .map_err(|e| anyhow!("cannot decode the ApiVersions answer: {e}"))?;
            if resp.error_code == 35 && version != 0 {
                continue;
            }
            if resp.error_code != 0 {
                bail!(
                    "ApiVersions refused: {}",
                    super::error_name(resp.error_code)
                );
            }
            return Ok(resp
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect());
        }
        bail!(
            "the broker at {} answered no ApiVersions version",
            self.addr
        )
    }

    async fn send<R: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &R,
    ) -> anyhow::Result<i32> {
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let mut frame = BytesMut::new();
        frame.put_u32(0); // length, filled in below
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)))
            .encode(&mut frame, key.request_header_version(version))
            .map_err(|e| anyhow!("cannot encode a {key:?} v{version} header: {e}"))?;
        req.encode(&mut frame, version)
            .map_err(|e| anyhow!("cannot encode a {key:?} v{version} request: {e}"))?;
        let len = u32::try_from(frame.len() - 4).context("request too large")?;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        tokio::time::timeout(REQUEST_TIMEOUT, self.stream.write_all(&frame))
            .await
            .map_err(|_| anyhow!("timed out sending to {}", self.addr))?
            .with_context(|| format!("cannot send to {}", self.addr))?;
        Ok(correlation)
    }

    /// Reads one answer and checks it answers request `correlation`.
    async fn receive(&mut self, correlation: i32, header_version: i16) -> anyhow::Result<Bytes> {
        let read = async {
            let len = self.stream.read_u32().await? as usize;
            if len > MAX_RESPONSE_BYTES {
                return Err(std::io::Error::other(format!(
                    "a {len}-byte answer is larger than the {MAX_RESPONSE_BYTES} bytes allowed"
                )));
            }
            let mut buf = vec![0u8; len];
            self.stream.read_exact(&mut buf).await?;
            Ok(Bytes::from(buf))
        };
        let mut body = match tokio::time::timeout(REQUEST_TIMEOUT, read).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                bail!("the broker at {} closed the connection", self.addr)
            }
            Ok(Err(e)) => bail!("cannot read the answer of {}: {e}", self.addr),
            Err(_) => bail!("no answer from {} within 60s", self.addr),
        };
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| anyhow!("cannot decode the answer's header: {e}"))?;
        if header.correlation_id != correlation {
            bail!(
                "answer to request {} arrived for request {correlation}",
                header.correlation_id
            );
        }
        Ok(body)
    }
}
