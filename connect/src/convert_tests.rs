use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use super::*;

/// A schema registry's REST API, as much of it as converters use.
#[derive(Default)]
struct Fake {
    /// id → `{"schema": …, "schemaType": …}`
    schemas: Mutex<BTreeMap<i32, Value>>,
    /// subject → ids, oldest first
    subjects: Mutex<BTreeMap<String, Vec<i32>>>,
    by_id_reads: AtomicUsize,
    registrations: AtomicUsize,
}

type Shared = Arc<Fake>;

async fn by_id(State(f): State<Shared>, Path(id): Path<i32>) -> (StatusCode, Json<Value>) {
    f.by_id_reads.fetch_add(1, Ordering::SeqCst);
    match f.schemas.lock().expect("lock").get(&id) {
        Some(s) => (StatusCode::OK, Json(s.clone())),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error_code": 40403, "message": "Schema not found"})),
        ),
    }
}

async fn latest(State(f): State<Shared>, Path(subject): Path<String>) -> (StatusCode, Json<Value>) {
    let id = f
        .subjects
        .lock()
        .expect("lock")
        .get(&subject)
        .and_then(|ids| ids.last().copied());
    match id {
        Some(id) => {
            let mut s = f.schemas.lock().expect("lock")[&id].clone();
            s["id"] = json!(id);
            (StatusCode::OK, Json(s))
        }
        None => (StatusCode::NOT_FOUND, Json(json!({"error_code": 40401}))),
    }
}

async fn register(
    State(f): State<Shared>,
    Path(subject): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    f.registrations.fetch_add(1, Ordering::SeqCst);
    Json(json!({ "id": f.add(&subject, body) }))
}

impl Fake {
    fn add(&self, subject: &str, body: Value) -> i32 {
        let mut schemas = self.schemas.lock().expect("lock");
        let id = match schemas.iter().find(|(_, s)| **s == body) {
            Some((id, _)) => *id,
            None => {
                let id = schemas.keys().last().copied().unwrap_or(0) + 1;
                schemas.insert(id, body);
                id
            }
        };
        self.subjects
            .lock()
            .expect("lock")
            .entry(subject.to_owned())
            .or_default()
            .push(id);
        id
    }
}

async fn fake() -> (String, Shared) {
    let f: Shared = Arc::default();
    let app = Router::new()
        .route("/schemas/ids/{id}", get(by_id))
        .route("/subjects/{subject}/versions/latest", get(latest))
        .route("/subjects/{subject}/versions", post(register))
        .with_state(Arc::clone(&f));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    (url, f)
}

fn config(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn record(value: Vec<u8>) -> SinkRecord {
    SinkRecord {
        topic: "orders".into(),
        partition: 0,
        offset: 5,
        timestamp_ms: 0,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from(value)),
        headers: Vec::new(),
    }
}

