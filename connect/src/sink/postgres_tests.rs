use bytes::Bytes;
use serde_json::json;

use super::*;

fn config(pairs: &[(&str, &str)]) -> Config {
    let mut c: Config = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    c.entry("connection.url".into())
        .or_insert_with(|| "postgresql://u@127.0.0.1:5432/db".into());
    c
}

fn sink(pairs: &[(&str, &str)]) -> PostgresSinkConfig {
    PostgresSinkConfig::parse(&config(pairs)).unwrap()
}

fn record(topic: &str, offset: i64, key: Option<&str>, value: Option<&str>) -> SinkRecord {
    SinkRecord {
        topic: topic.into(),
        partition: 0,
        offset,
        timestamp_ms: 0,
        key: key.map(|k| Bytes::from(k.to_owned())),
        value: value.map(|v| Bytes::from(v.to_owned())),
        headers: Vec::new(),
    }
}

fn fields(op: &Op) -> Value {
    match op {
        Op::Write(f) | Op::Delete(f) => Value::Object(f.clone()),
        Op::Skip => Value::Null,
    }
}

#[test]
fn every_problem_is_reported() {
    let problems = validate(&config(&[
        ("connection.url", ""),
        ("insert.mode", "merge"),
        ("pk.mode", "record_value"),
        ("delete.enabled", "yes"),
        ("batch.size", "0"),
    ]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "connection.url",
            "insert.mode",
            "pk.fields",
            "delete.enabled",
            "batch.size"
        ]
    );
}

