use std::collections::BTreeMap;
use std::time::Duration;

use ::object_store::memory::InMemory;
use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use futures::TryStreamExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::*;

fn config(pairs: &[(&str, &str)]) -> ObjectStoreSinkConfig {
    let mut map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.entry("store.url".into())
        .or_insert_with(|| "memory://".into());
    ObjectStoreSinkConfig::parse(&map).unwrap()
}

fn writer(pairs: &[(&str, &str)]) -> (ObjectStoreWriter, Arc<InMemory>) {
    let store = Arc::new(InMemory::new());
    let w = ObjectStoreWriter::with_store(
        config(pairs),
        Arc::clone(&store) as Arc<dyn ObjectStore>,
        Path::from("lake"),
    );
    (w, store)
}

fn record(topic: &str, partition: i32, offset: i64, value: &str) -> SinkRecord {
    SinkRecord {
        topic: topic.into(),
        partition,
        offset,
        timestamp_ms: 1_700_000_000_000 + offset * 1000,
        key: Some(Bytes::from(format!("k{offset}"))),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
    }
}

fn value_of(offset: i64) -> String {
    format!("{{\"n\":{offset}}}")
}

async fn names(store: &InMemory) -> Vec<String> {
    let mut names: Vec<String> = store
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    names.sort();
    names
}

async fn read(store: &InMemory, name: &str) -> Bytes {
    store
        .get(&Path::from(name))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
}

async fn read_parquet(store: &InMemory, name: &str) -> RecordBatch {
    let reader = ParquetRecordBatchReaderBuilder::try_new(read(store, name).await)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(batches.len(), 1, "{name}");
    batches.into_iter().next().unwrap()
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> &'a T {
    batch
        .column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<T>()
        .unwrap()
}

#[tokio::test]
async fn full_files_are_written_and_the_rest_stays_buffered() {
    let (mut w, store) = writer(&[]);
    for offset in 0..2500 {
        w.put(record("orders", 0, offset, &value_of(offset)))
            .unwrap();
    }
    assert_eq!(w.buffered_records(), 2500);

    let committed = w.flush_due(Instant::now()).await.unwrap();
    assert_eq!(committed, vec![("orders".to_string(), 0, 2000)]);
    assert_eq!(w.buffered_records(), 500);
    assert_eq!(
        names(&store).await,
        [
            "lake/topics/orders/partition=0/orders+0+00000000000000000000.parquet",
            "lake/topics/orders/partition=0/orders+0+00000000000000001000.parquet",
        ]
    );
    let stats = w.stats();
    assert_eq!((stats.files_written, stats.records_written), (2, 2000));

    // Every row holds its record.
    let mut bytes = 0;
    for (file, first) in [(0, 0), (1, 1000)] {
        let name = format!("lake/topics/orders/partition=0/orders+0+{first:020}.parquet");
        bytes += read(&store, &name).await.len() as u64;
        let batch = read_parquet(&store, &name).await;
        assert_eq!(batch.num_rows(), 1000, "file {file}");
        let offsets = column::<Int64Array>(&batch, "offset");
        let values = column::<StringArray>(&batch, "value");
        let topics = column::<StringArray>(&batch, "topic");
        for row in 0..1000 {
            let offset = first + row as i64;
            assert_eq!(offsets.value(row), offset);
            assert_eq!(values.value(row), value_of(offset));
            assert_eq!(topics.value(row), "orders");
        }
        assert_eq!(
            column::<StringArray>(&batch, "key").value(0),
            format!("k{first}")
        );
        assert_eq!(column::<StringArray>(&batch, "headers").null_count(), 1000);
    }
    assert_eq!(stats.bytes_written, bytes);

    // Nothing more is due, and nothing more is reported.
    assert_eq!(w.flush_due(Instant::now()).await.unwrap(), vec![]);
    assert_eq!(names(&store).await.len(), 2);

    // The 500 left become a file once 500 more arrive.
    for offset in 2500..3000 {
        w.put(record("orders", 0, offset, &value_of(offset)))
            .unwrap();
    }
    let committed = w.flush_due(Instant::now()).await.unwrap();
    assert_eq!(committed, vec![("orders".to_string(), 0, 3000)]);
    assert_eq!(w.buffered_records(), 0);
}

