use super::*;

/// The samples of the text: (name with labels, value); every sample's
/// family has HELP and TYPE lines before it.
fn samples(text: &str) -> Vec<(String, f64)> {
    let mut typed = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "summary"].contains(&kind), "{line}");
            typed.push(name.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let name = series.split('{').next().unwrap();
        let family = name.trim_end_matches("_sum").trim_end_matches("_count");
        assert!(
            typed.iter().any(|t| t == name || t == family),
            "{name} comes before its TYPE line"
        );
        out.push((series.to_owned(), value.parse().unwrap()));
    }
    out
}

fn value(text: &str, series: &str) -> Option<f64> {
    samples(text)
        .into_iter()
        .find(|(s, _)| s == series)
        .map(|(_, v)| v)
}

fn observe(m: &Metrics, counts: Counts, watermark: Option<i64>, lag: &[(i32, i64)]) {
    m.observe(
        "",
        Observed {
            counts,
            open_windows: 3,
            watermark,
            lag: lag.iter().copied(),
            stats: None,
            now: Instant::now(),
        },
    );
}

#[test]
fn the_counters_move_with_the_loop_and_parse_as_prometheus_text() {
    let m = Metrics::new("prices \"eu\"");
    let text = m.render();
    let label = r#"{pipeline="prices \"eu\""}"#;
    assert_eq!(
        value(&text, &format!("aerostream_processor_records_total{label}")),
        Some(0.0)
    );
    assert_eq!(
        value(
            &text,
            &format!("aerostream_processor_watermark_milliseconds{label}")
        ),
        None,
        "no watermark yet, no sample"
    );
    observe(
        &m,
        Counts {
            records: 120,
            filtered: 7,
            late: 2,
            windows_emitted: 9,
            skipped: 1,
            checkpoints: 4,
            checkpoint_failures: 1,
        },
        Some(1_700_000_000_000),
        &[(0, 5), (1, 0)],
    );
    m.early_sent(6);
    let text = m.render();
    for (name, want) in [
        ("records_total", 120.0),
        ("records_filtered_total", 7.0),
        ("records_skipped_total", 1.0),
        ("records_late_total", 2.0),
        ("windows_emitted_total", 9.0),
        ("early_results_total", 6.0),
        ("checkpoints_total", 4.0),
        ("checkpoint_failures_total", 1.0),
        ("open_windows", 3.0),
        ("watermark_milliseconds", 1_700_000_000_000.0),
    ] {
        assert_eq!(
            value(&text, &format!("aerostream_processor_{name}{label}")),
            Some(want),
            "{name} in\n{text}"
        );
    }
    assert_eq!(
        value(
            &text,
            r#"aerostream_processor_consumer_lag{pipeline="prices \"eu\"",partition="0"}"#
        ),
        Some(5.0)
    );
    assert!(!text.contains("_seconds"), "no latency without --stats");
}

#[test]
fn the_latency_summaries_come_from_the_stats_histograms() {
    let dir = tempfile::tempdir().unwrap();
    let mut stats = Stats::new(dir.path().join("stats.json"));
    let mut r = crate::testing::record(0, "{}");
    // stamped a second ago
    r.timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 1_000;
    stats.ingested(&[r]);
    let m = Metrics::new("p");
    m.observe(
        "",
        Observed {
            counts: Counts::default(),
            open_windows: 0,
            watermark: None,
            lag: std::iter::empty(),
            stats: Some(&stats),
            now: Instant::now(),
        },
    );
    let text = m.render();
    let p50 = value(
        &text,
        r#"aerostream_processor_ingest_to_state_seconds{pipeline="p",quantile="0.5"}"#,
    )
    .unwrap();
    assert!((1.0..1.1).contains(&p50), "{p50}");
    assert_eq!(
        value(
            &text,
            r#"aerostream_processor_ingest_to_state_seconds_count{pipeline="p"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            r#"aerostream_processor_window_result_seconds_count{pipeline="p"}"#
        ),
        Some(0.0)
    );
}

/// A worker's partitions each hand over their own figures: the scrape
/// sums the counters, takes the lowest watermark and lists every lag; a
/// partition given up leaves the gauges, not the counters (they never go
/// down).
#[test]
fn a_workers_partitions_are_summed_and_a_given_up_ones_counters_kept() {
    let m = Metrics::new("p");
    let counts = |records| Counts {
        records,
        ..Counts::default()
    };
    for (source, records, watermark, lag) in [("p0", 10, 5_000, (0, 1)), ("p1", 32, 3_000, (1, 4))]
    {
        m.observe(
            source,
            Observed {
                counts: counts(records),
                open_windows: 2,
                watermark: Some(watermark),
                lag: std::iter::once(lag),
                stats: None,
                now: Instant::now(),
            },
        );
    }
    let text = m.render();
    let l = r#"{pipeline="p"}"#;
    assert_eq!(
        value(&text, &format!("aerostream_processor_records_total{l}")),
        Some(42.0)
    );
    assert_eq!(
        value(&text, &format!("aerostream_processor_open_windows{l}")),
        Some(4.0)
    );
    assert_eq!(
        value(
            &text,
            &format!("aerostream_processor_watermark_milliseconds{l}")
        ),
        Some(3_000.0)
    );
    assert_eq!(
        value(
            &text,
            r#"aerostream_processor_consumer_lag{pipeline="p",partition="1"}"#
        ),
        Some(4.0)
    );
    m.forget("p1");
    let text = m.render();
    assert_eq!(
        value(&text, &format!("aerostream_processor_records_total{l}")),
        Some(42.0)
    );
    assert_eq!(
        value(&text, &format!("aerostream_processor_open_windows{l}")),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            r#"aerostream_processor_consumer_lag{pipeline="p",partition="1"}"#
        ),
        None
    );
}
