//! The consumer: a [`Stream`] of the records of the partitions assigned
//! to it.
//!
//! Partitions are assigned by the application ([`Consumer::assign`]); the
//! consumer keeps, per partition, the next offset to fetch and the next
//! offset to hand out (its *position*). Work happens while the stream is
//! polled, with no background task:
//!
//! 1. A partition's first offset comes from its [`StartAt`] (ListOffsets
//!    to its leader, or the group's committed offset), looked up by
//!    `assign`, or again while polling if that lookup failed or the offset
//!    went out of range.
//! 2. Partitions with an offset, no fetch in flight and nothing buffered
//!    are fetched from their leader: ONE long-poll `Fetch` per leader node
//!    in flight, covering all of that node's ready partitions.
//! 3. Fetched records are decoded (records below the offset asked for and
//!    control records left out) and buffered; the stream yields them in
//!    offset order per partition, advancing the position as it goes.
//! 4. A seek changes both offsets and drops what was buffered; the answer
//!    of a fetch sent before the seek is recognised by its offset and
//!    dropped too.
//! 5. Retriable errors (not leader, unavailable, connection lost) back the
//!    partition off (100 ms doubling to 5 s) and refresh metadata; they are
//!    not yielded. Other errors are yielded as `Err` items, and the
//!    partition is tried again after its backoff.
//!
//! With [`Membership::Group`], [`Consumer::subscribe`] joins the group
//! instead: the server assigns the partitions, and a background task
//! (`group.rs`) keeps the membership and hands assignment changes to the
//! stream, which applies them when polled (see [`GroupOptions`]).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use futures::FutureExt;

use crate::backoff::Backoff;
use crate::client::Client;
use crate::error::Error;
use crate::group::Group;
pub use crate::group::GroupMetadata;
use crate::proto::Start;
use crate::proto::{self, ErrorCode, FetchPartition, FetchTopic, OffsetSpec};
use crate::proto::{AbortedTxn, Isolation};
use crate::record::{decode_fetched, ConsumedRecord};
use crate::subscription::{Subscription, SubscriptionConfig};

mod config;
// Group membership: subscribe, close, and applying the group's changes.
mod membership;

pub use config::{ConsumerConfig, Membership, OffsetReset, ReadMode, StartAt};

type Tp = (Arc<str>, u32);

#[derive(Debug)]
struct Part {
    /// How to find `fetch_offset` when it is `None`.
    start: StartAt,
    fetch_offset: Option<i64>,
    position: Option<i64>,
    buffered: usize,
    fetching: bool,
    resolving: bool,
    /// Out of range with [`OffsetReset::Fail`]: waits for a seek.
    paused: bool,
    /// With [`ReadMode::Push`]: the open subscription, from `fetch_offset`.
    sub: Option<Subscription>,
    subscribing: bool,
    failures: u32,
    retry_at: Option<Instant>,
}

impl Part {
    fn new(start: StartAt) -> Part {
        let offset = match start {
            StartAt::Offset(o) => Some(o),
            _ => None,
        };
        Part {
            start,
            fetch_offset: offset,
            position: offset,
            buffered: 0,
            fetching: false,
            resolving: false,
            paused: false,
            sub: None,
            subscribing: false,
            failures: 0,
            retry_at: None,
        }
    }

    fn waiting(&self, now: Instant) -> bool {
        self.paused || self.retry_at.is_some_and(|at| at > now)
    }
}

enum Event {
    Fetched {
        node: u32,
        asked: Vec<(Tp, i64)>,
        result: Result<Fetched, Error>,
    },
    Resolved(Vec<(Tp, StartAt, Result<i64, Error>)>),
    Subscribed {
        tp: Tp,
        offset: i64,
        result: Result<Subscription, Error>,
    },
    Refreshed(Arc<str>),
}

