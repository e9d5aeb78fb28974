//! The streaming readers the record walk of `records` decodes batches
//! through where the codec's own decoder is not enough: snappy in xerial
//! framing, bounded by a budget, and the LZ4 frame decoder made to notice a
//! frame cut short. A block past the uncompressed size cap is reported as
//! an [`OverCapMarker`] error.

use std::io::{self, Read};

/// Marks a decoder error that is really the cap being reached.
#[derive(Debug)]
pub(crate) struct OverCapMarker;

impl std::fmt::Display for OverCapMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a block would pass the uncompressed size cap")
    }
}

impl std::error::Error for OverCapMarker {}

pub(crate) fn is_over_cap(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<OverCapMarker>())
}

/// Snappy in xerial framing (what the Java client writes): after the
/// header, blocks of `u32` big-endian compressed length and a raw snappy
/// block. One block is decoded at a time, and only when its declared
/// uncompressed length fits what is left of the budget.
pub(crate) struct Xerial<'a> {
    pub(crate) input: &'a [u8],
    pub(crate) block: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) budget: u64,
}

impl Read for Xerial<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidData, msg);
        while self.pos == self.block.len() {
            if self.input.is_empty() {
                return Ok(0);
            }
            let Some((len, rest)) = self.input.split_first_chunk::<4>() else {
                return Err(invalid(format!(
                    "{} bytes where a xerial block length should be",
                    self.input.len()
                )));
            };
            let len = u32::from_be_bytes(*len) as usize;
            let Some(compressed) = rest.get(..len) else {
                return Err(invalid(format!(
                    "a xerial block of {len} bytes runs past the end ({} left)",
                    rest.len()
                )));
            };
            self.input = &rest[len..];
            let plain_len = snap::raw::decompress_len(compressed)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if plain_len as u64 > self.budget {
                return Err(io::Error::other(OverCapMarker));
            }
            self.budget -= plain_len as u64;
            self.block.resize(plain_len, 0);
            snap::raw::Decoder::new()
                .decompress(compressed, &mut self.block)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            self.pos = 0;
        }
        let n = (self.block.len() - self.pos).min(out.len());
        out[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The LZ4 frame decoder, which reports a frame cut short as a plain end of
/// stream; this checks the frame really ended once the decoder runs dry.
pub(crate) struct Lz4Frame<'a>(pub(crate) Option<lz4::Decoder<&'a [u8]>>);

impl Read for Lz4Frame<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let Some(decoder) = self.0.as_mut() else {
            return Ok(0);
        };
        let n = decoder.read(out)?;
        if n == 0 && !out.is_empty() {
            if let Some(decoder) = self.0.take() {
                let (_, ended) = decoder.finish();
                ended.map_err(|_| {
                    io::Error::new(io::ErrorKind::UnexpectedEof, "the LZ4 frame ends early")
                })?;
            }
        }
        Ok(n)
    }
}
