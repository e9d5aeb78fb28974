//! The Kafka-protocol client behind the admin commands: one connection per
//! broker, reused for every request to it, with the version of each request
//! negotiated from the broker's ApiVersions answer. It speaks only the public
//! Kafka protocol, so the commands work against any Kafka broker.
//!
//! Requests on one connection are strictly one at a time (send, then read the
//! answer), which keeps correlation trivial; commands that talk to several
//! brokers do it one broker after the other.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, MetadataRequest, MetadataResponse,
    RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kafka_protocol::ResponseError;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest answer read (a Metadata answer of a large cluster, a fetch).
const MAX_RESPONSE_BYTES: usize = 128 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longer than any `max_wait_ms` or broker-side timeout the commands send.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CLIENT_ID: &str = "aerostream-cli";

/// How to reach brokers whose Kafka listener speaks TLS (the `SSL`
/// security protocol).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// Speak TLS, trusting the CA certificates (PEM) in this file.
    #[arg(long, global = true)]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for a listener that asks for one (mutual
    /// TLS); with --tls-key.
    #[arg(long, global = true, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, global = true, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS client settings, or `None` for plaintext.
    pub fn config(&self) -> anyhow::Result<Option<Arc<rustls::ClientConfig>>> {
        let Some(ca) = &self.tls_ca else {
            if self.tls_cert.is_some() {
                bail!("--tls-cert needs --tls-ca: the CA that issued the broker's certificate");
            }
            return Ok(None);
        };
        let read =
            |p: &PathBuf| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&read(ca)?) {
            let c = c.with_context(|| format!("{} is not PEM certificates", ca.display()))?;
            roots
                .add(c)
                .with_context(|| format!("{} holds a certificate rustls refuses", ca.display()))?;
        }
        if roots.is_empty() {
            bail!("{} holds no certificate", ca.display());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_root_certificates(roots);
        let config = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let chain = CertificateDer::pem_slice_iter(&read(cert)?)
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("{} is not PEM certificates", cert.display()))?;
                let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
                    .with_context(|| format!("{} is not a PEM private key", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .context("the client certificate and key do not go together")?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Some(Arc::new(config)))
    }
}

/// A connection's bytes: plain TCP or TLS over it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One open connection and what its broker supports.
struct Conn {
    stream: Box<dyn Io>,
    /// api key -> (min, max) version the broker accepts
    versions: HashMap<i16, (i16, i16)>,
    next_correlation: i32,
    /// Header version of the answer to the request last sent.
    pending_header: i16,
}

/// How to log in to brokers whose Kafka listener requires SASL
/// (`SASL_PLAINTEXT`, or `SASL_SSL` with the TLS flags).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SaslArgs {
    /// SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN; with
    /// --sasl-username.
    #[arg(long, global = true, requires = "sasl_username")]
    pub sasl_mechanism: Option<String>,
    /// The user to log in as (SCRAM-SHA-512 unless --sasl-mechanism says
    /// otherwise).
    #[arg(long, global = true)]
    pub sasl_username: Option<String>,
    /// Its password; read from AEROSTREAM_SASL_PASSWORD when not given, so
    /// it stays out of the shell's history and the process list.
    #[arg(
        long,
        global = true,
        env = "AEROSTREAM_SASL_PASSWORD",
        hide_env_values = true
    )]
    pub sasl_password: Option<String>,
}

/// A SASL login, as every connection of a [`Client`] performs it.
#[derive(Clone)]
pub struct Login {
    mechanism: LoginMechanism,
    user: String,
    password: String,
}

#[derive(Clone, Copy, Debug)]
enum LoginMechanism {
    Plain,
    Scram(sdk::ScramMechanism),
}

impl LoginMechanism {
    fn name(self) -> &'static str {
        match self {
            LoginMechanism::Plain => "PLAIN",
            LoginMechanism::Scram(m) => m.name(),
        }
    }
}

impl SaslArgs {
    /// The login the flags describe; `None` without --sasl-username.
    pub fn login(&self) -> anyhow::Result<Option<Login>> {
        let Some(user) = &self.sasl_username else {
            return Ok(None);
        };
        let mechanism = match self
            .sasl_mechanism
            .as_deref()
            .unwrap_or("SCRAM-SHA-512")
            .to_ascii_uppercase()
            .as_str()
        {
            "PLAIN" => LoginMechanism::Plain,
            "SCRAM-SHA-256" => LoginMechanism::Scram(sdk::ScramMechanism::Sha256),
            "SCRAM-SHA-512" => LoginMechanism::Scram(sdk::ScramMechanism::Sha512),
            other => {
                bail!("--sasl-mechanism {other} is not one of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN")
            }
        };
        let Some(password) = self.sasl_password.clone() else {
            bail!("--sasl-username needs a password: --sasl-password or AEROSTREAM_SASL_PASSWORD");
        };
        Ok(Some(Login {
            mechanism,
            user: user.clone(),
            password,
        }))
    }
}

