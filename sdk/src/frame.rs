//! Framing for the native protocol.
//!
//! Every frame starts with a fixed header so a reader learns the body length
//! before it allocates, and can refuse oversized frames without reading them.

use bytes::{BufMut, BytesMut};

/// First byte of every native frame.
pub const MAGIC: u8 = 0xAE;
/// Protocol version carried in the second byte.
pub const VERSION: u8 = 0x01;
/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 7;

/// Why a frame header was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame header needs {HEADER_LEN} bytes, got {0}")]
    Short(usize),
    #[error("frame starts with byte {0:#04x}, not the AeroStream magic {MAGIC:#04x}")]
    BadMagic(u8),
    #[error("frame uses protocol version {0}, this build speaks version {VERSION}")]
    UnsupportedVersion(u8),
    #[error("frame body of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: u32, max: u32 },
}

/// The fixed header of a native frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Operation code; its meaning is defined by the operation catalogue.
    pub op: u8,
    /// Length of the body that follows the header.
    pub len: u32,
}

impl FrameHeader {
    /// Encodes the header into its 7-byte wire form.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0] = MAGIC;
        out[1] = VERSION;
        out[2] = self.op;
        out[3..7].copy_from_slice(&self.len.to_be_bytes());
        out
    }

    /// Appends the header to `buf`.
    pub fn write_to(&self, buf: &mut BytesMut) {
        buf.put_slice(&self.encode());
    }

    /// Decodes a header from the first [`HEADER_LEN`] bytes of `buf`,
    /// refusing bodies longer than `max_body` before anything is allocated.
    pub fn decode(buf: &[u8], max_body: u32) -> Result<FrameHeader, FrameError> {
        let Some(head) = buf.get(..HEADER_LEN) else {
            return Err(FrameError::Short(buf.len()));
        };
        if head[0] != MAGIC {
            return Err(FrameError::BadMagic(head[0]));
        }
        if head[1] != VERSION {
            return Err(FrameError::UnsupportedVersion(head[1]));
        }
        let len = u32::from_be_bytes([head[3], head[4], head[5], head[6]]);
        if len > max_body {
            return Err(FrameError::TooLarge { len, max: max_body });
        }
        Ok(FrameHeader { op: head[2], len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trips_through_its_wire_form() {
        let h = FrameHeader {
            op: 17,
            len: 0x0102_0304,
        };
        let wire = h.encode();
        assert_eq!(wire, [0xAE, 0x01, 17, 0x01, 0x02, 0x03, 0x04]);
        assert_eq!(FrameHeader::decode(&wire, u32::MAX), Ok(h));
    }

    #[test]
    fn oversized_body_is_refused_before_reading_it() {
        let wire = FrameHeader { op: 1, len: 1025 }.encode();
        assert_eq!(
            FrameHeader::decode(&wire, 1024),
            Err(FrameError::TooLarge {
                len: 1025,
                max: 1024
            })
        );
    }

    #[test]
    fn foreign_bytes_are_rejected_with_the_reason() {
        assert_eq!(
            FrameHeader::decode(&[0xAE, 0x01], 10),
            Err(FrameError::Short(2))
        );
        assert_eq!(
            FrameHeader::decode(&[0, 0, 0, 0, 0, 0, 0], 10),
            Err(FrameError::BadMagic(0))
        );
        assert_eq!(
            FrameHeader::decode(&[0xAE, 0x02, 0, 0, 0, 0, 0], 10),
            Err(FrameError::UnsupportedVersion(2))
        );
    }

    proptest! {
        #[test]
        fn any_bytes_decode_to_a_header_or_a_typed_error(bytes in proptest::collection::vec(any::<u8>(), 0..16), max in any::<u32>()) {
            let expected = if bytes.len() < HEADER_LEN {
                Err(FrameError::Short(bytes.len()))
            } else if bytes[0] != MAGIC {
                Err(FrameError::BadMagic(bytes[0]))
            } else if bytes[1] != VERSION {
                Err(FrameError::UnsupportedVersion(bytes[1]))
            } else {
                let len = u32::from_be_bytes([bytes[3], bytes[4], bytes[5], bytes[6]]);
                if len > max {
                    Err(FrameError::TooLarge { len, max })
                } else {
                    Ok(FrameHeader { op: bytes[2], len })
                }
            };
            prop_assert_eq!(FrameHeader::decode(&bytes, max), expected);
        }
    }
}
