//! Closed windows as a Parquet file: columns `key` (Utf8), `window_start`
//! and `window_end` (Int64, milliseconds since the epoch), then one column
//! per aggregate in the pipeline's order: `count` and `distinct` as Int64,
//! `sum`, `min`, `max`, `avg`, `wavg` and `quantile` as Float64 (null when
//! no record of the window had the field, or for `wavg` both fields, or
//! its weights summed to 0).

use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::pipeline::{
    AggregateOp, PartitionBy, Pipeline, KEY_COLUMN, WINDOW_END_COLUMN, WINDOW_START_COLUMN,
};
use crate::window::WindowRow;

/// The output's Arrow schema.
pub fn schema(pipeline: &Pipeline) -> Schema {
    let mut fields = vec![
        Field::new(KEY_COLUMN, DataType::Utf8, false),
        Field::new(WINDOW_START_COLUMN, DataType::Int64, false),
        Field::new(WINDOW_END_COLUMN, DataType::Int64, false),
    ];
    for a in &pipeline.aggregates {
        fields.push(match a.op {
            AggregateOp::Count | AggregateOp::Distinct => {
                Field::new(&a.name, DataType::Int64, false)
            }
            _ => Field::new(&a.name, DataType::Float64, true),
        });
    }
    Schema::new(fields)
}

/// How one output column is read from a window's figures.
#[derive(Clone, Copy, Debug)]
enum Extract {
    Count,
    /// An op over numeric field `index`.
    Field(AggregateOp, usize),
    Weighted(usize),
    Distinct(usize),
    Quantile(usize, f64),
}

/// One aggregate's value in one window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    /// None: no record of the window had the field.
    Float(Option<f64>),
}

/// Per aggregate, in the pipeline's order, how its value is read.
#[derive(Clone, Debug)]
pub struct Plan(Vec<Extract>);

impl Plan {
    pub fn new(pipeline: &Pipeline) -> Plan {
        let fields = pipeline.value_fields();
        let (mut weighted, mut distinct, mut quantiles) = (0, 0, 0);
        let next = |n: &mut usize| {
            *n += 1;
            *n - 1
        };
        Plan(
            pipeline
                .aggregates
                .iter()
                .map(|a| match a.op {
                    AggregateOp::Count => Extract::Count,
                    AggregateOp::Wavg => Extract::Weighted(next(&mut weighted)),
                    AggregateOp::Distinct => Extract::Distinct(next(&mut distinct)),
                    AggregateOp::Quantile => {
                        Extract::Quantile(next(&mut quantiles), a.q.unwrap_or(0.5))
                    }
                    op => Extract::Field(
                        op,
                        a.field
                            .as_ref()
                            .and_then(|f| fields.iter().position(|x| x == f))
                            .unwrap_or(usize::MAX),
                    ),
                })
                .collect(),
        )
    }

    /// The value of aggregate `i` in `row`.
    fn value(&self, i: usize, row: &WindowRow) -> Value {
        let acc = &row.acc;
        match self.0.get(i) {
            Some(Extract::Count) | None => Value::Int(acc.count),
            Some(Extract::Distinct(d)) => {
                Value::Int(acc.distinct.get(*d).map_or(0, |d| d.estimate()))
            }
            Some(Extract::Weighted(w)) => {
                Value::Float(acc.weighted.get(*w).and_then(|w| w.value()))
            }
            Some(Extract::Quantile(s, q)) => {
                Value::Float(acc.quantiles.get(*s).and_then(|s| s.quantile(*q)))
            }
            Some(Extract::Field(op, f)) => {
                let f = acc.fields.get(*f).filter(|f| f.n > 0);
                Value::Float(f.and_then(|f| match op {
                    AggregateOp::Sum => Some(f.sum),
                    AggregateOp::Min => f.min,
                    AggregateOp::Max => f.max,
                    AggregateOp::Avg => Some(f.sum / f.n as f64),
                    _ => None,
                }))
            }
        }
    }