/// Reads the records of assigned partitions, as a [`Stream`].
///
/// ```no_run
/// # async fn run() -> Result<(), sdk::Error> {
/// use futures::StreamExt;
/// use sdk::{Client, ConsumerConfig, StartAt};
///
/// let client = Client::connect("aero://localhost:9091").await?;
/// let config = ConsumerConfig {
///     group: Some("billing".into()),
///     ..ConsumerConfig::default()
/// };
/// let mut consumer = client.consumer(config)?;
/// consumer.assign("events", None, StartAt::Committed).await?;
/// while let Some(record) = consumer.next().await {
///     let record = record?;
///     println!("{}@{}: {:?}", record.partition, record.offset, record.value);
///     consumer.commit().await?;
/// }
/// # Ok(()) }
/// ```
///
/// The stream ends (`None`) only while nothing is assigned and the
/// consumer is not subscribed to a group; assigning again revives it.
pub struct Consumer {
    client: Client,
    config: ConsumerConfig,
    backoff: Backoff,
    parts: BTreeMap<Tp, Part>,
    buffer: VecDeque<ConsumedRecord>,
    errors: VecDeque<Error>,
    tasks: FuturesUnordered<BoxFuture<'static, Event>>,
    busy_nodes: HashSet<u32>,
    refreshing: HashSet<Arc<str>>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The group membership task, once subscribed.
    group: Option<Group>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("group", &self.config.group)
            .field("parts", &self.parts)
            .field("buffered", &self.buffer.len())
            .finish_non_exhaustive()
    }
}

