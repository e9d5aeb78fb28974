//! Which partitions are open on this node, which shard owns each, and the
//! rules for opening and closing their logs (see the module docs of
//! `partition`).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use storage::tier::PartitionKey;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, watch, Notify, OnceCell};
use uuid::Uuid;

use super::handle::PartitionHandle;
#[cfg(test)]
use super::task::SyncGate;
use super::task::{run, Role, Task};
use super::PartitionCounters;
use crate::backend::{LogError, LogFactory, LogSettings, OpenedLog};
use crate::telemetry::stats::PartitionStats;

/// Depth of each partition task's request queue.
const QUEUE_DEPTH: usize = 256;

/// Which partitions are open, and whether new ones may open.
#[derive(Default)]
struct Registry {
    open: HashMap<PartitionKey, Arc<OnceCell<PartitionHandle>>>,
    /// Shutdown has begun: nothing opens any more.
    closing: bool,
    /// Topics being deleted: their partitions do not open.
    deleting: HashSet<Uuid>,
    /// Replicas moved away from this node and being removed: they do not open.
    removing: HashSet<PartitionKey>,
    /// Opens running on blocking threads now.
    opening: usize,
}

/// The set of open partitions and the shards that own them.
pub struct Partitions {
    shards: Vec<Handle>,
    factory: Arc<dyn LogFactory>,
    registry: Mutex<Registry>,
    /// Woken when no open is running any more.
    idle: Notify,
    counters: Arc<PartitionCounters>,
    /// Part of a cluster: a log opens unassigned (refusing writes) until the
    /// replica manager says whether this node leads or follows it.
    clustered: std::sync::atomic::AtomicBool,
    /// Told of every partition opened, so leadership is assigned at once.
    opened: Mutex<Option<mpsc::UnboundedSender<PartitionKey>>>,
    /// Where partitions durable in object storage send what they append.
    wal: Mutex<Option<storage::tier::wal::WalWriter>>,
    /// Held durability points of logs opened from now on (tests only).
    #[cfg(test)]
    sync_gate: Mutex<Option<Arc<SyncGate>>>,
}

/// Counts an open running on a blocking thread, until dropped.
struct OpeningGuard<'a>(&'a Partitions);

