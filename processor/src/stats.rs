//! `--stats FILE`: the processor's counters and latency percentiles as one
//! JSON object, rewritten every second and at exit (written to a temporary
//! file and renamed, so a reader never sees half of one):
//!
//! ```json
//! {"records": 200000, "filtered": 0, "late": 0, "windows_emitted": 4000,
//!  "latency_ms": {"ingest_to_state": {"count": 200000, "p50": 0.9, "p99": 3.1, "p999": 5.2, "max": 9.0},
//!                 "window_result": {"count": 4000, "p50": 210.0, "p99": 400.0, "p999": 420.0, "max": 430.0}}}
//! ```
//!
//! - `ingest_to_state`: for each record, the wall-clock time at which its
//!   batch had been added to the window state, minus the record's Kafka
//!   timestamp (the producer's CreateTime, or the broker's LogAppendTime);
//! - `window_result`: for each emitted row, the wall-clock time at which its
//!   window closed, minus its `window_end`. This compares event time with
//!   the clock, so it means something when producers stamp event times with
//!   the clock; it includes the wait for the watermark (the next records),
//!   not the wait for the checkpoint that makes the row visible.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use kafka_protocol::records::Record;
use serde_json::json;

use crate::window::WindowRow;

const WRITE_EVERY: Duration = Duration::from_secs(1);
/// Latencies are kept in microseconds, up to an hour.
const MAX_US: u64 = 3_600_000_000;

/// The counters a stats file reports (and `/metrics`, which reports the
/// rest too).
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub records: u64,
    pub filtered: u64,
    pub late: u64,
    pub windows_emitted: u64,
    /// Records the decoder could not read.
    pub skipped: u64,
    pub checkpoints: u64,
    pub checkpoint_failures: u64,
}

/// One latency histogram in seconds, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub sum_seconds: f64,
    /// (quantile, seconds) at 0.5, 0.99 and 0.999.
    pub quantiles: [(f64, f64); 3],
}

/// Latency histograms and where they are written.
pub struct Stats {
    path: PathBuf,
    ingest: Histogram<u64>,
    result: Histogram<u64>,
    next_write: Instant,
}

/// Microseconds since the epoch.
fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3)
        .expect("3 significant digits from 1 µs to an hour is a valid histogram")
}

impl Stats {
    pub fn new(path: PathBuf) -> Stats {
        Stats {
            path,
            ingest: histogram(),
            result: histogram(),
            next_write: Instant::now(),
        }
    }

    /// The records of a batch just added to the window state.
    pub fn ingested(&mut self, records: &[Record]) {
        let now = now_us();
        for r in records {
            let us = now.saturating_sub(r.timestamp.saturating_mul(1_000));
            self.ingest.saturating_record(clamp(us));
        }
    }

    /// Windows that just closed.
    pub fn emitted(&mut self, rows: &[WindowRow]) {
        let now = now_us();
        for row in rows {
            let us = now.saturating_sub(row.end.saturating_mul(1_000));
            self.result.saturating_record(clamp(us));
        }
    }

    /// Writes the file when a second has passed since the last write (or
    /// always, with `force`). A failure is logged, never fatal.
    pub fn maybe_write(&mut self, counts: Counts, force: bool) {
        let now = Instant::now();
        if !force && now < self.next_write {
            return;
        }
        self.next_write = now + WRITE_EVERY;
        let text = json!({
            "records": counts.records,
            "filtered": counts.filtered,
            "late": counts.late,
            "windows_emitted": counts.windows_emitted,
            "latency_ms": {
                "ingest_to_state": summary(&self.ingest),
                "window_result": summary(&self.result),
            },
        })
        .to_string();
        let tmp = self.path.with_extension("tmp");
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            tracing::warn!(path = %self.path.display(), "cannot write the stats file: {e}");
        }
    }
}

impl Stats {
    /// The `ingest_to_state` and `window_result` histograms, in seconds.
    pub fn latency(&self) -> [(&'static str, Latency); 2] {
        [
            ("ingest_to_state", latency(&self.ingest)),
            ("window_result", latency(&self.result)),
        ]
    }
}

fn latency(h: &Histogram<u64>) -> Latency {
    let s = |us: u64| us as f64 / 1_000_000.0;
    Latency {
        count: h.len(),
        sum_seconds: h.mean() * h.len() as f64 / 1_000_000.0,
        quantiles: [0.5, 0.99, 0.999].map(|q| (q, s(h.value_at_quantile(q)))),
    }
}

/// A latency below 1 µs (or a timestamp from the future) counts as 1 µs.
fn clamp(us: i64) -> u64 {
    u64::try_from(us).unwrap_or(0).clamp(1, MAX_US)
}

fn summary(h: &Histogram<u64>) -> serde_json::Value {
    let ms = |us: u64| us as f64 / 1_000.0;
    json!({
        "count": h.len(),
        "p50": ms(h.value_at_quantile(0.50)),
        "p99": ms(h.value_at_quantile(0.99)),
        "p999": ms(h.value_at_quantile(0.999)),
        "max": ms(h.max()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::record;

    #[test]
    fn the_file_holds_counts_and_percentiles_in_milliseconds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.json");
        let mut s = Stats::new(path.clone());
        let mut r = record(0, "{}");
        // a record stamped 2 s ago
        r.timestamp = now_us() / 1_000 - 2_000;
        s.ingested(&[r]);
        s.maybe_write(
            Counts {
                records: 1,
                filtered: 0,
                late: 0,
                windows_emitted: 0,
                ..Counts::default()
            },
            true,
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["records"], 1);
        let p50 = v["latency_ms"]["ingest_to_state"]["p50"].as_f64().unwrap();
        assert!((2_000.0..2_100.0).contains(&p50), "{p50}");
        assert_eq!(v["latency_ms"]["window_result"]["count"], 0);
    }
}