impl Consumer {
    pub(crate) fn new(client: Client, config: ConsumerConfig) -> Result<Consumer, Error> {
        if config.max_bytes == 0 || config.partition_max_bytes == 0 {
            return Err(Error::Config(
                "max_bytes and partition_max_bytes must be above zero".into(),
            ));
        }
        if u32::try_from(config.max_wait.as_millis()).is_err() {
            return Err(Error::Config("max_wait is too long".into()));
        }
        if config.isolation == Isolation::ReadCommitted && config.read_mode != ReadMode::Fetch {
            return Err(Error::Config(
                "read_committed is served by fetches only: subscriptions push read_uncommitted"
                    .into(),
            ));
        }
        if config.read_mode == (ReadMode::Push { window: 0 }) {
            return Err(Error::Config("a push window must be above zero".into()));
        }
        if config.group.as_deref() == Some("") {
            return Err(Error::Config("the group name is empty".into()));
        }
        if let Membership::Group(options) = &config.membership {
            if config.group.is_none() {
                return Err(Error::Config("group membership needs a group name".into()));
            }
            options.check()?;
        }
        Ok(Consumer {
            client,
            config,
            backoff: Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_secs(5),
            },
            parts: BTreeMap::new(),
            buffer: VecDeque::new(),
            errors: VecDeque::new(),
            tasks: FuturesUnordered::new(),
            busy_nodes: HashSet::new(),
            refreshing: HashSet::new(),
            timer: None,
            group: None,
        })
    }

    /// Assigns partitions of `topic` (all of them with `None`), each to
    /// start at `start`, which is looked up now (ListOffsets, committed
    /// offsets). Assigning a partition again restarts it there.
    pub async fn assign(
        &mut self,
        topic: &str,
        partitions: Option<Vec<u32>>,
        start: StartAt,
    ) -> Result<(), Error> {
        match start {
            StartAt::Committed if self.config.group.is_none() => {
                return Err(Error::Config(
                    "starting at the committed offset needs a group".into(),
                ))
            }
            StartAt::Offset(o) | StartAt::Timestamp(o) if o < 0 => {
                return Err(Error::Config(format!("{start:?} is negative")))
            }
            _ => {}
        }
        let route = self.client.route(topic).await?;
        let partitions = partitions.unwrap_or_else(|| (0..route.partitions()).collect());
        if let Some(&p) = partitions.iter().find(|&&p| p >= route.partitions()) {
            return Err(Error::UnknownPartition {
                topic: topic.to_owned(),
                partition: p,
            });
        }
        let tps: Vec<Tp> = partitions
            .into_iter()
            .map(|p| (Arc::clone(&route.name), p))
            .collect();
        // Find the starting offsets now, so that the start is the one of
        // this call (what `Latest` means, above all). A lookup that failed
        // for a reason retrying cures is done again while polling.
        let mut found = HashMap::new();
        if !matches!(start, StartAt::Offset(_)) {
            let wanted = tps.iter().map(|tp| (tp.clone(), start)).collect();
            for (tp, _, result) in resolve(&self.client, self.config.group.clone(), wanted).await {
                match result {
                    Ok(offset) => {
                        found.insert(tp, offset);
                    }
                    Err(e) if e.is_retriable() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        for tp in tps {
            self.drop_buffered(&tp);
            let mut part = Part::new(start);
            if let Some(&offset) = found.get(&tp) {
                part.fetch_offset = Some(offset);
                part.position = Some(offset);
            }
            self.parts.insert(tp, part);
        }
        Ok(())
    }

    /// Stops reading `topic`'s partitions (all of them with `None`).
    pub fn unassign(&mut self, topic: &str, partitions: Option<&[u32]>) {
        self.parts
            .retain(|(t, p), _| !(&**t == topic && partitions.is_none_or(|ps| ps.contains(p))));
        self.buffer.retain(|r| {
            !(&*r.topic == topic && partitions.is_none_or(|ps| ps.contains(&r.partition)))
        });
    }

    /// The assigned partitions.
    pub fn assignment(&self) -> Vec<(String, u32)> {
        self.parts
            .keys()
            .map(|(t, p)| (t.to_string(), *p))
            .collect()
    }

    /// The offset of the next record the stream will yield from a
    /// partition; `None` while not assigned or not found yet.
    pub fn position(&self, topic: &str, partition: u32) -> Option<i64> {
        self.part(topic, partition)?.1.position
    }

    fn part(&self, topic: &str, partition: u32) -> Option<(&Tp, &Part)> {
        self.parts
            .iter()
            .find(|((t, p), _)| &**t == topic && *p == partition)
    }

    /// Moves an assigned partition to `offset`: the next record it yields
    /// is the one at `offset`. Clears a pause after an out-of-range error.
    pub fn seek(&mut self, topic: &str, partition: u32, offset: i64) -> Result<(), Error> {
        if offset < 0 {
            return Err(Error::Config(format!("cannot seek to offset {offset}")));
        }
        let Some((tp, _)) = self.part(topic, partition) else {
            return Err(Error::Config(format!(
                "{topic}/{partition} is not assigned to this consumer"
            )));
        };
        let tp = tp.clone();
        self.drop_buffered(&tp);
        if let Some(part) = self.parts.get_mut(&tp) {
            part.fetch_offset = Some(offset);
            part.position = Some(offset);
            // reopened at the new offset (the drop ends it at the server)
            part.sub = None;
            part.paused = false;
            part.failures = 0;
            part.retry_at = None;
        }
        Ok(())
    }

    /// Commits the position of every partition that has one (the offset
    /// after the last record yielded, or where it started) to the group;
    /// as its member when subscribed, which the group refuses once it has
    /// rebalanced (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS).
    pub async fn commit(&mut self) -> Result<(), Error> {
        let Some(group) = self.config.group.as_deref() else {
            return Err(Error::Config("commit needs a consumer group".into()));
        };
        let offsets: Vec<(&str, u32, i64)> = self
            .parts
            .iter()
            .filter_map(|((t, p), part)| Some((&**t, *p, part.position?)))
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        match &self.group {
            Some(member) => member.commit(&offsets).await,
            None => self.client.commit_offsets(group, &offsets).await,
        }
    }

    /// The consumer's group and, for a member, its id and generation: what
    /// [`crate::Producer::send_offsets_to_transaction_for`] needs so that
    /// the group accepts offsets committed in a transaction from this
    /// member only while it is one (KIP-447). `None` without a group.
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        let group = self.config.group.as_deref()?;
        Some(match &self.group {
            Some(member) => member.metadata(),
            None => GroupMetadata::outside(group),
        })
    }

    fn drop_buffered(&mut self, tp: &Tp) {
        self.buffer
            .retain(|r| !(r.topic == tp.0 && r.partition == tp.1));
        if let Some(part) = self.parts.get_mut(tp) {
            part.buffered = 0;
        }
    }

    // ------------------------------------------------------------ work

    /// Starts the lookups, refreshes and fetches that can start now.
    fn start_work(&mut self, now: Instant) {
        self.start_resolving(now);
        if let ReadMode::Push { window } = self.config.read_mode {
            return self.start_subscribing(now, window);
        }
        let mut by_node: HashMap<u32, Vec<(Tp, i64)>> = HashMap::new();
        let mut no_leader = Vec::new();
        for (tp, part) in &mut self.parts {
            let Some(offset) = part.fetch_offset else {
                continue;
            };
            if part.fetching || part.buffered > 0 || part.waiting(now) {
                continue;
            }
            let leader = self.client.cached_route(&tp.0).and_then(|r| r.leader(tp.1));
            match leader {
                Some(node) if !self.busy_nodes.contains(&node) => {
                    by_node.entry(node).or_default().push((tp.clone(), offset));
                }
                Some(_) => {}
                None => {
                    part.failures += 1;
                    part.retry_at = Some(now + self.backoff.jittered(part.failures));
                    no_leader.push(Arc::clone(&tp.0));
                }
            }
        }
        for topic in no_leader {
            self.refresh(topic);
        }
        for (node, asked) in by_node {
            for (tp, _) in &asked {
                if let Some(part) = self.parts.get_mut(tp) {
                    part.fetching = true;
                }
            }
            self.busy_nodes.insert(node);
            self.tasks.push(self.fetch(node, asked));
        }
    }

    fn fetch(&self, node: u32, asked: Vec<(Tp, i64)>) -> BoxFuture<'static, Event> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for ((topic, partition), offset) in &asked {
            let p = FetchPartition {
                partition: *partition,
                offset: *offset,
                max_bytes: self.config.partition_max_bytes,
            };
            match topics.iter_mut().find(|t| *t.name == **topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(FetchTopic {
                    name: topic.to_string(),
                    partitions: vec![p],
                }),
            }
        }
        let max_wait_ms = u32::try_from(self.config.max_wait.as_millis()).unwrap_or(u32::MAX);
        let isolation = self.config.isolation;
        let (min_bytes, max_bytes) = (self.config.min_bytes, self.config.max_bytes);
        let client = self.client.clone();
        let patience = client.request_timeout() + self.config.max_wait;
        async move {
            let result = async {
                let conn = client.node_conn(node).await?;
                if isolation == Isolation::ReadUncommitted {
                    let request = proto::Fetch {
                        correlation: 0,
                        max_wait_ms,
                        min_bytes,
                        max_bytes,
                        topics,
                    };
                    return conn.call(request, patience).await.map(Fetched::from);
                }
                let request = proto::FetchIsolated {
                    correlation: 0,
                    isolation,
                    max_wait_ms,
                    min_bytes,
                    max_bytes,
                    topics,
                };
                conn.call(request, patience).await.map(Fetched::from)
            }
            .await;
            Event::Fetched {
                node,
                asked,
                result,
            }
        }
        .boxed()
    }

    /// Opens a subscription for each partition that can have one now.
    fn start_subscribing(&mut self, now: Instant, window: u32) {
        for (tp, part) in &mut self.parts {
            let Some(offset) = part.fetch_offset else {
                continue;
            };
            if part.sub.is_some() || part.subscribing || part.waiting(now) {
                continue;
            }
            part.subscribing = true;
            let (client, tp) = (self.client.clone(), tp.clone());
            let config = SubscriptionConfig {
                window,
                auto_credit: true,
            };
            self.tasks.push(
                async move {
                    let result = client
                        .open_subscription(&tp.0, tp.1, Start::Offset(offset), config)
                        .await;
                    Event::Subscribed { tp, offset, result }
                }
                .boxed(),
            );
        }
    }

    /// Moves the records the subscriptions have ready into the buffer, a
    /// bounded number per partition, every partition in turn.
    fn take_pushed(&mut self, cx: &mut Context<'_>, now: Instant) {
        const PER_PARTITION: usize = 4096;
        let mut ended = Vec::new();
        for (tp, part) in &mut self.parts {
            let Some(sub) = part.sub.as_mut() else {
                continue;
            };
            for _ in 0..PER_PARTITION {
                match sub.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(record))) => {
                        part.fetch_offset = Some(record.offset + 1);
                        part.buffered += 1;
                        part.failures = 0;
                        self.buffer.push_back(record);
                    }
                    Poll::Ready(Some(Err(e))) => {
                        ended.push((tp.clone(), Some(e)));
                        break;
                    }
                    Poll::Ready(None) => {
                        ended.push((tp.clone(), None));
                        break;
                    }
                    Poll::Pending => break,
                }
            }
        }
        for (tp, error) in ended {
            let Some(part) = self.parts.get_mut(&tp) else {
                continue;
            };
            let Some(sub) = part.sub.take() else {
                continue;
            };
            // go on from the last record taken
            let offset = sub.position();
            part.fetch_offset = Some(offset);
            match error {
                Some(e) if e.code() == Some(ErrorCode::OFFSET_OUT_OF_RANGE) => {
                    self.out_of_range(&tp, offset, ErrorCode::OFFSET_OUT_OF_RANGE)
                }
                Some(e) => self.failed(&tp, e, now),
                None => {}
            }
        }
    }

    /// Looks up the starting offsets of partitions that have none.
    fn start_resolving(&mut self, now: Instant) {
        let mut wanted = Vec::new();
        for (tp, part) in &mut self.parts {
            if part.fetch_offset.is_none() && !part.resolving && !part.waiting(now) {
                part.resolving = true;
                wanted.push((tp.clone(), part.start));
            }
        }
        if wanted.is_empty() {
            return;
        }
        let client = self.client.clone();
        let group = self.config.group.clone();
        self.tasks
            .push(async move { Event::Resolved(resolve(&client, group, wanted).await) }.boxed());
    }

    fn refresh(&mut self, topic: Arc<str>) {
        if !self.refreshing.insert(Arc::clone(&topic)) {
            return;
        }
        let client = self.client.clone();
        self.tasks.push(
            async move {
                if let Err(e) = client.refresh(&[&topic]).await {
                    tracing::debug!(%topic, error = %e, "metadata refresh failed");
                }
                Event::Refreshed(topic)
            }
            .boxed(),
        );
    }

    fn handle(&mut self, event: Event, now: Instant) {
        match event {
            Event::Refreshed(topic) => {
                self.refreshing.remove(&topic);
            }
            Event::Subscribed { tp, offset, result } => {
                let Some(part) = self.parts.get_mut(&tp) else {
                    return;
                };
                part.subscribing = false;
                // sought meanwhile: dropped, and opened again from there
                if part.fetch_offset != Some(offset) {
                    return;
                }
                match result {
                    Ok(sub) => part.sub = Some(sub),
                    Err(e) => self.failed(&tp, e, now),
                }
            }
            Event::Resolved(found) => {
                for (tp, start, result) in found {
                    let Some(part) = self.parts.get_mut(&tp) else {
                        continue;
                    };
                    part.resolving = false;
                    // Sought or reassigned meanwhile: that decides.
                    if part.fetch_offset.is_some() || part.start != start {
                        continue;
                    }
                    match result {
                        Ok(offset) => {
                            part.fetch_offset = Some(offset);
                            part.position = Some(offset);
                            part.failures = 0;
                        }
                        Err(e) => self.failed(&tp, e, now),
                    }
                }
            }
            Event::Fetched {
                node,
                asked,
                result,
            } => {
                self.busy_nodes.remove(&node);
                for (tp, offset) in asked {
                    match self.parts.get_mut(&tp) {
                        Some(part) => {
                            part.fetching = false;
                            if part.fetch_offset != Some(offset) {
                                continue;
                            }
                        }
                        None => continue,
                    }
                    match &result {
                        Err(e) => self.failed(&tp, e.clone(), now),
                        Ok(answer) => self.fetched(&tp, offset, answer, now),
                    }
                }
            }
        }
    }

    /// Takes one partition's part of a fetch answer.
    fn fetched(&mut self, tp: &Tp, offset: i64, answer: &Fetched, now: Instant) {
        let found = answer
            .partitions
            .iter()
            .find(|(t, p)| **t == *tp.0 && p.partition == tp.1)
            .map(|(_, p)| p);
        let Some(fetched) = found else {
            let e = Error::Protocol(format!(
                "the fetch answer says nothing of {}/{}",
                tp.0, tp.1
            ));
            return self.failed(tp, e, now);
        };
        match fetched.error {
            ErrorCode::NONE => {}
            ErrorCode::OFFSET_OUT_OF_RANGE => {
                return self.out_of_range(tp, offset, fetched.error);
            }
            code => {
                let e = Error::server(code, format!("fetching {}/{}", tp.0, tp.1));
                return self.failed(tp, e, now);
            }
        }
        match decode_fetched(
            &tp.0,
            tp.1,
            fetched.records.clone(),
            offset,
            &fetched.aborted,
            self.config.check_crcs,
        ) {
            Ok(decoded) => {
                let Some(part) = self.parts.get_mut(tp) else {
                    return;
                };
                part.failures = 0;
                if let Some(next) = decoded.next_offset.filter(|&n| n > offset) {
                    part.fetch_offset = Some(next);
                } else if !fetched.records.is_empty() {
                    // Bytes but no progress (no whole batch): do not spin.
                    part.failures += 1;
                    part.retry_at = Some(now + self.backoff.jittered(part.failures));
                    tracing::debug!(
                        topic = %tp.0,
                        partition = tp.1,
                        bytes = fetched.records.len(),
                        "a fetch returned no whole batch; partition_max_bytes may be too small"
                    );
                }
                part.buffered += decoded.records.len();
                self.buffer.extend(decoded.records);
            }
            Err(e) => self.failed(tp, e, now),
        }
    }

    /// Applies the offset reset to a partition whose offset is out of range.
    fn out_of_range(&mut self, tp: &Tp, offset: i64, code: ErrorCode) {
        let Some(part) = self.parts.get_mut(tp) else {
            return;
        };
        tracing::debug!(topic = %tp.0, partition = tp.1, offset, "offset out of range");
        match self.config.offset_reset {
            OffsetReset::Earliest | OffsetReset::Latest => {
                part.start = if self.config.offset_reset == OffsetReset::Earliest {
                    StartAt::Earliest
                } else {
                    StartAt::Latest
                };
                part.fetch_offset = None;
            }
            OffsetReset::Fail => {
                part.paused = true;
                self.errors.push_back(Error::server(
                    code,
                    format!("offset {offset} of {}/{}", tp.0, tp.1),
                ));
            }
        }
    }

    /// Backs a partition off after an error; yields the error unless it
    /// is one that retrying cures.
    fn failed(&mut self, tp: &Tp, error: Error, now: Instant) {
        let Some(part) = self.parts.get_mut(tp) else {
            return;
        };
        part.failures += 1;
        part.retry_at = Some(now + self.backoff.jittered(part.failures));
        if error.wants_metadata() {
            self.refresh(Arc::clone(&tp.0));
        }
        if error.is_retriable() {
            tracing::debug!(topic = %tp.0, partition = tp.1, %error, "consumer retries");
        } else {
            self.errors.push_back(error);
        }
    }

    /// When the next backed-off partition may go again.
    fn next_retry(&self, now: Instant) -> Option<Instant> {
        self.parts
            .values()
            .filter(|p| !p.paused)
            .filter_map(|p| p.retry_at)
            .filter(|&at| at > now)
            .min()
    }
}

