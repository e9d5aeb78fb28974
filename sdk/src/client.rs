//! The client: bootstrap, cached metadata, one connection per server, and
//! the admin calls.
//!
//! A [`Client`] is a cheap handle (`Clone` shares everything). It keeps:
//!
//! - the cluster metadata it has learnt: the servers (node id → native
//!   address) and, per topic asked about, each partition's leader. The
//!   cache is refreshed when a server answers NOT_LEADER, UNKNOWN_TOPIC,
//!   UNKNOWN_PARTITION or NOT_AVAILABLE, when a server cannot be reached,
//!   and on demand ([`Client::metadata`]);
//! - one connection per node id, over the bootstrap URL's transport (TCP,
//!   or a QUIC connection whose first stream carries the requests; its
//!   certificate is checked for the host the metadata advertises). A
//!   dropped connection is replaced on the
//!   next request for that node, after a backoff that starts at 100 ms and
//!   doubles up to 5 s while attempts keep failing. Bootstrap servers
//!   become the connection of the node id they announce in their hello.
//!
//! Requests about a partition go to its leader's connection; metadata and
//! admin requests go to any live connection (or the first server that
//! answers). No lock is held across an `.await` except each node's dial
//! gate, an async mutex that makes concurrent requests for a node with no
//! connection share one connection attempt.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use crate::auth::Credentials;
use crate::backoff::Backoff;
use crate::bootstrap::{Address, Bootstrap, Transport};
use crate::conn::{self, Call, Conn, ConnOptions};
use crate::error::Error;
use crate::proto::{
    self, CommittedOffset, ErrorCode, MetadataResponse, Node, OffsetSpec, PartitionMetadata,
    TopicMetadata,
};
use crate::quic::{QuicClient, TrustSettings};

/// Where `Client::connect` starts when nothing else is set.
const DEFAULT_CLIENT_ID: &str = "aerostream-rust";

/// A connection to an AeroStream cluster over the native protocol.
///
/// ```no_run
/// # async fn run() -> Result<(), sdk::Error> {
/// let client = sdk::Client::connect("aero://localhost:9091").await?;
/// client.create_topic(sdk::NewTopic::new("events", 3)).await?;
/// let metadata = client.metadata(&["events"]).await?;
/// assert_eq!(metadata.topic("events").map(|t| t.partitions.len()), Some(3));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("bootstrap", &self.inner.bootstrap)
            .field("client_id", &self.inner.options.client_id)
            .finish_non_exhaustive()
    }
}

struct Inner {
    bootstrap: Bootstrap,
    options: ConnOptions,
    request_timeout: Duration,
    retries: u32,
    reconnect: Backoff,
    retry: Backoff,
    cache: RwLock<MetaCache>,
    nodes: Mutex<HashMap<u32, Arc<NodeSlot>>>,
    runtime: tokio::runtime::Handle,
}

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

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewTopic {
    pub name: String,
    /// `None` for the server's default (`num.partitions`).
    pub partitions: Option<u32>,
    /// `None` for the server's default (`default.replication.factor`).
    pub replication_factor: Option<u16>,
    /// Kafka topic settings, e.g. `("retention.ms", "86400000")`.
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic of `partitions` partitions, other settings the server's.
    pub fn new(name: impl Into<String>, partitions: u32) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions: Some(partitions),
            ..NewTopic::default()
        }
    }

    /// Sets the replication factor.
    pub fn replication_factor(mut self, factor: u16) -> NewTopic {
        self.replication_factor = Some(factor);
        self
    }

    /// Adds a topic setting.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> NewTopic {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// What [`Client::metadata`] found: the servers and the topics asked
/// about, each with its error code (UNKNOWN_TOPIC for a missing one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterMetadata {
    pub nodes: Vec<Node>,
    pub topics: Vec<TopicMetadata>,
}

impl ClusterMetadata {
    /// The topic of this name, if it exists.
    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics
            .iter()
            .find(|t| t.name == name && t.error == ErrorCode::NONE)
    }
}

/// A topic's partitions as the client routes to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicRoute {
    pub name: Arc<str>,
    /// The leader of partition `i` at index `i`; `None` while it has none.
    pub leaders: Vec<Option<u32>>,
}

