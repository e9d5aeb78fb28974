//! Side-by-side tables: the same workloads run against several brokers,
//! one markdown table of figures and one of ratios against a baseline, and,
//! when the runs include the floor (broker label [`FLOOR`], librdkafka's
//! mock cluster: see [`crate::mock_broker`]), one of every other row as a
//! multiple of the floor.

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

/// Broker label of the floor: `loadtest mock-broker`, the broker that does
/// the least possible work.
pub const FLOOR: &str = "floor";

fn is_floor(r: &RunResult) -> bool {
    r.broker == FLOOR
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

/// CPU time per message of a process, microseconds of one core.
fn cpu_us_per_msg(r: &RunResult, who: Option<&crate::procstat::ResourceSummary>) -> Option<f64> {
    let cpu = who?.cpu_percent / 100.0;
    let rate = r.publish.msgs_per_sec.max(r.consume.msgs_per_sec);
    (rate > 0.0).then(|| cpu / rate * 1e6)
}

/// Broker CPU time per message, microseconds of one core.
fn broker_us(r: &RunResult) -> Option<f64> {
    cpu_us_per_msg(r, r.broker_resources.as_ref())
}

/// Load generator (client) CPU time per message, microseconds of one core.
fn loadgen_us(r: &RunResult) -> Option<f64> {
    cpu_us_per_msg(r, r.loadgen_resources.as_ref())
}

fn opt(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "n/a".into())
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

/// What tells the runs of one workload apart in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Brokers, all reached the same way (the broker label).
    Broker,
    /// Ways in to one broker (the driver: `kafka`, `native-tcp`, …).
    WayIn,
    /// Both vary: `broker / way in`.
    Both,
}

impl Rows {
    /// Brokers when every run used one driver, ways in when every run
    /// reached one broker, both otherwise.
    pub fn for_results(results: &[RunResult]) -> Rows {
        let all_same = |f: fn(&RunResult) -> &str| results.windows(2).all(|w| f(&w[0]) == f(&w[1]));
        if all_same(|r| &r.driver) {
            Rows::Broker
        } else if all_same(|r| &r.broker) {
            Rows::WayIn
        } else {
            Rows::Both
        }
    }

    pub fn label(self, r: &RunResult) -> String {
        match self {
            Rows::Broker => r.broker.clone(),
            Rows::WayIn => r.driver.clone(),
            Rows::Both => format!("{} / {}", r.broker, r.driver),
        }
    }

    fn heading(self) -> &'static str {
        match self {
            Rows::Broker => "broker",
            Rows::WayIn => "way in",
            Rows::Both => "broker / way in",
        }
    }

    /// The label ratios are taken against when none is given.
    pub fn default_baseline(self) -> &'static str {
        match self {
            Rows::Broker => "aerostream",
            Rows::WayIn => "kafka",
            Rows::Both => "aerostream / kafka",
        }
    }
}

