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

use crate::backoff::Backoff;
use crate::bootstrap::{Address, Bootstrap};
use crate::conn::{self, Call, Conn, ConnOptions};
use crate::error::Error;
use crate::proto::{self, CommittedOffset, ErrorCode, MetadataResponse, OffsetSpec};

mod builder;
mod metadata;

pub use builder::ClientBuilder;
pub use metadata::ClusterMetadata;
use metadata::{MetaCache, TopicRoute};

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
        ClientBuilder::new(url)
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
            let answer = self.call_any(request.clone()).await?;
            match commit_outcome(group, &answer) {
                // only the group's coordinator takes its commits
                Err(e) if e.code() == Some(ErrorCode::NOT_COORDINATOR) => {
                    let node = self.find_coordinator(group).await?;
                    let conn = self.node_conn(node).await?;
                    let answer = conn.call(request.clone(), self.request_timeout()).await?;
                    commit_outcome(group, &answer)
                }
                outcome => outcome,
            }
        })
        .await
    }

    /// The node that coordinates `group` (FindCoordinator), its address
    /// learnt so that [`Client::node_conn`] reaches it.
    pub(crate) async fn find_coordinator(&self, group: &str) -> Result<u32, Error> {
        let answer = self
            .call_any(proto::FindCoordinator {
                correlation: 0,
                group: group.to_owned(),
            })
            .await?;
        if answer.error != ErrorCode::NONE {
            return Err(Error::server(
                answer.error,
                format!("finding the coordinator of group {group:?}"),
            ));
        }
        self.learn_node(
            answer.node_id,
            Address {
                host: answer.host,
                port: answer.port,
            },
        );
        Ok(answer.node_id)
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
