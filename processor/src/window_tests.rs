use super::*;
use arrow_array::{Float64Array, Int64Array, StringArray};

fn pipeline(lateness: &str, idle: &str) -> Pipeline {
    Pipeline::parse(&format!(
        r#"
name: t
source: {{bootstrap: "b:9092", topic: t, format: json, event_time: ts, key: k, idle_timeout: {idle}}}
window: {{type: tumbling, size: 1s, allowed_lateness: {lateness}}}
aggregates: [{{op: count, as: n}}, {{op: sum, field: x, as: s}}]
sink: {{type: parquet, url: "file:///tmp/x"}}
"#
    ))
    .unwrap()
}

fn with_window(window: &str, aggregates: &str) -> Pipeline {
    Pipeline::parse(&format!(
        r#"
name: t
source: {{bootstrap: "b:9092", topic: t, format: json, event_time: ts, key: k}}
window: {window}
aggregates: {aggregates}
sink: {{type: parquet, url: "file:///tmp/x"}}
"#
    ))
    .unwrap()
}

/// Records of (key, event time); those at even times have x = 1.5.
fn cols(rows: &[(&str, i64)]) -> Columns {
    Columns {
        keys: StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        event_times: Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        offsets: Int64Array::from((0..rows.len() as i64).collect::<Vec<_>>()),
        values: vec![Float64Array::from(
            rows.iter()
                .map(|r| (r.1 % 2 == 0).then_some(1.5))
                .collect::<Vec<_>>(),
        )],
        hashes: Vec::new(),
        filtered_by: Vec::new(),
        max_event_time: rows.iter().map(|r| r.1).max(),
    }
}

/// Records of (key, event time, x, weight).
fn weighted(rows: &[(&str, i64, f64, f64)]) -> Columns {
    Columns {
        keys: StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        event_times: Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        offsets: Int64Array::from((0..rows.len() as i64).collect::<Vec<_>>()),
        values: vec![
            Float64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>()),
            Float64Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>()),
        ],
        hashes: Vec::new(),
        filtered_by: Vec::new(),
        max_event_time: rows.iter().map(|r| r.1).max(),
    }
}

fn summary(rows: &[WindowRow]) -> Vec<(String, i64, i64, i64)> {
    rows.iter()
        .map(|r| (r.key.clone(), r.start, r.end, r.acc.count))
        .collect()
}

#[test]
fn a_window_closes_once_every_partition_is_past_its_end() {
    let t0 = Instant::now();
    let mut w = Windows::new(&pipeline("0ms", "5s"), &[0, 1], t0);
    w.add(
        0,
        &cols(&[("a", 100), ("b", 200), ("a", 999), ("a", 1000)]),
        t0,
    );
    assert!(
        w.advance(t0).is_empty(),
        "partition 1 has shown nothing yet"
    );
    assert_eq!(w.watermark(), None);
    w.add(1, &cols(&[("a", 500)]), t0);
    assert!(
        w.advance(t0).is_empty(),
        "partition 1 is still inside [0, 1000)"
    );
    w.add(1, &cols(&[("b", 1200)]), t0);
    let closed = w.advance(t0);
    assert_eq!(
        summary(&closed),
        vec![("a".into(), 0, 1000, 3), ("b".into(), 0, 1000, 1)]
    );
    let a = &closed[0].acc.fields[0];
    assert_eq!(
        (a.n, a.sum, a.max),
        (2, 3.0, Some(1.5)),
        "ts 100 and 500 have x, 999 not"
    );
    assert_eq!(w.watermark(), Some(1000));
    assert_eq!(w.open_windows(), 2, "[1000, 2000) of a and b stay open");
}

#[test]
fn a_record_for_a_closed_window_is_late_and_dropped() {
    let t0 = Instant::now();
    let mut w = Windows::new(&pipeline("0ms", "5s"), &[0], t0);
    w.add(0, &cols(&[("a", 100), ("a", 1500)]), t0);
    assert_eq!(summary(&w.advance(t0)), vec![("a".into(), 0, 1000, 1)]);
    w.add(0, &cols(&[("a", 300), ("a", 1999)]), t0);
    assert_eq!(w.late, 1, "300 is late, 1999 is not");
    w.add(0, &cols(&[("a", 3000)]), t0);
    assert_eq!(summary(&w.advance(t0)), vec![("a".into(), 1000, 2000, 2)]);
}