#[tokio::test]
async fn partitions_are_buffered_and_committed_separately() {
    let (mut w, store) = writer(&[("flush.size", "3")]);
    // Offsets with gaps (a compacted topic): commits are last offset + 1.
    for (topic, partition, offset) in [
        ("a", 0, 10),
        ("a", 1, 0),
        ("b", 0, 7),
        ("a", 0, 12),
        ("a", 1, 1),
        ("a", 0, 15),
        ("b", 0, 8),
        ("b", 0, 9),
        ("a", 0, 16),
    ] {
        w.put(record(topic, partition, offset, "{}")).unwrap();
    }
    let committed = w.flush_due(Instant::now()).await.unwrap();
    assert_eq!(
        committed,
        vec![("a".to_string(), 0, 16), ("b".to_string(), 0, 10)]
    );
    assert_eq!(w.buffered_records(), 3);
    assert_eq!(
        names(&store).await,
        [
            "lake/topics/a/partition=0/a+0+00000000000000000010.parquet",
            "lake/topics/b/partition=0/b+0+00000000000000000007.parquet",
        ]
    );
}

#[tokio::test]
async fn json_lines_read_back() {
    let (mut w, store) = writer(&[("format", "json"), ("flush.size", "100")]);
    for offset in 0..100 {
        w.put(record("orders", 2, offset, &value_of(offset)))
            .unwrap();
    }
    assert_eq!(
        w.flush_due(Instant::now()).await.unwrap(),
        vec![("orders".to_string(), 2, 100)]
    );
    let name = "lake/topics/orders/partition=2/orders+2+00000000000000000000.json";
    assert_eq!(names(&store).await, [name]);
    let text = String::from_utf8(read(&store, name).await.to_vec()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 100);
    for (i, line) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let offset = i as i64;
        assert_eq!(v["offset"], offset);
        assert_eq!(v["partition"], 2);
        assert_eq!(v["topic"], "orders");
        assert_eq!(v["timestamp"], 1_700_000_000_000 + offset * 1000);
        // JSON values are embedded as JSON; the key is not JSON, so a string.
        assert_eq!(v["value"], serde_json::json!({ "n": offset }));
        assert_eq!(v["key"], format!("k{offset}"));
    }
}

#[tokio::test]
async fn the_field_partitioner_writes_one_file_per_value() {
    let (mut w, store) = writer(&[
        ("partitioner.class", "field"),
        ("partition.field.name", "region"),
        ("flush.size", "5"),
    ]);
    for (offset, value) in [
        r#"{"region":"eu","n":0}"#,
        r#"{"region":"us","n":1}"#,
        r#"{"region":"eu","n":2}"#,
        r#"not json"#,
        r#"{"region":"us","n":4}"#,
        r#"{"region":"ap","n":5}"#,
    ]
    .into_iter()
    .enumerate()
    {
        w.put(record("orders", 1, offset as i64, value)).unwrap();
    }
    assert_eq!(
        w.flush_due(Instant::now()).await.unwrap(),
        vec![("orders".to_string(), 1, 5)]
    );
    assert_eq!(
        names(&store).await,
        [
            "lake/topics/orders/region=eu/orders+1+00000000000000000000.parquet",
            "lake/topics/orders/region=null/orders+1+00000000000000000003.parquet",
            "lake/topics/orders/region=us/orders+1+00000000000000000001.parquet",
        ]
    );
    let batch = read_parquet(
        &store,
        "lake/topics/orders/region=us/orders+1+00000000000000000001.parquet",
    )
    .await;
    let offsets = column::<Int64Array>(&batch, "offset");
    assert_eq!(offsets.values().to_vec(), [1, 4]);
    assert_eq!(w.buffered_records(), 1);
    assert_eq!(w.stats().files_written, 3);
}

