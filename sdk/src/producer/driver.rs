//! The producer's background task: takes the records [`Producer`]
//! queues, routes them to partitions, has the accumulator batch them,
//! sends the batches per leader and answers every record.
//!
//! [`Producer`]: super::Producer

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::accumulator::{Accumulator, Answer, Dispatch, Outcome, ProducerId, Settings, Tp};
use super::inbox::Inbox;
use super::txn::TxnRef;
use super::{now_ms, Command, Delivery, ProducerConfig, Queued, Reply};
use crate::backoff::Backoff;
use crate::client::Client;
use crate::error::Error;
use crate::partitioner::{partition_for_key, StickyPartitioner};
use crate::proto::{self, Acks, ErrorCode, ProducePartition, ProduceTopic};
use crate::record::Record;

/// What the engine holds for each record: enough to answer it.
struct Waiter {
    id: u64,
    reply: Reply,
    /// Returns the record's bytes to the buffer when answered.
    _permit: OwnedSemaphorePermit,
}

/// Records of a topic the client has no metadata for yet.
#[derive(Default)]
struct Parked {
    records: Vec<(Option<u32>, Record, Waiter)>,
    failures: u32,
}

enum Event {
    Metadata {
        topic: String,
        result: Result<(), Error>,
    },
    ProducerId(Result<ProducerId, Error>),
    Produced {
        dispatch: Vec<(Tp, u64)>,
        result: Result<Option<proto::ProduceResponse>, Error>,
    },
}

/// Ends the inbox when the task ends.
struct EndInbox(Arc<Inbox<Command>>);

impl Drop for EndInbox {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The background task of a producer.
pub(super) struct Driver {
    client: Client,
    config: ProducerConfig,
    acc: Accumulator<Waiter>,
    sticky: StickyPartitioner,
    backoff: Backoff,
    parked: HashMap<String, Parked>,
    refreshing: HashSet<String>,
    events: FuturesUnordered<BoxFuture<'static, Event>>,
    asking_id: bool,
    id_failures: u32,
    next_record: u64,
    /// Records queued and not yet answered, by arrival number.
    outstanding: Outstanding,
    /// When the records being placed arrived: read once per pass over the
    /// queued commands rather than once per record.
    now: Instant,
    /// Flushes waiting for every record up to their number.
    flushes: Vec<(u64, oneshot::Sender<()>)>,
    open: bool,
    /// A transactional producer's transaction.
    txn: Option<TxnRef>,
}

impl Driver {
    pub(super) fn new(client: Client, config: ProducerConfig, txn: Option<TxnRef>) -> Driver {
        let backoff = Backoff {
            initial: config.retry_backoff,
            max: config.retry_backoff_max,
        };
        let settings = Settings {
            linger: config.linger,
            batch_bytes: config.batch_bytes,
            compression: config.compression,
            idempotent: config.idempotent,
            retries: config.retries,
            backoff,
        };
        let mut acc = Accumulator::new(settings);
        acc.set_transactional(txn.is_some());
        Driver {
            client,
            acc,
            sticky: StickyPartitioner::new(config.batch_bytes),
            backoff,
            config,
            parked: HashMap::new(),
            refreshing: HashSet::new(),
            events: FuturesUnordered::new(),
            asking_id: false,
            id_failures: 0,
            next_record: 0,
            outstanding: Outstanding::default(),
            now: Instant::now(),
            flushes: Vec::new(),
            open: true,
            txn,
        }
    }

    pub(super) async fn run(mut self, inbox: Arc<Inbox<Command>>) {
        // however the task ends (its runtime may stop it), later sends
        // fail with Closed and what is queued is answered Closed
        let _end = EndInbox(Arc::clone(&inbox));
        let mut taken = Vec::new();
        loop {
            if self.open {
                self.take(&inbox, &mut taken);
            }
            self.start_work();
            if !self.open && self.acc.is_idle() && self.parked.is_empty() && self.events.is_empty()
            {
                return;
            }
            let wake = self.acc.next_wakeup();
            // Senders wake this task only when it must know now (see
            // inbox.rs); it takes what they queued whenever it is awake.
            if self.open && !inbox.wait(wake) {
                continue;
            }
            tokio::select! {
                () = inbox.woken(), if self.open => {}
                Some(event) = self.events.next(), if !self.events.is_empty() => self.handle(event),
                () = sleep_until(wake), if wake.is_some() => {}
            }
        }
    }

