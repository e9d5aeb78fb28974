//! The producer: records in, acknowledged offsets out.
//!
//! [`Producer::send`] hands a record to a background task and returns a
//! future of its [`Delivery`] ([`Producer::send_with`] takes a callback
//! instead). The task (`producer/driver.rs`) partitions records (Kafka's
//! murmur2 for keys, sticky batches without), batches them per partition
//! and sends one `Produce` per leader carrying every partition that is
//! ready. The batching rules live in an I/O-free engine
//! (`producer/accumulator.rs`); the task drives it: metadata, producer id,
//! connections, answers, timers.
//!
//! Guarantees:
//! - records of one partition are written in the order they were queued
//!   (at most one batch per partition is in flight, retries included);
//! - with `idempotent` (the default), a batch retried after a lost answer
//!   is not written twice: it is resent byte for byte with the same
//!   producer id and sequence, and the broker recognises it;
//! - every send future resolves: with the record's offset, or with the
//!   error that failed it after the retries.
//!
//! **Dropping the producer** (every clone) lets the background task send
//! what it holds, then end; but nothing waits for it. If the runtime stops
//! first (say `main` returns), records not yet acknowledged are lost. Await
//! [`Producer::flush`] (or every send future) before shutting down.

mod accumulator;
mod driver;
mod inbox;
mod txn;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use crate::backoff::Backoff;
use crate::client::Client;
use crate::error::Error;
use crate::proto::Acks;
use crate::record::{Compression, Record};
use accumulator::ProducerId;
use driver::Driver;
use inbox::Inbox;
use txn::{Phase, Txn, TxnRef};

/// How a [`Producer`] batches, acknowledges and retries.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// How long a partition's first record waits for others to join its
    /// batch (default 5 ms). Zero sends as soon as possible.
    pub linger: Duration,
    /// A batch is sent once it holds this many bytes (default 1 MiB).
    pub batch_bytes: usize,
    /// What the broker waits for before answering (default [`Acks::All`]).
    pub acks: Acks,
    /// Deduplicate retried batches with a producer id and per-partition
    /// sequence numbers (default true). Needs `acks: All`.
    pub idempotent: bool,
    /// Compression of produced batches (default none).
    pub compression: Compression,
    /// How long the broker may take to answer a produce, and the client
    /// waits (a little longer) for that answer (default 30 s).
    pub request_timeout: Duration,
    /// How many times a batch is resent after a retriable error (default
    /// 10). Not-leader and unavailable errors refresh metadata first.
    pub retries: u32,
    /// Wait before the first retry (default 100 ms); it doubles on every
    /// retry up to `retry_backoff_max` (default 1 s).
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    /// Bytes of records the producer holds at most, queued or in flight
    /// (default 32 MiB). When full, a send queues its record when its
    /// future is first polled, once there is room.
    pub buffer_bytes: usize,
    /// Largest produce request, all its batches together (default 16 MiB;
    /// never more than the server's frame limit).
    pub max_request_bytes: usize,
    /// Makes the producer transactional (default none): its records are
    /// sent inside transactions ([`Producer::begin_transaction`] ..
    /// [`Producer::commit_transaction`]) and read_committed readers see
    /// them only once committed. The id is the one Kafka clients use: a
    /// Kafka producer and a native one of the same id fence each other.
    pub transactional_id: Option<String>,
    /// How long a transaction may stay open before its coordinator aborts
    /// it (default 60 s).
    pub transaction_timeout: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            linger: Duration::from_millis(5),
            batch_bytes: 1 << 20,
            acks: Acks::All,
            idempotent: true,
            compression: Compression::None,
            request_timeout: Duration::from_secs(30),
            retries: 10,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            buffer_bytes: 32 << 20,
            max_request_bytes: 16 << 20,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
        }
    }
}

impl ProducerConfig {
    /// This configuration with a transactional id (see the field).
    pub fn transactional_id(mut self, id: impl Into<String>) -> Self {
        self.transactional_id = Some(id.into());
        self
    }

