//! The bytes every generated message carries: a small header that lets the
//! consumer side measure end-to-end latency and prove delivery, followed by
//! random filler up to the workload's message size.
//!
//! Layout (little endian):
//!
//! | bytes  | field                                          |
//! |--------|------------------------------------------------|
//! | 0..4   | magic `AEL1`                                   |
//! | 4..8   | CRC-32C of bytes 8..end (header rest + filler) |
//! | 8..12  | run id (tells this run's messages from others) |
//! | 12..16 | producer index                                 |
//! | 16..24 | sequence number within that producer          |
//! | 24..32 | send time, µs since the run's clock origin     |
//!
//! The checksum covers the filler too, so a broker that mangles record
//! bytes is caught, not only one that loses them.
//!
//! A framed message (a workload's `value_schema_id`, for topics with
//! broker-side schema validation) starts with the five bytes Confluent's
//! serializers put first, magic 0 and a big-endian schema id, and the
//! layout above follows them; readers recognise the frame by the magic
//! `AEL1` five bytes in.

use rand::RngCore;

/// Size of the header; the smallest message the tool can send.
pub const HEADER_LEN: usize = 32;
/// Confluent's frame: magic byte 0 and a 4-byte schema id.
pub const FRAME_LEN: usize = 5;
const MAGIC: [u8; 4] = *b"AEL1";

/// What the header says about a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub run_id: u32,
    pub producer: u32,
    pub sequence: u64,
    pub send_us: u64,
}

/// Why a received message could not be counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("message of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    TooShort(usize),
    #[error("message was not written by this tool (no magic)")]
    Foreign,
    #[error("message bytes differ from what was sent (checksum mismatch)")]
    Corrupt,
}

/// A reusable message buffer for one producer: filler is drawn once, the
/// header is rewritten for every send.
#[derive(Debug, Clone)]
pub struct PayloadWriter {
    buf: Vec<u8>,
    /// Where the header starts: 0, or [`FRAME_LEN`] when framed.
    at: usize,
    run_id: u32,
    producer: u32,
}

impl PayloadWriter {
    /// A writer for `size`-byte messages (`size >= HEADER_LEN`, checked by
    /// workload validation; smaller sizes are raised to the header length).
    pub fn new(size: usize, run_id: u32, producer: u32) -> PayloadWriter {
        PayloadWriter::framed(size, run_id, producer, None)
    }

    /// A writer whose messages start with Confluent's frame for
    /// `schema_id` (when given); `size` counts the frame.
    pub fn framed(
        size: usize,
        run_id: u32,
        producer: u32,
        schema_id: Option<u32>,
    ) -> PayloadWriter {
        let at = if schema_id.is_some() { FRAME_LEN } else { 0 };
        let mut buf = vec![0u8; size.max(at + HEADER_LEN)];
        rand::thread_rng().fill_bytes(&mut buf[at + HEADER_LEN..]);
        if let Some(id) = schema_id {
            buf[0] = 0;
            buf[1..FRAME_LEN].copy_from_slice(&id.to_be_bytes());
        }
        buf[at..at + 4].copy_from_slice(&MAGIC);
        buf[at + 8..at + 12].copy_from_slice(&run_id.to_le_bytes());
        buf[at + 12..at + 16].copy_from_slice(&producer.to_le_bytes());
        PayloadWriter {
            buf,
            at,
            run_id,
            producer,
        }
    }

