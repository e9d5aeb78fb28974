use super::*;
use crate::testing::record;
use arrow_array::Array;
use bytes::Bytes;

fn pipeline(key: Option<&str>) -> Pipeline {
    let key = key.map_or(String::new(), |k| format!(", key: {k}"));
    Pipeline::parse(&format!(
        r#"
name: t
source: {{bootstrap: "b:9092", topic: t, format: json, event_time: ts{key}}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}, {{op: sum, field: x, as: s}}, {{op: max, field: x, as: m}}]
sink: {{type: parquet, url: "file:///tmp/x"}}
"#
    ))
    .unwrap()
}

#[test]
fn values_become_arrow_columns() {
    let mut d = JsonDecoder::new(&pipeline(Some("k")));
    let cols = d.decode(
        0,
        &[
            record(0, r#"{"k":"a","ts":1000,"x":1.5}"#),
            record(1, r#"{"k":7,"ts":2000.0}"#),
            record(2, r#"{"k":"c","ts":3000,"x":"text"}"#),
        ],
    );
    assert_eq!(cols.len(), 3);
    assert_eq!(cols.keys.value(0), "a");
    assert_eq!(cols.keys.value(1), "7");
    assert_eq!(cols.event_times.values().to_vec(), vec![1000, 2000, 3000]);
    assert_eq!(cols.values.len(), 1, "x is read once for sum and max");
    assert_eq!(cols.values[0].value(0), 1.5);
    assert!(cols.values[0].is_null(1) && cols.values[0].is_null(2));
    assert_eq!(d.skipped(), 0);
}

#[test]
fn records_that_cannot_be_used_are_counted_not_fatal() {
    let mut d = JsonDecoder::new(&pipeline(Some("k")));
    let cols = d.decode(
        3,
        &[
            record(0, "not json"),
            record(1, r#"[1,2]"#),
            record(2, r#"{"k":"a"}"#),
            record(3, r#"{"k":"a","ts":"soon"}"#),
            record(4, r#"{"k":"a","ts":1.5}"#),
            record(5, r#"{"ts":5}"#),
            record(6, r#"{"k":null,"ts":5}"#),
            record(7, r#"{"k":"ok","ts":5}"#),
        ],
    );
    assert_eq!(cols.len(), 1);
    assert_eq!(cols.keys.value(0), "ok");
    assert_eq!(d.skipped(), 7);
}

#[test]
fn without_a_key_field_the_kafka_key_groups() {
    let mut d = JsonDecoder::new(&pipeline(None));
    let mut keyed = record(0, r#"{"ts":1}"#);
    keyed.key = Some(Bytes::from_static(b"user-1"));
    let cols = d.decode(0, &[keyed, record(1, r#"{"ts":2}"#)]);
    assert_eq!(cols.len(), 1);
    assert_eq!(cols.keys.value(0), "user-1");
    assert_eq!(d.skipped(), 1);
}
