use super::*;
use crate::sink::object_store::partition::PathFormat;

fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn minimal() -> BTreeMap<String, String> {
    config(&[("store.url", "s3://bucket/prefix")])
}

fn with(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c = minimal();
    c.extend(config(pairs));
    c
}

fn error_of(c: &BTreeMap<String, String>) -> ConfigError {
    match ObjectStoreSinkConfig::parse(c) {
        Ok(parsed) => panic!("expected an error, parsed {parsed:?}"),
        Err(e) => e,
    }
}

#[test]
fn defaults_apply_and_unknown_keys_are_ignored() {
    let c = ObjectStoreSinkConfig::parse(&with(&[
        ("topics", "orders,payments"),
        ("connector.class", "ObjectStoreSink"),
        ("tasks.max", "3"),
        ("errors.tolerance", "all"),
        ("consumer.override.max.poll.records", "500"),
    ]))
    .unwrap();
    assert_eq!(
        c,
        ObjectStoreSinkConfig {
            store_url: "s3://bucket/prefix".into(),
            format: Format::Parquet,
            flush_size: 1000,
            rotate_schedule_interval: None,
            topics_dir: "topics".into(),
            partitioner: Partitioner::Default,
            timestamp_extractor: TimestampExtractor::Record,
            parquet_codec: ParquetCodec::Snappy,
            key_converter: Converter::Json,
            value_converter: Converter::Json,
        }
    );
}

