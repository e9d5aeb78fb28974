//! The write-ahead writer of partitions durable in object storage
//! (`durability=object-store`): an acks=all write to such a partition is
//! acknowledged once its batches are in an object and their range is
//! recorded in the metastore, not once other agents hold a copy.
//!
//! One writer per agent serves every such partition it leads. Partition
//! tasks hand it the batches they appended ([`WalPiece`], stamped with
//! their offsets, byte for byte as the local log holds them); the writer
//! gathers what arrives within `linger` of the first piece (and whatever
//! queued meanwhile), writes it as one object under `{prefix}/packs/` (one
//! PUT for any number of partitions), records each partition's range in
//! the metastore ([`WalIndex::record`]) and answers each piece. A few
//! objects go up at once, but their ranges are recorded in the order the
//! objects were gathered (the objects already up when the recorder gets to
//! them share one metastore write), so a partition's ranges are recorded in
//! offset order and without gaps: a failed PUT or metastore write is
//! retried, with backoff, until it succeeds, and nothing after it is
//! answered before. A range the
//! metastore refuses (the partition's leader changed) answers its pieces
//! with the refusal; the writer goes on with the other partitions.
//!
//! The pack sweep (`pack::sweep`) deletes a write-ahead object once no
//! recorded range reads from it: the metastore drops a range when manifest
//! entries serve its offsets (the sealed segment went up), or retention or
//! DeleteRecords passed it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use cache::object_store::path::Path;
use cache::object_store::PutPayload;
use cache::{ObjectStoreExt, ObjectStoreHandle};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::TierError;
use super::manifest::ManifestError;
use super::pack::PACKS_DIR;
use super::PartitionKey;

/// Extension of a write-ahead object.
pub const WAL_EXT: &str = "wal";

/// How the writer batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalConfig {
    /// How long the first piece of an object waits for others.
    pub linger: Duration,
    /// An object goes up once it holds this many bytes, linger or not.
    pub max_object_bytes: usize,
    /// Bytes waiting or going up beyond which new pieces are refused
    /// (the object store is slow or away): producers get a retriable error
    /// rather than the agent's memory filling.
    pub max_backlog_bytes: u64,
    /// A PUT that takes longer than this is abandoned and tried again.
    pub put_timeout: Duration,
    /// Objects going up at once; their ranges are still recorded in order.
    pub max_puts_in_flight: usize,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            linger: Duration::from_millis(5),
            max_object_bytes: 8 << 20,
            max_backlog_bytes: 256 << 20,
            put_timeout: Duration::from_secs(10),
            max_puts_in_flight: 4,
        }
    }
}

/// Batches one partition appended, to go into a write-ahead object.
#[derive(Debug, Clone)]
pub struct WalPiece {
    pub partition: PartitionKey,
    pub leader_epoch: i32,
    pub base_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    /// Whole record batches, as the local log holds them.
    pub records: Bytes,
}

/// Where a range of one partition's offsets lies in a write-ahead object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    pub partition: PartitionKey,
    pub leader_epoch: i32,
    pub base_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    /// Object key under the store's root (prefix included).
    pub key: String,
    pub offset: u64,
    pub len: u64,
}

/// Why a piece was not made durable.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WalError {
    /// The metastore refused the range: the partition's leader changed, or
    /// the range does not follow what is recorded.
    #[error("the write-ahead range was refused: {0}")]
    Refused(String),
    /// More bytes wait for object storage than the writer holds.
    #[error("{0} bytes wait for object storage already; try again")]
    Backlog(u64),
    /// The writer stopped (the agent is shutting down).
    #[error("the write-ahead writer stopped")]
    Stopped,
}

/// Where ranges are recorded: the metastore in production.
#[async_trait]
pub trait WalIndex: Send + Sync + 'static {
    /// Records the ranges in one durable write; one result per range, in
    /// order (`Err(reason)`: refused for good). Retrying ranges already
    /// recorded is harmless.
    async fn record(
        &self,
        ranges: Vec<WalRecord>,
    ) -> Result<Vec<Result<(), String>>, ManifestError>;
}

/// Told whether a piece is durable.
pub type WalDone = Box<dyn FnOnce(Result<(), WalError>) + Send>;

struct Pending {
    piece: WalPiece,
    done: WalDone,
}

/// What the writer did, for `/metrics`.
#[derive(Debug, Default)]
pub struct WalCounters {
    pub objects: AtomicU64,
    pub bytes: AtomicU64,
    pub pieces: AtomicU64,
    pub put_failures: AtomicU64,
    pub record_failures: AtomicU64,
    pub refused: AtomicU64,
    /// Bytes handed over and not yet answered.
    pub backlog_bytes: AtomicU64,
}

/// The handle partition tasks submit pieces through; once every handle is
/// dropped the writer writes what it was handed and stops.
#[derive(Clone)]
pub struct WalWriter {
    tx: mpsc::UnboundedSender<Pending>,
    store: ObjectStoreHandle,
    counters: Arc<WalCounters>,
    max_backlog: u64,
}

