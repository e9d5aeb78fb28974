//! Load-balancer mode: any agent serves any client by forwarding to the
//! agent that owns the data.
//!
//! Behind a TCP load balancer every agent advertises the balancer's address,
//! so a client's connection reaches an arbitrary agent. That agent serves
//! what it owns and forwards the rest over the cluster's QUIC endpoint (ALPN
//! [`ALPN`], mutual TLS like every cluster protocol): partitions' produce,
//! fetch and offset requests go to their leaders, a group's requests to its
//! coordinator. What travels is a Kafka request frame, exactly as the owner
//! would receive it from a client, and the owner's Kafka response frame
//! comes back; the owner serves it as its own client's request, but never
//! forwards it again (two agents that disagree about an owner answer
//! NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR instead of bouncing it).
//!
//! One stream per forwarded request. The request side is
//! `[u16 host length][client host][u16 principal length][principal]
//! [u32 frame length][frame]`: the owner authorizes the request as the
//! principal the client authenticated as at the agent it reached; the forwarder
//! keeps its sending side open while it waits and finishes it to ask the
//! owner to answer now (a fetch spread over several owners returns once one
//! of them has data, without waiting out the others' long polls). The
//! response side is the response frame and the end of the stream; an empty
//! stream means no response is due (acks=0).

pub mod client;
pub mod service;

/// The ALPN name of forwarded Kafka requests on the cluster endpoint.
pub const ALPN: &[u8] = b"aerostream-forward/2";

/// Longest client host carried with a forwarded request.
pub(crate) const MAX_HOST_BYTES: usize = 256;

/// Longest principal carried with a forwarded request; a longer one is
/// refused rather than cut (a cut name would be someone else's).
pub(crate) const MAX_PRINCIPAL_BYTES: usize = 4096;

/// Whom a forwarded request is from.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The client's address as Kafka prints it (`/10.0.0.7`).
    pub host: &'a str,
    /// What the client authenticated as (`User:alice`).
    pub principal: &'a str,
}