/// The markdown report for a set of runs: one row per run, labelled as
/// [`Rows::for_results`] says (brokers side by side, or the ways in to one
/// broker), then ratios against `baseline` (a row label; by default
/// `aerostream` for brokers, `kafka` for ways in).
pub fn markdown(results: &[RunResult], baseline: Option<&str>) -> String {
    let rows = Rows::for_results(results);
    let baseline = baseline.unwrap_or(rows.default_baseline());
    let mut s = String::new();
    let _ = writeln!(s, "| workload | {} | offered msg/s | published msg/s | consumed msg/s | max rate msg/s | publish p50 / p99 / p99.9 ms | e2e p50 / p99 / p99.9 ms | errors | lost | dup | drained | broker CPU | broker CPU µs/msg | loadgen CPU µs/msg | broker RSS start → end (max) MiB |", rows.heading());
    let _ = writeln!(
        s,
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|--:|--:|--:|--:|"
    );
    let names = workloads_in_order(results);
    for name in &names {
        // The baseline first, the others in the order given.
        let mut rows_of: Vec<&RunResult> = results
            .iter()
            .filter(|r| &r.workload.name == name)
            .collect();
        rows_of.sort_by_key(|r| rows.label(r) != baseline);
        for r in rows_of {
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
                "| {} | {} | {} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                name,
                rows.label(r),
                offered,
                rate(r.publish.msgs_per_sec),
                rate(r.consume.msgs_per_sec),
                rate(r.sustained_rate()),
                ms(p.p50_ms),
                ms(p.p99_ms),
                ms(p.p999_ms),
                ms(e.p50_ms),
                ms(e.p99_ms),
                ms(e.p999_ms),
                r.errors.total(),
                r.delivery.lost,
                r.delivery.duplicates,
                if r.drained { "yes" } else { "**no**" },
                cpu,
                opt(broker_us(r)),
                opt(loadgen_us(r)),
                rss
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Max rate: what was both acknowledged and consumed per second, if consumers drained (for `rate: max`, the highest rate sustained). CPU µs/msg: CPU time of one core per message; loadgen is the whole load-generator process (its clients, producers and consumers)."
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Ratios against {baseline} (above 1× means {baseline} is better): throughput = {baseline} / other; latency, CPU per message and RSS = other / {baseline}."
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "| workload | other {} | published | sustained (drained) | publish p99 | e2e p99 | broker CPU per message | loadgen CPU per message | max RSS |", rows.heading());
    let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|");
    for name in &names {
        let Some(base) = results
            .iter()
            .find(|r| &r.workload.name == name && rows.label(r) == baseline)
        else {
            continue;
        };
        // The floor gets a table of its own below, unless it is the baseline.
        for r in results.iter().filter(|r| {
            &r.workload.name == name
                && rows.label(r) != baseline
                && (!is_floor(r) || is_floor(base))
        }) {
            let rss = |x: &RunResult| x.broker_resources.as_ref().map_or(0.0, |b| b.rss_max_mib);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                name,
                rows.label(r),
                ratio(base.publish.msgs_per_sec, r.publish.msgs_per_sec),
                ratio(base.sustained_rate(), r.sustained_rate()),
                ratio(r.publish_latency.p99_ms, base.publish_latency.p99_ms),
                ratio(r.end_to_end_latency.p99_ms, base.end_to_end_latency.p99_ms),
                ratio(broker_us(r).unwrap_or(0.0), broker_us(base).unwrap_or(0.0)),
                ratio(
                    loadgen_us(r).unwrap_or(0.0),
                    loadgen_us(base).unwrap_or(0.0)
                ),
                ratio(rss(r), rss(base)),
            );
        }
    }
    let base_is_floor = results
        .iter()
        .any(|r| rows.label(r) == baseline && is_floor(r));
    if !base_is_floor {
        floor_table(&mut s, results, rows, &names);
    }
    s
}

