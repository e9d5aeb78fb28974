//! One connection to one server: the hello handshake, then pipelined
//! requests whose answers may come back in any order.
//!
//! A connection is three pieces: the [`Conn`] handle callers share, a
//! writer task that owns the write half, and a reader task that owns the
//! read half. What they keep, step by step:
//!
//! 1. A request is registered in the pending table *before* its frame is
//!    queued for writing, so its answer can never arrive unregistered.
//! 2. The reader task alone completes pending requests from the network,
//!    matching answers by correlation id. An answer nobody waits for any
//!    more (its caller timed out or gave up) is dropped.
//! 3. Closing marks the table closed and fails every entry under the same
//!    lock registration takes: a request is either registered before the
//!    close, and then failed by it, or sees the mark and fails at once.
//!    Nothing waits on a dead connection.
//! 4. An `ErrorFrame` (op 0x7F) fails the request it names with
//!    [`Error::Server`], or every request if it names correlation 0; the
//!    server closes the connection after it, so no new request is accepted
//!    from then on.
//! 5. A frame header announcing a body longer than the client's limit is
//!    refused before anything is allocated for it, and kills the
//!    connection (the stream cannot be resynchronised).
//! 6. The writer task writes frames in queue order and flushes when the
//!    queue is momentarily empty, so pipelined requests share syscalls; the
//!    queue is bounded, so a slow socket pushes back on callers.
//! 7. Dropping the [`Conn`] stops both tasks and closes the socket.
//!
//! The halves are generic over `AsyncRead`/`AsyncWrite`, so a transport is
//! anything that yields two byte streams: a TCP connection, or a
//! bidirectional QUIC stream. Over QUIC the hello goes on the connection's
//! first stream, and [`Conn::open_stream`] opens further streams that share
//! it, each a [`Conn`] of its own.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::auth::{Credentials, ScramClient};
use crate::bootstrap::{Address, Transport};
use crate::error::Error;
use crate::frame::{FrameHeader, HEADER_LEN};
use crate::proto::{
    self, op, ErrorCode, ErrorFrame, FrameParts, Hello, HelloResponse, Message, RESPONSE,
};
use crate::quic::QuicClient;

/// Frames queued for the writer before callers wait.
const WRITE_QUEUE: usize = 256;
/// Frames coalesced into one flush at most.
const MAX_COALESCE: usize = 64;
const READ_BUFFER: usize = 64 * 1024;
const WRITE_BUFFER: usize = 64 * 1024;

/// How connections are made.
#[derive(Debug, Clone)]
pub(crate) struct ConnOptions {
    pub client_id: String,
    /// Bounds the TCP connect and the hello exchange together.
    pub connect_timeout: Duration,
    /// Longest answer body accepted from a server.
    pub max_frame_bytes: u32,
    /// The QUIC endpoint and TLS settings; needed by [`Transport::Quic`].
    pub quic: Option<QuicClient>,
    /// Who to log in as, on a server that requires it.
    pub credentials: Option<Credentials>,
}

/// A request of the protocol and the answer it gets.
pub(crate) trait Call: Message {
    type Response: Message;
    fn set_correlation(&mut self, correlation: u32);
}

macro_rules! calls {
    ($($req:ident => $resp:ident),* $(,)?) => {
        $(impl Call for proto::$req {
            type Response = proto::$resp;
            fn set_correlation(&mut self, correlation: u32) {
                self.correlation = correlation;
            }
        })*
    };
}

calls! {
    Ping => Pong,
    Metadata => MetadataResponse,
    CreateTopic => CreateTopicResponse,
    DeleteTopic => DeleteTopicResponse,
    InitProducer => InitProducerResponse,
    Produce => ProduceResponse,
    Fetch => FetchResponse,
    ListOffsets => ListOffsetsResponse,
    CommitOffsets => CommitOffsetsResponse,
    FetchOffsets => FetchOffsetsResponse,
    Subscribe => SubscribeResponse,
    Unsubscribe => UnsubscribeResponse,
    FindCoordinator => FindCoordinatorResponse,
    JoinGroup => JoinGroupResponse,
    Heartbeat => HeartbeatResponse,
    LeaveGroup => LeaveGroupResponse,
    FindTxnCoordinator => FindTxnCoordinatorResponse,
    InitTxn => InitTxnResponse,
    AddTxnPartitions => AddTxnPartitionsResponse,
    AddTxnOffsets => AddTxnOffsetsResponse,
    TxnOffsetCommit => TxnOffsetCommitResponse,
    EndTxn => EndTxnResponse,
    FetchIsolated => FetchIsolatedResponse,
}

