//! A client of the public Kafka protocol: one connection per broker,
//! reused for every request to it, with the version of each request
//! negotiated from the broker's ApiVersions answer; TLS, and SASL logins
//! (PLAIN, SCRAM-SHA-256/512), and a transactional producer ([`txn`]). It
//! speaks only the public Kafka protocol, so it works against AeroStream
//! and any other Kafka broker. The admin commands and the stream
//! processor's source and topic sink are its users.
//!
//! Requests on one connection are strictly one at a time (send, then read the
//! answer), which keeps correlation trivial; a caller that talks to several
//! brokers does it one broker after the other.

mod conn;
mod records;
pub mod txn;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FindCoordinatorRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Request, StrBytes};
use kafka_protocol::ResponseError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use conn::Conn;
pub use records::{decode_records, encode_batch, BatchProducer};

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

impl Login {
    /// A login with `mechanism` (SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN, in
    /// any case).
    pub fn new(mechanism: &str, user: &str, password: &str) -> anyhow::Result<Login> {
        let mechanism = match mechanism.to_ascii_uppercase().as_str() {
            "PLAIN" => LoginMechanism::Plain,
            "SCRAM-SHA-256" => LoginMechanism::Scram(sdk::ScramMechanism::Sha256),
            "SCRAM-SHA-512" => LoginMechanism::Scram(sdk::ScramMechanism::Sha512),
            other => {
                bail!("SASL mechanism {other} is not one of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN")
            }
        };
        Ok(Login {
            mechanism,
            user: user.to_owned(),
            password: password.to_owned(),
        })
    }
}

/// TLS client settings trusting the CA certificates (PEM) in `ca`, with a
/// client certificate and its key (PEM) for listeners that ask for one.
pub fn tls_config(
    ca: &Path,
    client_cert: Option<(&Path, &Path)>,
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
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
    let config = match client_cert {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(&read(cert)?)
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("{} is not PEM certificates", cert.display()))?;
            let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
                .with_context(|| format!("{} is not a PEM private key", key.display()))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .context("the client certificate and key do not go together")?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// A Kafka client over a pool of connections, one per broker address.
pub struct Client {
    bootstrap: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    login: Option<Login>,
    /// Broker addresses learned from Metadata and FindCoordinator.
    brokers: HashMap<i32, String>,
    conns: HashMap<String, Conn>,
    client_id: &'static str,
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
        let mut client = Client::new(bootstrap, tls, login);
        client.conn(bootstrap).await?;
        Ok(client)
    }

    /// A client that connects on its first request (to an address the
    /// caller may wait for), identifying itself as `aerostream`.
    pub fn new(
        bootstrap: &str,
        tls: Option<Arc<rustls::ClientConfig>>,
        login: Option<Login>,
    ) -> Self {
        Client {
            bootstrap: bootstrap.to_owned(),
            tls,
            login,
            brokers: HashMap::new(),
            conns: HashMap::new(),
            client_id: "aerostream",
        }
    }

    /// The client id its requests carry (default `aerostream`); connections
    /// opened from now on use it.
    pub fn with_client_id(mut self, client_id: &'static str) -> Self {
        self.client_id = client_id;
        self
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

    /// The broker coordinating `key`: a group (`key_type` 0) or a
    /// transactional id (1); also learns where it listens. A coordinator
    /// still loading is asked again, for a few seconds.
    pub async fn find_coordinator(&mut self, key: &str, key_type: i8) -> anyhow::Result<i32> {
        let addr = self.bootstrap.clone();
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(key.to_owned()))
            .with_key_type(key_type);
        let mut attempt = 0;
        loop {
            let resp = self.call(&addr, &req, 0, 3).await?;
            if resp.error_code == 0 {
                self.learn_broker(resp.node_id.0, &resp.host, resp.port);
                return Ok(resp.node_id.0);
            }
            if !is_retriable(resp.error_code) || attempt >= 10 {
                bail!(describe_error(
                    key,
                    resp.error_code,
                    resp.error_message.as_ref()
                ));
            }
            attempt += 1;
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
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
            let mut conn = Conn::open(addr, self.tls.clone(), self.client_id).await?;
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
