//! Prometheus text exposition, one metric at a time.

/// Appends one metric (`kind` is `counter` or `gauge`) with its help line.
pub fn write_metric(out: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    out.push_str(&format!(
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
    ));
}
