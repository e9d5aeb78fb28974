use super::*;
use bytes::Bytes;

fn record(partition: i32, value: Option<&str>) -> SinkRecord {
    SinkRecord {
        topic: "orders".into(),
        partition,
        offset: 42,
        timestamp_ms: 0,
        key: None,
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: Vec::new(),
    }
}

#[test]
fn civil_dates_match_known_days() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
    assert_eq!(civil_from_days(10_957), (2000, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    assert_eq!(civil_from_days(-719_468), (0, 3, 1));
}

#[test]
fn civil_dates_advance_one_day_at_a_time() {
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = |y: i64, m: u32| match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    // From 1600-01-01 to past 2400, each day follows the previous one.
    let start = -135_140;
    assert_eq!(civil_from_days(start), (1600, 1, 1));
    let (mut y, mut m, mut d) = (1600, 1, 1);
    for day in start + 1..start + 300_000 {
        d += 1;
        if d > month_days(y, m) {
            d = 1;
            m += 1;
            if m > 12 {
                m = 1;
                y += 1;
            }
        }
        assert_eq!(civil_from_days(day), (y, m, d), "day {day}");
    }
}

#[test]
fn path_formats_render_confluent_patterns() {
    // 2023-11-14T22:13:20.123Z
    let ms = 1_700_000_000_123;
    let f = PathFormat::parse("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH").unwrap();
    assert_eq!(f.format(ms), "year=2023/month=11/day=14/hour=22");
    let f = PathFormat::parse("yyyy-MM-dd'T'HH:mm:ss").unwrap();
    assert_eq!(f.format(ms), "2023-11-14T22:13:20");
    let f = PathFormat::parse("'it''s'/YY/M/d").unwrap();
    assert_eq!(f.format(ms), "it's/23/11/14");
    let f = PathFormat::parse("''YYYY").unwrap();
    assert_eq!(f.format(0), "'1970");
    // Before the epoch.
    let f = PathFormat::parse("YYYY-MM-dd HH:mm").unwrap();
    assert_eq!(f.format(-60_000), "1969-12-31 23:59");
}

#[test]
fn path_formats_refuse_what_they_cannot_render() {
    for bad in [
        "'year'=YYYY/'week'=ww",
        "YYYY/MMM",
        "'open",
        "'only literal'",
        "EEE",
    ] {
        assert!(PathFormat::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn default_partitioner_uses_the_kafka_partition() {
    let p = Partitioner::Default.encode(&record(7, None), 0);
    assert_eq!(p.as_ref(), "partition=7");
}

#[test]
fn field_partitioner_reads_top_level_fields() {
    let p = Partitioner::Field(vec!["region".into(), "n".into()]);
    let r = record(0, Some(r#"{"region":"eu/west","n":3,"other":true}"#));
    // The slash of the value is percent-encoded: one folder per field.
    assert_eq!(p.encode(&r, 0).as_ref(), "region=eu%2Fwest/n=3");

    for value in [
        None,
        Some("not json"),
        Some("[1,2]"),
        Some(r#"{"region":null}"#),
        Some(r#"{"nested":{"region":"x"}}"#),
    ] {
        let r = record(0, value);
        assert_eq!(p.encode(&r, 0).as_ref(), "region=null/n=null", "{value:?}");
    }

    let p = Partitioner::Field(vec!["tags".into()]);
    let r = record(0, Some(r#"{"tags":["a","b"]}"#));
    // Other JSON as compact JSON, with the characters object names avoid
    // percent-encoded.
    assert_eq!(p.encode(&r, 0).as_ref(), "tags=%5B%22a%22,%22b%22%5D");
}

#[test]
fn time_partitioner_rounds_down_to_the_bucket() {
    let p = Partitioner::Time {
        format: PathFormat::parse("'dt'=YYYY-MM-dd/'hour'=HH/mm").unwrap(),
        duration_ms: 3_600_000,
    };
    // 2023-11-14T22:13:20Z → the 22:00 bucket.
    let encoded = p.encode(&record(0, None), 1_700_000_000_000);
    assert_eq!(encoded.as_ref(), "dt=2023-11-14/hour=22/00");
}

#[test]
fn object_paths_follow_the_layout() {
    let encoded = Path::from_iter(["region=eu"]);
    let path = object_path(
        &Path::from("lake/raw"),
        "topics",
        "orders",
        3,
        &encoded,
        1000,
        "parquet",
    );
    assert_eq!(
        path.as_ref(),
        "lake/raw/topics/orders/region=eu/orders+3+00000000000000001000.parquet"
    );
    let path = object_path(&Path::default(), "a/b", "t", 0, &encoded, 0, "json");
    assert_eq!(
        path.as_ref(),
        "a/b/t/region=eu/t+0+00000000000000000000.json"
    );
}