/// A fetch answer, read_uncommitted or read_committed, by partition.
struct Fetched {
    partitions: Vec<(Arc<str>, FetchedPartition)>,
}

struct FetchedPartition {
    partition: u32,
    error: ErrorCode,
    records: bytes::Bytes,
    /// read_committed: the aborted transactions of the range.
    aborted: Vec<AbortedTxn>,
}

impl From<proto::FetchResponse> for Fetched {
    fn from(r: proto::FetchResponse) -> Fetched {
        let mut partitions = Vec::new();
        for t in r.topics {
            let name: Arc<str> = Arc::from(t.name.as_str());
            for p in t.partitions {
                partitions.push((
                    Arc::clone(&name),
                    FetchedPartition {
                        partition: p.partition,
                        error: p.error,
                        records: p.records,
                        aborted: Vec::new(),
                    },
                ));
            }
        }
        Fetched { partitions }
    }
}

impl From<proto::FetchIsolatedResponse> for Fetched {
    fn from(r: proto::FetchIsolatedResponse) -> Fetched {
        let mut partitions = Vec::new();
        for t in r.topics {
            let name: Arc<str> = Arc::from(t.name.as_str());
            for p in t.partitions {
                partitions.push((
                    Arc::clone(&name),
                    FetchedPartition {
                        partition: p.partition,
                        error: p.error,
                        records: p.records,
                        aborted: p.aborted,
                    },
                ));
            }
        }
        Fetched { partitions }
    }
}

