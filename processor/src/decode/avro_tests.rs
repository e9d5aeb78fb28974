use super::*;
use crate::filter::Predicates;
use crate::testing::binary_record;
use apache_avro::types::Record as AvroRecord;
use arrow_array::Array;

const SCHEMA: &str = r#"{"type": "record", "name": "Tick", "fields": [
  {"name": "sym", "type": "string"},
  {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "price", "type": "double"},
  {"name": "size", "type": ["null", "int"]},
  {"name": "venue", "type": ["null", "string"], "default": null}
]}"#;

/// Another schema of the same subject: an int event time, a long key.
const SCHEMA_2: &str = r#"{"type": "record", "name": "Tick2", "fields": [
  {"name": "sym", "type": "long"},
  {"name": "ts", "type": "long"},
  {"name": "price", "type": "float"}
]}"#;

fn pipeline() -> Pipeline {
    Pipeline::parse(
        r#"
name: t
source: {bootstrap: "b:9092", topic: t, format: avro, registry: "http://127.0.0.1:1", event_time: ts, key: sym}
window: {type: tumbling, size: 1s}
filter: [{any: [{field: size, op: ge, value: 100}, {field: venue, op: eq, value: X}]}]
aggregates: [{op: count, as: n}, {op: sum, field: price, as: p}, {op: sum, field: size, as: v}, {op: distinct, field: venue, as: d}]
sink: {type: parquet, url: "file:///tmp/x"}
"#,
    )
    .unwrap()
}

/// `fill`'s record in the Confluent wire format under schema id `id`.
fn wire_value(id: u32, schema: &str, fill: impl FnOnce(&mut AvroRecord)) -> Vec<u8> {
    let schema = Schema::parse_str(schema).unwrap();
    let mut r = AvroRecord::new(&schema).unwrap();
    fill(&mut r);
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    out.extend(apache_avro::to_avro_datum(&schema, r).unwrap());
    out
}

fn tick(
    id: u32,
    sym: &str,
    ts: i64,
    price: f64,
    size: Option<i32>,
    venue: Option<&str>,
) -> Vec<u8> {
    wire_value(id, SCHEMA, |r| {
        r.put("sym", sym);
        r.put("ts", Value::TimestampMillis(ts));
        r.put("price", price);
        r.put(
            "size",
            match size {
                Some(s) => Value::Union(1, Box::new(Value::Int(s))),
                None => Value::Union(0, Box::new(Value::Null)),
            },
        );
        r.put(
            "venue",
            match venue {
                Some(v) => Value::Union(1, Box::new(Value::String(v.into()))),
                None => Value::Union(0, Box::new(Value::Null)),
            },
        );
    })
}

fn decoder() -> AvroDecoder {
    let mut d = AvroDecoder::new(&pipeline());
    let now = Instant::now();
    d.learn(7, Lookup::Avro(SCHEMA.into()), now);
    d.learn(8, Lookup::Avro(SCHEMA_2.into()), now);
    d
}

#[test]
fn avro_records_of_several_schemas_become_arrow_columns() {
    let mut d = decoder();
    let cols = d.decode(
        0,
        &[
            binary_record(0, &tick(7, "AAPL", 1_000, 1.5, Some(100), Some("X"))),
            binary_record(1, &tick(7, "MSFT", 2_000, 2.5, None, None)),
            binary_record(
                2,
                &wire_value(8, SCHEMA_2, |r| {
                    r.put("sym", 42i64);
                    r.put("ts", 3_000i64);
                    r.put("price", 0.5f32);
                }),
            ),
        ],
    );
    assert_eq!(d.skipped(), 0);
    assert_eq!(cols.len(), 3);
    let keys: Vec<_> = (0..3).map(|i| cols.keys.value(i)).collect();
    assert_eq!(keys, ["AAPL", "MSFT", "42"], "a long key is its text");
    assert_eq!(
        cols.event_times.values().to_vec(),
        vec![1_000, 2_000, 3_000]
    );
    assert_eq!(cols.max_event_time, Some(3_000));
    let (price, size) = (&cols.values[0], &cols.values[1]);
    assert_eq!(
        (price.value(0), price.value(1), price.value(2)),
        (1.5, 2.5, 0.5)
    );
    assert_eq!(size.value(0), 100.0);
    assert!(size.is_null(1), "a null union is a missing value");
    assert!(size.is_null(2), "schema 2 has no size field");
    assert_eq!(cols.hashes[0].value(0), crate::sketch::hash("X"));
    assert!(cols.hashes[0].is_null(1));
    // the `any` filter keeps the first record only
    let (kept, dropped) = Predicates::new(&pipeline()).apply(cols).unwrap();
    assert_eq!((kept.len(), dropped), (1, 2));
}

