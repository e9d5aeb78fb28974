//! What the native clients take from a workload: its producer settings
//! and the Kafka client properties that have a native equivalent, mapped
//! to the SDK's configs (the table in the driver's documentation).

use std::collections::BTreeMap;
use std::time::Duration;

use sdk::{ConsumerConfig, OffsetReset, ProducerConfig, StartAt};

use crate::error::LoadError;
use crate::workload::{Acks, Compression, Workload};

/// Every setting the native clients take from a workload.
#[derive(Debug, Clone)]
pub struct NativeSettings {
    pub producer: ProducerConfig,
    /// Unanswered sends at most before `send` says Full.
    pub max_pending_msgs: u64,
    /// Unanswered bytes at most before `send` says Full.
    pub max_pending_bytes: u64,
    pub consumer: ConsumerConfig,
    pub start: StartAt,
    /// Commit the group's offsets this often (`None`: never).
    pub auto_commit: Option<Duration>,
    /// Client properties of the workload with no native equivalent.
    pub ignored: Vec<String>,
}

fn bad_prop(key: &str, value: &str) -> LoadError {
    LoadError::InvalidWorkload {
        field: "producer_config/consumer_config",
        reason: format!("`{key}: {value}` is not a valid value for the native driver"),
    }
}

fn parse_prop<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, LoadError> {
    value.trim().parse().map_err(|_| bad_prop(key, value))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, LoadError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(bad_prop(key, value)),
    }
}

fn ms(key: &str, value: &str) -> Result<Duration, LoadError> {
    parse_prop::<u64>(key, value).map(Duration::from_millis)
}

fn acks(a: Acks) -> sdk::Acks {
    match a {
        Acks::None => sdk::Acks::None,
        Acks::Leader => sdk::Acks::Leader,
        Acks::All => sdk::Acks::All,
    }
}

fn compression(c: Compression) -> sdk::Compression {
    match c {
        Compression::None => sdk::Compression::None,
        Compression::Gzip => sdk::Compression::Gzip,
        Compression::Snappy => sdk::Compression::Snappy,
        Compression::Lz4 => sdk::Compression::Lz4,
        Compression::Zstd => sdk::Compression::Zstd,
    }
}

fn compression_prop(key: &str, value: &str) -> Result<sdk::Compression, LoadError> {
    let c = match value.trim() {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => return Err(bad_prop(key, value)),
    };
    Ok(compression(c))
}

fn acks_prop(key: &str, value: &str) -> Result<sdk::Acks, LoadError> {
    match value.trim() {
        "0" => Ok(sdk::Acks::None),
        "1" => Ok(sdk::Acks::Leader),
        "all" | "-1" => Ok(sdk::Acks::All),
        _ => Err(bad_prop(key, value)),
    }
}

