//! Primitive encodings of the native protocol: big-endian integers,
//! length-prefixed strings and byte strings, counted arrays.
//!
//! Decoding never trusts a length or count: each is checked against the
//! bytes that remain before anything is allocated, so a hostile frame costs
//! at most its own size.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("the body ended inside {0}")]
    Truncated(&'static str),
    #[error("{0} is not valid UTF-8")]
    NotUtf8(&'static str),
    #[error("{what}: {count} entries cannot fit in the {remaining} bytes left")]
    Count {
        what: &'static str,
        count: u32,
        remaining: usize,
    },
    #[error("{0} bytes follow the end of the body")]
    Trailing(usize),
    #[error("invalid {what}: {value}")]
    Invalid { what: &'static str, value: i64 },
    #[error("operation {0:#04x} is not one this build knows")]
    UnknownOp(u8),
}

/// Appends native-protocol primitives to a buffer.
pub trait WireWrite {
    fn put_string(&mut self, s: &str);
    fn put_blob(&mut self, b: &[u8]);
    fn put_count(&mut self, n: usize);
}

impl WireWrite for BytesMut {
    /// `u16` length, then UTF-8 bytes; longer strings are cut at 65,535
    /// bytes on a character boundary (names are far shorter).
    fn put_string(&mut self, s: &str) {
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.put_u16(end as u16);
        self.put_slice(&s.as_bytes()[..end]);
    }

    /// `u32` length, then the bytes.
    fn put_blob(&mut self, b: &[u8]) {
        self.put_u32(u32::try_from(b.len()).unwrap_or(u32::MAX));
        self.put_slice(&b[..b.len().min(u32::MAX as usize)]);
    }

    /// `u32` count of the entries that follow.
    fn put_count(&mut self, n: usize) {
        self.put_u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
}

/// Reads native-protocol primitives from a body, refusing anything that
/// does not fit.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Ends decoding: every byte must have been read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated(what))
        } else {
            Ok(())
        }
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        self.need(1, what)?;
        Ok(self.buf.get_u8())
    }

    pub fn i8(&mut self, what: &'static str) -> Result<i8, DecodeError> {
        self.need(1, what)?;
        Ok(self.buf.get_i8())
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        self.need(2, what)?;
        Ok(self.buf.get_u16())
    }

    pub fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        self.need(2, what)?;
        Ok(self.buf.get_i16())
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.need(4, what)?;
        Ok(self.buf.get_u32())
    }

    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        self.need(4, what)?;
        Ok(self.buf.get_i32())
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        self.need(8, what)?;
        Ok(self.buf.get_u64())
    }

    pub fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        self.need(8, what)?;
        Ok(self.buf.get_i64())
    }

    pub fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let len = self.u16(what)? as usize;
        self.need(len, what)?;
        let raw = self.buf.split_to(len);
        String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::NotUtf8(what))
    }

    /// A byte string, shared with the body rather than copied.
    pub fn blob(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u32(what)? as usize;
        self.need(len, what)?;
        Ok(self.buf.split_to(len))
    }

    /// An entry count, checked against the bytes left: each entry takes at
    /// least `min_entry` bytes.
    pub fn count(&mut self, what: &'static str, min_entry: usize) -> Result<usize, DecodeError> {
        let count = self.u32(what)?;
        let remaining = self.buf.len();
        let fits = (count as usize)
            .checked_mul(min_entry.max(1))
            .is_some_and(|n| n <= remaining);
        if !fits {
            return Err(DecodeError::Count {
                what,
                count,
                remaining,
            });
        }
        Ok(count as usize)
    }

    /// `count` entries, each decoded by `f`.
    pub fn array<T>(
        &mut self,
        what: &'static str,
        min_entry: usize,
        mut f: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.count(what, min_entry)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(f(self)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_larger_than_the_body_is_refused_before_allocating() {
        let mut b = BytesMut::new();
        b.put_u32(u32::MAX);
        b.put_u32(7);
        let mut r = Reader::new(b.freeze());
        assert!(matches!(
            r.count("partitions", 4),
            Err(DecodeError::Count {
                count: u32::MAX,
                remaining: 4,
                ..
            })
        ));
    }

    #[test]
    fn strings_blobs_and_integers_round_trip() {
        let mut b = BytesMut::new();
        b.put_string("héllo");
        b.put_blob(b"\x00\x01\x02");
        b.put_i64(-2);
        let mut r = Reader::new(b.freeze());
        assert_eq!(r.string("s").as_deref(), Ok("héllo"));
        assert_eq!(r.blob("b").map(|b| b.to_vec()), Ok(vec![0, 1, 2]));
        assert_eq!(r.i64("i"), Ok(-2));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn a_string_cut_inside_its_bytes_is_truncated_not_read_past() {
        let mut b = BytesMut::new();
        b.put_u16(10);
        b.put_slice(b"abc");
        let mut r = Reader::new(b.freeze());
        assert_eq!(r.string("topic"), Err(DecodeError::Truncated("topic")));
    }
}