/// Finds the starting offset of each partition: committed offsets first
/// (earliest where none), then ListOffsets to the leaders.
async fn resolve(
    client: &Client,
    group: Option<String>,
    wanted: Vec<(Tp, StartAt)>,
) -> Vec<(Tp, StartAt, Result<i64, Error>)> {
    let mut results: Vec<Option<Result<i64, Error>>> = vec![None; wanted.len()];
    let mut specs: Vec<Option<OffsetSpec>> = wanted
        .iter()
        .map(|(_, start)| match start {
            StartAt::Earliest => Some(OffsetSpec::Earliest),
            StartAt::Latest => Some(OffsetSpec::Latest),
            StartAt::Timestamp(t) => Some(OffsetSpec::Timestamp(*t)),
            StartAt::Offset(_) | StartAt::Committed => None,
        })
        .collect();
    for (i, (_, start)) in wanted.iter().enumerate() {
        if let StartAt::Offset(o) = start {
            results[i] = Some(Ok(*o));
        }
    }
    let committed: Vec<usize> = (0..wanted.len())
        .filter(|&i| wanted[i].1 == StartAt::Committed)
        .collect();
    if !committed.is_empty() {
        let pairs: Vec<(&str, u32)> = committed
            .iter()
            .map(|&i| (&*wanted[i].0 .0, wanted[i].0 .1))
            .collect();
        let found = match group.as_deref() {
            Some(group) => client.committed_offsets(group, &pairs).await,
            None => Err(Error::Config(
                "no group to read committed offsets from".into(),
            )),
        };
        match found {
            Ok(offsets) => {
                for (&i, offset) in committed.iter().zip(offsets) {
                    match offset {
                        Some(o) => results[i] = Some(Ok(o)),
                        None => specs[i] = Some(OffsetSpec::Earliest),
                    }
                }
            }
            Err(e) => {
                for &i in &committed {
                    results[i] = Some(Err(e.clone()));
                }
            }
        }
    }
    // Twice at most: a timestamp later than every record finds -1, and
    // then the high watermark.
    for _ in 0..2 {
        let lookups: Vec<usize> = (0..wanted.len())
            .filter(|&i| results[i].is_none() && specs[i].is_some())
            .collect();
        if lookups.is_empty() {
            break;
        }
        let asks: Vec<(String, u32, OffsetSpec)> = lookups
            .iter()
            .filter_map(|&i| Some((wanted[i].0 .0.to_string(), wanted[i].0 .1, specs[i]?)))
            .collect();
        let found = client.list_offsets_many(&asks).await;
        for (&i, result) in lookups.iter().zip(found) {
            match result {
                Ok(-1) if matches!(specs[i], Some(OffsetSpec::Timestamp(_))) => {
                    specs[i] = Some(OffsetSpec::Latest);
                }
                other => results[i] = Some(other),
            }
        }
    }
    wanted
        .into_iter()
        .zip(results)
        .map(|((tp, start), result)| {
            let result = result.unwrap_or_else(|| {
                Err(Error::Protocol(format!(
                    "no offset found for {}/{}",
                    tp.0, tp.1
                )))
            });
            (tp, start, result)
        })
        .collect()
}

