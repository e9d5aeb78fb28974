//! Reads the records of an uncompressed RecordBatch v2 straight into
//! [`ConsumedRecord`]s: each key, value and header value a slice of the
//! fetched bytes, with no intermediate record or header map per record
//! (what going through `kafka_protocol`'s decoder cost a consumer).
//! Compressed batches still go through `kafka_protocol`, which
//! decompresses them.
//!
//! Every length and count is checked against the bytes that must hold it:
//! a batch that lies about either is refused with [`Error::Protocol`], and
//! nothing is read past its end.

use bytes::{Buf, Bytes};

use super::ConsumedRecord;
use crate::error::Error;

/// Where the records of one batch come from and what they share.
pub(super) struct Batch<'a> {
    pub topic: &'a std::sync::Arc<str>,
    pub partition: u32,
    pub base_offset: i64,
    pub base_timestamp: i64,
    /// The broker's append time, for every record, on LogAppendTime topics.
    pub append_time: Option<i64>,
    pub count: usize,
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::Protocol(format!("undecodable record batch: {what}"))
}

/// A zigzag varint of at most `max_bytes` bytes (5 for 32 bits, 10 for 64).
fn varint(buf: &mut Bytes, max_bytes: u32) -> Result<i64, Error> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        if !buf.has_remaining() {
            return Err(bad("a varint runs past the end of the batch"));
        }
        let b = buf.get_u8();
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(bad("a varint is longer than its type allows"))
}

fn varint32(buf: &mut Bytes) -> Result<i32, Error> {
    let v = varint(buf, 5)?;
    i32::try_from(v).map_err(|_| bad(format!("{v} does not fit a 32-bit varint")))
}

/// A length-prefixed byte string (`-1`: null).
fn bytes_field(buf: &mut Bytes, what: &str) -> Result<Option<Bytes>, Error> {
    match varint32(buf)? {
        -1 => Ok(None),
        len if len < 0 => Err(bad(format!("{what} of negative length {len}"))),
        len => {
            let len = len as usize;
            if buf.remaining() < len {
                return Err(bad(format!(
                    "{what} of {len} bytes where {} remain",
                    buf.remaining()
                )));
            }
            Ok(Some(buf.split_to(len)))
        }
    }
}

/// Appends the batch's records at or after `from_offset` to `out`.
/// `body` holds the records, the batch header excluded.
pub(super) fn read(
    batch: &Batch<'_>,
    mut body: Bytes,
    from_offset: i64,
    out: &mut Vec<ConsumedRecord>,
) -> Result<(), Error> {
    out.reserve(batch.count);
    for _ in 0..batch.count {
        let len = varint32(&mut body)?;
        let len = usize::try_from(len).map_err(|_| bad(format!("a record of length {len}")))?;
        if body.remaining() < len {
            return Err(bad(format!(
                "a record of {len} bytes where {} remain",
                body.remaining()
            )));
        }
        let mut r = body.split_to(len);
        if !r.has_remaining() {
            return Err(bad("a record without attributes"));
        }
        let _attributes = r.get_i8();
        let timestamp_delta = varint(&mut r, 10)?;
        let offset_delta = varint32(&mut r)?;
        let key = bytes_field(&mut r, "a key")?;
        let value = bytes_field(&mut r, "a value")?;
        let header_count = varint32(&mut r)?;
        let header_count =
            usize::try_from(header_count).map_err(|_| bad(format!("{header_count} headers")))?;
        // each header takes at least two bytes (its two lengths)
        if header_count > r.remaining() / 2 {
            return Err(bad(format!(
                "{header_count} headers in {} bytes",
                r.remaining()
            )));
        }
        let mut headers = Vec::with_capacity(header_count);
        for _ in 0..header_count {
            let name = bytes_field(&mut r, "a header name")?
                .ok_or_else(|| bad("a header without a name"))?;
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| bad("a header name that is not UTF-8"))?;
            headers.push((name, bytes_field(&mut r, "a header value")?));
        }
        let offset = batch.base_offset.saturating_add(i64::from(offset_delta));
        if offset < from_offset {
            continue;
        }
        out.push(ConsumedRecord {
            topic: std::sync::Arc::clone(batch.topic),
            partition: batch.partition,
            offset,
            timestamp: batch
                .append_time
                .unwrap_or_else(|| batch.base_timestamp.saturating_add(timestamp_delta)),
            key,
            value,
            headers,
        });
    }
    Ok(())
}
