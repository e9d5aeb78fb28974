//! Reading a config map, collecting every problem.

use std::collections::BTreeMap;

use super::*;
use crate::sink::object_store::partition::PathFormat;

/// Reads the keys of one config, collecting every problem.
struct Reader<'a> {
    config: &'a BTreeMap<String, String>,
    errors: Vec<ConfigError>,
}

impl<'a> Reader<'a> {
    /// The trimmed value of `key`, `None` when absent or blank.
    fn get(&self, key: &str) -> Option<&'a str> {
        self.config
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    fn fail(&mut self, error: ConfigError) {
        self.errors.push(error);
    }

    /// Maps the value of `key` (or `default`) through `choose`; on `None`
    /// records an error listing `expected` and returns `fallback`.
    fn choice<T>(
        &mut self,
        key: &str,
        default: &str,
        expected: &str,
        fallback: T,
        choose: impl Fn(&str) -> Option<T>,
    ) -> T {
        let raw = self.get(key).unwrap_or(default);
        match choose(raw) {
            Some(v) => v,
            None => {
                self.fail(ConfigError::invalid(
                    key,
                    raw,
                    format!("expected {expected}"),
                ));
                fallback
            }
        }
    }

    fn long(&mut self, key: &str, default: i64) -> i64 {
        match self.get(key) {
            None => default,
            Some(raw) => match raw.parse::<i64>() {
                Ok(v) => v,
                Err(_) => {
                    self.fail(ConfigError::invalid(key, raw, "expected an integer"));
                    default
                }
            },
        }
    }
}

