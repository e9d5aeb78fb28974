use super::*;
use crate::decode::JsonDecoder;
use crate::testing::record;

fn pipeline(filter: &str) -> Pipeline {
    Pipeline::parse(&format!(
        r#"
name: t
source: {{bootstrap: "b:9092", topic: t, format: json, event_time: ts, key: k}}
window: {{type: tumbling, size: 1s}}
filter: {filter}
aggregates: [{{op: count, as: n}}, {{op: sum, field: x, as: s}}]
sink: {{type: parquet, url: "file:///tmp/x"}}
"#
    ))
    .unwrap()
}

fn kept(filter: &str, values: &[&str]) -> (Vec<String>, usize, Option<i64>) {
    let p = pipeline(filter);
    let mut d = JsonDecoder::new(&p);
    let records: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(i, v)| record(i as i64, v))
        .collect();
    let cols = d.decode(0, &records);
    let (cols, dropped) = Predicates::new(&p).apply(cols).unwrap();
    assert_eq!(cols.keys.len(), cols.event_times.len());
    assert_eq!(cols.values[0].len(), cols.keys.len());
    let keys = (0..cols.len())
        .map(|i| cols.keys.value(i).to_owned())
        .collect();
    (keys, dropped, cols.max_event_time)
}

const RECORDS: [&str; 5] = [
    r#"{"k":"a","ts":10,"x":5,"sym":"AAPL"}"#,
    r#"{"k":"b","ts":20,"x":15,"sym":"MSFT"}"#,
    r#"{"k":"c","ts":30,"sym":"AAPL"}"#,
    r#"{"k":"d","ts":40,"x":"15","sym":7}"#,
    r#"{"k":"e","ts":50,"x":25.5,"sym":"GOOG"}"#,
];

#[test]
fn numeric_comparisons_keep_the_matching_records_and_never_a_missing_field() {
    let (keys, dropped, newest) = kept("[{field: x, op: gt, value: 10}]", &RECORDS);
    assert_eq!(keys, ["b", "e"], "c lacks x, d's x is a string");
    assert_eq!(dropped, 3);
    assert_eq!(
        newest,
        Some(50),
        "filtered-out records still count for time"
    );
    assert_eq!(
        kept("[{field: x, op: le, value: 15}]", &RECORDS).0,
        ["a", "b"]
    );
    assert_eq!(
        kept("[{field: x, op: ne, value: 5}]", &RECORDS).0,
        ["b", "e"]
    );
}

#[test]
fn strings_and_in_and_conditions_combine_with_and() {
    assert_eq!(
        kept("[{field: sym, op: eq, value: AAPL}]", &RECORDS).0,
        ["a", "c"]
    );
    assert_eq!(
        kept(
            "[{field: sym, op: in, values: [MSFT, GOOG, \"7\"]}]",
            &RECORDS
        )
        .0,
        ["b", "d", "e"],
        "a number compared as text is its JSON text"
    );
    assert_eq!(
        kept(
            "[{field: sym, op: in, values: [AAPL, GOOG]}, {field: x, op: ge, value: 5}]",
            &RECORDS
        )
        .0,
        ["a", "e"]
    );
}

#[test]
fn no_filter_keeps_everything() {
    let (keys, dropped, _) = kept("[]", &RECORDS);
    assert_eq!((keys.len(), dropped), (5, 0));
}

#[test]
fn any_keeps_a_record_one_of_whose_conditions_holds() {
    // a lacks nothing; c lacks x but its sym holds; d's x is text
    assert_eq!(
        kept(
            "[{any: [{field: x, op: gt, value: 20}, {field: sym, op: eq, value: AAPL}]}]",
            &RECORDS
        )
        .0,
        ["a", "c", "e"]
    );
    // (x >= 15 or sym = AAPL) and sym != GOOG
    let (keys, dropped, _) = kept(
        "[{any: [{field: x, op: ge, value: 15}, {field: sym, op: eq, value: AAPL}]}, \
         {field: sym, op: ne, value: GOOG}]",
        &RECORDS,
    );
    assert_eq!(
        (keys, dropped),
        (vec!["a".into(), "b".into(), "c".into()], 2)
    );
}
