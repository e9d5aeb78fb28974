//! Buffers records per topic partition and writes them as files.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ::object_store::path::Path;
use ::object_store::{ObjectStore, ObjectStoreExt};
use bytes::Bytes;
use futures::StreamExt;

use super::config::{Format, ObjectStoreSinkConfig, TimestampExtractor};
use super::encode;
use super::error::SinkError;
use super::partition::object_path;
use crate::record::SinkRecord;

/// How many files one flush writes at a time.
const WRITE_CONCURRENCY: usize = 8;

/// What a writer has written since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub files_written: u64,
    pub records_written: u64,
    pub bytes_written: u64,
}

/// A buffered record and the folders its file goes to.
#[derive(Debug)]
struct Buffered {
    record: SinkRecord,
    encoded: Path,
    /// When it was buffered (for `rotate.schedule.interval.ms`).
    since: Instant,
}

/// Writes the records of the topic partitions a sink task owns.
///
/// Records of a topic partition are buffered until `flush.size` of them
/// are there (or, with `rotate.schedule.interval.ms`, until the oldest is
/// old enough); [`ObjectStoreWriter::flush_due`] then writes them and
/// reports the offsets the task may commit. Files are named by the topic,
/// the Kafka partition and the offset of their first record, and hold
/// exactly `flush.size` records from the first one buffered: a partition
/// re-read from its committed offset after a crash is written again into
/// the same objects with the same contents.
pub struct ObjectStoreWriter {
    config: ObjectStoreSinkConfig,
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    /// Topic → Kafka partition → records in offset order.
    buffers: BTreeMap<String, BTreeMap<i32, VecDeque<Buffered>>>,
    /// Next offsets that became durable but were not yet returned (a
    /// flush that failed part way keeps what it did write).
    committable: BTreeMap<(String, i32), i64>,
    stats: WriterStats,
}

impl std::fmt::Debug for ObjectStoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStoreWriter")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix.as_ref())
            .field("buffered_records", &self.buffered_records())
            .field("stats", &self.stats)
            .finish()
    }
}

/// One file to write in a flush.
struct PlannedFile {
    topic: String,
    partition: i32,
    /// The chunk of the partition's buffer (0 = oldest) the file is part of.
    chunk: usize,
    path: Path,
    bytes: Bytes,
    records: usize,
}

impl ObjectStoreWriter {
    /// Opens the store of `store.url` (credentials and endpoints from the
    /// process environment).
    pub fn open(config: ObjectStoreSinkConfig) -> Result<Self, SinkError> {
        let handle = cache::objects::store_from_url(
            &config.store_url,
            &cache::objects::StoreEnv::from_process(),
        )
        .map_err(|source| SinkError::Store {
            url: config.store_url.clone(),
            source,
        })?;
        Ok(Self::with_store(config, handle.store, handle.prefix))
    }

    /// Writes into `store` under `prefix` (`store.url` is not used).
    pub fn with_store(
        config: ObjectStoreSinkConfig,
        store: Arc<dyn ObjectStore>,
        prefix: Path,
    ) -> Self {
        ObjectStoreWriter {
            config,
            store,
            prefix,
            buffers: BTreeMap::new(),
            committable: BTreeMap::new(),
            stats: WriterStats::default(),
        }
    }

    pub fn config(&self) -> &ObjectStoreSinkConfig {
        &self.config
    }

    /// Buffers one record. Records of a topic partition come in offset
    /// order; a record at or before the last one buffered means the
    /// partition is read again from there (the task sought back), so the
    /// buffered records from that offset on are dropped first.
    ///
    /// Fails, buffering nothing, when a key or value is not UTF-8 but its
    /// converter stores it as text.
    pub fn put(&mut self, record: SinkRecord) -> Result<(), SinkError> {
        encode::check_utf8(&record, &self.config)?;
        let time_ms = match self.config.timestamp_extractor {
            TimestampExtractor::Record => record.timestamp_ms,
            TimestampExtractor::Wallclock => wallclock_ms(),
        };
        let encoded = self.config.partitioner.encode(&record, time_ms);
        let buffer = self
            .buffers
            .entry(record.topic.clone())
            .or_default()
            .entry(record.partition)
            .or_default();
        if buffer
            .back()
            .is_some_and(|last| last.record.offset >= record.offset)
        {
            let before = buffer.len();
            buffer.retain(|b| b.record.offset < record.offset);
            tracing::debug!(
                topic = %record.topic,
                partition = record.partition,
                offset = record.offset,
                dropped = before - buffer.len(),
                "partition read again from an earlier offset; dropping the records buffered from there"
            );
        }
        buffer.push_back(Buffered {
            record,
            encoded,
            since: Instant::now(),
        });
        Ok(())
    }

