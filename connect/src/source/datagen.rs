//! `DatagenSource`: generated JSON records, for demos and tests.
//!
//! Each record's value is a JSON object whose `seq` counts from 0 across
//! the connector (task `t` of `n` makes `t`, `t + n`, ...), keyed by that
//! number; `max.records` (or Confluent's `iterations`) bounds how many are
//! made, `max.interval` is the most milliseconds between two records of a
//! task (a random pause up to it, as Confluent's datagen does; 0 for as
//! fast as the topic takes them). A task's source offset is the next
//! `seq` it will make, so a task restarted elsewhere goes on from the last
//! acknowledged record: nothing skipped, at most the unacknowledged ones
//! made twice.

use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use serde_json::json;

use crate::config::{Config, ConfigDef, Problem};

pub const CLASS: &str = "io.aerostream.connect.datagen.DatagenSource";

const USERS: [&str; 6] = ["ada", "grace", "edsger", "barbara", "ken", "radia"];

/// The most records one poll returns.
const BATCH: u64 = 500;

pub fn definitions() -> Vec<ConfigDef> {
    vec![
        ConfigDef::new(
            "kafka.topic",
            "STRING",
            None,
            "HIGH",
            "The topic records are written to.",
        )
        .in_group("Datagen"),
        ConfigDef::new(
            "max.records",
            "LONG",
            Some("-1"),
            "MEDIUM",
            "How many records the connector makes in all (-1: no end). Also read as iterations.",
        )
        .in_group("Datagen"),
        ConfigDef::new(
            "max.interval",
            "LONG",
            Some("500"),
            "MEDIUM",
            "The most milliseconds between two records of a task (0: no pause).",
        )
        .in_group("Datagen"),
    ]
}

fn long(config: &Config, keys: &[&str], default: i64) -> Result<i64, Problem> {
    for key in keys {
        if let Some(v) = config.get(*key) {
            return v.trim().parse::<i64>().map_err(|_| {
                (
                    (*key).to_owned(),
                    format!("Invalid value {v} for configuration {key}: not a number"),
                )
            });
        }
    }
    Ok(default)
}

/// What a datagen task is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub topic: String,
    /// `None`: no end.
    pub max_records: Option<u64>,
    pub max_interval: Duration,
}

impl Settings {
    pub fn parse(config: &Config) -> Result<Settings, Vec<Problem>> {
        let mut problems = Vec::new();
        let topic = crate::config::required(config, "kafka.topic", &mut problems);
        let max_records = match long(config, &["max.records", "iterations"], -1) {
            Ok(n) => u64::try_from(n).ok(),
            Err(p) => {
                problems.push(p);
                None
            }
        };
        let max_interval = match long(config, &["max.interval"], 500) {
            Ok(n) if n >= 0 => Duration::from_millis(n.unsigned_abs()),
            Ok(n) => {
                problems.push((
                    "max.interval".into(),
                    format!("Invalid value {n} for configuration max.interval: at least 0"),
                ));
                Duration::ZERO
            }
            Err(p) => {
                problems.push(p);
                Duration::ZERO
            }
        };
        if problems.is_empty() {
            Ok(Settings {
                topic,
                max_records,
                max_interval,
            })
        } else {
            Err(problems)
        }
    }
}

pub fn validate(config: &Config) -> Vec<Problem> {
    Settings::parse(config).err().unwrap_or_default()
}

/// The connector's split: task `t` of `n` makes every `n`th record from
/// `t`.
pub fn task_configs(config: &Config, tasks_max: usize) -> Vec<Config> {
    (0..tasks_max)
        .map(|t| {
            let mut c = config.clone();
            c.insert("task.index".into(), t.to_string());
            c.insert("task.count".into(), tasks_max.to_string());
            c
        })
        .collect()
}

/// One task's generator.
#[derive(Debug)]
pub struct Datagen {
    settings: Settings,
    index: u64,
    count: u64,
    /// The next `seq` to make.
    next: u64,
}

/// A record to produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub key: Bytes,
    pub value: Bytes,
    /// The source offset once this record is acknowledged (the next `seq`).
    pub next: u64,
}

impl Datagen {
    pub fn new(task_config: &Config) -> Result<Datagen, Vec<Problem>> {
        let settings = Settings::parse(task_config)?;
        let num = |k: &str, d: u64| {
            task_config
                .get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(d)
        };
        let (index, count) = (num("task.index", 0), num("task.count", 1).max(1));
        Ok(Datagen {
            settings,
            index,
            count,
            next: index,
        })
    }

    pub fn topic(&self) -> &str {
        &self.settings.topic
    }

    /// The source partition this task's offsets are kept under.
    pub fn partition(&self) -> String {
        json!({ "task": self.index }).to_string()
    }

    /// The offset to keep once every record up to `next` is acknowledged.
    pub fn offset(next: u64) -> String {
        json!({ "seq": next }).to_string()
    }

    /// Goes on from a committed offset (`{"seq": n}`); an offset that does
    /// not parse is ignored with the reason.
    pub fn resume(&mut self, offset: &str) -> Result<(), String> {
        let seq = serde_json::from_str::<serde_json::Value>(offset)
            .ok()
            .and_then(|v| v.get("seq").and_then(serde_json::Value::as_u64))
            .ok_or_else(|| format!("the committed offset {offset} has no seq"))?;
        // a seq of another split (tasks.max changed) moves to this task's
        // next own number
        let behind = (self.count + self.index - seq % self.count) % self.count;
        self.next = seq + behind;
        Ok(())
    }

    /// Whether every record is made.
    pub fn done(&self) -> bool {
        self.settings
            .max_records
            .is_some_and(|max| self.next >= max)
    }

    /// How long to wait before the next poll.
    pub fn pause(&self) -> Duration {
        if self.settings.max_interval.is_zero() {
            return Duration::ZERO;
        }
        let ms = u64::try_from(self.settings.max_interval.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rand::thread_rng().gen_range(0..=ms))
    }

    /// The next records: one when records are paced, up to 500 otherwise.
    pub fn poll(&mut self, now_ms: i64) -> Vec<Generated> {
        let most = if self.settings.max_interval.is_zero() {
            BATCH
        } else {
            1
        };
        let mut out = Vec::new();
        let mut rng = rand::thread_rng();
        while out.len() < usize::try_from(most).unwrap_or(1) && !self.done() {
            let seq = self.next;
            self.next += self.count;
            let user = USERS[rng.gen_range(0..USERS.len())];
            let value = json!({
                "seq": seq,
                "user": user,
                "amount": rng.gen_range(1..100_000) as f64 / 100.0,
                "ts": now_ms,
            });
            out.push(Generated {
                key: Bytes::from(seq.to_string()),
                value: Bytes::from(value.to_string()),
                next: self.next,
            });
        }
        out
    }
}

#[cfg(test)]
#[path = "datagen_tests.rs"]
mod tests;
