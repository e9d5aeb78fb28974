//! The catalogue of topic configs: every key Kafka clients may set on a
//! topic, its type, its default and the values it accepts.
//!
//! Topics store only the keys set explicitly; everything else takes the
//! default listed here, so DescribeConfigs can list all keys with
//! `is_default`. Values are kept as the strings the client sent (as Kafka
//! does); the typed getters parse them.
//!
//! The checks here ([`validate_topic_name`], [`validate`], [`validate_all`],
//! [`apply_ops`]) are the ones the state machine applies, public so that a
//! front end can refuse a bad request before it reaches the metastore
//! without keeping its own copy of the rules.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::MetaError;

/// Kafka's limit on topic name length.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name the way Kafka does.
pub fn validate_topic_name(name: &str) -> Result<(), MetaError> {
    let bad = |reason: &str| {
        Err(MetaError::InvalidTopicName {
            name: name.to_owned(),
            reason: reason.to_owned(),
        })
    };
    if name.is_empty() {
        return bad("the name is empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not allowed");
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return bad("the name is longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// One change in IncrementalAlterConfigs / AlterConfigs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigOp {
    Set(String, String),
    /// Back to the default.
    Delete(String),
    /// Add list items (list-typed keys only, e.g. `cleanup.policy`).
    Append(String, String),
    /// Remove list items (list-typed keys only).
    Subtract(String, String),
}

/// Kafka's config value types (the numbers are DescribeConfigs' `config_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Long,
    Double,
    List,
}

impl ConfigType {
    /// The `config_type` code of DescribeConfigs v3+.
    pub fn kafka_code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Rule {
    Any,
    /// Inclusive bounds for Int and Long.
    AtLeast(i64),
    Between(i64, i64),
    /// `-1`, or an inclusive range (gzip level).
    MinusOneOrBetween(i64, i64),
    UnitInterval,
    OneOf(&'static [&'static str]),
    /// A non-empty list drawn from these items.
    ListOf(&'static [&'static str]),
    /// `*` or `partition:agent` pairs.
    ThrottledReplicas,
}

/// One topic config key.
#[derive(Debug, Clone, Copy)]
pub struct ConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    pub default: &'static str,
    pub doc: &'static str,
    rule: Rule,
}

const LONG_MAX: &str = "9223372036854775807";

const fn def(
    name: &'static str,
    kind: ConfigType,
    default: &'static str,
    rule: Rule,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        kind,
        default,
        doc,
        rule,
    }
}

use ConfigType::{Boolean, Double, Int, List, Long, String as Str};

/// AeroStream rolls segments at 128 MiB (Kafka: 1 GiB) so sealed objects
/// reach object storage sooner.
pub const DEFAULT_SEGMENT_BYTES: i64 = 134_217_728;

/// Broker-side schema validation of record keys (Confluent's key): each
/// key must carry the id of a live version of subject `<topic>-key`.
pub const KEY_SCHEMA_VALIDATION: &str = "confluent.key.schema.validation";
/// Broker-side schema validation of record values: each value must carry
/// the id of a live version of subject `<topic>-value`.
pub const VALUE_SCHEMA_VALIDATION: &str = "confluent.value.schema.validation";

