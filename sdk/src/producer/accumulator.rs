//! The producer's batching engine: records in, produce requests out. It
//! does no I/O and reads no clock (`now` comes with every call), so its
//! rules are tested by stepping it.
//!
//! What it keeps, per partition:
//!
//! 1. Records accumulate in an *open* batch until it holds `batch_bytes`,
//!    its first record has waited `linger`, or a flush is under way; then
//!    the batch is *sealed* (its records fixed, in send order).
//! 2. At most ONE sealed batch per partition is in flight. The next one is
//!    dispatched only when the previous one was answered, so a retried
//!    batch can never be overtaken and records stay in order.
//! 3. A batch is encoded once, when first dispatched; an idempotent batch
//!    takes the partition's next sequence number then. A retry resends the
//!    very same bytes (same producer id, epoch and sequence), so a broker
//!    that already wrote it answers DUPLICATE_SEQUENCE instead of writing
//!    it twice.
//! 4. A retriable failure puts the batch back at the head of its partition
//!    until its backoff passes; other partitions go on.
//! 5. When an idempotent batch fails for good, the producer id is dropped:
//!    whether the broker wrote it is unknown, so the partition's sequence
//!    cannot continue. The driver asks for a new id, and every partition
//!    starts its sequence again at 0 under it.
//! 6. Sequences advance as Kafka's do: by the record count, wrapping from
//!    `i32::MAX` to 0.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::backoff::Backoff;
use crate::error::Error;
use crate::proto::ErrorCode;
use crate::record::{encode_batch, BatchOptions, Compression, ProducerIdentity, Record};

/// The engine's settings, from the producer's configuration.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub linger: Duration,
    pub batch_bytes: usize,
    pub compression: Compression,
    pub idempotent: bool,
    pub retries: u32,
    pub backoff: Backoff,
}

/// A topic and partition.
pub(crate) type Tp = (Arc<str>, u32);

/// The idempotent producer's id, while it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerId {
    pub id: i64,
    pub epoch: i16,
}

/// A batch put into a produce request.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    pub topic: Arc<str>,
    pub partition: u32,
    pub batch: u64,
    pub bytes: Bytes,
}

/// One produce request to send to a node.
#[derive(Debug, Clone)]
pub(crate) struct Dispatch {
    pub node: u32,
    pub batches: Vec<Sent>,
}

/// How a dispatched batch ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Written at this base offset (-1 when nothing tells: acks 0).
    Written {
        base_offset: i64,
    },
    Failed(Error),
}

/// What [`Accumulator::ready`] wants done.
#[derive(Debug)]
pub(crate) struct Ready<W> {
    pub requests: Vec<Dispatch>,
    /// Topics with a partition that has records but no known leader.
    pub no_leader: Vec<Arc<str>>,
    /// Records that failed before being sent: unencodable, or their
    /// partition had no leader for longer than the retries allow.
    pub failed: Vec<Answer<W>>,
}

/// A record's answer: its partition and offset, or why it failed.
pub(crate) type Answer<W> = (W, Result<(u32, i64), Error>);

#[derive(Debug)]
struct Batch<W> {
    id: u64,
    /// Kept until the batch is encoded.
    records: Vec<Record>,
    waiters: Vec<W>,
    encoded: Option<Bytes>,
    attempts: u32,
}

#[derive(Debug)]
struct Part<W> {
    open: Vec<(Record, W)>,
    open_bytes: usize,
    open_since: Option<Instant>,
    /// Sealed batches in order; the front one is in flight when
    /// `in_flight` says so.
    sealed: VecDeque<Batch<W>>,
    in_flight: bool,
    retry_at: Option<Instant>,
    /// Dispatch attempts in a row that found no leader.
    leaderless: u32,
    next_sequence: i32,
    /// The producer id `next_sequence` counts for.
    sequence_of: Option<ProducerId>,
}

impl<W> Default for Part<W> {
    fn default() -> Self {
        Part {
            open: Vec::new(),
            open_bytes: 0,
            open_since: None,
            sealed: VecDeque::new(),
            in_flight: false,
            retry_at: None,
            leaderless: 0,
            next_sequence: 0,
            sequence_of: None,
        }
    }
}

impl<W> Part<W> {
    fn is_empty(&self) -> bool {
        self.open.is_empty() && self.sealed.is_empty()
    }

    fn seal(&mut self, id: u64) {
        let (records, waiters) = std::mem::take(&mut self.open).into_iter().unzip();
        self.sealed.push_back(Batch {
            id,
            records,
            waiters,
            encoded: None,
            attempts: 0,
        });
        self.open_bytes = 0;
        self.open_since = None;
    }
}

