//! The worker's figures, in Prometheus text for the agent's `/metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one agent's Connect worker.
#[derive(Debug, Default)]
pub struct Metrics {
    tasks_running: AtomicU64,
    tasks_failed: AtomicU64,
    source_records: AtomicU64,
    sink_records: AtomicU64,
    sink_files: AtomicU64,
    sink_bytes: AtomicU64,
    sink_errors: AtomicU64,
}

impl Metrics {
    pub(crate) fn set_tasks_running(&self, n: usize) {
        self.tasks_running.store(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn task_failed(&self) {
        self.tasks_failed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn source_records(&self, n: u64) {
        self.source_records.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sink_written(&self, records: u64, files: u64, bytes: u64) {
        self.sink_records.fetch_add(records, Ordering::Relaxed);
        self.sink_files.fetch_add(files, Ordering::Relaxed);
        self.sink_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn sink_errors(&self, n: u64) {
        self.sink_errors.fetch_add(n, Ordering::Relaxed);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let rows: [(&str, &str, &str, &AtomicU64); 7] = [
            (
                "aerostream_connect_tasks_running",
                "gauge",
                "Connect tasks running on this agent.",
                &self.tasks_running,
            ),
            (
                "aerostream_connect_task_failures_total",
                "counter",
                "Connect tasks that failed on this agent.",
                &self.tasks_failed,
            ),
            (
                "aerostream_connect_source_records_total",
                "counter",
                "Records source tasks on this agent produced (acknowledged).",
                &self.source_records,
            ),
            (
                "aerostream_connect_sink_records_total",
                "counter",
                "Records sink tasks on this agent wrote out.",
                &self.sink_records,
            ),
            (
                "aerostream_connect_sink_files_total",
                "counter",
                "Files sink tasks on this agent wrote.",
                &self.sink_files,
            ),
            (
                "aerostream_connect_sink_bytes_total",
                "counter",
                "Bytes of the files sink tasks on this agent wrote.",
                &self.sink_bytes,
            ),
            (
                "aerostream_connect_sink_record_errors_total",
                "counter",
                "Records sink tasks skipped (errors.tolerance=all).",
                &self.sink_errors,
            ),
        ];
        let mut out = String::new();
        for (name, kind, help, v) in rows {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {}", v.load(Ordering::Relaxed));
        }
        out
    }
}