impl TopicRoute {
    fn from_metadata(t: &TopicMetadata) -> TopicRoute {
        let count = t
            .partitions
            .iter()
            .map(|p| p.index as usize + 1)
            .max()
            .unwrap_or(0);
        let mut leaders = vec![None; count];
        for PartitionMetadata { index, leader, .. } in &t.partitions {
            leaders[*index as usize] = u32::try_from(*leader).ok();
        }
        TopicRoute {
            name: Arc::from(t.name.as_str()),
            leaders,
        }
    }

    pub(crate) fn partitions(&self) -> u32 {
        self.leaders.len() as u32
    }

    pub(crate) fn leader(&self, partition: u32) -> Option<u32> {
        self.leaders.get(partition as usize).copied().flatten()
    }
}

#[derive(Debug, Default)]
struct MetaCache {
    nodes: HashMap<u32, Address>,
    topics: HashMap<String, Arc<TopicRoute>>,
}

impl MetaCache {
    fn apply(&mut self, answer: &MetadataResponse, all_topics: bool) {
        if !answer.nodes.is_empty() {
            self.nodes = answer
                .nodes
                .iter()
                .map(|n| {
                    let addr = Address {
                        host: n.host.clone(),
                        port: n.port,
                    };
                    (n.id, addr)
                })
                .collect();
        }
        if all_topics {
            self.topics.clear();
        }
        for t in &answer.topics {
            if t.error == ErrorCode::NONE {
                self.topics
                    .insert(t.name.clone(), Arc::new(TopicRoute::from_metadata(t)));
            } else {
                self.topics.remove(&t.name);
            }
        }
    }
}

/// One node's connection, and the gate that makes a single attempt at a
/// time replace it.
#[derive(Default)]
struct NodeSlot {
    live: Mutex<Option<Arc<Conn>>>,
    dial: tokio::sync::Mutex<Dial>,
}

#[derive(Debug, Default)]
struct Dial {
    /// Failed attempts (a dropped connection counts as one) since the last
    /// connection that worked.
    failures: u32,
    retry_at: Option<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl NodeSlot {
    fn live(&self) -> Option<Arc<Conn>> {
        lock(&self.live).clone().filter(|c| !c.is_closed())
    }

    /// Installs `conn` unless a live connection is there already.
    fn adopt(&self, conn: &Arc<Conn>) {
        let mut live = lock(&self.live);
        if live.as_ref().is_none_or(|c| c.is_closed()) {
            *live = Some(Arc::clone(conn));
        }
    }
}

impl Client {
    /// Connects with default settings: `aero://host:port`, or a list
    /// `aero://h1:p1,h2:p2` of bootstrap servers tried in order. QUIC
    /// (`aero+quic://`) needs a CA to trust, so goes through
    /// [`Client::builder`] and [`ClientBuilder::tls_ca_file`].
    pub async fn connect(url: &str) -> Result<Client, Error> {
        Client::builder(url).connect().await
    }

    /// Settings beyond the URL; finish with [`ClientBuilder::connect`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), sdk::Error> {
    /// use std::time::Duration;
    ///
    /// let client = sdk::Client::builder("aero://h1:9091,h2:9091")
    ///     .client_id("billing")
    ///     .request_timeout(Duration::from_secs(10))
    ///     .connect()
    ///     .await?;
    /// client.ping().await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: &str) -> ClientBuilder {
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

    pub(crate) fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    // ------------------------------------------------------------ admin

    /// Round trip to a server: the time a ping took.
    pub async fn ping(&self) -> Result<Duration, Error> {
        self.retrying(&[], || async {
            let conn = self.any_conn().await?;
            let nonce = rand::random::<u64>();
            let start = Instant::now();
            let pong = conn
                .call(
                    proto::Ping {
                        correlation: 0,
                        nonce,
                    },
                    self.request_timeout(),
                )
                .await?;
            if pong.nonce != nonce {
                return Err(Error::Protocol(format!(
                    "ping {nonce} answered with {}",
                    pong.nonce
                )));
            }
            Ok(start.elapsed())
        })
        .await
    }

    /// Fetches metadata for `topics` (every topic when empty) and refreshes
    /// the client's cache with it.
    pub async fn metadata(&self, topics: &[&str]) -> Result<ClusterMetadata, Error> {
        let answer = self.retrying(&[], || self.refresh(topics)).await?;
        Ok(ClusterMetadata {
            nodes: answer.nodes,
            topics: answer.topics,
        })
    }