impl Call for proto::TxnProduce {
    type Response = proto::TxnProduceResponse;
    fn set_correlation(&mut self, correlation: u32) {
        self.produce.correlation = correlation;
    }
}

/// A frame as read: operation code and body (correlation id included).
#[derive(Debug)]
pub(crate) struct Frame {
    pub op: u8,
    pub body: Bytes,
}

type Reply = oneshot::Sender<Result<Frame, Error>>;

/// Where a subscription's pushes go.
pub(crate) type Pushes = mpsc::UnboundedReceiver<proto::Push>;

#[derive(Default)]
struct Pending {
    waiting: HashMap<u32, Reply>,
    /// Open subscriptions. Credit bounds what the server pushes, so these
    /// queues are bounded by what the subscriber granted.
    subscriptions: HashMap<u32, mpsc::UnboundedSender<proto::Push>>,
    /// Set once the connection is closing: nothing new is registered.
    closed_at: Option<Instant>,
}

/// What the handle and both tasks share.
struct Shared {
    pending: Mutex<Pending>,
    addr: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic elsewhere cannot leave the table half-updated: each
        // operation is a single insert or remove.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(&self, correlation: u32) -> Result<oneshot::Receiver<Result<Frame, Error>>, Error> {
        let mut p = self.lock();
        if p.closed_at.is_some() {
            return Err(Error::Closed);
        }
        let (tx, rx) = oneshot::channel();
        p.waiting.insert(correlation, tx);
        Ok(rx)
    }

    fn forget(&self, correlation: u32) {
        self.lock().waiting.remove(&correlation);
    }

    /// Hands `result` to the request waiting for `correlation`, if any.
    fn complete(&self, correlation: u32, result: Result<Frame, Error>) -> bool {
        let reply = self.lock().waiting.remove(&correlation);
        match reply {
            Some(tx) => {
                // The caller may have given up in the meantime: nothing to do.
                let _ = tx.send(result);
                true
            }
            None => false,
        }
    }

    /// Accepts no new request; the waiting ones stay until the close.
    fn stop_accepting(&self) {
        self.lock().closed_at.get_or_insert_with(Instant::now);
    }

    /// Fails every waiting request with `why`, ends every subscription,
    /// and accepts no new request.
    fn close(&self, why: &Error) {
        let waiting = {
            let mut p = self.lock();
            p.closed_at.get_or_insert_with(Instant::now);
            p.subscriptions.clear();
            std::mem::take(&mut p.waiting)
        };
        for (_, tx) in waiting {
            let _ = tx.send(Err(why.clone()));
        }
    }
}

/// A frame for the writer task (its buffers, written one after the
/// other), and who wants to know it was written.
struct Outgoing {
    frame: FrameParts,
    written: Option<oneshot::Sender<()>>,
}

/// What the server said about itself in its hello answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    pub node_id: u32,
    pub version: u16,
    /// The longest request body the server accepts.
    pub max_frame_bytes: u32,
    pub server: String,
}

/// A live connection to one server (or one stream of a QUIC connection to
/// it). See the module docs for how it works.
pub(crate) struct Conn {
    shared: Arc<Shared>,
    writer: mpsc::Sender<Outgoing>,
    reader: JoinHandle<()>,
    next_correlation: AtomicU32,
    next_subscription: AtomicU32,
    info: ServerInfo,
    /// The client's limit on answer bodies.
    max_frame_bytes: u32,
    /// The QUIC connection this stream belongs to; `None` on TCP.
    quic: Option<quinn::Connection>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The writer task ends when `writer` drops with us.
        self.reader.abort();
        self.shared.close(&Error::Closed);
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("addr", &self.shared.addr)
            .field("info", &self.info)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Sends one message of an authentication exchange and reads the
/// server's, as text.
async fn authenticate<R, W>(
    read: &mut R,
    write: &mut W,
    message: proto::Authenticate,
    max_frame_bytes: u32,
) -> Result<String, Error>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    write.write_all(&message.to_frame()).await?;
    write.flush().await?;
    let frame = read_frame(read, max_frame_bytes)
        .await?
        .ok_or(Error::Closed)?;
    if frame.op == op::ERROR {
        let e = decode::<ErrorFrame>(frame)?;
        return Err(refusal(e.error, e.message));
    }
    let answer = decode::<proto::AuthenticateResponse>(frame)?;
    if answer.error != ErrorCode::NONE {
        return Err(refusal(answer.error, String::new()));
    }
    String::from_utf8(answer.auth_bytes.to_vec())
        .map_err(|_| Error::Protocol("a SCRAM message that is not UTF-8".into()))
}

