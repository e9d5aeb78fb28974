//! Response frames made of parts, so record bytes are spliced in rather than
//! copied: on plain TCP a file-backed part of a large frame goes out with
//! `sendfile(2)` straight from the segment file (a small frame is copied
//! into one write).
//!
//! Fetch responses are encoded by `kafka-protocol` with a unique 16-byte
//! marker in place of each partition's records; [`splice_records`] finds the
//! markers in order and replaces marker and length prefix by the real length
//! prefix and the real records. The result is byte-for-byte what a full
//! encoding would give (see the tests).

use std::io;
use std::os::fd::AsFd;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use dataplane::backend::Records;

/// One piece of a response frame.
#[derive(Debug)]
pub enum Part {
    Bytes(Bytes),
    Records(Records),
}

/// How a frame's length is announced before its parts.
#[derive(Debug, Default, Clone, Copy)]
enum Prefix {
    /// Kafka: an `i32` size.
    #[default]
    Kafka,
    /// The native protocol's 7-byte header with this operation code.
    Native(u8),
}

/// A whole response: the size prefix is derived from the parts.
#[derive(Debug, Default)]
pub struct ResponseFrame {
    parts: Vec<Part>,
    len: usize,
    prefix: Prefix,
}

/// Frames up to this size go out as one copied buffer, larger ones with
/// `sendfile(2)` for their file parts.
pub const COPY_AT_MOST: usize = 128 * 1024;

/// A socket a frame can be written to, with `sendfile(2)` for file parts.
pub trait TcpSink: AsyncWrite + Unpin {
    fn socket(&self) -> &TcpStream;
}

impl TcpSink for TcpStream {
    fn socket(&self) -> &TcpStream {
        self
    }
}

impl TcpSink for tokio::net::tcp::OwnedWriteHalf {
    fn socket(&self) -> &TcpStream {
        self.as_ref()
    }
}

impl ResponseFrame {
    pub fn new() -> Self {
        Self::default()
    }

    /// A native-protocol frame for operation `op` (its 7-byte header is
    /// derived from the parts, like Kafka's size prefix).
    pub fn native(op: u8) -> Self {
        ResponseFrame {
            prefix: Prefix::Native(op),
            ..Self::default()
        }
    }

    fn put_prefix(&self, out: &mut BytesMut) {
        match self.prefix {
            Prefix::Kafka => out.put_i32(self.len as i32),
            Prefix::Native(op) => out.put_slice(
                &sdk::frame::FrameHeader {
                    op,
                    len: u32::try_from(self.len).unwrap_or(u32::MAX),
                }
                .encode(),
            ),
        }
    }

    pub fn push_bytes(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.parts.push(Part::Bytes(b));
        }
    }

    pub fn push_records(&mut self, r: Records) {
        if !r.is_empty() {
            self.len += r.len();
            self.parts.push(Part::Records(r));
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole frame, size prefix included, in one buffer.
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        let mut out = BytesMut::with_capacity(sdk::frame::HEADER_LEN + self.len);
        self.put_prefix(&mut out);
        for p in &self.parts {
            match p {
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::Records(r) => r.append_to(&mut out)?,
            }
        }
        Ok(out.freeze())
    }

    /// Writes the frame to a plain TCP socket, sending file ranges with
    /// sendfile. A frame of at most [`COPY_AT_MOST`] bytes is copied into one
    /// buffer and written at once instead: a write and a sendfile per
    /// partition cost more than the copy, and each goes out as a segment of
    /// its own that the client must take in and wake up for.
    pub async fn write_to_tcp<S: TcpSink>(self, stream: &mut S) -> io::Result<()> {
        if self.len <= COPY_AT_MOST {
            return stream.write_all(&self.to_bytes()?).await;
        }
        let mut pending = BytesMut::with_capacity(512);
        self.put_prefix(&mut pending);
        for p in self.parts {
            match p {
                Part::Bytes(b) => pending.extend_from_slice(&b),
                Part::Records(Records::Bytes(b)) => {
                    stream.write_all(&pending).await?;
                    pending.clear();
                    stream.write_all(&b).await?;
                }
                Part::Records(Records::File {
                    file,
                    position,
                    len,
                }) => {
                    stream.write_all(&pending).await?;
                    pending.clear();
                    send_file(stream.socket(), &file, position, len).await?;
                }
            }
        }
        if !pending.is_empty() {
            stream.write_all(&pending).await?;
        }
        Ok(())
    }

    /// Writes the frame to any stream (TLS, tests), reading file ranges into memory.
    pub async fn write_to<W: AsyncWrite + Unpin>(self, w: &mut W) -> io::Result<()> {
        w.write_all(&self.to_bytes()?).await
    }
}

