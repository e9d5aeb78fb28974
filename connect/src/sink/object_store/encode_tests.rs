use super::*;
use arrow_array::Array;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn config(pairs: &[(&str, &str)]) -> ObjectStoreSinkConfig {
    let mut map: std::collections::BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert("store.url".into(), "memory://".into());
    ObjectStoreSinkConfig::parse(&map).unwrap()
}

fn record(key: Option<&[u8]>, value: Option<&[u8]>) -> SinkRecord {
    SinkRecord {
        topic: "t".into(),
        partition: 1,
        offset: 5,
        timestamp_ms: 1_700_000_000_000,
        key: key.map(Bytes::copy_from_slice),
        value: value.map(Bytes::copy_from_slice),
        headers: Vec::new(),
    }
}

#[test]
fn base64_matches_the_rfc_vectors() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
    }
    assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
}

#[test]
fn json_lines_embed_json_values_and_quote_the_rest() {
    let c = config(&[("format", "json")]);
    let mut with_headers = record(
        Some(b"k1"),
        Some(b"{\n  \"a\": [1, 2.50, \"x y\\\" z\"]\n}"),
    );
    with_headers.headers = vec![
        ("trace".into(), Some(Bytes::from_static(b"abc"))),
        ("bin".into(), Some(Bytes::from_static(&[0xff]))),
        ("none".into(), None),
    ];
    let records = [
        with_headers,
        record(Some(b"\"quoted\""), Some(b"not json\n")),
        record(None, None),
    ];
    let refs: Vec<&SinkRecord> = records.iter().collect();
    let out = String::from_utf8(json_lines(&refs, &c).unwrap()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(
        lines[0],
        r#"{"topic":"t","partition":1,"offset":5,"timestamp":1700000000000,"key":"k1","value":{"a":[1,2.50,"x y\" z"]},"headers":{"bin":"/w==","none":null,"trace":"abc"}}"#
    );
    assert_eq!(
        lines[1],
        r#"{"topic":"t","partition":1,"offset":5,"timestamp":1700000000000,"key":"quoted","value":"not json\n","headers":null}"#
    );
    assert_eq!(
        lines[2],
        r#"{"topic":"t","partition":1,"offset":5,"timestamp":1700000000000,"key":null,"value":null,"headers":null}"#
    );
    for line in lines {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

#[test]
fn json_lines_follow_the_string_and_bytes_converters() {
    let c = config(&[
        ("format", "json"),
        ("key.converter", "string"),
        ("value.converter", "bytes"),
    ]);
    let r = record(Some(b"{\"a\":1}"), Some(&[0, 1, 0xff]));
    let out = String::from_utf8(json_lines(&[&r], &c).unwrap()).unwrap();
    let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(v["key"], "{\"a\":1}");
    assert_eq!(v["value"], "AAH/");
}

#[test]
fn control_characters_are_escaped() {
    let c = config(&[("format", "json"), ("value.converter", "string")]);
    let r = record(None, Some("tab\tnul\u{0}\u{1f}é".as_bytes()));
    let out = String::from_utf8(json_lines(&[&r], &c).unwrap()).unwrap();
    assert!(out.contains(r#""value":"tab\tnul\u0000\u001fé""#), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(v["value"], "tab\tnul\u{0}\u{1f}é");
}

#[test]
fn parquet_columns_follow_the_converters() {
    let c = config(&[("key.converter", "bytes"), ("parquet.codec", "none")]);
    let schema = parquet_schema(&c);
    assert_eq!(
        schema.field_with_name("key").unwrap().data_type(),
        &DataType::Binary
    );
    assert_eq!(
        schema.field_with_name("value").unwrap().data_type(),
        &DataType::Utf8
    );

    let records = [record(Some(&[0xff, 0]), Some(b"v")), record(None, None)];
    let refs: Vec<&SinkRecord> = records.iter().collect();
    let bytes = parquet(&refs, &c, "test").unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes))
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(batches.len(), 1);
    let batch = &batches[0];
    assert_eq!(batch.schema().as_ref(), &schema);
    let keys = batch
        .column_by_name("key")
        .unwrap()
        .as_any()
        .downcast_ref::<BinaryArray>()
        .unwrap();
    assert_eq!(keys.value(0), &[0xff, 0]);
    assert!(keys.is_null(1));
    let ts = batch
        .column_by_name("timestamp")
        .unwrap()
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .unwrap();
    assert_eq!(ts.value(0), 1_700_000_000_000);
}

#[test]
fn non_utf8_text_names_the_record() {
    let c = config(&[("value.converter", "string")]);
    let r = record(Some(b"k"), Some(&[0xc3, 0x28]));
    let e = check_utf8(&r, &c).unwrap_err();
    assert!(
        matches!(
            &e,
            SinkError::NotUtf8 { topic, partition: 1, offset: 5, field: "value" } if topic == "t"
        ),
        "{e:?}"
    );
    let message = e.to_string();
    assert!(
        message.contains("t-1 at offset 5") && message.contains("value"),
        "{message}"
    );

    let c = config(&[("value.converter", "bytes")]);
    check_utf8(&r, &c).unwrap();
}