/// Connects to `addr` and says hello.
pub(crate) async fn connect(
    addr: &Address,
    transport: Transport,
    options: &ConnOptions,
) -> Result<Conn, Error> {
    let name = addr.to_string();
    let as_connect_error = |e: Error| match e {
        Error::Io(source) => Error::Connect {
            addr: name.clone(),
            source,
        },
        other => other,
    };
    let attempt = async {
        match transport {
            Transport::Tcp => {
                let stream = TcpStream::connect((addr.host.as_str(), addr.port)).await?;
                stream.set_nodelay(true)?;
                let (read, write) = stream.into_split();
                Conn::handshake(read, write, name.clone(), options).await
            }
            Transport::Quic => {
                let quic = options.quic.as_ref().ok_or_else(|| {
                    Error::Config("aero+quic:// needs the client's QUIC settings".into())
                })?;
                let connection = quic.connect(addr).await?;
                let (send, recv) = connection
                    .open_bi()
                    .await
                    .map_err(|e| Error::Io(Arc::new(e.into())))?;
                let mut conn = Conn::handshake(recv, send, name.clone(), options).await?;
                conn.quic = Some(connection);
                Ok(conn)
            }
        }
    };
    match tokio::time::timeout(options.connect_timeout, attempt).await {
        Ok(result) => result.map_err(as_connect_error),
        Err(_) => Err(Error::Connect {
            addr: name.clone(),
            source: Arc::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no hello answer within {:?}", options.connect_timeout),
            )),
        }),
    }
}