#[test]
fn unusable_avro_records_are_skipped_and_counted() {
    let mut d = decoder();
    let now = Instant::now();
    d.learn(9, Lookup::Unknown, now);
    d.learn(
        10,
        Lookup::Unusable("it is a PROTOBUF schema, not Avro".into()),
        now,
    );
    d.learn(11, Lookup::Avro("{\"type\": \"string\"}".into()), now);
    d.learn(12, Lookup::Avro("not a schema".into()), now);
    let good = tick(7, "AAPL", 1_000, 1.5, Some(1), None);
    // cut in the price (apache-avro reads a union cut off at its index as
    // null, so trailing nullable fields may be cut)
    let mut truncated = good.clone();
    truncated.truncate(good.len() - 5);
    let mut no_magic = good.clone();
    no_magic[0] = 1;
    let mut other_id = good.clone();
    other_id[1..5].copy_from_slice(&99u32.to_be_bytes());
    let records: Vec<_> = [
        truncated,
        no_magic,
        vec![0, 0, 0],
        Vec::new(),
        other_id,
        tick(9, "A", 1, 1.0, None, None),
        tick(10, "A", 1, 1.0, None, None),
        tick(11, "A", 1, 1.0, None, None),
        tick(12, "A", 1, 1.0, None, None),
        // a length prefix claiming far more bytes than there are
        vec![0, 0, 0, 0, 7, 0xfe, 0xff, 0xff, 0xff, 0x0f, b'a'],
        good,
    ]
    .iter()
    .enumerate()
    .map(|(i, v)| binary_record(i as i64, v))
    .collect();
    let cols = d.decode(1, &records);
    assert_eq!(
        cols.offsets.values().to_vec(),
        vec![10],
        "only the good record is left"
    );
    assert_eq!(cols.offsets.value(0), 10);
    assert_eq!(d.skipped(), 10);
}

#[test]
fn a_record_without_event_time_or_key_is_skipped() {
    let schema = r#"{"type": "record", "name": "R", "fields": [
      {"name": "sym", "type": ["null", "string"]},
      {"name": "ts", "type": ["null", "long"]}
    ]}"#;
    let mut d = AvroDecoder::new(&pipeline());
    d.learn(1, Lookup::Avro(schema.into()), Instant::now());
    let value = |sym: Option<&str>, ts: Option<i64>| {
        wire_value(1, schema, |r| {
            r.put(
                "sym",
                sym.map_or(Value::Union(0, Box::new(Value::Null)), |s| {
                    Value::Union(1, Box::new(Value::String(s.into())))
                }),
            );
            r.put(
                "ts",
                ts.map_or(Value::Union(0, Box::new(Value::Null)), |t| {
                    Value::Union(1, Box::new(Value::Long(t)))
                }),
            );
        })
    };
    let cols = d.decode(
        0,
        &[
            binary_record(0, &value(Some("a"), None)),
            binary_record(1, &value(None, Some(5))),
            binary_record(2, &value(Some("b"), Some(6))),
        ],
    );
    assert_eq!(cols.len(), 1);
    assert_eq!(cols.keys.value(0), "b");
    assert_eq!(d.skipped(), 2);
}

#[test]
fn schema_ids_are_fetched_once_and_unusable_ones_asked_again_later() {
    let mut d = decoder();
    let now = Instant::now();
    let records = [
        binary_record(0, &tick(7, "A", 1, 1.0, None, None)),
        binary_record(1, &tick(20, "A", 1, 1.0, None, None)),
        binary_record(2, &tick(20, "A", 1, 1.0, None, None)),
        binary_record(3, b"not avro"),
    ];
    assert_eq!(
        d.missing(&records, now),
        vec![20],
        "7 is cached, 20 asked once"
    );
    d.learn(20, Lookup::Unknown, now);
    assert!(d.missing(&records, now).is_empty());
    assert_eq!(d.missing(&records, now + RETRY_UNUSABLE_AFTER), vec![20]);
    d.learn(20, Lookup::Avro(SCHEMA.into()), now);
    assert_eq!(d.decode(0, &records).len(), 3);
}

#[tokio::test]
async fn an_unreachable_registry_is_retried_until_it_answers() {
    use axum::routing::get;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let registry = Registry::new(&format!("http://{addr}/")).unwrap();
    // nothing listens yet: the first requests fail
    let serve = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let app = axum::Router::new()
            .route(
                "/schemas/ids/7",
                get(|| async { axum::Json(serde_json::json!({"schema": SCHEMA})) }),
            )
            .route(
                "/schemas/ids/8",
                get(|| async {
                    axum::Json(serde_json::json!({"schema": "syntax = \"proto3\";", "schemaType": "PROTOBUF"}))
                }),
            );
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        axum::serve(listener, app).await.unwrap();
    });
    let started = Instant::now();
    assert_eq!(registry.schema(7).await, Lookup::Avro(SCHEMA.into()));
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert!(matches!(registry.schema(8).await, Lookup::Unusable(why) if why.contains("PROTOBUF")));
    assert_eq!(registry.schema(9).await, Lookup::Unknown);
    serve.abort();
}

proptest::proptest! {
    /// Whatever bytes follow a known schema id, a record is decoded or
    /// skipped and counted, never a panic.
    #[test]
    fn arbitrary_bytes_are_decoded_or_skipped(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), id in 6u32..10) {
        let mut d = decoder();
        let mut value = vec![0];
        value.extend_from_slice(&id.to_be_bytes());
        value.extend(tail);
        let records = [binary_record(0, &value), binary_record(1, &value[1..])];
        let cols = d.decode(0, &records);
        proptest::prop_assert_eq!(cols.len() as u64 + d.skipped(), 2);
    }
}
