//! The records inside a batch: count them and check their framing against
//! the batch header, decompressing compressed batches on the fly.
//!
//! Why: the log assigns offsets from the header's `recordsCount`. A batch
//! that declares more records than it holds makes the log skip offsets,
//! and a compressed batch declaring `i32::MAX` records would force a
//! segment roll on every append (each roll keeps files and mappings open
//! for the segment's lifetime). Kafka decompresses and counts the records
//! of every batch before accepting it; so does this module.
//!
//! How one batch is walked, step by step:
//! 1. The bytes after the 61-byte header are read through the codec's
//!    streaming decoder (gzip members, snappy in xerial blocks or one raw
//!    block, the LZ4 frame format, zstd frames), or directly when the batch
//!    is uncompressed. Decoded bytes are pulled in reads of at most
//!    [`READ_CHUNK`] bytes and never more than `cap + 1` in total, so the
//!    whole uncompressed batch is never held in memory. The one exception
//!    is raw (unframed) snappy, which has no streaming form: its
//!    uncompressed length is declared up front and checked against the cap
//!    before anything is allocated.
//! 2. Each record is a length varint and a body of that many bytes. The
//!    walk reads the length, refuses one shorter than the smallest record
//!    body or one that would carry the batch past the cap, reads the
//!    body's first three fields (attributes, timestamp delta, offset delta),
//!    checks that the offset delta is the record's index (Kafka refuses
//!    non-incremental inner offsets too), and skips the rest of the body
//!    without looking at it. For a compacted topic it also reads the key's
//!    length: a batch with records without a key is refused once the walk
//!    is done, naming each of them (Kafka's INVALID_RECORD with its record
//!    errors: compaction keeps the latest record per key).
//! 3. It stops with a refusal as soon as a record beyond the declared count
//!    begins, a record does not parse or runs past the end, the decoded
//!    bytes pass the cap, or the codec stream does not decode.
//! 4. At the end of the stream the number of records must equal the
//!    declared count.
//!
//! The cap (`LogConfig::max_uncompressed_batch_bytes`) exists because of
//! compression bombs: a gigabyte of zeros gzips to about a megabyte, which
//! passes `max.message.bytes`, and decoding it would cost seconds of a
//! shard's CPU per request. No legitimate producer batch comes near the
//! default of 64 times the batch size limit.

use std::io::{self, BufRead, Read};

use crate::codec_readers::{is_over_cap, Lz4Frame, Xerial};
use crate::schema_ids;

/// Compression codec named in a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Largest read from a decoder; also the buffer each compressed walk uses.
pub(crate) const READ_CHUNK: usize = 32 << 10;

/// Smallest record body: attributes, timestamp delta, offset delta, key
/// length, value length and header count, one byte each.
const MIN_RECORD_BODY: i64 = 6;

/// The xerial snappy stream header starts with these 8 bytes; the whole
/// header is 16 (magic, version, compatible version).
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// zstd windows up to 2^27 bytes (zstd's own default limit, which Kafka's
/// zstd library uses too) are accepted; the window is allocated by the
/// decoder but only touched as far as output is produced, and output is
/// bounded by the cap.
const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// Why the records of a batch were refused.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// A record beyond the declared count began.
    TooMany { declared: i32 },
    /// The records ended before the declared count.
    TooFew { found: i64, declared: i32 },
    /// Record `index` does not parse.
    Malformed { index: i64, reason: String },
    /// Records without a key (their indexes), and the topic is compacted.
    Keyless { indexes: Vec<i64> },
    /// Records whose key or value does not carry a schema id of the
    /// topic's subject (see `schema_ids`): their indexes, and why.
    Schema { records: Vec<(i64, String)> },
    /// The uncompressed records pass `cap` bytes.
    OverCap { cap: u64 },
    /// The codec's stream does not decode.
    Codec {
        codec: Compression,
        error: io::Error,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooMany { declared } => {
                write!(
                    f,
                    "the batch holds more records than the {declared} it declares"
                )
            }
            Refusal::TooFew { found, declared } => {
                write!(f, "the batch holds {found} records but declares {declared}")
            }
            Refusal::Malformed { index, reason } => write!(f, "record {index} {reason}"),
            Refusal::Keyless { indexes } => write!(
                f,
                "records {indexes:?} have no key; a compacted topic accepts only records with keys"
            ),
            Refusal::Schema { records } => match records.first() {
                Some((_, why)) if records.len() > 1 => write!(
                    f,
                    "{} records fail the topic's schema validation, the first: {why}",
                    records.len()
                ),
                Some((_, why)) => write!(f, "{why}"),
                None => write!(f, "records fail the topic's schema validation"),
            },
            Refusal::OverCap { cap } => write!(
                f,
                "the records decompress to more than {cap} bytes (max.uncompressed.batch.bytes)"
            ),
            Refusal::Codec { codec, error } => {
                write!(f, "the {codec:?} records do not decompress: {error}")
            }
        }
    }
}