impl Conn {
    /// Says hello over the two halves of a fresh connection and, once the
    /// server agreed on a version, starts the reader and writer tasks.
    pub(crate) async fn handshake<R, W>(
        read: R,
        mut write: W,
        addr: String,
        options: &ConnOptions,
    ) -> Result<Conn, Error>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let mut read = BufReader::with_capacity(READ_BUFFER, read);
        let in_hello = match &options.credentials {
            Some(c) => c.hello_message()?,
            None => None,
        };
        let (auth_mechanism, auth_bytes) = in_hello
            .map(|(m, b)| (m, Bytes::from(b)))
            .unwrap_or_default();
        let hello = Hello {
            correlation: 1,
            min_version: proto::MIN_VERSION,
            max_version: proto::MAX_VERSION,
            client_id: options.client_id.clone(),
            auth_mechanism,
            auth_bytes,
        };
        write.write_all(&hello.to_frame()).await?;
        write.flush().await?;
        let frame = read_frame(&mut read, options.max_frame_bytes)
            .await?
            .ok_or(Error::Closed)?;
        if frame.op == op::ERROR {
            let e = decode::<ErrorFrame>(frame)?;
            return Err(refusal(e.error, e.message));
        }
        let answer = decode::<HelloResponse>(frame)?;
        if answer.error != ErrorCode::NONE {
            return Err(refusal(answer.error, answer.server));
        }
        if !(proto::MIN_VERSION..=proto::MAX_VERSION).contains(&answer.version) {
            return Err(Error::UnsupportedVersion(format!(
                "the server chose version {}",
                answer.version
            )));
        }
        let info = ServerInfo {
            node_id: answer.node_id,
            version: answer.version,
            max_frame_bytes: answer.max_frame_bytes,
            server: answer.server,
        };
        let mut correlation = 2;
        if let Some(Credentials::Scram {
            mechanism,
            user,
            password,
        }) = &options.credentials
        {
            // SCRAM's two round trips, before any request
            let mut step = |message: String| {
                let a = proto::Authenticate {
                    correlation,
                    mechanism: mechanism.name().to_string(),
                    auth_bytes: Bytes::from(message),
                };
                correlation += 1;
                a
            };
            let (x, first) = ScramClient::start(*mechanism, user, password)?;
            let server_first =
                authenticate(&mut read, &mut write, step(first), options.max_frame_bytes).await?;
            let (fin, expected) = x.answer(&server_first)?;
            let server_final =
                authenticate(&mut read, &mut write, step(fin), options.max_frame_bytes).await?;
            ScramClient::verify(&server_final, &expected)?;
        }
        Ok(Conn::start(
            read,
            write,
            addr,
            info,
            options.max_frame_bytes,
            correlation,
        ))
    }

    /// Starts the reader and writer tasks of a stream on which the hello
    /// is said (or, for [`Conn::open_stream`], needs not be).
    fn start<R, W>(
        read: R,
        write: W,
        addr: String,
        info: ServerInfo,
        max_frame_bytes: u32,
        first_correlation: u32,
    ) -> Conn
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            addr,
        });
        let (writer, queue) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(write_frames(write, queue, Arc::clone(&shared)));
        let reader = tokio::spawn(read_frames(read, Arc::clone(&shared), max_frame_bytes));
        Conn {
            shared,
            writer,
            reader,
            next_correlation: AtomicU32::new(first_correlation),
            next_subscription: AtomicU32::new(1),
            info,
            max_frame_bytes,
            quic: None,
        }
    }

    /// Opens another bidirectional stream on this connection's QUIC
    /// connection and returns a handle for requests on it: the same calls
    /// as on `self`, but no hello (the stream shares the version and client
    /// id of the connection's hello, and [`Conn::info`]). `Ok(None)` on TCP,
    /// where a connection is one stream.
    ///
    /// Streams are independent: answers on one never wait behind another's
    /// (a long-polling fetch there holds up nothing here), and a stream's
    /// correlation ids are its own. That is what subscriptions use: one
    /// stream per subscription, so partitions never block each other, and
    /// frames the server pushes for a subscription arrive on its stream.
    /// (The reader task routes answers by correlation id, and pushed
    /// frames by their subscription id.)
    ///
    /// Dropping the handle finishes the stream; the QUIC connection lives
    /// while any handle to it does, and a bad frame on any stream closes
    /// it, failing every stream. The server allows a few hundred open
    /// streams per connection; past that, opening waits for one to close.
    pub(crate) async fn open_stream(&self) -> Result<Option<Conn>, Error> {
        let Some(quic) = &self.quic else {
            return Ok(None);
        };
        if self.is_closed() {
            return Err(Error::Closed);
        }
        let (send, recv) = quic
            .open_bi()
            .await
            .map_err(|e| Error::Io(Arc::new(e.into())))?;
        let mut conn = Conn::start(
            recv,
            send,
            self.shared.addr.clone(),
            self.info.clone(),
            self.max_frame_bytes,
            1,
        );
        conn.quic = Some(quic.clone());
        Ok(Some(conn))
    }

    pub(crate) fn info(&self) -> &ServerInfo {
        &self.info
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.shared.lock().closed_at.is_some()
    }

    /// When the connection stopped taking requests, if it did.
    pub(crate) fn closed_at(&self) -> Option<Instant> {
        self.shared.lock().closed_at
    }

    fn correlation(&self) -> u32 {
        loop {
            // 0 means "no request" in an ErrorFrame: never use it.
            let c = self.next_correlation.fetch_add(1, Ordering::Relaxed);
            if c != 0 {
                return c;
            }
        }
    }

    fn frame_of<R: Call>(&self, request: &mut R) -> Result<(u32, FrameParts), Error> {
        let correlation = self.correlation();
        request.set_correlation(correlation);
        let frame = request.to_frame_parts();
        let body = frame.total - HEADER_LEN;
        if body > self.info.max_frame_bytes as usize {
            return Err(Error::TooLarge {
                what: "a request",
                size: body,
                max: self.info.max_frame_bytes as usize,
            });
        }
        Ok((correlation, frame))
    }

    /// Sends `request` and waits up to `timeout` for its answer.
    pub(crate) async fn call<R: Call>(
        &self,
        mut request: R,
        timeout: Duration,
    ) -> Result<R::Response, Error> {
        let (correlation, frame) = self.frame_of(&mut request)?;
        let answer = self.shared.register(correlation)?;
        // Forgets the request however this future ends (timeout, drop).
        let _forget = Forget {
            shared: &self.shared,
            correlation,
        };
        let exchange = async {
            self.writer
                .send(Outgoing {
                    frame,
                    written: None,
                })
                .await
                .map_err(|_| Error::Closed)?;
            answer.await.map_err(|_| Error::Closed)?
        };
        let frame = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| Error::Timeout)??;
        decode::<R::Response>(frame)
    }

    /// Sends a request that gets no answer (a produce with acks 0) and
    /// waits until it is written to the socket.
    pub(crate) async fn send_only<R: Call>(
        &self,
        mut request: R,
        timeout: Duration,
    ) -> Result<(), Error> {
        let (_, frame) = self.frame_of(&mut request)?;
        self.write_only(frame, timeout).await
    }
}