static CATALOGUE: &[ConfigDef] = &[
    def(
        "cleanup.policy",
        List,
        "delete",
        Rule::ListOf(&["delete", "compact"]),
        "Whether old segments are deleted by retention, compacted by key, or both.",
    ),
    def(
        "compression.gzip.level",
        Int,
        "-1",
        Rule::MinusOneOrBetween(1, 9),
        "gzip level when the topic recompresses with gzip.",
    ),
    def(
        "compression.lz4.level",
        Int,
        "9",
        Rule::Between(1, 17),
        "lz4 level when the topic recompresses with lz4.",
    ),
    def(
        "compression.type",
        Str,
        "producer",
        Rule::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        "Codec batches are stored with; 'producer' keeps what the client sent.",
    ),
    def(
        "compression.zstd.level",
        Int,
        "3",
        Rule::Between(-131_072, 22),
        "zstd level when the topic recompresses with zstd.",
    ),
    def(
        KEY_SCHEMA_VALIDATION,
        Boolean,
        "false",
        Rule::Any,
        "Refuse records whose key is not in the schema registry's wire format (magic byte 0, then the id of a live version of subject <topic>-key).",
    ),
    def(
        VALUE_SCHEMA_VALIDATION,
        Boolean,
        "false",
        Rule::Any,
        "Refuse records whose value is not in the schema registry's wire format (magic byte 0, then the id of a live version of subject <topic>-value).",
    ),
    def(
        "delete.retention.ms",
        Long,
        "86400000",
        Rule::AtLeast(0),
        "How long tombstones stay readable in a compacted topic.",
    ),
    def(
        "durability",
        Str,
        "replicas",
        Rule::OneOf(&["replicas", "object-store"]),
        "AeroStream: where an acks=all write is durable before it is acknowledged: on the in-sync replicas (replicas), or in object storage (object-store: batched with other partitions' writes into one object every few ms; followers copy nothing, and a new leader rebuilds the log from object storage). Chosen when the topic is created.",
    ),
    def(
        "file.delete.delay.ms",
        Long,
        "60000",
        Rule::AtLeast(0),
        "Delay before a deleted local segment file is removed.",
    ),
    def(
        "flush.messages",
        Long,
        LONG_MAX,
        Rule::AtLeast(1),
        "fsync the log after this many messages.",
    ),
    def(
        "flush.ms",
        Long,
        LONG_MAX,
        Rule::AtLeast(0),
        "fsync the log when this much time passed since the last fsync.",
    ),
    def(
        "follower.replication.throttled.replicas",
        List,
        "",
        Rule::ThrottledReplicas,
        "Replicas whose follower fetches are throttled.",
    ),
    def(
        "index.interval.bytes",
        Int,
        "4096",
        Rule::AtLeast(0),
        "Bytes between two entries of the sparse offset index.",
    ),
    def(
        "leader.replication.throttled.replicas",
        List,
        "",
        Rule::ThrottledReplicas,
        "Replicas whose leader-side replication is throttled.",
    ),
    def(
        "local.retention.bytes",
        Long,
        "-2",
        Rule::AtLeast(-2),
        "Bytes kept on local disk per partition once tiered; -2 follows retention.bytes.",
    ),
    def(
        "local.retention.ms",
        Long,
        "-2",
        Rule::AtLeast(-2),
        "Time data stays on local disk once tiered; -2 follows retention.ms.",
    ),
    def(
        "max.compaction.lag.ms",
        Long,
        LONG_MAX,
        Rule::AtLeast(1),
        "Longest a record may stay uncompacted.",
    ),
    def(
        "max.message.bytes",
        Int,
        "1048588",
        Rule::AtLeast(0),
        "Largest record batch the topic accepts.",
    ),
    def(
        "message.timestamp.after.max.ms",
        Long,
        "3600000",
        Rule::AtLeast(0),
        "How far in the future a CreateTime timestamp may be.",
    ),
    def(
        "message.timestamp.before.max.ms",
        Long,
        LONG_MAX,
        Rule::AtLeast(0),
        "How far in the past a CreateTime timestamp may be.",
    ),
    def(
        "message.timestamp.type",
        Str,
        "CreateTime",
        Rule::OneOf(&["CreateTime", "LogAppendTime"]),
        "Whether record timestamps come from the producer or the broker.",
    ),
    def(
        "min.cleanable.dirty.ratio",
        Double,
        "0.5",
        Rule::UnitInterval,
        "Share of uncompacted log that triggers compaction.",
    ),
    def(
        "min.compaction.lag.ms",
        Long,
        "0",
        Rule::AtLeast(0),
        "Shortest time a record stays uncompacted.",
    ),
    def(
        "min.insync.replicas",
        Int,
        "1",
        Rule::AtLeast(1),
        "In-sync replicas needed for an acks=all write.",
    ),
    def(
        "preallocate",
        Boolean,
        "false",
        Rule::Any,
        "Preallocate segment files on disk.",
    ),
    def(
        "remote.log.copy.disable",
        Boolean,
        "false",
        Rule::Any,
        "Stop copying new segments to object storage.",
    ),
    def(
        "remote.log.delete.on.disable",
        Boolean,
        "false",
        Rule::Any,
        "Delete tiered data when tiering is turned off.",
    ),
    def(
        "remote.storage.enable",
        Boolean,
        "false",
        Rule::Any,
        "Kafka's tiered storage switch; AeroStream always tiers.",
    ),
    def(
        "retention.bytes",
        Long,
        "-1",
        Rule::Any,
        "Bytes kept per partition before old segments go; -1 means no limit.",
    ),
    def(
        "retention.ms",
        Long,
        "604800000",
        Rule::AtLeast(-1),
        "Time records are kept; -1 means forever.",
    ),
    def(
        "segment.bytes",
        Int,
        "134217728",
        Rule::AtLeast(1_048_576),
        "Segment size at which the log rolls (and the sealed segment tiers).",
    ),
    def(
        "segment.index.bytes",
        Int,
        "10485760",
        Rule::AtLeast(4),
        "Maximum size of a segment's offset index.",
    ),
    def(
        "segment.jitter.ms",
        Long,
        "0",
        Rule::AtLeast(0),
        "Random jitter subtracted from segment.ms.",
    ),
    def(
        "segment.ms",
        Long,
        "604800000",
        Rule::AtLeast(1),
        "Age at which the active segment rolls even if not full.",
    ),
    def(
        "unclean.leader.election.enable",
        Boolean,
        "false",
        Rule::Any,
        "Allow an out-of-sync replica to become leader (may lose records).",
    ),
    def(
        "write.caching",
        Boolean,
        "true",
        Rule::Any,
        "AeroStream: acknowledge acks=all writes from the page cache (true) or only after a shared fdatasync, with consumers seeing only fsynced data (false). Unset topics follow the broker's --write-caching.",
    ),
];

