//! JSON record values into Arrow arrays: the key (Utf8), the event time
//! (Int64, milliseconds since the epoch), each field an aggregate reads
//! (Float64, null where the record lacks it or it is not a number) and
//! each field a `distinct` aggregate counts (UInt64: the hash of its text),
//! each field a filter reads (Float64 or Utf8, as the filter's values are).
//!
//! A record whose value is not a JSON object, or that lacks the event time
//! or the key field, is skipped and counted; the decoder logs such records
//! at most once every 10 seconds (with the count since), never fails.

use std::time::{Duration, Instant};

use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder, UInt64Builder};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, StringArray, UInt64Array};
use kafka_protocol::records::Record;
use serde_json::Value;

use crate::pipeline::Pipeline;
use crate::sketch::hash;

const LOG_EVERY: Duration = Duration::from_secs(10);

/// One fetched batch, decoded: row `i` of every array is one record.
#[derive(Debug)]
pub struct Columns {
    pub keys: StringArray,
    pub event_times: Int64Array,
    /// The records' offsets in their partition.
    pub offsets: Int64Array,
    /// One array per [`Pipeline::value_fields`], in that order.
    pub values: Vec<Float64Array>,
    /// One array per [`Pipeline::distinct_fields`], in that order: the
    /// hash of the value's text ([`crate::sketch::hash`]).
    pub hashes: Vec<UInt64Array>,
    /// One array per filter, in the pipeline's order: Float64 or Utf8.
    pub filtered_by: Vec<ArrayRef>,
    /// The newest event time among the records decoded, kept when some
    /// are then filtered out (they still move the watermark).
    pub max_event_time: Option<i64>,
}

impl Columns {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Decodes record values as the pipeline's source says.
pub struct JsonDecoder {
    key_field: Option<String>,
    time_field: String,
    value_fields: Vec<String>,
    distinct_fields: Vec<String>,
    /// Per filter, its field and whether it is compared as text.
    filter_fields: Vec<(String, bool)>,
    /// Records skipped since the decoder was made.
    pub skipped: u64,
    skipped_since_log: u64,
    last_log: Option<Instant>,
}

/// Why a record was skipped.
enum Skip {
    NotAnObject,
    NoEventTime,
    NoKey,
}

impl JsonDecoder {
    pub fn new(pipeline: &Pipeline) -> JsonDecoder {
        JsonDecoder {
            key_field: pipeline.source.key.clone(),
            time_field: pipeline.source.event_time.clone(),
            value_fields: pipeline.value_fields(),
            distinct_fields: pipeline.distinct_fields(),
            filter_fields: pipeline
                .filter
                .iter()
                .map(|f| (f.field.clone(), f.is_text()))
                .collect(),
            skipped: 0,
            skipped_since_log: 0,
            last_log: None,
        }
    }