    fn validate(&self) -> Result<(), Error> {
        let bad = |why: &str| Err(Error::Config(why.to_owned()));
        if let Some(id) = &self.transactional_id {
            if id.is_empty() {
                return bad("a transactional id cannot be empty");
            }
            if !self.idempotent || self.acks != Acks::All {
                return bad("a transactional producer is idempotent, with acks All");
            }
            if self.transaction_timeout.is_zero()
                || i32::try_from(self.transaction_timeout.as_millis()).is_err()
            {
                return bad("transaction_timeout must be between 1 ms and 24 days");
            }
        }
        if self.idempotent && self.acks != Acks::All {
            return bad("an idempotent producer needs acks All (or set idempotent: false)");
        }
        if self.batch_bytes == 0 || self.max_request_bytes == 0 {
            return bad("batch_bytes and max_request_bytes must be above zero");
        }
        if self.buffer_bytes == 0 || u32::try_from(self.buffer_bytes).is_err() {
            return bad("buffer_bytes must be between 1 and 4 GiB");
        }
        if self.request_timeout.is_zero()
            || u32::try_from(self.request_timeout.as_millis()).is_err()
        {
            return bad("request_timeout must be between 1 ms and 49 days");
        }
        Ok(())
    }
}

/// Where an acknowledged record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    pub partition: u32,
    /// The record's offset; -1 with [`Acks::None`] (nothing answers).
    pub offset: i64,
}

/// Sends records to a cluster; cheap to clone (clones share one
/// background task and its batches).
///
/// ```no_run
/// # async fn run() -> Result<(), sdk::Error> {
/// use sdk::{Client, ProducerConfig, Record};
///
/// let client = Client::connect("aero://localhost:9091").await?;
/// let producer = client.producer(ProducerConfig::default())?;
/// // The record is queued at once; the future resolves when acknowledged.
/// let delivery = producer.send("events", Record::new("hello").with_key("user-1"));
/// let delivery = delivery.await?;
/// println!("written to partition {} at offset {}", delivery.partition, delivery.offset);
/// producer.flush().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Producer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("buffer_bytes", &self.shared.buffer_bytes)
            .finish_non_exhaustive()
    }
}

struct Shared {
    commands: Arc<Inbox<Command>>,
    /// The topic name last sent to, shared by the records that follow
    /// rather than copied into each.
    last_topic: std::sync::Mutex<Option<Arc<str>>>,
    /// A transactional producer's transaction.
    txn: Option<TxnRef>,
    /// One permit per byte of record held.
    buffer: Arc<Semaphore>,
    buffer_bytes: usize,
    /// Sends waiting for room: while any does, later sends wait too, so
    /// records are queued in the order they were sent.
    waiting: AtomicUsize,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // the last handle is gone: the task sends what it holds, then ends
        self.commands.close();
    }
}

enum Command {
    Send(Queued),
    Flush(oneshot::Sender<()>),
    /// A transactional producer's id and epoch, from its coordinator.
    SetProducer(ProducerId),
}

struct Queued {
    topic: Arc<str>,
    partition: Option<u32>,
    record: Record,
    reply: Reply,
    permit: OwnedSemaphorePermit,
}

/// Where a record's answer goes.
enum Reply {
    /// The future [`Producer::send`] returned.
    Future(oneshot::Sender<Result<Delivery, Error>>),
    /// The function given to [`Producer::send_with`], called on the
    /// background task.
    Callback(Box<dyn FnOnce(Result<Delivery, Error>) + Send>),
}

impl Reply {
    fn answer(self, result: Result<Delivery, Error>) {
        match self {
            // nobody waits for a dropped future's answer
            Reply::Future(tx) => drop(tx.send(result)),
            Reply::Callback(f) => f(result),
        }
    }
}

/// Counts a send among the waiting ones while it lives.
struct WaitingForRoom(Arc<Shared>);