/// Every topic config key, sorted by name.
pub fn catalogue() -> &'static [ConfigDef] {
    CATALOGUE
}

pub fn lookup(name: &str) -> Option<&'static ConfigDef> {
    CATALOGUE.iter().find(|d| d.name == name)
}

/// The effective value of `key`: explicit, else the default. `None` for an unknown key.
pub fn effective<'a>(configs: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    match configs.get(key) {
        Some(v) => Some(v.as_str()),
        None => lookup(key).map(|d| d.default),
    }
}

/// Effective value of a Long/Int key, parsed. Values are validated on the
/// way in, so this only falls back to the default for keys that predate a
/// tightened rule.
pub fn effective_i64(configs: &BTreeMap<String, String>, key: &str) -> Option<i64> {
    let parsed = configs.get(key).and_then(|v| v.trim().parse::<i64>().ok());
    parsed.or_else(|| lookup(key).and_then(|d| d.default.parse().ok()))
}

/// Effective value of a Boolean key.
pub fn effective_bool(configs: &BTreeMap<String, String>, key: &str) -> Option<bool> {
    let parsed = configs.get(key).and_then(|v| parse_bool(v));
    parsed.or_else(|| lookup(key).and_then(|d| parse_bool(d.default)))
}

/// One row of DescribeConfigs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedConfig {
    pub name: &'static str,
    pub value: String,
    pub is_default: bool,
    pub kind: ConfigType,
    pub doc: &'static str,
}

/// All keys with their effective values.
pub fn describe(configs: &BTreeMap<String, String>) -> Vec<ResolvedConfig> {
    CATALOGUE
        .iter()
        .map(|d| match configs.get(d.name) {
            Some(v) => ResolvedConfig {
                name: d.name,
                value: v.clone(),
                is_default: false,
                kind: d.kind,
                doc: d.doc,
            },
            None => ResolvedConfig {
                name: d.name,
                value: d.default.to_owned(),
                is_default: true,
                kind: d.kind,
                doc: d.doc,
            },
        })
        .collect()
}

fn parse_bool(v: &str) -> Option<bool> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Splits a list value as Kafka does: comma separated, blanks trimmed, empty string is the empty list.
pub fn list_items(value: &str) -> Vec<String> {
    let value = value.trim();
    if value.is_empty() {
        return Vec::new();
    }
    value.split(',').map(|s| s.trim().to_owned()).collect()
}

