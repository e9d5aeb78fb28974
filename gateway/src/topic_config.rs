//! The topic configuration keys AeroStream understands, with Kafka's defaults,
//! and their translation into [`LogSettings`].

use std::collections::BTreeMap;

use crate::backend::{CatalogError, LogSettings, TimestampType};

/// Kafka's config value types, numbered as DescribeConfigs v3+ reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// One known topic config.
#[derive(Debug, Clone, Copy)]
pub struct ConfigDef {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: ConfigType,
    /// Accepted values for string configs; empty means any.
    pub choices: &'static [&'static str],
    /// Smallest accepted value for numeric configs.
    pub min: i64,
}

const fn def(name: &'static str, default: &'static str, kind: ConfigType, min: i64) -> ConfigDef {
    ConfigDef {
        name,
        default,
        kind,
        choices: &[],
        min,
    }
}

const LONG_MAX: &str = "9223372036854775807";

/// Every topic config with its default, sorted by name.
pub const CATALOGUE: &[ConfigDef] = &[
    ConfigDef {
        name: "cleanup.policy",
        default: "delete",
        kind: ConfigType::List,
        choices: &["delete", "compact", "compact,delete", "delete,compact"],
        min: 0,
    },
    ConfigDef {
        name: "compression.type",
        default: "producer",
        kind: ConfigType::String,
        choices: &["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"],
        min: 0,
    },
    def("delete.retention.ms", "86400000", ConfigType::Long, 0),
    def("file.delete.delay.ms", "60000", ConfigType::Long, 0),
    def("flush.messages", LONG_MAX, ConfigType::Long, 1),
    def("flush.ms", LONG_MAX, ConfigType::Long, 0),
    def("index.interval.bytes", "4096", ConfigType::Int, 0),
    def("local.retention.bytes", "-2", ConfigType::Long, -2),
    def("local.retention.ms", "-2", ConfigType::Long, -2),
    def("max.compaction.lag.ms", LONG_MAX, ConfigType::Long, 1),
    def("max.message.bytes", "1048588", ConfigType::Int, 0),
    def(
        "message.timestamp.after.max.ms",
        LONG_MAX,
        ConfigType::Long,
        0,
    ),
    def(
        "message.timestamp.before.max.ms",
        LONG_MAX,
        ConfigType::Long,
        0,
    ),
    ConfigDef {
        name: "message.timestamp.type",
        default: "CreateTime",
        kind: ConfigType::String,
        choices: &["CreateTime", "LogAppendTime"],
        min: 0,
    },
    def("min.cleanable.dirty.ratio", "0.5", ConfigType::Double, 0),
    def("min.compaction.lag.ms", "0", ConfigType::Long, 0),
    def("min.insync.replicas", "1", ConfigType::Int, 1),
    def("preallocate", "false", ConfigType::Boolean, 0),
    def("remote.storage.enable", "false", ConfigType::Boolean, 0),
    def("retention.bytes", "-1", ConfigType::Long, -1),
    def("retention.ms", "604800000", ConfigType::Long, -1),
    def("segment.bytes", "134217728", ConfigType::Int, 1_048_576),
    def("segment.index.bytes", "10485760", ConfigType::Int, 4),
    def("segment.jitter.ms", "0", ConfigType::Long, 0),
    def("segment.ms", "604800000", ConfigType::Long, 1),
    def(
        "unclean.leader.election.enable",
        "false",
        ConfigType::Boolean,
        0,
    ),
];

/// Looks up a known config.
pub fn lookup(name: &str) -> Option<&'static ConfigDef> {
    CATALOGUE.iter().find(|d| d.name == name)
}

fn invalid(key: &str, reason: impl Into<String>) -> CatalogError {
    CatalogError::InvalidConfig {
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// Rejects keys AeroStream does not know.
pub fn validate_key(key: &str) -> Result<&'static ConfigDef, CatalogError> {
    lookup(key).ok_or_else(|| invalid(key, "unknown topic config"))
}

/// Checks a key and value, with a message a person can act on.
pub fn validate(key: &str, value: &str) -> Result<(), CatalogError> {
    let d = validate_key(key)?;
    match d.kind {
        ConfigType::Boolean => {
            if !value.eq_ignore_ascii_case("true") && !value.eq_ignore_ascii_case("false") {
                return Err(invalid(key, format!("'{value}' is not true or false")));
            }
        }
        ConfigType::Int | ConfigType::Long => {
            let n: i64 = value
                .trim()
                .parse()
                .map_err(|_| invalid(key, format!("'{value}' is not a whole number")))?;
            if d.kind == ConfigType::Int && i32::try_from(n).is_err() {
                return Err(invalid(key, format!("{n} does not fit a 32-bit integer")));
            }
            if n < d.min {
                return Err(invalid(key, format!("{n} is below the minimum {}", d.min)));
            }
        }
        ConfigType::Double => {
            let x: f64 = value
                .trim()
                .parse()
                .map_err(|_| invalid(key, format!("'{value}' is not a number")))?;
            if !(0.0..=1.0).contains(&x) {
                return Err(invalid(key, format!("{x} is not between 0 and 1")));
            }
        }
        ConfigType::String | ConfigType::List => {
            if !d.choices.is_empty() && !d.choices.contains(&value) {
                return Err(invalid(
                    key,
                    format!("'{value}' is not one of {}", d.choices.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

/// Kafka's topic-name rules: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), CatalogError> {
    let bad = |reason: &str| CatalogError::InvalidTopicName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("the name is empty"));
    }
    if name == "." || name == ".." {
        return Err(bad("'.' and '..' are not allowed"));
    }
    if name.len() > 249 {
        return Err(bad("longer than 249 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(bad(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

/// The effective value of a config: explicitly set, else the default.
pub fn effective<'a>(configs: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    configs
        .get(name)
        .map(String::as_str)
        .or_else(|| lookup(name).map(|d| d.default))
}

fn positive(configs: &BTreeMap<String, String>, name: &str) -> Option<u64> {
    effective(configs, name)
        .and_then(|v| v.parse::<i64>().ok())
        .and_then(|n| u64::try_from(n).ok())
}

/// Translates a topic's configs into partition-log settings.
pub fn log_settings(configs: &BTreeMap<String, String>) -> LogSettings {
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
        retention_bytes: positive(configs, "retention.bytes"),
        retention_ms: positive(configs, "retention.ms"),
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
    fn catalogue_is_sorted_and_every_default_is_valid() {
        for pair in CATALOGUE.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        for d in CATALOGUE {
            validate(d.name, d.default).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        }
    }

    #[test]
    fn bad_values_are_rejected_with_the_reason() {
        let e = validate("retention.ms", "soon").expect_err("not a number");
        assert!(e.to_string().contains("not a whole number"), "{e}");
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
        assert_eq!(log_settings(&c).segment_bytes, 134_217_728);
        assert_eq!(log_settings(&c).flush_ms, None);
        c.insert("message.timestamp.type".into(), "LogAppendTime".into());
        c.insert("flush.messages".into(), "1".into());
        let s = log_settings(&c);
        assert_eq!(s.timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(s.flush_messages, Some(1));
        assert_eq!(s.retention_bytes, None, "-1 means unlimited");
    }
}
