//! Partition tasks: each partition's log is owned by one task on one shard,
//! picked by a hash of (topic id, partition). Everything that touches the log
//! goes through that task's bounded channel, so appends need no locks and a
//! flood of produce requests is slowed down by the channel, not queued without
//! bound.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

use crate::backend::{
    Appended, LogError, LogFactory, LogSettings, PartitionLog, Records, TimestampOffset,
};

/// Depth of each partition task's request queue.
const QUEUE_DEPTH: usize = 256;

/// Wall-clock milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What a fetch read returns, with the partition's offsets at that moment.
#[derive(Debug)]
pub struct ReadResult {
    pub records: Records,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// A ListOffsets question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    Earliest,
    Latest,
    MaxTimestamp,
    Timestamp(i64),
}

type Reply<T> = oneshot::Sender<T>;

enum Command {
    Append {
        records: BytesMut,
        leader_epoch: i32,
        reply: Reply<Result<(Appended, i64), LogError>>,
    },
    Read {
        offset: i64,
        max_bytes: usize,
        reply: Reply<Result<ReadResult, LogError>>,
    },
    Offsets {
        query: OffsetQuery,
        reply: Reply<Result<Option<TimestampOffset>, LogError>>,
    },
    Bounds {
        reply: Reply<(i64, i64)>,
    },
    DeleteBefore {
        offset: i64,
        reply: Reply<Result<i64, LogError>>,
    },
    EpochEnd {
        epoch: i32,
        reply: Reply<Option<(i32, i64)>>,
    },
    Settings(LogSettings),
    Close {
        reply: Reply<Result<(), LogError>>,
    },
}

/// Error when the partition task is gone (topic deleted or broker stopping).
#[derive(Debug, thiserror::Error)]
#[error("partition is closed")]
pub struct Closed;

/// A cheap handle to a partition task.
#[derive(Clone)]
pub struct PartitionHandle {
    tx: mpsc::Sender<Command>,
    end: watch::Receiver<i64>,
}

impl PartitionHandle {
    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, Closed> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(|_| Closed)?;
        rx.await.map_err(|_| Closed)
    }

    /// Appends batches; returns where they landed and the log start offset.
    pub async fn append(
        &self,
        records: BytesMut,
        leader_epoch: i32,
    ) -> Result<Result<(Appended, i64), LogError>, Closed> {
        self.ask(|reply| Command::Append {
            records,
            leader_epoch,
            reply,
        })
        .await
    }

    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<Result<ReadResult, LogError>, Closed> {
        self.ask(|reply| Command::Read {
            offset,
            max_bytes,
            reply,
        })
        .await
    }

    pub async fn offsets(
        &self,
        query: OffsetQuery,
    ) -> Result<Result<Option<TimestampOffset>, LogError>, Closed> {
        self.ask(|reply| Command::Offsets { query, reply }).await
    }

    /// (log start offset, high watermark).
    pub async fn bounds(&self) -> Result<(i64, i64), Closed> {
        self.ask(|reply| Command::Bounds { reply }).await
    }

    pub async fn delete_before(&self, offset: i64) -> Result<Result<i64, LogError>, Closed> {
        self.ask(|reply| Command::DeleteBefore { offset, reply })
            .await
    }

    pub async fn epoch_end(&self, epoch: i32) -> Result<Option<(i32, i64)>, Closed> {
        self.ask(|reply| Command::EpochEnd { epoch, reply }).await
    }

    pub async fn set_settings(&self, settings: LogSettings) -> Result<(), Closed> {
        self.tx
            .send(Command::Settings(settings))
            .await
            .map_err(|_| Closed)
    }

    /// A watch of the high watermark; long-polling fetches wait on it.
    pub fn high_watermark(&self) -> watch::Receiver<i64> {
        self.end.clone()
    }

    async fn close(&self) -> Result<Result<(), LogError>, Closed> {
        self.ask(|reply| Command::Close { reply }).await
    }
}