    /// Creates a topic. Not retried: a retry after a lost answer would
    /// see TOPIC_ALREADY_EXISTS.
    pub async fn create_topic(&self, topic: NewTopic) -> Result<(), Error> {
        let partitions = match topic.partitions {
            None => -1,
            Some(p) => i32::try_from(p)
                .map_err(|_| Error::Config(format!("{p} partitions are too many")))?,
        };
        let replication_factor = match topic.replication_factor {
            None => -1,
            Some(r) => i16::try_from(r)
                .map_err(|_| Error::Config(format!("replication factor {r} is too large")))?,
        };
        let request = proto::CreateTopic {
            correlation: 0,
            name: topic.name,
            partitions,
            replication_factor,
            configs: topic.configs,
        };
        let answer = self.call_any(request).await?.0;
        match answer.error {
            ErrorCode::NONE => Ok(()),
            code => Err(Error::server(code, answer.message)),
        }
    }

    /// Deletes a topic. Not retried, like [`Client::create_topic`].
    pub async fn delete_topic(&self, name: &str) -> Result<(), Error> {
        let request = proto::DeleteTopic {
            correlation: 0,
            name: name.to_owned(),
        };
        let answer = self.call_any(request).await?.0;
        self.write_cache().topics.remove(name);
        match answer.error {
            ErrorCode::NONE => Ok(()),
            code => Err(Error::server(code, answer.message)),
        }
    }

    /// The offset `spec` designates in a partition, asked of its leader:
    /// the log start, the high watermark, or the first offset whose
    /// timestamp is at or after a time (-1 when every record is older).
    pub async fn list_offsets(
        &self,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> Result<i64, Error> {
        self.retrying(&[topic], || async {
            let mut found = self
                .list_offsets_many(&[(topic.to_owned(), partition, spec)])
                .await;
            found.pop().unwrap_or(Err(Error::Closed))
        })
        .await
    }

    /// Commits `(topic, partition, next offset to read)` for `group`,
    /// outside any group membership, where Kafka clients of the group see
    /// them too.
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: &[(&str, u32, i64)],
    ) -> Result<(), Error> {
        let request = commit_request(group, offsets);
        self.retrying(&[], || async {
            commit_outcome(group, &self.call_any(request.clone()).await?)
        })
        .await
    }

