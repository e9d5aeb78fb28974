//! The replica manager: keeps every partition this node holds a replica of
//! in the role the metastore gives it.
//!
//! On every metastore change (and every quarter second, and whenever a
//! partition opens) it walks the partitions assigned to this node: it
//! opens their logs, tells each task whether it leads (with the replicas,
//! ISR, `min.insync.replicas` and `replica.lag.time.max.ms`) or follows (and
//! whom, at which epoch), and hands each followed partition to the fetcher
//! of its leader. It also records the ISR changes leaders propose
//! (`Metastore::alter_isr`, checked there against the leader epoch and the
//! partition epoch) and tells a leader when its proposal was refused, or
//! when its outcome is unknown (the leader then keeps counting it and
//! proposes it again, see `replica_set.rs`).
//!
//! A replica reassigned away from this node (its partition's replicas no
//! longer name it, which happens only once the replicas that replace it are
//! in sync) stops serving at once and is closed, its local data removed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use metastore::{AgentId, ClusterControl, Metastore, TopicInfo, Topics};
use storage::tier::PartitionKey;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::fetcher::{self, FetchSettings, Followed};
use super::replica_set::Assignment;
use super::service::{ReplicaService, ALPN};
use crate::partition::{IsrProposal, Leadership, Partitions, TaskId};
use crate::topic_config::{self, LogDefaults};

/// How replication behaves on this node.
#[derive(Debug, Clone, Copy)]
pub struct ReplicationSettings {
    /// A follower not caught up for this long leaves the ISR
    /// (`replica.lag.time.max.ms`).
    pub lag_max_ms: i64,
    pub fetch: FetchSettings,
}

impl Default for ReplicationSettings {
    fn default() -> ReplicationSettings {
        ReplicationSettings {
            lag_max_ms: 10_000,
            fetch: FetchSettings::default(),
        }
    }
}

/// Object-store-durable partitions rebuilt at once.
const REBUILDS_AT_ONCE: usize = 8;

/// What a task was last told.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Told {
    /// The assignment, `min.insync.replicas`, and the fenced replicas.
    Lead(Assignment, usize, Vec<AgentId>),
    Follow(AgentId, i32),
    Offline(i32),
}

/// The running manager; stops when dropped.
pub struct ReplicaManager {
    task: JoinHandle<()>,
}

impl Drop for ReplicaManager {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Manager {
    me: AgentId,
    meta: Metastore,
    partitions: Arc<Partitions>,
    log_defaults: LogDefaults,
    settings: ReplicationSettings,
    /// What each partition's task was last told, and which task that was
    /// (a log closed and opened again has a new task, told nothing yet).
    told: HashMap<PartitionKey, (Told, TaskId)>,
    fetchers: HashMap<AgentId, (watch::Sender<Vec<Followed>>, JoinHandle<()>)>,
    isr_tx: mpsc::UnboundedSender<IsrProposal>,
    /// Topics with a replica here, as last seen: (name, partitions).
    topics: HashMap<uuid::Uuid, (String, i32)>,
    /// The log settings last pushed to each topic's open partitions: a
    /// topic's configs altered through another agent reach this one's logs
    /// here (the agent that took the change pushes it to its own at once).
    applied: HashMap<uuid::Uuid, crate::backend::LogSettings>,
}

impl ReplicaManager {
    /// Serves followers' fetches on the cluster endpoint and starts keeping
    /// partitions in their roles. `meta` must have been started with the
    /// replication ALPN among its endpoint's service protocols.
    pub fn start(
        me: AgentId,
        meta: Metastore,
        partitions: Arc<Partitions>,
        log_defaults: LogDefaults,
        settings: ReplicationSettings,
    ) -> Result<ReplicaManager, metastore::MetaError> {
        meta.register_cluster_service(ALPN, ReplicaService::new(partitions.clone()))?;
        let (opened_tx, opened_rx) = mpsc::unbounded_channel();
        partitions.join_cluster(opened_tx);
        let (isr_tx, isr_rx) = mpsc::unbounded_channel();
        let m = Manager::new(me, meta, partitions, log_defaults, settings, isr_tx);
        Ok(ReplicaManager {
            task: tokio::spawn(m.run(opened_rx, isr_rx)),
        })
    }
}

impl Drop for Manager {
    /// Fetchers stop with the manager (they would otherwise fetch with the
    /// last set they were given until their partitions close).
    fn drop(&mut self) {
        for (_, (_, task)) in self.fetchers.drain() {
            task.abort();
        }
    }
}

impl Manager {
    fn new(
        me: AgentId,
        meta: Metastore,
        partitions: Arc<Partitions>,
        log_defaults: LogDefaults,
        settings: ReplicationSettings,
        isr_tx: mpsc::UnboundedSender<IsrProposal>,
    ) -> Manager {
        Manager {
            me,
            meta,
            partitions,
            log_defaults,
            settings,
            told: HashMap::new(),
            fetchers: HashMap::new(),
            isr_tx,
            topics: HashMap::new(),
            applied: HashMap::new(),
        }
    }

