//! Confluent's wire format, as the schema registry's serializers frame a
//! key or value: a magic byte 0, the schema id as 4 bytes big-endian, for
//! Protobuf the path to the message type in the file (a count then the
//! indexes, zigzag varints; a single 0 byte standing for `[0]`, the first
//! message), then the serialized payload.

use super::error::ConvertError;

/// The first byte of every framed key or value.
pub const MAGIC: u8 = 0;

/// The most message indexes read (nesting deeper than this is refused).
const MAX_INDEXES: usize = 100;

/// Splits framed bytes into the schema id and what follows it.
pub fn split(bytes: &[u8]) -> Result<(i32, &[u8]), ConvertError> {
    match bytes {
        [] => Err(ConvertError::not_framed("it is empty")),
        [magic, ..] if *magic != MAGIC => Err(ConvertError::not_framed(format!(
            "its first byte is {magic}, not the magic byte 0"
        ))),
        [_, a, b, c, d, rest @ ..] => Ok((i32::from_be_bytes([*a, *b, *c, *d]), rest)),
        _ => Err(ConvertError::not_framed(format!(
            "it is {} bytes long, shorter than the 5 bytes of the magic byte and schema id",
            bytes.len()
        ))),
    }
}

/// Frames `payload` written with schema `id`.
pub fn frame(id: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + payload.len());
    out.push(MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Reads a Protobuf payload's message indexes: the path to its message
/// type, and the payload after them.
pub fn message_indexes(bytes: &[u8]) -> Result<(Vec<i32>, &[u8]), ConvertError> {
    let (count, mut rest) = zigzag(bytes)?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|c| *c <= MAX_INDEXES)
        .ok_or_else(|| {
            ConvertError::not_framed(format!(
                "its message-index count {count} is not between 0 and {MAX_INDEXES}"
            ))
        })?;
    let mut indexes = Vec::with_capacity(count);
    for _ in 0..count {
        let (index, after) = zigzag(rest)?;
        let index = i32::try_from(index)
            .ok()
            .filter(|i| *i >= 0)
            .ok_or_else(|| {
                ConvertError::not_framed(format!("its message index {index} is out of range"))
            })?;
        indexes.push(index);
        rest = after;
    }
    Ok((indexes, rest))
}

/// The message indexes as the Protobuf serializers write them (`[0]` as
/// the single byte 0).
pub fn encode_message_indexes(indexes: &[i32]) -> Vec<u8> {
    let mut out = Vec::new();
    if indexes == [0] {
        out.push(0);
        return out;
    }
    put_zigzag(&mut out, i64::try_from(indexes.len()).unwrap_or(i64::MAX));
    for i in indexes {
        put_zigzag(&mut out, i64::from(*i));
    }
    out
}

/// One zigzag-encoded varint (at most 10 bytes) and the bytes after it.
fn zigzag(bytes: &[u8]) -> Result<(i64, &[u8]), ConvertError> {
    let mut value: u64 = 0;
    for (i, b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let decoded = ((value >> 1) as i64) ^ -((value & 1) as i64);
            return Ok((decoded, &bytes[i + 1..]));
        }
    }
    Err(ConvertError::not_framed(
        "its message indexes end before their last varint does",
    ))
}

fn put_zigzag(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