/// Reads a zigzag varint of at most `max_bytes` bytes.
pub(crate) fn read_varint(b: &[u8], pos: &mut usize, max_bytes: usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let byte = *b.get(*pos)?;
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// The records of a batch, decompressed whole (at most `cap` bytes): what
/// compaction filters. Producer input is never decoded this way (see
/// [`check_keyed`], which streams).
pub(crate) fn decode(codec: Compression, records: &[u8], cap: u64) -> Result<Vec<u8>, Refusal> {
    fn read_all(codec: Compression, r: impl Read, cap: u64) -> Result<Vec<u8>, Refusal> {
        let mut out = Vec::new();
        let mut limited = r.take(cap.saturating_add(1));
        limited.read_to_end(&mut out).map_err(|error| {
            if is_over_cap(&error) {
                Refusal::OverCap { cap }
            } else {
                Refusal::Codec { codec, error }
            }
        })?;
        if out.len() as u64 > cap {
            return Err(Refusal::OverCap { cap });
        }
        Ok(out)
    }
    let codec_error = |error| Refusal::Codec { codec, error };
    match codec {
        Compression::None => Ok(records.to_vec()),
        Compression::Gzip => read_all(codec, flate2::read::MultiGzDecoder::new(records), cap),
        Compression::Snappy if is_xerial(records) => read_all(
            codec,
            Xerial {
                input: &records[XERIAL_HEADER_LEN..],
                block: Vec::new(),
                pos: 0,
                budget: cap.saturating_add(1),
            },
            cap,
        ),
        Compression::Snappy => {
            let raw_error =
                |e: snap::Error| codec_error(io::Error::new(io::ErrorKind::InvalidData, e));
            let len = snap::raw::decompress_len(records).map_err(raw_error)?;
            if len as u64 > cap {
                return Err(Refusal::OverCap { cap });
            }
            snap::raw::Decoder::new()
                .decompress_vec(records)
                .map_err(raw_error)
        }
        Compression::Lz4 => {
            let decoder = lz4::Decoder::new(records).map_err(codec_error)?;
            read_all(codec, Lz4Frame(Some(decoder)), cap)
        }
        Compression::Zstd => {
            let mut decoder =
                zstd::stream::read::Decoder::with_buffer(records).map_err(codec_error)?;
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(codec_error)?;
            read_all(codec, decoder, cap)
        }
    }
}

/// Whether snappy-compressed records use the xerial framing (the Java
/// client's) rather than one raw block (librdkafka's).
pub(crate) fn is_xerial(records: &[u8]) -> bool {
    records.len() >= XERIAL_HEADER_LEN && records.starts_with(XERIAL_MAGIC)
}

/// Size of the blocks compaction writes xerial snappy in (the Java
/// client's block size).
const XERIAL_BLOCK: usize = 32 << 10;

/// Compresses decoded records with `codec` in the form Kafka's clients
/// read: gzip, snappy (xerial framing when `xerial`, else one raw block),
/// the LZ4 frame format with independent blocks and no content checksum
/// (what the Java client writes), zstd.
pub(crate) fn encode(codec: Compression, plain: &[u8], xerial: bool) -> io::Result<Vec<u8>> {
    use std::io::Write;
    match codec {
        Compression::None => Ok(plain.to_vec()),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(plain)?;
            e.finish()
        }
        Compression::Snappy if xerial => {
            let mut out = Vec::with_capacity(plain.len() / 2 + XERIAL_HEADER_LEN);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes()); // version
            out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
            let mut enc = snap::raw::Encoder::new();
            for block in plain.chunks(XERIAL_BLOCK) {
                let c = enc.compress_vec(block).map_err(io::Error::other)?;
                let len = u32::try_from(c.len()).map_err(io::Error::other)?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&c);
            }
            Ok(out)
        }
        Compression::Snappy => snap::raw::Encoder::new()
            .compress_vec(plain)
            .map_err(io::Error::other),
        Compression::Lz4 => {
            let mut e = lz4::EncoderBuilder::new()
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(Vec::new())?;
            e.write_all(plain)?;
            let (out, result) = e.finish();
            result.map(|()| out)
        }
        Compression::Zstd => zstd::encode_all(plain, 3),
    }
}