impl NativeSettings {
    /// The native clients' settings for a workload: its producer settings
    /// and the Kafka properties with an equivalent (see the driver's
    /// documentation); the others are listed in `ignored`.
    pub fn from_workload(w: &Workload) -> Result<NativeSettings, LoadError> {
        let mut producer = ProducerConfig {
            acks: acks(w.acks),
            linger: Duration::from_millis(u64::from(w.linger_ms)),
            batch_bytes: w.batch_size as usize,
            compression: compression(w.compression),
            // librdkafka's default; the SDK's is true.
            idempotent: false,
            // librdkafka's queue.buffering.max.kbytes default.
            buffer_bytes: 1 << 30,
            ..ProducerConfig::default()
        };
        let mut max_pending_msgs: u64 = 100_000;
        let mut ignored = Vec::new();
        for (k, v) in &w.producer_config {
            match k.as_str() {
                "acks" | "request.required.acks" => producer.acks = acks_prop(k, v)?,
                "linger.ms" | "queue.buffering.max.ms" => producer.linger = ms(k, v)?,
                "batch.size" => producer.batch_bytes = parse_prop(k, v)?,
                "compression.type" | "compression.codec" => {
                    producer.compression = compression_prop(k, v)?
                }
                "enable.idempotence" => producer.idempotent = parse_bool(k, v)?,
                "request.timeout.ms" => producer.request_timeout = ms(k, v)?,
                "retries" | "message.send.max.retries" => producer.retries = parse_prop(k, v)?,
                "retry.backoff.ms" => producer.retry_backoff = ms(k, v)?,
                "retry.backoff.max.ms" => producer.retry_backoff_max = ms(k, v)?,
                "queue.buffering.max.messages" => max_pending_msgs = parse_prop(k, v)?,
                "queue.buffering.max.kbytes" => {
                    let kib: usize = parse_prop(k, v)?;
                    producer.buffer_bytes = kib.saturating_mul(1024).min(u32::MAX as usize);
                }
                "message.max.bytes" => producer.max_request_bytes = parse_prop(k, v)?,
                "client.id" => {}
                _ => ignored.push(format!("producer_config {k}")),
            }
        }
        if w.keys.is_some() {
            return Err(LoadError::InvalidWorkload {
                field: "keys",
                reason: "keyed records are sent by the Kafka driver only".into(),
            });
        }
        if producer.idempotent && producer.acks != sdk::Acks::All {
            return Err(LoadError::InvalidWorkload {
                field: "producer_config",
                reason: "enable.idempotence needs acks: all".into(),
            });
        }
        let mut consumer = ConsumerConfig::default();
        let mut start = StartAt::Earliest;
        let mut auto_commit = Some(Duration::from_secs(5));
        let mut commit_every = Duration::from_secs(5);
        // What the Kafka driver sets before the workload's own entries.
        let mut props = BTreeMap::from([
            ("auto.offset.reset".to_string(), "earliest".to_string()),
            ("enable.auto.commit".to_string(), "true".to_string()),
        ]);
        props.extend(w.consumer_config.clone());
        // librdkafka's default: its consumers do not check batch CRCs, so
        // neither do these unless the workload asks (the load generator
        // checks every payload's own checksum either way)
        consumer.check_crcs = false;
        for (k, v) in &props {
            match k.as_str() {
                "auto.offset.reset" => {
                    (start, consumer.offset_reset) = match v.trim() {
                        "earliest" | "smallest" | "beginning" => {
                            (StartAt::Earliest, OffsetReset::Earliest)
                        }
                        "latest" | "largest" | "end" => (StartAt::Latest, OffsetReset::Latest),
                        "error" => (StartAt::Earliest, OffsetReset::Fail),
                        _ => return Err(bad_prop(k, v)),
                    }
                }
                "enable.auto.commit" => {
                    auto_commit = parse_bool(k, v)?.then_some(Duration::ZERO);
                }
                "auto.commit.interval.ms" => commit_every = ms(k, v)?,
                "fetch.wait.max.ms" => consumer.max_wait = ms(k, v)?,
                "fetch.min.bytes" => consumer.min_bytes = parse_prop(k, v)?,
                "fetch.max.bytes" => consumer.max_bytes = parse_prop(k, v)?,
                "max.partition.fetch.bytes" => consumer.partition_max_bytes = parse_prop(k, v)?,
                "check.crcs" => consumer.check_crcs = parse_bool(k, v)?,
                "client.id" | "enable.partition.eof" | "group.id" => {}
                _ => ignored.push(format!("consumer_config {k}")),
            }
        }
        let auto_commit = auto_commit.map(|_| commit_every.max(Duration::from_millis(100)));
        Ok(NativeSettings {
            max_pending_bytes: producer.buffer_bytes as u64,
            producer,
            max_pending_msgs: max_pending_msgs.max(1),
            consumer,
            start,
            auto_commit,
            ignored,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(extra: &str) -> Workload {
        Workload::from_yaml(&format!(
            "name: t\npartitions: 8\nmessage_size: 1024\nproducers: 2\nconsumers: 2\nrate: 1000\nacks: 1\nlinger_ms: 3\nbatch_size: 65536\ncompression: lz4\nwarmup: 1s\nduration: 2s\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn workload_settings_map_to_the_sdk_producer() {
        let s = NativeSettings::from_workload(&workload("")).unwrap();
        let p = &s.producer;
        assert_eq!(p.acks, sdk::Acks::Leader);
        assert_eq!(p.linger, Duration::from_millis(3));
        assert_eq!(p.batch_bytes, 65536);
        assert_eq!(p.compression, sdk::Compression::Lz4);
        assert!(!p.idempotent, "librdkafka's default");
        assert_eq!(
            (s.max_pending_msgs, s.max_pending_bytes),
            (100_000, 1 << 30)
        );
        assert_eq!(s.start, StartAt::Earliest);
        assert_eq!(s.auto_commit, Some(Duration::from_secs(5)));
        assert!(s.ignored.is_empty());
    }

    #[test]
    fn kafka_properties_with_an_equivalent_map_and_the_rest_are_listed() {
        let s = NativeSettings::from_workload(&workload(
            "producer_config:\n  linger.ms: \"7\"\n  queue.buffering.max.messages: \"500\"\n  batch.num.messages: \"100\"\nconsumer_config:\n  auto.offset.reset: latest\n  fetch.wait.max.ms: \"50\"\n  enable.auto.commit: \"false\"\n  session.timeout.ms: \"6000\"\n",
        ))
        .unwrap();
        assert_eq!(s.producer.linger, Duration::from_millis(7));
        assert_eq!(s.max_pending_msgs, 500);
        assert_eq!(
            (s.start, s.consumer.offset_reset),
            (StartAt::Latest, OffsetReset::Latest)
        );
        assert_eq!(s.consumer.max_wait, Duration::from_millis(50));
        assert_eq!(s.auto_commit, None);
        assert!(!s.consumer.check_crcs, "librdkafka's default");
        let checked =
            NativeSettings::from_workload(&workload("consumer_config:\n  check.crcs: \"true\"\n"))
                .unwrap();
        assert!(checked.consumer.check_crcs);
        assert_eq!(
            s.ignored,
            vec![
                "producer_config batch.num.messages".to_string(),
                "consumer_config session.timeout.ms".to_string()
            ]
        );
    }

    #[test]
    fn idempotence_without_acks_all_is_refused_and_bad_values_are_named() {
        let err = NativeSettings::from_workload(&workload(
            "producer_config:\n  enable.idempotence: \"true\"\n",
        ))
        .unwrap_err();
        assert!(err.to_string().contains("acks"), "{err}");
        let err = NativeSettings::from_workload(&workload("producer_config:\n  linger.ms: soon\n"))
            .unwrap_err();
        assert!(err.to_string().contains("linger.ms: soon"), "{err}");
    }
}
