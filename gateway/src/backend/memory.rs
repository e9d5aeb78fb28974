//! In-memory backends of both seams, for tests and for trying the gateway
//! without disks. Nothing here survives a restart.
//!
//! [`MemoryLog`] checks what a Kafka client can get wrong (batch framing,
//! magic, CRC-32C, size, idempotent-producer sequence and epoch) so gateway
//! tests exercise the same error paths as the disk log.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::watch;
use uuid::Uuid;

use super::{
    Appended, Catalog, CatalogError, CommittedOffset, ConfigOp, LogError, LogFactory, LogSettings,
    NewTopic, PartitionLog, PartitionMeta, Records, TimestampOffset, TimestampType, TopicMeta,
};
use crate::topic_config;

/// Byte offsets of the fields of a v2 record batch header.
mod hdr {
    pub const BASE_OFFSET: usize = 0;
    pub const LENGTH: usize = 8;
    pub const LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const SIZE: usize = 61;
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

struct Batch {
    base: i64,
    last: i64,
    max_ts: i64,
    bytes: Bytes,
}

struct ProducerState {
    epoch: i16,
    first_seq: i32,
    last_seq: i32,
    base: i64,
    last: i64,
}

/// A partition log held in memory.
pub struct MemoryLog {
    batches: Vec<Batch>,
    start: i64,
    end: i64,
    epochs: Vec<(i32, i64)>,
    producers: HashMap<i64, ProducerState>,
    settings: LogSettings,
    end_tx: watch::Sender<i64>,
}

impl MemoryLog {
    pub fn new(settings: LogSettings) -> Self {
        MemoryLog {
            batches: Vec::new(),
            start: 0,
            end: 0,
            epochs: Vec::new(),
            producers: HashMap::new(),
            settings,
            end_tx: watch::channel(0).0,
        }
    }
}

struct Checked {
    at: usize,
    len: usize,
    count: i64,
    pid: i64,
    epoch: i16,
    seq: i32,
}

fn check_batches(records: &[u8], max: usize) -> Result<Vec<Checked>, LogError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let rest = &records[at..];
        if rest.len() < hdr::SIZE {
            return Err(LogError::Corrupt(format!(
                "truncated batch header at byte {at}"
            )));
        }
        let declared = be_i32(rest, hdr::LENGTH);
        let len = usize::try_from(declared)
            .ok()
            .and_then(|l| l.checked_add(12))
            .filter(|l| *l >= hdr::SIZE && *l <= rest.len())
            .ok_or_else(|| LogError::Corrupt(format!("batch length {declared} at byte {at}")))?;
        if len > max {
            return Err(LogError::RecordTooLarge { size: len, max });
        }
        if rest[hdr::MAGIC] != 2 {
            return Err(LogError::InvalidRecord(format!(
                "magic {} is not 2",
                rest[hdr::MAGIC]
            )));
        }
        let crc = u32::from_be_bytes([rest[17], rest[18], rest[19], rest[20]]);
        if crc32c::crc32c(&rest[hdr::ATTRIBUTES..len]) != crc {
            return Err(LogError::Corrupt("CRC-32C mismatch".into()));
        }
        let delta = be_i32(rest, hdr::LAST_OFFSET_DELTA);
        if delta < 0 {
            return Err(LogError::InvalidRecord(format!(
                "last offset delta {delta}"
            )));
        }
        out.push(Checked {
            at,
            len,
            count: i64::from(delta) + 1,
            pid: be_i64(rest, hdr::PRODUCER_ID),
            epoch: be_i16(rest, hdr::PRODUCER_EPOCH),
            seq: be_i32(rest, hdr::BASE_SEQUENCE),
        });
        at += len;
    }
    if out.is_empty() {
        return Err(LogError::InvalidRecord("no record batch".into()));
    }
    Ok(out)
}