impl Conn {
    /// Opens a subscription (its id chosen here) and returns the answer
    /// and the queue its pushes arrive on. The queue ends when the
    /// subscription fails, is closed, or the connection goes away.
    pub(crate) async fn subscribe(
        &self,
        mut request: proto::Subscribe,
        timeout: Duration,
    ) -> Result<(proto::SubscribeResponse, Pushes), Error> {
        let id = self.next_subscription.fetch_add(1, Ordering::Relaxed);
        request.subscription = id;
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut p = self.shared.lock();
            if p.closed_at.is_some() {
                return Err(Error::Closed);
            }
            // registered before the request goes out: a push can follow
            // the answer closely
            p.subscriptions.insert(id, tx);
        }
        let answer = self.call(request, timeout).await;
        if !matches!(&answer, Ok(a) if a.error == ErrorCode::NONE) {
            self.shared.lock().subscriptions.remove(&id);
        }
        Ok((answer?, rx))
    }

    /// Grants a subscription more bytes (no answer comes).
    pub(crate) async fn grant(
        &self,
        subscription: u32,
        bytes: u32,
        timeout: Duration,
    ) -> Result<(), Error> {
        let frame = proto::Credit {
            subscription,
            bytes,
        }
        .to_frame_parts();
        self.write_only(frame, timeout).await
    }

    /// Ends a subscription; its queue ends after the pushes sent before.
    pub(crate) async fn unsubscribe(
        &self,
        subscription: u32,
        timeout: Duration,
    ) -> Result<ErrorCode, Error> {
        let answer = self
            .call(
                proto::Unsubscribe {
                    correlation: 0,
                    subscription,
                },
                timeout,
            )
            .await;
        self.shared.lock().subscriptions.remove(&subscription);
        Ok(answer?.error)
    }

    async fn write_only(&self, frame: FrameParts, timeout: Duration) -> Result<(), Error> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        let (written, was_written) = oneshot::channel();
        let send = async {
            self.writer
                .send(Outgoing {
                    frame,
                    written: Some(written),
                })
                .await
                .map_err(|_| Error::Closed)?;
            was_written.await.map_err(|_| Error::Closed)
        };
        tokio::time::timeout(timeout, send)
            .await
            .map_err(|_| Error::Timeout)?
    }
}

struct Forget<'a> {
    shared: &'a Shared,
    correlation: u32,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.shared.forget(self.correlation);
    }
}

/// The error for a hello the server refused.
fn refusal(code: ErrorCode, message: String) -> Error {
    if code == ErrorCode::UNSUPPORTED_VERSION {
        Error::UnsupportedVersion(message)
    } else {
        Error::server(code, message)
    }
}

/// Decodes an answer, checking it is the operation expected.
fn decode<M: Message>(frame: Frame) -> Result<M, Error> {
    if frame.op != M::OP {
        return Err(Error::Protocol(format!(
            "expected an answer of operation {:#04x}, got operation {:#04x}",
            M::OP,
            frame.op
        )));
    }
    M::decode_body(frame.body)
        .map_err(|e| Error::Protocol(format!("undecodable body of operation {:#04x}: {e}", M::OP)))
}

/// Reads one frame; `Ok(None)` at a clean end of stream between frames.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    read: &mut R,
    max_body: u32,
) -> Result<Option<Frame>, Error> {
    let mut head = [0u8; HEADER_LEN];
    let first = read.read(&mut head).await?;
    if first == 0 {
        return Ok(None);
    }
    read.read_exact(&mut head[first..]).await?;
    let header = FrameHeader::decode(&head, max_body)
        .map_err(|e| Error::Protocol(format!("bad frame header: {e}")))?;
    // The length was checked against `max_body` above, so this allocation
    // is bounded by the client's own limit. The body is read into exactly
    // its size: `read_to_end` would grow (and copy) the buffer once it is
    // full, to look for the end of the stream.
    let len = header.len as usize;
    let mut body = BytesMut::with_capacity(len);
    let mut rest = read.take(u64::from(header.len));
    while body.len() < len {
        if rest.read_buf(&mut body).await? == 0 {
            return Err(Error::Io(Arc::new(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the stream ended {} bytes into a {len}-byte frame body",
                    body.len()
                ),
            ))));
        }
    }
    Ok(Some(Frame {
        op: header.op,
        body: body.freeze(),
    }))
}