#[test]
fn every_key_is_read() {
    let c = ObjectStoreSinkConfig::parse(&with(&[
        ("format", "json"),
        ("flush.size", "7"),
        ("rotate.schedule.interval.ms", "60000"),
        ("topics.dir", "/lake/raw/"),
        (
            "partitioner.class",
            "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        ),
        ("path.format", "'dt'=YYYY-MM-dd/'hour'=HH"),
        ("partition.duration.ms", "3600000"),
        ("timezone", "UTC"),
        ("timestamp.extractor", "Wallclock"),
        ("parquet.codec", "zstd"),
        (
            "key.converter",
            "org.apache.kafka.connect.storage.StringConverter",
        ),
        ("value.converter", "bytes"),
    ]))
    .unwrap();
    assert_eq!(c.format, Format::Json);
    assert_eq!(c.flush_size, 7);
    assert_eq!(
        c.rotate_schedule_interval,
        Some(std::time::Duration::from_secs(60))
    );
    assert_eq!(c.topics_dir, "lake/raw");
    assert_eq!(
        c.partitioner,
        Partitioner::Time {
            format: PathFormat::parse("'dt'=YYYY-MM-dd/'hour'=HH").unwrap(),
            duration_ms: 3_600_000,
        }
    );
    assert_eq!(c.timestamp_extractor, TimestampExtractor::Wallclock);
    assert_eq!(c.parquet_codec, ParquetCodec::Zstd);
    assert_eq!(c.key_converter, Converter::String);
    assert_eq!(c.value_converter, Converter::Bytes);
}

#[test]
fn partitioners_accept_short_and_confluent_names() {
    for name in [
        "field",
        "Field",
        "io.confluent.connect.storage.partitioner.FieldPartitioner",
    ] {
        let c = ObjectStoreSinkConfig::parse(&with(&[
            ("partitioner.class", name),
            ("partition.field.name", " region , country "),
        ]))
        .unwrap();
        assert_eq!(
            c.partitioner,
            Partitioner::Field(vec!["region".into(), "country".into()]),
            "{name}"
        );
    }
    for name in [
        "default",
        "io.confluent.connect.storage.partitioner.DefaultPartitioner",
    ] {
        let c = ObjectStoreSinkConfig::parse(&with(&[("partitioner.class", name)])).unwrap();
        assert_eq!(c.partitioner, Partitioner::Default, "{name}");
    }
}

#[test]
fn converters_accept_class_names_and_aliases() {
    for (name, expected) in [
        (
            "org.apache.kafka.connect.storage.StringConverter",
            Converter::String,
        ),
        (
            "org.apache.kafka.connect.json.JsonConverter",
            Converter::Json,
        ),
        (
            "org.apache.kafka.connect.converters.ByteArrayConverter",
            Converter::Bytes,
        ),
        ("string", Converter::String),
        ("json", Converter::Json),
        ("bytes", Converter::Bytes),
        // decoded to JSON text before the writer sees them
        ("io.confluent.connect.avro.AvroConverter", Converter::Json),
        ("protobuf", Converter::Json),
        ("jsonschema", Converter::Json),
    ] {
        let c = ObjectStoreSinkConfig::parse(&with(&[("value.converter", name)])).unwrap();
        assert_eq!(c.value_converter, expected, "{name}");
    }
    let e = error_of(&with(&[("key.converter", "com.example.CustomConverter")]));
    assert_eq!(e.key(), "key.converter");
    assert!(e.to_string().contains("AvroConverter"), "{e}");
}

#[test]
fn missing_store_url_names_the_key() {
    let e = error_of(&config(&[("format", "parquet")]));
    assert!(matches!(e, ConfigError::Missing { .. }), "{e:?}");
    assert_eq!(e.key(), "store.url");
    assert!(e.to_string().contains("\"store.url\""), "{e}");
}

#[test]
fn bad_values_name_the_key_and_the_value() {
    for (key, value) in [
        ("format", "avro"),
        ("flush.size", "0"),
        ("flush.size", "-5"),
        ("flush.size", "many"),
        ("partitioner.class", "io.example.HashPartitioner"),
        ("timezone", "Europe/Paris"),
        ("timestamp.extractor", "RecordField"),
        ("parquet.codec", "lz4"),
        ("rotate.schedule.interval.ms", "soon"),
        ("topics.dir", "a//b"),
        ("topics.dir", "../up"),
        ("store.url", "ftp://host/dir"),
        ("store.url", "bucket/prefix"),
        ("store.url", "s3:///prefix"),
        ("store.url", "file://relative"),
    ] {
        let e = error_of(&with(&[(key, value)]));
        assert_eq!(e.key(), key, "{key}={value}: {e}");
        let message = e.to_string();
        assert!(
            message.contains(&format!("{key:?}")) && message.contains(&format!("{value:?}")),
            "{key}={value}: {message}"
        );
    }
}

#[test]
fn the_field_partitioner_needs_fields() {
    let e = error_of(&with(&[("partitioner.class", "field")]));
    assert_eq!(e.key(), "partition.field.name");
    let e = error_of(&with(&[
        ("partitioner.class", "field"),
        ("partition.field.name", " , "),
    ]));
    assert_eq!(e.key(), "partition.field.name");
}

#[test]
fn the_time_partitioner_needs_a_format_and_a_duration() {
    let problems = ObjectStoreSinkConfig::validate(&with(&[("partitioner.class", "time")]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["path.format", "partition.duration.ms"]);

    let e = error_of(&with(&[
        ("partitioner.class", "time"),
        ("path.format", "YYYY/MM"),
        ("partition.duration.ms", "0"),
    ]));
    assert_eq!(e.key(), "partition.duration.ms");

    let e = error_of(&with(&[
        ("partitioner.class", "time"),
        ("path.format", "'year'=YYYY/'week'=ww"),
        ("partition.duration.ms", "3600000"),
    ]));
    assert_eq!(e.key(), "path.format");
    assert!(e.to_string().contains("'w'"), "{e}");
}

#[test]
fn validate_reports_every_problem() {
    let problems = ObjectStoreSinkConfig::validate(&config(&[
        ("format", "csv"),
        ("flush.size", "0"),
        ("partitioner.class", "hash"),
        ("parquet.codec", "brotli"),
        ("timezone", "PST"),
    ]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "store.url",
            "format",
            "flush.size",
            "partitioner.class",
            "timezone",
            "parquet.codec"
        ]
    );
    for (key, message) in &problems {
        assert!(message.contains(&format!("{key:?}")), "{key}: {message}");
    }
    assert!(ObjectStoreSinkConfig::validate(&minimal()).is_empty());
}

#[test]
fn definitions_cover_every_key_once() {
    let defs = ObjectStoreSinkConfig::definitions();
    let mut names: Vec<&str> = defs.iter().map(|d| d.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "a key is defined twice");
    for key in [
        STORE_URL,
        FORMAT,
        FLUSH_SIZE,
        ROTATE_SCHEDULE_INTERVAL_MS,
        TOPICS_DIR,
        PARTITIONER_CLASS,
        PARTITION_FIELD_NAME,
        PATH_FORMAT,
        PARTITION_DURATION_MS,
        TIMEZONE,
        TIMESTAMP_EXTRACTOR,
        PARQUET_CODEC,
        KEY_CONVERTER,
        VALUE_CONVERTER,
    ] {
        assert!(names.contains(&key), "{key} has no definition");
    }
    let required: Vec<&str> = defs.iter().filter(|d| d.required).map(|d| d.name).collect();
    assert_eq!(required, ["store.url"]);

    // Every default parses: a config made of the defaults alone is valid.
    let mut c = minimal();
    for d in &defs {
        if let Some(default) = &d.default {
            c.insert(d.name.to_string(), default.clone());
        }
    }
    assert!(ObjectStoreSinkConfig::validate(&c).is_empty());

    let flush = defs.iter().find(|d| d.name == FLUSH_SIZE).unwrap();
    assert_eq!(
        (
            flush.kind.as_str(),
            flush.default.as_deref(),
            flush.importance.as_str()
        ),
        ("INT", Some("1000"), "HIGH")
    );
    assert!(defs.iter().all(|d| !d.documentation.is_empty()));
}