/// One record of decoded records.
#[derive(Debug)]
pub(crate) struct RecordRef<'a> {
    /// The record's bytes, its length prefix included.
    pub(crate) raw: &'a [u8],
    pub(crate) offset_delta: i64,
    /// `None` for a null key.
    pub(crate) key: Option<&'a [u8]>,
    /// False for a null value (a tombstone).
    pub(crate) has_value: bool,
}

/// Splits decoded records into records (key and value located, headers
/// skipped). Records read back from the log were checked when appended; a
/// malformed one is still an error here, never a panic.
pub(crate) fn split(plain: &[u8]) -> Result<Vec<RecordRef<'_>>, String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < plain.len() {
        let start = pos;
        let index = out.len();
        let bad = |what: &str| format!("record {index}: {what}");
        let len = read_varint(plain, &mut pos, 5).ok_or_else(|| bad("bad length"))?;
        let body = usize::try_from(len).map_err(|_| bad("negative length"))?;
        let end = pos
            .checked_add(body)
            .filter(|e| *e <= plain.len())
            .ok_or_else(|| bad("runs past the end"))?;
        let rec = &plain[..end];
        pos += 1; // attributes
        read_varint(rec, &mut pos, 10).ok_or_else(|| bad("bad timestamp delta"))?;
        let offset_delta = read_varint(rec, &mut pos, 5).ok_or_else(|| bad("bad offset delta"))?;
        let key_len = read_varint(rec, &mut pos, 5).ok_or_else(|| bad("bad key length"))?;
        let key = if key_len < 0 {
            None
        } else {
            let k_end = pos
                .checked_add(key_len as usize)
                .filter(|e| *e <= end)
                .ok_or_else(|| bad("key runs past the record"))?;
            let k = &plain[pos..k_end];
            pos = k_end;
            Some(k)
        };
        let value_len = read_varint(rec, &mut pos, 5).ok_or_else(|| bad("bad value length"))?;
        if pos > end {
            return Err(bad("fields run past the record"));
        }
        out.push(RecordRef {
            raw: &plain[start..end],
            offset_delta,
            key,
            has_value: value_len >= 0,
        });
        pos = end;
    }
    Ok(out)
}

/// Checks that `records` (a batch's bytes after its header) hold exactly
/// `declared` well-framed records once decoded with `codec`, decoding at
/// most `cap` bytes.
#[cfg(test)]
pub(crate) fn check(
    codec: Compression,
    records: &[u8],
    declared: i32,
    cap: u64,
) -> Result<(), Refusal> {
    check_keyed(
        codec,
        records,
        declared,
        cap,
        Rules {
            keys: false,
            sparse_up_to: None,
            schemas: None,
        },
    )
}

