//! `GET /metrics` on the live view's address: the processor's counters in
//! the Prometheus text format (version 0.0.4), every sample labelled with
//! the pipeline's name.
//!
//! The loop hands its counters over once per fetch round
//! ([`Metrics::observe`]): one short lock, never one per record; a
//! distributed pipeline's worker runs a loop per held partition, each
//! handing over its own, summed when scraped. A scrape reads them;
//! neither waits for the other beyond that lock. The latency summaries
//! (with `--stats` only) are recomputed from its histograms at most once a
//! second.
//!
//! Names follow the broker's (`aerostream_…`, counters ending in
//! `_total`), under `aerostream_processor_`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::stats::{Counts, Latency, Stats};

/// How often the latency summaries are recomputed.
const LATENCY_EVERY: Duration = Duration::from_secs(1);

/// The figures `/metrics` shows, shared by the loops and the server.
pub struct Metrics {
    pipeline: String,
    /// The latest figures of each loop: one for a single process, one per
    /// held partition for a distributed pipeline's worker (summed, the
    /// watermark the lowest, when rendered).
    sources: Mutex<BTreeMap<String, Source>>,
    /// The counters of loops that stopped, so the totals never go down.
    retired: Mutex<Counts>,
    early_results: AtomicU64,
    latency: Mutex<Option<[(&'static str, Latency); 2]>>,
    latency_at: Mutex<Option<Instant>>,
}

fn add(c: &mut Counts, more: &Counts) {
    c.records += more.records;
    c.filtered += more.filtered;
    c.skipped += more.skipped;
    c.late += more.late;
    c.windows_emitted += more.windows_emitted;
    c.checkpoints += more.checkpoints;
    c.checkpoint_failures += more.checkpoint_failures;
}

/// One loop's latest figures.
#[derive(Default)]
struct Source {
    counts: Counts,
    open_windows: u64,
    watermark: Option<i64>,
    /// (partition, records behind the high watermark)
    lag: Vec<(i32, i64)>,
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
            sources: Mutex::new(BTreeMap::new()),
            retired: Mutex::new(Counts::default()),
            early_results: AtomicU64::new(0),
            latency: Mutex::new(None),
            latency_at: Mutex::new(None),
        }
    }

    /// Takes the figures of the loop `source` (empty for a single
    /// process, the partition's instance for a worker's).
    pub fn observe<L: Iterator<Item = (i32, i64)>>(&self, source: &str, o: Observed<'_, L>) {
        if let Ok(mut sources) = self.sources.lock() {
            let s = sources.entry(source.to_owned()).or_default();
            s.counts = o.counts;
            s.open_windows = o.open_windows as u64;
            s.watermark = o.watermark;
            s.lag.clear();
            s.lag.extend(o.lag);
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

    /// A loop that stopped (a partition given up): its gauges go, its
    /// counters stay in the totals.
    pub fn forget(&self, source: &str) {
        let gone = self.sources.lock().ok().and_then(|mut s| s.remove(source));
        if let (Some(gone), Ok(mut retired)) = (gone, self.retired.lock()) {
            add(&mut retired, &gone.counts);
        }
    }

    /// Every loop's figures together.
    fn total(&self) -> Source {
        let mut t = Source::default();
        if let Ok(retired) = self.retired.lock() {
            t.counts = *retired;
        }
        let Ok(sources) = self.sources.lock() else {
            return t;
        };
        for s in sources.values() {
            add(&mut t.counts, &s.counts);
            t.open_windows += s.open_windows;
            t.watermark = match (t.watermark, s.watermark) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            t.lag.extend(s.lag.iter().copied());
        }
        t.lag.sort_unstable();
        t
    }

    /// Early results sent to the live view.
    pub fn early_sent(&self, rows: usize) {
        self.early_results.fetch_add(rows as u64, Relaxed);
    }

    /// The text a scrape gets.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        let pipeline = escape(&self.pipeline);
        let total = self.total();
        let c = total.counts;
        let early = self.early_results.load(Relaxed);
        let mut one = |name: &str, kind: &str, help: &str, value: String| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{pipeline=\"{pipeline}\"}} {value}\n"
            );
        };
        let counters: [(&str, &str, u64); 8] = [
            ("records", "Records read from the source topic.", c.records),
            (
                "records_filtered",
                "Records the filters dropped.",
                c.filtered,
            ),
            (
                "records_skipped",
                "Records that could not be decoded (no JSON object, no event time or key).",
                c.skipped,
            ),
            (
                "records_late",
                "Records dropped or set aside because their windows had closed.",
                c.late,
            ),
            (
                "windows_emitted",
                "Windows closed (one row per key and window).",
                c.windows_emitted,
            ),
            (
                "early_results",
                "Early (not final) rows sent to the live view.",
                early,
            ),
            ("checkpoints", "Checkpoints committed.", c.checkpoints),
            (
                "checkpoint_failures",
                "Checkpoints that failed (retried at the next interval).",
                c.checkpoint_failures,
            ),
        ];
        for (name, help, value) in counters {
            one(
                &format!("aerostream_processor_{name}_total"),
                "counter",
                help,
                value.to_string(),
            );
        }
        one(
            "aerostream_processor_open_windows",
            "gauge",
            "Open panes (tumbling and sliding windows) or sessions.",
            total.open_windows.to_string(),
        );
        if let Some(watermark) = total.watermark {
            one(
                "aerostream_processor_watermark_milliseconds",
                "gauge",
                "The event-time watermark, milliseconds since the epoch.",
                watermark.to_string(),
            );
        }
        let lag = total.lag;
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