impl std::fmt::Debug for WalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalWriter")
            .field("backlog_bytes", &self.counters.backlog_bytes)
            .finish()
    }
}

impl WalWriter {
    /// Starts the writer on the current runtime.
    pub fn start(store: ObjectStoreHandle, index: Arc<dyn WalIndex>, config: WalConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let counters = Arc::new(WalCounters::default());
        tokio::spawn(run(store.clone(), index, config, rx, counters.clone()));
        WalWriter {
            tx,
            store,
            counters,
            max_backlog: config.max_backlog_bytes,
        }
    }

    pub fn counters(&self) -> &Arc<WalCounters> {
        &self.counters
    }

    /// Reads a recorded range back (a new leader rebuilding its log).
    pub async fn read(&self, key: &str, offset: u64, len: u64) -> Result<Bytes, TierError> {
        let path = Path::from(key);
        let got = self
            .store
            .store
            .get_range(&path, offset..offset.saturating_add(len))
            .await
            .map_err(|source| cache::CacheError::Store {
                key: key.to_owned(),
                source: Arc::new(source),
            })?;
        if got.len() as u64 != len {
            return Err(TierError::CorruptObject {
                key: key.to_owned(),
                position: offset,
                reason: format!("{} bytes where the range recorded {len}", got.len()),
            });
        }
        Ok(got)
    }

    /// Whether a piece of `len` bytes would be taken now: refused with
    /// [`TierError::Backpressure`] (which producers retry) while the
    /// backlog is full, so a caller can ask before it appends.
    pub fn has_room(&self, len: usize) -> Result<(), TierError> {
        let pending = self.counters.backlog_bytes.load(Ordering::Relaxed);
        let incoming = len as u64;
        if pending > 0 && pending.saturating_add(incoming) > self.max_backlog {
            return Err(TierError::Backpressure {
                pending,
                incoming,
                limit: self.max_backlog,
            });
        }
        Ok(())
    }

    /// Hands a piece over; `done` is called once it is durable or refused.
    /// Refused at once (and `done` not called) while the backlog is full or
    /// the writer stopped.
    pub fn submit(&self, piece: WalPiece, done: WalDone) -> Result<(), WalError> {
        if let Err(TierError::Backpressure { pending, .. }) = self.has_room(piece.records.len()) {
            return Err(WalError::Backlog(pending));
        }
        let len = piece.records.len() as u64;
        self.counters
            .backlog_bytes
            .fetch_add(len, Ordering::Relaxed);
        self.tx.send(Pending { piece, done }).map_err(|e| {
            self.counters
                .backlog_bytes
                .fetch_sub(len, Ordering::Relaxed);
            drop(e);
            WalError::Stopped
        })
    }
}

/// A fresh write-ahead object's key: upload time first, as a pack's, so the
/// pack sweep can tell its age from the name.
fn wal_key(prefix: &Path) -> Path {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    prefix.clone().join(PACKS_DIR).join(format!(
        "{now_ms:013}-{}.{WAL_EXT}",
        uuid::Uuid::new_v4().simple()
    ))
}

async fn run(
    store: ObjectStoreHandle,
    index: Arc<dyn WalIndex>,
    config: WalConfig,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    counters: Arc<WalCounters>,
) {
    // objects go up concurrently (a few at once); their ranges are
    // recorded in the order the objects were gathered
    let (put_tx, put_rx) = mpsc::channel(config.max_puts_in_flight.max(1));
    let recorder = tokio::spawn(record_in_order(index, put_rx, counters.clone()));
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let mut bytes = batch[0].piece.records.len();
        let until = Instant::now() + config.linger;
        while bytes < config.max_object_bytes {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(p)) => {
                    bytes += p.piece.records.len();
                    batch.push(p);
                }
                Ok(None) | Err(_) => break,
            }
        }
        // what queued up meanwhile goes along, up to the size bound
        while bytes < config.max_object_bytes {
            match rx.try_recv() {
                Ok(p) => {
                    bytes += p.piece.records.len();
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        let put = tokio::spawn(put_object(
            store.clone(),
            config.put_timeout,
            batch,
            counters.clone(),
        ));
        if put_tx.send(put).await.is_err() {
            break;
        }
    }
    drop(put_tx);
    let _ = recorder.await;
}

/// An object that went up, with what its ranges and pieces need.
struct PutDone {
    records: Vec<WalRecord>,
    /// For each piece, the index of its range in `records`.
    of_piece: Vec<usize>,
    dones: Vec<WalDone>,
    total: u64,
}

/// Records the ranges of the objects that went up, in the order they were
/// gathered: every object already up when the recorder gets to it shares
/// one metastore write. Then answers their pieces.
async fn record_in_order(
    index: Arc<dyn WalIndex>,
    mut puts: mpsc::Receiver<tokio::task::JoinHandle<PutDone>>,
    counters: Arc<WalCounters>,
) {
    let mut next = None;
    loop {
        let first = match next.take() {
            Some(h) => h,
            None => match puts.recv().await {
                Some(h) => h,
                None => return,
            },
        };
        let mut handles = vec![first];
        loop {
            match puts.try_recv() {
                Ok(h) if h.is_finished() => handles.push(h),
                Ok(h) => {
                    next = Some(h);
                    break;
                }
                Err(_) => break,
            }
        }
        let mut done = Vec::with_capacity(handles.len());
        for h in handles {
            match h.await {
                Ok(p) => done.push(p),
                // a PUT task that panicked: its pieces are never answered,
                // and the ranges after it are refused as not following
                Err(e) => tracing::error!(error = %e, "a write-ahead upload task failed"),
            }
        }
        record_and_answer(index.as_ref(), done, &counters).await;
    }
}

/// The ranges of an object holding `pieces` back to back: consecutive
/// pieces of one partition at one epoch that follow each other make one
/// range. Returns the ranges and, per piece, the range it belongs to.
pub fn ranges(key: &str, pieces: &[WalPiece]) -> (Vec<WalRecord>, Vec<usize>) {
    let mut out: Vec<WalRecord> = Vec::new();
    let mut of_piece = Vec::with_capacity(pieces.len());
    let mut offset = 0u64;
    // the last range of each partition in `out`
    let mut last_of: std::collections::HashMap<PartitionKey, usize> = Default::default();
    for p in pieces {
        let len = p.records.len() as u64;
        let extends = last_of.get(&p.partition).copied().filter(|&i| {
            let r = &out[i];
            r.leader_epoch == p.leader_epoch
                && r.last_offset.saturating_add(1) == p.base_offset
                && r.offset + r.len == offset
        });
        match extends {
            Some(i) => {
                out[i].last_offset = p.last_offset;
                out[i].len += len;
                of_piece.push(i);
            }
            None => {
                last_of.insert(p.partition, out.len());
                of_piece.push(out.len());
                out.push(WalRecord {
                    partition: p.partition,
                    leader_epoch: p.leader_epoch,
                    base_offset: p.base_offset,
                    last_offset: p.last_offset,
                    key: key.to_owned(),
                    offset,
                    len,
                });
            }
        }
        offset += len;
    }
    (out, of_piece)
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1 << attempt.min(5)))
}

