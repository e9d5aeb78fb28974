//! [`Tier`]: the running tiering service of a node, and the driver loop that
//! performs the [`UploaderEngine`]'s actions.
//!
//! Threads and tasks, step by step:
//! 1. Partition tasks (on the shards) own [`TieredPartition`]s; they send
//!    engine events (registration, sealed segments, log start raised) over an
//!    unbounded channel and never wait on tiering.
//! 2. One driver task on the control-plane runtime owns the engine. It
//!    feeds it those events and the completions of its own operations, and
//!    spawns each upload and commit as a task of its own (bounded by the
//!    engine's limits). After a commit it first adds the entry to the
//!    partition's shared manifest snapshot, and only then lets the engine
//!    announce the new `deletable_below` — so a local segment is deleted
//!    only after cold readers can find its object.
//! 3. Every `retention_interval`, and after a refused commit, it re-reads
//!    the manifest of each open partition (a local read): entries other
//!    agents committed (the partition's earlier or current leader) go into
//!    the shared snapshot first, for cold reads, and only then to the
//!    engine, which may then let local retention delete the local copies
//!    they serve — on a follower, or on a new leader whose segments were
//!    uploaded by its predecessor.
//! 4. A retention pass (one at a time, every `retention_interval` or when
//!    DeleteRecords asks) trims manifests first, then deletes the objects
//!    (or moves them under the tombstone prefix), and cleans up after
//!    deleted topics.
//! 5. Cold reads run on the control-plane runtime too (spawned there by
//!    [`Tier::read`]), so object-store IO never runs on a shard.
//! 6. Compacted copies (a compacted topic's leader rewrote a tiered
//!    segment locally, or merged several into one): the engine schedules a
//!    re-upload; the driver checks that one entry of the shared snapshot
//!    serves exactly the segment's offsets with a larger object, or that
//!    several consecutive entries do together, uploads the `.seg`, `.idx`
//!    and `.tix` under keys of a new generation (copying the `.producers`
//!    object of the last old entry, and the `.txnindex` of a single one,
//!    which compaction does not change; a merged segment's `.txnindex` goes
//!    up from its local file), replaces the entries by the new one in the
//!    manifest in one write, puts the new entry in the shared snapshot,
//!    and deletes the old objects only after `compaction_grace`: a cold
//!    read that looked up an old entry just before the swap still finds
//!    its objects.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cache::layout::SegmentId;
use cache::object_store::path::Path;
use cache::{
    link_or_upload_file, ColdCache, KnownBytes, ObjectStoreExt, ObjectStoreHandle, UploadOptions,
    Uploaded,
};
use parking_lot::Mutex;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use super::budget::DiskBudget;
use super::cold::{ColdRead, ColdReader};
use super::engine::{Action, EngineConfig, Event, SealedSegment, UploaderEngine};
use super::error::TierError;
use super::link::{Core, Link, Msg};
use super::manifest::{Manifest, TieredSegment};
use super::metrics::{add, TierMetrics, TierSnapshot};
use super::pack::{self, PackConfig, Packer, Waiting};
use super::partition::TieredPartition;
use super::producers;
use super::retention::{DeleteMode, ObjectDeleter, RetentionPass};
use super::shared::{PartitionShared, TierRetention};
use super::PartitionKey;
use crate::log::{PartitionLog, TimestampOffset};

/// Settings of the tiering service.
#[derive(Debug, Clone)]
pub struct TierConfig {
    pub engine: EngineConfig,
    pub upload: UploadOptions,
    /// Deadline of one object upload, plus `size / min_upload_bytes_per_sec`.
    pub upload_timeout: Duration,
    pub min_upload_bytes_per_sec: u64,
    /// Deadline of one manifest write.
    pub manifest_timeout: Duration,
    /// How often retention across tiers runs.
    pub retention_interval: Duration,
    pub delete_mode: DeleteMode,
    /// Local disk limit for partition data (see [`DiskBudget`]).
    pub local_disk_limit: Option<u64>,
    /// How long the objects of a tiered entry replaced by a compacted copy
    /// stay after the swap, for cold reads that looked the old entry up.
    pub compaction_grace: Duration,
    /// Pack sealed segments of many partitions into shared objects (see
    /// [`super::pack`]); `None`: each segment goes up as its own objects.
    pub pack: Option<PackConfig>,
}

impl Default for TierConfig {
    fn default() -> Self {
        TierConfig {
            engine: EngineConfig::default(),
            upload: UploadOptions::default(),
            upload_timeout: Duration::from_secs(60),
            min_upload_bytes_per_sec: 1 << 20,
            manifest_timeout: Duration::from_secs(30),
            retention_interval: Duration::from_secs(2),
            delete_mode: DeleteMode::Delete,
            local_disk_limit: None,
            compaction_grace: Duration::from_secs(60),
            pack: None,
        }
    }
}

/// The node's tiering service; cheap to clone.
#[derive(Clone)]
pub struct Tier {
    inner: Arc<Inner>,
}

