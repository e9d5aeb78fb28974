//! `format: avro`: values in the Confluent wire format (byte 0, the schema
//! id as 4 bytes big-endian, then the Avro binary encoding of one record),
//! decoded with the writer's schema, fetched by id from a schema registry
//! ([`super::registry`]) and cached.
//!
//! Fetching is apart from decoding: [`AvroDecoder::fetch_schemas`] asks
//! the registry for the ids of a batch not cached yet, then
//! [`AvroDecoder::decode`] runs with no IO. A schema id the registry does
//! not know, or whose schema cannot be used (not Avro, not a record, does
//! not parse), is remembered for [`RETRY_UNUSABLE_AFTER`] and its records
//! are skipped and counted, as are values not in the wire format and
//! bytes that do not decode.
//!
//! Fields are the record's top-level fields: the event time a `long` or
//! `int` of milliseconds, or a `timestamp-millis` (`-micros`, `-nanos`,
//! and their `local-` forms, cut to milliseconds); keys, `distinct` and
//! text filters read strings, enums, numbers and booleans as text;
//! aggregates read `int`, `long`, `float` and `double`. A union with
//! `null` is its branch's value, or none.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use apache_avro::types::Value;
use apache_avro::Schema;
use kafka_protocol::records::Record;

use super::batch::{Batch, Fields, Skips, Val};
use super::registry::{Lookup, Registry};
use super::Columns;
use crate::pipeline::Pipeline;

/// How long a schema id that could not be used is not asked for again.
pub const RETRY_UNUSABLE_AFTER: Duration = Duration::from_secs(30);

/// The largest block the Avro decoder allocates for one string, bytes,
/// array or map of a record: garbled bytes may claim any length.
const MAX_ALLOCATION: usize = 16 << 20;

/// Decodes Avro values in the Confluent wire format.
pub struct AvroDecoder {
    fields: Fields,
    skips: Skips,
    scratch: String,
    /// None: schemas come only from [`AvroDecoder::learn`].
    registry: Option<Registry>,
    schemas: HashMap<u32, Known>,
}

/// What is known of a schema id.
enum Known {
    Ready(Box<Plan>),
    /// Records naming it are skipped, for this reason, until `until`.
    Unusable {
        why: String,
        until: Instant,
    },
}

/// A record schema, and where in its records each field read is (`None`:
/// the schema has no such field).
struct Plan {
    schema: Schema,
    key: Option<usize>,
    time: Option<usize>,
    values: Vec<Option<usize>>,
    distinct: Vec<Option<usize>>,
    filters: Vec<Option<usize>>,
}

/// Why a record was skipped.
enum Skip {
    NotWireFormat,
    Schema(u32),
    Garbled(u32, String),
    NoEventTime,
    NoKey,
}

impl AvroDecoder {
    /// A decoder fetching schemas from the pipeline's registry.
    pub fn with_registry(pipeline: &Pipeline) -> anyhow::Result<AvroDecoder> {
        let mut d = AvroDecoder::new(pipeline);
        if let Some(url) = &pipeline.source.registry {
            d.registry = Some(Registry::new(url)?);
        }
        Ok(d)
    }

    /// A decoder that knows only the schemas it is told of.
    pub fn new(pipeline: &Pipeline) -> AvroDecoder {
        apache_avro::util::max_allocation_bytes(MAX_ALLOCATION);
        AvroDecoder {
            fields: Fields::of(pipeline),
            skips: Skips::default(),
            scratch: String::new(),
            registry: None,
            schemas: HashMap::new(),
        }
    }

    /// Records skipped since the decoder was made.
    pub fn skipped(&self) -> u64 {
        self.skips.count
    }

