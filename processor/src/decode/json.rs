//! `format: json`: one JSON object per record value.

use std::borrow::Cow;

use kafka_protocol::records::Record;
use serde_json::Value;

use super::batch::{Batch, Fields, Skips, Val};
use super::Columns;
use crate::pipeline::Pipeline;

/// Decodes JSON record values.
pub struct JsonDecoder {
    fields: Fields,
    skips: Skips,
    scratch: String,
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
            fields: Fields::of(pipeline),
            skips: Skips::default(),
            scratch: String::new(),
        }
    }

    /// Records skipped since the decoder was made.
    pub fn skipped(&self) -> u64 {
        self.skips.count
    }

    /// The records' columns; records that cannot be used are left out.
    pub fn decode(&mut self, partition: i32, records: &[Record]) -> Columns {
        let mut batch = Batch::new(&self.fields, records.len());
        for r in records {
            if let Err(why) = self.row(&mut batch, r) {
                let f = &self.fields;
                self.skips.skip(partition, r.offset, || match why {
                    Skip::NotAnObject => "its value is not a JSON object".to_owned(),
                    Skip::NoEventTime => {
                        format!("it has no integer event time field {:?}", f.time)
                    }
                    Skip::NoKey => f.no_key(),
                });
            }
        }
        batch.finish()
    }

    /// Appends a usable record's row.
    fn row(&mut self, batch: &mut Batch, r: &Record) -> Result<(), Skip> {
        let value = r.value.as_deref().ok_or(Skip::NotAnObject)?;
        let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(value) else {
            return Err(Skip::NotAnObject);
        };
        let f = &self.fields;
        let time = obj
            .get(&f.time)
            .and_then(as_millis)
            .ok_or(Skip::NoEventTime)?;
        let key: Cow<'_, str> = match &f.key {
            Some(field) => match obj.get(field).and_then(as_text) {
                Some(k) => k,
                None => return Err(Skip::NoKey),
            },
            None => match &r.key {
                Some(k) => String::from_utf8_lossy(k),
                None => return Err(Skip::NoKey),
            },
        };
        batch.row(r.offset, time, Val::Str(&key));
        let get = |name: &String| obj.get(name).and_then(as_val);
        batch.fields(
            &mut self.scratch,
            f.values.iter().map(get),
            f.distinct.iter().map(get),
            f.filters.iter().map(|(name, _)| get(name)),
        );
        Ok(())
    }
}

/// A string, number or boolean field.
fn as_val(v: &Value) -> Option<Val<'_>> {
    match v {
        Value::String(s) => Some(Val::Str(s)),
        Value::Bool(b) => Some(Val::Bool(*b)),
        Value::Number(n) => Some(Val::Json(n)),
        _ => None,
    }
}

/// A string, or a number or boolean as its JSON text.
fn as_text(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => Some(Cow::Borrowed(s.as_str())),
        Value::Number(_) | Value::Bool(_) => Some(Cow::Owned(v.to_string())),
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
#[path = "json_tests.rs"]
mod tests;