impl Drop for WaitingForRoom {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Producer {
    pub(crate) fn start(client: Client, config: ProducerConfig) -> Result<Producer, Error> {
        config.validate()?;
        let commands = Inbox::new(config.linger, config.batch_bytes);
        let txn = config.transactional_id.clone().map(|id| {
            Arc::new(Txn::new(
                id,
                config.transaction_timeout,
                client.clone(),
                Backoff {
                    initial: config.retry_backoff,
                    max: config.retry_backoff_max,
                },
                config.retries,
            ))
        });
        let shared = Arc::new(Shared {
            commands,
            last_topic: std::sync::Mutex::new(None),
            txn: txn.clone(),
            buffer: Arc::new(Semaphore::new(config.buffer_bytes)),
            buffer_bytes: config.buffer_bytes,
            waiting: AtomicUsize::new(0),
        });
        let runtime = client.runtime().clone();
        let queue = Arc::clone(&shared.commands);
        runtime.spawn(Driver::new(client, config, txn).run(queue));
        Ok(Producer { shared })
    }

    /// Sends a record to `topic`: to the partition of its key, or, without
    /// key, to the partition keyless records currently stick to.
    ///
    /// The record is queued when `send` is called, so records sent one
    /// after the other keep their order even if their futures are awaited
    /// later or never. (When the producer's buffer is full, the record is
    /// queued when the future is first polled instead, once there is room.)
    /// The future resolves when the record is acknowledged (or, with
    /// [`Acks::None`], written to the socket).
    pub fn send(
        &self,
        topic: &str,
        record: Record,
    ) -> impl Future<Output = Result<Delivery, Error>> + Send + 'static {
        self.enqueue(topic, None, record)
    }

