use super::*;

const EXAMPLE: &str = r#"
name: counts
source: {bootstrap: "127.0.0.1:9092", topic: events, format: json, event_time: ts, key: k}
window: {type: tumbling, size: 1s}
aggregates: [{op: count, as: n}]
sink: {type: parquet, url: "s3://bucket/counts"}
"#;

fn err(text: &str) -> String {
    match Pipeline::parse(text) {
        Ok(p) => panic!("accepted: {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_documented_example_parses_with_defaults() {
    let p = Pipeline::parse(EXAMPLE).unwrap();
    assert_eq!(p.name, "counts");
    assert_eq!(p.source.topic, "events");
    assert_eq!(p.source.key.as_deref(), Some("k"));
    assert_eq!(p.source.event_time, "ts");
    assert_eq!(p.source.idle_timeout, Duration::from_secs(5));
    assert_eq!(p.window.kind, WindowKind::Tumbling);
    assert_eq!(
        p.windows(),
        WindowSpec::Aligned {
            size: 1000,
            slide: 1000
        }
    );
    assert_eq!(p.lateness_ms(), 0);
    assert_eq!(p.checkpoint_interval, Duration::from_secs(2));
    assert_eq!(p.aggregates[0].op, AggregateOp::Count);
    assert_eq!(p.aggregates[0].name, "n");
    assert_eq!(p.sink.kind, SinkKind::Parquet);
}

#[test]
fn every_op_and_the_optional_keys() {
    let p = Pipeline::parse(
        r#"
name: stats
checkpoint_interval: 500ms
source: {bootstrap: "b:9092", topic: t, format: json, event_time: ts, idle_timeout: 2m}
window: {type: tumbling, size: 1h, allowed_lateness: 250ms}
aggregates:
  - {op: count, as: n}
  - {op: sum, field: x, as: total}
  - {op: min, field: x, as: lo}
  - {op: max, field: y, as: hi}
  - {op: avg, field: x, as: mean}
sink: {type: parquet, url: "file:///tmp/out"}
"#,
    )
    .unwrap();
    assert_eq!(p.checkpoint_interval, Duration::from_millis(500));
    assert_eq!(p.source.idle_timeout, Duration::from_secs(120));
    assert_eq!(p.source.key, None);
    assert_eq!(
        p.windows(),
        WindowSpec::Aligned {
            size: 3_600_000,
            slide: 3_600_000
        }
    );
    assert_eq!(p.lateness_ms(), 250);
    assert_eq!(p.value_fields(), vec!["x".to_owned(), "y".to_owned()]);
}

#[test]
fn an_unknown_key_is_named() {
    let e = err(&EXAMPLE.replace("size: 1s", "size: 1s, hop: 2s"));
    assert!(e.contains("unknown field `hop`"), "{e}");
    let e = err(&format!("{EXAMPLE}extra: 1\n"));
    assert!(e.contains("unknown field `extra`"), "{e}");
}

#[test]
fn a_missing_key_is_named() {
    let e = err(&EXAMPLE.replace("event_time: ts, ", ""));
    assert!(e.contains("missing field `event_time`"), "{e}");
}

#[test]
fn bad_durations_are_refused() {
    for bad in ["1", "1 sec", "-1s", "s", "1.5s"] {
        let e = err(&EXAMPLE.replace("size: 1s", &format!("size: \"{bad}\"")));
        assert!(e.contains("not a duration"), "{bad}: {e}");
    }
    let e = err(&EXAMPLE.replace("size: 1s", "size: 0ms"));
    assert!(e.contains("window.size"), "{e}");
    assert_eq!(
        parse_duration("1500ms").unwrap(),
        Duration::from_millis(1500)
    );
}

#[test]
fn unsupported_kinds_are_refused() {
    let e = err(&EXAMPLE.replace("type: tumbling", "type: hopping"));
    assert!(e.contains("unknown variant `hopping`"), "{e}");
    let e = err(&EXAMPLE.replace("format: json", "format: protobuf"));
    assert!(e.contains("unknown variant `protobuf`"), "{e}");
    let e = err(&EXAMPLE.replace("op: count", "op: median"));
    assert!(e.contains("unknown variant `median`"), "{e}");
    let e = err(&EXAMPLE.replace("type: parquet", "type: websocket"));
    assert!(e.contains("unknown variant `websocket`"), "{e}");
}

#[test]
fn aggregate_fields_are_checked() {
    let e = err(&EXAMPLE.replace("{op: count, as: n}", "{op: sum, as: n}"));
    assert!(
        e.contains("aggregates[0].field") && e.contains("needs a field"),
        "{e}"
    );
    let e = err(&EXAMPLE.replace("{op: count, as: n}", "{op: count, field: x, as: n}"));
    assert!(e.contains("count takes no field"), "{e}");
    let e = err(&EXAMPLE.replace(
        "[{op: count, as: n}]",
        "[{op: count, as: n}, {op: max, field: x, as: n}]",
    ));
    assert!(
        e.contains("aggregates[1].as") && e.contains("used twice"),
        "{e}"
    );
    let e = err(&EXAMPLE.replace("as: n", "as: window_end"));
    assert!(e.contains("already has"), "{e}");
    let e = err(&EXAMPLE.replace("[{op: count, as: n}]", "[]"));
    assert!(e.contains("aggregates"), "{e}");
}

#[test]
fn the_sink_url_must_be_s3_or_an_absolute_file_url() {
    for bad in ["gs://b/p", "s3:///p", "file://rel/dir", "bucket/prefix"] {
        let e = err(&EXAMPLE.replace("s3://bucket/counts", bad));
        assert!(e.contains("sink.url"), "{bad}: {e}");
    }
}

#[test]
fn sliding_and_session_windows_take_their_own_keys() {
    let window = |w: &str| EXAMPLE.replace("{type: tumbling, size: 1s}", w);
    let p = Pipeline::parse(&window("{type: sliding, size: 10s, slide: 1s}")).unwrap();
    assert_eq!(
        p.windows(),
        WindowSpec::Aligned {
            size: 10_000,
            slide: 1_000
        }
    );
    let p = Pipeline::parse(&window("{type: session, gap: 30s}")).unwrap();
    assert_eq!(p.windows(), WindowSpec::Session { gap: 30_000 });
    let p = Pipeline::parse(EXAMPLE).unwrap();
    assert_eq!(
        p.windows(),
        WindowSpec::Aligned {
            size: 1_000,
            slide: 1_000
        }
    );
    for (bad, key, says) in [
        ("{type: sliding, size: 10s}", "window.slide", "needs it"),
        (
            "{type: sliding, size: 10s, slide: 3s}",
            "window.slide",
            "whole multiple",
        ),
        (
            "{type: sliding, size: 1s, slide: 2s}",
            "window.slide",
            "whole multiple",
        ),
        (
            "{type: sliding, size: 1h, slide: 1ms}",
            "window.slide",
            "at most",
        ),
        (
            "{type: tumbling, size: 1s, slide: 1s}",
            "window.slide",
            "does not take it",
        ),
        (
            "{type: tumbling, size: 1s, gap: 1s}",
            "window.gap",
            "does not take it",
        ),
        ("{type: tumbling}", "window.size", "needs it"),
        ("{type: session, size: 1s}", "window.gap", "needs it"),
        (
            "{type: session, gap: 1s, slide: 1s}",
            "window.slide",
            "does not take it",
        ),
        ("{type: session, gap: 0ms}", "window.gap", "at least 1ms"),
    ] {
        let e = err(&window(bad));
        assert!(e.contains(key) && e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn a_weighted_average_needs_a_weight_and_only_it_takes_one() {
    let aggregates = |a: &str| EXAMPLE.replace("[{op: count, as: n}]", a);
    let p = Pipeline::parse(&aggregates(
        "[{op: wavg, field: price, weight: size, as: vwap}, {op: sum, field: size, as: volume}]",
    ))
    .unwrap();
    assert_eq!(
        p.value_fields(),
        vec!["price".to_owned(), "size".to_owned()]
    );
    let e = err(&aggregates("[{op: wavg, field: price, as: vwap}]"));
    assert!(
        e.contains("aggregates[0].weight") && e.contains("needs a weight"),
        "{e}"
    );
    let e = err(&aggregates(
        "[{op: sum, field: price, weight: size, as: s}]",
    ));
    assert!(e.contains("only wavg takes a weight"), "{e}");
}

#[test]
fn filters_are_checked() {
    let filtered = |f: &str| EXAMPLE.replace("aggregates:", &format!("filter: {f}\naggregates:"));
    let p = Pipeline::parse(&filtered(
        "[{field: price, op: gt, value: 10}, {field: sym, op: in, values: [A, B]}]",
    ))
    .unwrap();
    assert_eq!(p.filter.len(), 2);
    assert!(!p.filter[0].conditions()[0].is_text() && p.filter[1].conditions()[0].is_text());
    for (bad, says) in [
        ("[{field: x, op: gt}]", "needs a value"),
        ("[{field: x, op: in, value: 1}]", "takes `values`"),
        ("[{field: x, op: in, values: []}]", "at least one value"),
        (
            "[{field: x, op: eq, value: 1, values: [1]}]",
            "only `in` takes `values`",
        ),
        (
            "[{field: x, op: in, values: [1, a]}]",
            "mixes numbers and strings",
        ),
        ("[{field: \"\", op: eq, value: 1}]", "must name a field"),
        ("[{field: x, op: like, value: a}]", "unknown variant `like`"),
    ] {
        let e = err(&filtered(bad));
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn approximate_aggregates_take_their_own_keys() {
    let aggregates = |a: &str| EXAMPLE.replace("[{op: count, as: n}]", a);
    let p = Pipeline::parse(&aggregates(
        "[{op: distinct, field: user, as: users}, {op: quantile, field: ms, q: 0.99, as: p99}]",
    ))
    .unwrap();
    assert_eq!(p.distinct_fields(), vec!["user".to_owned()]);
    assert_eq!(
        p.value_fields(),
        vec!["ms".to_owned()],
        "distinct values are not numbers"
    );
    for (bad, says) in [
        ("[{op: quantile, field: ms, as: p}]", "quantile needs q"),
        (
            "[{op: quantile, field: ms, q: 1.5, as: p}]",
            "1.5 is not from 0 to 1",
        ),
        (
            "[{op: max, field: ms, q: 0.5, as: p}]",
            "only quantile takes q",
        ),
        ("[{op: distinct, as: p}]", "needs a field"),
    ] {
        let e = err(&aggregates(bad));
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn late_records_are_dropped_unless_written() {
    assert_eq!(
        Pipeline::parse(EXAMPLE).unwrap().window.late_records,
        LateRecords::Drop
    );
    let p = Pipeline::parse(&EXAMPLE.replace("size: 1s", "size: 1s, late_records: write")).unwrap();
    assert_eq!(p.window.late_records, LateRecords::Write);
    let e = err(&EXAMPLE.replace("size: 1s", "size: 1s, late_records: keep"));
    assert!(e.contains("unknown variant `keep`"), "{e}");
}

#[test]
fn a_topic_sink_names_its_topic_and_keeps_checkpoints_at_its_url() {
    let sink = |s: &str| EXAMPLE.replace(r#"{type: parquet, url: "s3://bucket/counts"}"#, s);
    let p = Pipeline::parse(&sink(
        r#"{type: topic, topic: counts, url: "s3://bucket/counts"}"#,
    ))
    .unwrap();
    assert_eq!(p.sink.kind, SinkKind::Topic);
    assert_eq!(p.sink.topic.as_deref(), Some("counts"));
    for (bad, says) in [
        (r#"{type: topic, url: "s3://b/c"}"#, "needs its topic"),
        (
            r#"{type: topic, topic: events, url: "s3://b/c"}"#,
            "must not be the source topic",
        ),
        (
            r#"{type: parquet, topic: counts, url: "s3://b/c"}"#,
            "only a topic sink takes a topic",
        ),
        (r#"{type: topic, topic: counts}"#, "missing field `url`"),
    ] {
        let e = err(&sink(bad));
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn the_live_view_needs_an_address() {
    let p = Pipeline::parse(&format!("{EXAMPLE}live: {{listen: \"127.0.0.1:9095\"}}\n")).unwrap();
    assert_eq!(p.live.unwrap().listen, "127.0.0.1:9095");
    let e = err(&format!("{EXAMPLE}live: {{listen: \"localhost\"}}\n"));
    assert!(
        e.contains("live.listen") && e.contains("expected an address"),
        "{e}"
    );
}

#[test]
fn early_results_are_shorter_than_the_window_and_need_the_live_view() {
    let live = "live: {listen: \"127.0.0.1:9095\"}\n";
    let p = Pipeline::parse(&format!(
        "{}{live}",
        EXAMPLE.replace("size: 1s", "size: 10s, early: 1s")
    ))
    .unwrap();
    assert_eq!(p.window.early, Some(Duration::from_secs(1)));
    assert_eq!(Pipeline::parse(EXAMPLE).unwrap().window.early, None);
    let e = err(&format!(
        "{}{live}",
        EXAMPLE.replace("size: 1s", "size: 1s, early: 1s")
    ));
    assert!(
        e.contains("window.early") && e.contains("shorter than the window's size (1000ms)"),
        "{e}"
    );
    let e = err(&format!(
        "{}{live}",
        EXAMPLE.replace("size: 1s", "size: 1s, early: 0ms")
    ));
    assert!(
        e.contains("window.early") && e.contains("at least 1ms"),
        "{e}"
    );
    let e = err(&EXAMPLE.replace("size: 1s", "size: 10s, early: 1s"));
    assert!(
        e.contains("window.early") && e.contains("live view only"),
        "{e}"
    );
    let session = EXAMPLE.replace("tumbling, size: 1s", "session, gap: 2s, early: 2s");
    let e = err(&format!("{session}{live}"));
    assert!(e.contains("shorter than the window's gap (2000ms)"), "{e}");
}

#[test]
fn avro_needs_a_registry_url_and_only_avro_takes_one() {
    let avro = |registry: &str| EXAMPLE.replace("format: json", &format!("format: avro{registry}"));
    let p = Pipeline::parse(&avro(", registry: \"http://127.0.0.1:8081\"")).unwrap();
    assert_eq!(p.source.format, Format::Avro);
    assert_eq!(p.source.registry.as_deref(), Some("http://127.0.0.1:8081"));
    let e = err(&avro(""));
    assert!(
        e.contains("source.registry: format: avro needs the schema registry's URL"),
        "{e}"
    );
    for bad in ["127.0.0.1:8081", "http://", "ftp://r:1", "https://r:8081"] {
        let e = err(&avro(&format!(", registry: \"{bad}\"")));
        assert!(
            e.contains("source.registry") && e.contains(bad),
            "{bad}: {e}"
        );
    }
    let e = err(&EXAMPLE.replace("format: json", "format: json, registry: \"http://r:1\""));
    assert!(
        e.contains("source.registry: only format: avro takes a registry"),
        "{e}"
    );
}

const FIXED: &str = r#"
name: ticks
source:
  bootstrap: "b:9092"
  topic: ticks
  format: fixed
  endian: big
  layout: [{name: ts, type: i64}, {name: sym, type: "str:8"}, {name: price, type: f64}, {name: size, type: i32}]
  event_time: ts
  key: sym
window: {type: tumbling, size: 1s}
filter: [{field: size, op: ge, value: 100}]
aggregates: [{op: wavg, field: price, weight: size, as: vwap}]
sink: {type: parquet, url: "file:///tmp/x"}
"#;

#[test]
fn a_fixed_layout_parses_with_its_widths() {
    let p = Pipeline::parse(FIXED).unwrap();
    assert_eq!(p.source.endian, Some(Endian::Big));
    let layout = p.source.layout.unwrap();
    let types: Vec<_> = layout.iter().map(|f| (f.name.as_str(), f.kind)).collect();
    assert_eq!(
        types,
        [
            ("ts", FieldType::I64),
            ("sym", FieldType::Str(8)),
            ("price", FieldType::F64),
            ("size", FieldType::I32)
        ]
    );
    assert_eq!(layout.iter().map(|f| f.kind.width()).sum::<usize>(), 28);
    let p = Pipeline::parse(&FIXED.replace("  endian: big\n", "")).unwrap();
    assert_eq!(p.source.endian, None, "little-endian by default");
}

#[test]
fn a_bad_fixed_layout_is_refused_naming_what_is_wrong() {
    let e = err(&FIXED.replace("type: i32", "type: int"));
    assert!(e.contains("unknown field type \"int\""), "{e}");
    let e = err(&FIXED.replace("\"str:8\"", "\"str:0\""));
    assert!(e.contains("\"str:0\": a string's width"), "{e}");
    let e = err(&FIXED.replace("{name: size, type: i32}", "{name: price, type: i32}"));
    assert!(
        e.contains("source.layout[3].name: \"price\" is used twice"),
        "{e}"
    );
    let e = err(&FIXED.replace("{name: size, type: i32}", "{name: qty, type: i32}"));
    assert!(
        e.contains("source.layout: has no field \"size\" (aggregates), \"size\" (filter)"),
        "{e}"
    );
    let e = err(&FIXED.replace("event_time: ts", "event_time: time"));
    assert!(
        e.contains("has no field \"time\" (source.event_time)"),
        "{e}"
    );
    let e = err(&FIXED.replace("{name: ts, type: i64}", "{name: ts, type: f64}"));
    assert!(
        e.contains("source.event_time: \"ts\" is f64 in the layout"),
        "{e}"
    );
    let e = err(&FIXED.replace("field: price,", "field: sym,"));
    assert!(
        e.contains("\"sym\" is str:8 in the layout; the aggregates read it as a number"),
        "{e}"
    );
    let e = err(&FIXED.replace("field: size, op: ge", "field: sym, op: ge"));
    assert!(
        e.contains("\"sym\" is str:8 in the layout and cannot be compared with a number"),
        "{e}"
    );
    let e = err(&FIXED.replace("  layout: [", "  nolayout: ["));
    assert!(e.contains("unknown field `nolayout`"), "{e}");
    let e = err(&FIXED.replace("format: fixed", "format: json"));
    assert!(
        e.contains("source.layout: only format: fixed takes a layout"),
        "{e}"
    );
    let e = err(&EXAMPLE.replace("format: json", "format: fixed"));
    assert!(
        e.contains("source.layout: format: fixed needs the layout"),
        "{e}"
    );
    let e = err(&EXAMPLE.replace("format: json", "format: json, endian: big"));
    assert!(
        e.contains("source.endian: only format: fixed takes endian"),
        "{e}"
    );
}

#[test]
fn any_holds_conditions_one_of_which_must_hold() {
    let p = Pipeline::parse(&EXAMPLE.replace(
        "aggregates:",
        "filter: [{field: x, op: gt, value: 1}, {any: [{field: a, op: eq, value: b}, {field: c, op: in, values: [1, 2]}]}]\naggregates:",
    ))
    .unwrap();
    assert!(matches!(&p.filter[1], FilterItem::Any(any) if any.len() == 2));
    let fields: Vec<_> = p.filter_conditions().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["x", "a", "c"]);
    let with = |filter: &str| {
        err(&EXAMPLE.replace("aggregates:", &format!("filter: {filter}\naggregates:")))
    };
    let e = with("[{any: [{any: [{field: a, op: eq, value: 1}]}]}]");
    assert!(
        e.contains("an `any` inside an `any` is not supported"),
        "{e}"
    );
    let e = with("[{any: []}]");
    assert!(e.contains("`any` needs at least one condition"), "{e}");
    let e = with("[{any: [{field: a, op: eq, value: 1}], field: b}]");
    assert!(
        e.contains("`any` takes a list of conditions and no field"),
        "{e}"
    );
    let e = with("[{any: [{field: a, op: eq}]}]");
    assert!(
        e.contains("filter[0].any[0].value: this op needs a value"),
        "{e}"
    );
    let e = with("[{any: [{op: eq, value: 1}]}]");
    assert!(e.contains("a condition needs `field`"), "{e}");
    let e = with("[{any: [{field: a, op: eq, value: 1, typo: 2}]}]");
    assert!(e.contains("unknown field `typo`"), "{e}");
}

#[test]
fn only_a_parquet_sink_is_partitioned_by_time() {
    let hourly = EXAMPLE.replace(
        "sink: {type: parquet,",
        "sink: {partition_by: hour, type: parquet,",
    );
    assert_eq!(
        Pipeline::parse(&hourly).unwrap().sink.partition_by,
        Some(PartitionBy::Hour)
    );
    let e = err(&EXAMPLE.replace(
        "sink: {type: parquet,",
        "sink: {partition_by: weekly, type: parquet,",
    ));
    assert!(e.contains("weekly"), "{e}");
    let e = err(&EXAMPLE.replace(
        "sink: {type: parquet,",
        "sink: {partition_by: day, type: topic, topic: out,",
    ));
    assert!(e.contains("sink.partition_by"), "{e}");
}
