//! The production log backend: the `storage` crate's `PartitionLog`, one
//! directory per partition under `DIR/log/<topic>-<partition>` (Kafka's layout).

use std::path::{Path, PathBuf};

use tokio::sync::watch;
use uuid::Uuid;

use super::{
    Appended, LogError, LogFactory, LogSettings, PartitionLog, Records, TimestampOffset,
    TimestampType,
};

/// Translates a storage error; exhaustive so new storage errors get a deliberate mapping.
pub fn from_storage(e: storage::StorageError) -> LogError {
    use storage::StorageError as S;
    match e {
        S::CorruptBatch { .. } => LogError::Corrupt(e.to_string()),
        S::InvalidRecord { .. } => LogError::InvalidRecord(e.to_string()),
        S::UnsupportedMagic { .. } | S::TransactionsUnsupported { .. } => {
            LogError::UnsupportedFormat(e.to_string())
        }
        S::UnsupportedCompression { .. } => LogError::UnsupportedCompression(e.to_string()),
        S::RecordTooLarge { size, max } => LogError::RecordTooLarge { size, max },
        S::OutOfOrderSequence {
            producer_id,
            expected,
            received,
        } => LogError::OutOfOrderSequence {
            producer_id,
            got: received,
            last: expected.wrapping_sub(1),
        },
        S::InvalidProducerEpoch {
            producer_id,
            current,
            received,
        } => LogError::InvalidProducerEpoch {
            producer_id,
            got: received,
            current,
        },
        S::StaleLeaderEpoch { received, latest } => {
            LogError::FencedLeaderEpoch { received, latest }
        }
        S::OffsetOutOfRange {
            offset,
            log_start,
            log_end,
        } => LogError::OffsetOutOfRange {
            offset,
            start: log_start,
            end: log_end,
        },
        S::InvalidConfig { .. } => LogError::InvalidConfig(e.to_string()),
        S::Corrupt { .. } | S::Offline { .. } | S::Io { .. } => LogError::Storage(e.to_string()),
    }
}

/// The gateway's view of an append's outcome.
pub fn appended(outcome: &storage::AppendOutcome) -> Appended {
    let info = outcome.info();
    Appended {
        base_offset: info.base_offset,
        last_offset: info.last_offset,
        log_append_time_ms: info.log_append_time_ms,
        duplicate: matches!(outcome, storage::AppendOutcome::Duplicate(_)),
    }
}

/// The gateway's view of a read: the file range to send, or nothing.
pub fn records(slice: storage::ReadSlice) -> Records {
    if slice.is_empty() {
        return Records::empty();
    }
    Records::File {
        file: slice.file,
        position: slice.position,
        len: slice.len,
    }
}

/// The gateway's view of a timestamp lookup.
pub fn timestamp_offset(t: storage::TimestampOffset) -> TimestampOffset {
    TimestampOffset {
        timestamp: t.timestamp,
        offset: t.offset,
    }
}

/// The storage crate's settings for a partition's [`LogSettings`].
pub fn log_config(s: &LogSettings) -> storage::LogConfig {
    storage::LogConfig {
        segment_bytes: s.segment_bytes.clamp(
            storage::config::MIN_SEGMENT_BYTES,
            storage::config::MAX_SEGMENT_BYTES,
        ),
        segment_ms: s.segment_ms,
        max_message_bytes: s.max_message_bytes,
        flush_messages: s.flush_messages,
        flush_ms: s.flush_ms,
        timestamp_type: match s.timestamp_type {
            TimestampType::CreateTime => storage::TimestampType::CreateTime,
            TimestampType::LogAppendTime => storage::TimestampType::LogAppendTime,
        },
        ..storage::LogConfig::default()
    }
}

/// A partition log on local disk.
pub struct DiskLog {
    log: storage::PartitionLog,
    retention_bytes: Option<u64>,
    retention_ms: Option<u64>,
}

impl PartitionLog for DiskLog {
    fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Appended, LogError> {
        let outcome = self
            .log
            .append(records, leader_epoch, now_ms)
            .map_err(from_storage)?;
        Ok(appended(&outcome))
    }

    fn read(&self, offset: i64, max_bytes: usize, upper_bound: i64) -> Result<Records, LogError> {
        let slice = self
            .log
            .read(offset, max_bytes, upper_bound)
            .map_err(from_storage)?;
        Ok(records(slice))
    }

    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<TimestampOffset>, LogError> {
        Ok(self
            .log
            .offset_for_timestamp(ts_ms)
            .map_err(from_storage)?
            .map(timestamp_offset))
    }

    fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.log.max_timestamp().map(timestamp_offset)
    }

    fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    fn subscribe(&self) -> watch::Receiver<i64> {
        self.log.subscribe()
    }

    fn set_settings(&mut self, settings: &LogSettings) {
        self.retention_bytes = settings.retention_bytes;
        self.retention_ms = settings.retention_ms;
        if let Err(e) = self.log.set_config(log_config(settings)) {
            tracing::warn!(error = %e, "new topic settings were not applied to the log");
        }
    }

    fn tick(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.log.tick(now_ms).map_err(from_storage)?;
        // Single node, nothing tiered yet: everything below the log end may be deleted by retention.
        let below = self.log.log_end_offset();
        self.log
            .enforce_retention(now_ms, self.retention_bytes, self.retention_ms, below)
            .map_err(from_storage)?;
        Ok(())
    }

    fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        self.log.delete_records_before(offset).map_err(from_storage)
    }

    fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)> {
        self.log.epoch_end_offset(epoch)
    }

    fn flush(&mut self) -> Result<(), LogError> {
        self.log.flush().map_err(from_storage)
    }

    fn close(self: Box<Self>) -> Result<(), LogError> {
        self.log.close().map_err(from_storage)
    }
}

/// Opens [`DiskLog`]s under one directory.
pub struct DiskLogFactory {
    root: PathBuf,
}

impl DiskLogFactory {
    /// `root` is `DATA_DIR/log`; it is created if missing.
    pub fn new(root: impl AsRef<Path>) -> std::io::Result<Self> {
        std::fs::create_dir_all(root.as_ref())?;
        Ok(DiskLogFactory {
            root: root.as_ref().to_path_buf(),
        })
    }

    fn dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.root.join(format!("{topic}-{partition}"))
    }

    /// Opens (creating or recovering) a partition's storage log in its
    /// directory, claimed for `topic_id`; tiering wraps the result.
    pub fn open_storage(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<storage::PartitionLog, LogError> {
        let dir = self.dir(topic, partition);
        claim(&dir, topic_id)?;
        storage::PartitionLog::open(&dir, log_config(settings)).map_err(from_storage)
    }
}

/// Name of the file that records which topic incarnation owns a partition directory.
const TOPIC_ID_FILE: &str = "topic-id";

/// Directories are named after the topic, so a topic deleted and recreated
/// under the same name would find the old data if the process died between
/// the delete and the removal of its files. The topic id written into each
/// directory tells the incarnations apart; a stale directory is set aside.
fn claim(dir: &Path, topic_id: Uuid) -> Result<(), LogError> {
    let marker = dir.join(TOPIC_ID_FILE);
    match std::fs::read_to_string(&marker) {
        Ok(found) if found.trim() == topic_id.to_string() => return Ok(()),
        Ok(found) => {
            let aside = dir.with_extension(format!("{}.deleted", found.trim()));
            tracing::warn!(
                dir = %dir.display(),
                stale = found.trim(),
                "setting aside data of a deleted topic incarnation"
            );
            std::fs::rename(dir, &aside)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(LogError::Io(e)),
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(&marker, topic_id.to_string())?;
    Ok(())
}

impl LogFactory for DiskLogFactory {
    fn open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<Box<dyn PartitionLog>, LogError> {
        let log = self.open_storage(topic, topic_id, partition, settings)?;
        Ok(Box::new(DiskLog {
            log,
            retention_bytes: settings.retention_bytes,
            retention_ms: settings.retention_ms,
        }))
    }

    fn remove(&self, topic: &str, _topic_id: Uuid, partition: i32) -> Result<(), LogError> {
        let dir = self.dir(topic, partition);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LogError::Io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> LogSettings {
        crate::topic_config::log_settings(&Default::default())
    }

    #[test]
    fn a_recreated_topic_never_sees_the_data_of_its_deleted_namesake() {
        let root = tempfile::tempdir().expect("tmp");
        let f = DiskLogFactory::new(root.path()).expect("factory");
        let old = Uuid::new_v4();
        let mut log = f.open("t", old, 0, &settings()).expect("open");
        let mut rec = crate::backend::memory::tests_support::batch(b"old");
        log.append(&mut rec, 0, 1).expect("append");
        log.close().expect("close");
        // The process died before the deleted topic's files were removed.
        let log = f.open("t", Uuid::new_v4(), 0, &settings()).expect("reopen");
        assert_eq!(log.log_end_offset(), 0, "fresh log for the new incarnation");
        log.close().expect("close");
        let same = f
            .open("t", Uuid::nil(), 1, &settings())
            .expect("other partition");
        assert_eq!(same.log_end_offset(), 0);
    }

    #[test]
    fn reopening_the_same_incarnation_keeps_its_data() {
        let root = tempfile::tempdir().expect("tmp");
        let f = DiskLogFactory::new(root.path()).expect("factory");
        let id = Uuid::new_v4();
        let mut log = f.open("t", id, 0, &settings()).expect("open");
        let mut rec = crate::backend::memory::tests_support::batch(b"kept");
        log.append(&mut rec, 0, 1).expect("append");
        log.close().expect("close");
        let log = f.open("t", id, 0, &settings()).expect("reopen");
        assert_eq!(log.log_end_offset(), 1);
    }
}
