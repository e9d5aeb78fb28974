//! What every message has in common: the [`Message`] trait that frames a
//! body, the `message!` table entry that gives a body its operation code,
//! encoder and decoder side by side, and helpers several bodies share.

use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::{FrameHeader, HEADER_LEN};
use crate::wire::{DecodeError, Reader, WireWrite};

/// A message of the protocol: its operation code and body layout.
pub trait Message: Sized {
    /// The operation code in the frame header.
    const OP: u8;
    /// Appends the body (correlation id included) to `buf`.
    fn encode_body(&self, buf: &mut BytesMut);
    /// Decodes a whole body; trailing bytes are an error.
    fn decode_body(body: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = Self::decode_from(&mut r)?;
        r.finish()?;
        Ok(m)
    }
    fn decode_from(r: &mut Reader) -> Result<Self, DecodeError>;

    /// The whole frame: header and body.
    fn to_frame(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(64);
        buf.put_bytes(0, HEADER_LEN);
        self.encode_body(&mut buf);
        let len = u32::try_from(buf.len() - HEADER_LEN).unwrap_or(u32::MAX);
        buf[..HEADER_LEN].copy_from_slice(&FrameHeader { op: Self::OP, len }.encode());
        buf.freeze()
    }

    /// Appends the body to `w`; a body holding large buffers of its own
    /// (record batches) hands them over whole rather than copying them.
    fn encode_parts(&self, w: &mut FrameWriter) {
        self.encode_body(&mut w.buf);
    }

    /// The whole frame as buffers to write one after the other: the same
    /// bytes as [`Message::to_frame`], with large buffers of the message
    /// shared instead of copied into it.
    fn to_frame_parts(&self) -> FrameParts {
        let mut w = FrameWriter::default();
        w.buf.put_bytes(0, HEADER_LEN);
        self.encode_parts(&mut w);
        let total = w.parts.iter().map(Bytes::len).sum::<usize>() + w.buf.len();
        let len = u32::try_from(total.saturating_sub(HEADER_LEN)).unwrap_or(u32::MAX);
        let header = FrameHeader { op: Self::OP, len }.encode();
        let mut parts = w.parts;
        match parts.first_mut() {
            // The header is in the first part, already frozen: only that
            // part (the fields before the first shared buffer) is copied.
            Some(first) => {
                let mut head = BytesMut::from(&first[..]);
                head[..HEADER_LEN].copy_from_slice(&header);
                *first = head.freeze();
            }
            // Nothing shared: the header is still in the buffer.
            None => w.buf[..HEADER_LEN].copy_from_slice(&header),
        }
        if !w.buf.is_empty() {
            parts.push(w.buf.freeze());
        }
        FrameParts { parts, total }
    }
}

/// Below this size a shared buffer is copied into the frame: writing it
/// as a part of its own costs more than the copy.
const SHARE_AT: usize = 8 * 1024;

/// Where [`Message::encode_parts`] writes: bytes of its own, and buffers
/// of the message handed over whole.
#[derive(Debug, Default)]
pub struct FrameWriter {
    pub buf: BytesMut,
    parts: Vec<Bytes>,
}

impl FrameWriter {
    /// Appends a `u32` length and `blob`, as `put_blob` does, sharing
    /// `blob` when it is large.
    pub fn put_shared_blob(&mut self, blob: &Bytes) {
        if blob.len() < SHARE_AT {
            self.buf.put_blob(blob);
            return;
        }
        self.buf
            .put_u32(u32::try_from(blob.len()).unwrap_or(u32::MAX));
        self.parts.push(self.buf.split().freeze());
        self.parts.push(blob.clone());
    }
}

/// A frame as buffers that are written one after the other.
#[derive(Debug, Clone, Default)]
pub struct FrameParts {
    pub parts: Vec<Bytes>,
    /// Their bytes, header included.
    pub total: usize,
}

/// Decodes the correlation id at the start of any body, if there is one.
pub fn correlation_of(body: &[u8]) -> Option<u32> {
    body.get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
}

/// Implements [`Message`] for a body from its operation code, encoder and
/// decoder. Paths are spelled out so that a file of bodies imports only
/// what its own code names.
macro_rules! message {
    ($ty:ident, $op:expr, |$s:ident, $b:ident| $enc:block, |$r:ident| $dec:block,
     parts |$ps:ident, $w:ident| $penc:block) => {
        impl $crate::proto::Message for $ty {
            const OP: u8 = $op;
            fn encode_body(&self, $b: &mut ::bytes::BytesMut) {
                let $s = self;
                $enc
            }
            fn encode_parts(&self, $w: &mut $crate::proto::codec::FrameWriter) {
                let $ps = self;
                $penc
            }
            fn decode_from(
                $r: &mut $crate::wire::Reader,
            ) -> Result<Self, $crate::wire::DecodeError> {
                $dec
            }
        }
    };
    ($ty:ident, $op:expr, |$s:ident, $b:ident| $enc:block, |$r:ident| $dec:block) => {
        impl $crate::proto::Message for $ty {
            const OP: u8 = $op;
            fn encode_body(&self, $b: &mut ::bytes::BytesMut) {
                let $s = self;
                $enc
            }
            fn decode_from(
                $r: &mut $crate::wire::Reader,
            ) -> Result<Self, $crate::wire::DecodeError> {
                $dec
            }
        }
    };
}
pub(super) use message;

/// A list of node or partition ids, as metadata and group assignments
/// carry them.
pub(super) fn put_ids(b: &mut BytesMut, ids: &[u32]) {
    b.put_count(ids.len());
    for id in ids {
        b.put_u32(*id);
    }
}