    /// Stamps sequence and send time and returns the message bytes.
    pub fn stamp(&mut self, sequence: u64, send_us: u64) -> &[u8] {
        let at = self.at;
        self.buf[at + 16..at + 24].copy_from_slice(&sequence.to_le_bytes());
        self.buf[at + 24..at + 32].copy_from_slice(&send_us.to_le_bytes());
        let crc = crc32c::crc32c(&self.buf[at + 8..]);
        self.buf[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        &self.buf
    }

    pub fn run_id(&self) -> u32 {
        self.run_id
    }

    pub fn producer(&self) -> u32 {
        self.producer
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The message without Confluent's frame, when it has one.
fn unframed(bytes: &[u8]) -> &[u8] {
    match bytes.get(FRAME_LEN..FRAME_LEN + 4) {
        Some(m) if bytes[0] == 0 && m == MAGIC => &bytes[FRAME_LEN..],
        _ => bytes,
    }
}

/// Reads the header without checking the filler: for delivery reports,
/// where the client hands back the very buffer it was given.
pub fn peek(bytes: &[u8]) -> Result<Stamp, PayloadError> {
    let bytes = unframed(bytes);
    if bytes.len() < HEADER_LEN {
        return Err(PayloadError::TooShort(bytes.len()));
    }
    if bytes[0..4] != MAGIC {
        return Err(PayloadError::Foreign);
    }
    Ok(Stamp {
        run_id: u32_at(bytes, 8),
        producer: u32_at(bytes, 12),
        sequence: u64_at(bytes, 16),
        send_us: u64_at(bytes, 24),
    })
}

/// Reads the header and verifies the checksum over everything after it:
/// for messages that came back from the broker.
pub fn verify(bytes: &[u8]) -> Result<Stamp, PayloadError> {
    let stamp = peek(bytes)?;
    let bytes = unframed(bytes);
    if crc32c::crc32c(&bytes[8..]) != u32_at(bytes, 4) {
        return Err(PayloadError::Corrupt);
    }
    Ok(stamp)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_framed_message_carries_the_schema_id_first_and_reads_back() {
        let mut w = PayloadWriter::framed(100, 9, 2, Some(0x0102_0304));
        let bytes = w.stamp(5, 77).to_vec();
        assert_eq!(bytes.len(), 100);
        assert_eq!(&bytes[..FRAME_LEN], &[0, 1, 2, 3, 4]);
        let s = verify(&bytes).unwrap();
        assert_eq!((s.run_id, s.producer, s.sequence, s.send_us), (9, 2, 5, 77));
        let mut damaged = bytes.clone();
        damaged[99] ^= 1;
        assert_eq!(verify(&damaged), Err(PayloadError::Corrupt));
    }

    #[test]
    fn stamped_message_reads_back_its_header() {
        let mut w = PayloadWriter::new(1024, 7, 3);
        let bytes = w.stamp(42, 1_000_000).to_vec();
        assert_eq!(bytes.len(), 1024);
        let s = verify(&bytes).unwrap();
        assert_eq!(
            s,
            Stamp {
                run_id: 7,
                producer: 3,
                sequence: 42,
                send_us: 1_000_000
            }
        );
    }

    #[test]
    fn a_flipped_filler_byte_is_reported_as_corrupt() {
        let mut w = PayloadWriter::new(256, 1, 0);
        let mut bytes = w.stamp(5, 9).to_vec();
        bytes[200] ^= 0x40;
        assert_eq!(verify(&bytes), Err(PayloadError::Corrupt));
        assert!(peek(&bytes).is_ok(), "peek does not look at the filler");
    }

    #[test]
    fn foreign_and_short_messages_are_told_apart() {
        assert_eq!(verify(b"hello"), Err(PayloadError::TooShort(5)));
        assert_eq!(verify(&[0u8; 64]), Err(PayloadError::Foreign));
    }

    proptest! {
        #[test]
        fn any_stamp_round_trips(size in HEADER_LEN..4096usize, run in any::<u32>(),
                                 producer in any::<u32>(), seq in any::<u64>(), t in any::<u64>()) {
            let mut w = PayloadWriter::new(size, run, producer);
            let s = verify(w.stamp(seq, t)).unwrap();
            prop_assert_eq!(s, Stamp { run_id: run, producer, sequence: seq, send_us: t });
        }

        #[test]
        fn truncating_a_message_never_verifies(size in (HEADER_LEN + 1)..2048usize, cut in 1usize..64) {
            let mut w = PayloadWriter::new(size, 1, 1);
            let bytes = w.stamp(1, 1).to_vec();
            let keep = bytes.len().saturating_sub(cut).max(HEADER_LEN);
            if keep < bytes.len() {
                prop_assert!(verify(&bytes[..keep]).is_err());
            }
        }
    }
}
