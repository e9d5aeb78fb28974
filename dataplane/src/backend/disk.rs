//! A partition log on local disk only: the `storage` crate's `PartitionLog`,
//! one directory per partition under `DIR/log/<topic>-<partition>` (Kafka's
//! layout). The tiered backend ([`super::tiered`]) lays directories out the
//! same way and uses [`DiskLogFactory::open_storage`] to open them.

use std::path::{Path, PathBuf};

use uuid::Uuid;

use super::{Appended, LocalRead, LogBackend, LogError, LogFactory, LogSettings, OpenedLog};
use super::{Marker, Records, TimestampOffset};

/// The gateway's view of a read: the file range to send, or nothing.
/// `min_one` false refuses a first batch larger than `max_bytes`.
pub fn records(slice: storage::ReadSlice, max_bytes: usize, min_one: bool) -> Records {
    if slice.is_empty() || (!min_one && slice.len > max_bytes) {
        return Records::empty();
    }
    Records::File {
        file: slice.file,
        position: slice.position,
        len: slice.len,
    }
}

/// A partition log on local disk, with nothing in object storage.
pub struct DiskLog {
    log: storage::PartitionLog,
    retention_bytes: Option<u64>,
    retention_ms: Option<u64>,
}

impl LogBackend for DiskLog {
    fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
        schemas: Option<&storage::SchemaRule>,
    ) -> Result<Appended, LogError> {
        let outcome = self
            .log
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
        let slice = self.log.read(offset, max_bytes, upper_bound)?;
        Ok(LocalRead::Records(records(slice, max_bytes, min_one)))
    }

    fn append_marker(
        &mut self,
        m: Marker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        let info = self.log.append_marker(
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
        self.log.first_unstable_offset()
    }

    fn producers(&self) -> Vec<storage::ProducerSummary> {
        self.log.producers()
    }

    fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<storage::AbortedTxn> {
        self.log.aborted_transactions(from, upto)
    }

    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<TimestampOffset>, LogError> {
        Ok(self.log.offset_for_timestamp(ts_ms)?)
    }

    fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.log.max_timestamp()
    }

    fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    fn local_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    fn latest_tiered_offset(&self) -> Option<i64> {
        None
    }

    fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    fn local_bytes(&self) -> u64 {
        self.log.size_bytes()
    }

    fn flushed_offset(&self) -> i64 {
        self.log.flushed_offset()
    }

    fn set_settings(&mut self, settings: &LogSettings) {
        self.retention_bytes = settings.retention_bytes;
        self.retention_ms = settings.retention_ms;
        if let Err(e) = self.log.set_config(settings.log_config()) {
            tracing::warn!(error = %e, "new topic settings were not applied to the log");
        }
    }

    fn tick(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.log.tick(now_ms)?;
        // Nothing is tiered: everything below the log end may go by retention.
        let below = self.log.log_end_offset();
        self.log
            .enforce_retention(now_ms, self.retention_bytes, self.retention_ms, below)?;
        Ok(())
    }

    fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        Ok(self.log.delete_records_before(offset)?)
    }

    fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)> {
        self.log.epoch_end_offset(epoch)
    }

    /// A local log has no object storage behind it.
    fn set_upload_limit(&mut self, _limit: i64) {}

    fn latest_epoch(&self) -> Option<i32> {
        self.log.latest_epoch()
    }

    fn append_replicated(&mut self, records: &[u8], now_ms: i64) -> Result<i64, LogError> {
        Ok(self.log.append_replicated(records, now_ms)?.log_end_offset)
    }

    fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        Ok(self.log.truncate_to(offset)?)
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        Ok(self.log.truncate_fully_and_start_at(offset)?)
    }

    fn restore_producers(&mut self, snapshot: &[u8]) -> Result<bool, LogError> {
        Ok(self.log.restore_producers(snapshot)?)
    }

    fn sync_point(&mut self) -> storage::SyncPoint {
        self.log.sync_point()
    }

    fn sync_done(&mut self, done: storage::SyncDone) -> Result<i64, LogError> {
        Ok(self.log.sync_done(done)?)
    }

    fn plan_compaction(&self, now_ms: i64, upper_bound: i64) -> Option<storage::CompactionJob> {
        self.log.plan_compaction(now_ms, upper_bound)
    }

    fn install_compaction(
        &mut self,
        done: storage::compaction::Compacted,
        now_ms: i64,
    ) -> Result<storage::CompactionReport, LogError> {
        Ok(self.log.install_compaction(done, now_ms)?)
    }

    fn cleaner_figures(&self) -> storage::CleanerFigures {
        self.log.cleaner_figures()
    }

    fn close(self: Box<Self>) -> Result<(), LogError> {
        Ok(self.log.close()?)
    }
}

/// Opens [`DiskLog`]s under one directory.
pub struct DiskLogFactory {
    root: PathBuf,
}