pub(super) fn parse_all(
    config: &BTreeMap<String, String>,
) -> Result<ObjectStoreSinkConfig, Vec<ConfigError>> {
    let mut r = Reader {
        config,
        errors: Vec::new(),
    };

    let store_url = match r.get(STORE_URL) {
        None => {
            r.fail(ConfigError::missing(STORE_URL, "e.g. s3://bucket/prefix"));
            String::new()
        }
        Some(url) => {
            if let Err(reason) = check_store_url(url) {
                r.fail(ConfigError::invalid(STORE_URL, url, reason));
            }
            url.to_string()
        }
    };

    let format = r.choice(
        FORMAT,
        "parquet",
        "parquet or json",
        Format::Parquet,
        |v| match v.to_ascii_lowercase().as_str() {
            "parquet" => Some(Format::Parquet),
            "json" => Some(Format::Json),
            _ => None,
        },
    );

    let flush_size = match r.get(FLUSH_SIZE) {
        None => 1000,
        Some(raw) => match raw.parse::<i32>() {
            Ok(n) if n >= 1 => n as usize,
            Ok(_) => {
                r.fail(ConfigError::invalid(FLUSH_SIZE, raw, "must be at least 1"));
                1
            }
            Err(_) => {
                r.fail(ConfigError::invalid(
                    FLUSH_SIZE,
                    raw,
                    "expected an integer of at least 1",
                ));
                1
            }
        },
    };

    let rotate = r.long(ROTATE_SCHEDULE_INTERVAL_MS, -1);
    let rotate_schedule_interval =
        (rotate > 0).then(|| std::time::Duration::from_millis(rotate.unsigned_abs()));

    let topics_dir = {
        let raw = r.get(TOPICS_DIR).unwrap_or(DEFAULT_TOPICS_DIR);
        let dir = raw.trim_matches('/');
        if dir
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
        {
            r.fail(ConfigError::invalid(
                TOPICS_DIR,
                raw,
                "expected folder names separated by single slashes, without . or ..",
            ));
        }
        dir.to_string()
    };

    #[derive(Clone, Copy)]
    enum Kind {
        Default,
        Field,
        Time,
    }
    let kind = r.choice(
        PARTITIONER_CLASS,
        "default",
        "default, field or time (or Confluent's DefaultPartitioner, FieldPartitioner, \
         TimeBasedPartitioner)",
        Kind::Default,
        |v| match v {
            DEFAULT_PARTITIONER => Some(Kind::Default),
            FIELD_PARTITIONER => Some(Kind::Field),
            TIME_PARTITIONER => Some(Kind::Time),
            _ => match v.to_ascii_lowercase().as_str() {
                "default" => Some(Kind::Default),
                "field" => Some(Kind::Field),
                "time" => Some(Kind::Time),
                _ => None,
            },
        },
    );

    let timezone = r.get(TIMEZONE).unwrap_or("UTC");
    if !timezone.eq_ignore_ascii_case("UTC") {
        r.fail(ConfigError::invalid(
            TIMEZONE,
            timezone,
            "only UTC is supported",
        ));
    }

    let timestamp_extractor = r.choice(
        TIMESTAMP_EXTRACTOR,
        "Record",
        "Record or Wallclock",
        TimestampExtractor::Record,
        |v| match v.to_ascii_lowercase().as_str() {
            "record" => Some(TimestampExtractor::Record),
            "wallclock" => Some(TimestampExtractor::Wallclock),
            _ => None,
        },
    );

    let partitioner = match kind {
        Kind::Default => Partitioner::Default,
        Kind::Field => {
            let fields: Vec<String> = r
                .get(PARTITION_FIELD_NAME)
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect();
            if fields.is_empty() {
                r.fail(ConfigError::missing(
                    PARTITION_FIELD_NAME,
                    "the field partitioner needs at least one field",
                ));
            }
            Partitioner::Field(fields)
        }
        Kind::Time => {
            let format = match r.get(PATH_FORMAT) {
                None => {
                    r.fail(ConfigError::missing(
                        PATH_FORMAT,
                        "the time partitioner needs a pattern such as \
                         'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
                    ));
                    PathFormat::default()
                }
                Some(raw) => PathFormat::parse(raw).unwrap_or_else(|reason| {
                    r.fail(ConfigError::invalid(PATH_FORMAT, raw, reason));
                    PathFormat::default()
                }),
            };
            let duration_ms = match r.get(PARTITION_DURATION_MS) {
                None => {
                    r.fail(ConfigError::missing(
                        PARTITION_DURATION_MS,
                        "the time partitioner needs a bucket size in milliseconds",
                    ));
                    1
                }
                Some(raw) => match raw.parse::<i64>() {
                    Ok(ms) if ms > 0 => ms,
                    _ => {
                        r.fail(ConfigError::invalid(
                            PARTITION_DURATION_MS,
                            raw,
                            "expected a positive number of milliseconds",
                        ));
                        1
                    }
                },
            };
            Partitioner::Time {
                format,
                duration_ms,
            }
        }
    };

    let parquet_codec = r.choice(
        PARQUET_CODEC,
        "snappy",
        "snappy, zstd or none",
        ParquetCodec::Snappy,
        |v| match v.to_ascii_lowercase().as_str() {
            "snappy" => Some(ParquetCodec::Snappy),
            "zstd" => Some(ParquetCodec::Zstd),
            "none" | "uncompressed" => Some(ParquetCodec::None),
            _ => None,
        },
    );

    const CONVERTERS: &str = "org.apache.kafka.connect.storage.StringConverter, \
         org.apache.kafka.connect.json.JsonConverter, \
         org.apache.kafka.connect.converters.ByteArrayConverter, \
         io.confluent.connect.avro.AvroConverter, \
         io.confluent.connect.protobuf.ProtobufConverter, \
         io.confluent.connect.json.JsonSchemaConverter \
         (or string, json, bytes, avro, protobuf, jsonschema)";
    let key_converter = r.choice(
        KEY_CONVERTER,
        DEFAULT_CONVERTER,
        CONVERTERS,
        Converter::Json,
        parse_converter,
    );
    let value_converter = r.choice(
        VALUE_CONVERTER,
        DEFAULT_CONVERTER,
        CONVERTERS,
        Converter::Json,
        parse_converter,
    );

    if !r.errors.is_empty() {
        return Err(r.errors);
    }
    Ok(ObjectStoreSinkConfig {
        store_url,
        format,
        flush_size,
        rotate_schedule_interval,
        topics_dir,
        partitioner,
        timestamp_extractor,
        parquet_codec,
        key_converter,
        value_converter,
    })
}

/// The column a converter fills: the registry converters' keys and values
/// reach the writer decoded to JSON text (see [`crate::convert`]).
fn parse_converter(v: &str) -> Option<Converter> {
    use crate::convert::Kind;
    Kind::of(v).map(|kind| match kind {
        Kind::String => Converter::String,
        Kind::Bytes => Converter::Bytes,
        Kind::Json | Kind::Avro | Kind::Protobuf | Kind::JsonSchema => Converter::Json,
    })
}

/// A light check of the URL's shape; the store itself is built (and the
/// URL fully checked) when the writer opens.
fn check_store_url(url: &str) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("expected SCHEME://..., e.g. s3://bucket/prefix".to_string());
    };
    match scheme.to_ascii_lowercase().as_str() {
        "s3" | "s3a" | "gs" | "gcs" | "az" | "azure" => {
            if rest.split('/').next().is_none_or(str::is_empty) {
                Err("the bucket (or container) name is missing".to_string())
            } else {
                Ok(())
            }
        }
        "file" if !rest.starts_with('/') => {
            Err("a file URL needs an absolute path: file:///abs/dir".to_string())
        }
        "file" | "memory" => Ok(()),
        other => Err(format!(
            "unknown scheme {other:?}; use s3, gs, az, file or memory"
        )),
    }
}
