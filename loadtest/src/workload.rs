//! Workload files: the YAML shape of one benchmark, mirroring the knobs of
//! the OpenMessaging Benchmark's Kafka driver (one topic, P partitions, N
//! producers at a total offered rate, M consumers in one group).
//!
//! ```yaml
//! name: small-20k
//! partitions: 8
//! message_size: 1024
//! producers: 2
//! consumers: 2
//! rate: 20000        # total msg/s over all producers, or `max`
//! acks: all          # 0, 1 or all
//! linger_ms: 1
//! batch_size: 131072
//! compression: none
//! warmup: 10s
//! duration: 60s
//! drain_timeout: 60s
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LoadError;
use crate::payload::{FRAME_LEN, HEADER_LEN};

/// Largest message the tool will generate; above this brokers' default
/// `max.message.bytes` would reject a batch of one.
pub const MAX_MESSAGE_SIZE: usize = 1_000_000;

/// One benchmark's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub partitions: u32,
    pub message_size: usize,
    pub producers: u32,
    pub consumers: u32,
    pub rate: Rate,
    #[serde(default)]
    pub acks: Acks,
    #[serde(default = "default_linger_ms")]
    pub linger_ms: u32,
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    #[serde(default)]
    pub compression: Compression,
    #[serde(with = "human_duration")]
    pub warmup: Duration,
    #[serde(with = "human_duration")]
    pub duration: Duration,
    #[serde(with = "human_duration", default = "default_drain")]
    pub drain_timeout: Duration,
    /// Records carry one of this many keys (`0`, `1`, ... in turn, per
    /// producer), so a compacted topic accepts them and keeps that many
    /// live records per partition at most. `None`: no key (Kafka driver only).
    #[serde(default)]
    pub keys: Option<u64>,
    /// Values framed as Confluent's serializers frame them: magic byte 0
    /// and this schema id first (for a topic with broker-side schema
    /// validation, `confluent.value.schema.validation`), counted in
    /// `message_size`.
    #[serde(default)]
    pub value_schema_id: Option<u32>,
    /// Topic configs set at creation (e.g. `segment.bytes`).
    #[serde(default)]
    pub topic_config: BTreeMap<String, String>,
    /// Extra client properties passed verbatim to every producer.
    #[serde(default)]
    pub producer_config: BTreeMap<String, String>,
    /// Extra client properties passed verbatim to every consumer.
    #[serde(default)]
    pub consumer_config: BTreeMap<String, String>,
    /// Client properties for every Kafka client of the run (producers,
    /// consumers and the admin client), under the two maps above: how to
    /// reach the broker (`security.protocol`, `ssl.ca.location`, SASL).
    #[serde(default)]
    pub client_config: BTreeMap<String, String>,
}

fn default_linger_ms() -> u32 {
    1
}
fn default_batch_size() -> u32 {
    131_072
}
fn default_drain() -> Duration {
    Duration::from_secs(60)
}

/// Command-line overrides applied on top of a workload file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub rate: Option<Rate>,
    pub warmup: Option<Duration>,
    pub duration: Option<Duration>,
    pub drain_timeout: Option<Duration>,
}