fn invalid(key: &str, reason: impl Into<String>) -> MetaError {
    MetaError::InvalidConfig {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// Whether the topic's acks=all writes are durable in object storage
/// rather than on replicas (`durability=object-store`).
pub fn object_store_durable(configs: &BTreeMap<String, String>) -> bool {
    effective(configs, "durability").is_some_and(|v| v.trim() == "object-store")
}

/// Checks one key/value pair.
pub fn validate(key: &str, value: &str) -> Result<(), MetaError> {
    let d = lookup(key).ok_or_else(|| invalid(key, "unknown topic config"))?;
    let trimmed = value.trim();
    match d.kind {
        ConfigType::Boolean => {
            parse_bool(value)
                .ok_or_else(|| invalid(key, format!("'{value}' is not true or false")))?;
        }
        ConfigType::Int => {
            let n = trimmed
                .parse::<i32>()
                .map_err(|_| invalid(key, format!("'{value}' is not a 32-bit integer")))?;
            check_range(key, d.rule, i64::from(n))?;
        }
        ConfigType::Long => {
            let n = trimmed
                .parse::<i64>()
                .map_err(|_| invalid(key, format!("'{value}' is not a 64-bit integer")))?;
            check_range(key, d.rule, n)?;
        }
        ConfigType::Double => {
            let x = trimmed
                .parse::<f64>()
                .map_err(|_| invalid(key, format!("'{value}' is not a number")))?;
            if matches!(d.rule, Rule::UnitInterval) && !(0.0..=1.0).contains(&x) {
                return Err(invalid(key, format!("{x} is not between 0 and 1")));
            }
        }
        ConfigType::String => {
            if let Rule::OneOf(allowed) = d.rule {
                if !allowed.contains(&trimmed) {
                    return Err(invalid(
                        key,
                        format!("'{value}' is not one of {}", allowed.join(", ")),
                    ));
                }
            }
        }
        ConfigType::List => check_list(key, d.rule, value)?,
    }
    Ok(())
}

fn check_range(key: &str, rule: Rule, n: i64) -> Result<(), MetaError> {
    match rule {
        Rule::AtLeast(min) if n < min => {
            Err(invalid(key, format!("{n} is below the minimum {min}")))
        }
        Rule::Between(lo, hi) if n < lo || n > hi => {
            Err(invalid(key, format!("{n} is not between {lo} and {hi}")))
        }
        Rule::MinusOneOrBetween(lo, hi) if n != -1 && (n < lo || n > hi) => Err(invalid(
            key,
            format!("{n} is neither -1 nor between {lo} and {hi}"),
        )),
        _ => Ok(()),
    }
}

fn check_list(key: &str, rule: Rule, value: &str) -> Result<(), MetaError> {
    let items = list_items(value);
    match rule {
        Rule::ListOf(allowed) => {
            if items.is_empty() {
                return Err(invalid(
                    key,
                    format!("must name at least one of {}", allowed.join(", ")),
                ));
            }
            if let Some(bad) = items.iter().find(|i| !allowed.contains(&i.as_str())) {
                return Err(invalid(
                    key,
                    format!("'{bad}' is not one of {}", allowed.join(", ")),
                ));
            }
        }
        Rule::ThrottledReplicas => {
            if items.len() == 1 && items[0] == "*" {
                return Ok(());
            }
            for item in &items {
                let ok = item.split_once(':').is_some_and(|(p, a)| {
                    p.trim().parse::<u32>().is_ok() && a.trim().parse::<u32>().is_ok()
                });
                if !ok {
                    return Err(invalid(
                        key,
                        format!("'{item}' is not '*' or partition:agent"),
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks a whole topic config set: each pair, then the rules that tie keys together.
pub fn validate_all(configs: &BTreeMap<String, String>) -> Result<(), MetaError> {
    for (k, v) in configs {
        validate(k, v)?;
    }
    let get = |k: &str| effective_i64(configs, k).unwrap_or(0);
    let (retention_ms, local_ms) = (get("retention.ms"), get("local.retention.ms"));
    if local_ms >= 0 && retention_ms >= 0 && local_ms > retention_ms {
        return Err(invalid(
            "local.retention.ms",
            format!("{local_ms} exceeds retention.ms {retention_ms}; local data cannot outlive the topic's retention"),
        ));
    }
    let (retention_bytes, local_bytes) = (get("retention.bytes"), get("local.retention.bytes"));
    if local_bytes >= 0 && retention_bytes >= 0 && local_bytes > retention_bytes {
        return Err(invalid(
            "local.retention.bytes",
            format!("{local_bytes} exceeds retention.bytes {retention_bytes}"),
        ));
    }
    let (min_lag, max_lag) = (get("min.compaction.lag.ms"), get("max.compaction.lag.ms"));
    if min_lag > max_lag {
        return Err(invalid(
            "min.compaction.lag.ms",
            format!("{min_lag} is greater than max.compaction.lag.ms {max_lag}"),
        ));
    }
    Ok(())
}

/// Applies IncrementalAlterConfigs-style operations to a copy of `current`
/// (or replaces it when `replace_all`, as legacy AlterConfigs does) and
/// validates the result.
pub fn apply_ops(
    current: &BTreeMap<String, String>,
    ops: &[ConfigOp],
    replace_all: bool,
) -> Result<BTreeMap<String, String>, MetaError> {
    let mut next = if replace_all {
        BTreeMap::new()
    } else {
        current.clone()
    };
    for op in ops {
        match op {
            ConfigOp::Set(k, v) => {
                lookup(k).ok_or_else(|| invalid(k, "unknown topic config"))?;
                next.insert(k.clone(), v.clone());
            }
            ConfigOp::Delete(k) => {
                lookup(k).ok_or_else(|| invalid(k, "unknown topic config"))?;
                next.remove(k);
            }
            ConfigOp::Append(k, v) | ConfigOp::Subtract(k, v) => {
                let d = lookup(k).ok_or_else(|| invalid(k, "unknown topic config"))?;
                if d.kind != ConfigType::List {
                    return Err(invalid(k, "append and subtract apply only to list configs"));
                }
                let base = next.get(k).map(String::as_str).unwrap_or(d.default);
                let mut items = list_items(base);
                for item in list_items(v) {
                    if matches!(op, ConfigOp::Append(..)) {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|i| *i != item);
                    }
                }
                next.insert(k.clone(), items.join(","));
            }
        }
    }
    validate_all(&next)?;
    Ok(next)
}

#[cfg(test)]
#[path = "topic_config_tests.rs"]
mod tests;
