//! Records to file contents: Parquet, or JSON lines.
//!
//! Both hold one entry per record with the same fields: `topic`,
//! `partition`, `offset`, `timestamp` (milliseconds, UTC), `key`, `value`
//! and `headers` (null when the record has none, else a JSON object of
//! header name to value, sorted by name: the text when it is UTF-8,
//! base64 otherwise, null for a header without value; when a name
//! repeats, the last value wins). The same records always give the same bytes, so a rewrite after
//! a crash replaces a file with an identical one.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;

use super::config::{Converter, ObjectStoreSinkConfig, ParquetCodec};
use super::error::SinkError;
use crate::record::SinkRecord;

/// The column type of a key or value stored by `converter`.
fn column_type(converter: Converter) -> DataType {
    if converter.is_text() {
        DataType::Utf8
    } else {
        DataType::Binary
    }
}

/// The Parquet file's schema.
pub fn parquet_schema(config: &ObjectStoreSinkConfig) -> Schema {
    Schema::new(vec![
        Field::new("topic", DataType::Utf8, false),
        Field::new("partition", DataType::Int32, false),
        Field::new("offset", DataType::Int64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("key", column_type(config.key_converter), true),
        Field::new("value", column_type(config.value_converter), true),
        Field::new("headers", DataType::Utf8, true),
    ])
}

/// Checks that what a text column will hold is UTF-8.
pub fn check_utf8(record: &SinkRecord, config: &ObjectStoreSinkConfig) -> Result<(), SinkError> {
    for (field, bytes, converter) in [
        ("key", &record.key, config.key_converter),
        ("value", &record.value, config.value_converter),
    ] {
        text_of(record, field, bytes.as_deref(), converter)?;
    }
    Ok(())
}

/// The bytes as text when `converter` stores them as text.
fn text_of<'a>(
    record: &SinkRecord,
    field: &'static str,
    bytes: Option<&'a [u8]>,
    converter: Converter,
) -> Result<Option<&'a str>, SinkError> {
    match bytes {
        Some(bytes) if converter.is_text() => {
            std::str::from_utf8(bytes)
                .map(Some)
                .map_err(|_| SinkError::NotUtf8 {
                    topic: record.topic.clone(),
                    partition: record.partition,
                    offset: record.offset,
                    field,
                })
        }
        _ => Ok(None),
    }
}

/// The key or value column of `records`.
fn payload_column(
    records: &[&SinkRecord],
    field: &'static str,
    converter: Converter,
    get: impl Fn(&SinkRecord) -> Option<&[u8]>,
) -> Result<ArrayRef, SinkError> {
    if converter.is_text() {
        let texts = records
            .iter()
            .map(|r| text_of(r, field, get(r), converter))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(StringArray::from(texts)))
    } else {
        let bytes: Vec<Option<&[u8]>> = records.iter().map(|r| get(r)).collect();
        Ok(Arc::new(BinaryArray::from(bytes)))
    }
}

/// One Parquet file (one row group) of `records`; `path` names it in
/// errors.
pub fn parquet(
    records: &[&SinkRecord],
    config: &ObjectStoreSinkConfig,
    path: &str,
) -> Result<Vec<u8>, SinkError> {
    let encode_error = |source: ParquetError| SinkError::Encode {
        path: path.to_string(),
        source,
    };
    let schema = Arc::new(parquet_schema(config));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            records.iter().map(|r| r.topic.as_str()),
        )),
        Arc::new(Int32Array::from_iter_values(
            records.iter().map(|r| r.partition),
        )),
        Arc::new(Int64Array::from_iter_values(
            records.iter().map(|r| r.offset),
        )),
        Arc::new(
            TimestampMillisecondArray::from_iter_values(records.iter().map(|r| r.timestamp_ms))
                .with_timezone("UTC"),
        ),
        payload_column(records, "key", config.key_converter, |r| r.key.as_deref())?,
        payload_column(records, "value", config.value_converter, |r| {
            r.value.as_deref()
        })?,
        Arc::new(StringArray::from(
            records.iter().map(|r| headers_json(r)).collect::<Vec<_>>(),
        )),
    ];
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
        .map_err(|e| encode_error(ParquetError::ArrowError(e.to_string())))?;

    let compression = match config.parquet_codec {
        ParquetCodec::Snappy => Compression::SNAPPY,
        ParquetCodec::Zstd => Compression::ZSTD(ZstdLevel::default()),
        ParquetCodec::None => Compression::UNCOMPRESSED,
    };
    let properties = WriterProperties::builder()
        .set_compression(compression)
        // One row group per file: a file holds at most flush.size records.
        .set_max_row_group_size(records.len().max(1))
        .build();
    let mut writer =
        ArrowWriter::try_new(Vec::new(), schema, Some(properties)).map_err(encode_error)?;
    writer.write(&batch).map_err(encode_error)?;
    writer.into_inner().map_err(encode_error)
}