    /// Writes every file that is due at `now` and returns, per topic
    /// partition whose records became durable, the next offset to read
    /// (last written offset + 1): the offset to commit.
    ///
    /// A flush of a partition's buffer is done in chunks of `flush.size`
    /// records (one file per encoded partition each). When a file cannot
    /// be written, the records of its chunk and of the later chunks of
    /// that partition stay buffered (a later call writes them again under
    /// the same names) and the first error is returned; the offsets of
    /// the chunks that were written are returned by the next successful
    /// call.
    pub async fn flush_due(&mut self, now: Instant) -> Result<Vec<(String, i32, i64)>, SinkError> {
        let files = self.plan(now)?;
        if files.is_empty() {
            return Ok(self.take_committable());
        }

        let store = Arc::clone(&self.store);
        // the writes own what they write: a future borrowing `files` would
        // not be `Send` for every lifetime, and the task could not be spawned
        let writes: Vec<(Path, Bytes)> = files
            .iter()
            .map(|file| (file.path.clone(), file.bytes.clone()))
            .collect();
        let results: Vec<Result<(), SinkError>> =
            futures::stream::iter(writes.into_iter().map(move |(path, bytes)| {
                let store = Arc::clone(&store);
                async move {
                    store
                        .put(&path, bytes.into())
                        .await
                        .map(|_| ())
                        .map_err(|source| SinkError::Write {
                            path: path.to_string(),
                            source,
                        })
                }
            }))
            .buffered(WRITE_CONCURRENCY)
            .collect()
            .await;

        // Per partition, the chunks whose files were all written, in order
        // up to the first that was not (its records, and the later ones,
        // stay buffered).
        let mut first_error = None;
        let mut written: BTreeMap<(&str, i32), (usize, WriterStats)> = BTreeMap::new();
        let mut failed: BTreeMap<(&str, i32), usize> = BTreeMap::new();
        for (file, result) in files.iter().zip(results) {
            let key = (file.topic.as_str(), file.partition);
            if let Err(e) = result {
                let failed_chunk = failed.entry(key).or_insert(file.chunk);
                *failed_chunk = (*failed_chunk).min(file.chunk);
                tracing::warn!(error = %e, "object-store sink could not write a file");
                first_error.get_or_insert(e);
            }
        }
        for file in &files {
            let key = (file.topic.as_str(), file.partition);
            if failed.get(&key).is_some_and(|&chunk| chunk <= file.chunk) {
                continue;
            }
            let (chunks, stats) = written.entry(key).or_default();
            *chunks = (*chunks).max(file.chunk + 1);
            stats.files_written += 1;
            stats.records_written += file.records as u64;
            stats.bytes_written += file.bytes.len() as u64;
        }
        for ((topic, partition), (chunks, stats)) in written {
            self.drain_chunks(topic, partition, chunks);
            self.stats.files_written += stats.files_written;
            self.stats.records_written += stats.records_written;
            self.stats.bytes_written += stats.bytes_written;
        }

        match first_error {
            Some(e) => Err(e),
            None => Ok(self.take_committable()),
        }
    }

