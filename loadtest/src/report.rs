//! The result of a run: the JSON document written with `--json`, the text
//! summary printed at the end, and the live progress line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::LoadError;
use crate::ledger::Audit;
use crate::procstat::ResourceSummary;
use crate::stats::Percentiles;
use crate::workload::{Rate, Workload};

/// Messages and bytes over the measurement phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub messages: u64,
    pub msgs_per_sec: f64,
    pub mib_per_sec: f64,
}

impl Throughput {
    pub fn over(messages: u64, bytes: u64, secs: f64) -> Throughput {
        if secs <= 0.0 {
            return Throughput {
                messages,
                ..Throughput::default()
            };
        }
        Throughput {
            messages,
            msgs_per_sec: messages as f64 / secs,
            mib_per_sec: bytes as f64 / secs / (1024.0 * 1024.0),
        }
    }
}

/// Everything that went wrong, counted over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// Sends the client reported as failed (timeout, broker error, purge).
    pub failed_sends: u64,
    /// Sends still unacknowledged when the producers were closed.
    pub unflushed: u64,
    /// Errors the consumers reported.
    pub consume_errors: u64,
    /// Received messages whose bytes differ from what was sent.
    pub corrupt: u64,
    /// Received messages that this run did not write.
    pub foreign: u64,
    /// Distinct error texts and how often each was seen.
    pub texts: BTreeMap<String, u64>,
}

impl ErrorCounts {
    pub fn total(&self) -> u64 {
        self.failed_sends + self.unflushed + self.consume_errors + self.corrupt + self.foreign
    }
}

/// The outcome that decides the exit code.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Every acknowledged message was received intact.
    pub delivery_ok: bool,
    /// No errors of any kind.
    pub clean: bool,
    pub message: String,
}

/// One run, as written to the JSON result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub tool_version: String,
    /// What the broker under test is called in reports (e.g. `aerostream`).
    pub broker: String,
    pub bootstrap: String,
    /// The way in: `kafka` (librdkafka over the Kafka wire), `native-tcp`
    /// or `native-quic` (the SDK over the native protocol).
    pub driver: String,
    pub workload: Workload,
    pub topic: String,
    pub started_unix_ms: u64,
    /// Length of the measurement phase actually observed.
    pub measured_secs: f64,
    /// Messages handed to the client per second (the offered load).
    pub offered: Throughput,
    /// Messages acknowledged per second.
    pub publish: Throughput,
    /// Messages consumed per second (redeliveries included).
    pub consume: Throughput,
    /// Send call to acknowledgement.
    pub publish_latency: Percentiles,
    /// Intended send time to actual send call (how far the generator or the
    /// client's queue fell behind the schedule).
    pub publish_delay: Percentiles,
    /// Producer's send time (in the payload) to consumer receipt.
    pub end_to_end_latency: Percentiles,
    pub errors: ErrorCounts,
    pub delivery: Audit,
    /// Acknowledged but not yet consumed when measurement ended.
    pub backlog_at_measure_end: u64,
    /// Whether consumers caught up with every acknowledged message.
    pub drained: bool,
    pub drain_secs: f64,
    /// For `rate: max`: the offered rate (msg/s) chosen each second.
    pub rate_history: Vec<f64>,
    pub broker_resources: Option<ResourceSummary>,
    pub loadgen_resources: Option<ResourceSummary>,
    /// (seconds since start, broker RSS MiB), one per second of the run.
    pub broker_rss_series: Vec<(f64, f64)>,
    pub verdict: Verdict,
}

impl RunResult {
    /// The rate this run shows the broker sustains: what was both
    /// acknowledged and consumed per second, if the consumers drained.
    pub fn sustained_rate(&self) -> f64 {
        if self.drained {
            self.publish.msgs_per_sec.min(self.consume.msgs_per_sec)
        } else {
            0.0
        }
    }

    pub fn write_json(&self, path: &Path) -> Result<(), LoadError> {
        let io = |source| LoadError::ResultWrite {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
        std::fs::write(path, text + "\n").map_err(io)
    }

    pub fn read_json(path: &Path) -> Result<RunResult, LoadError> {
        let bad = |reason: String| LoadError::ResultRead {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| bad(e.to_string()))
    }
}

fn lat(p: &Percentiles) -> String {
    format!(
        "p50 {:.2} | p95 {:.2} | p99 {:.2} | p99.9 {:.2} | max {:.2} ms",
        p.p50_ms, p.p95_ms, p.p99_ms, p.p999_ms, p.max_ms
    )
}

/// The end-of-run summary.
pub fn summary_text(r: &RunResult) -> String {
    let mut s = String::new();
    let w = &r.workload;
    let _ = writeln!(
        s,
        "== {} against {} ({} via {}), {} partitions, {}+{} clients, {} B, acks={}, rate {} ==",
        w.name,
        r.broker,
        r.bootstrap,
        r.driver,
        w.partitions,
        w.producers,
        w.consumers,
        w.message_size,
        w.acks.as_str(),
        w.rate
    );
    let _ = writeln!(s, "measured       {:.1} s", r.measured_secs);
    for (name, t) in [
        ("offered", &r.offered),
        ("published", &r.publish),
        ("consumed", &r.consume),
    ] {
        let _ = writeln!(
            s,
            "{name:<14} {:>10.0} msg/s {:>9.2} MiB/s ({} msgs)",
            t.msgs_per_sec, t.mib_per_sec, t.messages
        );
    }
    let _ = writeln!(s, "publish        {}", lat(&r.publish_latency));
    let _ = writeln!(s, "publish delay  {}", lat(&r.publish_delay));
    let _ = writeln!(s, "end-to-end     {}", lat(&r.end_to_end_latency));
    let e = &r.errors;
    let _ = writeln!(
        s,
        "errors         {} failed sends, {} unflushed, {} consume errors, {} corrupt, {} foreign",
        e.failed_sends, e.unflushed, e.consume_errors, e.corrupt, e.foreign
    );
    for (text, n) in e.texts.iter().take(10) {
        let _ = writeln!(s, "               {n} x {text}");
    }
    let d = &r.delivery;
    let _ = writeln!(
        s,
        "delivery       {} acked, {} received, {} lost, {} duplicates, backlog at end of measurement {}, drained {} in {:.1} s",
        d.acked,
        d.received,
        d.lost,
        d.duplicates,
        r.backlog_at_measure_end,
        if r.drained { "yes" } else { "NO" },
        r.drain_secs
    );
    if matches!(w.rate, Rate::Max) {
        let _ = writeln!(s, "sustained      {:.0} msg/s", r.sustained_rate());
    }
    for (who, res) in [
        ("broker", &r.broker_resources),
        ("loadgen", &r.loadgen_resources),
    ] {
        if let Some(x) = res {
            let _ = writeln!(
                s,
                "{who:<14} cpu {:.0}% | rss {:.0} -> {:.0} MiB (max {:.0}, growth {:+.0})",
                x.cpu_percent, x.rss_start_mib, x.rss_end_mib, x.rss_max_mib, x.rss_growth_mib
            );
        }
    }
    let _ = writeln!(s, "verdict        {}", r.verdict.message);
    s
}

/// Figures for one progress line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Progress {
    pub phase: &'static str,
    pub elapsed_s: f64,
    pub publish_rate: f64,
    pub publish_mib: f64,
    pub publish_p99_ms: f64,
    pub consume_rate: f64,
    pub e2e_p99_ms: f64,
    pub backlog: u64,
    pub errors: u64,
    pub target_rate: Option<f64>,
}

