//! Request framing: a 4-byte big-endian size, then the request. The size is
//! checked against `socket.request.max.bytes` before anything is allocated.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why a connection is being closed while reading a frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds socket.request.max.bytes ({max})")]
    TooLarge { size: i64, max: usize },
    #[error("frame has negative or too small size {0}")]
    BadSize(i32),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// Smallest valid request: api key, version and correlation id.
const MIN_REQUEST: i32 = 8;

/// Reads one frame. `Ok(None)` is a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    match read_size(r, max).await? {
        Some(size) => read_body(r, size).await.map(Some),
        None => Ok(None),
    }
}

/// Reads a frame's size prefix and checks it. `Ok(None)` is a clean end of
/// stream between frames.
pub async fn read_size<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<usize>, FrameError> {
    let mut size = [0u8; 4];
    match r.read_exact(&mut size[..1]).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    r.read_exact(&mut size[1..])
        .await
        .map_err(eof_is_truncation)?;
    let size = i32::from_be_bytes(size);
    if size < MIN_REQUEST {
        return Err(FrameError::BadSize(size));
    }
    if size as usize > max {
        return Err(FrameError::TooLarge {
            size: i64::from(size),
            max,
        });
    }
    Ok(Some(size as usize))
}

/// Reads a frame body of `size` bytes (checked by [`read_size`]).
pub async fn read_body<R: AsyncRead + Unpin>(r: &mut R, size: usize) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::zeroed(size);
    r.read_exact(&mut buf).await.map_err(eof_is_truncation)?;
    Ok(buf.freeze())
}

/// Reads a frame body of `size` bytes into memory that grows as the bytes
/// arrive, so a client that announces a frame and stalls makes the broker
/// allocate only what it actually sent. For frames of clients that have
/// not logged in.
pub async fn read_body_as_it_arrives<R: AsyncRead + Unpin>(
    r: &mut R,
    size: usize,
) -> Result<Bytes, FrameError> {
    /// What is set aside before any byte arrived.
    const FIRST: usize = 4 * 1024;
    let mut buf = Vec::with_capacity(size.min(FIRST));
    r.take(size as u64).read_to_end(&mut buf).await?;
    if buf.len() < size {
        return Err(FrameError::Truncated);
    }
    Ok(Bytes::from(buf))
}

fn eof_is_truncation(e: std::io::Error) -> FrameError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        FrameError::Truncated
    } else {
        FrameError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn oversized_frame_is_refused_before_reading_its_body() {
        let mut input: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
        let err = read_frame(&mut input, 1024).await.expect_err("too large");
        assert!(matches!(err, FrameError::TooLarge { .. }), "{err}");
    }

    #[tokio::test]
    async fn truncated_frame_is_an_error_and_clean_eof_is_not() {
        let mut input: &[u8] = &[0, 0, 0, 10, 1, 2];
        assert!(matches!(
            read_frame(&mut input, 1024).await,
            Err(FrameError::Truncated)
        ));
        let mut empty: &[u8] = &[];
        assert!(matches!(read_frame(&mut empty, 1024).await, Ok(None)));
    }

    #[tokio::test]
    async fn a_body_read_as_it_arrives_holds_only_what_arrived() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let reading = tokio::spawn(async move {
            let body = read_body_as_it_arrives(&mut server, 10).await;
            (body, server)
        });
        use tokio::io::AsyncWriteExt;
        client.write_all(b"0123456789extra").await.expect("write");
        let (body, mut server) = reading.await.expect("joined");
        assert_eq!(&body.expect("whole")[..], b"0123456789");
        let mut rest = [0u8; 5];
        server.read_exact(&mut rest).await.expect("the rest");
        assert_eq!(&rest, b"extra", "nothing past the body is consumed");

        let mut short: &[u8] = b"0123";
        assert!(matches!(
            read_body_as_it_arrives(&mut short, 1 << 30).await,
            Err(FrameError::Truncated)
        ));
    }

    #[tokio::test]
    async fn whole_frame_is_returned() {
        let mut input: &[u8] = &[0, 0, 0, 8, 0, 18, 0, 3, 0, 0, 0, 1];
        let frame = read_frame(&mut input, 1024)
            .await
            .expect("ok")
            .expect("frame");
        assert_eq!(&frame[..], &[0, 18, 0, 3, 0, 0, 0, 1]);
    }
}