impl Drop for OpeningGuard<'_> {
    fn drop(&mut self) {
        let mut r = self.0.lock();
        r.opening -= 1;
        if r.opening == 0 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Partitions {
    pub fn new(shards: Vec<Handle>, factory: Arc<dyn LogFactory>) -> Self {
        Partitions {
            shards,
            factory,
            registry: Mutex::new(Registry::default()),
            idle: Notify::new(),
            counters: Arc::new(PartitionCounters::default()),
            clustered: std::sync::atomic::AtomicBool::new(false),
            opened: Mutex::new(None),
            wal: Mutex::new(None),
            #[cfg(test)]
            sync_gate: Mutex::new(None),
        }
    }

    /// Partitions open from now on wait for the replica manager to assign
    /// their role; `opened` hears of each one.
    pub fn join_cluster(&self, opened: mpsc::UnboundedSender<PartitionKey>) {
        self.clustered.store(true, Ordering::SeqCst);
        *self.opened.lock().unwrap_or_else(|p| p.into_inner()) = Some(opened);
    }

    /// Partitions of topics durable in object storage opened from now on
    /// write through `writer` (see `storage::tier::wal`).
    pub fn set_wal_writer(&self, writer: storage::tier::wal::WalWriter) {
        *self.wal.lock().unwrap_or_else(|p| p.into_inner()) = Some(writer);
    }

    /// The agent's write-ahead writer, if it has one.
    pub fn wal_writer(&self) -> Option<storage::tier::wal::WalWriter> {
        self.wal.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The task of a partition already open here, if any.
    pub fn get_open(&self, key: PartitionKey) -> Option<PartitionHandle> {
        self.lock()
            .open
            .get(&key)
            .and_then(|c| c.get().cloned())
            .filter(|h| !h.is_closed())
    }

    /// Every partition open here.
    pub fn open_keys(&self) -> Vec<PartitionKey> {
        self.lock()
            .open
            .iter()
            .filter(|(_, c)| c.get().is_some_and(|h| !h.is_closed()))
            .map(|(k, _)| *k)
            .collect()
    }

    /// The handles of every partition open here.
    pub fn open_handles(&self) -> Vec<PartitionHandle> {
        self.lock()
            .open
            .values()
            .filter_map(|c| c.get().filter(|h| !h.is_closed()).cloned())
            .collect()
    }

    /// Holds the durability points of logs opened from now on until the
    /// returned gate is released.
    #[cfg(test)]
    pub(crate) fn hold_syncs(&self) -> Arc<SyncGate> {
        let gate = Arc::new(SyncGate::default());
        *self.sync_gate.lock().unwrap_or_else(|p| p.into_inner()) = Some(gate.clone());
        gate
    }

    pub fn counters(&self) -> &PartitionCounters {
        &self.counters
    }

    /// The counters, to keep beyond a borrow of this registry.
    pub fn shared_counters(&self) -> Arc<PartitionCounters> {
        self.counters.clone()
    }

    /// The shard that owns a partition.
    pub fn shard_of(&self, topic_id: Uuid, partition: i32) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (topic_id, partition).hash(&mut h);
        (h.finish() % self.shards.len().max(1) as u64) as usize
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The partition's task, opening its log on first use. `settings` is
    /// called only when the log must be opened.
    pub async fn get_or_open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: impl FnOnce() -> LogSettings,
    ) -> Result<PartitionHandle, LogError> {
        let key = PartitionKey::new(topic_id, partition);
        let cell = {
            let mut r = self.lock();
            if r.closing {
                return Err(LogError::NotServing("the broker is shutting down"));
            }
            if r.deleting.contains(&topic_id) {
                return Err(LogError::NotServing("the topic is being deleted"));
            }
            if r.removing.contains(&key) {
                return Err(LogError::NotServing("the replica moved to other agents"));
            }
            let cell = r.open.entry(key).or_default();
            match cell.get() {
                Some(h) if !h.is_closed() => return Ok(h.clone()),
                // The task stopped (its log failed to close or panicked): open afresh.
                Some(_) => {
                    *cell = Arc::default();
                    cell.clone()
                }
                None => cell.clone(),
            }
        };
        let h = cell
            .get_or_try_init(|| self.open(topic, key, settings()))
            .await?;
        Ok(h.clone())
    }

    async fn open(
        &self,
        topic: &str,
        key: PartitionKey,
        settings: LogSettings,
    ) -> Result<PartitionHandle, LogError> {
        {
            let mut r = self.lock();
            if r.closing {
                return Err(LogError::NotServing("the broker is shutting down"));
            }
            if r.deleting.contains(&key.topic_id) {
                return Err(LogError::NotServing("the topic is being deleted"));
            }
            if r.removing.contains(&key) {
                return Err(LogError::NotServing("the replica moved to other agents"));
            }
            r.opening += 1;
        }
        let _opening = OpeningGuard(self);
        let factory = self.factory.clone();
        let topic_name = topic.to_string();
        let write_caching = settings.write_caching;
        let object_store_durable = settings.object_store_durable;
        let opened = tokio::task::spawn_blocking(move || {
            factory.open(&topic_name, key.topic_id, key.partition, &settings)
        })
        .await
        .map_err(|_| LogError::NotServing("opening the log panicked"))??;
        self.counters.opens.fetch_add(1, Ordering::Relaxed);
        let refused = {
            let r = self.lock();
            if r.closing {
                Some("the broker is shutting down")
            } else if r.deleting.contains(&key.topic_id) {
                Some("the topic is being deleted")
            } else if r.removing.contains(&key) {
                Some("the replica moved to other agents")
            } else {
                None
            }
        };
        if let Some(reason) = refused {
            // Shutdown or a delete began while recovery ran: give the log back.
            let OpenedLog { log, .. } = opened;
            let _ = tokio::task::spawn_blocking(move || log.close()).await;
            return Err(LogError::NotServing(reason));
        }
        let OpenedLog { log, cold } = opened;
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let clustered = self.clustered.load(Ordering::SeqCst);
        let start = if clustered {
            // a replica's log may end past what its in-sync replicas hold:
            // the high watermark rises from the log start as the leader
            // learns where its followers are
            log.log_start_offset()
        } else if write_caching {
            log.log_end_offset()
        } else {
            log.flushed_offset().min(log.log_end_offset())
        };
        let (hw_tx, hw_rx) = watch::channel(start);
        let (end_tx, end_rx) = watch::channel(log.log_end_offset());
        let role = if clustered {
            Role::Unassigned
        } else {
            Role::Standalone
        };
        let stats = Arc::new(PartitionStats::new(topic));
        let task = Task::new(
            key,
            role,
            log,
            (hw_tx, end_tx),
            write_caching,
            self.counters.clone(),
        )
        .with_stats(stats.clone());
        let task = match (object_store_durable, self.wal_writer()) {
            (true, Some(writer)) => task.with_wal(writer),
            (true, None) => {
                tracing::warn!(topic, "the topic is durable in object storage, but this agent has no write-ahead writer: its writes are acknowledged as the log's own");
                task
            }
            (false, _) => task,
        };
        #[cfg(test)]
        let task = task.with_sync_gate(
            self.sync_gate
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        );
        let shard = self.shard_of(key.topic_id, key.partition);
        let handle = match self.shards.get(shard) {
            Some(h) => h.clone(),
            None => Handle::current(),
        };
        handle.spawn(run(task, rx));
        if let Some(opened) = self
            .opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            let _ = opened.send(key);
        }
        Ok(PartitionHandle {
            key,
            tx,
            hw: hw_rx,
            log_end: end_rx,
            cold,
            stats,
        })
    }

    /// Waits until no log is being opened.
    async fn wait_for_opens(&self) {
        loop {
            let idle = self.idle.notified();
            if self.lock().opening == 0 {
                return;
            }
            idle.await;
        }
    }

    fn take_open(&self, keep: impl Fn(&PartitionKey) -> bool) -> Vec<PartitionHandle> {
        let mut r = self.lock();
        let keys: Vec<PartitionKey> = r.open.keys().filter(|k| keep(k)).copied().collect();
        keys.into_iter()
            .filter_map(|k| r.open.remove(&k))
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }

    /// Closes a deleted topic's partitions and removes their local data. No
    /// partition of the topic opens while this runs, or after.
    pub async fn remove_topic(&self, topic: &str, topic_id: Uuid, partitions: i32) {
        self.lock().deleting.insert(topic_id);
        self.wait_for_opens().await;
        for h in self.take_open(|k| k.topic_id == topic_id) {
            if let Err(e) = h.close().await {
                tracing::warn!(topic, partition = h.key.partition, error = %e, "closing deleted partition failed");
            }
        }
        for p in 0..partitions {
            let factory = self.factory.clone();
            let name = topic.to_string();
            let removed =
                tokio::task::spawn_blocking(move || factory.remove(&name, topic_id, p)).await;
            match removed {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(topic, partition = p, error = %e, "removing deleted partition data failed")
                }
                Err(_) => {
                    tracing::warn!(
                        topic,
                        partition = p,
                        "removing deleted partition data panicked"
                    )
                }
            }
        }
    }

    /// Closes a replica reassigned away from this node and removes its local
    /// data (what is in object storage stays: the partition lives on
    /// elsewhere). It does not open while this runs, and may open again
    /// afterwards, should the partition come back.
    pub async fn remove_replica(&self, topic: &str, key: PartitionKey) {
        self.lock().removing.insert(key);
        self.wait_for_opens().await;
        for h in self.take_open(|k| *k == key) {
            if let Err(e) = h.close().await {
                tracing::warn!(topic, partition = key.partition, error = %e, "closing a moved replica failed");
            }
        }
        let factory = self.factory.clone();
        let name = topic.to_string();
        let removed =
            tokio::task::spawn_blocking(move || factory.remove(&name, key.topic_id, key.partition))
                .await;
        match removed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(topic, partition = key.partition, error = %e, "removing a moved replica's data failed")
            }
            Err(_) => tracing::warn!(
                topic,
                partition = key.partition,
                "removing a moved replica's data panicked"
            ),
        }
        self.lock().removing.remove(&key);
    }

    /// Pushes new settings to a topic's open partitions.
    pub async fn update_settings(&self, topic_id: Uuid, settings: &LogSettings) {
        let handles: Vec<PartitionHandle> = self
            .lock()
            .open
            .iter()
            .filter(|(k, _)| k.topic_id == topic_id)
            .filter_map(|(_, cell)| cell.get().cloned())
            .collect();
        for h in handles {
            let _ = h.set_settings(settings.clone()).await;
        }
    }

    /// Stops opening logs, waits for opens under way, then closes every
    /// partition (flush and clean-shutdown marker), all at once.
    pub async fn close_all(&self) {
        self.lock().closing = true;
        self.wait_for_opens().await;
        let all = self.take_open(|_| true);
        let closes = all.iter().map(|h| async move {
            match h.close().await {
                Ok(()) => {}
                Err(LogError::NotServing(_)) => {}
                Err(e) => {
                    tracing::error!(topic_id = %h.key.topic_id, partition = h.key.partition, error = %e, "closing partition failed")
                }
            }
        });
        futures::future::join_all(closes).await;
    }

    /// Number of open partitions.
    pub fn len(&self) -> usize {
        self.lock()
            .open
            .values()
            .filter(|c| c.get().is_some_and(|h| !h.is_closed()))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