#[tokio::test]
async fn the_time_partitioner_writes_by_record_time() {
    let (mut w, store) = writer(&[
        ("partitioner.class", "time"),
        ("path.format", "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"),
        ("partition.duration.ms", "3600000"),
        ("topics.dir", "raw/kafka"),
        ("format", "json"),
        ("flush.size", "3"),
    ]);
    let hour = 3_600_000;
    // 2023-11-14T22:00:00Z
    let base = 1_699_999_200_000;
    for (offset, ts) in [(0, base + 5), (1, base + hour + 1), (2, base + hour - 1)] {
        let mut r = record("clicks", 0, offset, "{}");
        r.timestamp_ms = ts;
        w.put(r).unwrap();
    }
    w.flush_due(Instant::now()).await.unwrap();
    assert_eq!(
        names(&store).await,
        [
            "lake/raw/kafka/clicks/year=2023/month=11/day=14/hour=22/clicks+0+00000000000000000000.json",
            "lake/raw/kafka/clicks/year=2023/month=11/day=14/hour=23/clicks+0+00000000000000000001.json",
        ]
    );
}

#[tokio::test]
async fn a_rewrite_after_a_crash_replaces_the_same_objects() {
    let store = Arc::new(InMemory::new());
    let pairs: &[(&str, &str)] = &[
        ("flush.size", "40"),
        ("partitioner.class", "field"),
        ("partition.field.name", "color"),
    ];
    let records: Vec<SinkRecord> = (0..100)
        .map(|offset| {
            let color = ["red", "green", "blue"][offset as usize % 3];
            let mut r = record(
                "t",
                0,
                offset,
                &format!(r#"{{"color":"{color}","n":{offset}}}"#),
            );
            r.headers = vec![("h".into(), Some(Bytes::from(format!("{offset}"))))];
            r
        })
        .collect();

    let mut first = ObjectStoreWriter::with_store(
        config(pairs),
        Arc::clone(&store) as Arc<dyn ObjectStore>,
        Path::default(),
    );
    for r in &records {
        first.put(r.clone()).unwrap();
    }
    assert_eq!(
        first.flush_due(Instant::now()).await.unwrap(),
        vec![("t".to_string(), 0, 80)]
    );
    let before = names(&store).await;
    assert_eq!(before.len(), 6);
    let mut contents = Vec::new();
    for name in &before {
        contents.push(read(&store, name).await);
    }

    // The task dies before committing 80; its successor reads from the
    // last commit (0) again.
    drop(first);
    let mut second = ObjectStoreWriter::with_store(
        config(pairs),
        Arc::clone(&store) as Arc<dyn ObjectStore>,
        Path::default(),
    );
    for r in &records {
        second.put(r.clone()).unwrap();
    }
    assert_eq!(
        second.flush_due(Instant::now()).await.unwrap(),
        vec![("t".to_string(), 0, 80)]
    );
    assert_eq!(names(&store).await, before);
    for (name, content) in before.iter().zip(&contents) {
        assert_eq!(&read(&store, name).await, content, "{name}");
    }
}

#[tokio::test]
async fn a_short_buffer_is_written_once_old_enough() {
    let (mut w, store) = writer(&[("rotate.schedule.interval.ms", "60000")]);
    assert_eq!(w.next_rotation(), None);
    let start = Instant::now();
    for offset in 0..3 {
        w.put(record("t", 0, offset, "{}")).unwrap();
    }
    let due = w.next_rotation().unwrap();
    assert!(due >= start + Duration::from_secs(60));
    assert_eq!(w.flush_due(start).await.unwrap(), vec![]);
    assert_eq!(w.buffered_records(), 3);

    let later = Instant::now() + Duration::from_secs(61);
    assert_eq!(
        w.flush_due(later).await.unwrap(),
        vec![("t".to_string(), 0, 3)]
    );
    assert_eq!(w.buffered_records(), 0);
    assert_eq!(
        names(&store).await,
        ["lake/topics/t/partition=0/t+0+00000000000000000000.parquet"]
    );
    assert_eq!(w.next_rotation(), None);
}

#[tokio::test]
async fn close_forgets_revoked_partitions() {
    let (mut w, store) = writer(&[("flush.size", "2")]);
    for offset in 0..3 {
        w.put(record("t", 0, offset, "{}")).unwrap();
        w.put(record("t", 1, offset, "{}")).unwrap();
    }
    w.close(&[("t".to_string(), 1), ("other".to_string(), 9)]);
    assert_eq!(w.buffered_records(), 3);
    assert_eq!(
        w.flush_due(Instant::now()).await.unwrap(),
        vec![("t".to_string(), 0, 2)]
    );
    assert_eq!(names(&store).await.len(), 1);
}

#[tokio::test]
async fn reading_a_partition_again_drops_what_follows() {
    let (mut w, store) = writer(&[("flush.size", "4"), ("format", "json")]);
    for offset in 0..3 {
        w.put(record("t", 0, offset, "\"first\"")).unwrap();
    }
    // The task sought back to offset 1: 1 and 2 come again.
    for offset in 1..4 {
        w.put(record("t", 0, offset, "\"second\"")).unwrap();
    }
    assert_eq!(w.buffered_records(), 4);
    w.flush_due(Instant::now()).await.unwrap();
    let text = read(
        &store,
        "lake/topics/t/partition=0/t+0+00000000000000000000.json",
    )
    .await;
    let values: Vec<serde_json::Value> = String::from_utf8(text.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["value"].clone())
        .collect();
    assert_eq!(values, ["first", "second", "second", "second"]);
}

#[tokio::test]
async fn a_non_utf8_value_with_a_string_converter_is_refused() {
    let (mut w, _) = writer(&[(
        "value.converter",
        "org.apache.kafka.connect.storage.StringConverter",
    )]);
    let mut r = record("t", 3, 17, "");
    r.value = Some(Bytes::from_static(&[0x80, 0x81]));
    let e = w.put(r.clone()).unwrap_err();
    assert!(
        matches!(
            &e,
            SinkError::NotUtf8 {
                partition: 3,
                offset: 17,
                field: "value",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("t-3 at offset 17"), "{e}");
    assert_eq!(w.buffered_records(), 0);

    // Stored as bytes, it is accepted.
    let (mut w, _) = writer(&[("value.converter", "bytes")]);
    w.put(r).unwrap();
    assert_eq!(w.buffered_records(), 1);
}

#[tokio::test]
async fn a_failed_write_keeps_the_records_and_the_offsets_already_durable() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(::object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let mut w =
        ObjectStoreWriter::with_store(config(&[("flush.size", "2")]), store, Path::default());
    // A file where partition 1's folder should be: its writes fail.
    let blocker = dir.path().join("topics/t/partition=1");
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, b"in the way").unwrap();

    for offset in 0..4 {
        w.put(record("t", 0, offset, "{}")).unwrap();
        w.put(record("t", 1, offset, "{}")).unwrap();
    }
    let e = w.flush_due(Instant::now()).await.unwrap_err();
    assert!(matches!(e, SinkError::Write { .. }), "{e:?}");
    assert!(e.to_string().contains("partition=1"), "{e}");
    // Partition 0 is written; partition 1 stays buffered.
    assert_eq!(w.buffered_records(), 4);
    assert_eq!(w.stats().files_written, 2);

    std::fs::remove_file(&blocker).unwrap();
    assert_eq!(
        w.flush_due(Instant::now()).await.unwrap(),
        vec![("t".to_string(), 0, 4), ("t".to_string(), 1, 4)]
    );
    assert_eq!(w.buffered_records(), 0);
    assert_eq!(w.stats().files_written, 4);
}

#[test]
fn open_builds_the_store_of_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("sink").display());
    let w = ObjectStoreWriter::open(config(&[("store.url", &url)])).unwrap();
    assert_eq!(w.buffered_records(), 0);
    assert!(dir.path().join("sink").is_dir());

    // The URL's shape passed parse; the store itself refuses the prefix.
    let e = ObjectStoreWriter::open(config(&[("store.url", "memory:///bad\u{0}")])).unwrap_err();
    assert!(matches!(e, SinkError::Store { .. }), "{e:?}");
    assert!(e.to_string().contains("store.url"), "{e}");
}