/// What [`check_keyed`] demands of the records besides their framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules<'a> {
    /// Refuse records without a key (a producer's batch for a compacted topic).
    pub(crate) keys: bool,
    /// `None`: offset deltas count up from 0 (a producer's batch). `Some(last)`:
    /// they only increase and stay at or below `last`, the batch's last offset
    /// delta (a batch compaction removed records from, replicated).
    pub(crate) sparse_up_to: Option<i32>,
    /// Keys and values must carry schema ids of the topic's subjects
    /// (broker-side schema validation, see `schema_ids`).
    pub(crate) schemas: Option<&'a schema_ids::SchemaRule>,
}

/// [`check`], with `rules` for keys and offset deltas.
pub(crate) fn check_keyed(
    codec: Compression,
    records: &[u8],
    declared: i32,
    cap: u64,
    rules: Rules<'_>,
) -> Result<(), Refusal> {
    match codec {
        Compression::None => walk(&mut { records }, declared, u64::MAX, rules),
        Compression::Gzip => walk_stream(
            codec,
            flate2::read::MultiGzDecoder::new(records),
            declared,
            cap,
            rules,
        ),
        Compression::Snappy => check_snappy(records, declared, cap, rules),
        Compression::Lz4 => {
            let decoder =
                lz4::Decoder::new(records).map_err(|error| Refusal::Codec { codec, error })?;
            walk_stream(codec, Lz4Frame(Some(decoder)), declared, cap, rules)
        }
        Compression::Zstd => {
            let codec_error = |error| Refusal::Codec { codec, error };
            let mut decoder =
                zstd::stream::read::Decoder::with_buffer(records).map_err(codec_error)?;
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(codec_error)?;
            walk_stream(codec, decoder, declared, cap, rules)
        }
    }
}

fn check_snappy(records: &[u8], declared: i32, cap: u64, rules: Rules<'_>) -> Result<(), Refusal> {
    let codec = Compression::Snappy;
    if records.len() >= XERIAL_HEADER_LEN && records.starts_with(XERIAL_MAGIC) {
        let blocks = Xerial {
            input: &records[XERIAL_HEADER_LEN..],
            block: Vec::new(),
            pos: 0,
            budget: cap.saturating_add(1),
        };
        return walk_stream(codec, blocks, declared, cap, rules);
    }
    // Raw snappy: one block whose uncompressed length comes first.
    let codec_error = |e: snap::Error| Refusal::Codec {
        codec,
        error: io::Error::new(io::ErrorKind::InvalidData, e),
    };
    let len = snap::raw::decompress_len(records).map_err(codec_error)?;
    if len as u64 > cap {
        return Err(Refusal::OverCap { cap });
    }
    let plain = snap::raw::Decoder::new()
        .decompress_vec(records)
        .map_err(codec_error)?;
    walk(&mut plain.as_slice(), declared, cap, rules)
}

/// Walks decoded records pulled from `decoder`, at most `cap + 1` bytes.
fn walk_stream(
    codec: Compression,
    decoder: impl Read,
    declared: i32,
    cap: u64,
    rules: Rules<'_>,
) -> Result<(), Refusal> {
    let mut src = Capped {
        inner: decoder,
        buf: vec![0u8; READ_CHUNK].into_boxed_slice(),
        pos: 0,
        len: 0,
        pulled: 0,
        limit: cap.saturating_add(1),
    };
    match walk(&mut src, declared, cap, rules) {
        // The limit cuts the stream short; what looks like a truncated
        // record there is really the cap.
        Err(Refusal::Malformed { .. } | Refusal::TooFew { .. }) if src.pulled > cap => {
            Err(Refusal::OverCap { cap })
        }
        Err(Refusal::Codec { error, .. }) if is_over_cap(&error) => Err(Refusal::OverCap { cap }),
        Err(Refusal::Codec { error, .. }) => Err(Refusal::Codec { codec, error }),
        other => other,
    }
}