    /// The schema ids `records` name that are not cached, or were unusable
    /// long enough ago to ask again, each once.
    pub fn missing<'r>(
        &self,
        records: impl IntoIterator<Item = &'r Record>,
        now: Instant,
    ) -> Vec<u32> {
        let mut out = Vec::new();
        for r in records {
            let Some((id, _)) = r.value.as_deref().and_then(wire) else {
                continue;
            };
            let stale = match self.schemas.get(&id) {
                None => true,
                Some(Known::Ready(_)) => false,
                Some(Known::Unusable { until, .. }) => now >= *until,
            };
            if stale && !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }

    /// Remembers what the registry said of schema id `id`.
    pub fn learn(&mut self, id: u32, lookup: Lookup, now: Instant) {
        let known = match lookup {
            Lookup::Avro(text) => match plan(&self.fields, &text) {
                Ok(p) => Known::Ready(Box::new(p)),
                Err(why) => unusable(why, now),
            },
            Lookup::Unknown => unusable("the schema registry does not know it".into(), now),
            Lookup::Unusable(why) => unusable(why, now),
        };
        if let Known::Unusable { why, .. } = &known {
            tracing::warn!(id, "records with schema id {id} will be skipped: {why}");
        }
        self.schemas.insert(id, known);
    }

    /// Fetches the schemas `records` need that are not cached, waiting
    /// out an unreachable registry.
    pub async fn fetch_schemas<'r>(&mut self, records: impl IntoIterator<Item = &'r Record>) {
        let missing = self.missing(records, Instant::now());
        let Some(registry) = &self.registry else {
            return;
        };
        let mut found = Vec::with_capacity(missing.len());
        for id in missing {
            found.push((id, registry.schema(id).await));
        }
        for (id, lookup) in found {
            self.learn(id, lookup, Instant::now());
        }
    }

    /// The records' columns; records that cannot be used are left out.
    pub fn decode(&mut self, partition: i32, records: &[Record]) -> Columns {
        let mut batch = Batch::new(&self.fields, records.len());
        for r in records {
            if let Err(why) = self.row(&mut batch, r) {
                let (f, schemas) = (&self.fields, &self.schemas);
                self.skips.skip(partition, r.offset, || match why {
                    Skip::NotWireFormat => "its value is not in the Confluent wire format \
                                            (byte 0, a 4-byte schema id, Avro)"
                        .to_owned(),
                    Skip::Schema(id) => match schemas.get(&id) {
                        Some(Known::Unusable { why, .. }) => format!("schema id {id}: {why}"),
                        _ => format!("schema id {id} has not been fetched from a registry"),
                    },
                    Skip::Garbled(id, e) => format!("it does not decode with schema id {id}: {e}"),
                    Skip::NoEventTime => format!(
                        "it has no event time field {:?} (a long, an int or a timestamp)",
                        f.time
                    ),
                    Skip::NoKey => f.no_key(),
                });
            }
        }
        batch.finish()
    }

    /// Appends a usable record's row.
    fn row(&mut self, batch: &mut Batch, r: &Record) -> Result<(), Skip> {
        let (id, mut body) = r
            .value
            .as_deref()
            .and_then(wire)
            .ok_or(Skip::NotWireFormat)?;
        let Some(Known::Ready(plan)) = self.schemas.get(&id) else {
            return Err(Skip::Schema(id));
        };
        let decoded = apache_avro::from_avro_datum(&plan.schema, &mut body, None)
            .map_err(|e| Skip::Garbled(id, e.to_string()))?;
        let Value::Record(fields) = decoded else {
            return Err(Skip::Garbled(id, "not a record".into()));
        };
        let get = |at: &Option<usize>| at.and_then(|i| fields.get(i)).map(|(_, v)| v);
        let time = get(&plan.time)
            .and_then(as_millis)
            .ok_or(Skip::NoEventTime)?;
        let kafka_key;
        let key = match &self.fields.key {
            Some(_) => get(&plan.key).and_then(as_val).ok_or(Skip::NoKey)?,
            None => {
                kafka_key = String::from_utf8_lossy(r.key.as_deref().ok_or(Skip::NoKey)?);
                Val::Str(&kafka_key)
            }
        };
        batch.row(r.offset, time, key);
        let val = |at: &Option<usize>| get(at).and_then(as_val);
        batch.fields(
            &mut self.scratch,
            plan.values.iter().map(val),
            plan.distinct.iter().map(val),
            plan.filters.iter().map(val),
        );
        Ok(())
    }
}

fn unusable(why: String, now: Instant) -> Known {
    Known::Unusable {
        why,
        until: now + RETRY_UNUSABLE_AFTER,
    }
}

/// The schema id and the Avro bytes of a value in the wire format.
fn wire(value: &[u8]) -> Option<(u32, &[u8])> {
    match value {
        [0, a, b, c, d, rest @ ..] => Some((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        _ => None,
    }
}

/// Parses a schema and finds the fields read in its records.
fn plan(fields: &Fields, text: &str) -> Result<Plan, String> {
    let schema = Schema::parse_str(text).map_err(|e| format!("its schema does not parse: {e}"))?;
    let Schema::Record(record) = &schema else {
        return Err("its schema is not a record".into());
    };
    let at = |name: &String| record.lookup.get(name).copied();
    let key = fields.key.as_ref().and_then(at);
    let time = at(&fields.time);
    let values = fields.values.iter().map(at).collect();
    let distinct = fields.distinct.iter().map(at).collect();
    let filters = fields.filters.iter().map(|(name, _)| at(name)).collect();
    Ok(Plan {
        key,
        time,
        values,
        distinct,
        filters,
        schema,
    })
}

/// A union's branch, or the value itself.
fn branch(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => inner,
        v => v,
    }
}

/// An event time in milliseconds.
fn as_millis(v: &Value) -> Option<i64> {
    match branch(v) {
        Value::Long(n) | Value::TimestampMillis(n) | Value::LocalTimestampMillis(n) => Some(*n),
        Value::Int(n) => Some(i64::from(*n)),
        Value::TimestampMicros(n) | Value::LocalTimestampMicros(n) => Some(n.div_euclid(1_000)),
        Value::TimestampNanos(n) | Value::LocalTimestampNanos(n) => Some(n.div_euclid(1_000_000)),
        _ => None,
    }
}

/// A string, enum, number or boolean.
fn as_val(v: &Value) -> Option<Val<'_>> {
    match branch(v) {
        Value::String(s) | Value::Enum(_, s) => Some(Val::Str(s)),
        Value::Int(n) => Some(Val::Int(i64::from(*n))),
        Value::Long(n) => Some(Val::Int(*n)),
        Value::Float(f) => Some(Val::Float(f64::from(*f))),
        Value::Double(f) => Some(Val::Float(*f)),
        Value::Boolean(b) => Some(Val::Bool(*b)),
        _ => None,
    }
}

#[cfg(test)]
#[path = "avro_tests.rs"]
mod tests;
