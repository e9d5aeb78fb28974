//! What every format shares: the fields a pipeline reads from a value, the
//! builders of one batch's columns, how a field's value becomes text, and
//! the count of skipped records with its rate-limited warning.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder, UInt64Builder};
use arrow_array::ArrayRef;

use super::Columns;
use crate::pipeline::Pipeline;
use crate::sketch::hash;

const LOG_EVERY: Duration = Duration::from_secs(10);

/// The fields a pipeline reads from each value, by name.
#[derive(Debug, Clone)]
pub struct Fields {
    /// Grouped by; `None`: the record's Kafka key.
    pub key: Option<String>,
    pub time: String,
    /// [`Pipeline::value_fields`].
    pub values: Vec<String>,
    /// [`Pipeline::distinct_fields`].
    pub distinct: Vec<String>,
    /// Per filter condition, its field and whether it is compared as text.
    pub filters: Vec<(String, bool)>,
}

impl Fields {
    pub fn of(pipeline: &Pipeline) -> Fields {
        Fields {
            key: pipeline.source.key.clone(),
            time: pipeline.source.event_time.clone(),
            values: pipeline.value_fields(),
            distinct: pipeline.distinct_fields(),
            filters: pipeline
                .filter_conditions()
                .map(|f| (f.field.clone(), f.is_text()))
                .collect(),
        }
    }

    /// Why a record without a key was skipped.
    pub fn no_key(&self) -> String {
        match &self.key {
            Some(k) => format!("it has no key field {k:?} (string or number)"),
            None => "it has no Kafka key".to_owned(),
        }
    }
}

/// A field's value as a format read it. Used as text (a key, a `distinct`
/// value, a text filter's operand), numbers and booleans are their JSON
/// text; used as a number, a string or boolean is none.
#[derive(Debug, Clone, Copy)]
pub enum Val<'a> {
    Str(&'a str),
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    /// A JSON number, as JSON prints it.
    Json(&'a serde_json::Number),
}

impl Val<'_> {
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Val::Int(n) => Some(n as f64),
            Val::UInt(n) => Some(n as f64),
            Val::Float(f) => Some(f),
            Val::Json(n) => n.as_f64(),
            Val::Str(_) | Val::Bool(_) => None,
        }
    }

    /// Appends the text as one value, without an intermediate string.
    pub fn append_to(self, b: &mut StringBuilder) {
        match self {
            Val::Str(s) => return b.append_value(s),
            Val::Int(n) => write!(b, "{n}"),
            Val::UInt(n) => write!(b, "{n}"),
            // Debug prints `2.0` for 2.0, as JSON does (Display prints `2`)
            Val::Float(f) => write!(b, "{f:?}"),
            Val::Bool(v) => write!(b, "{v}"),
            Val::Json(n) => write!(b, "{n}"),
        }
        .unwrap_or_default();
        b.append_value("");
    }

    /// The hash a `distinct` aggregate counts; `scratch` holds a number's
    /// text, so no string is allocated per record.
    pub fn hash(self, scratch: &mut String) -> u64 {
        scratch.clear();
        let text = match self {
            Val::Str(s) => return hash(s),
            Val::Int(n) => write!(scratch, "{n}"),
            Val::UInt(n) => write!(scratch, "{n}"),
            Val::Float(f) => write!(scratch, "{f:?}"),
            Val::Bool(v) => write!(scratch, "{v}"),
            Val::Json(n) => write!(scratch, "{n}"),
        };
        text.unwrap_or_default();
        hash(scratch)
    }
}

/// The columns of one batch being built, a row at a time: [`Batch::row`]
/// then [`Batch::fields`].
pub struct Batch {
    keys: StringBuilder,
    times: Int64Builder,
    offsets: Int64Builder,
    values: Vec<Float64Builder>,
    hashes: Vec<UInt64Builder>,
    filtered_by: Vec<FilterColumn>,
    max_event_time: Option<i64>,
}

/// A filter condition's column being built.
enum FilterColumn {
    Number(Float64Builder),
    Text(StringBuilder),
}