    /// Encodes the files due at `now`, chunk by chunk (a chunk is the
    /// records one flush of a partition's buffer takes: `flush.size`, or
    /// what is left when the buffer is old enough).
    fn plan(&self, now: Instant) -> Result<Vec<PlannedFile>, SinkError> {
        let flush_size = self.config.flush_size;
        let mut files = Vec::new();
        for (topic, partitions) in &self.buffers {
            for (&partition, buffer) in partitions {
                let rotate = match (self.config.rotate_schedule_interval, buffer.front()) {
                    (Some(interval), Some(oldest)) => {
                        now.saturating_duration_since(oldest.since) >= interval
                    }
                    _ => false,
                };
                let mut due = buffer.len() - buffer.len() % flush_size;
                if rotate {
                    due = buffer.len();
                }
                let records = buffer.range(..due).collect::<Vec<_>>();
                for (chunk, records) in records.chunks(flush_size).enumerate() {
                    self.plan_chunk(topic, partition, chunk, records, &mut files)?;
                }
            }
        }
        Ok(files)
    }

    /// One file per encoded partition of `records`, named by its first
    /// offset.
    fn plan_chunk(
        &self,
        topic: &str,
        partition: i32,
        chunk: usize,
        records: &[&Buffered],
        files: &mut Vec<PlannedFile>,
    ) -> Result<(), SinkError> {
        let mut groups: BTreeMap<&Path, Vec<&SinkRecord>> = BTreeMap::new();
        for b in records {
            groups.entry(&b.encoded).or_default().push(&b.record);
        }
        for (encoded, records) in groups {
            let Some(first) = records.first() else {
                continue;
            };
            let path = object_path(
                &self.prefix,
                &self.config.topics_dir,
                topic,
                partition,
                encoded,
                first.offset,
                self.config.format.extension(),
            );
            let bytes = match self.config.format {
                Format::Parquet => encode::parquet(&records, &self.config, path.as_ref())?,
                Format::Json => encode::json_lines(&records, &self.config)?,
            };
            files.push(PlannedFile {
                topic: topic.to_string(),
                partition,
                chunk,
                path,
                bytes: Bytes::from(bytes),
                records: records.len(),
            });
        }
        Ok(())
    }

    /// Drops the first `chunks` chunks of a partition's buffer, now
    /// written, and notes the offset after them as committable.
    fn drain_chunks(&mut self, topic: &str, partition: i32, chunks: usize) {
        let Some(partitions) = self.buffers.get_mut(topic) else {
            return;
        };
        let Some(buffer) = partitions.get_mut(&partition) else {
            return;
        };
        let flush_size = self.config.flush_size;
        let count = (chunks * flush_size).min(buffer.len());
        let mut last = None;
        for b in buffer.drain(..count) {
            last = Some(b.record.offset);
        }
        if let Some(last) = last {
            self.committable
                .insert((topic.to_string(), partition), last + 1);
        }
        if buffer.is_empty() {
            partitions.remove(&partition);
            if partitions.is_empty() {
                self.buffers.remove(topic);
            }
        }
    }

    /// Forgets, without writing them, the buffered records (and the
    /// offsets not yet returned) of partitions this task no longer owns.
    pub fn close(&mut self, partitions: &[(String, i32)]) {
        for (topic, partition) in partitions {
            if let Some(buffers) = self.buffers.get_mut(topic.as_str()) {
                buffers.remove(partition);
                if buffers.is_empty() {
                    self.buffers.remove(topic.as_str());
                }
            }
            self.committable.remove(&(topic.clone(), *partition));
        }
    }

    /// Records buffered, over all partitions.
    pub fn buffered_records(&self) -> usize {
        self.buffers
            .values()
            .flat_map(BTreeMap::values)
            .map(VecDeque::len)
            .sum()
    }

    /// When the next buffer becomes old enough to be written although
    /// short (`None` without `rotate.schedule.interval.ms` or records):
    /// the engine calls [`ObjectStoreWriter::flush_due`] by then.
    pub fn next_rotation(&self) -> Option<Instant> {
        let interval = self.config.rotate_schedule_interval?;
        self.buffers
            .values()
            .flat_map(BTreeMap::values)
            .filter_map(|buffer| buffer.front())
            .map(|oldest| oldest.since + interval)
            .min()
    }

    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// The committable offsets, handed over once.
    fn take_committable(&mut self) -> Vec<(String, i32, i64)> {
        std::mem::take(&mut self.committable)
            .into_iter()
            .map(|((topic, partition), offset)| (topic, partition, offset))
            .collect()
    }
}

fn wallclock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