/// Every row that is not the floor, as a multiple of the floor's figure for
/// the same workload. Nothing when no run was against the floor.
fn floor_table(s: &mut String, results: &[RunResult], rows: Rows, names: &[String]) {
    let pairs: Vec<(&RunResult, &RunResult)> = names
        .iter()
        .flat_map(|name| {
            let floor = results
                .iter()
                .find(|r| &r.workload.name == name && is_floor(r));
            results
                .iter()
                .filter(move |r| &r.workload.name == name && !is_floor(r))
                .filter_map(move |r| floor.map(|f| (f, r)))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Multiples of the floor (the same workload against `loadtest mock-broker`, librdkafka's mock cluster, which does the least possible work; what the load generator and its clients cost on their own): latency and CPU per message = other / floor, rate = floor / other. The mock does not wake a waiting fetch when records arrive, so the floor's end-to-end latency includes up to one `fetch.wait.max.ms` per empty fetch (side-by-side.sh sets 1 ms for the floor's consumers)."
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| workload | {} | published | sustained (drained) | publish p50 | publish p99 | publish p99.9 | e2e p99 | broker CPU per message | loadgen CPU per message |",
        rows.heading()
    );
    let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (f, r) in pairs {
        let (p, fp) = (&r.publish_latency, &f.publish_latency);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload.name,
            rows.label(r),
            ratio(f.publish.msgs_per_sec, r.publish.msgs_per_sec),
            ratio(f.sustained_rate(), r.sustained_rate()),
            ratio(p.p50_ms, fp.p50_ms),
            ratio(p.p99_ms, fp.p99_ms),
            ratio(p.p999_ms, fp.p999_ms),
            ratio(r.end_to_end_latency.p99_ms, f.end_to_end_latency.p99_ms),
            ratio(broker_us(r).unwrap_or(0.0), broker_us(f).unwrap_or(0.0)),
            ratio(loadgen_us(r).unwrap_or(0.0), loadgen_us(f).unwrap_or(0.0)),
        );
    }
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
        let md = markdown(&[aero, tansu], None);
        assert!(md.contains("| workload | broker |"), "{md}");
        assert!(
            md.contains("| t | aerostream | 20000 | 20000 | 19900 | 19900 |"),
            "{md}"
        );
        assert!(md.contains("| t | tansu-memory |"), "{md}");
        // publish p99 25 ms vs 2.5 ms, e2e 40 vs 4: both 10x in aerostream's favour.
        assert!(
            md.contains("| t | tansu-memory | 1.00× | 1.00× | 10× | 10× | n/a | n/a | n/a |"),
            "{md}"
        );
    }

    #[test]
    fn undrained_runs_are_marked_and_have_no_sustained_rate() {
        let aero = sample_result();
        let mut other = sample_result();
        other.broker = "other".into();
        other.drained = false;
        let md = markdown(&[aero, other], Some("aerostream"));
        assert!(md.contains("**no**"), "{md}");
        assert!(md.contains("| t | other | 1.00× | n/a |"), "{md}");
    }

    #[test]
    fn our_rows_read_as_multiples_of_the_floor() {
        let mut aero = sample_result();
        aero.publish_latency.p50_ms = 1.0;
        aero.publish_latency.p99_ms = 6.0;
        aero.broker_resources = Some(ResourceSummary {
            cpu_percent: 60.0,
            ..ResourceSummary::default()
        });
        let mut floor = sample_result();
        floor.broker = FLOOR.into();
        floor.publish_latency.p50_ms = 0.5;
        floor.publish_latency.p99_ms = 1.5;
        floor.broker_resources = Some(ResourceSummary {
            cpu_percent: 20.0,
            ..ResourceSummary::default()
        });
        let md = markdown(&[floor.clone(), aero.clone()], None);
        // The baseline table leaves the floor out ...
        assert!(!md.contains("| t | floor | 1.00×"), "{md}");
        // ... and the floor table has aerostream as its multiple: publish
        // p50 1.0 vs 0.5 ms, p99 6 vs 1.5 ms, broker CPU 60% vs 20%.
        assert!(md.contains("Multiples of the floor"), "{md}");
        assert!(
            md.contains(
                "| t | aerostream | 1.00× | 1.00× | 2.00× | 4.00× | n/a | 1.00× | 3.00× | n/a |"
            ),
            "{md}"
        );
        // With the floor as the baseline the ratio table is that table.
        let md = markdown(&[floor.clone(), aero], Some(FLOOR));
        assert!(!md.contains("Multiples of the floor"), "{md}");
        assert!(
            md.contains("| t | aerostream | 1.00× | 1.00× | 4.00× |"),
            "{md}"
        );
        // The floor alone: its row, no ratios.
        let md = markdown(&[floor], None);
        assert!(md.contains("| t | floor | 20000 |"), "{md}");
        assert!(!md.contains("Multiples of the floor"), "{md}");
    }

    #[test]
    fn runs_of_one_broker_by_several_drivers_are_rows_per_way_in_against_kafka() {
        let kafka = sample_result();
        let mut native = sample_result();
        native.driver = "native-tcp".into();
        native.publish_latency.p99_ms = 1.25;
        native.loadgen_resources = Some(ResourceSummary {
            cpu_percent: 40.0,
            ..ResourceSummary::default()
        });
        // Given native first, as file names sort; kafka, the baseline, leads.
        let runs = [native.clone(), kafka.clone()];
        assert_eq!(Rows::for_results(&runs), Rows::WayIn);
        let md = markdown(&runs, None);
        assert!(md.contains("| workload | way in |"), "{md}");
        let (k, n) = (
            md.find("| t | kafka | 20000 |"),
            md.find("| t | native-tcp | 20000 |"),
        );
        assert!(k.is_some() && k < n, "{md}");
        // 40% of a core over max(20000, 19900) msg/s = 20 µs per message.
        assert!(md.contains("| n/a | 20.0 | n/a |"), "{md}");
        // Publish p99 1.25 vs 2.5 ms: half of kafka's.
        assert!(
            md.contains("| t | native-tcp | 1.00× | 1.00× | 0.50× | 1.00× | n/a | n/a | n/a |"),
            "{md}"
        );
        let mut tansu = kafka;
        tansu.broker = "tansu-memory".into();
        let runs = [sample_result(), native, tansu];
        assert_eq!(Rows::for_results(&runs), Rows::Both);
        assert!(markdown(&runs, None).contains("| t | aerostream / native-tcp |"));
    }
}