impl Batch {
    pub fn new(fields: &Fields, rows: usize) -> Batch {
        Batch {
            keys: StringBuilder::with_capacity(rows, rows * 8),
            times: Int64Builder::with_capacity(rows),
            offsets: Int64Builder::with_capacity(rows),
            values: fields
                .values
                .iter()
                .map(|_| Float64Builder::with_capacity(rows))
                .collect(),
            hashes: fields
                .distinct
                .iter()
                .map(|_| UInt64Builder::with_capacity(rows))
                .collect(),
            filtered_by: fields
                .filters
                .iter()
                .map(|(_, text)| {
                    if *text {
                        FilterColumn::Text(StringBuilder::with_capacity(rows, rows * 8))
                    } else {
                        FilterColumn::Number(Float64Builder::with_capacity(rows))
                    }
                })
                .collect(),
            max_event_time: None,
        }
    }

    /// Starts a row: its offset, event time and key. [`Batch::fields`]
    /// must follow.
    pub fn row(&mut self, offset: i64, time: i64, key: Val<'_>) {
        self.offsets.append_value(offset);
        self.times.append_value(time);
        self.max_event_time = Some(self.max_event_time.map_or(time, |m| m.max(time)));
        key.append_to(&mut self.keys);
    }

    /// Ends a row: its aggregated, `distinct` and filtered fields, each in
    /// [`Fields`] order (`None`: the record lacks it).
    pub fn fields<'v>(
        &mut self,
        scratch: &mut String,
        values: impl IntoIterator<Item = Option<Val<'v>>>,
        distinct: impl IntoIterator<Item = Option<Val<'v>>>,
        filters: impl IntoIterator<Item = Option<Val<'v>>>,
    ) {
        for (b, v) in self.values.iter_mut().zip(values) {
            b.append_option(v.and_then(Val::as_f64));
        }
        for (b, v) in self.hashes.iter_mut().zip(distinct) {
            b.append_option(v.map(|v| v.hash(scratch)));
        }
        for (c, v) in self.filtered_by.iter_mut().zip(filters) {
            c.append(v);
        }
    }

    pub fn finish(mut self) -> Columns {
        Columns {
            keys: self.keys.finish(),
            event_times: self.times.finish(),
            offsets: self.offsets.finish(),
            values: self.values.iter_mut().map(|b| b.finish()).collect(),
            hashes: self.hashes.iter_mut().map(|b| b.finish()).collect(),
            filtered_by: self
                .filtered_by
                .iter_mut()
                .map(|b| match b {
                    FilterColumn::Number(b) => Arc::new(b.finish()) as ArrayRef,
                    FilterColumn::Text(b) => Arc::new(b.finish()) as ArrayRef,
                })
                .collect(),
            max_event_time: self.max_event_time,
        }
    }
}

impl FilterColumn {
    /// Appends a row's value, as a number or as text; null when the record
    /// lacks the field.
    fn append(&mut self, v: Option<Val<'_>>) {
        match (self, v) {
            (FilterColumn::Number(b), v) => b.append_option(v.and_then(Val::as_f64)),
            (FilterColumn::Text(b), Some(v)) => v.append_to(b),
            (FilterColumn::Text(b), None) => b.append_null(),
        }
    }
}

/// Records skipped, and the warning naming one at most every 10 seconds.
#[derive(Debug, Default)]
pub struct Skips {
    pub count: u64,
    since_log: u64,
    last_log: Option<Instant>,
}

impl Skips {
    /// Counts a skipped record; `reason` completes "skipping a record: ...".
    pub fn skip(&mut self, partition: i32, offset: i64, reason: impl FnOnce() -> String) {
        self.count += 1;
        self.since_log += 1;
        let now = Instant::now();
        if self
            .last_log
            .is_some_and(|t| now.duration_since(t) < LOG_EVERY)
        {
            return;
        }
        tracing::warn!(
            partition,
            offset,
            skipped = self.since_log,
            "skipping a record: {} (records skipped since the last such line counted)",
            reason()
        );
        self.since_log = 0;
        self.last_log = Some(now);
    }
}
