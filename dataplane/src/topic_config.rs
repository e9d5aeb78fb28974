//! The translation of a topic's configs into [`LogSettings`]. The catalogue
//! of keys, their defaults and validation live in `metastore::topic_config`
//! (re-exported here), so the rules exist once.

use std::collections::BTreeMap;

use metastore::MetaError;

use crate::backend::{LogSettings, TimestampType};

pub use metastore::topic_config::{
    catalogue, effective, lookup, validate, validate_topic_name, ConfigDef, ConfigType,
};

/// Rejects keys AeroStream does not know.
pub fn validate_key(key: &str) -> Result<&'static ConfigDef, MetaError> {
    lookup(key).ok_or_else(|| MetaError::InvalidConfig {
        key: key.to_string(),
        reason: "unknown topic config".into(),
    })
}

fn positive(configs: &BTreeMap<String, String>, name: &str) -> Option<u64> {
    effective(configs, name)
        .and_then(|v| v.parse::<i64>().ok())
        .and_then(|n| u64::try_from(n).ok())
}

/// Broker-wide defaults of the topic settings AeroStream adds to Kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDefaults {
    /// `write.caching` for topics that do not set it (`--write-caching`).
    pub write_caching: bool,
}

impl Default for LogDefaults {
    fn default() -> Self {
        LogDefaults {
            write_caching: true,
        }
    }
}

/// `write.caching` of a topic: its own value, else the broker's default.
pub fn write_caching(configs: &BTreeMap<String, String>, defaults: &LogDefaults) -> bool {
    match configs.get(WRITE_CACHING).map(|v| v.trim()) {
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        _ => defaults.write_caching,
    }
}

/// The topic config that chooses between page-cache and fdatasync acknowledgements.
pub const WRITE_CACHING: &str = "write.caching";

/// Translates a topic's configs into partition-log settings.
pub fn log_settings(configs: &BTreeMap<String, String>, defaults: &LogDefaults) -> LogSettings {
    let unbounded = |v: Option<u64>| v.filter(|n| *n < i64::MAX as u64);
    LogSettings {
        segment_bytes: positive(configs, "segment.bytes").unwrap_or(134_217_728),
        segment_ms: positive(configs, "segment.ms"),
        max_message_bytes: positive(configs, "max.message.bytes")
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1_048_588),
        flush_messages: unbounded(positive(configs, "flush.messages")),
        flush_ms: unbounded(positive(configs, "flush.ms")),
        timestamp_type: if effective(configs, "message.timestamp.type") == Some("LogAppendTime") {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        // a topic compacted without `delete` keeps the latest record of
        // every key however old or large the log is
        retention_bytes: positive(configs, "retention.bytes").filter(|_| deletes(configs)),
        retention_ms: positive(configs, "retention.ms").filter(|_| deletes(configs)),
        local_retention_bytes: local_retention(configs, "local.retention.bytes", "retention.bytes"),
        local_retention_ms: local_retention(configs, "local.retention.ms", "retention.ms"),
        write_caching: write_caching(configs, defaults),
        compacted: is_compacted(configs),
        compaction: compaction(configs),
        object_store_durable: metastore::topic_config::object_store_durable(configs),
    }
}

/// Whether `cleanup.policy` includes `delete` (the default).
fn deletes(configs: &BTreeMap<String, String>) -> bool {
    effective(configs, "cleanup.policy").is_none_or(|v| {
        v.split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("delete"))
    })
}

/// The cleaner settings of a compacted topic.
fn compaction(configs: &BTreeMap<String, String>) -> storage::CompactionConfig {
    let defaults = storage::CompactionConfig::default();
    let ratio = effective(configs, "min.cleanable.dirty.ratio")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|r| (0.0..=1.0).contains(r));
    storage::CompactionConfig {
        delete_retention_ms: positive(configs, "delete.retention.ms")
            .unwrap_or(defaults.delete_retention_ms),
        min_lag_ms: positive(configs, "min.compaction.lag.ms").unwrap_or(defaults.min_lag_ms),
        max_lag_ms: positive(configs, "max.compaction.lag.ms").filter(|v| *v < i64::MAX as u64),
        min_dirty_ratio_ppm: ratio.map_or(defaults.min_dirty_ratio_ppm, |r| {
            (r * 1_000_000.0).round() as u32
        }),
    }
}

/// Whether `cleanup.policy` includes `compact` (`compact` or `compact,delete`).
pub fn is_compacted(configs: &BTreeMap<String, String>) -> bool {
    effective(configs, "cleanup.policy").is_some_and(|v| {
        v.split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("compact"))
    })
}

/// A `local.retention.*` value: `-2` follows the total retention key, `-1`
/// is unlimited, anything else is capped by the total retention.
fn local_retention(configs: &BTreeMap<String, String>, local: &str, total: &str) -> Option<u64> {
    let total = positive(configs, total);
    match effective(configs, local).and_then(|v| v.parse::<i64>().ok()) {
        Some(-2) | None => total,
        Some(v) => u64::try_from(v).ok().map(|v| total.map_or(v, |t| v.min(t))),
    }
}

/// `min.insync.replicas` of a topic.
pub fn min_insync_replicas(configs: &BTreeMap<String, String>) -> usize {
    positive(configs, "min.insync.replicas").unwrap_or(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_in_the_catalogue_is_valid() {
        assert!(lookup("retention.ms").is_some());
        for d in catalogue() {
            validate(d.name, d.default).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        }
    }

    #[test]
    fn bad_values_are_rejected_with_the_reason() {
        let e = validate("retention.ms", "soon").expect_err("not a number");
        assert!(e.to_string().contains("retention.ms"), "{e}");
        assert!(validate("segment.bytes", "1000").is_err(), "below 1 MiB");
        assert!(validate("cleanup.policy", "forever").is_err());
        assert!(validate("no.such.key", "1").is_err());
        assert!(validate("retention.ms", "1000").is_ok());
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn settings_follow_explicit_configs_over_defaults() {
        let mut c = BTreeMap::new();
        assert_eq!(
            log_settings(&c, &LogDefaults::default()).segment_bytes,
            134_217_728
        );
        assert_eq!(log_settings(&c, &LogDefaults::default()).flush_ms, None);
        c.insert("message.timestamp.type".into(), "LogAppendTime".into());
        c.insert("flush.messages".into(), "1".into());
        let s = log_settings(&c, &LogDefaults::default());
        assert_eq!(s.timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(s.flush_messages, Some(1));
        assert_eq!(s.retention_bytes, None, "-1 means unlimited");
    }

    #[test]
    fn local_retention_follows_total_retention_unless_set() {
        let mut c = BTreeMap::new();
        assert_eq!(
            log_settings(&c, &LogDefaults::default()).local_retention_ms,
            Some(604_800_000),
            "-2 follows retention.ms"
        );
        assert_eq!(
            log_settings(&c, &LogDefaults::default()).local_retention_bytes,
            None,
            "retention.bytes is unlimited"
        );
        c.insert("local.retention.bytes".into(), "0".into());
        c.insert("local.retention.ms".into(), "-1".into());
        let s = log_settings(&c, &LogDefaults::default());
        assert_eq!(s.local_retention_bytes, Some(0));
        assert_eq!(s.local_retention_ms, None);
        c.insert("retention.bytes".into(), "100".into());
        c.insert("local.retention.bytes".into(), "500".into());
        assert_eq!(
            log_settings(&c, &LogDefaults::default()).local_retention_bytes,
            Some(100),
            "never above the total"
        );
    }
}