struct Inner {
    config_manifest_timeout: Duration,
    store: ObjectStoreHandle,
    reader: ColdReader,
    /// Aborted-transaction indexes of tiered segments read so far.
    txn_indexes: Arc<super::txn_index::Remembered>,
    manifest: Arc<dyn Manifest>,
    core: Arc<Core>,
    budget: Arc<DiskBudget>,
    metrics: Arc<TierMetrics>,
    runtime: Handle,
    next_registration: AtomicU64,
    driver: Mutex<Option<JoinHandle<()>>>,
    /// Partitions open with nothing uploadable until their owner raises
    /// the limit ([`TieredPartition::set_upload_limit`]): in a cluster only
    /// a leader uploads, and only what its in-sync replicas hold.
    uploads_held: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tier")
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

impl Tier {
    /// Starts the service on the current tokio runtime (the control plane).
    pub fn start(
        config: TierConfig,
        store: ObjectStoreHandle,
        cache: ColdCache,
        manifest: Arc<dyn Manifest>,
    ) -> Tier {
        let (tx, rx) = mpsc::unbounded_channel();
        let manifest_timeout = config.manifest_timeout;
        let core = Arc::new(Core {
            tx: tx.clone(),
            registry: Mutex::new(HashMap::new()),
        });
        let budget = Arc::new(DiskBudget::new(config.local_disk_limit));
        let metrics = Arc::new(TierMetrics::default());
        let reader = ColdReader::new(cache);
        let mut engine_config = config.engine.clone();
        if let Some(pack) = &config.pack {
            // Segments waiting for their pack count as uploads in flight, on
            // the agent and per partition: capped per partition at the
            // upload concurrency, one busy partition's backlog filled each
            // pack with that many segments, below the floor, so every pack
            // waited out `max_wait` and a backlog drained a few segments a
            // minute. Segments too large to pack stay within the upload
            // concurrency through `own_uploads` instead.
            engine_config.max_in_flight = engine_config.max_in_flight.max(pack.max_waiting);
            engine_config.max_in_flight_per_partition = engine_config
                .max_in_flight_per_partition
                .max(pack.max_waiting);
        }
        let own_uploads = Arc::new(Semaphore::new(config.engine.max_in_flight.max(1)));
        let driver = Driver {
            engine: UploaderEngine::new(engine_config),
            packer: config.pack.clone().map(Packer::new),
            last_sweep: Instant::now(),
            sweep: None,
            rx,
            tx,
            store: store.clone(),
            manifest: Arc::clone(&manifest),
            core: Arc::clone(&core),
            metrics: Arc::clone(&metrics),
            cache: reader.cache().clone(),
            config,
            tasks: JoinSet::new(),
            retention: None,
            failed_deletes: Arc::new(Mutex::new(Vec::new())),
            upload_times: Arc::new(Mutex::new(HashMap::new())),
            own_uploads,
        };
        let handle = tokio::spawn(driver.run());
        Tier {
            inner: Arc::new(Inner {
                config_manifest_timeout: manifest_timeout,
                store,
                reader,
                txn_indexes: Arc::default(),
                manifest,
                core,
                budget,
                metrics,
                runtime: Handle::current(),
                next_registration: AtomicU64::new(1),
                driver: Mutex::new(Some(handle)),
                uploads_held: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Makes `log` a tiered partition. If the manifest reaches past the local
    /// log end (the local log was lost or removed), the local log restarts
    /// empty at the manifest's end: everything below is in object storage.
    /// The DeleteRecords floor is the larger of the manifest's log start
    /// (which survives the loss of the local directory) and the one kept in
    /// the directory; the local log restarts at it too if it ends below it,
    /// and starts no lower than it.
    pub fn open_partition(
        &self,
        key: PartitionKey,
        log: PartitionLog,
        retention: TierRetention,
    ) -> Result<TieredPartition, TierError> {
        self.open(key, log, retention, false)
    }

    /// As [`Tier::open_partition`]; a local log that restarts empty at the
    /// tiered end also restores the producer snapshot uploaded with the
    /// last tiered segment (see `crate::snapshots`), so that idempotent
    /// producers' retries of batches below are still recognised. Blocks
    /// on object storage for that read (at most the manifest timeout):
    /// call it off the async threads (a partition's log opens on a blocking
    /// thread). Object storage out of reach leaves the state empty, as
    /// [`Tier::open_partition`] does.
    pub fn open_partition_restoring(
        &self,
        key: PartitionKey,
        log: PartitionLog,
        retention: TierRetention,
    ) -> Result<TieredPartition, TierError> {
        self.open(key, log, retention, true)
    }

    fn open(
        &self,
        key: PartitionKey,
        mut log: PartitionLog,
        retention: TierRetention,
        restore_producers: bool,
    ) -> Result<TieredPartition, TierError> {
        let entries = self.inner.manifest.segments(key);
        let local_floor = TieredPartition::read_floor(log.dir())?;
        let floor = self
            .inner
            .manifest
            .log_start(key)
            .map_or(local_floor, |f| f.max(local_floor));
        let tiered_end = entries.last().map_or(-1, TieredSegment::next_offset);
        let restart_at = tiered_end.max(floor);
        if log.log_end_offset() < restart_at {
            tracing::info!(
                dir = %log.dir().display(),
                local_end = log.log_end_offset(),
                tiered_end,
                floor,
                "the local log ends below object storage or the log start: restarting it there"
            );
            log.truncate_fully_and_start_at(restart_at)?;
            if restore_producers && restart_at == tiered_end {
                match self.producer_snapshot_blocking(key, restart_at) {
                    Ok(Some(snapshot)) => {
                        log.restore_producers(&snapshot)?;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(dir = %log.dir().display(), error = %e, "could not read the producer snapshot at the tiered end; producer state starts empty");
                    }
                }
            }
        }
        if floor > log.log_start_offset() {
            log.delete_records_before(floor)?;
        }
        if floor > local_floor {
            TieredPartition::write_floor(log.dir(), floor)?;
        }
        let registration = self.inner.next_registration.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(PartitionShared::new(key, entries, floor, registration));
        self.inner
            .core
            .registry
            .lock()
            .insert(key, Arc::clone(&shared));
        let link = Link {
            core: Arc::clone(&self.inner.core),
            budget: Arc::clone(&self.inner.budget),
            registration,
        };
        let limit = if self.inner.uploads_held.load(Ordering::SeqCst) {
            i64::MIN
        } else {
            i64::MAX
        };
        Ok(TieredPartition::new(link, shared, log, retention, limit))
    }

    /// The producer snapshot uploaded with the tiered segment of `key` that
    /// ends right before `next_offset` (the state after that segment's last
    /// batch, for a replica whose log restarts there); `None` when no
    /// segment ends there or it was tiered without one.
    pub async fn producer_snapshot(
        &self,
        key: PartitionKey,
        next_offset: i64,
    ) -> Result<Option<bytes::Bytes>, TierError> {
        let entries = self.inner.manifest.segments(key);
        let store = self.inner.store.clone();
        let deadline = self.inner.config_manifest_timeout;
        self.inner
            .runtime
            .spawn(async move { producers::read(&store, &entries, next_offset, deadline).await })
            .await
            .map_err(|_| TierError::Stopped)?
    }

    /// [`Tier::producer_snapshot`], waited for on this thread, which must
    /// not be one of the tier runtime's async threads.
    fn producer_snapshot_blocking(
        &self,
        key: PartitionKey,
        next_offset: i64,
    ) -> Result<Option<bytes::Bytes>, TierError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let tier = self.clone();
        self.inner.runtime.spawn(async move {
            let _ = tx.send(tier.producer_snapshot(key, next_offset).await);
        });
        rx.recv().map_err(|_| TierError::Stopped)?
    }

    /// The aborted transactions of the partition's tiered segments that
    /// overlap `[from, upto)` (see `txn_index`), for read_committed cold
    /// reads.
    pub async fn aborted_transactions(
        &self,
        key: PartitionKey,
        from: i64,
        upto: i64,
    ) -> Result<Vec<crate::txn::AbortedTxn>, TierError> {
        let (entries, _) = self.entries(key);
        let store = self.inner.store.clone();
        let remembered = Arc::clone(&self.inner.txn_indexes);
        let deadline = self.inner.config_manifest_timeout;
        self.inner
            .runtime
            .spawn(async move {
                super::txn_index::aborted(&store, &remembered, &entries, from, upto, deadline).await
            })
            .await
            .map_err(|_| TierError::Stopped)?
    }

    /// From now on partitions open with nothing uploadable until their
    /// owner calls [`TieredPartition::set_upload_limit`] (a cluster: only a
    /// partition's leader uploads, and only below its high watermark).
    pub fn hold_uploads_until_limited(&self) {
        self.inner.uploads_held.store(true, Ordering::SeqCst);
    }

    /// The shared state of an open partition.
    pub fn partition(&self, key: PartitionKey) -> Option<Arc<PartitionShared>> {
        self.inner.core.registry.lock().get(&key).cloned()
    }

    /// The partition's entries and DeleteRecords floor (-1 if none).
    fn entries(&self, key: PartitionKey) -> (Arc<Vec<TieredSegment>>, i64) {
        let recorded = self.inner.manifest.log_start(key).unwrap_or(-1);
        match self.partition(key) {
            Some(s) => (s.manifest(), s.floor().max(recorded)),
            None => (Arc::new(self.inner.manifest.segments(key)), recorded),
        }
    }

    /// Records `offset` as the partition's log start in the manifest, so
    /// the DeleteRecords floor survives the loss of the local directory.
    /// Call it before applying DeleteRecords locally
    /// ([`TieredPartition::delete_records_before`]); durable on `Ok`, and a
    /// no-op at or below the recorded start. Refused for an open partition
    /// when `offset` is past its log end.
    pub async fn persist_log_start(&self, key: PartitionKey, offset: i64) -> Result<(), TierError> {
        if let Some(shared) = self.partition(key) {
            let end = shared.log_end();
            if offset < 0 || offset > end {
                return Err(crate::StorageError::OffsetOutOfRange {
                    offset,
                    log_start: shared.log_start(shared.local_start()),
                    log_end: end,
                }
                .into());
            }
        }
        let deadline = self.inner.config_manifest_timeout;
        match tokio::time::timeout(deadline, self.inner.manifest.set_log_start(key, offset)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(TierError::Timeout {
                what: format!(
                    "recording log start {offset} of {}/{}",
                    key.topic_id, key.partition
                ),
                seconds: deadline.as_secs(),
            }),
        }
    }

    /// Whole batches from object storage from the one holding `offset`;
    /// `None` when no tiered segment holds `offset` or anything after it, or
    /// `offset` is below the DeleteRecords floor.
    pub async fn read(
        &self,
        key: PartitionKey,
        offset: i64,
        max_bytes: usize,
    ) -> Result<Option<ColdRead>, TierError> {
        let (entries, floor) = self.entries(key);
        if offset < floor {
            return Ok(None);
        }
        let reader = self.inner.reader.clone();
        let read = self
            .inner
            .runtime
            .spawn(async move { reader.read(&entries, offset, max_bytes).await })
            .await
            .map_err(|_| TierError::Stopped)?;
        let m = &self.inner.metrics;
        match &read {
            Ok(Some(r)) => {
                add(&m.cold_reads, 1);
                add(&m.cold_read_bytes, r.bytes.len() as u64);
            }
            Ok(None) => {}
            Err(e) => {
                add(&m.cold_read_errors, 1);
                tracing::warn!(topic_id = %key.topic_id, partition = key.partition, offset, error = %e, "cold read failed");
            }
        }
        read
    }

    /// The offset after the last one object storage holds for `key`, if any.
    pub fn tiered_end(&self, key: PartitionKey) -> Option<i64> {
        self.entries(key).0.last().map(TieredSegment::next_offset)
    }

    /// ListOffsets by timestamp over tiered data at or above `log_start` and
    /// the DeleteRecords floor.
    pub async fn offset_for_timestamp(
        &self,
        key: PartitionKey,
        ts: i64,
        log_start: i64,
    ) -> Result<Option<TimestampOffset>, TierError> {
        let (entries, floor) = self.entries(key);
        let log_start = log_start.max(floor);
        let reader = self.inner.reader.clone();
        self.inner
            .runtime
            .spawn(async move { reader.offset_for_timestamp(&entries, ts, log_start).await })
            .await
            .map_err(|_| TierError::Stopped)?
    }

    /// ListOffsets MAX_TIMESTAMP over tiered data at or above `log_start`
    /// and the DeleteRecords floor.
    pub async fn max_timestamp(
        &self,
        key: PartitionKey,
        log_start: i64,
    ) -> Result<Option<TimestampOffset>, TierError> {
        let (entries, floor) = self.entries(key);
        let log_start = log_start.max(floor);
        let reader = self.inner.reader.clone();
        self.inner
            .runtime
            .spawn(async move { reader.max_timestamp(&entries, log_start).await })
            .await
            .map_err(|_| TierError::Stopped)?
    }

    pub fn store(&self) -> &ObjectStoreHandle {
        &self.inner.store
    }

    pub fn cache(&self) -> &ColdCache {
        self.inner.reader.cache()
    }

    pub fn budget(&self) -> &Arc<DiskBudget> {
        &self.inner.budget
    }

    /// Every figure of the service now.
    pub fn snapshot(&self) -> TierSnapshot {
        let lag: u64 = self
            .inner
            .core
            .registry
            .lock()
            .values()
            .map(|s| {
                let done = s.deletable_below().max(s.local_start());
                u64::try_from(s.log_end().saturating_sub(done)).unwrap_or(0)
            })
            .sum();
        self.inner
            .metrics
            .snapshot(&self.inner.budget, lag, self.cache().stats())
    }

    /// Asks for a retention pass now (it also runs on its own timer).
    pub fn run_retention(&self) {
        let _ = self.inner.core.tx.send(Msg::Retention);
    }

    /// Stops the driver (uploads in flight are abandoned and redone by the
    /// next start) and flushes the cache's disk tier.
    pub async fn shutdown(&self) {
        let _ = self.inner.core.tx.send(Msg::Stop);
        let handle = self.inner.driver.lock().take();
        if let Some(h) = handle {
            let _ = h.await;
        }
        if let Err(e) = self.cache().close().await {
            tracing::warn!(error = %e, "closing the cold cache failed");
        }
    }
}

struct Driver {
    engine: UploaderEngine,
    packer: Option<Packer>,
    last_sweep: Instant,
    sweep: Option<JoinHandle<()>>,
    rx: mpsc::UnboundedReceiver<Msg>,
    tx: mpsc::UnboundedSender<Msg>,
    store: ObjectStoreHandle,
    manifest: Arc<dyn Manifest>,
    core: Arc<Core>,
    metrics: Arc<TierMetrics>,
    cache: ColdCache,
    config: TierConfig,
    tasks: JoinSet<()>,
    retention: Option<JoinHandle<()>>,
    failed_deletes: Arc<Mutex<Vec<(Path, u64)>>>,
    upload_times: Arc<Mutex<HashMap<String, i64>>>,
    /// Segments and compacted copies uploading as their own objects: at
    /// most the upload concurrency at once, whatever the engine's limits
    /// (raised for segments waiting for a pack).
    own_uploads: Arc<Semaphore>,
}

impl Driver {
    async fn run(mut self) {
        let epoch = Instant::now();
        let now = move || u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut retention_timer = tokio::time::interval(self.config.retention_interval);
        retention_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let wake = self.engine.next_wake(now());
            let backoff = async move {
                match wake {
                    Some(at) => tokio::time::sleep_until(epoch + Duration::from_millis(at)).await,
                    None => std::future::pending().await,
                }
            };
            let actions = tokio::select! {
                msg = self.rx.recv() => match msg {
                    None | Some(Msg::Stop) => break,
                    Some(Msg::Engine(event)) => self.engine.handle(now(), event),
                    Some(Msg::Committed { op, partition, entry }) => {
                        add(&self.metrics.committed_segments, 1);
                        if let Some(shared) = self.core.registry.lock().get(&partition) {
                            shared.insert_entry(entry);
                        }
                        self.engine.handle(now(), Event::CommitDone { op })
                    }
                    Some(Msg::Replaced { op, partition, old, entry }) => {
                        self.replaced(partition, old, entry);
                        self.engine.handle(now(), Event::ReplaceDone { op })
                    }
                    Some(Msg::Expire(entry)) => {
                        self.expire_later(entry);
                        self.engine.tick(now())
                    }
                    Some(Msg::Retention) => {
                        self.start_retention();
                        self.engine.tick(now())
                    }
                    Some(Msg::Packed(events)) => {
                        if let Some(packer) = &mut self.packer {
                            packer.finished();
                        }
                        let mut actions = Vec::new();
                        for event in events {
                            actions.extend(self.engine.handle(now(), event));
                        }
                        self.start_packs();
                        actions
                    }
                    Some(Msg::Refresh(partition)) => self.refresh_manifest(now(), partition),
                },
                _ = backoff => self.engine.tick(now()),
                _ = retention_timer.tick() => {
                    let open: Vec<_> = self.core.registry.lock().keys().copied().collect();
                    for partition in open {
                        let actions = self.refresh_manifest(now(), partition);
                        for action in actions {
                            self.perform(action);
                        }
                    }
                    self.start_retention();
                    self.start_packs();
                    self.start_sweep();
                    // Every wake-up ticks the engine: `next_wake` only names
                    // backoffs still ahead, so one that ended while another
                    // branch ran would otherwise never start.
                    self.engine.tick(now())
                }
            };
            for action in actions {
                self.perform(action);
            }
            self.metrics.set_engine(&self.engine.stats(now()));
            while self.tasks.try_join_next().is_some() {}
        }
        self.tasks.abort_all();
        if let Some(r) = self.retention.take() {
            r.abort();
        }
        if let Some(s) = self.sweep.take() {
            s.abort();
        }
    }

    /// Reads the partition's manifest; when it changed, the shared snapshot
    /// takes it first (cold reads find the entries) and the engine second
    /// (local copies they serve may go).
    fn refresh_manifest(&mut self, now: u64, partition: PartitionKey) -> Vec<Action> {
        let Some(shared) = self.core.registry.lock().get(&partition).cloned() else {
            return Vec::new();
        };
        let entries = self.manifest.segments(partition);
        let committed = entries
            .iter()
            .map(|e| (e.first_served(), e.last_offset))
            .collect();
        if !shared.replace_entries(entries) {
            return Vec::new();
        }
        self.engine.handle(
            now,
            Event::ManifestRead {
                partition,
                committed,
            },
        )
    }

    fn perform(&mut self, action: Action) {
        match action {
            Action::Upload {
                op,
                partition,
                segment,
                attempt,
            } if self.packer.is_some() && segment.size <= pack::LARGEST_PACKED => {
                if let Some(packer) = &mut self.packer {
                    packer.add(Waiting {
                        op,
                        partition,
                        segment,
                        attempt,
                        since: Instant::now(),
                    });
                }
                self.start_packs();
            }
            Action::Upload {
                op,
                partition,
                segment,
                attempt,
            } => {
                let store = self.store.clone();
                let config = self.config.clone();
                let metrics = Arc::clone(&self.metrics);
                let tx = self.tx.clone();
                let own_uploads = Arc::clone(&self.own_uploads);
                self.tasks.spawn(async move {
                    // Never closed, so this waits only for a slot.
                    let _slot = own_uploads.acquire_owned().await;
                    // One span per segment (rare next to requests, so not
                    // sampled), at the target the binary's trace exporter
                    // listens to; nothing is made when no layer wants it.
                    let span = tracing::debug_span!(
                        target: "aerostream_otel",
                        "upload",
                        topic_id = %partition.topic_id,
                        partition = partition.partition,
                        base_offset = segment.base_offset,
                        bytes = i64::try_from(segment.size).unwrap_or(i64::MAX),
                    );
                    let uploaded = upload_segment(&store, partition, &segment, &config)
                        .instrument(span)
                        .await;
                    let event = match uploaded {
                        Ok((entry, bytes, objects)) => {
                            add(&metrics.uploaded_bytes, bytes);
                            add(&metrics.uploaded_objects, objects);
                            add(&metrics.uploaded_segments, 1);
                            Event::UploadDone { op, entry }
                        }
                        Err(e) => {
                            add(&metrics.upload_failures, 1);
                            tracing::warn!(
                                segment = %segment.path.display(),
                                attempt,
                                error = %e,
                                "uploading a sealed segment failed; it stays on local disk and will be retried"
                            );
                            Event::UploadFailed {
                                op,
                                jitter: rand::random::<f64>(),
                            }
                        }
                    };
                    let _ = tx.send(Msg::Engine(event));
                });
            }
            Action::Commit { op, entry, .. }
                if self
                    .config
                    .pack
                    .as_ref()
                    .is_some_and(|p| pack::too_old_to_commit(&entry, p.grace)) =>
            {
                tracing::warn!(key = %entry.key, "a packed upload waited too long for its commit; uploading the segment again");
                let _ = self.tx.send(Msg::Engine(Event::CommitStale { op }));
            }
            Action::Commit {
                op,
                partition,
                entry,
                attempt,
            } => {
                let manifest = Arc::clone(&self.manifest);
                let metrics = Arc::clone(&self.metrics);
                let tx = self.tx.clone();
                let deadline = self.config.manifest_timeout;
                self.tasks.spawn(async move {
                    let result =
                        tokio::time::timeout(deadline, manifest.commit(partition, entry.clone()))
                            .await;
                    let msg = match result {
                        Ok(Ok(())) => Msg::Committed {
                            op,
                            partition,
                            entry,
                        },
                        failed => {
                            add(&metrics.commit_failures, 1);
                            let reason = match failed {
                                Ok(Err(e)) => e.to_string(),
                                _ => format!("no answer within {} s", deadline.as_secs()),
                            };
                            tracing::warn!(key = %entry.key, attempt, error = %reason, "committing a tiered segment failed; will retry");
                            // another agent may have committed these offsets
                            let _ = tx.send(Msg::Refresh(partition));
                            Msg::Engine(Event::CommitFailed {
                                op,
                                jitter: rand::random::<f64>(),
                            })
                        }
                    };
                    let _ = tx.send(msg);
                });
            }
            Action::Deletable {
                partition,
                deletable_below,
            } => {
                if let Some(shared) = self.core.registry.lock().get(&partition) {
                    shared.set_deletable_below(deletable_below);
                }
            }
            Action::Reupload {
                op,
                partition,
                segment,
                generation,
                attempt,
            } => {
                let Some(shared) = self.core.registry.lock().get(&partition).cloned() else {
                    let _ = self.tx.send(Msg::Engine(Event::ReuploadSkipped { op }));
                    return;
                };
                let store = self.store.clone();
                let config = self.config.clone();
                let metrics = Arc::clone(&self.metrics);
                let tx = self.tx.clone();
                let own_uploads = Arc::clone(&self.own_uploads);
                self.tasks.spawn(async move {
                    // Compacted copies go up as their own objects too.
                    let _slot = own_uploads.acquire_owned().await;
                    let span = tracing::debug_span!(
                        target: "aerostream_otel",
                        "reupload",
                        topic_id = %partition.topic_id,
                        partition = partition.partition,
                        base_offset = segment.base_offset,
                        bytes = i64::try_from(segment.size).unwrap_or(i64::MAX),
                    );
                    let Some(old) = super::manifest::replaced_by(
                        &shared.manifest(),
                        segment.base_offset,
                        segment.last_offset,
                        segment.size,
                    ) else {
                        let _ = tx.send(Msg::Engine(Event::ReuploadSkipped { op }));
                        return;
                    };
                    let uploaded =
                        upload_compacted(&store, partition, &segment, &old, generation, &config)
                            .instrument(span)
                            .await;
                    let event = match uploaded {
                        Ok((entry, bytes, objects)) => {
                            add(&metrics.uploaded_bytes, bytes);
                            add(&metrics.uploaded_objects, objects);
                            Event::ReuploadDone { op, old, entry }
                        }
                        Err(e) => {
                            add(&metrics.reupload_failures, 1);
                            tracing::warn!(
                                segment = %segment.path.display(),
                                attempt,
                                error = %e,
                                "uploading a compacted segment failed; the tiered copy stays as it is and the upload will be retried"
                            );
                            Event::ReuploadFailed {
                                op,
                                jitter: rand::random::<f64>(),
                            }
                        }
                    };
                    let _ = tx.send(Msg::Engine(event));
                });
            }
            Action::Replace {
                op,
                partition,
                old,
                entry,
                attempt,
            } => {
                let manifest = Arc::clone(&self.manifest);
                let metrics = Arc::clone(&self.metrics);
                let tx = self.tx.clone();
                let deadline = self.config.manifest_timeout;
                self.tasks.spawn(async move {
                    let old_keys: Vec<String> = old.iter().map(|e| e.key.clone()).collect();
                    let result = tokio::time::timeout(
                        deadline,
                        manifest.replace(partition, &old_keys, entry.clone()),
                    )
                    .await;
                    let msgs = match result {
                        Ok(Ok(())) => vec![Msg::Replaced {
                            op,
                            partition,
                            old,
                            entry,
                        }],
                        failed => {
                            add(&metrics.reupload_failures, 1);
                            let (reason, retriable) = match failed {
                                Ok(Err(e)) => (e.to_string(), e.retriable),
                                _ => (format!("no answer within {} s", deadline.as_secs()), true),
                            };
                            tracing::warn!(old = ?old_keys, new = %entry.key, attempt, retriable, error = %reason, "replacing a tiered segment by its compacted copy failed");
                            let failed = Msg::Engine(Event::ReplaceFailed {
                                op,
                                jitter: rand::random::<f64>(),
                                retriable,
                            });
                            if retriable {
                                vec![failed]
                            } else {
                                // never recorded: the copy's objects go
                                vec![Msg::Expire(entry), failed]
                            }
                        }
                    };
                    for msg in msgs {
                        let _ = tx.send(msg);
                    }
                });
            }
            Action::Released {
                partition,
                registration,
                base_offset,
            } => {
                if let Some(shared) = self.core.registry.lock().get(&partition) {
                    if shared.registration() == registration {
                        shared.release_reupload(base_offset);
                    }
                }
            }
            Action::Discard { entry, .. } => self.expire_later(entry),
        }
    }

    fn deleter(&self) -> ObjectDeleter {
        ObjectDeleter {
            store: self.store.clone(),
            metrics: Arc::clone(&self.metrics),
            cache: self.cache.clone(),
            mode: self.config.delete_mode,
            failed: Arc::clone(&self.failed_deletes),
            upload_times: Arc::clone(&self.upload_times),
        }
    }

    /// Starts the uploads of the packs that are due.
    fn start_packs(&mut self) {
        let Some(packer) = &mut self.packer else {
            return;
        };
        while let Some(members) = packer.take(Instant::now()) {
            let store = self.store.clone();
            let metrics = Arc::clone(&self.metrics);
            let tx = self.tx.clone();
            let (timeout, rate) = (
                self.config.upload_timeout,
                self.config.min_upload_bytes_per_sec,
            );
            self.tasks.spawn(async move {
                let uploaded = pack::upload(&store, &members, timeout, rate).await;
                let events = match uploaded {
                    Ok((entries, bytes)) => {
                        add(&metrics.uploaded_bytes, bytes);
                        add(&metrics.uploaded_objects, 1);
                        add(&metrics.uploaded_segments, entries.len() as u64);
                        members
                            .iter()
                            .zip(entries)
                            .map(|(m, entry)| Event::UploadDone { op: m.op, entry })
                            .collect()
                    }
                    Err(e) => {
                        add(&metrics.upload_failures, members.len() as u64);
                        tracing::warn!(
                            segments = members.len(),
                            attempt = members.iter().map(|m| m.attempt).max().unwrap_or(0),
                            error = %e,
                            "uploading a pack of sealed segments failed; they stay on local disk and will be retried"
                        );
                        members
                            .iter()
                            .map(|m| Event::UploadFailed {
                                op: m.op,
                                jitter: rand::random::<f64>(),
                            })
                            .collect()
                    }
                };
                let _ = tx.send(Msg::Packed(events));
            });
        }
    }

    /// Lists the packed objects and deletes those no entry reads from, at
    /// most once per `sweep_interval`. With packing off this still runs
    /// (at the default pace): write-ahead objects of topics durable in
    /// object storage (`wal.rs`) live there too.
    fn start_sweep(&mut self) {
        let default = PackConfig::default();
        let config = self.config.pack.as_ref().unwrap_or(&default);
        if self.sweep.as_ref().is_some_and(|s| !s.is_finished())
            || self.last_sweep.elapsed() < config.sweep_interval
        {
            return;
        }
        self.last_sweep = Instant::now();
        let deleter = self.deleter();
        let manifest = Arc::clone(&self.manifest);
        let grace = config.grace;
        self.sweep = Some(tokio::spawn(async move {
            match pack::sweep(&deleter, manifest.as_ref(), grace).await {
                Ok(Some(deleted)) if deleted > 0 => {
                    tracing::info!(
                        deleted,
                        "deleted packed objects no tiered segment reads from any more"
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "sweeping unreferenced packed objects failed; the next sweep retries")
                }
            }
        }));
    }

    fn start_retention(&mut self) {
        if self.retention.as_ref().is_some_and(|r| !r.is_finished()) {
            return;
        }
        let pass = RetentionPass {
            deleter: self.deleter(),
            manifest: Arc::clone(&self.manifest),
            partitions: self.core.registry.lock().values().cloned().collect(),
            deadline: self.config.manifest_timeout,
        };
        self.retention = Some(tokio::spawn(pass.run()));
    }

    /// A compacted copy is in the manifest: cold readers find it from now
    /// on, and the old objects go after the grace period. Done whether or
    /// not the engine still knows the operation: the manifest changed.
    fn replaced(&mut self, partition: PartitionKey, old: Vec<TieredSegment>, entry: TieredSegment) {
        let bytes_before: u64 = old.iter().map(|e| e.size).sum();
        add(&self.metrics.replaced_segments, old.len() as u64);
        add(
            &self.metrics.compacted_bytes_removed,
            bytes_before.saturating_sub(entry.size),
        );
        let old_keys: Vec<&str> = old.iter().map(|e| e.key.as_str()).collect();
        tracing::debug!(
            old = ?old_keys,
            new = %entry.key,
            bytes_before,
            bytes_after = entry.size,
            "a compacted copy replaced tiered segments"
        );
        if let Some(shared) = self.core.registry.lock().get(&partition) {
            shared.swap_entries(&old_keys, entry);
        }
        for e in old {
            self.expire_later(e);
        }
    }

    /// Deletes an entry's objects once `compaction_grace` has passed (its
    /// entry left the manifest, or never made it there). If the process
    /// stops first they stay as orphans (see docs/tiering.md).
    fn expire_later(&mut self, entry: TieredSegment) {
        let deleter = self.deleter();
        let grace = self.config.compaction_grace;
        self.tasks.spawn(async move {
            tokio::time::sleep(grace).await;
            deleter.delete_segment(&entry).await;
        });
    }
}

/// Uploads a sealed segment's objects (data, indexes, aborted transactions, producer snapshot
/// when it has one); returns its manifest entry, the bytes and objects sent.
async fn upload_segment(
    store: &ObjectStoreHandle,
    partition: PartitionKey,
    seg: &SealedSegment,
    config: &TierConfig,
) -> Result<(TieredSegment, u64, u64), TierError> {
    let id = SegmentId::new(
        partition.topic_id,
        partition.partition,
        seg.base_offset,
        seg.last_offset,
    )?;
    let prefix = &store.prefix;
    let (idx, tix, data, producers, aborted) = tokio::try_join!(
        upload_one(
            store,
            id.index_key(prefix),
            &seg.offset_index_path,
            config,
            None
        ),
        upload_one(
            store,
            id.time_index_key(prefix),
            &seg.time_index_path,
            config,
            None
        ),
        upload_one(
            store,
            id.segment_key(prefix),
            &seg.path,
            config,
            seg.crc32c.map(|crc32c| KnownBytes {
                size: seg.size,
                crc32c
            })
        ),
        producers::upload(
            store,
            id.producer_snapshot_key(prefix),
            seg,
            config.upload_timeout
        ),
        super::txn_index::upload(store, id.txn_index_key(prefix), seg, config.upload_timeout),
    )?;
    if data.size != seg.size {
        return Err(TierError::CorruptObject {
            key: data.key.to_string(),
            position: data.size,
            reason: format!(
                "the sealed segment {} held {} bytes while sealed but {} were uploaded",
                seg.path.display(),
                seg.size,
                data.size
            ),
        });
    }
    let entry = TieredSegment {
        key: data.key.to_string(),
        base_offset: seg.base_offset,
        last_offset: seg.last_offset,
        first_timestamp: seg.first_timestamp,
        max_timestamp: seg.max_timestamp,
        size: data.size,
        checksum: data.crc32c,
        index_size: idx.size,
        time_index_size: tix.size,
        served_from: None,
        pack: None,
    };
    let objects = 3 + u64::from(producers > 0) + u64::from(aborted > 0);
    Ok((
        entry,
        idx.size + tix.size + data.size + producers + aborted,
        objects,
    ))
}

/// Uploads a compacted segment's objects under the keys of a generation
/// above `old`'s (at least `generation`): the data and its indexes from
/// the local files; the producer snapshot copied from the last old entry's
/// (compaction keeps the producers' state at the segment's end), and the
/// aborted-transaction index copied from the old entry's, or, for a
/// segment merged from several, uploaded from the local index of the
/// merged segment (compaction keeps every transaction marker). Returns the
/// new entry (serving the same offsets as `old` together), the bytes and
/// objects sent.
async fn upload_compacted(
    store: &ObjectStoreHandle,
    partition: PartitionKey,
    seg: &SealedSegment,
    old: &[TieredSegment],
    generation: u64,
    config: &TierConfig,
) -> Result<(TieredSegment, u64, u64), TierError> {
    let (Some(first), Some(last)) = (old.first(), old.last()) else {
        return Err(TierError::CorruptObject {
            key: seg.path.display().to_string(),
            position: 0,
            reason: "a compacted segment replaces no tiered entry".into(),
        });
    };
    let previous = old
        .iter()
        .filter_map(|e| cache::layout::generation_of(&e.key))
        .max()
        .unwrap_or(0);
    let generation = generation.max(previous.saturating_add(1));
    let id = SegmentId::new(
        partition.topic_id,
        partition.partition,
        seg.base_offset,
        seg.last_offset,
    )?
    .with_generation(generation);
    let prefix = &store.prefix;
    let (idx, tix, data, producers, aborted) = tokio::try_join!(
        upload_one(
            store,
            id.index_key(prefix),
            &seg.offset_index_path,
            config,
            None
        ),
        upload_one(
            store,
            id.time_index_key(prefix),
            &seg.time_index_path,
            config,
            None
        ),
        upload_one(
            store,
            id.segment_key(prefix),
            &seg.path,
            config,
            seg.crc32c.map(|crc32c| KnownBytes {
                size: seg.size,
                crc32c
            })
        ),
        copy_sidecar(
            store,
            last,
            cache::layout::ObjectKind::ProducerSnapshot,
            id.producer_snapshot_key(prefix),
            config
        ),
        async {
            if old.len() == 1 {
                copy_sidecar(
                    store,
                    first,
                    cache::layout::ObjectKind::TxnIndex,
                    id.txn_index_key(prefix),
                    config,
                )
                .await
            } else {
                super::txn_index::upload(
                    store,
                    id.txn_index_key(prefix),
                    seg,
                    config.upload_timeout,
                )
                .await
                .map(|bytes| bytes > 0)
            }
        },
    )?;
    if data.size != seg.size {
        return Err(TierError::CorruptObject {
            key: data.key.to_string(),
            position: data.size,
            reason: format!(
                "the compacted segment {} held {} bytes when installed but {} were uploaded",
                seg.path.display(),
                seg.size,
                data.size
            ),
        });
    }
    let entry = TieredSegment {
        key: data.key.to_string(),
        base_offset: seg.base_offset,
        last_offset: seg.last_offset,
        // a segment that lost every batch has no timestamps of its own:
        // it keeps the old ones, so retention by time goes on as before
        first_timestamp: if seg.first_timestamp >= 0 {
            seg.first_timestamp
        } else {
            first.first_timestamp
        },
        max_timestamp: if seg.max_timestamp >= 0 {
            seg.max_timestamp
        } else {
            old.iter().map(|e| e.max_timestamp).max().unwrap_or(-1)
        },
        size: data.size,
        checksum: data.crc32c,
        index_size: idx.size,
        time_index_size: tix.size,
        served_from: None,
        pack: None,
    };
    let objects = 3 + u64::from(producers) + u64::from(aborted);
    Ok((entry, idx.size + tix.size + data.size, objects))
}

/// Copies an optional sibling object of `old_seg_key` to `to`; whether
/// there was one.
/// Copies an old entry's optional object of `kind` to `to`: a server-side
/// copy of its own object, or, when it lies in a packed object, its range
/// read and put. Whether there was one.
async fn copy_sidecar(
    store: &ObjectStoreHandle,
    old: &TieredSegment,
    kind: cache::layout::ObjectKind,
    to: Path,
    config: &TierConfig,
) -> Result<bool, TierError> {
    if old.pack.is_some() {
        let place = old.place(kind);
        let Some(bytes) = super::sidecar::get_placed(store, &place, config.upload_timeout).await?
        else {
            return Ok(false);
        };
        super::sidecar::put(store, &to, bytes.to_vec(), config.upload_timeout).await?;
        return Ok(true);
    }
    let from_key = old.place(kind).key;
    let from = Path::parse(&from_key).map_err(|e| TierError::CorruptObject {
        key: from_key.clone(),
        position: 0,
        reason: format!("the manifest holds an unusable key: {e}"),
    })?;
    let copied = tokio::time::timeout(config.upload_timeout, store.store.copy(&from, &to)).await;
    match copied {
        Ok(Ok(())) => Ok(true),
        Ok(Err(cache::object_store::Error::NotFound { .. })) => Ok(false),
        Ok(Err(e)) => Err(TierError::Objects(cache::CacheError::Store {
            key: to.to_string(),
            source: Arc::new(e),
        })),
        Err(_) => Err(TierError::Timeout {
            what: format!("copy of {from} to {to}"),
            seconds: config.upload_timeout.as_secs(),
        }),
    }
}

async fn upload_one(
    store: &ObjectStoreHandle,
    key: Path,
    file: &std::path::Path,
    config: &TierConfig,
    known: Option<KnownBytes>,
) -> Result<Uploaded, TierError> {
    let size = tokio::fs::metadata(file).await.map_or(0, |m| m.len());
    let deadline =
        config.upload_timeout + Duration::from_secs(size / config.min_upload_bytes_per_sec.max(1));
    match tokio::time::timeout(
        deadline,
        link_or_upload_file(store, &key, file, &config.upload, known),
    )
    .await
    {
        Ok(uploaded) => Ok(uploaded?),
        Err(_) => Err(TierError::Timeout {
            what: format!("upload of {key}"),
            seconds: deadline.as_secs(),
        }),
    }
}
