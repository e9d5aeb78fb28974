//! Kafka listeners and connections. Every shard runs its own `SO_REUSEPORT`
//! listener on the same address, so the kernel spreads connections across
//! shards. A connection serves its requests in order (Kafka clients rely on
//! responses arriving in request order); a malformed frame closes only that
//! connection.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::broker::{Broker, Metrics};
use crate::kafka::api::dispatch;
use crate::kafka::frame::read_frame;

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

/// Accepts connections until `stop` turns true, then returns; connections
/// already open finish their in-flight request and close.
pub async fn serve(
    listener: std::net::TcpListener,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot register the Kafka listener");
            return;
        }
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    Metrics::add(&broker.metrics.connections_opened, 1);
                    tokio::spawn(connection(stream, peer, broker.clone(), stop.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
) {
    let host = format!("/{}", peer.ip());
    let max = broker.config.max_request_bytes;
    loop {
        let frame = tokio::select! {
            f = read_frame(&mut stream, max) => f,
            _ = stop.changed() => break,
        };
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                Metrics::add(&broker.metrics.malformed_requests, 1);
                tracing::warn!(%peer, error = %e, "closing connection: bad frame");
                break;
            }
        };
        broker
            .metrics
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let served = dispatch(&broker, &host, frame).await;
        broker
            .metrics
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        match served {
            Ok(Some(resp)) => {
                if let Err(e) = resp.write_to_tcp(&mut stream).await {
                    tracing::debug!(%peer, error = %e, "writing response failed");
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                Metrics::add(&broker.metrics.malformed_requests, 1);
                tracing::warn!(%peer, error = %e, "closing connection: request not served");
                break;
            }
        }
    }
    Metrics::add(&broker.metrics.connections_closed, 1);
}
