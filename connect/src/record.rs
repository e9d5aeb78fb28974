//! The records connectors see.

use bytes::Bytes;

/// A record a sink task is given: where it was read from, and what it
/// holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch (the record's create or append
    /// time).
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}
