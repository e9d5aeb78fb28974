//! The native protocol's front end: on TCP (port 9091 by default) and on
//! QUIC over UDP on the same port number ([`quic`]).
//!
//! A connection starts with a hello; after it, requests are served
//! concurrently (up to [`MAX_IN_FLIGHT`] per stream) and answered as they
//! complete, each response carrying its request's correlation id.
//! Operations run on the same handlers as Kafka requests
//! (`kafka/api/bridge.rs`), so both protocols share validation,
//! limits and data: what one writes the other reads. On TCP fetched records
//! are spliced into the response from the log (sendfile); on QUIC they are
//! copied in memory.
//!
//! Both transports run the same loop, `serve_stream`, over any pair of
//! `AsyncRead`/`AsyncWrite` halves: a TCP connection is one stream; a QUIC
//! connection is one stream per bidirectional QUIC stream the client opens,
//! the first carrying the hello and the others sharing what it settled
//! (`Session`).
//!
//! A frame that cannot be served (wrong magic or framing version, a body
//! larger than `socket.request.max.bytes`, or than [`MAX_LOGIN_FRAME`]
//! before the client logged in, an unknown operation, an undecodable body)
//! is answered with an error frame on its stream, and the connection is
//! closed; nothing else is affected. A client that has not logged in
//! within the login timeout is disconnected.

mod codes;
mod groups;
mod ops;
pub mod quic;
mod reader;
mod subscribe;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures::stream::FuturesUnordered;
use futures::{Future, StreamExt};
use sdk::proto::{self, ErrorCode, ErrorFrame, Message};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::broker::{Broker, Metrics};
use crate::connections::Admitted;
use crate::kafka::api::Client;
use crate::kafka::response::ResponseFrame;
pub use reader::MAX_LOGIN_FRAME;
use reader::{read_frames, Incoming};

/// Requests of one stream served at once; the stream's next frame is not
/// read while this many are under way.
pub const MAX_IN_FLIGHT: usize = 64;

/// Accepts native TCP connections until `stop` turns true.
pub async fn serve(
    listener: std::net::TcpListener,
    broker: Arc<Broker>,
    stop: watch::Receiver<bool>,
) {
    crate::server::accept(listener, broker, stop, "native", connection).await
}

/// What a connection's hello settled; every stream of the connection
/// shares it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The client's id, as its hello gave it.
    pub client_id: Arc<str>,
    /// The protocol version both sides speak.
    pub version: u16,
    /// Who the client authenticated as (`User:alice`), or
    /// [`security::authz::ANONYMOUS`] when the server authenticates no one.
    pub principal: Arc<str>,
    /// When the authenticated session ends: from then on every request is
    /// refused with SESSION_EXPIRED and the connection closed.
    pub expires: Option<Instant>,
}

impl Session {
    fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|e| now >= e)
    }
}

/// What serving a request knows of the stream it came on (one per stream,
/// shared by the stream's requests).
pub(crate) struct StreamCtx {
    pub session: Session,
    /// The stream's open subscriptions. Their answers and pushes go out
    /// through a queue the stream's loop writes between answers, with the
    /// same write timeout; the queue is bounded, so a subscription waits
    /// while the client reads slowly. Dropping the context (the stream
    /// ended) ends them.
    ///
    /// The loop does not wait for pushes: it ends once the client finished
    /// its side and every request is answered, or when no frame arrives for
    /// `connections.max.idle.ms`, and the subscriptions end with it.
    pub subs: subscribe::Subscriptions,
}

/// One native connection as its streams see it.
pub(crate) struct Link {
    pub broker: Arc<Broker>,
    /// The Kafka handlers' view of the connection (its id and address).
    pub client: Client,
    pub peer: SocketAddr,
    /// `tcp` or `quic`, for the logs.
    pub transport: &'static str,
}

/// How a stream starts.
pub(crate) enum Start {
    /// The connection's first stream: its first frame must be a hello,
    /// whose outcome is published here for the connection's other streams.
    Hello(watch::Sender<Option<Session>>),
    /// Another stream of a connection whose first stream said hello.
    After(Session),
}

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The peer finished its side (or went away, or idled out, or shutdown
    /// began) and every request was answered.
    Done,
    /// A frame was refused with an error frame: the connection must close.
    Refused,
}