    async fn run(
        mut self,
        mut opened: mpsc::UnboundedReceiver<PartitionKey>,
        mut isr: mpsc::UnboundedReceiver<IsrProposal>,
    ) {
        let mut events = self.meta.subscribe();
        let mut ticker = tokio::time::interval(Duration::from_millis(250));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = events.recv() => {}
                _ = ticker.tick() => {}
                Some(key) = opened.recv() => self.on_opened(key),
                Some(p) = isr.recv() => {
                    self.record_isr(p);
                    continue;
                }
            }
            self.reconcile().await;
        }
    }

    /// A log opened (by this manager's last reconcile, or by a client's
    /// request): the reconcile that follows assigns its role at once.
    /// What an earlier task of the partition was told is forgotten (a
    /// fresh task knows nothing yet); what this very task was told stands,
    /// so one this manager already told to lead (and, durable in object
    /// storage, rebuilt) at the current leader epoch is not rebuilt again.
    /// The event of the reconcile that opened the log arrives after that
    /// reconcile told the task its role.
    fn on_opened(&mut self, key: PartitionKey) {
        let current = self.partitions.get_open(key).map(|h| h.task_id());
        if self
            .told
            .get(&key)
            .is_some_and(|(_, task)| Some(task) != current.as_ref())
        {
            self.told.remove(&key);
        }
    }

    fn record_isr(&self, p: IsrProposal) {
        let meta = self.meta.clone();
        let partitions = self.partitions.clone();
        let me = self.me;
        tokio::spawn(async move {
            let c = p.change;
            let res = meta
                .alter_isr(
                    p.key.topic_id,
                    p.key.partition,
                    (me, c.leader_epoch),
                    c.partition_epoch,
                    c.isr.clone(),
                )
                .await;
            match res {
                // the task learns the new ISR from the metadata, which has it now
                Ok(_) => tracing::info!(
                    topic_id = %p.key.topic_id,
                    partition = p.key.partition,
                    isr = ?c.isr,
                    "in-sync replicas changed"
                ),
                Err(e) => {
                    // after a timeout the change may still apply: the
                    // leader keeps counting it and proposes it again
                    let unknown = e.outcome_unknown();
                    tracing::info!(topic_id = %p.key.topic_id, partition = p.key.partition, error = %e, outcome_unknown = unknown, "ISR change not recorded");
                    if let Some(h) = partitions.get_open(p.key) {
                        let _ = h.isr_change_failed(c, unknown).await;
                    }
                }
            }
        });
    }

    async fn reconcile(&mut self) {
        let mut follow: HashMap<AgentId, Vec<Followed>> = HashMap::new();
        let topics = self.meta.topics();
        let fenced: std::collections::BTreeSet<AgentId> = self
            .meta
            .agents()
            .iter()
            .filter(|a| a.fenced)
            .map(|a| a.id)
            .collect();
        self.remove_deleted_topics(&topics);
        self.remove_moved_replicas(&topics).await;
        // object-store-durable partitions this node takes over: rebuilt
        // from object storage (all at once, below) before they lead
        let mut rebuilds = Vec::new();
        for topic in topics {
            let object_store = metastore::topic_config::object_store_durable(&topic.configs);
            if topic
                .partitions
                .iter()
                .any(|p| p.replicas.contains(&self.me))
            {
                let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
                self.topics.insert(topic.id, (topic.name.clone(), count));
                let settings = topic_config::log_settings(&topic.configs, &self.log_defaults);
                if self.applied.get(&topic.id) != Some(&settings) {
                    self.partitions.update_settings(topic.id, &settings).await;
                    self.applied.insert(topic.id, settings);
                }
            }
            for p in &topic.partitions {
                if !p.replicas.contains(&self.me) {
                    continue;
                }
                let key = PartitionKey::new(topic.id, p.index);
                let told = match p.leader {
                    // nobody copies from the leader: it is the only
                    // replica its acks and high watermark count
                    Some(l) if l == self.me && object_store => Told::Lead(
                        Assignment {
                            leader_epoch: p.leader_epoch,
                            partition_epoch: p.partition_epoch,
                            replicas: vec![self.me],
                            isr: vec![self.me],
                        },
                        1,
                        Vec::new(),
                    ),
                    Some(l) if l == self.me => Told::Lead(
                        Assignment {
                            leader_epoch: p.leader_epoch,
                            partition_epoch: p.partition_epoch,
                            replicas: p.replicas.clone(),
                            isr: p.isr.clone(),
                        },
                        topic_config::min_insync_replicas(&topic.configs),
                        p.replicas
                            .iter()
                            .copied()
                            .filter(|r| fenced.contains(r))
                            .collect(),
                    ),
                    Some(l) => Told::Follow(l, p.leader_epoch),
                    None => Told::Offline(p.leader_epoch),
                };
                let Some(handle) = self.open(&topic, p.index).await else {
                    continue;
                };
                // an object-store-durable partition's followers copy nothing
                let fetched = (!object_store).then_some(&told);
                if let Some(Told::Follow(l, epoch)) = fetched {
                    follow.entry(*l).or_default().push(Followed {
                        key,
                        leader_epoch: *epoch,
                        handle: handle.clone(),
                    });
                }
                // what this task (not an earlier one of the partition) was told
                let task = handle.task_id();
                let before = self
                    .told
                    .get(&key)
                    .filter(|(_, t)| *t == task)
                    .map(|(told, _)| told);
                if before == Some(&told) {
                    continue;
                }
                if let Told::Lead(a, ..) = &told {
                    // one rebuild per task and leader epoch: a task leading
                    // at this epoch already holds what object storage does
                    // and has taken writes since
                    let led_already = matches!(
                        before,
                        Some(Told::Lead(before, ..)) if before.leader_epoch == a.leader_epoch
                    );
                    if object_store && !led_already {
                        rebuilds.push((key, handle, told));
                        continue;
                    }
                }
                if self.tell(&handle, &told).await.is_ok() {
                    self.told.insert(key, (told, task));
                }
            }
        }
        self.update_fetchers(follow);
        self.rebuild_and_lead(rebuilds).await;
    }

    /// Tells a partition's task its role.
    async fn tell(
        &self,
        handle: &crate::partition::PartitionHandle,
        told: &Told,
    ) -> Result<(), crate::backend::LogError> {
        match told {
            Told::Lead(a, min_insync, ineligible) => {
                handle
                    .lead(Leadership {
                        me: self.me,
                        assignment: a.clone(),
                        min_insync: *min_insync,
                        lag_max_ms: self.settings.lag_max_ms,
                        ineligible: ineligible.clone(),
                        isr_requests: self.isr_tx.clone(),
                    })
                    .await
            }
            Told::Follow(l, epoch) => handle.follow(*l, *epoch).await,
            // nobody leads: refuse writes until someone does
            Told::Offline(epoch) => handle.follow(0, *epoch).await,
        }
    }

    /// Rebuilds object-store-durable partitions from object storage, a few
    /// at once, and tells each to lead once its log is rebuilt; one that
    /// fails is tried again at the next reconcile.
    async fn rebuild_and_lead(
        &mut self,
        rebuilds: Vec<(PartitionKey, crate::partition::PartitionHandle, Told)>,
    ) {
        if rebuilds.is_empty() {
            return;
        }
        let Some(writer) = self.partitions.wal_writer() else {
            tracing::warn!("partitions durable in object storage, but no write-ahead writer to rebuild them with");
            return;
        };
        let me = self.me;
        let meta = self.meta.clone();
        let done: Vec<_> = futures::stream::iter(rebuilds)
            .map(|(key, handle, told)| {
                let (meta, writer) = (meta.clone(), writer.clone());
                async move {
                    let epoch = match &told {
                        Told::Lead(a, ..) => a.leader_epoch,
                        Told::Follow(_, e) | Told::Offline(e) => *e,
                    };
                    let r = super::rebuild::rebuild(&meta, &writer, &handle, me, epoch).await;
                    (key, handle, told, r)
                }
            })
            .buffer_unordered(REBUILDS_AT_ONCE)
            .collect()
            .await;
        for (key, handle, told, result) in done {
            match result {
                Ok(_) => {
                    if self.tell(&handle, &told).await.is_ok() {
                        self.told.insert(key, (told, handle.task_id()));
                    }
                }
                Err(e) => {
                    tracing::warn!(topic_id = %key.topic_id, partition = key.partition, error = %e, "rebuilding the log from object storage failed; trying again");
                }
            }
        }
    }

    /// A topic deleted through another agent: close its replicas here and
    /// remove their local data (the agent that deleted it did the same).
    fn remove_deleted_topics(&mut self, current: &[std::sync::Arc<TopicInfo>]) {
        let gone: Vec<uuid::Uuid> = self
            .topics
            .keys()
            .filter(|id| !current.iter().any(|t| t.id == **id))
            .copied()
            .collect();
        for id in gone {
            let Some((name, partitions)) = self.topics.remove(&id) else {
                continue;
            };
            self.told.retain(|k, _| k.topic_id != id);
            self.applied.remove(&id);
            let registry = self.partitions.clone();
            tokio::spawn(async move {
                registry.remove_topic(&name, id, partitions).await;
                tracing::info!(topic = %name, "removed the local replicas of a deleted topic");
            });
        }
    }

    /// Replicas this node was told about whose partitions no longer name it.
    async fn remove_moved_replicas(&mut self, current: &[std::sync::Arc<TopicInfo>]) {
        let moved: Vec<(String, PartitionKey, i32)> = self
            .told
            .keys()
            .filter_map(|k| {
                let topic = current.iter().find(|t| t.id == k.topic_id)?;
                let p = topic.partition(k.partition)?;
                (!p.replicas.contains(&self.me)).then(|| (topic.name.clone(), *k, p.leader_epoch))
            })
            .collect();
        for (name, key, epoch) in moved {
            self.told.remove(&key);
            if let Some(h) = self.partitions.get_open(key) {
                // refuse writes and stop leading before the close gets there
                let _ = h.follow(0, epoch).await;
            }
            let registry = self.partitions.clone();
            tokio::spawn(async move {
                registry.remove_replica(&name, key).await;
                tracing::info!(topic = %name, partition = key.partition, "removed a replica moved to other agents");
            });
        }
    }

    async fn open(
        &self,
        topic: &TopicInfo,
        index: i32,
    ) -> Option<crate::partition::PartitionHandle> {
        let opened = self
            .partitions
            .get_or_open(&topic.name, topic.id, index, || {
                topic_config::log_settings(&topic.configs, &self.log_defaults)
            })
            .await;
        match opened {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::debug!(topic = %topic.name, partition = index, error = %e, "cannot open a replica's log");
                None
            }
        }
    }

    fn update_fetchers(&mut self, mut follow: HashMap<AgentId, Vec<Followed>>) {
        self.fetchers.retain(|leader, (tx, task)| {
            let keep = follow.contains_key(leader) && !task.is_finished();
            if !keep {
                task.abort();
            }
            let _ = tx;
            keep
        });
        for (leader, set) in follow.drain() {
            match self.fetchers.get(&leader) {
                Some((tx, _)) => {
                    tx.send_if_modified(|cur| {
                        if *cur == set {
                            false
                        } else {
                            *cur = set;
                            true
                        }
                    });
                }
                None => {
                    let (tx, rx) = watch::channel(set);
                    let task = tokio::spawn(fetcher::run(
                        self.me,
                        leader,
                        self.meta.clone(),
                        rx,
                        self.settings.fetch,
                        self.partitions.shared_counters(),
                    ));
                    self.fetchers.insert(leader, (tx, task));
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