    /// Every aggregate's value in `row`, in the pipeline's order.
    pub fn values(&self, row: &WindowRow) -> Vec<Value> {
        (0..self.0.len()).map(|i| self.value(i, row)).collect()
    }
}

/// `rows` as one Arrow batch of [`schema`].
pub fn batch(pipeline: &Pipeline, rows: &[WindowRow]) -> anyhow::Result<RecordBatch> {
    let mut keys = StringBuilder::new();
    let mut starts = Int64Builder::with_capacity(rows.len());
    let mut ends = Int64Builder::with_capacity(rows.len());
    for r in rows {
        keys.append_value(&r.key);
        starts.append_value(r.start);
        ends.append_value(r.end);
    }
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(keys.finish()),
        Arc::new(starts.finish()),
        Arc::new(ends.finish()),
    ];
    let plan = Plan::new(pipeline);
    for (i, a) in pipeline.aggregates.iter().enumerate() {
        if matches!(a.op, AggregateOp::Count | AggregateOp::Distinct) {
            let mut b = Int64Builder::with_capacity(rows.len());
            for r in rows {
                if let Value::Int(v) = plan.value(i, r) {
                    b.append_value(v);
                }
            }
            columns.push(Arc::new(b.finish()));
        } else {
            let mut b = Float64Builder::with_capacity(rows.len());
            for r in rows {
                match plan.value(i, r) {
                    Value::Float(v) => b.append_option(v),
                    Value::Int(v) => b.append_value(v as f64),
                }
            }
            columns.push(Arc::new(b.finish()));
        }
    }
    Ok(RecordBatch::try_new(Arc::new(schema(pipeline)), columns)?)
}

/// A window's row as one JSON object: `key`, `window_start`,
/// `window_end`, then the aggregates by their names (null as in Parquet).
pub fn json(pipeline: &Pipeline, plan: &Plan, row: &WindowRow) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert(KEY_COLUMN.into(), row.key.clone().into());
    out.insert(WINDOW_START_COLUMN.into(), row.start.into());
    out.insert(WINDOW_END_COLUMN.into(), row.end.into());
    for (a, v) in pipeline.aggregates.iter().zip(plan.values(row)) {
        let v = match v {
            Value::Int(i) => i.into(),
            Value::Float(f) => f
                .and_then(serde_json::Number::from_f64)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
        };
        out.insert(a.name.clone(), v);
    }
    serde_json::Value::Object(out)
}

/// A record that came after all its windows had closed, as the late
/// output keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct LateRow {
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub event_time: i64,
    /// The record's value, as text (invalid UTF-8 replaced).
    pub value: String,
}

