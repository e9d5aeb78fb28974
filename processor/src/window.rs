//! Tumbling windows on event time, closed by a watermark.
//!
//! A record with event time `t` belongs to the window
//! `[start, start + size)` with `start = floor(t / size) * size`; its key
//! and window select one accumulator (the record count, and per aggregated
//! field the count of values, their sum, min and max).
//!
//! The watermark is the minimum, over the partitions read, of the largest
//! event time seen in each, minus the allowed lateness; it never goes
//! back. A window is closed, and emitted, once the watermark reaches its
//! end. A record for a closed window is late: it is counted and dropped.
//!
//! A partition that has been read to its end and has brought no record for
//! the idle timeout no longer holds the watermark back. When every
//! partition is idle like that, the watermark moves to the end of the
//! newest open window, so every open window closes: what has been written
//! is then in the output, at the price that a record arriving later for
//! one of those windows is late.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arrow_array::Array;
use serde::{Deserialize, Serialize};

use crate::decode::Columns;
use crate::pipeline::Pipeline;

const LOG_EVERY: Duration = Duration::from_secs(10);

/// One aggregated field's running figures in one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldAcc {
    /// Values seen (records lacking the field are not counted).
    pub n: i64,
    pub sum: f64,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl FieldAcc {
    fn add(&mut self, v: f64) {
        self.n += 1;
        self.sum += v;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
    }
}

/// One key's window: its record count and per-field figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowAcc {
    pub count: i64,
    /// One per [`Pipeline::value_fields`], in that order.
    pub fields: Vec<FieldAcc>,
}

/// A window of one key with its figures: an open one in a checkpoint, or
/// a closed one on its way to the sink.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowRow {
    pub key: String,
    pub start: i64,
    pub end: i64,
    pub acc: WindowAcc,
}

/// What a checkpoint keeps of the windows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowsSnapshot {
    /// Windows ending at or before it are closed.
    pub watermark: Option<i64>,
    /// Per partition, the largest event time seen.
    pub max_event_time: BTreeMap<i32, i64>,
    pub open: Vec<WindowRow>,
}

struct PartitionClock {
    max_event_time: Option<i64>,
    /// When the partition last brought a record (or reading began).
    last_record: Instant,
    /// Whether the last fetch read it to its high watermark.
    caught_up: bool,
}

/// The open windows of every key, and the watermark that closes them.
pub struct Windows {
    size: i64,
    lateness: i64,
    idle_timeout: Duration,
    fields: usize,
    /// (window start, key) -> figures; ordered by start, so closing takes
    /// a prefix.
    open: BTreeMap<(i64, String), WindowAcc>,
    clocks: BTreeMap<i32, PartitionClock>,
    watermark: Option<i64>,
    /// Records dropped because their window had closed.
    pub late: u64,
    late_since_log: u64,
    last_log: Option<Instant>,
}

impl Windows {
    /// No window open yet, reading `partitions` from `now`.
    pub fn new(pipeline: &Pipeline, partitions: &[i32], now: Instant) -> Windows {
        Windows {
            size: pipeline.window_ms(),
            lateness: pipeline.lateness_ms(),
            idle_timeout: pipeline.source.idle_timeout,
            fields: pipeline.value_fields().len(),
            open: BTreeMap::new(),
            clocks: partitions
                .iter()
                .map(|p| {
                    (
                        *p,
                        PartitionClock {
                            max_event_time: None,
                            last_record: now,
                            caught_up: false,
                        },
                    )
                })
                .collect(),
            watermark: None,
            late: 0,
            late_since_log: 0,
            last_log: None,
        }
    }

    /// Takes up the windows and event times a checkpoint kept.
    pub fn restore(&mut self, snapshot: &WindowsSnapshot) {
        self.watermark = snapshot.watermark;
        for (p, t) in &snapshot.max_event_time {
            if let Some(c) = self.clocks.get_mut(p) {
                c.max_event_time = Some(*t);
            }
        }
        self.open = snapshot
            .open
            .iter()
            .map(|w| ((w.start, w.key.clone()), w.acc.clone()))
            .collect();
    }

    /// The windows and event times a checkpoint keeps.
    pub fn snapshot(&self) -> WindowsSnapshot {
        WindowsSnapshot {
            watermark: self.watermark,
            max_event_time: self
                .clocks
                .iter()
                .filter_map(|(p, c)| Some((*p, c.max_event_time?)))
                .collect(),
            open: self
                .open
                .iter()
                .map(|((start, key), acc)| self.row(key.clone(), *start, acc.clone()))
                .collect(),
        }
    }