#[test]
fn allowed_lateness_keeps_windows_open_longer() {
    let t0 = Instant::now();
    let mut w = Windows::new(&pipeline("500ms", "5s"), &[0], t0);
    w.add(0, &cols(&[("a", 100), ("a", 1400)]), t0);
    assert!(w.advance(t0).is_empty(), "watermark 900");
    w.add(0, &cols(&[("a", 800)]), t0);
    assert_eq!(w.late, 0);
    w.add(0, &cols(&[("a", 1500)]), t0);
    assert_eq!(summary(&w.advance(t0)), vec![("a".into(), 0, 1000, 2)]);
}

#[test]
fn idle_partitions_stop_holding_the_watermark_and_all_idle_closes_everything() {
    let t0 = Instant::now();
    let mut w = Windows::new(&pipeline("0ms", "5s"), &[0, 1], t0);
    w.add(0, &cols(&[("a", 100), ("a", 1500)]), t0);
    w.set_caught_up(1, true);
    assert!(w.advance(t0 + Duration::from_secs(4)).is_empty());
    // partition 1 read to its end and quiet for 5 s: no longer waited for
    let t1 = t0 + Duration::from_secs(5);
    assert_eq!(summary(&w.advance(t1)), vec![("a".into(), 0, 1000, 1)]);
    // partition 0 is behind its end: it still holds [1000, 2000) open
    assert!(w.advance(t0 + Duration::from_secs(60)).is_empty());
    w.set_caught_up(0, true);
    assert_eq!(
        summary(&w.advance(t0 + Duration::from_secs(60))),
        vec![("a".into(), 1000, 2000, 1)]
    );
    assert_eq!(w.watermark(), Some(2000));
    // a record coming back wakes the partition up
    let t2 = t0 + Duration::from_secs(61);
    w.add(1, &cols(&[("b", 2100)]), t2);
    w.set_caught_up(1, false);
    assert!(w.advance(t2).is_empty());
}

#[test]
fn a_snapshot_restored_goes_on_as_the_original_would() {
    let t0 = Instant::now();
    let p = pipeline("0ms", "5s");
    let mut a = Windows::new(&p, &[0, 1], t0);
    a.add(0, &cols(&[("a", 100), ("b", 1100)]), t0);
    a.add(1, &cols(&[("a", 1200)]), t0);
    assert_eq!(a.advance(t0).len(), 1);
    let text = serde_json::to_string(&a.snapshot()).unwrap();
    let mut b = Windows::new(&p, &[0, 1], t0);
    b.restore(&serde_json::from_str(&text).unwrap());
    assert_eq!(b.snapshot(), a.snapshot());
    for w in [&mut a, &mut b] {
        w.add(0, &cols(&[("a", 500), ("a", 2100)]), t0);
        w.add(1, &cols(&[("b", 2200)]), t0);
    }
    assert_eq!(a.late, 1);
    assert_eq!(b.late, 1, "the restored watermark still closes [0, 1000)");
    assert_eq!(a.advance(t0), b.advance(t0));
}