/// Late records as the bytes of one Parquet file: columns `partition`
/// (Int32), `offset` (Int64), `key` (Utf8), `event_time` (Int64, ms) and
/// `value` (Utf8).
pub fn encode_late(rows: &[LateRow]) -> anyhow::Result<Vec<u8>> {
    use arrow_array::builder::Int32Builder;
    let mut partitions = Int32Builder::with_capacity(rows.len());
    let mut offsets = Int64Builder::with_capacity(rows.len());
    let mut keys = StringBuilder::new();
    let mut times = Int64Builder::with_capacity(rows.len());
    let mut values = StringBuilder::new();
    for r in rows {
        partitions.append_value(r.partition);
        offsets.append_value(r.offset);
        keys.append_value(&r.key);
        times.append_value(r.event_time);
        values.append_value(&r.value);
    }
    let schema = Schema::new(vec![
        Field::new("partition", DataType::Int32, false),
        Field::new("offset", DataType::Int64, false),
        Field::new(KEY_COLUMN, DataType::Utf8, false),
        Field::new("event_time", DataType::Int64, false),
        Field::new("value", DataType::Utf8, false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(partitions.finish()),
        Arc::new(offsets.finish()),
        Arc::new(keys.finish()),
        Arc::new(times.finish()),
        Arc::new(values.finish()),
    ];
    write_parquet(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// One batch as the bytes of one Parquet file (zstd, one row group).
fn write_parquet(batch: RecordBatch) -> anyhow::Result<Vec<u8>> {
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_size(batch.num_rows().max(1))
        .build();
    let mut writer = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(properties))?;
    writer.write(&batch)?;
    Ok(writer.into_inner()?)
}

/// `rows` as the bytes of one Parquet file (zstd, one row group).
pub fn encode(pipeline: &Pipeline, rows: &[WindowRow]) -> anyhow::Result<Vec<u8>> {
    write_parquet(batch(pipeline, rows)?)
}

/// The data files named `name` (one epoch's) and the rows each holds: one
/// file, or with `sink.partition_by` one per UTC day or hour of the
/// windows' starts, in Hive-style folders
/// (`dt=2026-12-07/hour=09/part-<epoch>.parquet`).
pub fn data_files(
    pipeline: &Pipeline,
    name: &str,
    rows: &[WindowRow],
) -> Vec<(String, Vec<WindowRow>)> {
    let Some(by) = pipeline.sink.partition_by else {
        return vec![(name.to_owned(), rows.to_vec())];
    };
    let mut groups: std::collections::BTreeMap<String, Vec<WindowRow>> = Default::default();
    for r in rows {
        let folder = folder_of(r.start, by);
        groups.entry(folder).or_default().push(r.clone());
    }
    groups
        .into_iter()
        .map(|(folder, rows)| (format!("{folder}/{name}"), rows))
        .collect()
}

/// The names [`data_files`] gives, without the rows.
pub fn data_file_names(pipeline: &Pipeline, name: &str, rows: &[WindowRow]) -> Vec<String> {
    match pipeline.sink.partition_by {
        None => vec![name.to_owned()],
        Some(by) => rows
            .iter()
            .map(|r| folder_of(r.start, by))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|folder| format!("{folder}/{name}"))
            .collect(),
    }
}

/// The Hive-style folder of a window starting at `start_ms` (UTC).
pub fn folder_of(start_ms: i64, by: PartitionBy) -> String {
    let days = start_ms.div_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    match by {
        PartitionBy::Day => format!("dt={y:04}-{m:02}-{d:02}"),
        PartitionBy::Hour => {
            let hour = start_ms.rem_euclid(86_400_000) / 3_600_000;
            format!("dt={y:04}-{m:02}-{d:02}/hour={hour:02}")
        }
    }
}

/// The proleptic Gregorian (year, month, day) of a day count from
/// 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // shift the epoch to 0000-03-01, so leap days end a 400-year era's year
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{FieldAcc, WindowAcc};
    use arrow_array::{Array, Float64Array, Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn window_starts_fall_in_their_utc_day_and_hour() {
        // 2026-12-07T09:30:00Z, the last millisecond of 2024-02-29, and
        // 1969-12-31T23:00:00Z
        assert_eq!(
            folder_of(1_796_635_800_000, PartitionBy::Hour),
            "dt=2026-12-07/hour=09"
        );
        assert_eq!(
            folder_of(1_709_251_199_999, PartitionBy::Day),
            "dt=2024-02-29"
        );
        assert_eq!(
            folder_of(1_709_251_200_000, PartitionBy::Day),
            "dt=2024-03-01"
        );
        assert_eq!(
            folder_of(-3_600_000, PartitionBy::Hour),
            "dt=1969-12-31/hour=23"
        );
        assert_eq!(folder_of(0, PartitionBy::Hour), "dt=1970-01-01/hour=00");
    }

    #[test]
    fn rows_round_trip_through_parquet_with_every_op() {
        let p = Pipeline::parse(
            r#"
name: t
source: {bootstrap: "b:9092", topic: t, format: json, event_time: ts, key: k}
window: {type: tumbling, size: 1s}
aggregates:
  - {op: count, as: n}
  - {op: sum, field: x, as: s}
  - {op: min, field: x, as: lo}
  - {op: max, field: x, as: hi}
  - {op: avg, field: x, as: mean}
sink: {type: parquet, url: "file:///tmp/x"}
"#,
        )
        .unwrap();
        let row = |key: &str, start, count, x: FieldAcc| WindowRow {
            key: key.into(),
            start,
            end: start + 1000,
            acc: WindowAcc {
                count,
                fields: vec![x],
                weighted: Vec::new(),
                distinct: Vec::new(),
                quantiles: Vec::new(),
            },
        };
        let rows = vec![
            row(
                "a",
                0,
                3,
                FieldAcc {
                    n: 2,
                    sum: 5.0,
                    min: Some(1.0),
                    max: Some(4.0),
                },
            ),
            row("b", 1000, 1, FieldAcc::default()),
        ];
        let bytes = encode(&p, &rows).unwrap();
        let mut reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
            .unwrap()
            .build()
            .unwrap();
        let batch = reader.next().unwrap().unwrap();
        let names: Vec<&str> = batch
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(
            names,
            [
                "key",
                "window_start",
                "window_end",
                "n",
                "s",
                "lo",
                "hi",
                "mean"
            ]
        );
        let col = |i: usize| batch.column(i).clone();
        let keys = col(0);
        let keys = keys.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!((keys.value(0), keys.value(1)), ("a", "b"));
        let ends = col(2);
        let ends = ends.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ends.values().to_vec(), vec![1000, 2000]);
        let n = col(3);
        let n = n.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(n.values().to_vec(), vec![3, 1]);
        let f = |i: usize| {
            let c = col(i);
            let c = c.as_any().downcast_ref::<Float64Array>().unwrap().clone();
            (c.value(0), c.is_null(1))
        };
        assert_eq!(f(4), (5.0, true));
        assert_eq!(f(5), (1.0, true));
        assert_eq!(f(6), (4.0, true));
        assert_eq!(f(7), (2.5, true));
    }

    #[test]
    fn late_rows_round_trip_through_parquet() {
        let rows = vec![LateRow {
            partition: 3,
            offset: 42,
            key: "a".into(),
            event_time: 1_000,
            value: r#"{"k":"a","ts":1000}"#.into(),
        }];
        let bytes = encode_late(&rows).unwrap();
        let mut reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
            .unwrap()
            .build()
            .unwrap();
        let batch = reader.next().unwrap().unwrap();
        let names: Vec<&str> = batch
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["partition", "offset", "key", "event_time", "value"]);
        let offsets = batch.column(1).clone();
        let offsets = offsets.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(offsets.value(0), 42);
        let values = batch.column(4).clone();
        let values = values.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(values.value(0), r#"{"k":"a","ts":1000}"#);
    }

    #[test]
    fn a_row_as_json_has_the_parquet_columns_by_name() {
        let p = Pipeline::parse(
            r#"
name: t
source: {bootstrap: "b:9092", topic: t, format: json, event_time: ts, key: k}
window: {type: tumbling, size: 1s}
aggregates: [{op: count, as: n}, {op: avg, field: x, as: mean}, {op: max, field: y, as: top}]
sink: {type: topic, topic: out, url: "file:///tmp/x"}
"#,
        )
        .unwrap();
        let row = WindowRow {
            key: "a".into(),
            start: 1000,
            end: 2000,
            acc: WindowAcc {
                count: 2,
                fields: vec![
                    FieldAcc {
                        n: 2,
                        sum: 3.0,
                        min: Some(1.0),
                        max: Some(2.0),
                    },
                    FieldAcc::default(),
                ],
                weighted: Vec::new(),
                distinct: Vec::new(),
                quantiles: Vec::new(),
            },
        };
        assert_eq!(
            json(&p, &Plan::new(&p), &row),
            serde_json::json!({"key": "a", "window_start": 1000, "window_end": 2000, "n": 2, "mean": 1.5, "top": null})
        );
    }
}