impl PartitionLog for MemoryLog {
    fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Appended, LogError> {
        let max = self.settings.max_message_bytes as usize;
        let checked = check_batches(records, max)?;
        // Idempotence is judged on the first batch; clients send one batch per partition.
        let first = &checked[0];
        if first.pid >= 0 {
            if let Some(p) = self.producers.get(&first.pid) {
                if first.epoch < p.epoch {
                    return Err(LogError::InvalidProducerEpoch {
                        producer_id: first.pid,
                        got: first.epoch,
                        current: p.epoch,
                    });
                }
                if first.epoch == p.epoch {
                    if first.seq == p.first_seq {
                        return Ok(Appended {
                            base_offset: p.base,
                            last_offset: p.last,
                            log_append_time_ms: -1,
                            duplicate: true,
                        });
                    }
                    if first.seq != p.last_seq.wrapping_add(1) {
                        return Err(LogError::OutOfOrderSequence {
                            producer_id: first.pid,
                            got: first.seq,
                            last: p.last_seq,
                        });
                    }
                }
            } else if first.seq != 0 {
                return Err(LogError::OutOfOrderSequence {
                    producer_id: first.pid,
                    got: first.seq,
                    last: -1,
                });
            }
        }
        let base_offset = self.end;
        let append_time = self.settings.timestamp_type == TimestampType::LogAppendTime;
        for c in &checked {
            let b = &mut records[c.at..c.at + c.len];
            b[hdr::BASE_OFFSET..hdr::BASE_OFFSET + 8].copy_from_slice(&self.end.to_be_bytes());
            b[hdr::LEADER_EPOCH..hdr::LEADER_EPOCH + 4]
                .copy_from_slice(&leader_epoch.to_be_bytes());
            if append_time {
                let attrs = be_i16(b, hdr::ATTRIBUTES) | 0x08;
                b[hdr::ATTRIBUTES..hdr::ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
                b[hdr::MAX_TIMESTAMP..hdr::MAX_TIMESTAMP + 8]
                    .copy_from_slice(&now_ms.to_be_bytes());
                let crc = crc32c::crc32c(&b[hdr::ATTRIBUTES..]);
                b[hdr::CRC..hdr::CRC + 4].copy_from_slice(&crc.to_be_bytes());
            }
            let last = self.end + c.count - 1;
            self.batches.push(Batch {
                base: self.end,
                last,
                max_ts: be_i64(b, hdr::MAX_TIMESTAMP),
                bytes: Bytes::copy_from_slice(b),
            });
            if first.pid >= 0 {
                self.producers.insert(
                    c.pid,
                    ProducerState {
                        epoch: c.epoch,
                        first_seq: c.seq,
                        last_seq: c.seq.wrapping_add((c.count - 1) as i32),
                        base: self.end,
                        last,
                    },
                );
            }
            self.end = last + 1;
        }
        if self.epochs.last().is_none_or(|(e, _)| *e != leader_epoch) {
            self.epochs.push((leader_epoch, base_offset));
        }
        self.end_tx.send_replace(self.end);
        Ok(Appended {
            base_offset,
            last_offset: self.end - 1,
            log_append_time_ms: if append_time { now_ms } else { -1 },
            duplicate: false,
        })
    }

    fn read(&self, offset: i64, max_bytes: usize, upper_bound: i64) -> Result<Records, LogError> {
        if offset < self.start || offset > self.end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start: self.start,
                end: self.end,
            });
        }
        let mut out = Vec::new();
        for b in self
            .batches
            .iter()
            .filter(|b| b.last >= offset && b.base < upper_bound)
        {
            if !out.is_empty() && out.len() + b.bytes.len() > max_bytes {
                break;
            }
            out.extend_from_slice(&b.bytes);
        }
        Ok(Records::Bytes(Bytes::from(out)))
    }

    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<TimestampOffset>, LogError> {
        Ok(self
            .batches
            .iter()
            .filter(|b| b.last >= self.start)
            .find(|b| b.max_ts >= ts_ms)
            .map(|b| TimestampOffset {
                timestamp: b.max_ts,
                offset: b.base.max(self.start),
            }))
    }

    fn max_timestamp(&self) -> Option<TimestampOffset> {
        self.batches
            .iter()
            .filter(|b| b.last >= self.start)
            .max_by_key(|b| b.max_ts)
            .map(|b| TimestampOffset {
                timestamp: b.max_ts,
                offset: b.last,
            })
    }

    fn log_start_offset(&self) -> i64 {
        self.start
    }

    fn log_end_offset(&self) -> i64 {
        self.end
    }

    fn subscribe(&self) -> watch::Receiver<i64> {
        self.end_tx.subscribe()
    }

    fn set_settings(&mut self, settings: &LogSettings) {
        self.settings = settings.clone();
    }

    fn tick(&mut self, _now_ms: i64) -> Result<(), LogError> {
        Ok(())
    }

    fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        if offset > self.end || offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start: self.start,
                end: self.end,
            });
        }
        self.start = self.start.max(offset);
        let start = self.start;
        self.batches.retain(|b| b.last >= start);
        Ok(self.start)
    }

    fn epoch_end_offset(&self, epoch: i32) -> Option<(i32, i64)> {
        let idx = self.epochs.iter().rposition(|(e, _)| *e <= epoch)?;
        let end = self
            .epochs
            .get(idx + 1)
            .map(|(_, o)| *o)
            .unwrap_or(self.end);
        Some((self.epochs[idx].0, end))
    }

    fn flush(&mut self) -> Result<(), LogError> {
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<(), LogError> {
        Ok(())
    }
}