#[test]
fn sliding_windows_hold_every_record_whose_time_they_cover() {
    let t0 = Instant::now();
    let p = with_window(
        "{type: sliding, size: 3s, slide: 1s}",
        "[{op: count, as: n}]",
    );
    let mut w = Windows::new(&p, &[0], t0);
    w.add(0, &cols(&[("a", 500), ("a", 1500), ("b", 2500)]), t0);
    assert_eq!(w.open_windows(), 3, "one pane per key and second");
    w.add(0, &cols(&[("a", 3000)]), t0);
    // the watermark at 3000 closes every window ending by then
    assert_eq!(
        summary(&w.advance(t0)),
        vec![
            ("a".into(), -2000, 1000, 1),
            ("a".into(), -1000, 2000, 2),
            ("a".into(), 0, 3000, 2),
            ("b".into(), 0, 3000, 1),
        ]
    );
    w.add(0, &cols(&[("a", 5200)]), t0);
    assert_eq!(
        summary(&w.advance(t0)),
        vec![
            ("a".into(), 1000, 4000, 2),
            ("b".into(), 1000, 4000, 1),
            ("a".into(), 2000, 5000, 1),
            ("b".into(), 2000, 5000, 1),
        ]
    );
    // 1200's pane is held by windows up to [1000, 4000), all closed: late
    w.add(0, &cols(&[("a", 1200)]), t0);
    assert_eq!(w.late, 1);
    // 4100's pane is held by [2000, 5000), closed, and by [3000, 6000) and
    // [4000, 7000), open: it counts in those
    w.add(0, &cols(&[("c", 4100)]), t0);
    assert_eq!(w.late, 1);
    w.add(0, &cols(&[("a", 9000)]), t0);
    let rows = summary(&w.advance(t0));
    assert!(rows.contains(&("c".into(), 3000, 6000, 1)), "{rows:?}");
    assert!(rows.contains(&("c".into(), 4000, 7000, 1)), "{rows:?}");
    assert!(
        !rows.iter().any(|r| r.0 == "c" && r.1 == 2000),
        "[2000, 5000) had closed before 4100 came: {rows:?}"
    );
}

#[test]
fn a_tumbling_window_equals_a_sliding_one_whose_slide_is_its_size() {
    let t0 = Instant::now();
    let records = cols(&[("a", 10), ("b", 999), ("a", 1000), ("a", 2500), ("b", 4100)]);
    let mut out = Vec::new();
    for window in [
        "{type: tumbling, size: 1s}",
        "{type: sliding, size: 1s, slide: 1s}",
    ] {
        let p = with_window(window, "[{op: count, as: n}]");
        let mut w = Windows::new(&p, &[0], t0);
        w.add(0, &records, t0);
        out.push(summary(&w.advance(t0)));
    }
    assert_eq!(out[0], out[1]);
    assert_eq!(out[0].len(), 4);
}

#[test]
fn sessions_grow_merge_and_close_a_gap_after_their_last_record() {
    let t0 = Instant::now();
    let p = with_window("{type: session, gap: 1s}", "[{op: count, as: n}]");
    let mut w = Windows::new(&p, &[0], t0);
    w.add(
        0,
        &cols(&[("a", 0), ("a", 800), ("b", 500), ("a", 2600)]),
        t0,
    );
    assert_eq!(
        w.open_windows(),
        3,
        "a: [0, 1800) and [2600, 3600); b: [500, 1500)"
    );
    // [1700, 2700) overlaps both of a's sessions: one [0, 3600)
    w.add(0, &cols(&[("a", 1700)]), t0);
    assert_eq!(w.open_windows(), 2);
    assert_eq!(
        summary(&w.advance(t0)),
        vec![("b".into(), 500, 1500, 1)],
        "the watermark is 2600"
    );
    w.add(0, &cols(&[("c", 5000)]), t0);
    assert_eq!(summary(&w.advance(t0)), vec![("a".into(), 0, 3600, 4)]);
    // a record inside a closed session's span, with nothing open to join
    w.add(0, &cols(&[("a", 3500)]), t0);
    assert_eq!(w.late, 1);
    // a record before an open session's start joins it
    w.add(0, &cols(&[("c", 4500)]), t0);
    assert_eq!(w.late, 1);
    let snapshot = w.snapshot();
    assert_eq!(snapshot.open.len(), 1);
    assert_eq!((snapshot.open[0].start, snapshot.open[0].end), (4500, 6000));
    assert_eq!(snapshot.open[0].acc.count, 2);
    let mut restored = Windows::new(&p, &[0], t0);
    restored.restore(&snapshot);
    for x in [&mut w, &mut restored] {
        x.add(0, &cols(&[("d", 9000)]), t0);
    }
    assert_eq!(w.advance(t0), restored.advance(t0));
}

