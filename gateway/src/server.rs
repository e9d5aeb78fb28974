//! Kafka listeners and connections. Every shard runs its own `SO_REUSEPORT`
//! listener on the same address, so the kernel spreads connections across
//! shards. A connection serves its requests in order (Kafka clients rely on
//! responses arriving in request order); a malformed frame closes only that
//! connection.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::broker::{Broker, Metrics};
use crate::connections::{Admitted, RequestRoom};
use crate::kafka::api::{dispatch, Client};
use crate::kafka::frame::{read_body, read_body_as_it_arrives, read_size, FrameError};
use crate::kafka::response::ResponseFrame;

/// Creates a listening socket with `SO_REUSEPORT` (and `SO_REUSEADDR`) set, so
/// several shards can listen on one address.
pub fn reuseport_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType};
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd = socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(std::io::Error::from)?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(std::io::Error::from)?;
    socket::setsockopt(&fd, sockopt::ReusePort, &true).map_err(std::io::Error::from)?;
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    match addr {
        SocketAddr::V4(a) => socket::bind(raw, &socket::SockaddrIn::from(a)),
        SocketAddr::V6(a) => socket::bind(raw, &socket::SockaddrIn6::from(a)),
    }
    .map_err(std::io::Error::from)?;
    socket::listen(
        &fd,
        socket::Backlog::new(1024).map_err(std::io::Error::from)?,
    )
    .map_err(std::io::Error::from)?;
    Ok(std::net::TcpListener::from(fd))
}

/// The first of a group of [`reuseport_listener`]s: refused, like any
/// listener, when another process already listens on `addr`. `SO_REUSEPORT`
/// alone would let this agent join that process's socket group, and the
/// kernel would then split new connections between the two processes
/// without a word. A plain socket is bound for a moment first to find out;
/// the shards' sockets that follow join only this one's group.
pub fn first_reuseport_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    if addr.port() != 0 {
        drop(
            std::net::TcpListener::bind(addr).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
            })?,
        );
    }
    reuseport_listener(addr)
}

/// Bytes a Kafka connection reads ahead (per connection).
const READ_BUFFER: usize = 8 * 1024;

/// A Kafka connection's byte stream: plain TCP, whose file-backed response
/// parts go out with `sendfile(2)`, or TLS, where they are read and
/// encrypted like the rest.
pub trait KafkaStream: AsyncRead + AsyncWrite + Unpin + Send {
    fn send(
        &mut self,
        resp: ResponseFrame,
    ) -> impl std::future::Future<Output = std::io::Result<()>> + Send;

    /// The principal the client's TLS certificate names (mutual TLS);
    /// `None` without a client certificate.
    fn tls_principal(&self) -> Option<Result<String, crate::kafka_tls::PrincipalError>> {
        None
    }
}

impl KafkaStream for TcpStream {
    async fn send(&mut self, resp: ResponseFrame) -> std::io::Result<()> {
        resp.write_to_tcp(self).await
    }
}

impl KafkaStream for tokio_rustls::server::TlsStream<TcpStream> {
    async fn send(&mut self, resp: ResponseFrame) -> std::io::Result<()> {
        resp.write_to(self).await?;
        self.flush().await
    }

    fn tls_principal(&self) -> Option<Result<String, crate::kafka_tls::PrincipalError>> {
        let certs = self.get_ref().1.peer_certificates()?;
        Some(crate::kafka_tls::principal_of(certs.first()?))
    }
}

