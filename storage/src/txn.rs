//! Transactions in the log: control batches and aborted transactions.
//!
//! A transactional producer's batches carry the transactional attribute;
//! the transaction ends with a *control batch* (a marker) written by the
//! broker at the request of the transaction coordinator: one record whose
//! key says COMMIT or ABORT and whose value names the coordinator's epoch.
//! Until its marker, a transaction is *ongoing*: the log's last stable
//! offset (LSO) stays at the first offset of its oldest ongoing
//! transaction, and read_committed consumers read no further.
//!
//! Each aborted transaction is remembered as `(producer id, first offset,
//! marker offset)`, so a read_committed fetch can tell its consumer which
//! records to drop (Kafka's `aborted_transactions`). The list is kept in
//! memory for the whole log and on disk beside the segment holding each
//! marker, in `{base:020}.txnindex`: 24 bytes per entry (producer id, first
//! offset, marker offset, big-endian) and a CRC-32C of the entries at the
//! end. The file is rewritten (through a temporary file and a rename, and
//! fsynced) whenever an abort marker lands in the segment: aborts are rare,
//! and a marker whose entry is lost by a crash is found again by the
//! header scan of recovery (markers after the producer snapshot are
//! replayed), while segments below it were already durable.

use std::collections::BTreeMap;
use std::path::Path;

use crate::batch::{self, BatchHeader};
use crate::error::StorageError;
use crate::files;

pub(crate) const TXN_INDEX_EXT: &str = "txnindex";

/// Attribute bits of a control batch: transactional (4) and control (5).
const MARKER_ATTRIBUTES: i16 = 0x30;
const ENTRY_LEN: usize = 24;

/// What a marker says of its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    Abort,
    Commit,
}

impl ControlType {
    fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }
}

/// One aborted transaction of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// The offset of its first batch.
    pub first_offset: i64,
    /// The offset of its ABORT marker.
    pub last_offset: i64,
}

/// Encodes the control batch of one marker (offset 0, leader epoch 0: the
/// append stamps both).
pub fn encode_marker(
    producer_id: i64,
    producer_epoch: i16,
    control: ControlType,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Vec<u8> {
    // the record: attributes, timestamp delta 0, offset delta 0, a 4-byte
    // key (version 0, type), a 6-byte value (version 0, coordinator epoch),
    // no headers; lengths and deltas as zig-zag varints
    let mut record = vec![0u8, 0, 0, 4 << 1];
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&control.code().to_be_bytes());
    record.push(6 << 1);
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&coordinator_epoch.to_be_bytes());
    record.push(0);
    let mut b = Vec::with_capacity(61 + 1 + record.len());
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    let batch_length = (49 + 1 + record.len()) as i32;
    b.extend_from_slice(&batch_length.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, below
    b.extend_from_slice(&MARKER_ATTRIBUTES.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&producer_epoch.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&1i32.to_be_bytes()); // records
    b.push((record.len() as u8) << 1);
    b.extend_from_slice(&record);
    let crc = batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The marker of a control batch (`bytes` is the whole batch): its type
/// and the coordinator epoch it names, or `None` if it is not a control
/// batch or its record does not parse. Control batches are never
/// compressed.
pub fn read_marker(h: &BatchHeader, bytes: &[u8]) -> Option<(ControlType, i32)> {
    if !h.is_control() || h.records_count < 1 {
        return None;
    }
    let mut pos = 61;
    varint(bytes, &mut pos)?; // record length
    pos += 1; // record attributes
    varint(bytes, &mut pos)?; // timestamp delta
    varint(bytes, &mut pos)?; // offset delta
    let key_len = usize::try_from(varint(bytes, &mut pos)?).ok()?;
    let key = bytes.get(pos..pos.checked_add(key_len)?)?;
    pos += key_len;
    let control = match key.get(2..4).map(|k| i16::from_be_bytes([k[0], k[1]]))? {
        0 => ControlType::Abort,
        1 => ControlType::Commit,
        _ => return None,
    };
    let value_len = usize::try_from(varint(bytes, &mut pos)?).ok()?;
    let value = bytes.get(pos..pos.checked_add(value_len)?)?;
    let epoch = value
        .get(2..6)
        .map(|v| i32::from_be_bytes([v[0], v[1], v[2], v[3]]))?;
    Some((control, epoch))
}

fn varint(b: &[u8], pos: &mut usize) -> Option<i64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    None
}