    /// The records' columns; records that cannot be used are left out.
    pub fn decode(&mut self, partition: i32, records: &[Record]) -> Columns {
        let mut keys = StringBuilder::with_capacity(records.len(), records.len() * 8);
        let mut times = Int64Builder::with_capacity(records.len());
        let mut offsets = Int64Builder::with_capacity(records.len());
        let mut values: Vec<Float64Builder> = self
            .value_fields
            .iter()
            .map(|_| Float64Builder::with_capacity(records.len()))
            .collect();
        let mut filtered_by: Vec<FilterColumn> = self
            .filter_fields
            .iter()
            .map(|(_, text)| {
                if *text {
                    FilterColumn::Text(StringBuilder::with_capacity(
                        records.len(),
                        records.len() * 8,
                    ))
                } else {
                    FilterColumn::Number(Float64Builder::with_capacity(records.len()))
                }
            })
            .collect();
        let mut hashes: Vec<UInt64Builder> = self
            .distinct_fields
            .iter()
            .map(|_| UInt64Builder::with_capacity(records.len()))
            .collect();
        let mut max_event_time: Option<i64> = None;
        for r in records {
            match self.row(r) {
                Ok((key, time, fields, obj)) => {
                    keys.append_value(key);
                    offsets.append_value(r.offset);
                    times.append_value(time);
                    max_event_time = Some(max_event_time.map_or(time, |m| m.max(time)));
                    for (b, v) in values.iter_mut().zip(fields) {
                        b.append_option(v);
                    }
                    for (b, field) in hashes.iter_mut().zip(&self.distinct_fields) {
                        b.append_option(obj.get(field).and_then(as_text).map(|t| hash(&t)));
                    }
                    for (b, (field, _)) in filtered_by.iter_mut().zip(&self.filter_fields) {
                        let v = obj.get(field);
                        match b {
                            FilterColumn::Number(b) => b.append_option(v.and_then(Value::as_f64)),
                            FilterColumn::Text(b) => b.append_option(v.and_then(as_text)),
                        }
                    }
                }
                Err(why) => self.skip(partition, r.offset, why),
            }
        }
        Columns {
            keys: keys.finish(),
            event_times: times.finish(),
            offsets: offsets.finish(),
            values: values.iter_mut().map(|b| b.finish()).collect(),
            hashes: hashes.iter_mut().map(|b| b.finish()).collect(),
            filtered_by: filtered_by
                .iter_mut()
                .map(|b| match b {
                    FilterColumn::Number(b) => Arc::new(b.finish()) as ArrayRef,
                    FilterColumn::Text(b) => Arc::new(b.finish()) as ArrayRef,
                })
                .collect(),
            max_event_time,
        }
    }

    /// A usable record's key, event time, aggregated fields and object.
    #[allow(clippy::type_complexity)]
    fn row(
        &self,
        r: &Record,
    ) -> Result<
        (
            String,
            i64,
            Vec<Option<f64>>,
            serde_json::Map<String, Value>,
        ),
        Skip,
    > {
        let value = r.value.as_deref().ok_or(Skip::NotAnObject)?;
        let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(value) else {
            return Err(Skip::NotAnObject);
        };
        let time = obj
            .get(&self.time_field)
            .and_then(as_millis)
            .ok_or(Skip::NoEventTime)?;
        let key = match &self.key_field {
            Some(field) => match obj.get(field).and_then(as_text) {
                Some(k) => k.into_owned(),
                None => return Err(Skip::NoKey),
            },
            None => match &r.key {
                Some(k) => String::from_utf8_lossy(k).into_owned(),
                None => return Err(Skip::NoKey),
            },
        };
        let fields = self
            .value_fields
            .iter()
            .map(|f| obj.get(f).and_then(Value::as_f64))
            .collect();
        Ok((key, time, fields, obj))
    }

    fn skip(&mut self, partition: i32, offset: i64, why: Skip) {
        self.skipped += 1;
        self.skipped_since_log += 1;
        let now = Instant::now();
        if self
            .last_log
            .is_some_and(|t| now.duration_since(t) < LOG_EVERY)
        {
            return;
        }
        let reason = match why {
            Skip::NotAnObject => "its value is not a JSON object".to_owned(),
            Skip::NoEventTime => {
                format!("it has no integer event time field {:?}", self.time_field)
            }
            Skip::NoKey => match &self.key_field {
                Some(f) => format!("it has no key field {f:?} (string or number)"),
                None => "it has no Kafka key".to_owned(),
            },
        };
        tracing::warn!(
            partition,
            offset,
            skipped = self.skipped_since_log,
            "skipping a record: {reason} (records skipped since the last such line counted)"
        );
        self.skipped_since_log = 0;
        self.last_log = Some(now);
    }
}

/// A filter column being built.
enum FilterColumn {
    Number(Float64Builder),
    Text(StringBuilder),
}

/// A string, or a number or boolean as its JSON text.
fn as_text(v: &Value) -> Option<std::borrow::Cow<'_, str>> {
    match v {
        Value::String(s) => Some(std::borrow::Cow::Borrowed(s.as_str())),
        Value::Number(_) | Value::Bool(_) => Some(std::borrow::Cow::Owned(v.to_string())),
        _ => None,
    }
}

/// An event time: an integer, or a number with no fraction.
fn as_millis(v: &Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
