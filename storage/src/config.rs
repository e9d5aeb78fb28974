//! Per-partition log settings, built by the gateway from topic configs.

use crate::batch::TimestampType;
use crate::error::StorageError;
use crate::writeback::WritebackConfig;

/// Smallest accepted `segment.bytes`.
pub const MIN_SEGMENT_BYTES: u64 = 1 << 20;
/// Largest accepted `segment.bytes` (file positions in the index are u32,
/// and Kafka caps it at `i32::MAX` too).
pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

/// Smallest accepted `max_uncompressed_batch_bytes`.
pub const MIN_UNCOMPRESSED_BATCH_BYTES: u64 = 1 << 20;
/// The default uncompressed limit is this many times the batch size limit.
const UNCOMPRESSED_RATIO: u64 = 64;

/// Settings of one partition log. `Default` gives AeroStream's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll the active segment when it would grow past this (`segment.bytes`,
    /// default 128 MiB, at least 1 MiB).
    pub segment_bytes: u64,
    /// Roll up to this many bytes before `segment_bytes`, at a point that
    /// differs per partition and per segment, so partitions written at the
    /// same rate do not all roll (and seal, and upload) in the same moment.
    /// 0 (the default here) rolls exactly at `segment_bytes`; at most half
    /// of it. The gateway sets an eighth of `segment.bytes`.
    pub segment_jitter_bytes: u64,
    /// Roll the active segment when its first append is this old
    /// (`segment.ms`; `None` = never by age).
    pub segment_ms: Option<u64>,
    /// Bytes of log between two offset index entries (`index.interval.bytes`).
    pub index_interval_bytes: u32,
    /// Largest accepted batch (`max.message.bytes`, default 1048588).
    pub max_message_bytes: u32,
    /// Largest size the records of one compressed batch may decompress to.
    /// Appends decompress every compressed batch to count its records (as
    /// Kafka does) and refuse it with `InvalidRecord` once this many bytes
    /// came out: a bound on the memory and CPU one request can cost, since
    /// a compression bomb (a gigabyte of zeros gzips to about a megabyte)
    /// would otherwise pass `max.message.bytes`. `None` (the default) means
    /// 64 × max(`max.message.bytes`, 1 MiB), far above any ratio real
    /// producers reach on a full batch; at least 1 MiB when set.
    pub max_uncompressed_batch_bytes: Option<u64>,
    /// fsync after this many records since the last fsync (`flush.messages`).
    pub flush_messages: Option<u64>,
    /// fsync when the oldest unflushed append is this old (`flush.ms`),
    /// checked by [`crate::PartitionLog::tick`].
    pub flush_ms: Option<u64>,
    /// `message.timestamp.type`: with `LogAppendTime` the log stamps the
    /// append time into every batch.
    pub timestamp_type: TimestampType,
    /// Forget idempotent producers idle this long
    /// (`producer.id.expiration.ms`, default one day).
    pub producer_id_expiration_ms: u64,
    /// Paced writeback settings.
    pub writeback: WritebackConfig,
    /// The topic is compacted (`cleanup.policy` includes `compact`):
    /// producers' records must have keys, and [`crate::compaction`] keeps
    /// the latest record of each key.
    pub compacted: bool,
    /// How compaction runs (used only when `compacted`).
    pub compaction: CompactionConfig,
}

/// The settings of a compacted topic's cleaner, as Kafka names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionConfig {
    /// `delete.retention.ms`: a tombstone (a record with a key and no
    /// value) is kept this long after the segment holding it was last
    /// written to (its largest timestamp), so consumers reading slowly
    /// still see the delete; then compaction removes it. Default one day.
    pub delete_retention_ms: u64,
    /// `min.compaction.lag.ms`: segments whose largest timestamp is newer
    /// than this are not compacted yet. Default 0.
    pub min_lag_ms: u64,
    /// `max.compaction.lag.ms`: a segment not compacted this long after its
    /// first record is compacted whatever the dirty ratio. `None`: never
    /// forced (Kafka's default, `Long.MAX_VALUE`).
    pub max_lag_ms: Option<u64>,
    /// `min.cleanable.dirty.ratio`, in millionths: compaction runs once the
    /// bytes written since the last compaction are this share of the
    /// compactable log. Default 500,000 (0.5).
    pub min_dirty_ratio_ppm: u32,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            delete_retention_ms: 86_400_000,
            min_lag_ms: 0,
            max_lag_ms: None,
            min_dirty_ratio_ppm: 500_000,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 128 << 20,
            segment_jitter_bytes: 0,
            segment_ms: None,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            max_uncompressed_batch_bytes: None,
            flush_messages: None,
            flush_ms: None,
            timestamp_type: TimestampType::CreateTime,
            producer_id_expiration_ms: 86_400_000,
            writeback: WritebackConfig::default(),
            compacted: false,
            compaction: CompactionConfig::default(),
        }
    }
}

