//! Record values into Arrow arrays: the key (Utf8), the event time
//! (Int64, milliseconds since the epoch), each field an aggregate reads
//! (Float64, null where the record lacks it or it is not a number), each
//! field a `distinct` aggregate counts (UInt64: the hash of its text) and
//! each filter condition's field (Float64 or Utf8, as the condition's
//! values are).
//!
//! The format is chosen once, when the [`Decoder`] is made: JSON objects
//! ([`json`]), Avro records in the Confluent wire format with their schemas
//! from a registry ([`avro`], [`registry`]), or fixed binary layouts
//! ([`fixed`]). Each format's loop over a batch is its own code; they share
//! the column builders (`decode/batch.rs`).
//!
//! A record that cannot be used (a value that does not decode, no event
//! time, no key) is skipped and counted; the decoder logs such records at
//! most once every 10 seconds (with the count since), never fails.

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, StringArray, UInt64Array};
use kafka_protocol::records::Record;

use crate::pipeline::{Format, Pipeline};
use crate::source::Fetched;

pub mod avro;
mod batch;
pub mod fixed;
pub mod json;
pub mod registry;

pub use avro::AvroDecoder;
pub use fixed::FixedDecoder;
pub use json::JsonDecoder;

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
    /// One array per filter condition ([`Pipeline::filter_conditions`]),
    /// in that order: Float64 or Utf8.
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

/// The decoder of a pipeline's format.
pub enum Decoder {
    Json(JsonDecoder),
    Avro(AvroDecoder),
    Fixed(FixedDecoder),
}

impl Decoder {
    pub fn new(pipeline: &Pipeline) -> anyhow::Result<Decoder> {
        Ok(match pipeline.source.format {
            Format::Json => Decoder::Json(JsonDecoder::new(pipeline)),
            Format::Avro => Decoder::Avro(AvroDecoder::with_registry(pipeline)?),
            Format::Fixed => Decoder::Fixed(FixedDecoder::new(pipeline)),
        })
    }

    /// Gets ready to decode `fetched`: fetches the Avro schemas it names
    /// that are not cached yet, waiting out an unreachable registry.
    pub async fn prepare(&mut self, fetched: &[Fetched]) {
        if let Decoder::Avro(d) = self {
            d.fetch_schemas(fetched.iter().flat_map(|f| &f.records))
                .await;
        }
    }

    /// The records' columns; records that cannot be used are left out.
    pub fn decode(&mut self, partition: i32, records: &[Record]) -> Columns {
        match self {
            Decoder::Json(d) => d.decode(partition, records),
            Decoder::Avro(d) => d.decode(partition, records),
            Decoder::Fixed(d) => d.decode(partition, records),
        }
    }

    /// Records skipped since the decoder was made.
    pub fn skipped(&self) -> u64 {
        match self {
            Decoder::Json(d) => d.skipped(),
            Decoder::Avro(d) => d.skipped(),
            Decoder::Fixed(d) => d.skipped(),
        }
    }
}
