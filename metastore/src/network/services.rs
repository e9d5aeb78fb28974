//! Other protocols on the cluster's QUIC endpoint.
//!
//! Agents talk to each other on one UDP address (`--cluster-addr`): the
//! metastore's Raft traffic and, next to it, partition replication and
//! request forwarding. Each protocol is told apart by its TLS ALPN name, so
//! every connection is authenticated by the same mutual TLS (a peer's
//! certificate from the cluster CA names its node id) before any protocol
//! sees a byte.
//!
//! A protocol is declared when the endpoint is bound (its ALPN name in
//! [`super::quic::QuicSettings::service_alpns`], so the TLS handshake can
//! offer it) and its handler registered later with
//! [`crate::ClusterControl::register_cluster_service`], once whatever serves
//! it exists. A connection for a declared protocol whose handler is not
//! registered yet is closed at once; the dialer retries.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;
use rustls::pki_types::CertificateDer;

use crate::raft_types::NodeId;

/// The certificate a connected peer presented (already checked against the
/// cluster CA by the handshake).
#[derive(Debug, Clone)]
pub struct PeerCertificate(pub(crate) Arc<CertificateDer<'static>>);

impl PeerCertificate {
    /// Whether the certificate was issued to node `id`: a protocol must
    /// check this before trusting what a peer says about itself.
    pub fn names_node(&self, id: NodeId) -> bool {
        super::tls::peer_names_node(&self.0, id)
    }
}

/// Serves one protocol's connections.
pub trait ClusterService: Send + Sync + 'static {
    /// Serves one accepted connection until it ends.
    fn serve(&self, peer: PeerCertificate, conn: quinn::Connection) -> BoxFuture<'static, ()>;
}

type Handlers = HashMap<Vec<u8>, Arc<dyn ClusterService>>;

/// Handlers by ALPN name, filled in after the endpoint is bound.
#[derive(Clone, Default)]
pub(crate) struct ClusterServices {
    handlers: Arc<RwLock<Handlers>>,
}

impl ClusterServices {
    pub(crate) fn register(&self, alpn: &[u8], service: Arc<dyn ClusterService>) {
        self.handlers.write().insert(alpn.to_vec(), service);
    }

    pub(crate) fn get(&self, alpn: &[u8]) -> Option<Arc<dyn ClusterService>> {
        self.handlers.read().get(alpn).cloned()
    }
}