/// Accepts Kafka connections until `stop` turns true, then returns;
/// connections already open finish their in-flight request and close.
/// With `tls`, every connection starts with a TLS handshake; a client that
/// does not complete one within [`crate::kafka_tls::HANDSHAKE_TIMEOUT`]
/// (a plaintext Kafka client, say) is disconnected.
pub async fn serve(
    listener: std::net::TcpListener,
    broker: Arc<Broker>,
    stop: watch::Receiver<bool>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    match tls {
        None => accept(listener, broker, stop, "Kafka", connection::<TcpStream>).await,
        Some(acceptor) => {
            let tls_connection =
                move |stream: TcpStream,
                      peer: SocketAddr,
                      admitted: Admitted,
                      broker: Arc<Broker>,
                      stop: watch::Receiver<bool>| {
                    let acceptor = acceptor.clone();
                    async move {
                        let handshake = tokio::time::timeout(
                            crate::kafka_tls::HANDSHAKE_TIMEOUT,
                            acceptor.accept(stream),
                        )
                        .await;
                        match handshake {
                            Ok(Ok(tls)) => connection(tls, peer, admitted, broker, stop).await,
                            Ok(Err(e)) => {
                                Metrics::add(&broker.metrics.tls_handshake_failures, 1);
                                Metrics::add(&broker.metrics.connections_closed, 1);
                                tracing::info!(%peer, error = %e, "closing connection: TLS handshake failed");
                            }
                            Err(_) => {
                                Metrics::add(&broker.metrics.tls_handshake_failures, 1);
                                Metrics::add(&broker.metrics.connections_closed, 1);
                                tracing::info!(%peer, "closing connection: no TLS handshake in time");
                            }
                        }
                    }
                };
            accept(listener, broker, stop, "Kafka (TLS)", tls_connection).await
        }
    }
}