/// A Kafka client over a pool of connections, one per broker address.
pub struct Client {
    bootstrap: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    login: Option<Login>,
    /// Broker addresses learned from Metadata and FindCoordinator.
    brokers: HashMap<i32, String>,
    conns: HashMap<String, Conn>,
}

impl Client {
    /// Connects to `bootstrap` (`host:port`) and learns its API versions, so
    /// an unreachable address fails here with a clear message.
    /// With `tls`, every connection speaks TLS.
    pub async fn connect(
        bootstrap: &str,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> anyhow::Result<Self> {
        Client::connect_as(bootstrap, tls, None).await
    }

    /// [`Client::connect`], every connection then logging in with `login`.
    pub async fn connect_as(
        bootstrap: &str,
        tls: Option<Arc<rustls::ClientConfig>>,
        login: Option<Login>,
    ) -> anyhow::Result<Self> {
        let mut client = Client {
            bootstrap: bootstrap.to_owned(),
            tls,
            login,
            brokers: HashMap::new(),
            conns: HashMap::new(),
        };
        client.conn(bootstrap).await?;
        Ok(client)
    }

    /// The bootstrap address this client was made with.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The address of broker `node`, as Metadata or FindCoordinator named it.
    pub fn broker_addr(&self, node: i32) -> anyhow::Result<String> {
        self.brokers
            .get(&node)
            .cloned()
            .ok_or_else(|| anyhow!("broker {node} is not in the cluster metadata"))
    }

    /// Remembers where broker `node` listens.
    pub fn learn_broker(&mut self, node: i32, host: &str, port: i32) {
        self.brokers.insert(node, format!("{host}:{port}"));
    }

    /// Metadata for `topics` (`None`: every topic); also learns the brokers.
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
        auto_create: bool,
    ) -> anyhow::Result<MetadataResponse> {
        let topics = topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(topic_name(n)))
                })
                .collect()
        });
        let bootstrap = self.bootstrap.clone();
        let version = self.version::<MetadataRequest>(&bootstrap, 1, 12).await?;
        let mut req = MetadataRequest::default().with_topics(topics);
        if version >= 4 {
            req = req.with_allow_auto_topic_creation(auto_create);
        }
        let resp: MetadataResponse = self.call_at(&bootstrap, &req, version).await?;
        for b in &resp.brokers {
            self.learn_broker(b.node_id.0, &b.host, b.port);
        }
        Ok(resp)
    }

    /// Sends `req` to broker `node` at the highest version both ends know,
    /// between `min` and `max`.
    pub async fn call_node<R: Request>(
        &mut self,
        node: i32,
        req: &R,
        min: i16,
        max: i16,
    ) -> anyhow::Result<R::Response> {
        let addr = self.broker_addr(node)?;
        self.call(&addr, req, min, max).await
    }

    /// Sends `req` to `addr` at the highest version both ends know, between
    /// `min` and `max`.
    pub async fn call<R: Request>(
        &mut self,
        addr: &str,
        req: &R,
        min: i16,
        max: i16,
    ) -> anyhow::Result<R::Response> {
        let version = self.version::<R>(addr, min, max).await?;
        self.call_at(addr, req, version).await
    }

    /// The version of `R` to send to `addr`: the highest both ends know
    /// within `min..=max`.
    pub async fn version<R: Request>(
        &mut self,
        addr: &str,
        min: i16,
        max: i16,
    ) -> anyhow::Result<i16> {
        let key = api_key(R::KEY)?;
        let conn = self.conn(addr).await?;
        let Some(&(theirs_min, theirs_max)) = conn.versions.get(&R::KEY) else {
            bail!("the broker at {addr} does not support {key:?} requests");
        };
        let hi = max.min(theirs_max).min(R::VERSIONS.max);
        let lo = min.max(theirs_min).max(R::VERSIONS.min);
        if hi < lo {
            bail!(
                "the broker at {addr} supports {key:?} versions {theirs_min}-{theirs_max}, \
                 this client {min}-{max}"
            );
        }
        Ok(hi)
    }

    /// Sends `req` at `version` and reads its answer.
    pub async fn call_at<R: Request>(
        &mut self,
        addr: &str,
        req: &R,
        version: i16,
    ) -> anyhow::Result<R::Response> {
        let key = api_key(R::KEY)?;
        let result = async {
            let conn = self.conn(addr).await?;
            let correlation = conn.send(key, version, req).await?;
            let mut body = conn.receive(correlation).await?;
            let resp = R::Response::decode(&mut body, version)
                .map_err(|e| anyhow!("cannot decode the {key:?} v{version} answer: {e}"))?;
            Ok::<_, anyhow::Error>(resp)
        }
        .await;
        if result.is_err() {
            // a half-read answer leaves the stream out of step: start afresh
            self.conns.remove(addr);
        }
        result.with_context(|| format!("{key:?} request to {addr} failed"))
    }

    /// Sends `req` at `version` without waiting for an answer (Produce with
    /// acks=0, which the broker never answers).
    pub async fn send_only<R: Request>(
        &mut self,
        addr: &str,
        req: &R,
        version: i16,
    ) -> anyhow::Result<()> {
        let key = api_key(R::KEY)?;
        let conn = self.conn(addr).await?;
        if let Err(e) = conn.send(key, version, req).await {
            self.conns.remove(addr);
            return Err(e.context(format!("{key:?} request to {addr} failed")));
        }
        Ok(())
    }

    /// The pooled connection to `addr`, opened (and its versions learned) on first use.
    async fn conn(&mut self, addr: &str) -> anyhow::Result<&mut Conn> {
        if !self.conns.contains_key(addr) {
            let mut conn = Conn::open(addr, self.tls.clone()).await?;
            if let Some(login) = &self.login {
                conn.log_in(login)
                    .await
                    .with_context(|| format!("cannot log in to the broker at {addr}"))?;
            }
            self.conns.insert(addr.to_owned(), conn);
        }
        self.conns
            .get_mut(addr)
            .ok_or_else(|| anyhow!("connection to {addr} vanished"))
    }
}

