//! `GET /metrics` on the live view's address: the processor's counters in
//! the Prometheus text format (version 0.0.4), every sample labelled with
//! the pipeline's name.
//!
//! The loop hands its counters over once per fetch round
//! ([`Metrics::observe`]): a few relaxed atomic stores and one short lock
//! for the per-partition lag, never one per record. A scrape reads them;
//! neither waits for the other beyond that lock. The latency summaries
//! (with `--stats` only) are recomputed from its histograms at most once a
//! second.
//!
//! Names follow the broker's (`aerostream_…`, counters ending in
//! `_total`), under `aerostream_processor_`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::stats::{Counts, Latency, Stats};

/// How often the latency summaries are recomputed.
const LATENCY_EVERY: Duration = Duration::from_secs(1);
/// The watermark gauge's "none yet".
const NO_WATERMARK: i64 = i64::MIN;

/// The figures `/metrics` shows, shared by the loop and the server.
pub struct Metrics {
    pipeline: String,
    records: AtomicU64,
    filtered: AtomicU64,
    skipped: AtomicU64,
    late: AtomicU64,
    windows_emitted: AtomicU64,
    early_results: AtomicU64,
    checkpoints: AtomicU64,
    checkpoint_failures: AtomicU64,
    open_windows: AtomicU64,
    watermark: AtomicI64,
    /// (partition, records behind the high watermark)
    lag: Mutex<Vec<(i32, i64)>>,
    latency: Mutex<Option<[(&'static str, Latency); 2]>>,
    latency_at: Mutex<Option<Instant>>,
}

/// What the loop knows after a fetch round.
pub struct Observed<'a, L: Iterator<Item = (i32, i64)>> {
    pub counts: Counts,
    pub open_windows: usize,
    pub watermark: Option<i64>,
    pub lag: L,
    pub stats: Option<&'a Stats>,
    pub now: Instant,
}

impl Metrics {
    pub fn new(pipeline: &str) -> Metrics {
        Metrics {
            pipeline: pipeline.to_owned(),
            records: AtomicU64::new(0),
            filtered: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            late: AtomicU64::new(0),
            windows_emitted: AtomicU64::new(0),
            early_results: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            checkpoint_failures: AtomicU64::new(0),
            open_windows: AtomicU64::new(0),
            watermark: AtomicI64::new(NO_WATERMARK),
            lag: Mutex::new(Vec::new()),
            latency: Mutex::new(None),
            latency_at: Mutex::new(None),
        }
    }

    /// Takes the loop's figures.
    pub fn observe<L: Iterator<Item = (i32, i64)>>(&self, o: Observed<'_, L>) {
        let c = o.counts;
        self.records.store(c.records, Relaxed);
        self.filtered.store(c.filtered, Relaxed);
        self.skipped.store(c.skipped, Relaxed);
        self.late.store(c.late, Relaxed);
        self.windows_emitted.store(c.windows_emitted, Relaxed);
        self.checkpoints.store(c.checkpoints, Relaxed);
        self.checkpoint_failures
            .store(c.checkpoint_failures, Relaxed);
        self.open_windows.store(o.open_windows as u64, Relaxed);
        self.watermark
            .store(o.watermark.unwrap_or(NO_WATERMARK), Relaxed);
        if let Ok(mut lag) = self.lag.lock() {
            lag.clear();
            lag.extend(o.lag);
        }
        if let Some(stats) = o.stats {
            let Ok(mut at) = self.latency_at.lock() else {
                return;
            };
            if at.is_none_or(|t| o.now.saturating_duration_since(t) >= LATENCY_EVERY) {
                *at = Some(o.now);
                if let Ok(mut latency) = self.latency.lock() {
                    *latency = Some(stats.latency());
                }
            }
        }
    }

    /// Early results sent to the live view.
    pub fn early_sent(&self, rows: usize) {
        self.early_results.fetch_add(rows as u64, Relaxed);
    }

    /// The text a scrape gets.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        let pipeline = escape(&self.pipeline);
        let mut one = |name: &str, kind: &str, help: &str, value: String| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{pipeline=\"{pipeline}\"}} {value}\n"
            );
        };
        let counters: [(&str, &str, &AtomicU64); 8] = [
            (
                "records",
                "Records read from the source topic.",
                &self.records,
            ),
            (
                "records_filtered",
                "Records the filters dropped.",
                &self.filtered,
            ),
            (
                "records_skipped",
                "Records that could not be decoded (no JSON object, no event time or key).",
                &self.skipped,
            ),
            (
                "records_late",
                "Records dropped or set aside because their windows had closed.",
                &self.late,
            ),
            (
                "windows_emitted",
                "Windows closed (one row per key and window).",
                &self.windows_emitted,
            ),
            (
                "early_results",
                "Early (not final) rows sent to the live view.",
                &self.early_results,
            ),
            ("checkpoints", "Checkpoints committed.", &self.checkpoints),
            (
                "checkpoint_failures",
                "Checkpoints that failed (retried at the next interval).",
                &self.checkpoint_failures,
            ),
        ];
        for (name, help, value) in counters {
            one(
                &format!("aerostream_processor_{name}_total"),
                "counter",
                help,
                value.load(Relaxed).to_string(),
            );
        }
        one(
            "aerostream_processor_open_windows",
            "gauge",
            "Open panes (tumbling and sliding windows) or sessions.",
            self.open_windows.load(Relaxed).to_string(),
        );
        let watermark = self.watermark.load(Relaxed);
        if watermark != NO_WATERMARK {
            one(
                "aerostream_processor_watermark_milliseconds",
                "gauge",
                "The event-time watermark, milliseconds since the epoch.",
                watermark.to_string(),
            );
        }
        let lag = self.lag.lock().map(|l| l.clone()).unwrap_or_default();
        if !lag.is_empty() {
            let name = "aerostream_processor_consumer_lag";
            let _ = write!(
                out,
                "# HELP {name} Records between the reader's position and the partition's high watermark at the last fetch.\n# TYPE {name} gauge\n"
            );
            for (partition, behind) in lag {
                let _ = writeln!(
                    out,
                    "{name}{{pipeline=\"{pipeline}\",partition=\"{partition}\"}} {behind}"
                );
            }
        }
        let latency = self.latency.lock().map(|l| *l).unwrap_or_default();
        for (what, l) in latency.iter().flatten() {
            let name = format!("aerostream_processor_{what}_seconds");
            let help = match *what {
                "ingest_to_state" => "From a record's Kafka timestamp to its batch being in the window state (--stats).",
                _ => "From a window's end to the moment it closed (--stats).",
            };
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} summary\n");
            for (q, v) in l.quantiles {
                let _ = writeln!(
                    out,
                    "{name}{{pipeline=\"{pipeline}\",quantile=\"{q}\"}} {v}"
                );
            }
            let _ = writeln!(
                out,
                "{name}_sum{{pipeline=\"{pipeline}\"}} {}",
                l.sum_seconds
            );
            let _ = writeln!(out, "{name}_count{{pipeline=\"{pipeline}\"}} {}", l.count);
        }
        out
    }
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
