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

use crate::pipeline::{AggregateOp, Pipeline, KEY_COLUMN, WINDOW_END_COLUMN, WINDOW_START_COLUMN};
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
    let fields = pipeline.value_fields();
    let (mut weighted, mut distinct, mut quantiles) = (0, 0, 0);
    for a in &pipeline.aggregates {
        if a.op == AggregateOp::Wavg {
            let mut b = Float64Builder::with_capacity(rows.len());
            for r in rows {
                b.append_option(r.acc.weighted.get(weighted).and_then(|w| w.value()));
            }
            weighted += 1;
            columns.push(Arc::new(b.finish()));
            continue;
        }
        if a.op == AggregateOp::Distinct {
            let mut b = Int64Builder::with_capacity(rows.len());
            for r in rows {
                b.append_value(r.acc.distinct.get(distinct).map_or(0, |d| d.estimate()));
            }
            distinct += 1;
            columns.push(Arc::new(b.finish()));
            continue;
        }
        if a.op == AggregateOp::Quantile {
            let q = a.q.unwrap_or(0.5);
            let mut b = Float64Builder::with_capacity(rows.len());
            for r in rows {
                b.append_option(r.acc.quantiles.get(quantiles).and_then(|s| s.quantile(q)));
            }
            quantiles += 1;
            columns.push(Arc::new(b.finish()));
            continue;
        }
        if a.op == AggregateOp::Count {
            let mut b = Int64Builder::with_capacity(rows.len());
            for r in rows {
                b.append_value(r.acc.count);
            }
            columns.push(Arc::new(b.finish()));
            continue;
        }
        let index = a
            .field
            .as_ref()
            .and_then(|f| fields.iter().position(|x| x == f));
        let mut b = Float64Builder::with_capacity(rows.len());
        for r in rows {
            let acc = index.and_then(|i| r.acc.fields.get(i)).filter(|f| f.n > 0);
            b.append_option(acc.and_then(|f| match a.op {
                AggregateOp::Sum => Some(f.sum),
                AggregateOp::Min => f.min,
                AggregateOp::Max => f.max,
                AggregateOp::Avg => Some(f.sum / f.n as f64),
                AggregateOp::Count
                | AggregateOp::Wavg
                | AggregateOp::Distinct
                | AggregateOp::Quantile => None,
            }));
        }
        columns.push(Arc::new(b.finish()));
    }
    Ok(RecordBatch::try_new(Arc::new(schema(pipeline)), columns)?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{FieldAcc, WindowAcc};
    use arrow_array::{Array, Float64Array, Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

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
}