    /// The offsets `group` committed for these partitions, in their order;
    /// `None` where it committed nothing.
    pub async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(&str, u32)],
    ) -> Result<Vec<Option<i64>>, Error> {
        let request = proto::FetchOffsets {
            correlation: 0,
            group: group.to_owned(),
            partitions: partitions.iter().map(|&(t, p)| (t.to_owned(), p)).collect(),
        };
        self.retrying(&[], || async {
            committed_outcome(group, partitions, &self.call_any(request.clone()).await?)
        })
        .await
    }

    // ------------------------------------------------------------ routing

    /// Runs `attempt` again while it fails with a retriable error, up to
    /// the client's retries, refreshing `topics`' metadata first when the
    /// error says routing is stale.
    pub(crate) async fn retrying<T, F, Fut>(
        &self,
        topics: &[&str],
        mut attempt: F,
    ) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut failures = 0;
        loop {
            match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retriable() && failures < self.inner.retries => {
                    failures += 1;
                    tracing::debug!(error = %e, failures, "retrying");
                    tokio::time::sleep(self.inner.retry.jittered(failures)).await;
                    if e.wants_metadata() && !topics.is_empty() {
                        // Best effort: the next attempt reports what is wrong.
                        let _ = self.refresh(topics).await;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends a request to any server and waits for its answer.
    pub(crate) async fn call_any<R: Call>(&self, request: R) -> Result<R::Response, Error> {
        let conn = self.any_conn().await?;
        conn.call(request, self.request_timeout()).await
    }

    fn read_cache(&self) -> std::sync::RwLockReadGuard<'_, MetaCache> {
        self.inner
            .cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_cache(&self) -> std::sync::RwLockWriteGuard<'_, MetaCache> {
        self.inner
            .cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks a server for `topics`' metadata (all topics when empty) and
    /// updates the cache with the answer.
    pub(crate) async fn refresh(&self, topics: &[&str]) -> Result<MetadataResponse, Error> {
        let request = proto::Metadata {
            correlation: 0,
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
        };
        let answer = self.call_any(request).await?;
        self.write_cache().apply(&answer, topics.is_empty());
        Ok(answer)
    }

    /// The cached route of a topic, without asking anyone.
    pub(crate) fn cached_route(&self, topic: &str) -> Option<Arc<TopicRoute>> {
        self.read_cache().topics.get(topic).cloned()
    }

    /// The route of a topic: cached, or fetched when not.
    pub(crate) async fn route(&self, topic: &str) -> Result<Arc<TopicRoute>, Error> {
        if let Some(route) = self.cached_route(topic) {
            return Ok(route);
        }
        self.refresh(&[topic]).await?;
        self.cached_route(topic)
            .ok_or_else(|| Error::UnknownTopic(topic.to_owned()))
    }

    /// The node leading a partition, from the cache or a refresh.
    pub(crate) async fn leader(&self, topic: &str, partition: u32) -> Result<u32, Error> {
        let route = self.route(topic).await?;
        if partition >= route.partitions() {
            return Err(Error::UnknownPartition {
                topic: topic.to_owned(),
                partition,
            });
        }
        route.leader(partition).ok_or_else(|| {
            Error::server(
                ErrorCode::NOT_AVAILABLE,
                format!("{topic}/{partition} has no leader right now"),
            )
        })
    }

    /// Looks up several partitions' offsets, one request per leader. No
    /// retry: each partition gets its own result.
    pub(crate) async fn list_offsets_many(
        &self,
        wanted: &[(String, u32, OffsetSpec)],
    ) -> Vec<Result<i64, Error>> {
        let mut results: Vec<Option<Result<i64, Error>>> = vec![None; wanted.len()];
        let mut by_node: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, (topic, partition, _)) in wanted.iter().enumerate() {
            match self.leader(topic, *partition).await {
                Ok(node) => by_node.entry(node).or_default().push(i),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        let requests = by_node.into_iter().map(|(node, indexes)| {
            let request = proto::ListOffsets {
                correlation: 0,
                partitions: indexes
                    .iter()
                    .map(|&i| {
                        let (t, p, spec) = &wanted[i];
                        (t.clone(), *p, spec.to_wire())
                    })
                    .collect(),
            };
            async move {
                let answer = async {
                    let conn = self.node_conn(node).await?;
                    conn.call(request, self.request_timeout()).await
                }
                .await;
                (indexes, answer)
            }
        });
        for (indexes, answer) in futures::future::join_all(requests).await {
            for i in indexes {
                let (topic, partition, _) = &wanted[i];
                results[i] = Some(match &answer {
                    Err(e) => Err(e.clone()),
                    Ok(answer) => {
                        let found = answer
                            .partitions
                            .iter()
                            .find(|o| o.topic == *topic && o.partition == *partition);
                        match found {
                            None => Err(Error::Protocol(format!(
                                "no offset of {topic}/{partition} in the answer"
                            ))),
                            Some(o) if o.error != ErrorCode::NONE => Err(Error::server(
                                o.error,
                                format!("listing offsets of {topic}/{partition}"),
                            )),
                            Some(o) => Ok(o.offset),
                        }
                    }
                });
            }
        }
        let mut refresh = Vec::new();
        for (r, (topic, _, _)) in results.iter().zip(wanted) {
            if matches!(r, Some(Err(e)) if e.wants_metadata()) && !refresh.contains(&topic.as_str())
            {
                refresh.push(topic.as_str());
            }
        }
        if !refresh.is_empty() {
            let _ = self.refresh(&refresh).await;
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Err(Error::Closed)))
            .collect()
    }

    // ------------------------------------------------------------ connections

    /// Remembers the address of a node learnt outside a Metadata answer
    /// (a group's coordinator), so that [`Client::node_conn`] can reach it.
    pub(crate) fn learn_node(&self, node: u32, addr: Address) {
        self.write_cache().nodes.insert(node, addr);
    }

    /// The largest request body `node` accepts, if connected to it.
    pub(crate) fn server_max_frame(&self, node: u32) -> Option<usize> {
        let slot = lock(&self.inner.nodes).get(&node).cloned()?;
        slot.live().map(|c| c.info().max_frame_bytes as usize)
    }

    fn slot(&self, node: u32) -> Arc<NodeSlot> {
        Arc::clone(lock(&self.inner.nodes).entry(node).or_default())
    }

    /// The connection to `node`, connecting (after the backoff its
    /// failures call for) when there is none.
    pub(crate) async fn node_conn(&self, node: u32) -> Result<Arc<Conn>, Error> {
        let slot = self.slot(node);
        if let Some(conn) = slot.live() {
            return Ok(conn);
        }
        let mut dial = slot.dial.lock().await;
        // Someone else may have connected while we waited at the gate.
        if let Some(conn) = slot.live() {
            return Ok(conn);
        }
        let dead = lock(&slot.live).take();
        if let Some(closed_at) = dead.and_then(|c| c.closed_at()) {
            if dial.failures == 0 {
                dial.failures = 1;
                dial.retry_at = Some(closed_at + self.inner.reconnect.jittered(1));
            }
        }
        if let Some(at) = dial.retry_at {
            tokio::time::sleep_until(at.into()).await;
        }
        let addr = self
            .read_cache()
            .nodes
            .get(&node)
            .cloned()
            .ok_or(Error::UnknownNode(node))?;
        match conn::connect(&addr, self.inner.bootstrap.transport, &self.inner.options).await {
            Ok(conn) => {
                if conn.info().node_id != node {
                    tracing::warn!(
                        node,
                        answered = conn.info().node_id,
                        %addr,
                        "a server answered as another node than the metadata says"
                    );
                }
                let conn = Arc::new(conn);
                *dial = Dial::default();
                *lock(&slot.live) = Some(Arc::clone(&conn));
                Ok(conn)
            }
            Err(e) => {
                dial.failures += 1;
                dial.retry_at = Some(Instant::now() + self.inner.reconnect.jittered(dial.failures));
                Err(e)
            }
        }
    }

    /// A connection to any server: a live one if there is one, else the
    /// first known node or bootstrap server that answers.
    pub(crate) async fn any_conn(&self) -> Result<Arc<Conn>, Error> {
        let slots: Vec<(u32, Arc<NodeSlot>)> = lock(&self.inner.nodes)
            .iter()
            .map(|(id, s)| (*id, Arc::clone(s)))
            .collect();
        if let Some(conn) = slots.iter().find_map(|(_, s)| s.live()) {
            return Ok(conn);
        }
        let mut last = None;
        let known: Vec<u32> = self.read_cache().nodes.keys().copied().collect();
        for node in known {
            let backing_off = slots.iter().any(|(id, s)| {
                *id == node
                    && s.dial
                        .try_lock()
                        .map_or(true, |d| d.retry_at.is_some_and(|at| at > Instant::now()))
            });
            if backing_off {
                continue;
            }
            match self.node_conn(node).await {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        for addr in &self.inner.bootstrap.addresses {
            match conn::connect(addr, self.inner.bootstrap.transport, &self.inner.options).await {
                Ok(conn) => {
                    let conn = Arc::new(conn);
                    self.slot(conn.info().node_id).adopt(&conn);
                    return Ok(conn);
                }
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "bootstrap server did not answer");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or(Error::Closed))
    }
}

/// A commit of `offsets` (next offsets to read) for `group`, outside
/// membership; a member sets its generation and id.
pub(crate) fn commit_request(group: &str, offsets: &[(&str, u32, i64)]) -> proto::CommitOffsets {
    proto::CommitOffsets {
        group: group.to_owned(),
        offsets: offsets
            .iter()
            .map(|&(topic, partition, offset)| CommittedOffset {
                topic: topic.to_owned(),
                partition,
                offset,
                metadata: String::new(),
            })
            .collect(),
        ..proto::CommitOffsets::default()
    }
}

/// The committed offsets of a FetchOffsets answer, in the order of
/// `partitions`; `None` where the group committed nothing.
pub(crate) fn committed_outcome(
    group: &str,
    partitions: &[(&str, u32)],
    answer: &proto::FetchOffsetsResponse,
) -> Result<Vec<Option<i64>>, Error> {
    partitions
        .iter()
        .map(|&(topic, partition)| {
            let found = answer
                .offsets
                .iter()
                .find(|(o, _)| o.topic == topic && o.partition == partition);
            match found {
                None => Err(Error::Protocol(format!(
                    "no committed offset of {topic}/{partition} in the answer"
                ))),
                Some((_, code)) if *code != ErrorCode::NONE => Err(Error::server(
                    *code,
                    format!("reading the offset of {topic}/{partition} for group {group:?}"),
                )),
                Some((o, _)) => Ok((o.offset >= 0).then_some(o.offset)),
            }
        })
        .collect()
}

/// The first error of a commit's answer, if any.
pub(crate) fn commit_outcome(
    group: &str,
    answer: &proto::CommitOffsetsResponse,
) -> Result<(), Error> {
    match answer
        .partitions
        .iter()
        .find(|(_, _, e)| *e != ErrorCode::NONE)
    {
        None => Ok(()),
        Some((topic, partition, code)) => Err(Error::server(
            *code,
            format!("committing {topic}/{partition} for group {group:?}"),
        )),
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