impl Workload {
    /// Reads and validates a workload file.
    pub fn from_file(path: &Path) -> Result<Workload, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::WorkloadRead {
            path: path.to_path_buf(),
            source,
        })?;
        let workload: Workload =
            serde_yaml::from_str(&text).map_err(|e| LoadError::WorkloadParse {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        workload.validate()?;
        Ok(workload)
    }

    /// Parses and validates a workload from YAML text.
    pub fn from_yaml(text: &str) -> Result<Workload, LoadError> {
        let workload: Workload =
            serde_yaml::from_str(text).map_err(|e| LoadError::WorkloadParse {
                path: "<inline>".into(),
                reason: e.to_string(),
            })?;
        workload.validate()?;
        Ok(workload)
    }

    /// Applies command-line overrides and validates the result again.
    pub fn with_overrides(mut self, o: &Overrides) -> Result<Workload, LoadError> {
        if let Some(rate) = o.rate {
            self.rate = rate;
        }
        if let Some(d) = o.warmup {
            self.warmup = d;
        }
        if let Some(d) = o.duration {
            self.duration = d;
        }
        if let Some(d) = o.drain_timeout {
            self.drain_timeout = d;
        }
        self.validate()?;
        Ok(self)
    }

    /// Rejects shapes the runner cannot honour.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |field, reason: String| Err(LoadError::InvalidWorkload { field, reason });
        if self.name.trim().is_empty() {
            return bad("name", "must not be empty".into());
        }
        if self.partitions == 0 {
            return bad("partitions", "must be at least 1".into());
        }
        if self.producers == 0 {
            return bad("producers", "must be at least 1".into());
        }
        if self.consumers == 0 {
            return bad(
                "consumers",
                "must be at least 1 (end-to-end latency and the delivery check need consumers)"
                    .into(),
            );
        }
        let least = HEADER_LEN
            + if self.value_schema_id.is_some() {
                FRAME_LEN
            } else {
                0
            };
        if self.message_size < least || self.message_size > MAX_MESSAGE_SIZE {
            return bad(
                "message_size",
                format!("must be between {least} and {MAX_MESSAGE_SIZE} bytes"),
            );
        }
        if let Rate::Fixed(0) = self.rate {
            return bad("rate", "must be above 0 msg/s (or `max`)".into());
        }
        if self.duration.is_zero() {
            return bad("duration", "must be longer than 0".into());
        }
        if self.batch_size == 0 {
            return bad("batch_size", "must be at least 1 byte".into());
        }
        Ok(())
    }
}

/// Total offered rate over all producers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RateRepr", into = "RateRepr")]
pub enum Rate {
    /// A fixed number of messages per second, split evenly over producers.
    Fixed(u64),
    /// Find the highest rate the broker sustains: an adaptive controller
    /// raises the rate while consumers keep up and lowers it when a backlog
    /// builds.
    Max,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RateRepr {
    Number(u64),
    Text(String),
}

impl TryFrom<RateRepr> for Rate {
    type Error = String;
    fn try_from(r: RateRepr) -> Result<Rate, String> {
        match r {
            RateRepr::Number(n) => Ok(Rate::Fixed(n)),
            RateRepr::Text(t) => t.parse(),
        }
    }
}

impl From<Rate> for RateRepr {
    fn from(r: Rate) -> RateRepr {
        match r {
            Rate::Fixed(n) => RateRepr::Number(n),
            Rate::Max => RateRepr::Text("max".into()),
        }
    }
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("max") {
            return Ok(Rate::Max);
        }
        let digits: String = t.chars().filter(|c| *c != '_').collect();
        let (num, mult) = match digits.strip_suffix(['k', 'K']) {
            Some(n) => (n, 1000),
            None => (digits.as_str(), 1),
        };
        num.parse::<u64>()
            .map(|n| Rate::Fixed(n * mult))
            .map_err(|_| {
                format!("`{s}` is not a rate: use a number of msg/s (e.g. 20000 or 20k) or `max`")
            })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Fixed(n) => write!(f, "{n} msg/s"),
            Rate::Max => f.write_str("max"),
        }
    }
}

