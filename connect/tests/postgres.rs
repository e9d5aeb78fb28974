//! The PostgreSQL sink and source against a real PostgreSQL (see
//! `support/pg.rs`): what they write and read, replays, and outages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support {
    pub mod pg;
}

use std::time::Instant;

use bytes::Bytes;
use connect::config::Config;
use connect::record::SinkRecord;
use connect::sink::postgres::{PostgresSink, PostgresSinkConfig};
use connect::source::postgres::PostgresSource;
use serde_json::{json, Value};
use support::pg::TestDb;

fn config(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn record(topic: &str, offset: i64, key: &str, value: Option<Value>) -> SinkRecord {
    SinkRecord {
        topic: topic.into(),
        partition: 0,
        offset,
        timestamp_ms: 0,
        key: Some(Bytes::from(key.to_owned())),
        value: value.map(|v| Bytes::from(v.to_string())),
        headers: Vec::new(),
    }
}

async fn rows(db: &tokio_postgres::Client, sql: &str) -> Vec<Value> {
    db.query(&format!("SELECT to_jsonb(r) FROM ({sql}) r"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, Value>(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_writes_upserts_replays_and_evolves_a_table_with_hostile_names() {
    let Some(pg) = TestDb::start() else { return };
    let db = pg.client().await;
    let url = pg.url();
    let settings = PostgresSinkConfig::parse(&config(&[
        ("connection.url", &url),
        ("table.name.format", "x\"; DROP TABLE victim; --${topic}"),
        ("insert.mode", "upsert"),
        ("pk.mode", "record_key"),
        ("pk.fields", "k"),
        ("auto.create", "true"),
        ("delete.enabled", "true"),
        ("batch.size", "2"),
    ]))
    .unwrap();
    db.batch_execute("CREATE TABLE victim (a int)")
        .await
        .unwrap();
    let mut sink = PostgresSink::new(settings.clone());
    let batch = vec![
        record(
            "t",
            0,
            "1",
            Some(json!({"v": "a'); DROP TABLE victim; --", "n": 1.5, "o": {"x": [1]}})),
        ),
        record("t", 1, "2", Some(json!({"v": "b", "n": 2.5, "o": null}))),
        record(
            "t",
            2,
            "1",
            Some(json!({"v": "a2", "n": 3.25, "o": {"y": true}})),
        ),
        record("t", 3, "3", Some(json!({"v": "c", "n": 4.0, "o": null}))),
        record("t", 4, "3", None),
    ];
    for r in batch.clone() {
        sink.put(r).unwrap();
    }
    let (durable, failed) = sink.flush_due(Instant::now()).await.unwrap();
    assert!(failed.is_none(), "{failed:?}");
    assert_eq!(durable, [("t".to_owned(), 0, 5)]);
    let table = "\"x\"\"; DROP TABLE victim; --t\"";
    let expected = json!([
        {"k": 1, "v": "a2", "n": 3.25, "o": {"y": true}},
        {"k": 2, "v": "b", "n": 2.5, "o": null},
    ]);
    let read = format!("SELECT k, v, n, o FROM {table} ORDER BY k");
    assert_eq!(Value::Array(rows(&db, &read).await), expected);
    assert_eq!(
        rows(&db, "SELECT to_regclass('victim')::text AS t").await,
        [json!({"t": "victim"})]
    );

    // a replay of the same records (a crash before the offsets were
    // committed) leaves the same rows
    let mut again = PostgresSink::new(settings.clone());
    for r in batch {
        again.put(r).unwrap();
    }
    assert!(again.flush_due(Instant::now()).await.unwrap().1.is_none());
    assert_eq!(Value::Array(rows(&db, &read).await), expected);

    // a new field without auto.evolve: the batch is refused, saying why
    again
        .put(record("t", 5, "4", Some(json!({"v": "d", "extra": 1}))))
        .unwrap();
    let (durable, failed) = again.flush_due(Instant::now()).await.unwrap();
    assert!(durable.is_empty());
    let failed = failed.unwrap();
    assert!(
        failed.message.contains("has no column extra"),
        "{}",
        failed.message
    );
    assert!(failed.message.contains("auto.evolve"), "{}", failed.message);
    assert_eq!(failed.records.len(), 1);

    // with auto.evolve the column is added (nullable)
    let mut evolving = PostgresSink::new(
        PostgresSinkConfig::parse(&config(&[
            ("connection.url", &url),
            ("table.name.format", "x\"; DROP TABLE victim; --${topic}"),
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "k"),
            ("auto.evolve", "true"),
        ]))
        .unwrap(),
    );
    evolving
        .put(record("t", 5, "4", Some(json!({"v": "d", "extra": 1}))))
        .unwrap();
    assert!(evolving
        .flush_due(Instant::now())
        .await
        .unwrap()
        .1
        .is_none());
    assert_eq!(
        rows(&db, &format!("SELECT k, extra FROM {table} ORDER BY k")).await,
        [
            json!({"k": 1, "extra": null}),
            json!({"k": 2, "extra": null}),
            json!({"k": 4, "extra": 1})
        ]
    );

    // a value its column's type cannot take: the batch is written again a
    // record at a time, and only that record is refused, with
    // PostgreSQL's reason; what follows it waits for the next flush (the
    // task fails at it without errors.tolerance=all)
    for (offset, key, n) in [
        (10, "10", json!(1.5)),
        (11, "11", json!("x")),
        (12, "12", json!(2.5)),
    ] {
        evolving
            .put(record("t", offset, key, Some(json!({"n": n}))))
            .unwrap();
    }
    let (durable, failed) = evolving.flush_due(Instant::now()).await.unwrap();
    assert_eq!(durable, [("t".to_owned(), 0, 11)]);
    let failed = failed.unwrap();
    assert_eq!(
        failed.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [11]
    );
    assert!(
        failed.message.starts_with("t-0 offset 11: "),
        "{}",
        failed.message
    );
    assert!(
        failed.message.contains("double precision"),
        "{}",
        failed.message
    );
    let (durable, failed) = evolving.flush_due(Instant::now()).await.unwrap();
    assert!(failed.is_none());
    assert_eq!(durable, [("t".to_owned(), 0, 13)]);

    // with errors.tolerance=all every refused record of the flush is
    // gathered, each with its own reason, and the others are written
    let mut tolerant = PostgresSink::new(
        PostgresSinkConfig::parse(&config(&[
            ("connection.url", &url),
            ("table.name.format", "x\"; DROP TABLE victim; --${topic}"),
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "k"),
            ("errors.tolerance", "all"),
        ]))
        .unwrap(),
    );
    for (offset, key, v) in [
        (20, "20", json!({"n": "y"})),
        (21, "21", json!({"n": 5.5})),
        (22, "22", json!({"nope": 1})),
    ] {
        tolerant.put(record("t", offset, key, Some(v))).unwrap();
    }
    let (durable, failed) = tolerant.flush_due(Instant::now()).await.unwrap();
    assert_eq!(durable, [("t".to_owned(), 0, 22)]);
    let failed = failed.unwrap();
    assert_eq!(
        failed.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [20, 22]
    );
    assert!(
        failed.reasons[0].contains("double precision"),
        "{:?}",
        failed.reasons
    );
    assert!(
        failed.reasons[1].contains("has no column nope"),
        "{:?}",
        failed.reasons
    );
    assert!(
        failed.message.ends_with("(and 1 more records refused)"),
        "{}",
        failed.message
    );
    assert_eq!(
        rows(
            &db,
            &format!("SELECT k, n FROM {table} WHERE k >= 10 ORDER BY k")
        )
        .await,
        [
            json!({"k": 10, "n": 1.5}),
            json!({"k": 12, "n": 2.5}),
            json!({"k": 21, "n": 5.5})
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_fails_with_a_clear_message_when_postgresql_stays_unreachable() {
    // nothing listens there
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgresql://postgres@127.0.0.1:{port}/postgres");
    let mut sink = PostgresSink::new(
        PostgresSinkConfig::parse(&config(&[
            ("connection.url", &url),
            ("max.retries", "2"),
            ("retry.backoff.ms", "10"),
        ]))
        .unwrap(),
    );
    sink.put(record("t", 0, "1", Some(json!({"a": 1}))))
        .unwrap();
    let e = sink.flush_due(Instant::now()).await.unwrap_err();
    assert!(
        e.contains(&format!(
            "PostgreSQL at 127.0.0.1:{port}/postgres stayed unreachable (2 retries)"
        )),
        "{e}"
    );
    assert!(e.contains("refused"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_asked_to_stop_does_not_wait_out_an_outage() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgresql://postgres@127.0.0.1:{port}/postgres");
    let mut sink = PostgresSink::new(
        PostgresSinkConfig::parse(&config(&[
            ("connection.url", &url),
            ("max.retries", "1000"),
            ("retry.backoff.ms", "50"),
        ]))
        .unwrap(),
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    sink.stop_on(stopped);
    sink.put(record("t", 0, "1", Some(json!({"a": 1}))))
        .unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let _ = stop.send(true);
    });
    let started = Instant::now();
    let (durable, failed) = sink.flush_due(Instant::now()).await.unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // nothing written, nothing to commit, nothing refused
    assert!(durable.is_empty() && failed.is_none());
}

async fn poll_all(source: &mut PostgresSource) -> (Vec<Value>, Vec<(String, String)>) {
    let (mut values, mut offsets) = (Vec::new(), Vec::new());
    loop {
        let polled = source.poll().await.unwrap();
        if polled.records.is_empty() {
            return (values, offsets);
        }
        for r in polled.records {
            values.push(serde_json::from_slice(&r.value).unwrap());
        }
        offsets.extend(polled.offsets);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_timestamp_mode_reads_rows_sharing_a_timestamp_together_and_bulk_reads_all() {
    let Some(pg) = TestDb::start() else { return };
    let db = pg.client().await;
    let url = pg.url();
    db.batch_execute(
        "CREATE TABLE ticks (id int, at timestamptz);
         INSERT INTO ticks SELECT i, '2026-03-01 10:00:00+00' FROM generate_series(1, 5) i;
         INSERT INTO ticks VALUES (6, '2026-03-01 10:00:01+00'), (7, NULL);",
    )
    .await
    .unwrap();
    let c = config(&[
        ("connection.url", &url),
        ("table.whitelist", "public.ticks"),
        ("mode", "timestamp"),
        ("timestamp.column.name", "at"),
        ("topic.prefix", "pg-"),
        ("poll.interval.ms", "10"),
        ("batch.max.rows", "2"),
    ]);
    let mut source = PostgresSource::new(&c).unwrap();
    let (values, offsets) = poll_all(&mut source).await;
    let mut ids: Vec<i64> = values.iter().map(|v| v["id"].as_i64().unwrap()).collect();
    // the five rows of 10:00:00 came in one batch of the limit's 2 and the
    // rest of their timestamp; the NULL one is not read
    ids[..5].sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    let last = offsets.last().unwrap();
    assert_eq!(last.0, r#"{"table":"public.ticks"}"#);
    assert_eq!(last.1, r#"{"timestamp_us":1772359201000000}"#);
    assert_eq!(values[0]["at"], "2026-03-01T10:00:00+00:00");

    // a restarted task resumes after the offset: only later rows
    db.batch_execute("UPDATE ticks SET at = '2026-03-01 10:00:02+00' WHERE id = 2")
        .await
        .unwrap();
    let mut resumed = PostgresSource::new(&c).unwrap();
    resumed.resume(&last.0, &last.1).unwrap();
    let (values, _) = poll_all(&mut resumed).await;
    assert_eq!(
        values,
        [json!({"id": 2, "at": "2026-03-01T10:00:02+00:00"})]
    );

    // the delay holds back rows newer than it
    db.batch_execute("INSERT INTO ticks VALUES (8, now())")
        .await
        .unwrap();
    let mut delayed = PostgresSource::new(&{
        let mut d = c.clone();
        d.insert("timestamp.delay.interval.ms".into(), "60000".into());
        d
    })
    .unwrap();
    delayed.resume(&last.0, &last.1).unwrap();
    let (values, _) = poll_all(&mut delayed).await;
    assert_eq!(values.len(), 1, "{values:?}");

    // bulk: every row, each poll, and no offset
    let mut bulk = PostgresSource::new(&config(&[
        ("connection.url", &url),
        ("query", "SELECT id FROM ticks WHERE id <= 3 ORDER BY id"),
        ("mode", "bulk"),
        ("topic.prefix", "all-ticks"),
        ("poll.interval.ms", "10"),
    ]))
    .unwrap();
    let polled = bulk.poll().await.unwrap();
    assert!(polled.offsets.is_empty());
    assert!(polled
        .records
        .iter()
        .all(|r| r.topic == "all-ticks" && r.key.is_none()));
    let ids: Vec<Value> = polled
        .records
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.value).unwrap()["id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!(2), json!(3)]);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(bulk.poll().await.unwrap().records.len(), 3);

    // a missing column is the task's failure, with PostgreSQL's reason
    let mut wrong = PostgresSource::new(&config(&[
        ("connection.url", &url),
        ("table.whitelist", "ticks"),
        ("mode", "incrementing"),
        ("incrementing.column.name", "nope"),
        ("topic.prefix", "pg-"),
    ]))
    .unwrap();
    let e = wrong.poll().await.err().unwrap();
    assert!(e.contains("column t.nope does not exist"), "{e}");
}