/// Puts `batch` as one object, trying again (with backoff) until it is up.
async fn put_object(
    store: ObjectStoreHandle,
    put_timeout: Duration,
    batch: Vec<Pending>,
    counters: Arc<WalCounters>,
) -> PutDone {
    let key = wal_key(&store.prefix);
    let (pieces, dones): (Vec<WalPiece>, Vec<WalDone>) =
        batch.into_iter().map(|p| (p.piece, p.done)).unzip();
    let (records, of_piece) = ranges(key.as_ref(), &pieces);
    let total: u64 = pieces.iter().map(|p| p.records.len() as u64).sum();
    let payload: PutPayload = pieces.iter().map(|p| p.records.clone()).collect();
    let mut attempt = 0;
    loop {
        let put = tokio::time::timeout(put_timeout, store.store.put(&key, payload.clone()));
        match put.await {
            Ok(Ok(_)) => break,
            Ok(Err(e)) => {
                tracing::warn!(key = %key, attempt, error = %e, "a write-ahead object did not go up; trying again");
            }
            Err(_) => {
                tracing::warn!(key = %key, attempt, timeout_ms = put_timeout.as_millis() as u64, "a write-ahead object did not go up in time; trying again");
            }
        }
        counters.put_failures.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(backoff(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
    counters.objects.fetch_add(1, Ordering::Relaxed);
    counters.bytes.fetch_add(total, Ordering::Relaxed);
    PutDone {
        records,
        of_piece,
        dones,
        total,
    }
}

/// Records the ranges of objects that are up in one metastore write
/// (tried again until it lands), then answers each piece.
async fn record_and_answer(index: &dyn WalIndex, done: Vec<PutDone>, counters: &WalCounters) {
    let records: Vec<WalRecord> = done.iter().flat_map(|p| p.records.clone()).collect();
    let mut attempt = 0;
    let results = loop {
        match index.record(records.clone()).await {
            Ok(results) if results.len() == records.len() => break results,
            Ok(results) => {
                tracing::error!(
                    asked = records.len(),
                    answered = results.len(),
                    "the metastore answered another number of write-ahead ranges than asked"
                );
            }
            Err(e) => {
                tracing::warn!(attempt, error = %e, "recording write-ahead ranges failed; trying again");
            }
        }
        counters.record_failures.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(backoff(attempt)).await;
        attempt = attempt.saturating_add(1);
    };
    let mut first_range = 0;
    for p in done {
        counters
            .pieces
            .fetch_add(p.dones.len() as u64, Ordering::Relaxed);
        counters.backlog_bytes.fetch_sub(p.total, Ordering::Relaxed);
        for (answer_to, range) in p.dones.into_iter().zip(p.of_piece) {
            let answer = match results.get(first_range + range) {
                Some(Ok(())) => Ok(()),
                Some(Err(reason)) => {
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                    Err(WalError::Refused(reason.clone()))
                }
                None => Err(WalError::Refused("no answer for the range".to_owned())),
            };
            answer_to(answer);
        }
        first_range += p.records.len();
    }
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