/// The record walk of steps 2 to 4 (see the module docs).
fn walk<B: BufRead>(src: &mut B, declared: i32, cap: u64, rules: Rules<'_>) -> Result<(), Refusal> {
    let mut w = Walk { src, consumed: 0 };
    let mut index: i64 = 0;
    let mut last_delta: i64 = -1;
    let mut keyless = Vec::new();
    let mut off_schema = Vec::new();
    while !w.at_end()? {
        if index >= i64::from(declared) {
            return Err(Refusal::TooMany { declared });
        }
        let malformed = |reason: String| Refusal::Malformed { index, reason };
        let len = w
            .varint(5)?
            .ok_or_else(|| malformed("has a cut-off or over-long length".into()))?;
        if !(MIN_RECORD_BODY..=i64::from(i32::MAX)).contains(&len) {
            return Err(malformed(format!("has length {len}")));
        }
        let len = len as u64;
        if w.consumed.saturating_add(len) > cap {
            return Err(Refusal::OverCap { cap });
        }
        let body_start = w.consumed;
        let cut = || malformed("runs past the end of the batch".into());
        w.byte()?.ok_or_else(cut)?; // attributes
        w.varint(10)?.ok_or_else(cut)?; // timestamp delta
        let delta = w.varint(5)?.ok_or_else(cut)?;
        if rules.keys || rules.schemas.is_some() {
            // the key's length; -1 is a null key
            let key_len = w.varint(5)?.ok_or_else(cut)?;
            if rules.keys && key_len < 0 {
                keyless.push(index);
            }
            if let Some(schemas) = rules.schemas {
                let room = len.saturating_sub(w.consumed - body_start);
                if let Some(why) = check_record(&mut w, schemas, index, key_len, room)? {
                    off_schema.push((index, why));
                }
            }
        }
        let used = w.consumed - body_start;
        if used > len {
            return Err(malformed(format!(
                "has fields running past its length of {len} bytes"
            )));
        }
        match rules.sparse_up_to {
            None if delta != index => {
                return Err(malformed(format!(
                    "has offset delta {delta}; records must count up from 0"
                )));
            }
            Some(last) if delta <= last_delta || delta > i64::from(last) => {
                return Err(malformed(format!(
                    "has offset delta {delta} after {last_delta}; deltas must increase up to the batch's last offset delta {last}"
                )));
            }
            _ => {}
        }
        last_delta = delta;
        if w.skip(len - used)? < len - used {
            return Err(cut());
        }
        index += 1;
    }
    if index != i64::from(declared) {
        return Err(Refusal::TooFew {
            found: index,
            declared,
        });
    }
    // every one of them, as Kafka names them all (KIP-467)
    if !keyless.is_empty() {
        return Err(Refusal::Keyless { indexes: keyless });
    }
    if !off_schema.is_empty() {
        return Err(Refusal::Schema {
            records: off_schema,
        });
    }
    Ok(())
}