/// Sink converters reading schemas from `url`, with converter `kind`.
fn sink(url: &str, kind: &str, extra: &[(&str, &str)]) -> RecordConverters {
    let mut c = config(&[
        ("key.converter", "string"),
        ("value.converter", kind),
        ("value.converter.schema.registry.url", url),
    ]);
    c.extend(config(extra));
    let mut problems = Vec::new();
    let key = Settings::parse(&c, Side::Key, &mut problems);
    let value = Settings::parse(&c, Side::Value, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    RecordConverters {
        key: Converter::new(Side::Key, key, None),
        value: Converter::new(
            Side::Value,
            value,
            Some(
                remote(&Settings::parse(&c, Side::Value, &mut problems), url.into())
                    .expect("a client"),
            ),
        ),
    }
}

const USER: &str = r#"{"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"], "default": null}]}"#;

#[tokio::test]
async fn an_avro_value_decodes_by_its_schema_id_read_once() {
    let (url, f) = fake().await;
    let id = f.add("orders-value", json!({"schema": USER}));
    let s = registry::avro::parse(USER, &[]).expect("schema");
    let payload = avro::encode(&s, &json!({"name": "ada", "age": 36})).expect("fits");
    let c = sink(&url, "io.confluent.connect.avro.AvroConverter", &[]);
    for _ in 0..3 {
        let r = record(wire::frame(id, &payload));
        assert_eq!(
            c.value_json(&r).await.expect("decodes"),
            Some(json!({"name": "ada", "age": 36}))
        );
        let normalized = c.normalize(&r).await.expect("decodes");
        let text = normalized.value.expect("a value");
        assert_eq!(
            serde_json::from_slice::<Value>(&text).expect("JSON text"),
            json!({"name": "ada", "age": 36})
        );
        assert_eq!(
            normalized.key.as_deref(),
            Some(b"k".as_slice()),
            "a string key is kept"
        );
    }
    assert_eq!(f.by_id_reads.load(Ordering::SeqCst), 1, "cached by id");
}

#[tokio::test]
async fn unknown_ids_foreign_bytes_and_truncated_payloads_are_the_records_errors() {
    let (url, f) = fake().await;
    let id = f.add("orders-value", json!({"schema": USER}));
    let c = sink(&url, "avro", &[]);
    let err = c
        .value_json(&record(wire::frame(99, b"\x06ada")))
        .await
        .expect_err("unknown id");
    assert!(
        err.contains("schema id 99 is not in the schema registry"),
        "{err}"
    );
    assert!(err.contains("the value of orders-0 at offset 5"), "{err}");
    let err = c
        .normalize(&record(br#"{"name":"ada"}"#.to_vec()))
        .await
        .expect_err("plain JSON");
    assert!(
        err.contains("not in the schema registry's wire format"),
        "{err}"
    );
    let err = c
        .value_json(&record(wire::frame(id, b"\x06ad")))
        .await
        .expect_err("cut short");
    assert!(
        err.contains(&format!("schema id {id} (AVRO) does not decode it")),
        "{err}"
    );
    // a tombstone stays one
    let mut tombstone = record(Vec::new());
    tombstone.value = None;
    assert_eq!(c.value_json(&tombstone).await.expect("no value"), None);
}

#[tokio::test]
async fn a_schema_of_another_type_than_the_converter_is_refused() {
    let (url, f) = fake().await;
    let id = f.add("orders-value", json!({"schema": USER}));
    let c = sink(&url, "jsonschema", &[]);
    let err = c
        .value_json(&record(wire::frame(id, b"{}")))
        .await
        .expect_err("an Avro schema");
    assert!(
        err.contains("it is a AVRO schema, but the value.converter is jsonschema"),
        "{err}"
    );
}

#[tokio::test]
async fn json_schema_payloads_are_validated_when_asked() {
    let (url, f) = fake().await;
    let schema = json!({"type": "object", "properties": {"seq": {"type": "integer"}}});
    let id = f.add(
        "orders-value",
        json!({"schema": schema.to_string(), "schemaType": "JSON"}),
    );
    let lenient = sink(&url, "io.confluent.connect.json.JsonSchemaConverter", &[]);
    let strict = sink(
        &url,
        "jsonschema",
        &[("value.converter.json.fail.invalid.schema", "true")],
    );
    let good = record(wire::frame(id, br#"{"seq": 1}"#));
    let bad = record(wire::frame(id, br#"{"seq": "one"}"#));
    assert_eq!(
        strict.value_json(&good).await.expect("valid"),
        Some(json!({"seq": 1}))
    );
    assert_eq!(
        lenient.value_json(&bad).await.expect("not validated"),
        Some(json!({"seq": "one"}))
    );
    let err = strict.value_json(&bad).await.expect_err("invalid");
    assert!(err.contains("does not match its JSON Schema"), "{err}");
}

#[tokio::test]
async fn protobuf_values_decode_with_their_message_indexes() {
    let (url, f) = fake().await;
    let proto = "syntax = \"proto3\"; message A { string a = 1; } message B { int64 n = 1; }";
    let id = f.add(
        "orders-value",
        json!({"schema": proto, "schemaType": "PROTOBUF"}),
    );
    let c = sink(&url, "io.confluent.connect.protobuf.ProtobufConverter", &[]);
    // message index [1] (count 1 → 2, index 1 → 2), then B{n: 5}
    let mut framed = wire::frame(id, &[2, 2]);
    framed.extend_from_slice(&[0x08, 0x05]);
    assert_eq!(
        c.value_json(&record(framed)).await.expect("decodes"),
        Some(json!({"n": 5}))
    );
    // the single 0: the first message, A{a: "x"}
    let framed = wire::frame(id, &[0, 0x0a, 0x01, b'x']);
    assert_eq!(
        c.value_json(&record(framed)).await.expect("decodes"),
        Some(json!({"a": "x"}))
    );
}

#[tokio::test]
async fn json_envelopes_are_unwrapped_and_plain_json_is_left_alone() {
    let plain = RecordConverters::for_source(&config(&[]), &DefaultRegistry::default())
        .await
        .expect("JSON needs no registry");
    let r = record(br#"{"seq": 1}"#.to_vec());
    assert_eq!(
        plain.normalize(&r).await.expect("plain"),
        r,
        "bytes untouched"
    );
    let enveloped = RecordConverters::for_source(
        &config(&[("value.converter.schemas.enable", "true")]),
        &DefaultRegistry::default(),
    )
    .await
    .expect("JSON needs no registry");
    let r = record(br#"{"schema": {"type": "int64"}, "payload": 7}"#.to_vec());
    assert_eq!(
        enveloped
            .normalize(&r)
            .await
            .expect("an envelope")
            .value
            .as_deref(),
        Some(b"7".as_slice())
    );
    let (_, value) = enveloped
        .encode("t", None, Bytes::from_static(b"7"))
        .await
        .expect("writes");
    let written: Value = serde_json::from_slice(&value).expect("JSON");
    assert_eq!(
        written,
        json!({"schema": {"type": "int64", "optional": false}, "payload": 7})
    );
}

#[tokio::test]
async fn a_source_registers_an_inferred_schema_once_and_its_records_read_back() {
    let (url, f) = fake().await;
    let source = RecordConverters::for_source(
        &config(&[("value.converter", "io.confluent.connect.avro.AvroConverter")]),
        &DefaultRegistry::at(url.clone()),
    )
    .await
    .expect("the default registry");
    let reader = sink(&url, "avro", &[]);
    for seq in 0..3 {
        let json_value = format!(r#"{{"seq": {seq}, "user": "ada"}}"#);
        let (key, value) = source
            .encode(
                "clicks",
                Some(Bytes::from(seq.to_string())),
                Bytes::from(json_value),
            )
            .await
            .expect("writes");
        assert_eq!(
            key.as_deref(),
            Some(seq.to_string().as_bytes()),
            "a JSON key stays JSON"
        );
        assert_eq!(value[0], wire::MAGIC);
        let mut r = record(value.to_vec());
        r.topic = "clicks".into();
        assert_eq!(
            reader.value_json(&r).await.expect("reads back"),
            Some(json!({"seq": seq, "user": "ada"}))
        );
    }
    assert_eq!(f.registrations.load(Ordering::SeqCst), 1, "registered once");
    assert!(f
        .subjects
        .lock()
        .expect("lock")
        .contains_key("clicks-value"));
}

#[tokio::test]
async fn with_use_latest_version_a_source_writes_with_the_subjects_schema() {
    let (url, f) = fake().await;
    let id = f.add("users-value", json!({"schema": USER}));
    let source = RecordConverters::for_source(
        &config(&[
            ("value.converter", "avro"),
            ("value.converter.use.latest.version", "true"),
            ("value.converter.auto.register.schemas", "false"),
            ("value.converter.schema.registry.url", &url),
        ]),
        &DefaultRegistry::default(),
    )
    .await
    .expect("a URL");
    let (_, value) = source
        .encode("users", None, Bytes::from_static(br#"{"name": "grace"}"#))
        .await
        .expect("fits");
    assert_eq!(wire::split(&value).expect("framed").0, id);
    let err = source
        .encode("users", None, Bytes::from_static(br#"{"age": 3}"#))
        .await
        .expect_err("name is missing");
    assert!(err.contains("does not fit the Avro schema"), "{err}");
    let err = source
        .encode("nobody", None, Bytes::from_static(b"{}"))
        .await
        .expect_err("no such subject");
    assert!(err.contains("subject nobody-value has no version"), "{err}");
    assert_eq!(
        f.registrations.load(Ordering::SeqCst),
        0,
        "nothing registered"
    );
}

#[test]
fn validation_accepts_the_registry_converters_and_names_what_is_wrong() {
    for class in [
        "io.confluent.connect.avro.AvroConverter",
        "io.confluent.connect.protobuf.ProtobufConverter",
        "io.confluent.connect.json.JsonSchemaConverter",
        "avro",
        "protobuf",
        "jsonschema",
    ] {
        let c = config(&[
            ("value.converter", class),
            ("value.converter.some.unknown", "x"),
        ]);
        assert!(problems(&c, true).is_empty(), "{class}");
    }
    let bad_url = config(&[
        ("value.converter", "avro"),
        ("value.converter.schema.registry.url", "not a url"),
    ]);
    assert_eq!(
        problems(&bad_url, true)[0].0,
        "value.converter.schema.registry.url"
    );
    let no_password = config(&[("value.converter.basic.auth.user.info", "alice")]);
    assert_eq!(
        problems(&no_password, true)[0].0,
        "value.converter.basic.auth.user.info"
    );
    let bad_flag = config(&[("key.converter.auto.register.schemas", "maybe")]);
    assert_eq!(
        problems(&bad_flag, false)[0].0,
        "key.converter.auto.register.schemas"
    );
    let proto_source = config(&[("value.converter", "protobuf")]);
    assert!(problems(&proto_source, false)[0]
        .1
        .contains("reads records only"));
    let nothing_to_write_with = config(&[
        ("value.converter", "avro"),
        ("value.converter.auto.register.schemas", "false"),
    ]);
    assert!(problems(&nothing_to_write_with, false)[0]
        .1
        .contains("use.latest.version=true"));
    let unknown = config(&[("key.converter", "com.example.Nope")]);
    assert!(problems(&unknown, true)[0].1.contains("AvroConverter"));
}

#[tokio::test]
async fn a_source_through_the_registry_needs_a_url_when_this_agents_registry_is_off() {
    let c = config(&[("value.converter", "avro")]);
    let off = registry_problems(&c, false, true);
    assert_eq!(off.len(), 1);
    assert!(off[0].1.contains("schema registry is off"), "{off:?}");
    assert!(registry_problems(&c, false, false).is_empty());
    assert!(
        registry_problems(&c, true, true).is_empty(),
        "sinks read the metastore"
    );
    let with_url = config(&[
        ("value.converter", "avro"),
        (
            "value.converter.schema.registry.url",
            "http://registry:8081",
        ),
    ]);
    assert!(registry_problems(&with_url, false, true).is_empty());
    let err = RecordConverters::for_source(&c, &DefaultRegistry::off())
        .await
        .expect_err("no registry");
    assert!(
        err.contains("set value.converter.schema.registry.url"),
        "{err}"
    );
}

#[tokio::test]
async fn a_source_waits_for_the_agent_to_tell_its_registry() {
    let (url, _f) = fake().await;
    let registry = DefaultRegistry::default();
    assert!(!registry.is_off(), "not known yet is not off");
    let later = registry.clone();
    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        later.set(Some(addr));
    });
    let c = config(&[("value.converter", "avro")]);
    let source = RecordConverters::for_source(&c, &registry)
        .await
        .expect("the registry is told");
    source
        .encode("t", None, Bytes::from_static(b"{\"a\": 1}"))
        .await
        .expect("registered at the agent's registry");
}

#[test]
fn the_default_registry_is_reached_on_loopback_when_bound_to_any_address() {
    let r = DefaultRegistry::default();
    assert_eq!(r.url(), None);
    r.set(Some("0.0.0.0:8081".parse().expect("an address")));
    assert_eq!(r.url().as_deref(), Some("http://127.0.0.1:8081"));
    assert!(DefaultRegistry::off().is_off());
}
