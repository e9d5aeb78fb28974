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

fn cols(rows: &[(&str, i64)]) -> Columns {
    Columns {
        keys: StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        event_times: Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        values: vec![Float64Array::from(
            rows.iter()
                .map(|r| (r.1 % 2 == 0).then_some(1.5))
                .collect::<Vec<_>>(),
        )],
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
