//! The cheap, cloneable handle through which handlers reach a partition's
//! task, and through which reads reach object storage below the local start.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use storage::tier::PartitionKey;
use tokio::sync::{mpsc, oneshot, watch};

use super::command::{
    Acks, Command, Cut, FetchedAt, FollowerFetch, FollowerFetchAnswer, Isolation, Leadership,
    OffsetQuery, ReadResult, ReplicaPosition, Reply, TaskRead,
};
use crate::backend::{Appended, ColdLog, LogError, LogSettings, Marker, Records, TimestampOffset};
use crate::partition::replication::replica_set::IsrChange;
use crate::telemetry::sampling::{sampled, SPAN_TARGET};
use crate::telemetry::stats::PartitionStats;
use tracing::Instrument;

/// Which task a [`PartitionHandle`] reaches: equal only for handles of
/// one task. Holding it keeps no task running.
#[derive(Clone)]
pub struct TaskId(watch::Receiver<i64>);

impl PartialEq for TaskId {
    fn eq(&self, other: &TaskId) -> bool {
        self.0.same_channel(&other.0)
    }
}

impl Eq for TaskId {}

impl std::fmt::Debug for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskId")
    }
}

/// A cheap handle to a partition task.
#[derive(Clone)]
pub struct PartitionHandle {
    pub(super) key: PartitionKey,
    pub(super) tx: mpsc::Sender<Command>,
    pub(super) hw: watch::Receiver<i64>,
    pub(super) log_end: watch::Receiver<i64>,
    pub(super) cold: Option<Arc<dyn ColdLog>>,
    pub(super) stats: Arc<PartitionStats>,
}

fn closed<T>(_: T) -> LogError {
    LogError::NotServing("the partition's task has stopped")
}

