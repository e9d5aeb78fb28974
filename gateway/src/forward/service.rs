//! The owner's side: serves requests other agents forward to this one as
//! if its own client had sent them, with the principal the forwarder
//! names. So only a current member of the cluster may forward: the peer's
//! certificate must name one, on connecting and on every request (a node
//! removed from the cluster keeps its certificate, as nothing revokes it).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use futures::future::BoxFuture;
use metastore::network::services::{ClusterService, PeerCertificate};
use metastore::ClusterControl;
use tokio::sync::Notify;

use super::client::Metrics;
use super::{MAX_HOST_BYTES, MAX_PRINCIPAL_BYTES};
use crate::broker::Broker;
use crate::connections::RequestRoom;
use crate::kafka::api::{dispatch, Client};

/// Serves requests other agents forward to this one.
pub struct ForwardService {
    broker: Weak<Broker>,
}

impl ForwardService {
    pub fn new(broker: &Arc<Broker>) -> Arc<ForwardService> {
        Arc::new(ForwardService {
            broker: Arc::downgrade(broker),
        })
    }
}

/// Why a forwarded request was refused before it was served (the stream is
/// reset; the forwarder answers its client NOT_LEADER_OR_FOLLOWER).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("the stream ended early: {0}")]
    Read(#[from] quinn::ReadExactError),
    #[error("a forwarded request of {len} bytes exceeds socket.request.max.bytes ({max})")]
    TooLarge { len: usize, max: usize },
    #[error("{what} of {len} bytes is over its limit")]
    FieldTooLong { what: &'static str, len: usize },
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
}

/// Reads one forwarded request; its bytes count against the broker's
/// `queued.max.request.bytes` like a client's (the room is held until the
/// request is served).
async fn read_request(
    broker: &Broker,
    recv: &mut quinn::RecvStream,
) -> Result<(String, String, Bytes, RequestRoom), Refused> {
    let max_frame = broker.config.max_request_bytes;
    let host = read_field(recv, MAX_HOST_BYTES, "client host").await?;
    let principal = read_field(recv, MAX_PRINCIPAL_BYTES, "principal").await?;
    let mut len = [0u8; 4];
    recv.read_exact(&mut len).await?;
    let frame_len = usize::try_from(u32::from_be_bytes(len)).unwrap_or(usize::MAX);
    if frame_len > max_frame {
        return Err(Refused::TooLarge {
            len: frame_len,
            max: max_frame,
        });
    }
    let room = broker.connections.room_for(frame_len).await;
    let mut frame = vec![0u8; frame_len];
    recv.read_exact(&mut frame).await?;
    Ok((host, principal, frame.into(), room))
}

/// A `[u16 length][bytes]` field of at most `max` bytes.
async fn read_field(
    recv: &mut quinn::RecvStream,
    max: usize,
    what: &'static str,
) -> Result<String, Refused> {
    let mut len = [0u8; 2];
    recv.read_exact(&mut len).await?;
    let len = usize::from(u16::from_be_bytes(len));
    if len > max {
        return Err(Refused::FieldTooLong { what, len });
    }
    let mut bytes = vec![0u8; len];
    recv.read_exact(&mut bytes).await?;
    String::from_utf8(bytes).map_err(|_| Refused::NotUtf8 { what })
}

async fn serve_stream(
    broker: Arc<Broker>,
    peer: u64,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let (host, principal, frame, room) = match read_request(&broker, &mut recv).await {
        Ok(r) => {
            // the two length-prefixed fields and the frame's own length
            let read = 2 + r.0.len() + 2 + r.1.len() + 4 + r.2.len();
            broker.forward_counters.peers.received(peer, read as u64);
            r
        }
        Err(e) => {
            tracing::warn!(error = %e, "refused a forwarded request");
            let _ = send.reset(quinn::VarInt::from_u32(1));
            return;
        }
    };
    if broker.is_shutting_down() {
        // An agent on its way down takes no more work: a produce accepted
        // now could be answered only from this agent's log, before its
        // followers have it. The forwarder answers NOT_LEADER_OR_FOLLOWER
        // and the client looks for the next leader.
        tracing::debug!("refused a forwarded request: shutting down");
        let _ = send.reset(quinn::VarInt::from_u32(4));
        return;
    }
    // The forwarder finishes its side to ask for an answer now.
    let hurry = Arc::new(Notify::new());
    let watcher = {
        let hurry = hurry.clone();
        tokio::spawn(async move {
            let mut byte = [0u8; 1];
            while let Ok(Some(_)) = recv.read(&mut byte).await {}
            hurry.notify_one();
        })
    };
    let client = Client {
        host,
        connection: broker.connections.next_connection_id(),
        forwarded: true,
        hurry: Some(hurry),
        principal: Arc::from(principal),
        throttle: Arc::default(),
        zone: Arc::default(),
    };
    Metrics::bump(&broker.forward_counters.served);
    broker.metrics.in_flight.fetch_add(1, Ordering::SeqCst);
    let served = dispatch(&broker, &client, frame).await;
    broker.metrics.in_flight.fetch_sub(1, Ordering::SeqCst);
    drop(room);
    watcher.abort();
    match served {
        Ok(Some(resp)) => match resp.to_bytes() {
            Ok(bytes) => {
                broker.forward_counters.peers.sent(peer, bytes.len() as u64);
                if send.write_all(&bytes).await.is_ok() {
                    let _ = send.finish();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read a forwarded response's records");
                let _ = send.reset(quinn::VarInt::from_u32(2));
            }
        },
        Ok(None) => {
            let _ = send.finish();
        }
        Err(e) => {
            tracing::warn!(error = %e, "a forwarded request was not served");
            let _ = send.reset(quinn::VarInt::from_u32(3));
        }
    }
}

/// The member of the cluster `peer`'s certificate was issued to, if any.
///
/// The cluster CA's certificate proves only that the CA issued it; a node
/// removed from the cluster, or one the CA issued for a node that never
/// joined, still holds one. Only a current member may have this agent act
/// for a principal of its choosing.
fn member_named(broker: &Broker, peer: &PeerCertificate) -> Option<u64> {
    let membership = broker.node.catalog.cluster().membership;
    membership
        .voters
        .into_iter()
        .chain(membership.learners)
        .find(|id| peer.names_node(*id))
}

/// Why a peer's connection is closed: its certificate names no member.
const NOT_A_MEMBER: u32 = 5;

fn refuse(conn: &quinn::Connection, node: Option<u64>) {
    tracing::warn!(
        remote = %conn.remote_address(),
        node,
        "refused forwarded requests: the peer's certificate names no current member of the cluster"
    );
    conn.close(NOT_A_MEMBER.into(), b"not a member of the cluster");
}

impl ClusterService for ForwardService {
    fn serve(&self, peer: PeerCertificate, conn: quinn::Connection) -> BoxFuture<'static, ()> {
        let broker = self.broker.clone();
        Box::pin(async move {
            let member = match broker.upgrade() {
                Some(b) => member_named(&b, &peer),
                None => return,
            };
            let Some(node) = member else {
                refuse(&conn, None);
                return;
            };
            while let Ok((send, recv)) = conn.accept_bi().await {
                let Some(b) = broker.upgrade() else { return };
                // removed while connected: nothing more is served
                if !b.node.catalog.has_member(node) {
                    refuse(&conn, Some(node));
                    return;
                }
                tokio::spawn(serve_stream(b, node, send, recv));
            }
        })
    }
}
