//! `format: fixed`: each value holds the layout's fields back to back at
//! fixed offsets, numbers in the `endian` byte order, strings `str:N` of N
//! bytes of UTF-8 with trailing NULs and spaces trimmed.
//!
//! Fields are read by offset straight into the column builders: no value
//! is copied or allocated per record (a number used as text, a key or a
//! `distinct` value, is written into the builder or a reused buffer). The
//! byte order is a type parameter, so each batch runs one loop compiled
//! for its order. A value shorter than the layout is skipped and counted;
//! bytes after the layout are ignored. A string that is not UTF-8 is a
//! missing field (a record whose key it is is skipped).

use kafka_protocol::records::Record;

use super::batch::{Batch, Fields, Skips, Val};
use super::Columns;
use crate::pipeline::{Endian, FieldType, Pipeline};

/// Decodes fixed binary layouts.
pub struct FixedDecoder {
    fields: Fields,
    skips: Skips,
    scratch: String,
    endian: Endian,
    /// The bytes a value must have.
    size: usize,
    key: Option<Slot>,
    /// Validation makes sure the layout has the event time, an integer.
    time: Option<Slot>,
    values: Vec<Option<Slot>>,
    distinct: Vec<Option<Slot>>,
    filters: Vec<Option<Slot>>,
}

/// Where a field is in a value.
#[derive(Debug, Clone, Copy)]
struct Slot {
    offset: usize,
    kind: FieldType,
}

/// Why a record was skipped.
enum Skip {
    Short(usize),
    NoEventTime,
    NoKey,
}

/// A byte order: how 2, 4 and 8 bytes are a number.
trait Order {
    fn u16(b: [u8; 2]) -> u16;
    fn u32(b: [u8; 4]) -> u32;
    fn u64(b: [u8; 8]) -> u64;
}

struct Little;
struct Big;

impl Order for Little {
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_le_bytes(b)
    }
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_le_bytes(b)
    }
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_le_bytes(b)
    }
}

impl Order for Big {
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_be_bytes(b)
    }
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_be_bytes(b)
    }
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_be_bytes(b)
    }
}

impl FixedDecoder {
    pub fn new(pipeline: &Pipeline) -> FixedDecoder {
        let layout = pipeline.source.layout.as_deref().unwrap_or_default();
        let mut offset = 0;
        let mut slots = Vec::with_capacity(layout.len());
        for f in layout {
            slots.push((
                f.name.as_str(),
                Slot {
                    offset,
                    kind: f.kind,
                },
            ));
            offset += f.kind.width();
        }
        let slot = |name: &String| slots.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
        let fields = Fields::of(pipeline);
        FixedDecoder {
            key: fields.key.as_ref().and_then(slot),
            time: slot(&fields.time),
            values: fields.values.iter().map(slot).collect(),
            distinct: fields.distinct.iter().map(slot).collect(),
            filters: fields.filters.iter().map(|(name, _)| slot(name)).collect(),
            endian: pipeline.source.endian.unwrap_or_default(),
            size: offset,
            fields,
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
        match self.endian {
            Endian::Little => self.decode_in::<Little>(partition, records),
            Endian::Big => self.decode_in::<Big>(partition, records),
        }
    }

    fn decode_in<O: Order>(&mut self, partition: i32, records: &[Record]) -> Columns {
        let mut batch = Batch::new(&self.fields, records.len());
        for r in records {
            if let Err(why) = self.row::<O>(&mut batch, r) {
                let (f, size) = (&self.fields, self.size);
                self.skips.skip(partition, r.offset, || match why {
                    Skip::Short(n) => {
                        format!("its value is {n} bytes, shorter than the layout's {size}")
                    }
                    Skip::NoEventTime => {
                        format!("its event time field {:?} is out of range", f.time)
                    }
                    Skip::NoKey => f.no_key(),
                });
            }
        }
        batch.finish()
    }

    /// Appends a usable record's row.
    fn row<O: Order>(&mut self, batch: &mut Batch, r: &Record) -> Result<(), Skip> {
        let value = r.value.as_deref().unwrap_or_default();
        if value.len() < self.size {
            return Err(Skip::Short(value.len()));
        }
        let time = match self.time.and_then(|s| read::<O>(value, s)) {
            Some(Val::Int(t)) => t,
            Some(Val::UInt(t)) => i64::try_from(t).map_err(|_| Skip::NoEventTime)?,
            _ => return Err(Skip::NoEventTime),
        };
        let kafka_key;
        let key = match &self.fields.key {
            Some(_) => self
                .key
                .and_then(|s| read::<O>(value, s))
                .ok_or(Skip::NoKey)?,
            None => {
                kafka_key = String::from_utf8_lossy(r.key.as_deref().ok_or(Skip::NoKey)?);
                Val::Str(&kafka_key)
            }
        };
        batch.row(r.offset, time, key);
        let val = |s: &Option<Slot>| s.and_then(|s| read::<O>(value, s));
        batch.fields(
            &mut self.scratch,
            self.values.iter().map(val),
            self.distinct.iter().map(val),
            self.filters.iter().map(val),
        );
        Ok(())
    }
}

/// The field at `slot` of `value`; none past the value's end, or for a
/// string that is not UTF-8.
fn read<O: Order>(value: &[u8], slot: Slot) -> Option<Val<'_>> {
    let at = slot.offset;
    let bytes = value.get(at..at.checked_add(slot.kind.width())?)?;
    let v = match slot.kind {
        FieldType::I8 => Val::Int(i64::from(i8::from_ne_bytes(bytes.try_into().ok()?))),
        FieldType::U8 => Val::Int(i64::from(*bytes.first()?)),
        FieldType::I16 => Val::Int(i64::from(O::u16(bytes.try_into().ok()?) as i16)),
        FieldType::U16 => Val::Int(i64::from(O::u16(bytes.try_into().ok()?))),
        FieldType::I32 => Val::Int(i64::from(O::u32(bytes.try_into().ok()?) as i32)),
        FieldType::U32 => Val::Int(i64::from(O::u32(bytes.try_into().ok()?))),
        FieldType::I64 => Val::Int(O::u64(bytes.try_into().ok()?) as i64),
        FieldType::U64 => Val::UInt(O::u64(bytes.try_into().ok()?)),
        FieldType::F32 => Val::Float(f64::from(f32::from_bits(O::u32(bytes.try_into().ok()?)))),
        FieldType::F64 => Val::Float(f64::from_bits(O::u64(bytes.try_into().ok()?))),
        FieldType::Str(_) => {
            let end = bytes
                .iter()
                .rposition(|b| *b != 0 && *b != b' ')
                .map_or(0, |i| i + 1);
            Val::Str(std::str::from_utf8(bytes.get(..end)?).ok()?)
        }
    };
    Some(v)
}

#[cfg(test)]
#[path = "fixed_tests.rs"]
mod tests;