pub fn progress_line(p: &Progress) -> String {
    let target = p
        .target_rate
        .map(|t| format!(" (target {t:.0})"))
        .unwrap_or_default();
    format!(
        "[{:>7} {:>6.1}s] pub {:>8.0} msg/s{target} {:>7.2} MiB/s p99 {:>8.2} ms | cons {:>8.0} msg/s e2e p99 {:>8.2} ms | backlog {} | errors {}",
        p.phase, p.elapsed_s, p.publish_rate, p.publish_mib, p.publish_p99_ms, p.consume_rate, p.e2e_p99_ms, p.backlog, p.errors
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample_result() -> RunResult {
        let workload = Workload::from_yaml(
            "name: t\npartitions: 8\nmessage_size: 1024\nproducers: 2\nconsumers: 2\nrate: 20000\nwarmup: 1s\nduration: 10s\n",
        )
        .unwrap();
        RunResult {
            tool_version: "0.1.0".into(),
            broker: "aerostream".into(),
            bootstrap: "127.0.0.1:1".into(),
            driver: "kafka".into(),
            workload,
            topic: "t".into(),
            started_unix_ms: 0,
            measured_secs: 10.0,
            offered: Throughput::over(200_000, 200_000 * 1024, 10.0),
            publish: Throughput::over(200_000, 200_000 * 1024, 10.0),
            consume: Throughput::over(199_000, 199_000 * 1024, 10.0),
            publish_latency: Percentiles {
                p99_ms: 2.5,
                ..Percentiles::default()
            },
            publish_delay: Percentiles::default(),
            end_to_end_latency: Percentiles {
                p99_ms: 4.0,
                ..Percentiles::default()
            },
            errors: ErrorCounts::default(),
            delivery: Audit {
                acked: 200_000,
                received: 200_000,
                ..Audit::default()
            },
            backlog_at_measure_end: 10,
            drained: true,
            drain_secs: 0.5,
            rate_history: vec![],
            broker_resources: None,
            loadgen_resources: None,
            broker_rss_series: vec![],
            verdict: Verdict {
                delivery_ok: true,
                clean: true,
                message: "ok".into(),
            },
        }
    }

    #[test]
    fn throughput_is_messages_and_mebibytes_per_second() {
        let t = Throughput::over(50_000, 50_000 * 1024, 2.0);
        assert_eq!(t.msgs_per_sec, 25_000.0);
        assert!((t.mib_per_sec - 24.414).abs() < 0.001);
        assert_eq!(Throughput::over(5, 5, 0.0).msgs_per_sec, 0.0);
    }

    #[test]
    fn sustained_rate_is_zero_when_consumers_never_caught_up() {
        let mut r = sample_result();
        assert_eq!(r.sustained_rate(), 19_900.0);
        r.drained = false;
        assert_eq!(r.sustained_rate(), 0.0);
    }

    #[test]
    fn result_json_round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/run.json");
        let r = sample_result();
        r.write_json(&path).unwrap();
        assert_eq!(RunResult::read_json(&path).unwrap(), r);
    }

    #[test]
    fn summary_shows_loss_and_latency_figures() {
        let mut r = sample_result();
        r.delivery.lost = 3;
        r.drained = false;
        let text = summary_text(&r);
        assert!(text.contains("3 lost"), "{text}");
        assert!(text.contains("drained NO"), "{text}");
        assert!(text.contains("p99 2.50"), "{text}");
    }

    #[test]
    fn progress_line_carries_rate_p99_and_backlog() {
        let line = progress_line(&Progress {
            phase: "measure",
            elapsed_s: 12.0,
            publish_rate: 20_001.0,
            publish_p99_ms: 1.25,
            backlog: 42,
            target_rate: Some(20_000.0),
            ..Progress::default()
        });
        assert!(
            line.contains("20001 msg/s") && line.contains("1.25 ms") && line.contains("backlog 42"),
            "{line}"
        );
        assert!(line.contains("target 20000"), "{line}");
    }
}