impl Conn {
    async fn open(addr: &str, tls: Option<Arc<rustls::ClientConfig>>) -> anyhow::Result<Conn> {
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
    async fn log_in(&mut self, login: &Login) -> anyhow::Result<()> {
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
            .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
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
        let header_version = key.response_header_version(version);
        self.pending_header = header_version;
        tokio::time::timeout(REQUEST_TIMEOUT, self.stream.write_all(&frame))
            .await
            .map_err(|_| anyhow!("timed out sending"))?
            .context("cannot send")?;
        Ok(correlation)
    }

    /// Reads one answer and checks it answers request `correlation`.
    async fn receive(&mut self, correlation: i32) -> anyhow::Result<Bytes> {
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

fn api_key(key: i16) -> anyhow::Result<ApiKey> {
    ApiKey::try_from(key).map_err(|_| anyhow!("unknown API key {key}"))
}

/// A topic name as the protocol types want it.
pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// A broker id as the protocol types want it.
pub fn broker(id: i32) -> BrokerId {
    BrokerId(id)
}

/// Kafka's name for error `code` (`UnknownTopicOrPartition`), or its number.
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "no error".to_owned(),
        Some(ResponseError::Unknown(c)) => format!("error code {c}"),
        Some(e) => e.to_string(),
    }
}

/// Whether a client may retry after error `code` (after fresh metadata).
pub fn is_retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}

/// A readable sentence for error `code` on `what` (a topic, a group), with
/// the broker's own message when it sent one.
pub fn describe_error(what: &str, code: i16, message: Option<&StrBytes>) -> String {
    let plain = match code {
        3 => format!("unknown topic or partition: {what}"),
        15 => format!("the coordinator of {what} is not available yet; retry shortly"),
        16 => format!("{what}: the broker is not its coordinator"),
        36 => format!("topic {what} already exists"),
        37 => format!("{what}: invalid number of partitions"),
        38 => format!("{what}: invalid replication factor"),
        40 => format!("{what}: invalid config"),
        69 => format!("group {what} does not exist"),
        _ => format!("{what}: {}", error_name(code)),
    };
    // for these the sentence says it all; elsewhere the broker's words help
    if matches!(code, 3 | 36 | 69) {
        return plain;
    }
    match message.map(|m| m.as_str()).filter(|m| !m.is_empty()) {
        Some(m) => format!("{plain} ({m})"),
        None => plain,
    }
}

/// Whether an answer's topic name is `want`.
pub fn named(name: Option<&TopicName>, want: &str) -> bool {
    name.is_some_and(|n| n.as_str() == want)
}
