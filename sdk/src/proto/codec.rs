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
