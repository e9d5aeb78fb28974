//! A stream's reader: frames off the wire, each holding what it takes
//! (room in the broker-wide budget, or the reader's turn before login)
//! until the stream's loop is done with it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sdk::frame::{FrameError, FrameHeader, HEADER_LEN};
use sdk::proto::{ErrorCode, ErrorFrame};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, oneshot};

use crate::broker::{Broker, Metrics};
use crate::connections::RequestRoom;
use crate::kafka::frame::read_body_as_it_arrives;

/// What the reader hands the stream's loop.
pub(super) enum Incoming {
    Frame {
        op: u8,
        body: Bytes,
        held: Held,
    },
    /// The frame could not be read; answer with this and close.
    Refused(ErrorFrame),
}

/// What a frame holds until the loop is done with it: only dropped, which
/// gives it back.
#[allow(dead_code)]
pub(super) enum Held {
    /// Its room among the requests being served broker-wide.
    Room(RequestRoom),
    /// A frame read before the client logged in: the reader reads nothing
    /// more until the loop handled it (the sender is dropped).
    Login(oneshot::Sender<()>),
}

/// The largest frame a client may send before it logged in (the hello and
/// the authentication messages): an OAUTHBEARER token fits many times.
pub const MAX_LOGIN_FRAME: usize = 64 * 1024;

/// Reads frames until the peer closes, a frame is refused or the
/// stream goes away.
///
/// Until the client logged in (`logged_in`, which the stream's loop sets),
/// frames are at most [`MAX_LOGIN_FRAME`] bytes, read one at a time (the
/// next only once the loop handled the last) as their bytes arrive, and
/// take no room in the broker-wide budget; they must all have arrived
/// within the login timeout of the stream's start. So a client that
/// never logs in holds one small frame, briefly, and nobody waits for it.
/// After that, each frame first reserves its size among the requests being
/// served broker-wide.
pub(super) async fn read_frames<R: AsyncRead + Unpin>(
    mut rd: R,
    broker: Arc<Broker>,
    tx: mpsc::Sender<Incoming>,
    logged_in: Arc<AtomicBool>,
) {
    let max = u32::try_from(broker.config.max_request_bytes).unwrap_or(u32::MAX);
    let limits = broker.connections.limits();
    let (idle, login_by) = (
        limits.idle_timeout,
        tokio::time::Instant::now() + limits.login_timeout,
    );
    let counters = &broker.connections.counters;
    loop {
        let logging_in = !logged_in.load(Ordering::Acquire);
        let (limit, by, timed_out) = if logging_in {
            let limit = max.min(MAX_LOGIN_FRAME as u32);
            (limit, login_by, &counters.login_timeouts)
        } else {
            let by = tokio::time::Instant::now() + idle;
            (max, by, &counters.idle_closed)
        };
        let mut head = [0u8; HEADER_LEN];
        match tokio::time::timeout_at(by, rd.read_exact(&mut head)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                Metrics::add(timed_out, 1);
                return;
            }
        }
        let header = match FrameHeader::decode(&head, limit) {
            Ok(h) => h,
            Err(e) => {
                let error = match e {
                    FrameError::TooLarge { .. } => ErrorCode::FRAME_TOO_LARGE,
                    _ => ErrorCode::BAD_FRAME,
                };
                let message = match e {
                    FrameError::TooLarge { len, max } if logging_in => format!(
                        "frame body of {len} bytes exceeds the limit of {max} bytes before the client logged in"
                    ),
                    e => e.to_string(),
                };
                let _ = tx
                    .send(Incoming::Refused(ErrorFrame {
                        correlation: 0,
                        error,
                        message,
                    }))
                    .await;
                return;
            }
        };
        let len = header.len as usize;
        if logging_in {
            let body =
                match tokio::time::timeout_at(by, read_body_as_it_arrives(&mut rd, len)).await {
                    Ok(Ok(body)) => body,
                    Ok(Err(_)) => return,
                    Err(_) => {
                        Metrics::add(timed_out, 1);
                        return;
                    }
                };
            let (handled, done) = oneshot::channel();
            let frame = Incoming::Frame {
                op: header.op,
                body,
                held: Held::Login(handled),
            };
            if tx.send(frame).await.is_err() {
                return;
            }
            // the loop dropped the frame: handled, or the stream is ending
            let _ = done.await;
            continue;
        }
        let room = broker.connections.room_for(len).await;
        let mut body = BytesMut::zeroed(len);
        // a client that stalls inside a body holds request memory: the
        // body must arrive within the idle timeout too
        match tokio::time::timeout_at(by, rd.read_exact(&mut body)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                Metrics::add(timed_out, 1);
                return;
            }
        }
        let frame = Incoming::Frame {
            op: header.op,
            body: body.freeze(),
            held: Held::Room(room),
        };
        if tx.send(frame).await.is_err() {
            return;
        }
    }
}