/// Reads a key or value of `len` bytes (negative: null) whose length was
/// just read, keeping its first `WIRE_HEADER_LEN` bytes in `head`; `room`
/// is what is left of the record. `Err(None)`: it runs past the record.
fn read_field<B: BufRead>(
    w: &mut Walk<'_, B>,
    len: i64,
    room: u64,
    head: &mut [u8; schema_ids::WIRE_HEADER_LEN],
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

/// Checks record `index` against `rule` (broker-side schema validation,
/// [`crate::schema_ids`]). The walk has read the record's
/// fields up to its key length (`key_len`, negative for a null key); `room`
/// is what is left of the record's body after them. Reads the key and, when
/// values are checked, the value's length and first bytes; the walk skips
/// the rest. Answers what is wrong with the record (`Ok(Some)`), or a
/// refusal of the batch when the record's fields do not fit its length.
fn check_record<B: BufRead>(
    w: &mut Walk<'_, B>,
    rule: &schema_ids::SchemaRule,
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
    let mut head = [0u8; schema_ids::WIRE_HEADER_LEN];
    let mut problems: Vec<String> = Vec::new();
    let kept = read_field(w, key_len, room, &mut head)?.map_err(|()| overrun("key"))?;
    if let Some(ids) = &rule.key {
        problems.extend(schema_ids::judge(
            schema_ids::Part::Key,
            ids,
            key_len,
            &head[..kept],
        ));
    }
    if let Some(ids) = &rule.value {
        let cut = || Refusal::Malformed {
            index,
            reason: "runs past the end of the batch".into(),
        };
        let value_len = w.varint(5)?.ok_or_else(cut)?;
        let room = room.saturating_sub(w.consumed - start);
        let mut head = [0u8; schema_ids::WIRE_HEADER_LEN];
        let kept = read_field(w, value_len, room, &mut head)?.map_err(|()| overrun("value"))?;
        problems.extend(schema_ids::judge(
            schema_ids::Part::Value,
            ids,
            value_len,
            &head[..kept],
        ));
    }
    if problems.is_empty() {
        Ok(None)
    } else {
        Ok(Some(format!("record {index}: {}", problems.join("; "))))
    }
}

/// A cursor over decoded bytes that counts what it consumed.
pub(crate) struct Walk<'a, B> {
    src: &'a mut B,
    pub(crate) consumed: u64,
}

impl<B: BufRead> Walk<'_, B> {
    fn fill(&mut self) -> Result<&[u8], Refusal> {
        self.src.fill_buf().map_err(|error| Refusal::Codec {
            codec: Compression::None,
            error,
        })
    }

    fn at_end(&mut self) -> Result<bool, Refusal> {
        Ok(self.fill()?.is_empty())
    }

    pub(crate) fn byte(&mut self) -> Result<Option<u8>, Refusal> {
        let Some(&b) = self.fill()?.first() else {
            return Ok(None);
        };
        self.src.consume(1);
        self.consumed += 1;
        Ok(Some(b))
    }

    /// A zigzag varint of at most `max_bytes` bytes; `None` if the bytes
    /// end first or it is longer.
    pub(crate) fn varint(&mut self, max_bytes: usize) -> Result<Option<i64>, Refusal> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let Some(b) = self.byte()? else {
                return Ok(None);
            };
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(Some((raw >> 1) as i64 ^ -((raw & 1) as i64)));
            }
        }
        Ok(None)
    }

    /// Skips up to `n` bytes; returns how many there were.
    pub(crate) fn skip(&mut self, n: u64) -> Result<u64, Refusal> {
        let mut left = n;
        while left > 0 {
            let have = self.fill()?.len() as u64;
            if have == 0 {
                break;
            }
            let step = have.min(left);
            self.src.consume(step as usize);
            self.consumed += step;
            left -= step;
        }
        Ok(n - left)
    }
}

/// A buffered reader over a decoder that pulls at most `limit` bytes.
struct Capped<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    pulled: u64,
    limit: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let have = self.fill_buf()?;
            let n = have.len().min(out.len());
            out[..n].copy_from_slice(&have[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Capped<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.len {
            let room = self.limit.saturating_sub(self.pulled);
            let want = usize::try_from(room).map_or(self.buf.len(), |r| r.min(self.buf.len()));
            let n = loop {
                if want == 0 {
                    break 0;
                }
                match self.inner.read(&mut self.buf[..want]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            self.pos = 0;
            self.len = n;
            self.pulled += n as u64;
        }
        Ok(&self.buf[self.pos..self.len])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.len);
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
