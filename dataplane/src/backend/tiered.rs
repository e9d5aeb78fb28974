//! The production log backend: the `storage` crate's partition log wrapped in
//! a `TieredPartition`, so every partition seals to object storage, keeps only
//! `local.retention.*` locally, and honours the node's local disk limit.
//! Offsets below the local start are read through [`TierReader`], the
//! [`ColdLog`] this backend hands out with each log.

use bytes::Bytes;
use uuid::Uuid;

use storage::tier::{PartitionKey, Tier, TierRetention, TieredPartition};

use super::disk::{records, DiskLogFactory};
use super::{
    Appended, ColdLog, LocalRead, LogBackend, LogError, LogFactory, LogSettings, Marker, OpenedLog,
    TimestampOffset,
};

/// The retention of both tiers from a partition's settings.
pub fn retention(s: &LogSettings) -> TierRetention {
    TierRetention {
        retention_bytes: s.retention_bytes,
        retention_ms: s.retention_ms,
        local_retention_bytes: s.local_retention_bytes,
        local_retention_ms: s.local_retention_ms,
    }
}

/// A partition log on local disk that tiers to object storage.
pub struct TieredLog {
    p: TieredPartition,
}

impl LogBackend for TieredLog {
    fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
        schemas: Option<&storage::SchemaRule>,
    ) -> Result<Appended, LogError> {
        let outcome = self
            .p
            .append_checked(records, leader_epoch, now_ms, schemas)?;
        Ok(Appended::from_outcome(&outcome))
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        upper_bound: i64,
    ) -> Result<LocalRead, LogError> {
        let local_start = self.p.local_log_start_offset();
        if offset < local_start && offset >= self.p.log_start_offset() {
            return Ok(LocalRead::Tiered);
        }
        let slice = self.p.read(offset, max_bytes, upper_bound)?;
        Ok(LocalRead::Records(records(slice, max_bytes, min_one)))
    }

    fn append_marker(
        &mut self,
        m: Marker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        let info = self.p.append_marker(
            m.producer_id,
            m.producer_epoch,
            m.control,
            m.coordinator_epoch,
            leader_epoch,
            now_ms,
        )?;
        Ok(info.base_offset)
    }

    fn first_unstable_offset(&self) -> Option<i64> {
        self.p.log().first_unstable_offset()
    }

    fn producers(&self) -> Vec<storage::ProducerSummary> {
        self.p.log().producers()
    }

    fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<storage::AbortedTxn> {
        self.p.log().aborted_transactions(from, upto)
    }

    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<TimestampOffset>, LogError> {
        Ok(self.p.offset_for_timestamp(ts_ms)?)
    }

    fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.p.max_timestamp()
    }

    fn log_start_offset(&self) -> i64 {
        self.p.log_start_offset()
    }

    fn local_start_offset(&self) -> i64 {
        self.p.local_log_start_offset()
    }

    fn latest_tiered_offset(&self) -> Option<i64> {
        self.p.shared().tiered_last()
    }

    fn log_end_offset(&self) -> i64 {
        self.p.log_end_offset()
    }

    fn local_bytes(&self) -> u64 {
        self.p.log().size_bytes()
    }

    fn flushed_offset(&self) -> i64 {
        self.p.flushed_offset()
    }

    fn set_settings(&mut self, settings: &LogSettings) {
        if let Err(e) = self.p.set_config(settings.log_config()) {
            tracing::warn!(error = %e, "new topic settings were not applied to the log");
        }
        self.p.set_retention(retention(settings));
    }

    fn tick(&mut self, now_ms: i64) -> Result<(), LogError> {
        Ok(self.p.tick(now_ms)?)
    }

    fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        Ok(self.p.delete_records_before(offset)?)
    }

    fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)> {
        self.p.epoch_end_offset(epoch)
    }

    fn set_upload_limit(&mut self, limit: i64) {
        self.p.set_upload_limit(limit);
    }

    fn latest_epoch(&self) -> Option<i32> {
        self.p.log().latest_epoch()
    }

    fn append_replicated(&mut self, records: &[u8], now_ms: i64) -> Result<i64, LogError> {
        Ok(self.p.append_replicated(records, now_ms)?.log_end_offset)
    }

    fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        Ok(self.p.truncate_to(offset)?)
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        Ok(self.p.truncate_fully_and_start_at(offset)?)
    }

    fn restore_producers(&mut self, snapshot: &[u8]) -> Result<bool, LogError> {
        Ok(self.p.restore_producers(snapshot)?)
    }

    fn sync_point(&mut self) -> storage::SyncPoint {
        self.p.sync_point()
    }

    fn sync_done(&mut self, done: storage::SyncDone) -> Result<i64, LogError> {
        Ok(self.p.sync_done(done)?)
    }

    fn plan_compaction(&self, now_ms: i64, upper_bound: i64) -> Option<storage::CompactionJob> {
        self.p.plan_compaction(now_ms, upper_bound)
    }

    fn install_compaction(
        &mut self,
        done: storage::compaction::Compacted,
        now_ms: i64,
    ) -> Result<storage::CompactionReport, LogError> {
        Ok(self.p.install_compaction(done, now_ms)?)
    }

    fn cleaner_figures(&self) -> storage::CleanerFigures {
        self.p.log().cleaner_figures()
    }

    fn close(self: Box<Self>) -> Result<(), LogError> {
        Ok(self.p.close()?)
    }
}