    /// Takes every command queued: one pass for many records, whose
    /// linger counts from when the first of them was queued.
    fn take(&mut self, inbox: &Inbox<Command>, taken: &mut Vec<Command>) {
        let (since, closed) = inbox.take(taken);
        if let Some(since) = since {
            self.now = since;
        }
        for command in taken.drain(..) {
            self.command(Some(command));
        }
        if closed {
            self.command(None);
        }
    }

    fn command(&mut self, command: Option<Command>) {
        match command {
            Some(Command::Send(queued)) => self.route(queued),
            Some(Command::SetProducer(producer)) => self.acc.set_producer_id(producer),
            Some(Command::Flush(done)) => {
                let upto = self.next_record;
                self.flushes.push((upto, done));
                self.settle_flushes();
            }
            None => {
                self.open = false;
                self.acc.set_flushing(true);
            }
        }
    }

    /// Asks for a producer id if batches wait for one, and sends what the
    /// engine says is ready.
    fn start_work(&mut self) {
        if self.txn.is_some() && self.acc.needs_producer_id() {
            // A transactional producer takes its id from init_transactions
            // only; the engine dropped it after a failed send, so the
            // transaction can only be aborted.
            let failed = self.acc.fail_waiting(&Error::TransactionState(
                "an earlier send of the transaction failed: abort it".into(),
            ));
            self.answer(failed);
        } else if self.acc.needs_producer_id() && !self.asking_id {
            self.asking_id = true;
            let client = self.client.clone();
            let delay = self.backoff.jittered(self.id_failures);
            self.events.push(
                async move {
                    tokio::time::sleep(delay).await;
                    let answer = client
                        .call_any(proto::InitProducer { correlation: 0 })
                        .await;
                    Event::ProducerId(answer.and_then(|a| match a.error {
                        ErrorCode::NONE => Ok(ProducerId {
                            id: a.producer_id,
                            epoch: a.producer_epoch,
                        }),
                        code => Err(Error::server(code, "asking for a producer id")),
                    }))
                }
                .boxed(),
            );
        }
        let client = &self.client;
        let max_request = self.config.max_request_bytes;
        let ready = self.acc.ready(
            Instant::now(),
            now_ms(),
            |topic, partition| client.cached_route(topic)?.leader(partition),
            |node| {
                client
                    .server_max_frame(node)
                    // Room for the request's own fields around the batches.
                    .map_or(max_request, |max| {
                        max.saturating_sub(64 << 10).min(max_request)
                    })
            },
        );
        self.answer(ready.failed);
        for topic in ready.no_leader {
            self.refresh(topic.to_string(), Duration::ZERO);
        }
        for dispatch in ready.requests {
            self.events.push(self.produce(dispatch));
        }
    }

