//! The native protocol's front end on TCP (port 9091 by default).
//!
//! A connection starts with a hello; after it, requests are served
//! concurrently (up to [`MAX_IN_FLIGHT`] per connection) and answered as
//! they complete, each response carrying its request's correlation id.
//! Operations run on the same handlers as Kafka requests
//! (`kafka/api/bridge.rs`), so both protocols share validation,
//! limits and data: what one writes the other reads. Fetched records are
//! spliced into the response from the log (sendfile).
//!
//! A frame that cannot be served (wrong magic or framing version, a body
//! larger than `socket.request.max.bytes`, an unknown operation, an
//! undecodable body) is answered with an error frame, and the connection
//! is closed; nothing else is affected.

mod codes;
mod groups;
mod ops;
mod subscribe;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::stream::FuturesUnordered;
use futures::{Future, StreamExt};
use sdk::frame::{FrameError, FrameHeader, HEADER_LEN};
use sdk::proto::{self, ErrorCode, ErrorFrame, Message};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::broker::{Broker, Metrics};
use crate::connections::{Admitted, RequestRoom};
use crate::kafka::api::Client;
use crate::kafka::response::ResponseFrame;

/// Requests of one connection served at once; the connection's next frame
/// is not read while this many are under way.
pub const MAX_IN_FLIGHT: usize = 64;

/// Accepts native connections until `stop` turns true.
pub async fn serve(
    listener: std::net::TcpListener,
    broker: Arc<Broker>,
    stop: watch::Receiver<bool>,
) {
    crate::server::accept(listener, broker, stop, "native", connection).await
}

/// What the reader hands the connection.
enum Incoming {
    Frame {
        op: u8,
        body: Bytes,
        room: RequestRoom,
    },
    /// The frame could not be read; answer with this and close.
    Refused(ErrorFrame),
}

/// Reads frames until the peer closes, a frame is refused or the
/// connection goes away. Each frame first reserves its size among the
/// requests being served broker-wide.
async fn read_frames(mut rd: OwnedReadHalf, broker: Arc<Broker>, tx: mpsc::Sender<Incoming>) {
    let max = u32::try_from(broker.config.max_request_bytes).unwrap_or(u32::MAX);
    let idle = broker.connections.limits().idle_timeout;
    loop {
        let mut head = [0u8; HEADER_LEN];
        match tokio::time::timeout(idle, rd.read_exact(&mut head)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                Metrics::add(&broker.connections.counters.idle_closed, 1);
                return;
            }
        }
        let header = match FrameHeader::decode(&head, max) {
            Ok(h) => h,
            Err(e) => {
                let error = match e {
                    FrameError::TooLarge { .. } => ErrorCode::FRAME_TOO_LARGE,
                    _ => ErrorCode::BAD_FRAME,
                };
                let _ = tx
                    .send(Incoming::Refused(ErrorFrame {
                        correlation: 0,
                        error,
                        message: e.to_string(),
                    }))
                    .await;
                return;
            }
        };
        let len = header.len as usize;
        let room = broker.connections.room_for(len).await;
        let mut body = BytesMut::zeroed(len);
        // a client that stalls inside a body holds request memory: the
        // body must arrive within the idle timeout too
        match tokio::time::timeout(idle, rd.read_exact(&mut body)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                Metrics::add(&broker.connections.counters.idle_closed, 1);
                return;
            }
        }
        let frame = Incoming::Frame {
            op: header.op,
            body: body.freeze(),
            room,
        };
        if tx.send(frame).await.is_err() {
            return;
        }
    }
}

type Served = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// What serving one request gives the connection.
pub(crate) enum Answer {
    /// Write this frame.
    Frame(ResponseFrame),
    /// Nothing to write (produce with acks 0).
    Nothing,
    /// Write this error frame, then close.
    Fatal(ErrorFrame),
}

fn error_frame(e: &ErrorFrame) -> ResponseFrame {
    let mut f = ResponseFrame::native(proto::op::ERROR);
    let mut body = BytesMut::new();
    e.encode_body(&mut body);
    f.push_bytes(body.freeze());
    f
}

/// A message as a response frame.
pub(crate) fn frame_of<M: Message>(m: &M) -> ResponseFrame {
    let mut f = ResponseFrame::native(M::OP);
    let mut body = BytesMut::with_capacity(64);
    m.encode_body(&mut body);
    f.push_bytes(body.freeze());
    f
}