/// Object-storage reads of one partition.
pub struct TierReader {
    tier: Tier,
    key: PartitionKey,
}

#[async_trait::async_trait]
impl ColdLog for TierReader {
    async fn read(&self, offset: i64, max_bytes: usize) -> Result<Option<Bytes>, LogError> {
        Ok(self
            .tier
            .read(self.key, offset, max_bytes)
            .await?
            .map(|r| r.bytes))
    }

    async fn offset_for_timestamp(
        &self,
        ts_ms: i64,
        log_start: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        Ok(self
            .tier
            .offset_for_timestamp(self.key, ts_ms, log_start)
            .await?)
    }

    async fn max_timestamp(&self, log_start: i64) -> Result<Option<TimestampOffset>, LogError> {
        Ok(self.tier.max_timestamp(self.key, log_start).await?)
    }

    fn tiered_end(&self) -> Option<i64> {
        self.tier.tiered_end(self.key)
    }

    async fn persist_log_start(&self, offset: i64) -> Result<(), LogError> {
        Ok(self.tier.persist_log_start(self.key, offset).await?)
    }

    async fn producer_snapshot(&self, next_offset: i64) -> Result<Option<Bytes>, LogError> {
        Ok(self.tier.producer_snapshot(self.key, next_offset).await?)
    }

    async fn aborted_transactions(
        &self,
        from: i64,
        upto: i64,
    ) -> Result<Vec<storage::AbortedTxn>, LogError> {
        Ok(self.tier.aborted_transactions(self.key, from, upto).await?)
    }
}

/// Opens [`TieredLog`]s: directories as [`DiskLogFactory`] lays them out,
/// each partition registered with the node's [`Tier`].
pub struct TieredLogFactory {
    disk: DiskLogFactory,
    tier: Tier,
}

impl TieredLogFactory {
    pub fn new(disk: DiskLogFactory, tier: Tier) -> Self {
        TieredLogFactory { disk, tier }
    }
}

impl LogFactory for TieredLogFactory {
    fn open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<OpenedLog, LogError> {
        let log = self
            .disk
            .open_storage(topic, topic_id, partition, settings)?;
        let key = PartitionKey::new(topic_id, partition);
        // a log that restarts at the tiered end (new, moved or lost) takes
        // the producer state uploaded there; this runs on a blocking thread
        let p = self
            .tier
            .open_partition_restoring(key, log, retention(settings))?;
        Ok(OpenedLog {
            log: Box::new(TieredLog { p }),
            cold: Some(std::sync::Arc::new(TierReader {
                tier: self.tier.clone(),
                key,
            })),
        })
    }

    /// Local files go now; objects go with the next retention pass, which
    /// works from the metastore's list of deleted topics (so a crash in
    /// between loses nothing but time).
    fn remove(&self, topic: &str, topic_id: Uuid, partition: i32) -> Result<(), LogError> {
        self.disk.remove(topic, topic_id, partition)?;
        self.tier.run_retention();
        Ok(())
    }
}
