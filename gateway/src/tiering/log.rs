//! The tiered production log backend: the `storage` crate's partition log
//! wrapped in a [`TieredPartition`], so every partition seals to object
//! storage, keeps only `local.retention.*` locally, and honours the node's
//! local disk limit.

use tokio::sync::watch;
use uuid::Uuid;

use storage::tier::{PartitionKey, Tier, TierError, TierRetention, TieredPartition};

use crate::backend::disk::{
    appended, from_storage, log_config, records, timestamp_offset, DiskLogFactory,
};
use crate::backend::{
    Appended, LogError, LogFactory, LogSettings, PartitionLog, Records, TimestampOffset,
};

/// Translates a tiering error; exhaustive so new variants get a deliberate mapping.
pub fn from_tier(e: TierError) -> LogError {
    match e {
        TierError::Storage(s) => from_storage(s),
        // Retriable for clients (KAFKA_STORAGE_ERROR): producers retry, consumers refetch.
        TierError::Backpressure { .. }
        | TierError::Objects(_)
        | TierError::Manifest(_)
        | TierError::CorruptObject { .. }
        | TierError::Timeout { .. }
        | TierError::Stopped => LogError::Storage(e.to_string()),
    }
}

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

impl PartitionLog for TieredLog {
    fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Appended, LogError> {
        let outcome = self
            .p
            .append(records, leader_epoch, now_ms)
            .map_err(from_tier)?;
        Ok(appended(&outcome))
    }

    /// Local data only: offsets below the local start fail with
    /// `OffsetOutOfRange` carrying the local start, and the fetch path then
    /// reads them from object storage (see [`super::read`]).
    fn read(&self, offset: i64, max_bytes: usize, upper_bound: i64) -> Result<Records, LogError> {
        let slice = self
            .p
            .log()
            .read(offset, max_bytes, upper_bound)
            .map_err(from_storage)?;
        Ok(records(slice))
    }

    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<TimestampOffset>, LogError> {
        Ok(self
            .p
            .log()
            .offset_for_timestamp(ts_ms)
            .map_err(from_storage)?
            .map(timestamp_offset))
    }

    fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.p.log().max_timestamp().map(timestamp_offset)
    }

    /// Across both tiers.
    fn log_start_offset(&self) -> i64 {
        self.p.log_start_offset()
    }

    fn log_end_offset(&self) -> i64 {
        self.p.log_end_offset()
    }

    fn subscribe(&self) -> watch::Receiver<i64> {
        self.p.log().subscribe()
    }

    fn set_settings(&mut self, settings: &LogSettings) {
        if let Err(e) = self.p.log_mut().set_config(log_config(settings)) {
            tracing::warn!(error = %e, "new topic settings were not applied to the log");
        }
        self.p.set_retention(retention(settings));
    }

    fn tick(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.p.tick(now_ms).map_err(from_tier)
    }

    fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        self.p.delete_records_before(offset).map_err(from_tier)
    }

    fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)> {
        self.p.log().epoch_end_offset(epoch)
    }

    fn flush(&mut self) -> Result<(), LogError> {
        self.p.log_mut().flush().map_err(from_storage)
    }

    fn close(self: Box<Self>) -> Result<(), LogError> {
        self.p.close().map_err(from_tier)
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
    ) -> Result<Box<dyn PartitionLog>, LogError> {
        let log = self
            .disk
            .open_storage(topic, topic_id, partition, settings)?;
        let p = self
            .tier
            .open_partition(
                PartitionKey::new(topic_id, partition),
                log,
                retention(settings),
            )
            .map_err(from_tier)?;
        Ok(Box::new(TieredLog { p }))
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