    pub fn watermark(&self) -> Option<i64> {
        self.watermark
    }

    pub fn open_windows(&self) -> usize {
        self.open.len()
    }

    /// Adds one partition's decoded records.
    pub fn add(&mut self, partition: i32, cols: &Columns, now: Instant) {
        if cols.is_empty() {
            return;
        }
        let mut max = i64::MIN;
        let mut late = 0u64;
        for i in 0..cols.len() {
            let t = cols.event_times.value(i);
            max = max.max(t);
            let start = t.div_euclid(self.size).saturating_mul(self.size);
            if self
                .watermark
                .is_some_and(|w| start.saturating_add(self.size) <= w)
            {
                late += 1;
                continue;
            }
            let key = cols.keys.value(i);
            let acc = match self.open.get_mut(&(start, key.to_owned())) {
                Some(acc) => acc,
                None => self
                    .open
                    .entry((start, key.to_owned()))
                    .or_insert(WindowAcc {
                        count: 0,
                        fields: vec![FieldAcc::default(); self.fields],
                    }),
            };
            acc.count += 1;
            for (f, values) in acc.fields.iter_mut().zip(&cols.values) {
                if values.is_valid(i) {
                    f.add(values.value(i));
                }
            }
        }
        if let Some(c) = self.clocks.get_mut(&partition) {
            c.max_event_time = Some(c.max_event_time.map_or(max, |m| m.max(max)));
            c.last_record = now;
        }
        if late > 0 {
            self.log_late(partition, late, now);
        }
    }

    /// Whether the last fetch read `partition` to its end.
    pub fn set_caught_up(&mut self, partition: i32, caught_up: bool) {
        if let Some(c) = self.clocks.get_mut(&partition) {
            c.caught_up = caught_up;
        }
    }

    /// Moves the watermark as far as the partitions allow and returns the
    /// windows that closed, oldest first.
    pub fn advance(&mut self, now: Instant) -> Vec<WindowRow> {
        let idle = |c: &PartitionClock| {
            c.caught_up && now.saturating_duration_since(c.last_record) >= self.idle_timeout
        };
        let candidate = if self.clocks.values().all(idle) {
            // everything there is has been read: close every open window
            let newest_end = self
                .open
                .keys()
                .next_back()
                .map(|(start, _)| start.saturating_add(self.size));
            let newest_event = self
                .clocks
                .values()
                .filter_map(|c| c.max_event_time)
                .max()
                .map(|t| t.saturating_sub(self.lateness));
            newest_end.max(newest_event)
        } else {
            let mut min: Option<i64> = None;
            let mut held = false;
            for c in self.clocks.values().filter(|c| !idle(c)) {
                match c.max_event_time {
                    Some(t) => {
                        let t = t.saturating_sub(self.lateness);
                        min = Some(min.map_or(t, |m| m.min(t)));
                    }
                    // an active partition that has shown nothing yet
                    None => held = true,
                }
            }
            if held {
                None
            } else {
                min
            }
        };
        if let Some(c) = candidate {
            if self.watermark.is_none_or(|w| c > w) {
                self.watermark = Some(c);
            }
        }
        let Some(w) = self.watermark else {
            return Vec::new();
        };
        let mut closed = Vec::new();
        while let Some(entry) = self.open.first_entry() {
            let start = entry.key().0;
            if start.saturating_add(self.size) > w {
                break;
            }
            let ((start, key), acc) = entry.remove_entry();
            closed.push(self.row(key, start, acc));
        }
        closed
    }

    fn row(&self, key: String, start: i64, acc: WindowAcc) -> WindowRow {
        WindowRow {
            key,
            start,
            end: start.saturating_add(self.size),
            acc,
        }
    }

    fn log_late(&mut self, partition: i32, late: u64, now: Instant) {
        self.late += late;
        self.late_since_log += late;
        if self
            .last_log
            .is_some_and(|t| now.duration_since(t) < LOG_EVERY)
        {
            return;
        }
        tracing::warn!(
            partition,
            late = self.late_since_log,
            watermark = self.watermark,
            "dropping late records: their windows had closed (records since the last such line)"
        );
        self.late_since_log = 0;
        self.last_log = Some(now);
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