impl PartitionHandle {
    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, LogError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(closed)?;
        rx.await.map_err(closed)
    }

    pub fn key(&self) -> PartitionKey {
        self.key
    }

    /// The partition's traffic counters (shown on `/metrics`).
    pub fn stats(&self) -> &PartitionStats {
        &self.stats
    }

    /// Whether both handles reach the same task (a log closed and opened
    /// again has a new one).
    pub fn same_task(&self, other: &PartitionHandle) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// Names this handle's task without keeping it alive (a log closed
    /// and opened again has a new one).
    pub fn task_id(&self) -> TaskId {
        TaskId(self.hw.clone())
    }

    pub(super) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Appends batches; returns where they landed and the log start offset,
    /// once `acks` is satisfied.
    pub async fn append(
        &self,
        records: BytesMut,
        leader_epoch: i32,
        acks: Acks,
    ) -> Result<(Appended, i64), LogError> {
        self.append_checked(records, leader_epoch, acks, None, None)
            .await
    }

    /// [`PartitionHandle::append`] for a topic that validates schemas: the
    /// records' keys or values must carry ids of `schemas` (read from the
    /// registry once per batch by the caller), else the log refuses the
    /// batch with `StorageError::SchemaValidation`. A transactional batch
    /// carries `txn`, when its producer was verified: a marker for that
    /// producer written since refuses it with `StorageError::InvalidTxnState`
    /// (see [`super::TxnGuard`]).
    pub async fn append_checked(
        &self,
        records: BytesMut,
        leader_epoch: i32,
        acks: Acks,
        schemas: Option<Box<storage::SchemaRule>>,
        txn: Option<super::TxnGuard>,
    ) -> Result<(Appended, i64), LogError> {
        self.ask(|reply| Command::Append {
            records,
            leader_epoch,
            acks,
            schemas,
            txn,
            reply,
        })
        .await?
    }

    /// Whole batches from the one holding `offset`, across both tiers, up to
    /// the high watermark (the last stable offset for read_committed).
    /// `min_one`: the first batch comes whole even when larger than
    /// `max_bytes`; otherwise nothing larger than `max_bytes` comes.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        isolation: Isolation,
    ) -> Result<ReadResult, LogError> {
        let read = self
            .ask(|reply| Command::Read {
                offset,
                max_bytes,
                min_one,
                isolation,
                reply,
            })
            .await??;
        let (log_start, high_watermark, last_stable_offset, aborted) = match read {
            TaskRead::Local(r) => return Ok(r),
            TaskRead::Tiered {
                log_start,
                high_watermark,
                last_stable_offset,
                aborted,
            } => (log_start, high_watermark, last_stable_offset, aborted),
        };
        let out_of_range = || {
            LogError::Storage(storage::StorageError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: high_watermark,
            })
        };
        let cold = self.cold.as_ref().ok_or_else(out_of_range)?;
        let span = if sampled() {
            tracing::info_span!(
                target: SPAN_TARGET,
                "cold_read",
                topic = &*self.stats.topic,
                partition = self.key.partition,
                offset,
            )
        } else {
            tracing::Span::none()
        };
        match cold.read(offset, max_bytes).instrument(span).await? {
            Some(bytes) => {
                let records = if !min_one && bytes.len() > max_bytes {
                    Records::empty()
                } else {
                    Records::Bytes(bytes)
                };
                let mut aborted = aborted;
                if isolation == Isolation::ReadCommitted && !records.is_empty() {
                    // the local index may not hold those of segments tiered
                    // before this replica's log began: the uploaded ones do
                    for t in cold
                        .aborted_transactions(offset, last_stable_offset)
                        .await?
                    {
                        if !aborted.contains(&t) {
                            aborted.push(t);
                        }
                    }
                    aborted.sort_by_key(|t| t.first_offset);
                }
                Ok(ReadResult {
                    records,
                    high_watermark,
                    log_start_offset: log_start,
                    last_stable_offset,
                    aborted,
                })
            }
            // past the last batch of a compacted copy up to the end of
            // what object storage holds: the next records are local
            None => match cold.tiered_end() {
                Some(end) if end > offset => {
                    Box::pin(self.read(end, max_bytes, min_one, isolation)).await
                }
                _ => Err(out_of_range()),
            },
        }
    }

    /// Writes a transaction marker as the leader at `leader_epoch`; the
    /// marker's offset once the in-sync replicas hold it.
    pub async fn write_marker(&self, marker: Marker, leader_epoch: i32) -> Result<i64, LogError> {
        let (appended, _) = self
            .ask(|reply| Command::Marker {
                marker,
                leader_epoch,
                reply,
            })
            .await??;
        Ok(appended.base_offset)
    }

    /// A ListOffsets answer across both tiers.
    pub async fn offsets(&self, query: OffsetQuery) -> Result<Option<TimestampOffset>, LogError> {
        let a = self
            .ask(|reply| Command::Offsets { query, reply })
            .await??;
        let cold = match &self.cold {
            Some(c) if a.tiered_below_local => c,
            _ => return Ok(a.local),
        };
        match query {
            // The first match in offset order: nothing local can come before it.
            OffsetQuery::Timestamp(ts) => match cold.offset_for_timestamp(ts, a.log_start).await? {
                Some(found) => Ok(Some(found)),
                None => Ok(a.local),
            },
            OffsetQuery::MaxTimestamp => {
                let tiered = cold.max_timestamp(a.log_start).await?;
                Ok(storage::tier::latest_max_timestamp(tiered, a.local))
            }
            OffsetQuery::Earliest
            | OffsetQuery::EarliestLocal
            | OffsetQuery::Latest
            | OffsetQuery::LastStable
            | OffsetQuery::LatestTiered => Ok(a.local),
        }
    }

    /// (log start offset across tiers, high watermark).
    pub async fn bounds(&self) -> Result<(i64, i64), LogError> {
        self.ask(|reply| Command::Bounds { reply }).await
    }

    /// The high watermark, or the first offset of the oldest ongoing
    /// transaction if lower: what read_committed consumers may read up to.
    pub async fn last_stable(&self) -> Result<i64, LogError> {
        self.ask(|reply| Command::LastStable { reply }).await
    }

    /// The producers the partition remembers: id, epoch, last sequence and
    /// timestamp, and where an ongoing transaction starts (DescribeProducers).
    pub async fn producers(&self) -> Result<Vec<storage::ProducerSummary>, LogError> {
        self.ask(|reply| Command::Producers { reply }).await
    }

    /// Bytes of record data this replica holds on local disk.
    pub async fn local_bytes(&self) -> Result<u64, LogError> {
        self.ask(|reply| Command::LocalBytes { reply }).await
    }

    /// DeleteRecords: raises the log start to `offset` (at most the high
    /// watermark) and returns the new log start. With object storage behind
    /// the log, the floor is recorded in the metastore first.
    pub async fn delete_before(&self, offset: i64) -> Result<i64, LogError> {
        let (log_start, high_watermark) = self.bounds().await?;
        if offset > high_watermark {
            return Err(LogError::Storage(storage::StorageError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: high_watermark,
            }));
        }
        if let Some(cold) = &self.cold {
            if offset > log_start {
                cold.persist_log_start(offset).await?;
            }
        }
        self.ask(|reply| Command::DeleteBefore { offset, reply })
            .await?
    }

    pub async fn epoch_end(&self, epoch: i32) -> Result<Option<(i32, i64)>, LogError> {
        self.ask(|reply| Command::EpochEnd { epoch, reply }).await?
    }

    pub async fn set_settings(&self, settings: LogSettings) -> Result<(), LogError> {
        self.tx
            .send(Command::Settings(settings))
            .await
            .map_err(closed)
    }

    // ---- replication ---------------------------------------------------------

    /// This node leads the partition with these replicas.
    pub async fn lead(&self, leadership: Leadership) -> Result<(), LogError> {
        self.tx
            .send(Command::Lead(leadership))
            .await
            .map_err(closed)
    }

    /// Another agent leads the partition.
    pub async fn follow(&self, leader: u64, leader_epoch: i32) -> Result<(), LogError> {
        self.tx
            .send(Command::Follow {
                leader,
                leader_epoch,
            })
            .await
            .map_err(closed)
    }

    /// The metastore did not record the ISR change this leader proposed:
    /// it refused it, or (`outcome_unknown`) the answer was lost and the
    /// change may still apply, so the leader keeps counting it and
    /// proposes it again.
    pub async fn isr_change_failed(
        &self,
        change: IsrChange,
        outcome_unknown: bool,
    ) -> Result<(), LogError> {
        self.tx
            .send(Command::IsrChangeFailed {
                change,
                outcome_unknown,
            })
            .await
            .map_err(closed)
    }

    /// The leader's side of one partition of a follower's fetch.
    pub async fn follower_fetch(
        &self,
        fetch: FollowerFetch,
    ) -> Result<FollowerFetchAnswer, LogError> {
        self.ask(|reply| Command::FollowerFetch { fetch, reply })
            .await
    }

    /// A follower appends batches its leader sent in answer to a fetch
    /// made under `fetched`; refused unless that is still the follower's
    /// view (see `task::follower`).
    pub async fn replica_append(
        &self,
        fetched: FetchedAt,
        records: Bytes,
        leader_high_watermark: i64,
    ) -> Result<(), LogError> {
        self.ask(|reply| Command::ReplicaAppend {
            fetched,
            records,
            leader_high_watermark,
            reply,
        })
        .await?
    }

    /// A follower cuts its log at `offset`, as its leader's answer to a
    /// fetch made under `fetched` says; refused unless that is still the
    /// follower's view.
    pub async fn truncate(&self, fetched: FetchedAt, offset: i64) -> Result<(), LogError> {
        self.ask(|reply| Command::Truncate {
            fetched,
            cut: Cut::To(offset),
            reply,
        })
        .await?
    }

    /// A follower empties its log and restarts it at `at`, restoring the
    /// idempotent producer state of `producers` (a snapshot taken at `at`,
    /// from object storage) when given; refused unless `fetched` is still
    /// the follower's view.
    pub async fn restart(
        &self,
        fetched: FetchedAt,
        at: i64,
        producers: Option<Bytes>,
    ) -> Result<(), LogError> {
        self.ask(|reply| Command::Truncate {
            fetched,
            cut: Cut::Restart { at, producers },
            reply,
        })
        .await?
    }

    /// The producer snapshot uploaded with the tiered segment that ends
    /// right before `next_offset`, if object storage has one.
    pub async fn producer_snapshot(&self, next_offset: i64) -> Result<Option<Bytes>, LogError> {
        match &self.cold {
            Some(cold) => cold.producer_snapshot(next_offset).await,
            None => Ok(None),
        }
    }

    /// Where the local log ends and its newest epoch. A follower without
    /// write caching answers once its log end is durable: this is the
    /// offset its leader counts toward the high watermark.
    pub async fn position(&self) -> Result<ReplicaPosition, LogError> {
        self.ask(|reply| Command::Position { reply }).await?
    }

    /// A watch of the local log end; followers' fetches wait on it.
    pub fn log_end(&self) -> watch::Receiver<i64> {
        self.log_end.clone()
    }

    /// A watch of the high watermark; long-polling fetches wait on it.
    pub fn high_watermark(&self) -> watch::Receiver<i64> {
        self.hw.clone()
    }

    pub(super) async fn close(&self) -> Result<(), LogError> {
        self.ask(|reply| Command::Close { reply }).await?
    }
}