/// Opens [`MemoryLog`]s.
#[derive(Default)]
pub struct MemoryLogFactory;

impl LogFactory for MemoryLogFactory {
    fn open(
        &self,
        _: &str,
        _: Uuid,
        _: i32,
        settings: &LogSettings,
    ) -> Result<Box<dyn PartitionLog>, LogError> {
        Ok(Box::new(MemoryLog::new(settings.clone())))
    }

    fn remove(&self, _: &str, _: Uuid, _: i32) -> Result<(), LogError> {
        Ok(())
    }
}

#[derive(Default)]
struct CatalogState {
    topics: BTreeMap<String, TopicMeta>,
    offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    next_producer_id: i64,
}

/// A single-node catalog held in memory.
pub struct MemoryCatalog {
    node_id: i32,
    cluster_id: String,
    state: Mutex<CatalogState>,
}

impl MemoryCatalog {
    pub fn new(node_id: i32) -> Self {
        MemoryCatalog {
            node_id,
            cluster_id: Uuid::new_v4().to_string(),
            state: Mutex::new(CatalogState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CatalogState> {
        // A panic while holding this lock cannot leave the maps half-updated in a way
        // later readers would misread, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn partition(&self, index: i32) -> PartitionMeta {
        PartitionMeta {
            index,
            leader: self.node_id,
            leader_epoch: 0,
            replicas: vec![self.node_id],
            isr: vec![self.node_id],
        }
    }
}

#[async_trait::async_trait]
impl Catalog for MemoryCatalog {
    fn cluster_id(&self) -> String {
        self.cluster_id.clone()
    }

    fn topics(&self) -> Vec<TopicMeta> {
        self.lock().topics.values().cloned().collect()
    }

    fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.lock().topics.get(name).cloned()
    }

    fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta> {
        self.lock().topics.values().find(|t| t.id == id).cloned()
    }

    async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError> {
        topic_config::validate_topic_name(&topic.name)?;
        if topic.partitions < 1 {
            return Err(CatalogError::InvalidPartitions(format!(
                "{} partitions requested; at least 1 is needed",
                topic.partitions
            )));
        }
        if topic.replication_factor != 1 {
            return Err(CatalogError::InvalidReplicationFactor(format!(
                "replication factor {} on a one-node cluster",
                topic.replication_factor
            )));
        }
        for (k, v) in &topic.configs {
            topic_config::validate(k, v)?;
        }
        let mut st = self.lock();
        if st.topics.contains_key(&topic.name) {
            return Err(CatalogError::TopicAlreadyExists(topic.name));
        }
        let meta = TopicMeta {
            id: Uuid::new_v4(),
            name: topic.name.clone(),
            partitions: (0..topic.partitions).map(|i| self.partition(i)).collect(),
            configs: topic.configs,
        };
        if !validate_only {
            st.topics.insert(topic.name, meta.clone());
        }
        Ok(meta)
    }

    async fn delete_topic(&self, name: &str) -> Result<TopicMeta, CatalogError> {
        self.lock()
            .topics
            .remove(name)
            .ok_or_else(|| CatalogError::UnknownTopic(name.to_string()))
    }

    async fn create_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError> {
        let mut st = self.lock();
        let topic = st
            .topics
            .get_mut(name)
            .ok_or_else(|| CatalogError::UnknownTopic(name.to_string()))?;
        let have = topic.partitions.len() as i32;
        if total <= have {
            return Err(CatalogError::InvalidPartitions(format!(
                "topic has {have} partitions; the new count {total} must be larger"
            )));
        }
        let mut meta = topic.clone();
        meta.partitions
            .extend((have..total).map(|i| self.partition(i)));
        if !validate_only {
            *topic = meta.clone();
        }
        Ok(meta)
    }

    async fn alter_configs(
        &self,
        name: &str,
        ops: Vec<ConfigOp>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<TopicMeta, CatalogError> {
        let mut st = self.lock();
        let topic = st
            .topics
            .get_mut(name)
            .ok_or_else(|| CatalogError::UnknownTopic(name.to_string()))?;
        let mut configs = if replace_all {
            BTreeMap::new()
        } else {
            topic.configs.clone()
        };
        for op in ops {
            match op {
                ConfigOp::Set(k, v) => {
                    topic_config::validate(&k, &v)?;
                    configs.insert(k, v);
                }
                ConfigOp::Delete(k) => {
                    topic_config::validate_key(&k)?;
                    configs.remove(&k);
                }
            }
        }
        let mut meta = topic.clone();
        meta.configs = configs;
        if !validate_only {
            *topic = meta.clone();
        }
        Ok(meta)
    }

    async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<((String, i32), CommittedOffset)>,
    ) -> Result<(), CatalogError> {
        self.lock()
            .offsets
            .entry(group.to_string())
            .or_default()
            .extend(offsets);
        Ok(())
    }

    fn committed_offsets(&self, group: &str) -> BTreeMap<(String, i32), CommittedOffset> {
        self.lock().offsets.get(group).cloned().unwrap_or_default()
    }

    fn offset_groups(&self) -> Vec<String> {
        self.lock().offsets.keys().cloned().collect()
    }

    async fn delete_group(&self, group: &str) -> Result<(), CatalogError> {
        self.lock().offsets.remove(group);
        Ok(())
    }

    async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), CatalogError> {
        if let Some(offsets) = self.lock().offsets.get_mut(group) {
            for p in partitions {
                offsets.remove(&p);
            }
        }
        Ok(())
    }

    async fn allocate_producer_ids(&self, count: u32) -> Result<Range<i64>, CatalogError> {
        let mut st = self.lock();
        let start = st.next_producer_id;
        st.next_producer_id += i64::from(count);
        Ok(start..st.next_producer_id)
    }
}

/// Record batches for tests of log backends.
#[cfg(test)]
pub(crate) mod tests_support {
    /// A minimal uncompressed v2 batch holding one record with `value`.
    pub fn batch(value: &[u8]) -> Vec<u8> {
        let mut record = vec![0u8]; // attributes
        record.push(0); // timestamp delta (varint 0)
        record.push(0); // offset delta
        record.push(1); // key length -1 (zigzag)
        record.push((value.len() as u8) << 1); // value length (zigzag, short values only)
        record.extend_from_slice(value);
        record.push(0); // no headers
        let mut rec = vec![(record.len() as u8) << 1];
        rec.extend_from_slice(&record);
        let mut b = vec![0u8; 61];
        b[8..12].copy_from_slice(&((61 - 12 + rec.len()) as i32).to_be_bytes());
        b[16] = 2;
        b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
        b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
        b[57..61].copy_from_slice(&1i32.to_be_bytes());
        b.extend_from_slice(&rec);
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }
}
