//! Broker-side schema validation: a topic that turns it on accepts only
//! records whose value (or key) is in the schema registry's wire format,
//! magic byte 0 and then a 4-byte big-endian schema id, with an id that is
//! a live version of the topic's subject (`<topic>-value`, `<topic>-key`).
//!
//! The gateway reads the subject's ids from the registry once per batch and
//! hands them down as a [`SchemaRule`]. The record walk of `records`, the
//! one that counts and frames every record (and finds keyless ones for a
//! compacted topic), reads the first five bytes of each checked key or
//! value (`records::check_record`) and judges them here: a batch is decompressed once, whatever is
//! checked, and nothing of this runs for a topic without validation.
//!
//! Like keyless records, every failing record is named (KIP-467 record
//! errors) and the whole batch is refused.

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
pub(crate) enum Part {
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
pub(crate) fn judge(part: Part, ids: &SubjectIds, len: i64, head: &[u8]) -> Option<String> {
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

#[cfg(test)]
#[path = "schema_ids_tests.rs"]
mod tests;