impl LogConfig {
    /// Rejects values the log cannot work with.
    pub fn validate(&self) -> Result<(), StorageError> {
        let bad = |reason: String| Err(StorageError::InvalidConfig { reason });
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return bad(format!(
                "segment.bytes {} must be between {MIN_SEGMENT_BYTES} and {MAX_SEGMENT_BYTES}",
                self.segment_bytes
            ));
        }
        if self.segment_jitter_bytes > self.segment_bytes / 2 {
            return bad(format!(
                "the segment roll jitter {} is more than half of segment.bytes {}",
                self.segment_jitter_bytes, self.segment_bytes
            ));
        }
        if self.index_interval_bytes == 0 {
            return bad("index.interval.bytes must be positive".into());
        }
        if self.max_message_bytes < crate::batch::HEADER_LEN as u32 {
            return bad(format!(
                "max.message.bytes {} is smaller than one batch header",
                self.max_message_bytes
            ));
        }
        if let Some(cap) = self.max_uncompressed_batch_bytes {
            if cap < MIN_UNCOMPRESSED_BATCH_BYTES {
                return bad(format!(
                    "max uncompressed batch bytes {cap} is below {MIN_UNCOMPRESSED_BATCH_BYTES}"
                ));
            }
        }
        if self.flush_messages == Some(0) {
            return bad("flush.messages must be positive".into());
        }
        if self.writeback.paced && self.writeback.chunk_bytes < 4096 {
            return bad(format!(
                "writeback chunk of {} bytes is below one page",
                self.writeback.chunk_bytes
            ));
        }
        Ok(())
    }

    /// Capacity of the offset index of a new segment.
    pub(crate) fn index_capacity(&self) -> usize {
        let entries = self.segment_bytes / u64::from(self.index_interval_bytes.max(1)) + 2;
        usize::try_from(entries.min(1 << 22)).unwrap_or(1 << 22)
    }

    pub(crate) fn max_batch_bytes(&self) -> usize {
        (self.max_message_bytes as usize).min(self.segment_bytes as usize)
    }

    /// [`LogConfig::max_uncompressed_batch_bytes`] with its default applied.
    pub fn uncompressed_batch_limit(&self) -> u64 {
        self.max_uncompressed_batch_bytes.unwrap_or(
            UNCOMPRESSED_RATIO
                * u64::from(self.max_message_bytes).max(MIN_UNCOMPRESSED_BATCH_BYTES),
        )
    }

    /// The limits `append` validates batches with.
    pub(crate) fn batch_limits(&self) -> crate::batch::Limits {
        crate::batch::Limits {
            max_batch_bytes: self.max_batch_bytes(),
            max_uncompressed_bytes: self.uncompressed_batch_limit(),
            require_keys: false,
            sparse_offsets: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafka_like_and_valid() {
        let c = LogConfig::default();
        c.validate().unwrap();
        assert_eq!(c.segment_bytes, 134_217_728);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert!(c.writeback.paced);
        assert_eq!(c.uncompressed_batch_limit(), 64 * 1_048_588);
        let small = LogConfig {
            max_message_bytes: 1_000,
            ..LogConfig::default()
        };
        assert_eq!(small.uncompressed_batch_limit(), 64 << 20);
    }

    #[test]
    fn out_of_range_settings_are_rejected_with_a_reason() {
        let small = LogConfig {
            segment_bytes: 1000,
            ..LogConfig::default()
        };
        let err = small.validate().unwrap_err().to_string();
        assert!(err.contains("segment.bytes 1000"), "{err}");
        let zero_flush = LogConfig {
            flush_messages: Some(0),
            ..LogConfig::default()
        };
        assert!(zero_flush.validate().is_err());
    }
}