/// JSON lines of `records`: one object per record, fields in a fixed
/// order. Keys and values are embedded as JSON when their converter is
/// JSON and they parse as JSON (compacted, otherwise unchanged), as
/// strings for the string converter (and JSON that does not parse), and
/// as base64 strings for the byte-array converter.
pub fn json_lines(
    records: &[&SinkRecord],
    config: &ObjectStoreSinkConfig,
) -> Result<Vec<u8>, SinkError> {
    json_lines_with(records, config.key_converter, config.value_converter)
}

/// [`json_lines`] with the converters given (the HTTP sink's bodies).
pub fn json_lines_with(
    records: &[&SinkRecord],
    key_converter: Converter,
    value_converter: Converter,
) -> Result<Vec<u8>, SinkError> {
    let mut out = String::new();
    for record in records {
        out.push_str("{\"topic\":");
        push_json_string(&mut out, &record.topic);
        out.push_str(&format!(
            ",\"partition\":{},\"offset\":{},\"timestamp\":{},\"key\":",
            record.partition, record.offset, record.timestamp_ms
        ));
        push_payload(
            &mut out,
            record,
            "key",
            record.key.as_deref(),
            key_converter,
        )?;
        out.push_str(",\"value\":");
        push_payload(
            &mut out,
            record,
            "value",
            record.value.as_deref(),
            value_converter,
        )?;
        out.push_str(",\"headers\":");
        match headers_json(record) {
            Some(json) => out.push_str(&json),
            None => out.push_str("null"),
        }
        out.push_str("}\n");
    }
    Ok(out.into_bytes())
}

fn push_payload(
    out: &mut String,
    record: &SinkRecord,
    field: &'static str,
    bytes: Option<&[u8]>,
    converter: Converter,
) -> Result<(), SinkError> {
    let Some(bytes) = bytes else {
        out.push_str("null");
        return Ok(());
    };
    match converter {
        Converter::Bytes => {
            out.push('"');
            out.push_str(&base64(bytes));
            out.push('"');
        }
        Converter::String | Converter::Json => {
            let text = text_of(record, field, Some(bytes), converter)?.unwrap_or_default();
            let is_json = converter == Converter::Json
                && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
            if is_json {
                push_compact_json(out, text);
            } else {
                push_json_string(out, text);
            }
        }
    }
    Ok(())
}

/// The headers as a JSON object, `None` when there are none.
fn headers_json(record: &SinkRecord) -> Option<String> {
    if record.headers.is_empty() {
        return None;
    }
    // Sorted by name whatever serde_json's map keeps, so that the bytes
    // do not depend on its features.
    let sorted: std::collections::BTreeMap<String, serde_json::Value> = record
        .headers
        .iter()
        .map(|(name, value)| {
            let value = match value.as_deref() {
                None => serde_json::Value::Null,
                Some(bytes) => match std::str::from_utf8(bytes) {
                    Ok(text) => serde_json::Value::String(text.to_string()),
                    Err(_) => serde_json::Value::String(base64(bytes)),
                },
            };
            (name.clone(), value)
        })
        .collect();
    let object: serde_json::Map<String, serde_json::Value> = sorted.into_iter().collect();
    Some(serde_json::Value::Object(object).to_string())
}

/// Appends `text` as a JSON string literal.
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends valid JSON `text` without the whitespace between its tokens,
/// so that it fits on one line and keeps every number and string as
/// written.
fn push_compact_json(out: &mut String, text: &str) {
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            if c == '"' {
                in_string = true;
            }
            out.push(c);
        }
    }
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