    fn produce(&self, dispatch: Dispatch) -> BoxFuture<'static, Event> {
        let client = self.client.clone();
        let acks = self.config.acks;
        let timeout = self.config.request_timeout;
        let mut topics: Vec<ProduceTopic> = Vec::new();
        let mut sent = Vec::with_capacity(dispatch.batches.len());
        for b in dispatch.batches {
            sent.push(((Arc::clone(&b.topic), b.partition), b.batch));
            let partition = ProducePartition {
                partition: b.partition,
                batch: b.bytes,
            };
            match topics.iter_mut().find(|t| *t.name == *b.topic) {
                Some(t) => t.partitions.push(partition),
                None => topics.push(ProduceTopic {
                    name: b.topic.to_string(),
                    partitions: vec![partition],
                }),
            }
        }
        let request = proto::Produce {
            correlation: 0,
            acks: acks.to_wire(),
            timeout_ms: u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX),
            topics,
        };
        let node = dispatch.node;
        let txn = self.txn.clone();
        async move {
            let result = async {
                if let Some(txn) = txn {
                    // each partition joins the transaction before its
                    // first batch is written (KIP-890 part 1 checks it)
                    let tps = sent.iter().map(|(tp, _)| tp.clone());
                    txn.add_partitions(txn.missing(tps)).await?;
                    let conn = client.node_conn(node).await?;
                    let request = proto::TxnProduce {
                        transactional_id: txn.id.clone(),
                        produce: request,
                    };
                    let patience = timeout + Duration::from_secs(5);
                    return conn.call(request, patience).await.map(|r| Some(r.0));
                }
                let conn = client.node_conn(node).await?;
                if acks == Acks::None {
                    conn.send_only(request, timeout).await.map(|()| None)
                } else {
                    // The broker answers TIMED_OUT at `timeout`; leave it
                    // time to say so before giving up on the connection.
                    let patience = timeout + Duration::from_secs(5);
                    conn.call(request, patience).await.map(Some)
                }
            }
            .await;
            Event::Produced {
                dispatch: sent,
                result,
            }
        }
        .boxed()
    }

    /// Refreshes a topic's metadata after `delay`, unless already under way.
    fn refresh(&mut self, topic: String, delay: Duration) {
        if !self.refreshing.insert(topic.clone()) {
            return;
        }
        let client = self.client.clone();
        self.events.push(
            async move {
                tokio::time::sleep(delay).await;
                let result = client.refresh(&[topic.as_str()]).await.map(|_| ());
                Event::Metadata { topic, result }
            }
            .boxed(),
        );
    }

    fn route(&mut self, queued: Queued) {
        self.next_record += 1;
        let id = self.next_record;
        self.outstanding.push(id);
        let waiter = Waiter {
            id,
            reply: queued.reply,
            _permit: queued.permit,
        };
        self.place(queued.topic, queued.partition, queued.record, waiter);
    }

    /// Puts a record in its partition, or parks it until the topic's
    /// metadata is known. Parked records of a topic go first, in order.
    fn place(&mut self, topic: Arc<str>, partition: Option<u32>, record: Record, waiter: Waiter) {
        let route = self
            .client
            .cached_route(&topic)
            .filter(|r| r.partitions() > 0);
        let route = match route {
            Some(route) if !self.parked.contains_key(&*topic) => route,
            _ => {
                self.parked
                    .entry(topic.to_string())
                    .or_default()
                    .records
                    .push((partition, record, waiter));
                self.refresh(topic.to_string(), Duration::ZERO);
                return;
            }
        };
        let partitions = route.partitions();
        let partition = match (partition, &record.key) {
            (Some(p), _) if p < partitions => p,
            (Some(p), _) => {
                let e = Error::UnknownPartition {
                    topic: topic.to_string(),
                    partition: p,
                };
                self.answer(vec![(waiter, Err(e))]);
                return;
            }
            (None, Some(key)) => partition_for_key(key, partitions),
            (None, None) => self.sticky.partition(
                &topic,
                partitions,
                record.estimated_size(),
                |p| route.leader(p).is_some(),
                rand::random::<u32>,
            ),
        };
        self.acc.push(
            self.now,
            (Arc::clone(&route.name), partition),
            record,
            waiter,
        );
    }

    fn handle(&mut self, event: Event) {
        self.now = Instant::now();
        match event {
            Event::Metadata { topic, result } => {
                self.refreshing.remove(&topic);
                let Some(mut parked) = self.parked.remove(&topic) else {
                    return;
                };
                if self
                    .client
                    .cached_route(&topic)
                    .is_some_and(|r| r.partitions() > 0)
                {
                    let name: Arc<str> = Arc::from(topic.as_str());
                    for (partition, record, waiter) in parked.records {
                        self.place(Arc::clone(&name), partition, record, waiter);
                    }
                    return;
                }
                parked.failures += 1;
                let error = match result {
                    Err(e) if !e.is_retriable() => Some(e),
                    _ if parked.failures > self.config.retries => {
                        Some(Error::UnknownTopic(topic.clone()))
                    }
                    _ => None,
                };
                match error {
                    Some(e) => {
                        let failed = parked
                            .records
                            .into_iter()
                            .map(|(_, _, w)| (w, Err(e.clone())))
                            .collect();
                        self.answer(failed);
                    }
                    None => {
                        let delay = self.backoff.jittered(parked.failures);
                        self.parked.insert(topic.clone(), parked);
                        self.refresh(topic, delay);
                    }
                }
            }
            Event::ProducerId(result) => {
                self.asking_id = false;
                match result {
                    Ok(id) => {
                        self.id_failures = 0;
                        self.acc.set_producer_id(id);
                    }
                    Err(e) if e.is_retriable() && self.id_failures < self.config.retries => {
                        self.id_failures += 1;
                    }
                    Err(e) => {
                        self.id_failures = 0;
                        let failed = self.acc.fail_waiting(&e);
                        self.answer(failed);
                    }
                }
            }
            Event::Produced { dispatch, result } => {
                let now = Instant::now();
                for (tp, batch) in dispatch {
                    let outcome = outcome(&tp, &result);
                    if let Outcome::Failed(e) = &outcome {
                        tracing::debug!(topic = %tp.0, partition = tp.1, error = %e, "produce failed");
                        if e.wants_metadata() {
                            self.refresh(tp.0.to_string(), Duration::ZERO);
                        }
                    }
                    let answers = self.acc.complete(now, &tp, batch, outcome);
                    self.answer(answers);
                }
            }
        }
    }

    /// Answers records and releases the flushes they were holding up.
    fn answer(&mut self, answers: Vec<Answer<Waiter>>) {
        for (waiter, result) in answers {
            if let (Some(txn), Err(e)) = (&self.txn, &result) {
                txn.send_failed(e);
            }
            self.outstanding.answered(waiter.id);
            waiter.reply.answer(result.map(Into::into));
        }
        self.settle_flushes();
    }

    fn settle_flushes(&mut self) {
        let first = self.outstanding.first();
        let flushes = std::mem::take(&mut self.flushes);
        for (upto, done) in flushes {
            if first.is_none_or(|f| f > upto) {
                let _ = done.send(());
            } else {
                self.flushes.push((upto, done));
            }
        }
        self.acc
            .set_flushing(!self.flushes.is_empty() || !self.open);
    }
}