/// Where a stream's frames are written: a TCP connection sends file-backed
/// records with sendfile ([`ResponseFrame::write_to_tcp`]), anything else
/// copies them ([`ResponseFrame::write_to`]).
pub(crate) trait Sink: AsyncWrite + Unpin + Send {
    fn send_frame(
        &mut self,
        frame: ResponseFrame,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
}

impl Sink for OwnedWriteHalf {
    fn send_frame(
        &mut self,
        frame: ResponseFrame,
    ) -> impl Future<Output = std::io::Result<()>> + Send {
        frame.write_to_tcp(self)
    }
}

impl Sink for quinn::SendStream {
    fn send_frame(
        &mut self,
        frame: ResponseFrame,
    ) -> impl Future<Output = std::io::Result<()>> + Send {
        frame.write_to(self)
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
    // a stream of its own whose pushes nobody reads
    let (pushes, _) = mpsc::channel(1);
    let ctx = StreamCtx {
        session: Session {
            client_id: Arc::from(client_id),
            version: proto::MAX_VERSION,
            principal: c.principal.clone(),
            expires: None,
        },
        subs: subscribe::Subscriptions::new(pushes),
    };
    match ops::serve(b, c, &ctx, op, body).await {
        Answer::Frame(f) => f.to_bytes().map(Some),
        Answer::Nothing => Ok(None),
        Answer::Fatal(e) => error_frame(&e).to_bytes().map(Some),
    }
}

/// Counts a request in flight broker-wide until dropped (answered, or
/// abandoned with its stream).
struct InFlight(Arc<Broker>);

impl InFlight {
    fn new(broker: &Arc<Broker>) -> InFlight {
        broker.metrics.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(broker.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.metrics.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn write<W: Sink>(wr: &mut W, frame: ResponseFrame, link: &Link) -> bool {
    let (broker, peer, transport) = (&link.broker, link.peer, link.transport);
    let timeout = broker.connections.limits().write_timeout;
    match tokio::time::timeout(timeout, wr.send_frame(frame)).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(%peer, transport, error = %e, "writing a native response failed");
            false
        }
        Err(_) => {
            Metrics::add(&broker.connections.counters.write_timeouts, 1);
            tracing::warn!(%peer, transport, "closing native stream: the client did not read its response in time");
            false
        }
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    admitted: Admitted,
    broker: Arc<Broker>,
    stop: watch::Receiver<bool>,
) {
    let link = Link {
        client: Client::direct(format!("/{}", peer.ip().to_canonical()), admitted.id),
        broker,
        peer,
        transport: "tcp",
    };
    tracing::debug!(%peer, transport = link.transport, id = admitted.id, "native connection open");
    let (rd, mut wr) = stream.into_split();
    // a frame header and a small body (or several) in one read
    let rd = tokio::io::BufReader::with_capacity(8 * 1024, rd);
    let (hello, _) = watch::channel(None);
    let end = serve_stream(&link, rd, &mut wr, Start::Hello(hello), stop).await;
    tracing::debug!(%peer, transport = link.transport, id = admitted.id, ?end, "native connection closed");
    drop(admitted);
    Metrics::add(&link.broker.metrics.connections_closed, 1);
}

/// Serves one stream of frames (a TCP connection, or one QUIC stream) until
/// the peer finishes its side and every request is answered, a frame is
/// refused, writing fails, or shutdown begins (answering what was asked
/// first). Requests are served concurrently, up to [`MAX_IN_FLIGHT`], and
/// answered as they complete; frames pushed through the stream's
/// [`StreamCtx::pushes`] are written as they come.
pub(crate) async fn serve_stream<R, W>(
    link: &Link,
    rd: R,
    wr: &mut W,
    start: Start,
    mut stop: watch::Receiver<bool>,
) -> StreamEnd
where
    R: AsyncRead + Unpin + Send + 'static,
    W: Sink,
{
    let (broker, peer, transport) = (&link.broker, link.peer, link.transport);
    let (tx, mut rx) = mpsc::channel(4);
    let logged_in = Arc::new(AtomicBool::new(matches!(start, Start::After(_))));
    let reader = AbortOnDrop(tokio::spawn(read_frames(
        rd,
        broker.clone(),
        tx,
        logged_in.clone(),
    )));
    let (push_tx, mut pushes) = mpsc::channel::<ResponseFrame>(subscribe::PUSH_QUEUE);
    let new_ctx = |session: Session| {
        Arc::new(StreamCtx {
            session,
            subs: subscribe::Subscriptions::new(push_tx.clone()),
        })
    };
    // between a hello and the end of the authentication it needs
    let mut pending: Option<(Session, crate::sasl::Session)> = None;
    let (mut ctx, mut hello) = match start {
        Start::Hello(tx) => (None, Some(tx)),
        Start::After(session) => (Some(new_ctx(session)), None),
    };
    let mut in_flight: FuturesUnordered<Served> = FuturesUnordered::new();
    // the peer closed its side, or shutdown began: answer what was asked
    // for (long polls end early at shutdown), read nothing more, then close
    let mut peer_done = false;
    let mut stopping = false;
    let mut muted: Option<tokio::time::Instant> = None;
    let end = loop {
        if peer_done && in_flight.is_empty() {
            break StreamEnd::Done;
        }
        // over a quota: nothing more is read for the wait (KIP-219)
        let throttle = link.client.throttle.swap(0, Ordering::Relaxed);
        if throttle > 0 {
            let until = tokio::time::Instant::now() + std::time::Duration::from_millis(throttle);
            muted = Some(muted.map_or(until, |m| m.max(until)));
        }
        let room_for_more = in_flight.len() < MAX_IN_FLIGHT && !peer_done && muted.is_none();
        tokio::select! {
            biased;
            _ = stop.changed(), if !stopping => {
                stopping = true;
                peer_done = true;
            }
            _ = tokio::time::sleep_until(muted.unwrap_or_else(tokio::time::Instant::now)), if muted.is_some() => {
                muted = None;
            }
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                match answer {
                    Answer::Frame(f) => if !write(wr, f, link).await { break StreamEnd::Done },
                    Answer::Nothing => {}
                    Answer::Fatal(e) => {
                        Metrics::add(&broker.metrics.malformed_requests, 1);
                        tracing::warn!(%peer, transport, error = %e.error, message = %e.message, "closing native connection");
                        let _ = write(wr, error_frame(&e), link).await;
                        break StreamEnd::Refused;
                    }
                }
            }
            Some(pushed) = pushes.recv() => {
                if !write(wr, pushed, link).await { break StreamEnd::Done }
            }
            incoming = rx.recv(), if room_for_more => {
                let (op, body, held) = match incoming {
                    None => {
                        peer_done = true;
                        continue;
                    }
                    Some(Incoming::Refused(e)) => {
                        Metrics::add(&broker.metrics.malformed_requests, 1);
                        tracing::warn!(%peer, transport, error = %e.error, message = %e.message, "closing native connection: bad frame");
                        let _ = write(wr, error_frame(&e), link).await;
                        break StreamEnd::Refused;
                    }
                    Some(Incoming::Frame { op, body, held }) => (op, body, held),
                };
                if broker.is_shutting_down() {
                    break StreamEnd::Done;
                }
                let Some(stream) = ctx.clone() else {
                    // The hello, and an authentication the server requires,
                    // are served before anything else is read.
                    // on the blocking pool, with the broker's bound on login
                    // work: PLAIN runs PBKDF2 (milliseconds), which would
                    // stall the shard's other connections
                    let (b, taken, from) = (broker.clone(), pending.take(), peer.ip());
                    let settled = broker.logins.run(move || match taken {
                        Some((mut session, mut auth)) => {
                            ops::authenticate(&b, from, &mut session, &mut auth, op, body)
                        }
                        None => ops::hello(&b, from, op, body),
                    })
                    .await
                    .unwrap_or_else(|e| {
                        Err(ErrorFrame {
                            correlation: 0,
                            error: ErrorCode::UNKNOWN_SERVER_ERROR,
                            message: format!("the hello or authentication step failed: {e}"),
                        })
                    });
                    match settled {
                        Ok(ops::Settled { answer, session, auth }) => {
                            if let Some(auth) = auth {
                                pending = Some((session, auth));
                            } else {
                                pending = None;
                                tracing::debug!(%peer, transport, client_id = %session.client_id, version = session.version, principal = %session.principal, "native session open");
                                ctx = Some(new_ctx(session.clone()));
                                // before the frame is let go: the reader
                                // then reads the next as a logged-in one
                                logged_in.store(true, Ordering::Release);
                                if let Some(tx) = hello.take() {
                                    tx.send_replace(Some(session));
                                }
                            }
                            if !write(wr, answer, link).await { break StreamEnd::Done }
                        }
                        Err(e) => {
                            tracing::info!(%peer, transport, error = %e.error, message = %e.message, "native hello or authentication refused");
                            if e.error == ErrorCode::AUTHENTICATION_FAILED {
                                broker.logins.hold_failure().await;
                            }
                            let _ = write(wr, error_frame(&e), link).await;
                            break StreamEnd::Refused;
                        }
                    }
                    drop(held);
                    continue;
                };
                if stream.session.expired(Instant::now()) {
                    Metrics::add(&broker.metrics.sasl_expired, 1);
                    let e = ErrorFrame {
                        correlation: proto::correlation_of(&body).unwrap_or(0),
                        error: ErrorCode::SESSION_EXPIRED,
                        message: "the authenticated session ended: connect and authenticate again".into(),
                    };
                    tracing::info!(%peer, transport, principal = %stream.session.principal, "closing native connection: its session ended");
                    let _ = write(wr, error_frame(&e), link).await;
                    break StreamEnd::Refused;
                }
                let counted = InFlight::new(broker);
                let b = broker.clone();
                let mut c = link.client.clone();
                c.principal = stream.session.principal.clone();
                in_flight.push(Box::pin(async move {
                    let answer = ops::serve(&b, &c, &stream, op, body).await;
                    drop(held);
                    drop(counted);
                    answer
                }));
            }
        }
    };
    drop(reader);
    drop(in_flight);
    end
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