/// The producer's `acks` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "AcksRepr", into = "String")]
pub enum Acks {
    /// acks=0: fire and forget (the delivery check then has nothing to check).
    None,
    /// acks=1: the leader's local append.
    Leader,
    /// acks=all: every in-sync replica.
    #[default]
    All,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AcksRepr {
    Number(i64),
    Text(String),
}

impl TryFrom<AcksRepr> for Acks {
    type Error = String;
    fn try_from(r: AcksRepr) -> Result<Acks, String> {
        let text = match r {
            AcksRepr::Number(n) => n.to_string(),
            AcksRepr::Text(t) => t,
        };
        match text.trim() {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(format!("`{other}` is not an acks setting: use 0, 1 or all")),
        }
    }
}

impl From<Acks> for String {
    fn from(a: Acks) -> String {
        a.as_str().to_string()
    }
}

impl Acks {
    /// The value Kafka clients expect for `acks`.
    pub fn as_str(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

/// Producer-side compression codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The value Kafka clients expect for `compression.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Parses `500ms`, `10s`, `2m`, `1h` (and a bare number of seconds).
pub fn parse_duration(text: &str) -> Result<Duration, LoadError> {
    let t = text.trim();
    let invalid = || LoadError::InvalidDuration {
        text: text.to_string(),
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| invalid())?;
    let ms = match unit.trim() {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" | "min" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(invalid()),
    };
    ms.map(Duration::from_millis).ok_or_else(invalid)
}

/// Writes a duration the way a person would type it into a workload file.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0s".into()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

mod human_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Seconds(u64),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Seconds(s) => Ok(Duration::from_secs(s)),
            Repr::Text(t) => super::parse_duration(&t).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "
name: small
partitions: 8
message_size: 1024
producers: 2
consumers: 2
rate: 20k
acks: all
linger_ms: 1
batch_size: 131072
warmup: 10s
duration: 1m
";

    #[test]
    fn workload_yaml_fills_defaults_and_reads_units() {
        let w = Workload::from_yaml(SMALL).unwrap();
        assert_eq!(w.rate, Rate::Fixed(20_000));
        assert_eq!(w.acks, Acks::All);
        assert_eq!(w.compression, Compression::None);
        assert_eq!(w.warmup, Duration::from_secs(10));
        assert_eq!(w.duration, Duration::from_secs(60));
        assert_eq!(w.drain_timeout, Duration::from_secs(60));
    }

    #[test]
    fn workload_accepts_numeric_acks_and_max_rate() {
        let text = SMALL
            .replace("acks: all", "acks: 1")
            .replace("rate: 20k", "rate: max");
        let w = Workload::from_yaml(&text).unwrap();
        assert_eq!(w.acks, Acks::Leader);
        assert_eq!(w.rate, Rate::Max);
    }

    #[test]
    fn workload_rejects_unknown_keys_so_typos_do_not_pass_silently() {
        let text = format!("{SMALL}lingr_ms: 5\n");
        let err = Workload::from_yaml(&text).unwrap_err();
        assert!(err.to_string().contains("lingr_ms"), "{err}");
    }

    #[test]
    fn workload_rejects_shapes_the_runner_cannot_honour() {
        for (from, to, field) in [
            ("partitions: 8", "partitions: 0", "partitions"),
            ("consumers: 2", "consumers: 0", "consumers"),
            ("message_size: 1024", "message_size: 8", "message_size"),
            ("rate: 20k", "rate: 0", "rate"),
        ] {
            let err = Workload::from_yaml(&SMALL.replace(from, to)).unwrap_err();
            assert!(err.to_string().contains(field), "{from} -> {err}");
        }
        let err = Workload::from_yaml(&SMALL.replace("acks: all", "acks: 2")).unwrap_err();
        assert!(err.to_string().contains("acks"), "{err}");
    }

    #[test]
    fn overrides_replace_file_values_and_are_validated() {
        let w = Workload::from_yaml(SMALL).unwrap();
        let o = Overrides {
            rate: Some(Rate::Max),
            duration: Some(Duration::from_secs(5)),
            ..Overrides::default()
        };
        let w2 = w.clone().with_overrides(&o).unwrap();
        assert_eq!(w2.rate, Rate::Max);
        assert_eq!(w2.duration, Duration::from_secs(5));
        assert_eq!(w2.warmup, w.warmup);
        let zero = Overrides {
            duration: Some(Duration::ZERO),
            ..Overrides::default()
        };
        assert!(w.with_overrides(&zero).is_err());
    }

    #[test]
    fn durations_parse_and_print_in_human_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("15").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("ten seconds").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("99999999999999999h").is_err());
        for text in ["250ms", "7s", "3m", "2h", "0s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }

    #[test]
    fn topic_and_client_configs_are_read_as_string_maps() {
        let text = format!(
            "{SMALL}topic_config:\n  segment.bytes: \"1073741824\"\nproducer_config:\n  enable.idempotence: \"true\"\n"
        );
        let w = Workload::from_yaml(&text).unwrap();
        assert_eq!(
            w.topic_config.get("segment.bytes").map(String::as_str),
            Some("1073741824")
        );
        assert_eq!(
            w.producer_config
                .get("enable.idempotence")
                .map(String::as_str),
            Some("true")
        );
    }

    #[test]
    fn workload_round_trips_through_json() {
        let w = Workload::from_yaml(SMALL).unwrap();
        let json = serde_json::to_string(&w).unwrap();
        let back: Workload = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w);
    }

    #[test]
    fn shipped_workload_files_all_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                Workload::from_file(&path).unwrap();
                seen += 1;
            }
        }
        assert!(
            seen >= 6,
            "expected the seed and scaled workloads, found {seen}"
        );
    }
}