/// The aborted transactions of one log, by marker offset.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct AbortedIndex {
    by_marker: BTreeMap<i64, AbortedTxn>,
}

impl AbortedIndex {
    pub(crate) fn insert(&mut self, t: AbortedTxn) {
        self.by_marker.insert(t.last_offset, t);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_marker.len()
    }

    /// The aborted transactions a fetch of `[from, upto)` must name: those
    /// whose marker is at or after `from` and that began before `upto`,
    /// by first offset.
    pub(crate) fn overlapping(&self, from: i64, upto: i64) -> Vec<AbortedTxn> {
        let mut out: Vec<AbortedTxn> = self
            .by_marker
            .range(from..)
            .map(|(_, t)| *t)
            .filter(|t| t.first_offset < upto)
            .collect();
        out.sort_by_key(|t| (t.first_offset, t.producer_id));
        out
    }

    /// Entries whose marker lies in `[from, to)`.
    pub(crate) fn in_range(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.by_marker.range(from..to).map(|(_, t)| *t).collect()
    }

    /// Forgets entries whose marker is at or after `offset` (a truncation).
    pub(crate) fn truncate_from(&mut self, offset: i64) {
        self.by_marker.split_off(&offset);
    }

    /// Forgets entries whose marker is below `offset` (their segment went).
    pub(crate) fn remove_below(&mut self, offset: i64) {
        self.by_marker = self.by_marker.split_off(&offset);
    }

    /// Rewrites `{base:020}.txnindex` in `dir` with the entries whose
    /// marker lies in `[base, end)`, or removes it when there are none.
    pub(crate) fn persist_segment(
        &self,
        dir: &Path,
        base: i64,
        end: i64,
    ) -> Result<(), StorageError> {
        let entries = self.in_range(base, end);
        let path = files::offset_path(dir, base, TXN_INDEX_EXT);
        if entries.is_empty() {
            return files::remove_if_exists(&path);
        }
        let name = format!("{base:020}.{TXN_INDEX_EXT}");
        files::write_atomic(dir, &name, &encode_entries(&entries), true)
    }

    /// Loads `{base:020}.txnindex` of each segment base in `bases` (a
    /// damaged file is ignored with a warning: recovery's scan or the
    /// markers' replay brings back what it can).
    pub(crate) fn load(dir: &Path, bases: impl Iterator<Item = i64>) -> Result<Self, StorageError> {
        let mut index = AbortedIndex::default();
        for base in bases {
            let path = files::offset_path(dir, base, TXN_INDEX_EXT);
            let Some(bytes) = files::read_optional(&path)? else {
                continue;
            };
            match decode_entries(&bytes) {
                Some(entries) => entries.into_iter().for_each(|t| index.insert(t)),
                None => {
                    tracing::warn!(file = %path.display(), "ignoring a damaged aborted-transaction index")
                }
            }
        }
        Ok(index)
    }
}

/// The bytes of a `.txnindex` file holding `entries`.
pub fn encode_entries(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut b = Vec::with_capacity(entries.len() * ENTRY_LEN + 4);
    for t in entries {
        b.extend_from_slice(&t.producer_id.to_be_bytes());
        b.extend_from_slice(&t.first_offset.to_be_bytes());
        b.extend_from_slice(&t.last_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

/// The entries of a `.txnindex` file; `None` if it is damaged.
pub fn decode_entries(bytes: &[u8]) -> Option<Vec<AbortedTxn>> {
    let body_len = bytes.len().checked_sub(4)?;
    let (body, crc) = bytes.split_at(body_len);
    if body.len() % ENTRY_LEN != 0
        || crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?)
    {
        return None;
    }
    let field = |c: &[u8], i: usize| -> Option<i64> {
        Some(i64::from_be_bytes(
            c.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    body.chunks_exact(ENTRY_LEN)
        .map(|c| {
            Some(AbortedTxn {
                producer_id: field(c, 0)?,
                first_offset: field(c, 1)?,
                last_offset: field(c, 2)?,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "txn_tests.rs"]
mod tests;