/// Serves one frame of a connection that said hello, and returns the bytes
/// the connection would write for it: a response, an error frame (after
/// which a connection closes), or nothing (produce with acks 0). The
/// native fuzz target drives the protocol through it.
pub async fn serve_frame(
    b: &Arc<Broker>,
    c: &Client,
    client_id: &str,
    op: u8,
    body: Bytes,
) -> std::io::Result<Option<Bytes>> {
    let (pushes, _) = mpsc::channel(subscribe::PUSH_QUEUE);
    let subs = subscribe::Subscriptions::new(pushes);
    match ops::serve(b, c, &Arc::from(client_id), &subs, op, body).await {
        Answer::Frame(f) => f.to_bytes().map(Some),
        Answer::Nothing => Ok(None),
        Answer::Fatal(e) => error_frame(&e).to_bytes().map(Some),
    }
}

async fn write(
    wr: &mut OwnedWriteHalf,
    frame: ResponseFrame,
    broker: &Broker,
    peer: SocketAddr,
) -> bool {
    let timeout = broker.connections.limits().write_timeout;
    match tokio::time::timeout(timeout, frame.write_to_tcp(wr)).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "writing a native response failed");
            false
        }
        Err(_) => {
            Metrics::add(&broker.connections.counters.write_timeouts, 1);
            tracing::warn!(%peer, "closing native connection: the client did not read its response in time");
            false
        }
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    admitted: Admitted,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
) {
    let client = Client::direct(format!("/{}", peer.ip()), admitted.id);
    let (rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel(4);
    let reader = tokio::spawn(read_frames(rd, broker.clone(), tx));
    let mut client_id: Option<Arc<str>> = None;
    // subscription answers and pushes, written between responses
    let (pushes, mut pushed) = mpsc::channel(subscribe::PUSH_QUEUE);
    let subs = Arc::new(subscribe::Subscriptions::new(pushes));
    let mut in_flight: FuturesUnordered<Served> = FuturesUnordered::new();
    // the peer closed its side, or shutdown began: answer what was asked
    // for (long polls end early at shutdown), read nothing more, then close
    let mut peer_done = false;
    let mut stopping = false;
    loop {
        if peer_done && in_flight.is_empty() {
            break;
        }
        let room_for_more = in_flight.len() < MAX_IN_FLIGHT && !peer_done;
        tokio::select! {
            biased;
            _ = stop.changed(), if !stopping => {
                stopping = true;
                peer_done = true;
            }
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                broker.metrics.in_flight.fetch_sub(1, Ordering::SeqCst);
                match answer {
                    Answer::Frame(f) => if !write(&mut wr, f, &broker, peer).await { break },
                    Answer::Nothing => {}
                    Answer::Fatal(e) => {
                        Metrics::add(&broker.metrics.malformed_requests, 1);
                        tracing::warn!(%peer, error = %e.error, message = %e.message, "closing native connection");
                        let _ = write(&mut wr, error_frame(&e), &broker, peer).await;
                        break;
                    }
                }
            }
            Some(f) = pushed.recv() => if !write(&mut wr, f, &broker, peer).await { break },
            incoming = rx.recv(), if room_for_more => {
                let (op, body, room) = match incoming {
                    None => {
                        peer_done = true;
                        continue;
                    }
                    Some(Incoming::Refused(e)) => {
                        Metrics::add(&broker.metrics.malformed_requests, 1);
                        tracing::warn!(%peer, error = %e.error, message = %e.message, "closing native connection: bad frame");
                        let _ = write(&mut wr, error_frame(&e), &broker, peer).await;
                        break;
                    }
                    Some(Incoming::Frame { op, body, room }) => (op, body, room),
                };
                if broker.is_shutting_down() {
                    break;
                }
                let Some(id) = client_id.clone() else {
                    // The hello is served before anything else is read.
                    match ops::hello(&broker, op, body) {
                        Ok((resp, id)) => {
                            client_id = Some(id);
                            if !write(&mut wr, resp, &broker, peer).await { break }
                        }
                        Err(e) => {
                            tracing::info!(%peer, error = %e.error, message = %e.message, "native hello refused");
                            let _ = write(&mut wr, error_frame(&e), &broker, peer).await;
                            break;
                        }
                    }
                    drop(room);
                    continue;
                };
                broker.metrics.in_flight.fetch_add(1, Ordering::SeqCst);
                let (b, c, s) = (broker.clone(), client.clone(), subs.clone());
                in_flight.push(Box::pin(async move {
                    let answer = ops::serve(&b, &c, &id, &s, op, body).await;
                    drop(room);
                    answer
                }));
            }
        }
    }
    reader.abort();
    let left = in_flight.len();
    drop(in_flight);
    // ends every subscription of the connection
    drop(subs);
    broker
        .metrics
        .in_flight
        .fetch_sub(left as u64, Ordering::SeqCst);
    drop(admitted);
    Metrics::add(&broker.metrics.connections_closed, 1);
}