#[test]
fn weighted_averages_merge_across_panes() {
    let t0 = Instant::now();
    let p = with_window(
        "{type: sliding, size: 2s, slide: 1s}",
        "[{op: wavg, field: x, weight: w, as: vwap}, {op: sum, field: w, as: volume}]",
    );
    let mut w = Windows::new(&p, &[0], t0);
    w.add(
        0,
        &weighted(&[
            ("a", 100, 10.0, 1.0),
            ("a", 1100, 20.0, 3.0),
            ("a", 2100, 0.0, 0.0),
        ]),
        t0,
    );
    let closed = w.advance(t0);
    let spans: Vec<_> = closed.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(spans, vec![(-1000, 1000), (0, 2000)]);
    assert_eq!(closed[0].acc.weighted[0].value(), Some(10.0));
    // (10*1 + 20*3) / (1 + 3)
    assert_eq!(closed[1].acc.weighted[0].value(), Some(17.5));
    assert_eq!(closed[1].acc.fields[1].sum, 4.0, "volume");
}

#[test]
fn a_checkpoint_of_tumbling_windows_without_weighted_figures_restores() {
    // a checkpoint written before weighted averages existed
    let text = r#"{"watermark":1000,"max_event_time":{"0":1500},
        "open":[{"key":"a","start":1000,"end":2000,"acc":{"count":2,"fields":[{"n":1,"sum":1.5,"min":1.5,"max":1.5}]}}]}"#;
    let t0 = Instant::now();
    let mut w = Windows::new(&pipeline("0ms", "5s"), &[0], t0);
    w.restore(&serde_json::from_str(text).unwrap());
    w.add(0, &cols(&[("a", 2500)]), t0);
    assert_eq!(summary(&w.advance(t0)), vec![("a".into(), 1000, 2000, 2)]);
}

#[test]
fn distinct_counts_and_quantiles_merge_across_panes() {
    let t0 = Instant::now();
    let p = with_window(
        "{type: sliding, size: 2s, slide: 1s}",
        "[{op: distinct, field: u, as: users}, {op: quantile, field: x, q: 0.5, as: median}]",
    );
    let layout = Layout::new(&p);
    assert_eq!((layout.distinct.len(), layout.quantiles.len()), (1, 1));
    let mut w = Windows::new(&p, &[0], t0);
    // pane [0, 1000): users u0..u9, x 0..9; pane [1000, 2000): u5..u14, x 10..19
    let rows: Vec<(String, i64, f64)> = (0..10)
        .map(|i| (format!("u{i}"), 100 + i, i as f64))
        .chain((0..10).map(|i| (format!("u{}", i + 5), 1100 + i, (10 + i) as f64)))
        .collect();
    let cols = Columns {
        keys: StringArray::from(vec!["k"; rows.len()]),
        event_times: Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        offsets: Int64Array::from((0..rows.len() as i64).collect::<Vec<_>>()),
        values: vec![Float64Array::from(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        )],
        hashes: vec![arrow_array::UInt64Array::from(
            rows.iter()
                .map(|r| crate::sketch::hash(&r.0))
                .collect::<Vec<_>>(),
        )],
        filtered_by: Vec::new(),
        max_event_time: Some(2_500),
    };
    w.add(0, &cols, t0);
    let closed = w.advance(t0);
    let spans: Vec<_> = closed.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(spans, vec![(-1000, 1000), (0, 2000)]);
    assert_eq!(closed[0].acc.distinct[0].estimate(), 10);
    assert_eq!(closed[1].acc.distinct[0].estimate(), 15, "u0..u14");
    let median = closed[1].acc.quantiles[0].quantile(0.5).unwrap();
    assert!((median - 9.0).abs() <= 0.1, "{median}");
    // a checkpoint keeps the sketches
    let snapshot = w.snapshot();
    let text = serde_json::to_string(&snapshot).unwrap();
    let mut restored = Windows::new(&p, &[0], t0);
    restored.restore(&serde_json::from_str(&text).unwrap());
    assert_eq!(restored.snapshot(), snapshot);
}