impl Stream for Consumer {
    type Item = Result<ConsumedRecord, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            this.follow_group(cx);
            if let Some(e) = this.errors.pop_front() {
                return Poll::Ready(Some(Err(e)));
            }
            while let Some(record) = this.buffer.pop_front() {
                let tp = (Arc::clone(&record.topic), record.partition);
                if let Some(part) = this.parts.get_mut(&tp) {
                    part.buffered = part.buffered.saturating_sub(1);
                    part.position = Some(record.offset + 1);
                    return Poll::Ready(Some(Ok(record)));
                }
            }
            if this.parts.is_empty() {
                if this.group.is_none() {
                    return Poll::Ready(None);
                }
                // waiting for the group to assign something; fetches of
                // partitions given up still finish
                if let Poll::Ready(Some(event)) = this.tasks.poll_next_unpin(cx) {
                    this.handle(event, Instant::now());
                    continue;
                }
                return Poll::Pending;
            }
            let now = Instant::now();
            this.take_pushed(cx, now);
            if !this.buffer.is_empty() || !this.errors.is_empty() {
                continue;
            }
            this.start_work(now);
            if let Poll::Ready(Some(event)) = this.tasks.poll_next_unpin(cx) {
                this.handle(event, Instant::now());
                continue;
            }
            if let Some(at) = this.next_retry(now) {
                let at = tokio::time::Instant::from_std(at);
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                timer.as_mut().reset(at);
                if timer.as_mut().poll(cx).is_ready() {
                    continue;
                }
            }
            return Poll::Pending;
        }
    }
}

impl Client {
    /// A consumer with nothing assigned yet; see [`Consumer`].
    pub fn consumer(&self, config: ConsumerConfig) -> Result<Consumer, Error> {
        Consumer::new(self.clone(), config)
    }
}

#[cfg(test)]
#[path = "consumer_tests.rs"]
mod tests;