/// Kafka's sequence increment: wraps from `i32::MAX` to 0.
pub(crate) fn next_sequence(sequence: i32, count: usize) -> i32 {
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    ((i64::from(sequence) + count) % (i64::from(i32::MAX) + 1)) as i32
}

/// Records per partition, batched and dispatched by the rules in the
/// module docs. `W` is whatever the driver needs to answer a record.
#[derive(Debug)]
pub(crate) struct Accumulator<W> {
    settings: Settings,
    parts: BTreeMap<Tp, Part<W>>,
    producer: Option<ProducerId>,
    next_batch: u64,
    flushing: bool,
    /// Batches are transactional (a transactional producer's).
    transactional: bool,
}

impl<W> Accumulator<W> {
    pub(crate) fn new(settings: Settings) -> Self {
        Accumulator {
            settings,
            parts: BTreeMap::new(),
            producer: None,
            next_batch: 0,
            flushing: false,
            transactional: false,
        }
    }

    /// Makes every batch encoded from now on transactional.
    pub(crate) fn set_transactional(&mut self, transactional: bool) {
        self.transactional = transactional;
    }

    /// Adds a record to its partition's open batch, sealing that batch
    /// first if the record would take it past `batch_bytes`.
    pub(crate) fn push(&mut self, now: Instant, tp: Tp, record: Record, waiter: W) {
        let size = record.estimated_size();
        let part = self.parts.entry(tp).or_default();
        if !part.open.is_empty() && part.open_bytes + size > self.settings.batch_bytes {
            self.next_batch += 1;
            part.seal(self.next_batch);
        }
        if part.open.is_empty() {
            part.open_since = Some(now);
        }
        part.open.push((record, waiter));
        part.open_bytes += size;
    }

    /// While set, open batches are sealed without waiting for `linger`.
    pub(crate) fn set_flushing(&mut self, flushing: bool) {
        self.flushing = flushing;
    }