    /// Sends a record to a chosen partition.
    pub fn send_to(
        &self,
        topic: &str,
        partition: u32,
        record: Record,
    ) -> impl Future<Output = Result<Delivery, Error>> + Send + 'static {
        self.enqueue(topic, Some(partition), record)
    }

    fn enqueue(
        &self,
        topic: &str,
        partition: Option<u32>,
        mut record: Record,
    ) -> impl Future<Output = Result<Delivery, Error>> + Send + 'static {
        record.timestamp.get_or_insert_with(now_ms);
        let topic = self.topic_name(topic);
        let size = record.estimated_size();
        let shared = Arc::clone(&self.shared);
        let (reply, answer) = oneshot::channel();
        let reply = Reply::Future(reply);
        let mut too_large = None;
        let mut later = None;
        let outside = shared
            .txn
            .as_ref()
            .and_then(|t| t.require(Phase::InTransaction, "send").err());
        match u32::try_from(size) {
            _ if outside.is_some() => too_large = outside,
            Ok(permits) if size <= shared.buffer_bytes => {
                let fast = if shared.waiting.load(Ordering::SeqCst) == 0 {
                    Arc::clone(&shared.buffer)
                        .try_acquire_many_owned(permits)
                        .ok()
                } else {
                    None
                };
                let queued = move |permit| Queued {
                    topic,
                    partition,
                    record,
                    reply,
                    permit,
                };
                match fast {
                    // A closed inbox drops the reply: the answer is Closed.
                    Some(permit) => drop(
                        shared
                            .commands
                            .send_record(Command::Send(queued(permit)), size),
                    ),
                    None => {
                        shared.waiting.fetch_add(1, Ordering::SeqCst);
                        later = Some((WaitingForRoom(Arc::clone(&shared)), permits, queued));
                    }
                }
            }
            _ => {
                too_large = Some(Error::TooLarge {
                    what: "a record",
                    size,
                    max: shared.buffer_bytes,
                })
            }
        }
        async move {
            if let Some(e) = too_large {
                return Err(e);
            }
            if let Some((waiting, permits, queued)) = later {
                let permit = Arc::clone(&shared.buffer)
                    .acquire_many_owned(permits)
                    .await
                    .map_err(|_| Error::Closed)?;
                shared
                    .commands
                    .send_record(Command::Send(queued(permit)), size)
                    .map_err(|_| Error::Closed)?;
                drop(waiting);
            }
            answer.await.map_err(|_| Error::Closed)?
        }
    }

    /// Sends a record to `topic` (to the partition of its key, or the one
    /// keyless records stick to) and calls `on_delivery` with its answer,
    /// instead of returning a future: the cheaper way to send many records
    /// whose answers are only counted or logged (Kafka's `send` with a
    /// callback, librdkafka's delivery report).
    ///
    /// The record is queued now, in order with every other send, or not at
    /// all: `Err(BufferFull)` when the producer holds
    /// [`ProducerConfig::buffer_bytes`] already (or earlier sends wait for
    /// room), and the errors [`Producer::send`]'s future would give at
    /// once (a record too large, a transactional producer outside a
    /// transaction, a closed producer). `on_delivery` is then never called;
    /// otherwise it is called exactly once, on the producer's background
    /// task: it must not block (hand heavy work to a channel).
    pub fn send_with<F>(&self, topic: &str, record: Record, on_delivery: F) -> Result<(), Error>
    where
        F: FnOnce(Result<Delivery, Error>) + Send + 'static,
    {
        self.queue_now(topic, None, record, Reply::Callback(Box::new(on_delivery)))
    }

    /// [`Producer::send_with`] to a chosen partition.
    pub fn send_to_with<F>(
        &self,
        topic: &str,
        partition: u32,
        record: Record,
        on_delivery: F,
    ) -> Result<(), Error>
    where
        F: FnOnce(Result<Delivery, Error>) + Send + 'static,
    {
        self.queue_now(
            topic,
            Some(partition),
            record,
            Reply::Callback(Box::new(on_delivery)),
        )
    }

    fn queue_now(
        &self,
        topic: &str,
        partition: Option<u32>,
        mut record: Record,
        reply: Reply,
    ) -> Result<(), Error> {
        let shared = &self.shared;
        if let Some(txn) = &shared.txn {
            txn.require(Phase::InTransaction, "send")?;
        }
        record.timestamp.get_or_insert_with(now_ms);
        let size = record.estimated_size();
        let permits = u32::try_from(size)
            .ok()
            .filter(|_| size <= shared.buffer_bytes)
            .ok_or(Error::TooLarge {
                what: "a record",
                size,
                max: shared.buffer_bytes,
            })?;
        let full = || Error::BufferFull {
            max: shared.buffer_bytes,
        };
        if shared.waiting.load(Ordering::SeqCst) != 0 {
            return Err(full());
        }
        let permit = Arc::clone(&shared.buffer)
            .try_acquire_many_owned(permits)
            .map_err(|_| full())?;
        let queued = Queued {
            topic: self.topic_name(topic),
            partition,
            record,
            reply,
            permit,
        };
        shared
            .commands
            .send_record(Command::Send(queued), size)
            .map_err(|_| Error::Closed)
    }

    /// `topic` as a shared name: the last one sent to again, or a new one.
    fn topic_name(&self, topic: &str) -> Arc<str> {
        let mut last = self
            .shared
            .last_topic
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*last {
            Some(name) if **name == *topic => Arc::clone(name),
            _ => {
                let name: Arc<str> = Arc::from(topic);
                *last = Some(Arc::clone(&name));
                name
            }
        }
    }

    fn txn(&self) -> Result<&Txn, Error> {
        self.shared.txn.as_deref().ok_or_else(|| {
            Error::TransactionState(
                "the producer is not transactional (ProducerConfig::transactional_id)".into(),
            )
        })
    }

    /// Registers the producer with its transactional id's coordinator:
    /// takes the id's producer id and a new epoch, which fences every
    /// earlier producer of the id (their commits fail with
    /// [`Error::ProducerFenced`]); a transaction one of them left open is
    /// aborted first. Call it once, before the first transaction.
    pub async fn init_transactions(&self) -> Result<(), Error> {
        let txn = self.txn()?;
        // a fenced producer stays fenced: taking the id back would fence
        // the producer that replaced it
        if matches!(txn.phase(), Phase::InTransaction | Phase::Fenced) {
            return txn.require(Phase::Ready, "init_transactions");
        }
        let producer = txn.init().await?;
        self.shared
            .commands
            .send_now(Command::SetProducer(producer))
            .map_err(|_| Error::Closed)
    }

    /// The producer id and epoch of a transactional producer since
    /// [`Producer::init_transactions`] (they change when an abort needs a
    /// new epoch); `None` before, and for a producer that is not
    /// transactional. What a server-side record of the transaction is
    /// keyed by.
    pub fn transactional_producer(&self) -> Option<(i64, i16)> {
        self.shared.txn.as_deref().and_then(Txn::current)
    }

    /// Starts a transaction: the records sent until it is committed or
    /// aborted belong to it. Nothing is sent to the server until then.
    pub fn begin_transaction(&self) -> Result<(), Error> {
        let txn = self.txn()?;
        txn.require(Phase::Ready, "begin a transaction")?;
        txn.set_phase(Phase::InTransaction);
        Ok(())
    }

    /// Commits `(topic, partition, next offset to read)` for `group` as
    /// part of the transaction: they become the group's committed offsets
    /// if it commits, and are dropped if it aborts (consume-transform-
    /// produce exactly once). From outside the group's membership: a group
    /// with members refuses it (UNKNOWN_MEMBER); its members use
    /// [`Producer::send_offsets_to_transaction_for`].
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &[(&str, u32, i64)],
        group: &str,
    ) -> Result<(), Error> {
        let txn = self.txn()?;
        txn.require(Phase::InTransaction, "send offsets to a transaction")?;
        let outside = crate::consumer::GroupMetadata::outside(group);
        txn.send_offsets(offsets, &outside).await
    }

    /// [`Producer::send_offsets_to_transaction`] for a group member: with
    /// its [`crate::Consumer::group_metadata`], the group takes the offsets
    /// only while the member is in its current generation, so a member that
    /// lost its partitions to a rebalance cannot commit for them.
    pub async fn send_offsets_to_transaction_for(
        &self,
        offsets: &[(&str, u32, i64)],
        member: &crate::consumer::GroupMetadata,
    ) -> Result<(), Error> {
        let txn = self.txn()?;
        txn.require(Phase::InTransaction, "send offsets to a transaction")?;
        txn.send_offsets(offsets, member).await
    }

    /// Sends what the transaction still holds, then commits it: answered
    /// once the commit markers are written, so read_committed readers see
    /// its records from then on. Refused ([`Error::TransactionState`]) when
    /// a send of the transaction failed: abort it then.
    pub async fn commit_transaction(&self) -> Result<(), Error> {
        let txn = self.txn()?;
        txn.require(Phase::InTransaction, "commit")?;
        self.flush().await?;
        txn.end(true).await.map(|_| ())
    }

    /// Aborts the transaction: its records stay in the log but no
    /// read_committed reader returns them, and its offsets are dropped.
    /// Waits for its sends to be answered first.
    pub async fn abort_transaction(&self) -> Result<(), Error> {
        let txn = self.txn()?;
        txn.require(Phase::InTransaction, "abort")?;
        self.flush().await?;
        if txn.end(false).await? {
            // a failed send leaves the partitions' sequences unsure: go
            // on with a new epoch
            let producer = txn.init().await?;
            self.shared
                .commands
                .send_now(Command::SetProducer(producer))
                .map_err(|_| Error::Closed)?;
        }
        Ok(())
    }

    /// Waits until every record queued before this call is acknowledged or
    /// failed (each send future tells which), sending lingering batches at
    /// once. `Err(Closed)` only if the background task is gone.
    pub async fn flush(&self) -> Result<(), Error> {
        let (done, flushed) = oneshot::channel();
        self.shared
            .commands
            .send_now(Command::Flush(done))
            .map_err(|_| Error::Closed)?;
        flushed.await.map_err(|_| Error::Closed)
    }
}

impl Client {
    /// A producer; see [`Producer`]. Its background task runs on the
    /// runtime the client was connected in.
    pub fn producer(&self, config: ProducerConfig) -> Result<Producer, Error> {
        Producer::start(self.clone(), config)
    }
}

#[cfg(test)]
#[path = "producer_tests.rs"]
mod tests;
