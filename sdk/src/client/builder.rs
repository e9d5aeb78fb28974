//! The client's settings, set one by one from their defaults, and the
//! connecting that turns them into a [`Client`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use super::metadata::MetaCache;
use super::{Client, Inner};
use crate::auth::Credentials;
use crate::backoff::Backoff;
use crate::bootstrap::{Bootstrap, Transport};
use crate::conn::ConnOptions;
use crate::error::Error;
use crate::quic::{QuicClient, TrustSettings};

/// Where `Client::connect` starts when nothing else is set.
const DEFAULT_CLIENT_ID: &str = "aerostream-rust";

/// Settings of a [`Client`], set through [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    url: String,
    client_id: String,
    request_timeout: Duration,
    connect_timeout: Duration,
    max_frame_bytes: u32,
    retries: u32,
    retry_backoff: Duration,
    trust: TrustSettings,
    credentials: Option<Credentials>,
}

impl ClientBuilder {
    /// The defaults every setting has until one of the methods below
    /// changes it.
    pub(super) fn new(url: &str) -> ClientBuilder {
        ClientBuilder {
            url: url.to_owned(),
            client_id: DEFAULT_CLIENT_ID.to_owned(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_frame_bytes: 64 << 20,
            retries: 3,
            retry_backoff: Duration::from_millis(100),
            trust: TrustSettings::default(),
            credentials: None,
        }
    }

    /// Logs in as this user, on servers that require authentication (the
    /// same users and mechanisms as their Kafka listener): SCRAM, PLAIN or
    /// an OAuth bearer token. Each connection authenticates when it opens;
    /// when a session reaches the lifetime the server gives it, requests
    /// fail with the retriable SESSION_EXPIRED and the next one connects
    /// and logs in again.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), sdk::Error> {
    /// let client = sdk::Client::builder("aero+quic://broker:9091")
    ///     .credentials(sdk::Credentials::scram_sha512("alice", "s3cret"))
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Names the client in the servers' logs (default `aerostream-rust`).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }

    /// How long a request waits for its answer (default 30 s). A fetch
    /// waits this long on top of its `max_wait`.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long a connection attempt, hello included, may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The largest answer body the client reads (default 64 MiB); a server
    /// frame announcing more closes the connection. Keep it above the
    /// consumer's `max_bytes`.
    pub fn max_frame_bytes(mut self, bytes: u32) -> Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// How many times the admin calls that are safe to repeat (metadata,
    /// offsets, ping) retry a retriable error (default 3), waiting
    /// `retry_backoff` (default 100 ms), doubling, between attempts.
    pub fn retries(mut self, retries: u32, retry_backoff: Duration) -> Self {
        self.retries = retries;
        self.retry_backoff = retry_backoff;
        self
    }

    /// For `aero+quic://`: trusts the CA certificate(s) in `pem` (PEM
    /// text) to sign servers' certificates, e.g. the `ca.pem` an AeroStream
    /// agent writes to `<data dir>/native-tls/` when it was given no
    /// certificate of its own. May be given several times. A server's
    /// certificate must also name the host the client dials (from the URL,
    /// or as the cluster metadata advertises it; IP addresses work).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), sdk::Error> {
    /// let ca = std::fs::read("data/native-tls/ca.pem").expect("the agent's CA");
    /// let client = sdk::Client::builder("aero+quic://localhost:9091")
    ///     .tls_ca_pem(ca)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.trust.ca_pems.push(pem.into());
        self
    }

    /// Like [`ClientBuilder::tls_ca_pem`], from a file read when
    /// connecting (an unreadable file is an [`Error::Config`]).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), sdk::Error> {
    /// let client = sdk::Client::builder("aero+quic://127.0.0.1:9091")
    ///     .tls_ca_file("data/native-tls/ca.pem")
    ///     .connect()
    ///     .await?;
    /// client.ping().await?;
    /// # Ok(()) }
    /// ```
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.trust.ca_files.push(path.into());
        self
    }

    /// For `aero+quic://`: accepts any server certificate, so anyone on the
    /// path can pose as the server. For trying things out only; the
    /// traffic is still encrypted.
    pub fn danger_accept_invalid_certs(mut self) -> Self {
        self.trust.accept_invalid_certs = true;
        self
    }

    /// Parses the URL and connects to the first bootstrap server that
    /// answers the hello. Must run inside a tokio runtime, which the
    /// client's background work (producers) then uses.
    ///
    /// With `aero+quic://` and neither a CA ([`ClientBuilder::tls_ca_file`])
    /// nor [`ClientBuilder::danger_accept_invalid_certs`], fails with
    /// [`Error::Config`] saying so: no system roots are used. A server
    /// whose certificate is not trusted fails with [`Error::Tls`].
    pub async fn connect(self) -> Result<Client, Error> {
        let bootstrap = Bootstrap::parse(&self.url)?;
        if self.request_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::Config("timeouts must be longer than zero".into()));
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Config("the client needs a tokio runtime".into()))?;
        let quic = match bootstrap.transport {
            Transport::Quic => Some(QuicClient::new(&self.trust)?),
            _ => None,
        };
        let client = Client {
            inner: Arc::new(Inner {
                bootstrap,
                options: ConnOptions {
                    client_id: self.client_id,
                    connect_timeout: self.connect_timeout,
                    max_frame_bytes: self.max_frame_bytes,
                    quic,
                    credentials: self.credentials,
                },
                request_timeout: self.request_timeout,
                retries: self.retries,
                reconnect: Backoff {
                    initial: Duration::from_millis(100),
                    max: Duration::from_secs(5),
                },
                retry: Backoff {
                    initial: self.retry_backoff,
                    max: Duration::from_secs(5),
                },
                cache: RwLock::new(MetaCache::default()),
                nodes: Mutex::new(HashMap::new()),
                runtime,
            }),
        };
        client.any_conn().await?;
        Ok(client)
    }
}