    /// Whether nothing is buffered or in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.parts.values().all(|p| p.is_empty())
    }

    /// Whether batches wait for an idempotent producer id.
    pub(crate) fn needs_producer_id(&self) -> bool {
        self.settings.idempotent && self.producer.is_none() && !self.is_idle()
    }

    pub(crate) fn set_producer_id(&mut self, producer: ProducerId) {
        self.producer = Some(producer);
    }

    /// Fails every record not in flight (open and sealed batches): what
    /// the driver does when it cannot get a producer id.
    pub(crate) fn fail_waiting(&mut self, error: &Error) -> Vec<Answer<W>> {
        let mut failed = Vec::new();
        for part in self.parts.values_mut() {
            let keep = usize::from(part.in_flight);
            while part.sealed.len() > keep {
                if let Some(batch) = part.sealed.pop_back() {
                    failed.extend(batch.waiters.into_iter().map(|w| (w, Err(error.clone()))));
                }
            }
            failed.extend(
                std::mem::take(&mut part.open)
                    .into_iter()
                    .map(|(_, w)| (w, Err(error.clone()))),
            );
            part.open_bytes = 0;
            part.open_since = None;
        }
        failed
    }

    /// Seals what is due and dispatches every partition that may send:
    /// nothing in flight, no backoff pending, a leader known. Batches are
    /// grouped per leader into requests of at most `max_request(node)`
    /// bytes of batches (a larger single batch goes alone).
    pub(crate) fn ready(
        &mut self,
        now: Instant,
        now_ms: i64,
        leader: impl Fn(&str, u32) -> Option<u32>,
        max_request: impl Fn(u32) -> usize,
    ) -> Ready<W> {
        let mut ready = Ready {
            requests: Vec::new(),
            no_leader: Vec::new(),
            failed: Vec::new(),
        };
        let mut open: HashMap<u32, (usize, usize)> = HashMap::new();
        let settings = &self.settings;
        let producer = self.producer;
        for ((topic, partition), part) in &mut self.parts {
            if part.in_flight || part.retry_at.is_some_and(|at| at > now) {
                continue;
            }
            part.retry_at = None;
            if part.sealed.is_empty() {
                let due = part
                    .open_since
                    .is_some_and(|since| since + settings.linger <= now);
                if part.open.is_empty()
                    || !(due || self.flushing || part.open_bytes >= settings.batch_bytes)
                {
                    continue;
                }
                self.next_batch += 1;
                part.seal(self.next_batch);
            }
            if settings.idempotent && producer.is_none() {
                continue;
            }
            let Some(node) = leader(topic, *partition) else {
                if !ready.no_leader.contains(topic) {
                    ready.no_leader.push(Arc::clone(topic));
                }
                part.leaderless += 1;
                if part.leaderless > settings.retries {
                    if let Some(batch) = part.sealed.pop_front() {
                        let e = Error::server(
                            ErrorCode::NOT_AVAILABLE,
                            format!("{topic}/{partition} had no leader through every retry"),
                        );
                        ready
                            .failed
                            .extend(batch.waiters.into_iter().map(|w| (w, Err(e.clone()))));
                    }
                } else {
                    part.retry_at = Some(now + settings.backoff.jittered(part.leaderless));
                }
                continue;
            };
            part.leaderless = 0;
            let Some(batch) = part.sealed.front_mut() else {
                continue;
            };
            if batch.encoded.is_none() {
                let identity = match producer {
                    Some(p) if settings.idempotent => {
                        if part.sequence_of != Some(p) {
                            part.sequence_of = Some(p);
                            part.next_sequence = 0;
                        }
                        Some(ProducerIdentity {
                            producer_id: p.id,
                            producer_epoch: p.epoch,
                            base_sequence: part.next_sequence,
                        })
                    }
                    _ => None,
                };
                let options = BatchOptions {
                    compression: settings.compression,
                    producer: identity,
                    now_ms,
                    transactional: self.transactional,
                };
                // the records are not needed once encoded
                match encode_batch(&std::mem::take(&mut batch.records), &options) {
                    Ok(bytes) => batch.encoded = Some(bytes),
                    Err(e) => {
                        if let Some(batch) = part.sealed.pop_front() {
                            ready
                                .failed
                                .extend(batch.waiters.into_iter().map(|w| (w, Err(e.clone()))));
                        }
                        continue;
                    }
                }
            }
            let Some(bytes) = batch.encoded.clone() else {
                continue;
            };
            batch.attempts += 1;
            part.in_flight = true;
            let sent = Sent {
                topic: Arc::clone(topic),
                partition: *partition,
                batch: batch.id,
                bytes,
            };
            let limit = max_request(node);
            match open.get_mut(&node) {
                Some((index, size)) if *size + sent.bytes.len() <= limit => {
                    *size += sent.bytes.len();
                    ready.requests[*index].batches.push(sent);
                }
                _ => {
                    open.insert(node, (ready.requests.len(), sent.bytes.len()));
                    ready.requests.push(Dispatch {
                        node,
                        batches: vec![sent],
                    });
                }
            }
        }
        ready
    }

    /// Settles the in-flight batch `batch` of a partition. Returns the
    /// answers of its records, or nothing when it will be retried.
    pub(crate) fn complete(
        &mut self,
        now: Instant,
        tp: &Tp,
        batch: u64,
        outcome: Outcome,
    ) -> Vec<Answer<W>> {
        let Some(part) = self.parts.get_mut(tp) else {
            return Vec::new();
        };
        if !part.in_flight || part.sealed.front().map(|b| b.id) != Some(batch) {
            return Vec::new();
        }
        part.in_flight = false;
        let partition = tp.1;
        match outcome {
            Outcome::Written { base_offset } => {
                let Some(done) = part.sealed.pop_front() else {
                    return Vec::new();
                };
                if self.settings.idempotent {
                    part.next_sequence = next_sequence(part.next_sequence, done.waiters.len());
                }
                done.waiters
                    .into_iter()
                    .zip(0i64..)
                    .map(|(w, i)| {
                        let offset = if base_offset < 0 { -1 } else { base_offset + i };
                        (w, Ok((partition, offset)))
                    })
                    .collect()
            }
            Outcome::Failed(error) => {
                let attempts = part.sealed.front().map_or(0, |b| b.attempts);
                if error.is_retriable() && attempts <= self.settings.retries {
                    part.retry_at = Some(now + self.settings.backoff.jittered(attempts));
                    return Vec::new();
                }
                let Some(failed) = part.sealed.pop_front() else {
                    return Vec::new();
                };
                if self.settings.idempotent {
                    // Rule 5: the broker may or may not have this batch.
                    self.producer = None;
                }
                failed
                    .waiters
                    .into_iter()
                    .map(|w| (w, Err(error.clone())))
                    .collect()
            }
        }
    }

    /// The earliest time a partition that waits for time (linger or
    /// backoff) becomes ready; `None` when nothing waits for time.
    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        self.parts
            .values()
            .filter(|p| !p.in_flight)
            .filter_map(|p| {
                if p.retry_at.is_some() {
                    p.retry_at
                } else if p.sealed.is_empty() {
                    p.open_since.map(|since| since + self.settings.linger)
                } else {
                    None
                }
            })
            .min()
    }
}

#[cfg(test)]
#[path = "accumulator_tests.rs"]
mod tests;