/// The task that owns one partition log.
async fn run(
    mut log: Box<dyn PartitionLog>,
    mut rx: mpsc::Receiver<Command>,
    hw: watch::Sender<i64>,
) {
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let cmd = tokio::select! {
            cmd = rx.recv() => cmd,
            _ = ticker.tick() => {
                if let Err(e) = log.tick(now_ms()) {
                    tracing::warn!(error = %e, "partition log timer work failed");
                }
                continue;
            }
        };
        let Some(cmd) = cmd else { break };
        match cmd {
            Command::Append {
                mut records,
                leader_epoch,
                reply,
            } => {
                let result = log
                    .append(&mut records, leader_epoch, now_ms())
                    .map(|a| (a, log.log_start_offset()));
                // Single node: the high watermark is the log end. Replication will
                // move this to the point the in-sync replicas have acknowledged.
                hw.send_replace(log.log_end_offset());
                let _ = reply.send(result);
            }
            Command::Read {
                offset,
                max_bytes,
                reply,
            } => {
                let high_watermark = *hw.borrow();
                let result =
                    log.read(offset, max_bytes, high_watermark)
                        .map(|records| ReadResult {
                            records,
                            high_watermark,
                            log_start_offset: log.log_start_offset(),
                        });
                let _ = reply.send(result);
            }
            Command::Offsets { query, reply } => {
                let result = match query {
                    OffsetQuery::Earliest => Ok(Some(TimestampOffset {
                        timestamp: -1,
                        offset: log.log_start_offset(),
                    })),
                    OffsetQuery::Latest => Ok(Some(TimestampOffset {
                        timestamp: -1,
                        offset: *hw.borrow(),
                    })),
                    OffsetQuery::MaxTimestamp => Ok(log.max_timestamp()),
                    OffsetQuery::Timestamp(ts) => log.offset_for_timestamp(ts),
                };
                let _ = reply.send(result);
            }
            Command::Bounds { reply } => {
                let _ = reply.send((log.log_start_offset(), *hw.borrow()));
            }
            Command::DeleteBefore { offset, reply } => {
                let _ = reply.send(log.delete_records_before(offset));
            }
            Command::EpochEnd { epoch, reply } => {
                let _ = reply.send(log.epoch_end_offset(epoch));
            }
            Command::Settings(s) => log.set_settings(&s),
            Command::Close { reply } => {
                let _ = reply.send(log.close());
                return;
            }
        }
    }
    if let Err(e) = log.close() {
        tracing::error!(error = %e, "closing partition log failed");
    }
}

/// Key of a partition: its topic id and index.
pub type PartitionKey = (Uuid, i32);

/// The set of open partitions and the shards that own them.
pub struct Partitions {
    shards: Vec<Handle>,
    factory: Arc<dyn LogFactory>,
    open: Mutex<HashMap<PartitionKey, PartitionHandle>>,
}

impl Partitions {
    pub fn new(shards: Vec<Handle>, factory: Arc<dyn LogFactory>) -> Self {
        Partitions {
            shards,
            factory,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The shard that owns a partition.
    pub fn shard_of(&self, topic_id: Uuid, partition: i32) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (topic_id, partition).hash(&mut h);
        (h.finish() % self.shards.len().max(1) as u64) as usize
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PartitionKey, PartitionHandle>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The partition's task, opening its log on first use.
    pub fn get_or_open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<PartitionHandle, LogError> {
        let mut open = self.lock();
        if let Some(h) = open.get(&(topic_id, partition)) {
            if !h.tx.is_closed() {
                return Ok(h.clone());
            }
        }
        let log = self.factory.open(topic, topic_id, partition, settings)?;
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let (hw_tx, hw_rx) = watch::channel(log.log_end_offset());
        let shard = self.shard_of(topic_id, partition);
        let handle = match self.shards.get(shard) {
            Some(h) => h.clone(),
            None => Handle::current(),
        };
        handle.spawn(run(log, rx, hw_tx));
        let h = PartitionHandle { tx, end: hw_rx };
        open.insert((topic_id, partition), h.clone());
        Ok(h)
    }

    /// Closes a deleted topic's partitions and removes their data.
    pub async fn remove_topic(&self, topic: &str, topic_id: Uuid, partitions: i32) {
        for p in 0..partitions {
            let h = self.lock().remove(&(topic_id, p));
            if let Some(h) = h {
                if let Ok(Err(e)) = h.close().await {
                    tracing::warn!(topic, partition = p, error = %e, "closing deleted partition failed");
                }
            }
            if let Err(e) = self.factory.remove(topic, topic_id, p) {
                tracing::warn!(topic, partition = p, error = %e, "removing deleted partition data failed");
            }
        }
    }

    /// Pushes new settings to a topic's open partitions.
    pub async fn update_settings(&self, topic_id: Uuid, settings: &LogSettings) {
        let handles: Vec<PartitionHandle> = self
            .lock()
            .iter()
            .filter(|((id, _), _)| *id == topic_id)
            .map(|(_, h)| h.clone())
            .collect();
        for h in handles {
            let _ = h.set_settings(settings.clone()).await;
        }
    }

    /// Closes every partition (flush and clean-shutdown marker).
    pub async fn close_all(&self) {
        let all: Vec<(PartitionKey, PartitionHandle)> = self.lock().drain().collect();
        for ((topic_id, p), h) in all {
            match h.close().await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(%topic_id, partition = p, error = %e, "closing partition failed")
                }
                Err(Closed) => {}
            }
        }
    }

    /// Number of open partitions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