#[test]
fn the_late_rows_are_named_for_the_late_output() {
    let t0 = Instant::now();
    let mut w = Windows::new(&pipeline("0ms", "5s"), &[0], t0);
    w.add(0, &cols(&[("a", 100), ("a", 1500)]), t0);
    w.advance(t0);
    let mut late = Vec::new();
    w.add_keeping_late(
        0,
        &cols(&[("a", 1600), ("b", 300), ("a", 999), ("a", 1000)]),
        t0,
        &mut late,
    );
    assert_eq!(late, vec![1, 2], "300 and 999 fall in [0, 1000), closed");
    assert_eq!(w.late, 2);
}

#[test]
fn early_results_hold_only_the_open_windows_that_changed() {
    let t0 = Instant::now();
    let mut w = Windows::new(&pipeline("0ms", "5s"), &[0], t0);
    assert!(w.early().is_empty(), "nothing added yet");
    w.add(0, &cols(&[("a", 100), ("b", 200)]), t0);
    assert_eq!(
        summary(&w.early()),
        vec![("a".into(), 0, 1000, 1), ("b".into(), 0, 1000, 1)]
    );
    assert!(w.early().is_empty(), "nothing changed since");
    w.add(0, &cols(&[("a", 300)]), t0);
    let before = w.snapshot();
    assert_eq!(summary(&w.early()), vec![("a".into(), 0, 1000, 2)]);
    assert_eq!(w.snapshot(), before, "an early result changes no state");
    // [0, 1000) closes, with every record, once
    w.add(0, &cols(&[("a", 1500)]), t0);
    assert_eq!(
        summary(&w.advance(t0)),
        vec![("a".into(), 0, 1000, 2), ("b".into(), 0, 1000, 1)]
    );
    assert_eq!(
        summary(&w.early()),
        vec![("a".into(), 1000, 2000, 1)],
        "a closed window is not repeated as early"
    );
    w.add(0, &cols(&[("b", 400)]), t0);
    assert_eq!(w.late, 1);
    assert!(w.early().is_empty(), "a late record changes no open window");
}

#[test]
fn early_sliding_windows_leave_out_those_already_closed() {
    let t0 = Instant::now();
    let mut w = Windows::new(
        &with_window(
            "{type: sliding, size: 2s, slide: 1s}",
            "[{op: count, as: n}]",
        ),
        &[0],
        t0,
    );
    w.add(0, &cols(&[("a", 500)]), t0);
    assert_eq!(
        summary(&w.early()),
        vec![("a".into(), -1000, 1000, 1), ("a".into(), 0, 2000, 1)]
    );
    w.add(0, &cols(&[("a", 1200)]), t0);
    assert_eq!(summary(&w.advance(t0)), vec![("a".into(), -1000, 1000, 1)]);
    assert_eq!(
        summary(&w.early()),
        vec![("a".into(), 0, 2000, 2), ("a".into(), 1000, 3000, 1)]
    );
    // everything closes: nothing is left to be early about
    w.set_caught_up(0, true);
    assert_eq!(w.advance(t0 + Duration::from_secs(6)).len(), 2);
    assert_eq!(w.open_windows(), 0);
    assert!(w.early().is_empty());
}

#[test]
fn early_sessions_show_a_session_as_it_grows() {
    let t0 = Instant::now();
    let mut w = Windows::new(
        &with_window("{type: session, gap: 1s}", "[{op: count, as: n}]"),
        &[0],
        t0,
    );
    w.add(0, &cols(&[("a", 100), ("b", 150)]), t0);
    assert_eq!(
        summary(&w.early()),
        vec![("a".into(), 100, 1100, 1), ("b".into(), 150, 1150, 1)]
    );
    w.add(0, &cols(&[("a", 500)]), t0);
    assert_eq!(summary(&w.early()), vec![("a".into(), 100, 1500, 2)]);
    assert!(w.early().is_empty());
}