impl DiskLogFactory {
    /// `root` is `DATA_DIR/log`; it is created if missing. Directories set
    /// aside earlier (data of deleted topic incarnations) are removed in the
    /// background.
    pub fn new(root: impl AsRef<Path>) -> std::io::Result<Self> {
        std::fs::create_dir_all(root.as_ref())?;
        let root = root.as_ref().to_path_buf();
        let sweep = root.clone();
        std::thread::Builder::new()
            .name("log-dir-sweep".into())
            .spawn(move || remove_set_aside(&sweep))?;
        Ok(DiskLogFactory { root })
    }

    fn dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.root.join(format!("{topic}-{partition}"))
    }

    /// Opens (creating or recovering) a partition's storage log in its
    /// directory, claimed for `topic_id`; the tiered backend wraps the result.
    pub fn open_storage(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<storage::PartitionLog, LogError> {
        let dir = self.dir(topic, partition);
        claim(&dir, topic_id)?;
        Ok(storage::PartitionLog::open(&dir, settings.log_config())?)
    }
}

/// Name of the file that records which topic incarnation owns a partition directory.
const TOPIC_ID_FILE: &str = "topic-id";
/// Suffix of a directory set aside because it belongs to a deleted incarnation.
const SET_ASIDE_SUFFIX: &str = ".deleted";

fn io(context: String, source: std::io::Error) -> LogError {
    LogError::Storage(storage::StorageError::Io { context, source })
}

/// Directories are named after the topic, so a topic deleted and recreated
/// under the same name would find the old data if the process died between
/// the delete and the removal of its files. The topic id written into each
/// directory tells the incarnations apart:
/// 1. no marker: a new directory, or one whose first open died before the
///    marker was durable: claim it;
/// 2. a marker naming this topic id: ours;
/// 3. an empty or unparsable marker: a write torn by a crash (the marker is
///    written before any data), so the directory is ours: claim it again;
/// 4. a marker naming another topic id: a deleted incarnation's data, which
///    is set aside as `<dir>.<old id>.deleted` and removed later.
///
/// The marker is written durably (temp file, fsync, rename, directory fsync)
/// before the log is opened, so a power loss cannot make a directory holding
/// fsynced segments look like case 4.
fn claim(dir: &Path, topic_id: Uuid) -> Result<(), LogError> {
    let marker = dir.join(TOPIC_ID_FILE);
    let found = match std::fs::read(&marker) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(format!("read {}", marker.display()), e)),
    };
    let owner = found
        .as_deref()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| Uuid::parse_str(s.trim()).ok());
    match owner {
        Some(id) if id == topic_id => return Ok(()),
        Some(stale) => {
            let aside = set_aside_path(dir, stale);
            tracing::warn!(
                dir = %dir.display(),
                aside = %aside.display(),
                %stale,
                "setting aside data of a deleted topic incarnation"
            );
            std::fs::rename(dir, &aside).map_err(|e| {
                io(
                    format!("rename {} to {}", dir.display(), aside.display()),
                    e,
                )
            })?;
        }
        None if found.is_some() => {
            tracing::warn!(dir = %dir.display(), "partition directory had a torn topic-id marker; claiming it");
        }
        None => {}
    }
    std::fs::create_dir_all(dir).map_err(|e| io(format!("create {}", dir.display()), e))?;
    storage::files::write_atomic(dir, TOPIC_ID_FILE, topic_id.to_string().as_bytes(), true)?;
    Ok(())
}

/// `<dir>.<stale id>.deleted`, or with a numeric suffix if that exists already.
fn set_aside_path(dir: &Path, stale: Uuid) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = dir.parent().unwrap_or(Path::new("."));
    let mut candidate = parent.join(format!("{name}.{stale}{SET_ASIDE_SUFFIX}"));
    let mut n = 1;
    while candidate.exists() {
        candidate = parent.join(format!("{name}.{stale}.{n}{SET_ASIDE_SUFFIX}"));
        n += 1;
    }
    candidate
}

/// Removes every set-aside directory under `root`.
fn remove_set_aside(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let is_aside = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(SET_ASIDE_SUFFIX));
        if is_aside && path.is_dir() {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(dir = %path.display(), "removed data of a deleted topic incarnation")
                }
                Err(e) => {
                    tracing::warn!(dir = %path.display(), error = %e, "could not remove a set-aside directory")
                }
            }
        }
    }
}

impl LogFactory for DiskLogFactory {
    fn open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &LogSettings,
    ) -> Result<OpenedLog, LogError> {
        let log = self.open_storage(topic, topic_id, partition, settings)?;
        Ok(OpenedLog {
            log: Box::new(DiskLog {
                log,
                retention_bytes: settings.retention_bytes,
                retention_ms: settings.retention_ms,
            }),
            cold: None,
        })
    }

    fn remove(&self, topic: &str, _topic_id: Uuid, partition: i32) -> Result<(), LogError> {
        let dir = self.dir(topic, partition);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(format!("remove {}", dir.display()), e)),
        }
    }
}

#[cfg(test)]
#[path = "disk_tests.rs"]
mod tests;