/// `sendfile(2)` of `len` bytes at `position` of `file` into the socket.
async fn send_file(
    stream: &TcpStream,
    file: &std::fs::File,
    position: u64,
    len: usize,
) -> io::Result<()> {
    let mut offset =
        i64::try_from(position).map_err(|_| io::Error::other("file position out of range"))?;
    let mut remaining = len;
    while remaining > 0 {
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            let mut off = offset;
            nix::sys::sendfile::sendfile64(stream.as_fd(), file.as_fd(), Some(&mut off), remaining)
                .map_err(io::Error::from)
        });
        match sent {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file ended before the records it was read for",
                ))
            }
            Ok(n) => {
                offset += n as i64;
                remaining -= n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A per-response marker: 8 random bytes, then the partition's index.
pub fn marker(nonce: [u8; 8], index: usize) -> Bytes {
    let mut m = BytesMut::with_capacity(16);
    m.extend_from_slice(&nonce);
    m.put_u64(index as u64);
    m.freeze()
}

fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Replaces, in order, each `marker(nonce, i)` (with its 16-byte length prefix)
/// in `encoded` by the real prefix and `records[i]`, appending to `frame`.
/// `compact` says whether the records field is COMPACT_RECORDS (flexible versions).
pub fn splice_records(
    frame: &mut ResponseFrame,
    encoded: Bytes,
    nonce: [u8; 8],
    records: Vec<Records>,
    compact: bool,
) -> io::Result<()> {
    let prefix_len = if compact { 1 } else { 4 };
    let mut from = 0usize;
    for (i, rec) in records.into_iter().enumerate() {
        let m = marker(nonce, i);
        let at = encoded[from..]
            .windows(m.len())
            .position(|w| w == &m[..])
            .map(|p| p + from)
            .filter(|p| *p >= from + prefix_len)
            .ok_or_else(|| io::Error::other("records marker missing from the encoded response"))?;
        frame.push_bytes(encoded.slice(from..at - prefix_len));
        let mut prefix = BytesMut::with_capacity(5);
        if compact {
            put_uvarint(&mut prefix, rec.len() as u64 + 1);
        } else {
            prefix.put_i32(rec.len() as i32);
        }
        frame.push_bytes(prefix.freeze());
        frame.push_records(rec);
        from = at + m.len();
    }
    frame.push_bytes(encoded.slice(from..));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn response(records: &[Option<Bytes>]) -> FetchResponse {
        let partitions = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_high_watermark(42)
                    .with_records(r.clone())
            })
            .collect();
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("orders")))
            .with_partitions(partitions)])
    }

    fn spliced_equals_full_encoding(version: i16, payloads: Vec<Bytes>) {
        let nonce = *b"\x01\x02\x03\x04\x05\x06\x07\x08";
        let markers: Vec<Option<Bytes>> = (0..payloads.len())
            .map(|i| Some(marker(nonce, i)))
            .collect();
        let mut with_markers = BytesMut::new();
        response(&markers)
            .encode(&mut with_markers, version)
            .expect("encode");
        let mut frame = ResponseFrame::new();
        let records = payloads.iter().cloned().map(Records::Bytes).collect();
        splice_records(
            &mut frame,
            with_markers.freeze(),
            nonce,
            records,
            version >= 12,
        )
        .expect("splice");

        let full: Vec<Option<Bytes>> = payloads.into_iter().map(Some).collect();
        let mut expected = BytesMut::new();
        expected.put_i32(0);
        response(&full)
            .encode(&mut expected, version)
            .expect("encode");
        let n = (expected.len() - 4) as i32;
        expected[..4].copy_from_slice(&n.to_be_bytes());
        assert_eq!(
            frame.to_bytes().expect("bytes"),
            expected.freeze(),
            "version {version}"
        );
    }

    #[test]
    fn spliced_fetch_response_matches_full_encoding_in_every_version() {
        for version in [4, 11, 12, 13, 16] {
            spliced_equals_full_encoding(
                version,
                vec![
                    Bytes::from(vec![7u8; 300]),
                    Bytes::new(),
                    Bytes::from_static(b"abc"),
                ],
            );
        }
    }

    #[test]
    fn large_records_get_a_multi_byte_compact_length() {
        spliced_equals_full_encoding(13, vec![Bytes::from(vec![1u8; 70_000])]);
    }

    #[test]
    fn file_backed_records_are_read_at_their_position() {
        use std::io::Write;
        let mut f = tempfile::tempfile().expect("tmp");
        f.write_all(b"xxxxHELLOyyyy").expect("write");
        let r = Records::File {
            file: std::sync::Arc::new(f),
            position: 4,
            len: 5,
        };
        assert_eq!(r.to_bytes().expect("read"), Bytes::from_static(b"HELLO"));
    }

    /// What goes over a real socket is the frame's bytes, whether it is
    /// copied into one write (small) or sent with sendfile (large).
    #[tokio::test]
    async fn a_frame_on_tcp_is_its_bytes_copied_or_sent_from_the_file() {
        use std::io::Write;
        use tokio::io::AsyncReadExt;
        let mut f = tempfile::tempfile().expect("tmp");
        let content: Vec<u8> = (0..(3 * COPY_AT_MOST)).map(|i| (i % 251) as u8).collect();
        f.write_all(&content).expect("write");
        let file = std::sync::Arc::new(f);
        for records in [1_000, COPY_AT_MOST / 3, COPY_AT_MOST, 2 * COPY_AT_MOST] {
            let mut frame = ResponseFrame::new();
            frame.push_bytes(Bytes::from_static(b"head"));
            frame.push_records(Records::File {
                file: file.clone(),
                position: 7,
                len: records,
            });
            frame.push_bytes(Bytes::from_static(b"middle"));
            frame.push_records(Records::Bytes(Bytes::from_static(b"inline")));
            frame.push_records(Records::File {
                file: file.clone(),
                position: 11,
                len: 100,
            });
            let expected = frame.to_bytes().expect("bytes");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let reader = tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.expect("accept");
                let mut got = Vec::new();
                s.read_to_end(&mut got).await.expect("read");
                got
            });
            let mut out = TcpStream::connect(addr).await.expect("connect");
            frame.write_to_tcp(&mut out).await.expect("write");
            drop(out);
            let got = reader.await.expect("reader");
            assert_eq!(got.len(), expected.len(), "{records} bytes of records");
            assert!(got == expected[..], "{records} bytes of records");
        }
    }
}
