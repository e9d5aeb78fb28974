//! One connection to a broker: TCP or TLS, its ApiVersions, a SASL login,
//! and strictly one request at a time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{error_name, Login, LoginMechanism};

/// Largest answer read (a Metadata answer of a large cluster, a fetch).
const MAX_RESPONSE_BYTES: usize = 128 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longer than any `max_wait_ms` or broker-side timeout a caller sends.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection's bytes: plain TCP or TLS over it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One open connection and what its broker supports.
pub(crate) struct Conn {
    stream: Box<dyn Io>,
    /// api key -> (min, max) version the broker accepts
    pub(crate) versions: HashMap<i16, (i16, i16)>,
    next_correlation: i32,
    /// Header version of the answer to the request last sent.
    pending_header: i16,
    client_id: &'static str,
}

impl Conn {
    pub(crate) async fn open(
        addr: &str,
        tls: Option<Arc<rustls::ClientConfig>>,
        client_id: &'static str,
    ) -> anyhow::Result<Conn> {
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => bail!("cannot reach a broker at {addr}: {e}"),
            Err(_) => bail!(
                "cannot reach a broker at {addr}: no answer within {}s",
                CONNECT_TIMEOUT.as_secs()
            ),
        };
        // best effort: small requests should not wait for Nagle
        let _ = stream.set_nodelay(true);
        let stream: Box<dyn Io> = match tls {
            None => Box::new(stream),
            Some(config) => {
                let host = addr
                    .rsplit_once(':')
                    .map_or(addr, |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = ServerName::try_from(host.to_owned())
                    .with_context(|| format!("{host} is not a name a certificate can hold"))?;
                let handshake = tokio_rustls::TlsConnector::from(config).connect(name, stream);
                match tokio::time::timeout(CONNECT_TIMEOUT, handshake).await {
                    Ok(Ok(s)) => Box::new(s),
                    Ok(Err(e)) => bail!("TLS with the broker at {addr} failed: {e}"),
                    Err(_) => bail!(
                        "TLS with the broker at {addr} failed: no handshake within {}s",
                        CONNECT_TIMEOUT.as_secs()
                    ),
                }
            }
        };
        let mut conn = Conn {
            stream,
            versions: HashMap::new(),
            next_correlation: 1,
            pending_header: 0,
            client_id,
        };
        conn.versions = conn
            .api_versions()
            .await
            .with_context(|| format!("{addr} does not answer like a Kafka broker"))?;
        Ok(conn)
    }

    /// SaslHandshake v1, then SaslAuthenticate (one message for PLAIN, two
    /// for SCRAM, whose last answer must carry the broker's proof that it
    /// holds the user's credential).
    pub(crate) async fn log_in(&mut self, login: &Login) -> anyhow::Result<()> {
        let name = login.mechanism.name();
        let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(name));
        let correlation = self.send(ApiKey::SaslHandshake, 1, &hs).await?;
        let mut body = self.receive(correlation).await?;
        let resp = SaslHandshakeResponse::decode(&mut body, 1)
            .map_err(|e| anyhow!("cannot decode the SaslHandshake answer: {e}"))?;
        if resp.error_code != 0 {
            let offered: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
            bail!(
                "the broker does not take {name} ({}); it offers: {}",
                error_name(resp.error_code),
                offered.join(", ")
            );
        }
        match login.mechanism {
            LoginMechanism::Plain => {
                let message = format!("\0{}\0{}", login.user, login.password);
                self.authenticate(message.into_bytes()).await?;
            }
            LoginMechanism::Scram(m) => {
                let (x, first) = sdk::auth::ScramClient::start(m, &login.user, &login.password)?;
                let text = |b: Bytes| {
                    String::from_utf8(b.to_vec())
                        .map_err(|_| anyhow!("the broker's SCRAM message is not UTF-8"))
                };
                let server_first = text(self.authenticate(first.into_bytes()).await?)?;
                let (fin, expected) = x.answer(&server_first)?;
                let server_final = text(self.authenticate(fin.into_bytes()).await?)?;
                sdk::auth::ScramClient::verify(&server_final, &expected)?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate round trip; the broker's message.
    async fn authenticate(&mut self, message: Vec<u8>) -> anyhow::Result<Bytes> {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message));
        let correlation = self.send(ApiKey::SaslAuthenticate, 2, &req).await?;
        let mut body = self.receive(correlation).await?;
        let resp = SaslAuthenticateResponse::decode(&mut body, 2)
            .map_err(|e| anyhow!("cannot decode the SaslAuthenticate answer: {e}"))?;
        if resp.error_code != 0 {
            bail!(
                "{}: {}",
                error_name(resp.error_code),
                resp.error_message.as_deref().unwrap_or("refused")
            );
        }
        Ok(resp.auth_bytes)
    }

    /// ApiVersions v3, or v0 when the broker refuses v3 (it then answers in v0).
    async fn api_versions(&mut self) -> anyhow::Result<HashMap<i16, (i16, i16)>> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(self.client_id))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut resp = None;
        for version in [3, 0] {
            let correlation = self.send(ApiKey::ApiVersions, version, &req).await?;
            let mut body = self.receive(correlation).await?;
            // an UNSUPPORTED_VERSION answer is always in v0
            let peek = body.clone().try_get_i16().unwrap_or(0);
            let decode_version = if peek == 35 { 0 } else { version };
            let r = ApiVersionsResponse::decode(&mut body, decode_version)
                .map_err(|e| anyhow!("cannot decode the ApiVersions answer: {e}"))?;
            if r.error_code == 35 && version != 0 {
                continue;
            }
            resp = Some(r);
            break;
        }
        let resp = resp.ok_or_else(|| anyhow!("no ApiVersions answer"))?;
        if resp.error_code != 0 {
            bail!("ApiVersions refused: {}", error_name(resp.error_code));
        }
        Ok(resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect())
    }

    pub(crate) async fn send<R: Encodable>(
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
            .with_client_id(Some(StrBytes::from_static_str(self.client_id)))
            .encode(&mut frame, key.request_header_version(version))
            .map_err(|e| anyhow!("cannot encode a {key:?} v{version} header: {e}"))?;
        req.encode(&mut frame, version)
            .map_err(|e| anyhow!("cannot encode a {key:?} v{version} request: {e}"))?;
        let len = u32::try_from(frame.len() - 4).context("request too large")?;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        let header_version = key.response_header_version(version);
        self.pending_header = header_version;
        tokio::time::timeout(REQUEST_TIMEOUT, self.stream.write_all(&frame))
            .await
            .map_err(|_| anyhow!("timed out sending"))?
            .context("cannot send")?;
        Ok(correlation)
    }

    /// Reads one answer and checks it answers request `correlation`.
    pub(crate) async fn receive(&mut self, correlation: i32) -> anyhow::Result<Bytes> {
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
                bail!("the broker closed the connection")
            }
            Ok(Err(e)) => bail!("cannot read the answer: {e}"),
            Err(_) => bail!("no answer within {}s", REQUEST_TIMEOUT.as_secs()),
        };
        let header = ResponseHeader::decode(&mut body, self.pending_header)
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
