//! Broker-side schema validation: a topic that turns it on accepts only
//! records whose value (or key) is in the schema registry's wire format,
//! magic byte 0 and then a 4-byte big-endian schema id, with an id that is
//! a live version of the topic's subject (`<topic>-value`, `<topic>-key`).
//!
//! The gateway reads the subject's ids from the registry once per batch and
//! hands them down as a [`SchemaRule`]. The record walk of `records`, the
//! one that counts and frames every record (and finds keyless ones for a
//! compacted topic), reads the first five bytes of each checked key or
//! value and judges them here: a batch is decompressed once, whatever is
//! checked, and nothing of this runs for a topic without validation.
//!
//! Like keyless records, every failing record is named (KIP-467 record
//! errors) and the whole batch is refused.

use std::io::BufRead;

use crate::records::{Refusal, Walk};

/// Length of the wire-format header: magic byte 0 and a 4-byte schema id.
pub const WIRE_HEADER_LEN: usize = 5;

/// The schema ids one part of a record (key or value) may carry: the live
/// versions of one subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectIds {
    subject: String,
    /// Sorted, without repeats.
    ids: Box<[i32]>,
}

impl SubjectIds {
    pub fn new(subject: impl Into<String>, ids: impl IntoIterator<Item = i32>) -> SubjectIds {
        let mut ids: Vec<i32> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        SubjectIds {
            subject: subject.into(),
            ids: ids.into_boxed_slice(),
        }
    }

    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Whether `id` is one of the subject's live versions.
    pub fn admits(&self, id: i32) -> bool {
        self.ids.binary_search(&id).is_ok()
    }
}

/// What the records of a batch must carry: the ids of the topic's key
/// subject, of its value subject, or both. `None` leaves that part alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaRule {
    pub key: Option<SubjectIds>,
    pub value: Option<SubjectIds>,
}

impl SchemaRule {
    /// Whether the rule checks nothing.
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.value.is_none()
    }
}

#[derive(Debug, Clone, Copy)]
enum Part {
    Key,
    Value,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::Value => "value",
        }
    }
}

/// What is wrong with one key or value, `len` bytes long (negative: null)
/// and starting with `head` (its first bytes, up to [`WIRE_HEADER_LEN`]).
fn judge(part: Part, ids: &SubjectIds, len: i64, head: &[u8]) -> Option<String> {
    let part = part.name();
    let subject = ids.subject();
    if len < 0 {
        return Some(format!(
            "{part} is null, but subject {subject} needs the schema registry's wire format (magic byte 0, then a 4-byte schema id)"
        ));
    }
    let Some((&magic, id)) = head.get(..WIRE_HEADER_LEN).and_then(|h| h.split_first()) else {
        return Some(format!(
            "{part} is {len} bytes, shorter than the {WIRE_HEADER_LEN}-byte header of the schema registry's wire format (magic byte 0, then a 4-byte schema id) subject {subject} needs"
        ));
    };
    if magic != 0 {
        return Some(format!(
            "{part} starts with byte {magic:#04x}, not the magic byte 0 of the schema registry's wire format subject {subject} needs"
        ));
    }
    let id = <[u8; 4]>::try_from(id).map(i32::from_be_bytes).ok()?;
    if ids.admits(id) {
        None
    } else {
        Some(format!(
            "{part} has schema id {id}, which is not a version of subject {subject}"
        ))
    }
}

/// Reads a key or value of `len` bytes (negative: null) whose length was
/// just read, keeping its first [`WIRE_HEADER_LEN`] bytes in `head`; `room`
/// is what is left of the record. `Err(None)`: it runs past the record.
fn read_field<B: BufRead>(
    w: &mut Walk<'_, B>,
    len: i64,
    room: u64,
    head: &mut [u8; WIRE_HEADER_LEN],
) -> Result<Result<usize, ()>, Refusal> {
    let Ok(len) = u64::try_from(len) else {
        return Ok(Ok(0));
    };
    if len > room {
        return Ok(Err(()));
    }
    let mut kept = 0;
    while kept < head.len() && (kept as u64) < len {
        let Some(b) = w.byte()? else {
            return Ok(Err(()));
        };
        head[kept] = b;
        kept += 1;
    }
    let rest = len - kept as u64;
    if w.skip(rest)? < rest {
        return Ok(Err(()));
    }
    Ok(Ok(kept))
}

/// Checks record `index` against `rule`. The walk has read the record's
/// fields up to its key length (`key_len`, negative for a null key); `room`
/// is what is left of the record's body after them. Reads the key and, when
/// values are checked, the value's length and first bytes; the walk skips
/// the rest. Answers what is wrong with the record (`Ok(Some)`), or a
/// refusal of the batch when the record's fields do not fit its length.
pub(crate) fn check_record<B: BufRead>(
    w: &mut Walk<'_, B>,
    rule: &SchemaRule,
    index: i64,
    key_len: i64,
    room: u64,
) -> Result<Option<String>, Refusal> {
    let overrun = |what: &str| Refusal::Malformed {
        index,
        reason: format!("has a {what} running past its length"),
    };
    if rule.is_empty() {
        return Ok(None);
    }
    let start = w.consumed;
    let mut head = [0u8; WIRE_HEADER_LEN];
    let mut problems: Vec<String> = Vec::new();
    let kept = read_field(w, key_len, room, &mut head)?.map_err(|()| overrun("key"))?;
    if let Some(ids) = &rule.key {
        problems.extend(judge(Part::Key, ids, key_len, &head[..kept]));
    }
    if let Some(ids) = &rule.value {
        let cut = || Refusal::Malformed {
            index,
            reason: "runs past the end of the batch".into(),
        };
        let value_len = w.varint(5)?.ok_or_else(cut)?;
        let room = room.saturating_sub(w.consumed - start);
        let mut head = [0u8; WIRE_HEADER_LEN];
        let kept = read_field(w, value_len, room, &mut head)?.map_err(|()| overrun("value"))?;
        problems.extend(judge(Part::Value, ids, value_len, &head[..kept]));
    }
    if problems.is_empty() {
        Ok(None)
    } else {
        Ok(Some(format!("record {index}: {}", problems.join("; "))))
    }
}

#[cfg(test)]
#[path = "schema_ids_tests.rs"]
mod tests;
