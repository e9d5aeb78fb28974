//! Side-by-side tables: the same workloads run against several brokers,
//! one markdown table of figures and one of ratios against a baseline.

use std::fmt::Write as _;

use crate::report::RunResult;
use crate::workload::Rate;

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn rate(v: f64) -> String {
    format!("{v:.0}")
}

/// `num / den` as "3.1×", or "n/a" when either side has no figure.
pub fn ratio(num: f64, den: f64) -> String {
    if num <= 0.0 || den <= 0.0 || !num.is_finite() || !den.is_finite() {
        "n/a".into()
    } else if num / den >= 10.0 {
        format!("{:.0}×", num / den)
    } else {
        format!("{:.2}×", num / den)
    }
}

/// Broker CPU time per message, microseconds of one core.
fn cpu_us_per_msg(r: &RunResult) -> Option<f64> {
    let cpu = r.broker_resources.as_ref()?.cpu_percent / 100.0;
    let rate = r.publish.msgs_per_sec.max(r.consume.msgs_per_sec);
    (rate > 0.0).then(|| cpu / rate * 1e6)
}

fn workloads_in_order(results: &[RunResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in results {
        if !names.contains(&r.workload.name) {
            names.push(r.workload.name.clone());
        }
    }
    names
}

/// The markdown report for a set of runs; `baseline` names the broker the
/// ratios are taken against.
pub fn markdown(results: &[RunResult], baseline: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| workload | broker | offered msg/s | published msg/s | consumed msg/s | publish p50 / p99 / p99.9 ms | e2e p50 / p99 / p99.9 ms | errors | lost | drained | broker CPU | broker CPU µs/msg | broker RSS start → end (max) MiB |");
    let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|:-:|--:|--:|--:|");
    let names = workloads_in_order(results);
    for name in &names {
        for r in results.iter().filter(|r| &r.workload.name == name) {
            let offered = match r.workload.rate {
                Rate::Fixed(n) => n.to_string(),
                Rate::Max => "max".into(),
            };
            let (cpu, rss) = match &r.broker_resources {
                Some(b) => (
                    format!("{:.0}%", b.cpu_percent),
                    format!(
                        "{:.0} → {:.0} ({:.0})",
                        b.rss_start_mib, b.rss_end_mib, b.rss_max_mib
                    ),
                ),
                None => ("n/a".into(), "n/a".into()),
            };
            let p = &r.publish_latency;
            let e = &r.end_to_end_latency;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} | {} | {} | {} | {} | {} |",
                name,
                r.broker,
                offered,
                rate(r.publish.msgs_per_sec),
                rate(r.consume.msgs_per_sec),
                ms(p.p50_ms),
                ms(p.p99_ms),
                ms(p.p999_ms),
                ms(e.p50_ms),
                ms(e.p99_ms),
                ms(e.p999_ms),
                r.errors.total(),
                r.delivery.lost,
                if r.drained { "yes" } else { "**no**" },
                cpu,
                cpu_us_per_msg(r).map(|v| format!("{v:.1}")).unwrap_or_else(|| "n/a".into()),
                rss
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Ratios against {baseline} (above 1× means {baseline} is better): throughput = {baseline} / other; latency, CPU per message and RSS = other / {baseline}."
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "| workload | other broker | published | sustained (drained) | publish p99 | e2e p99 | CPU per message | max RSS |");
    let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|");
    for name in &names {
        let Some(base) = results
            .iter()
            .find(|r| &r.workload.name == name && r.broker == baseline)
        else {
            continue;
        };
        for r in results
            .iter()
            .filter(|r| &r.workload.name == name && r.broker != baseline)
        {
            let rss = |x: &RunResult| x.broker_resources.as_ref().map_or(0.0, |b| b.rss_max_mib);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                name,
                r.broker,
                ratio(base.publish.msgs_per_sec, r.publish.msgs_per_sec),
                ratio(base.sustained_rate(), r.sustained_rate()),
                ratio(r.publish_latency.p99_ms, base.publish_latency.p99_ms),
                ratio(r.end_to_end_latency.p99_ms, base.end_to_end_latency.p99_ms),
                ratio(
                    cpu_us_per_msg(r).unwrap_or(0.0),
                    cpu_us_per_msg(base).unwrap_or(0.0)
                ),
                ratio(rss(r), rss(base)),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procstat::ResourceSummary;
    use crate::report::tests::sample_result;

    #[test]
    fn ratio_reads_as_times_better_and_refuses_missing_figures() {
        assert_eq!(ratio(10.0, 4.0), "2.50×");
        assert_eq!(ratio(120.0, 4.0), "30×");
        assert_eq!(ratio(0.0, 4.0), "n/a");
        assert_eq!(ratio(4.0, 0.0), "n/a");
    }

    #[test]
    fn table_puts_brokers_side_by_side_with_ratios_against_the_baseline() {
        let aero = sample_result();
        let mut tansu = sample_result();
        tansu.broker = "tansu-memory".into();
        tansu.publish_latency.p99_ms = 25.0;
        tansu.end_to_end_latency.p99_ms = 40.0;
        tansu.broker_resources = Some(ResourceSummary {
            cpu_percent: 90.0,
            rss_max_mib: 900.0,
            ..ResourceSummary::default()
        });
        let md = markdown(&[aero, tansu], "aerostream");
        assert!(md.contains("| t | aerostream | 20000 |"), "{md}");
        assert!(md.contains("| t | tansu-memory |"), "{md}");
        // publish p99 25 ms vs 2.5 ms, e2e 40 vs 4: both 10x in aerostream's favour.
        assert!(
            md.contains("| t | tansu-memory | 1.00× | 1.00× | 10× | 10× | n/a | n/a |"),
            "{md}"
        );
    }

    #[test]
    fn undrained_runs_are_marked_and_have_no_sustained_rate() {
        let aero = sample_result();
        let mut other = sample_result();
        other.broker = "other".into();
        other.drained = false;
        let md = markdown(&[aero, other], "aerostream");
        assert!(md.contains("**no**"), "{md}");
        assert!(md.contains("| t | other | 1.00× | n/a |"), "{md}");
    }
}