#[test]
fn upsert_needs_a_key_and_delete_needs_the_record_key() {
    let problems = validate(&config(&[
        ("insert.mode", "upsert"),
        ("delete.enabled", "true"),
    ]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["insert.mode", "delete.enabled"]);
    assert!(validate(&config(&[
        ("insert.mode", "upsert"),
        ("pk.mode", "record_key"),
        ("delete.enabled", "true"),
    ]))
    .is_empty());
}

#[test]
fn the_table_is_the_format_with_the_topic_and_a_dotted_topic_stays_one_name() {
    let c = sink(&[]);
    assert_eq!(
        c.table_for("orders.v1"),
        TableName {
            schema: None,
            table: "orders.v1".into()
        }
    );
    let c = sink(&[("table.name.format", "sales.kafka_${topic}")]);
    assert_eq!(
        c.table_for("orders.v1"),
        TableName {
            schema: Some("sales".into()),
            table: "kafka_orders.v1".into()
        }
    );
    assert_eq!(
        c.table_for("orders.v1").quoted().unwrap(),
        "\"sales\".\"kafka_orders.v1\""
    );
}

#[test]
fn a_primitive_key_is_the_id_column_and_an_object_key_gives_its_fields() {
    let c = sink(&[("pk.mode", "record_key"), ("insert.mode", "upsert")]);
    let row = c
        .to_row(&record(
            "t",
            0,
            Some("42"),
            Some(r#"{"seq":42,"user":"ada"}"#),
        ))
        .unwrap();
    assert_eq!(row.pk, ["id"]);
    assert_eq!(fields(&row.op), json!({"id": 42, "seq": 42, "user": "ada"}));

    let row = c
        .to_row(&record(
            "t",
            0,
            Some(r#"{"region":"eu","n":7}"#),
            Some(r#"{"n":1,"x":true}"#),
        ))
        .unwrap();
    assert_eq!(row.pk, ["n", "region"]);
    // the key's fields win over the value's
    assert_eq!(fields(&row.op), json!({"n": 7, "region": "eu", "x": true}));

    let c = sink(&[("pk.mode", "record_key"), ("pk.fields", "order_id")]);
    let row = c
        .to_row(&record("t", 0, Some("abc"), Some(r#"{"a":1}"#)))
        .unwrap();
    assert_eq!(row.pk, ["order_id"]);
    assert_eq!(fields(&row.op), json!({"order_id": "abc", "a": 1}));
}

#[test]
fn the_json_converter_envelope_gives_its_payload() {
    let c = sink(&[("pk.mode", "record_value"), ("pk.fields", "seq")]);
    let value = r#"{"schema":{"type":"struct","fields":[]},"payload":{"seq":3,"v":"x"}}"#;
    let row = c.to_row(&record("t", 0, None, Some(value))).unwrap();
    assert_eq!(row.pk, ["seq"]);
    assert_eq!(fields(&row.op), json!({"seq": 3, "v": "x"}));
}

#[test]
fn a_record_that_cannot_be_a_row_says_why() {
    let by_value = sink(&[("pk.mode", "record_value"), ("pk.fields", "seq")]);
    let by_key = sink(&[("pk.mode", "record_key")]);
    let cases = [
        (
            &by_value,
            record("t", 0, None, Some("[1,2]")),
            "an array, not a JSON object",
        ),
        (
            &by_value,
            record("t", 0, None, Some("not json")),
            "not JSON",
        ),
        (
            &by_value,
            record("t", 0, None, Some(r#"{"user":"ada"}"#)),
            "no pk field \"seq\"",
        ),
        (
            &by_value,
            record("t", 0, None, Some(r#"{"seq":null}"#)),
            "is null",
        ),
        (
            &by_key,
            record("t", 0, None, Some(r#"{"a":1}"#)),
            "has no key",
        ),
        (
            &by_key,
            record("t", 0, Some("null"), Some(r#"{"a":1}"#)),
            "key is null",
        ),
    ];
    for (c, r, why) in cases {
        let e = c.to_row(&r).unwrap_err();
        assert!(e.contains(why), "{e:?} does not say {why:?}");
    }
}

#[test]
fn a_tombstone_deletes_its_key_only_when_deletes_are_enabled() {
    let c = sink(&[("pk.mode", "record_key"), ("delete.enabled", "true")]);
    let row = c.to_row(&record("t", 5, Some("7"), None)).unwrap();
    assert_eq!(
        row.op,
        Op::Delete(json!({"id": 7}).as_object().unwrap().clone())
    );
    let c = sink(&[("pk.mode", "record_key")]);
    assert_eq!(
        c.to_row(&record("t", 5, Some("7"), None)).unwrap().op,
        Op::Skip
    );
}

#[test]
fn types_are_inferred_from_json_values() {
    assert_eq!(infer_type(&json!(1)), "bigint");
    assert_eq!(infer_type(&json!(-1)), "bigint");
    assert_eq!(infer_type(&json!(u64::MAX)), "numeric");
    assert_eq!(infer_type(&json!(1.5)), "double precision");
    assert_eq!(infer_type(&json!(true)), "boolean");
    assert_eq!(infer_type(&json!("x")), "text");
    assert_eq!(infer_type(&json!(null)), "text");
    assert_eq!(infer_type(&json!({"a": 1})), "jsonb");
    assert_eq!(infer_type(&json!([1])), "jsonb");
}

#[test]
fn statements_quote_every_name_and_bind_the_rows_as_one_parameter() {
    let t = TableName {
        schema: None,
        table: "or\"ders; DROP TABLE x".into(),
    };
    let cols = ["id".to_owned(), "a\"b".to_owned()];
    let pk = ["id".to_owned()];
    assert_eq!(
        write_sql(&t, &cols, &pk, InsertMode::Upsert).unwrap(),
        "INSERT INTO \"or\"\"ders; DROP TABLE x\" (\"id\", \"a\"\"b\") SELECT \"id\", \"a\"\"b\" \
         FROM json_populate_recordset(NULL::\"or\"\"ders; DROP TABLE x\", $1::json) \
         ON CONFLICT (\"id\") DO UPDATE SET \"a\"\"b\" = EXCLUDED.\"a\"\"b\""
    );
    assert_eq!(
        write_sql(&t, &cols, &[], InsertMode::Insert).unwrap(),
        "INSERT INTO \"or\"\"ders; DROP TABLE x\" (\"id\", \"a\"\"b\") SELECT \"id\", \"a\"\"b\" \
         FROM json_populate_recordset(NULL::\"or\"\"ders; DROP TABLE x\", $1::json)"
    );
    // only pk columns: nothing to update
    assert!(write_sql(&t, &pk, &pk, InsertMode::Upsert)
        .unwrap()
        .ends_with("ON CONFLICT (\"id\") DO NOTHING"));
    let s = TableName {
        schema: Some("s".into()),
        table: "t".into(),
    };
    assert_eq!(
        delete_sql(&s, &["k1".to_owned(), "k2".to_owned()]).unwrap(),
        "DELETE FROM \"s\".\"t\" AS d USING json_populate_recordset(NULL::\"s\".\"t\", $1::json) AS k \
         WHERE d.\"k1\" = k.\"k1\" AND d.\"k2\" = k.\"k2\""
    );
    assert_eq!(
        create_sql(&s, &[("id".into(), "bigint"), ("v".into(), "jsonb")], &pk).unwrap(),
        "CREATE TABLE IF NOT EXISTS \"s\".\"t\" (\"id\" bigint NOT NULL, \"v\" jsonb, PRIMARY KEY (\"id\"))"
    );
    assert_eq!(
        add_column_sql(&s, "new col", "text").unwrap(),
        "ALTER TABLE \"s\".\"t\" ADD COLUMN IF NOT EXISTS \"new col\" text"
    );
    assert!(write_sql(&s, &["a\0".to_owned()], &[], InsertMode::Insert).is_err());
}

#[test]
fn a_batch_becomes_ordered_statements_that_touch_a_key_once_each() {
    let c = sink(&[
        ("pk.mode", "record_key"),
        ("insert.mode", "upsert"),
        ("delete.enabled", "true"),
    ]);
    let rows: Vec<Row> = [
        record("a", 0, Some("1"), Some(r#"{"v":1}"#)),
        record("a", 1, Some("2"), Some(r#"{"v":2}"#)),
        // the same key again: a statement of its own
        record("a", 2, Some("1"), Some(r#"{"v":3}"#)),
        record("a", 3, Some("2"), None),
        record("b", 0, Some("1"), Some(r#"{"v":1,"w":"x"}"#)),
    ]
    .iter()
    .map(|r| c.to_row(r).unwrap())
    .collect();
    let s = statements(&rows);
    let shape: Vec<(&str, bool, usize)> = s
        .iter()
        .map(|s| (s.table.table.as_str(), s.delete, s.rows.len()))
        .collect();
    assert_eq!(
        shape,
        [
            ("a", false, 2),
            ("a", false, 1),
            ("a", true, 1),
            ("b", false, 1)
        ]
    );
    assert_eq!(s[1].rows, [json!({"id": 1, "v": 3})]);
    assert_eq!(s[3].columns, ["id", "v", "w"]);
}
