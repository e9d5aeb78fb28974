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

#[test]
fn every_problem_is_reported() {
    let problems = validate(&config(&[
        ("mode", "timestamp+incrementing"),
        ("poll.interval.ms", "0"),
        ("batch.max.rows", "x"),
    ]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "table.whitelist",
            "incrementing.column.name",
            "timestamp.column.name",
            "topic.prefix",
            "poll.interval.ms",
            "batch.max.rows"
        ]
    );
    let problems = validate(&config(&[
        ("table.whitelist", "a"),
        ("query", "SELECT 1"),
        ("mode", "sometimes"),
        ("topic.prefix", "pg-"),
    ]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["query", "mode"]);
    assert!(validate(&config(&[
        ("table.whitelist", "a, sales.b"),
        ("mode", "incrementing"),
        ("incrementing.column.name", "id"),
        ("topic.prefix", "pg-"),
    ]))
    .is_empty());
}

#[test]
fn tables_are_dealt_over_at_most_tasks_max_tasks() {
    let c = config(&[
        ("table.whitelist", "a,b,c,d,e"),
        ("mode", "bulk"),
        ("topic.prefix", "pg-"),
    ]);
    let split: Vec<String> = task_configs(&c, 2)
        .iter()
        .map(|t| t["task.tables"].clone())
        .collect();
    assert_eq!(split, ["a,c,e", "b,d"]);
    let split: Vec<String> = task_configs(&c, 8)
        .iter()
        .map(|t| t["task.tables"].clone())
        .collect();
    assert_eq!(split, ["a", "b", "c", "d", "e"]);
    // a task reads only its own tables, each under its own partition
    let task = PostgresSource::new(&task_configs(&c, 2)[1]).unwrap();
    assert_eq!(task.partitions(), [r#"{"table":"b"}"#, r#"{"table":"d"}"#]);
    // a query is one task
    let q = config(&[
        ("query", "SELECT 1 AS x"),
        ("mode", "bulk"),
        ("topic.prefix", "q"),
    ]);
    assert_eq!(task_configs(&q, 4).len(), 1);
    let task = PostgresSource::new(&q).unwrap();
    assert_eq!(task.partitions(), [r#"{"query":"SELECT 1 AS x"}"#]);
}

#[test]
fn offsets_round_trip_and_bad_ones_are_refused() {
    let o = Offset {
        incrementing: Some(42),
        timestamp_us: Some(1_767_225_600_123_456),
    };
    assert_eq!(
        o.encode(),
        r#"{"incrementing":42,"timestamp_us":1767225600123456}"#
    );
    assert_eq!(Offset::decode(&o.encode()).unwrap(), o);
    let inc = Offset {
        incrementing: Some(-3),
        timestamp_us: None,
    };
    assert_eq!(Offset::decode(&inc.encode()).unwrap(), inc);
    assert!(Offset::decode("nope").is_err());
    assert!(Offset::decode(r#"{"incrementing":"7"}"#).is_err());

    let c = config(&[
        ("table.whitelist", "a,b"),
        ("mode", "incrementing"),
        ("incrementing.column.name", "id"),
        ("topic.prefix", "pg-"),
    ]);
    let mut task = PostgresSource::new(&c).unwrap();
    task.resume(r#"{"table":"b"}"#, r#"{"incrementing":9}"#)
        .unwrap();
    assert_eq!(task.tables[0].offset, Offset::default());
    assert_eq!(task.tables[1].offset.incrementing, Some(9));
    assert_eq!(task.tables[1].topic, "pg-b");
}

#[test]
fn queries_quote_names_and_bind_offsets() {
    let from = TableName::parse("sales.or\"ders").quoted().unwrap();
    assert_eq!(from, "\"sales\".\"or\"\"ders\"");
    let q = queries(&from, Mode::Incrementing, "id", "", 100).unwrap();
    assert_eq!(
        q.next,
        "SELECT t.\"id\"::bigint AS __inc, to_jsonb(t)::text AS __row FROM \"sales\".\"or\"\"ders\" AS t \
         WHERE t.\"id\" > $1::bigint ORDER BY t.\"id\" LIMIT 100"
    );
    assert_eq!(q.at_timestamp, None);

    let q = queries("\"t\"", Mode::Timestamp, "", "updated at", 10).unwrap();
    let since = "('epoch'::timestamptz + $1::bigint * interval '1 microsecond')";
    assert_eq!(
        q.next,
        format!(
            "SELECT (extract(epoch FROM t.\"updated at\") * 1000000)::bigint AS __ts_us, \
             to_jsonb(t)::text AS __row FROM \"t\" AS t WHERE t.\"updated at\" > {since} AND \
             t.\"updated at\" < now() - $2::bigint * interval '1 millisecond' \
             ORDER BY t.\"updated at\" LIMIT 10"
        )
    );
    assert!(q
        .at_timestamp
        .unwrap()
        .ends_with(&format!("WHERE t.\"updated at\" = {since}")));

    let q = queries("\"t\"", Mode::TimestampIncrementing, "id", "ts", 5).unwrap();
    assert!(q.next.contains(&format!(
        "(t.\"ts\" > {since} OR (t.\"ts\" = {since} AND t.\"id\" > $2::bigint))"
    )));
    assert!(q.next.contains("t.\"ts\" < now() - $3::bigint"));
    assert!(q.next.ends_with("ORDER BY t.\"ts\", t.\"id\" LIMIT 5"));

    assert_eq!(
        queries("(SELECT 1)", Mode::Bulk, "", "", 5).unwrap().next,
        "SELECT to_jsonb(t)::text AS __row FROM (SELECT 1) AS t"
    );
}

#[test]
fn bytea_becomes_base64() {
    assert_eq!(hex_to_base64("\\x00ff10").as_deref(), Some("AP8Q"));
    assert_eq!(hex_to_base64("\\x").as_deref(), Some(""));
    assert_eq!(hex_to_base64("00ff"), None);
    assert_eq!(hex_to_base64("\\x0"), None);
    assert_eq!(hex_to_base64("\\xzz"), None);
    assert_eq!(
        with_base64(r#"{"id": 1, "blob": "\\x6869"}"#, &["blob".to_owned()]),
        r#"{"blob":"aGk=","id":1}"#
    );
    // without bytea columns the row is PostgreSQL's text as it is
    assert_eq!(with_base64(r#"{"n": 1.10}"#, &[]), r#"{"n": 1.10}"#);
}