async fn read_frames<R: AsyncRead + Unpin>(mut read: R, shared: Arc<Shared>, max_body: u32) {
    let why = loop {
        match read_frame(&mut read, max_body).await {
            Ok(Some(frame)) => {
                if let Err(e) = dispatch(&shared, frame) {
                    break e;
                }
            }
            Ok(None) => break Error::Closed,
            Err(e) => break e,
        }
    };
    tracing::debug!(addr = %shared.addr, error = %why, "native connection closed");
    let why = match why {
        // An I/O error is the connection's end, not the request's fault.
        Error::Io(_) => Error::Closed,
        other => other,
    };
    shared.close(&why);
}

/// Routes one frame read from the server to the request it answers.
fn dispatch(shared: &Shared, frame: Frame) -> Result<(), Error> {
    if frame.op == op::ERROR {
        let e = decode::<ErrorFrame>(frame)?;
        tracing::debug!(addr = %shared.addr, code = %e.error, message = %e.message, "error frame");
        let err = Error::server(e.error, e.message);
        if e.correlation == 0 {
            shared.close(&err);
        } else {
            shared.complete(e.correlation, Err(err));
            shared.stop_accepting();
        }
        return Ok(());
    }
    if frame.op == op::PUSH | RESPONSE {
        let push = decode::<proto::Push>(frame)?;
        let mut p = shared.lock();
        let id = push.subscription;
        let ended = push.error != ErrorCode::NONE;
        if let Some(tx) = p.subscriptions.get(&id) {
            // the subscriber may have stopped listening: nothing to do
            let _ = tx.send(push);
        }
        if ended {
            p.subscriptions.remove(&id);
        }
        return Ok(());
    }
    if frame.op & RESPONSE == 0 {
        return Err(Error::Protocol(format!(
            "the server sent operation {:#04x}, which is not an answer",
            frame.op
        )));
    }
    let Some(correlation) = proto::correlation_of(&frame.body) else {
        return Err(Error::Protocol(format!(
            "an answer of operation {:#04x} has no correlation id",
            frame.op
        )));
    };
    if !shared.complete(correlation, Ok(frame)) {
        tracing::debug!(addr = %shared.addr, correlation, "answer to a request nobody waits for");
    }
    Ok(())
}

async fn write_frames<W: AsyncWrite + Unpin>(
    write: W,
    mut queue: mpsc::Receiver<Outgoing>,
    shared: Arc<Shared>,
) {
    // A socket that takes many buffers in one call (TCP) is given every
    // part of every frame queued, as they are: no copy, one system call
    // for many frames. Other streams (QUIC's, TLS) get the parts through a
    // buffer that gathers small frames.
    let vectored = write.is_write_vectored();
    let mut write = BufWriter::with_capacity(WRITE_BUFFER, write);
    let mut parts: VecDeque<Bytes> = VecDeque::new();
    let mut written = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        let mut count = 0;
        let result = async {
            while let Some(out) = next.take() {
                if vectored {
                    parts.extend(out.frame.parts.into_iter().filter(|p| !p.is_empty()));
                } else {
                    // A part at least as large as the buffer goes to the
                    // stream as it is (once what the buffer holds went first).
                    for part in &out.frame.parts {
                        write.write_all(part).await?;
                    }
                }
                written.extend(out.written);
                count += 1;
                if count < MAX_COALESCE {
                    next = queue.try_recv().ok();
                }
            }
            write_parts(write.get_mut(), &mut parts).await?;
            write.flush().await
        }
        .await;
        match result {
            Ok(()) => {
                for tx in written.drain(..) {
                    let _ = tx.send(());
                }
            }
            Err(e) => {
                tracing::debug!(addr = %shared.addr, error = %e, "writing to a native connection failed");
                shared.close(&Error::Closed);
                return;
            }
        }
    }
    let _ = write.shutdown().await;
}

/// Writes `parts` with vectored writes until none is left.
async fn write_parts<W: AsyncWrite + Unpin>(
    write: &mut W,
    parts: &mut VecDeque<Bytes>,
) -> std::io::Result<()> {
    /// Linux takes at most 1,024 buffers per call.
    const MAX_SLICES: usize = 1024;
    while !parts.is_empty() {
        let slices: Vec<std::io::IoSlice<'_>> = parts
            .iter()
            .take(MAX_SLICES)
            .map(|p| std::io::IoSlice::new(p))
            .collect();
        let mut n = write.write_vectored(&slices).await?;
        drop(slices);
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let Some(front) = parts.front_mut() else {
                break;
            };
            if n >= front.len() {
                n -= front.len();
                parts.pop_front();
            } else {
                bytes::Buf::advance(front, n);
                n = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