/// The arrival numbers of the records not answered yet: pushed in
/// increasing order, answered in any order, and the first one asked for
/// (what a flush waits past). Constant time per record, unlike a set.
#[derive(Default)]
struct Outstanding {
    /// The number `waiting[0]` stands for.
    base: u64,
    /// Whether each number from `base` on still waits; the front one
    /// always does.
    waiting: VecDeque<bool>,
}

impl Outstanding {
    /// Numbers come one more than the last (the driver counts them).
    fn push(&mut self, id: u64) {
        if self.waiting.is_empty() {
            self.base = id;
        }
        let at = id.saturating_sub(self.base) as usize;
        while self.waiting.len() < at {
            self.waiting.push_back(false);
        }
        self.waiting.push_back(true);
    }

    fn answered(&mut self, id: u64) {
        let Some(at) = id.checked_sub(self.base) else {
            return;
        };
        if let Some(w) = self.waiting.get_mut(at as usize) {
            *w = false;
        }
        while self.waiting.front() == Some(&false) {
            self.waiting.pop_front();
            self.base += 1;
        }
    }

    fn first(&self) -> Option<u64> {
        (!self.waiting.is_empty()).then_some(self.base)
    }
}

impl From<(u32, i64)> for Delivery {
    fn from((partition, offset): (u32, i64)) -> Delivery {
        Delivery { partition, offset }
    }
}

/// What a produce answer says about one of its batches.
fn outcome(tp: &Tp, result: &Result<Option<proto::ProduceResponse>, Error>) -> Outcome {
    let answer = match result {
        Err(e) => return Outcome::Failed(e.clone()),
        Ok(None) => return Outcome::Written { base_offset: -1 },
        Ok(Some(answer)) => answer,
    };
    let found = answer
        .topics
        .iter()
        .filter(|t| *t.name == *tp.0)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition == tp.1);
    match found {
        None => Outcome::Failed(Error::Protocol(format!(
            "the produce answer says nothing of {}/{}",
            tp.0, tp.1
        ))),
        // Written before, by an attempt whose answer was lost.
        Some(p) if p.error == ErrorCode::NONE || p.error == ErrorCode::DUPLICATE_SEQUENCE => {
            Outcome::Written {
                base_offset: p.base_offset,
            }
        }
        Some(p) => Outcome::Failed(Error::server(p.error, p.message.clone())),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::Outstanding;

    #[test]
    fn outstanding_numbers_give_the_first_unanswered_in_any_answer_order() {
        let mut o = Outstanding::default();
        assert_eq!(o.first(), None);
        for id in 1..=5 {
            o.push(id);
        }
        assert_eq!(o.first(), Some(1));
        o.answered(3);
        o.answered(2);
        assert_eq!(o.first(), Some(1));
        o.answered(1);
        assert_eq!(o.first(), Some(4));
        o.answered(9);
        o.answered(0);
        o.answered(5);
        o.answered(4);
        assert_eq!(o.first(), None);
        o.push(6);
        assert_eq!(o.first(), Some(6));
    }
}