/// The accept loop every TCP front end shares: admits each connection
/// under the broker's connection limits (one over a limit is closed at
/// once) and runs `serve` on it in a task of its own, until `stop` turns
/// true.
pub async fn accept<F, Fut>(
    listener: std::net::TcpListener,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    protocol: &'static str,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr, Admitted, Arc<Broker>, watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, protocol, "cannot register the listener");
            return;
        }
    };
    if !broker.clients_may_connect(&mut stop).await {
        return;
    }
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // On a dual-stack listener an IPv4 client arrives as
                    // ::ffff:a.b.c.d: its plain IPv4 form is what ACL hosts
                    // and the per-address limit name
                    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
                    // Over a limit: the stream is dropped, which closes it.
                    let Ok(admitted) = broker.connections.admit(peer.ip()) else {
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    Metrics::add(&broker.metrics.connections_opened, 1);
                    tokio::spawn(serve(stream, peer, admitted, broker.clone(), stop.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, protocol, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// Why a connection's next request did not arrive.
enum Next {
    Frame(Bytes, RequestRoom),
    Closed,
}

/// Reads the next request: the size, then room for it among the requests
/// being served broker-wide, then the body; all within the idle timeout.
///
/// Before the client logged in (`login_by`: when it must have), the
/// request takes no room in the broker-wide budget and its body is read
/// as it arrives: the caller caps its size, and the whole login must be
/// done by `login_by`.
async fn next_request<R: AsyncRead + Unpin>(
    stream: &mut R,
    broker: &Broker,
    peer: SocketAddr,
    max: usize,
    login_by: Option<tokio::time::Instant>,
) -> Result<Next, ()> {
    let idle = broker.connections.limits().idle_timeout;
    let read = async {
        let Some(size) = read_size(stream, max).await? else {
            return Ok(Next::Closed);
        };
        if login_by.is_some() {
            let body = read_body_as_it_arrives(stream, size).await?;
            return Ok(Next::Frame(body, RequestRoom::outside_budget()));
        }
        let room = broker.connections.room_for(size).await;
        let body = read_body(stream, size).await?;
        Ok::<_, FrameError>(Next::Frame(body, room))
    };
    let idle_by = tokio::time::Instant::now() + idle;
    let by = login_by.map_or(idle_by, |l| l.min(idle_by));
    match tokio::time::timeout_at(by, read).await {
        Ok(Ok(next)) => Ok(next),
        Ok(Err(e)) => {
            Metrics::add(&broker.metrics.malformed_requests, 1);
            tracing::warn!(%peer, error = %e, "closing connection: bad frame");
            Err(())
        }
        Err(_) if login_by.is_some_and(|l| l < idle_by) => {
            Metrics::add(&broker.connections.counters.login_timeouts, 1);
            tracing::info!(%peer, "closing connection: it did not authenticate within the login timeout (--login-timeout-ms)");
            Err(())
        }
        Err(_) => {
            Metrics::add(&broker.connections.counters.idle_closed, 1);
            tracing::debug!(%peer, idle_ms = idle.as_millis() as u64, "closing idle connection");
            Err(())
        }
    }
}

/// The largest request a connection may send now: until it authenticated,
/// only [`crate::sasl::MAX_UNAUTHENTICATED_REQUEST`] bytes.
fn max_request(broker: &Broker, sasl: Option<&crate::sasl::Session>) -> usize {
    match sasl {
        Some(s) if !s.authenticated() => broker
            .config
            .max_request_bytes
            .min(crate::sasl::MAX_UNAUTHENTICATED_REQUEST),
        _ => broker.config.max_request_bytes,
    }
}

/// What the SASL exchanges of `broker`'s listeners (Kafka and native)
/// check against, for a client at `peer`.
pub(crate) fn sasl_settings(broker: &Broker, peer: std::net::IpAddr) -> crate::sasl::Settings<'_> {
    crate::sasl::Settings {
        mechanisms: &broker.config.sasl_mechanisms,
        catalog: &broker.node.catalog,
        oauth: broker.config.oauthbearer.as_deref(),
        max_session: broker.config.sasl_max_session,
        passwords: &broker.logins.passwords,
        peer,
    }
}

/// Serves a request of the SASL exchange off the shard's thread: PLAIN
/// derives keys with thousands of PBKDF2 iterations (milliseconds each),
/// which on the shard would stall every other connection it serves, as a
/// burst of reconnecting clients would. SaslAuthenticate, which may check a
/// password or a token, runs on the broker's login threads
/// ([`crate::logins`]), the rest on the blocking pool.
async fn sasl_step(
    broker: &Arc<Broker>,
    session: &mut crate::sasl::Session,
    frame: &Bytes,
    peer: SocketAddr,
    now: std::time::Instant,
) -> Result<crate::sasl::Step, crate::kafka::api::DispatchError> {
    let (b, f) = (broker.clone(), frame.clone());
    let mut s = std::mem::take(session);
    let step = move || {
        let step = s.step(&sasl_settings(&b, peer.ip()), &f, now);
        (s, step)
    };
    let authenticating = frame
        .get(..2)
        .is_some_and(|k| i16::from_be_bytes([k[0], k[1]]) == ApiKey::SaslAuthenticate as i16);
    let stepped = if authenticating {
        broker.logins.run(step).await.map_err(|e| e.to_string())
    } else {
        tokio::task::spawn_blocking(step)
            .await
            .map_err(|e| e.to_string())
    };
    match stepped {
        Ok((s, step)) => {
            *session = s;
            step
        }
        // the step panicked or the runtime is going away: the connection
        // closes unauthenticated
        Err(e) => Ok(crate::sasl::Step::Close(format!(
            "the authentication step failed: {e}"
        ))),
    }
}

async fn connection<S: KafkaStream>(
    stream: S,
    peer: SocketAddr,
    admitted: Admitted,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
) {
    let mut client = Client::direct(format!("/{}", peer.ip().to_canonical()), admitted.id);
    match stream.tls_principal() {
        None => {}
        Some(Ok(principal)) => client.principal = Arc::from(principal),
        // served as no one rather than as whoever an unreadable name is
        Some(Err(e)) => {
            tracing::warn!(%peer, error = %e, "closing connection: its client certificate names no principal");
            drop(admitted);
            Metrics::add(&broker.metrics.connections_closed, 1);
            return;
        }
    }
    // Requests are read through a buffer: a size prefix and a small request
    // (or several pipelined ones) take one read instead of three; a body
    // larger than the buffer is read straight into its own memory.
    let mut stream = tokio::io::BufReader::with_capacity(READ_BUFFER, stream);
    let write_timeout = broker.connections.limits().write_timeout;
    // with SASL on, nothing but ApiVersions is served before the client
    // authenticated
    let mut sasl = (!broker.config.sasl_mechanisms.is_empty()).then(crate::sasl::Session::default);
    // until then, requests are small, outside the broker-wide budget, and
    // the connection is closed unless it authenticated
    let login_by = tokio::time::Instant::now() + broker.connections.limits().login_timeout;
    loop {
        // (a re-authentication is not a login: the client is known)
        let logging_in = sasl
            .as_ref()
            .is_some_and(|s| s.completed() == 0)
            .then_some(login_by);
        // Shutdown wins over a frame already buffered: once it begins, no
        // new request is dispatched (the partitions are being closed).
        let next = tokio::select! {
            biased;
            _ = stop.changed() => break,
            n = next_request(&mut stream, &broker, peer, max_request(&broker, sasl.as_ref()), logging_in) => n,
        };
        let (frame, room) = match next {
            Ok(Next::Frame(f, room)) => (f, room),
            Ok(Next::Closed) | Err(()) => break,
        };
        if broker.is_shutting_down() {
            break;
        }
        if let Some(session) = sasl.as_mut() {
            let settings = sasl_settings(&broker, peer.ip());
            let now = std::time::Instant::now();
            if !session.wants(&settings, &frame) {
                if session.expired(now) {
                    Metrics::add(&broker.metrics.sasl_expired, 1);
                    tracing::info!(%peer, user = session.user().unwrap_or_default(), "closing connection: its SASL session ended without re-authentication");
                    break;
                }
            } else {
                let before = session.completed();
                match sasl_step(&broker, session, &frame, peer, now).await {
                    Ok(crate::sasl::Step::Pass) => {}
                    Ok(crate::sasl::Step::Answer { frame: resp, close }) => {
                        drop(room);
                        if close {
                            broker.logins.hold_failure().await;
                        }
                        // counted before the answer leaves: a client that
                        // reads it sees the counters already moved
                        Metrics::add(&broker.metrics.sasl_failures, u64::from(close));
                        if session.completed() > before {
                            if let Some(user) = session.user() {
                                tracing::debug!(%peer, user, "SASL authenticated");
                                client.principal = Arc::from(format!("User:{user}"));
                            }
                            if before > 0 {
                                Metrics::add(&broker.metrics.sasl_reauthentications, 1);
                            }
                        }
                        let sent =
                            tokio::time::timeout(write_timeout, stream.get_mut().send(resp)).await;
                        if close || !matches!(sent, Ok(Ok(()))) {
                            break;
                        }
                        session.answered(std::time::Instant::now());
                        continue;
                    }
                    Ok(crate::sasl::Step::Close(reason)) => {
                        broker.logins.hold_failure().await;
                        Metrics::add(&broker.metrics.sasl_failures, 1);
                        tracing::info!(%peer, %reason, "closing connection: not authenticated");
                        break;
                    }
                    Err(e) => {
                        Metrics::add(&broker.metrics.malformed_requests, 1);
                        tracing::warn!(%peer, error = %e, "closing connection: request not served");
                        break;
                    }
                }
            }
        }
        broker.metrics.in_flight.fetch_add(1, Ordering::SeqCst);
        let request_bytes = frame.len() as u64 + 4;
        let served = dispatch(&broker, &client, frame).await;
        broker.metrics.in_flight.fetch_sub(1, Ordering::SeqCst);
        drop(room);
        let response_bytes = match &served {
            Ok(Some(resp)) => resp.len() as u64 + 4,
            _ => 0,
        };
        broker.client_zones.count(
            broker.config.rack.as_deref(),
            client.zone.get().as_deref(),
            request_bytes,
            response_bytes,
        );
        match served {
            Ok(Some(resp)) => {
                match tokio::time::timeout(write_timeout, stream.get_mut().send(resp)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "writing response failed");
                        break;
                    }
                    Err(_) => {
                        Metrics::add(&broker.connections.counters.write_timeouts, 1);
                        tracing::warn!(%peer, timeout_ms = write_timeout.as_millis() as u64, "closing connection: the client did not read its response in time");
                        break;
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                Metrics::add(&broker.metrics.malformed_requests, 1);
                tracing::warn!(%peer, error = %e, "closing connection: request not served");
                break;
            }
        }
        // over a quota: the next request stays unread for the throttle time
        let throttle = client.throttle.swap(0, Ordering::Relaxed);
        if throttle > 0 {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = tokio::time::sleep(std::time::Duration::from_millis(throttle)) => {}
            }
        }
    }
    broker.fetch_sessions.close_connection(client.connection);
    drop(admitted);
    Metrics::add(&broker.metrics.connections_closed, 1);
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
