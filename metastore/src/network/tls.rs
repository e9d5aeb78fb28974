//! Mutual TLS for the metastore's QUIC endpoint, with each node id bound to
//! its certificate.
//!
//! Every node holds a certificate signed by the cluster's CA that names it:
//! node 3's certificate carries the DNS name `node-3.aerostream`
//! ([`node_name`]) and is good for both TLS server and client use. The rules,
//! which together mean that only the holder of node N's key can act as node N:
//!
//! 1. **Dialing** node N, a node asks for the server name `node-N.aerostream`
//!    and rustls checks the presented chain against the cluster CA and that
//!    name. A peer at N's address presenting any other certificate (another
//!    node's, another CA's, a self-signed one) fails the handshake.
//! 2. **Accepting**, a node requires a client certificate that chains to the
//!    cluster CA; a peer without one, or with one from another CA, fails the
//!    handshake.
//! 3. **Each request** names its sender (`Envelope::from`); the receiver
//!    refuses it unless the peer's certificate names that node
//!    (`peer_names_node`). The Raft message inside must then name the same
//!    node as its sender ([`crate::network::RpcRequest::sent_by`]).
//! 4. **At start** a node refuses a certificate that does not chain to the
//!    CA or does not name its own id (`check_node_certificate`).
//!
//! [`crate::network::certs`] makes such a CA and node certificates.
//!
//! The crypto provider (aws-lc-rs) is passed to rustls explicitly rather than
//! installed process-wide, so embedding the metastore never changes what the
//! rest of the process uses.

use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::ServerCertVerifier as _;
use rustls::client::{verify_server_name, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::RootCertStore;

use crate::error::MetaError;
use crate::raft_types::NodeId;

/// The DNS name under which node certificates name their node:
/// `node-<id>.aerostream`.
pub const NODE_NAME_DOMAIN: &str = "aerostream";
pub(crate) const ALPN: &[u8] = b"aerostream-meta/2";

/// Concurrent requests a peer may have open on one connection. openraft keeps
/// at most one replication call (AppendEntries, or an InstallSnapshot chunk),
/// one heartbeat and one vote in flight per peer; the rest carry writes and
/// read-index requests forwarded by a follower, which the leader batches
/// anyway. More callers than this wait for a free stream (backpressure), and
/// a peer can make the receiver buffer at most this many requests of
/// [`super::MAX_REQUEST_BYTES`] at once.
pub const MAX_CONCURRENT_REQUESTS: u32 = 32;
/// The largest UDP payload QUIC's MTU discovery tries: a 9001-byte
/// jumbo-frame MTU (AWS VPCs) less IPv6's 40 and UDP's 8 header bytes.
const JUMBO_UDP_PAYLOAD: u16 = 8953;

/// The name a node's certificate carries and peers dial it by.
pub fn node_name(id: NodeId) -> String {
    format!("node-{id}.{NODE_NAME_DOMAIN}")
}

/// How a node proves who it is, and whom it trusts: the cluster CA, this
/// node's certificate chain (its leaf names [`node_name`] of this node) and
/// its PKCS#8 private key. Required by [`crate::Transport::Quic`].
pub struct RaftTls {
    ca: CertificateDer<'static>,
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Clone for RaftTls {
    fn clone(&self) -> RaftTls {
        RaftTls {
            ca: self.ca.clone(),
            cert_chain: self.cert_chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl std::fmt::Debug for RaftTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftTls")
            .field("certificates", &self.cert_chain.len())
            .finish_non_exhaustive()
    }
}

fn tls_err(e: impl std::fmt::Display) -> MetaError {
    MetaError::InvalidSettings {
        reason: format!("raft TLS: {e}"),
    }
}

impl RaftTls {
    /// From DER: the CA certificate, this node's chain (leaf first) and its
    /// PKCS#8 key.
    pub fn new(
        ca: CertificateDer<'static>,
        cert_chain: Vec<CertificateDer<'static>>,
        key_pkcs8: Vec<u8>,
    ) -> RaftTls {
        RaftTls {
            ca,
            cert_chain,
            key: PrivatePkcs8KeyDer::from(key_pkcs8),
        }
    }

    /// From PEM text: the CA certificate, this node's chain (leaf first) and
    /// its PKCS#8 key (`-----BEGIN PRIVATE KEY-----`).
    pub fn from_pem(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<RaftTls, MetaError> {
        let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes())
            .map_err(|e| tls_err(format!("the CA certificate: {e}")))?;
        let cert_chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_err(format!("the node certificate: {e}")))?;
        if cert_chain.is_empty() {
            return Err(tls_err("the node certificate PEM holds no certificate"));
        }
        let key = PrivatePkcs8KeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| tls_err(format!("the node key (PKCS#8 PEM expected): {e}")))?;
        Ok(RaftTls {
            ca,
            cert_chain,
            key,
        })
    }

    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.clone_key())
    }

    fn roots(&self) -> Result<Arc<RootCertStore>, MetaError> {
        let mut roots = RootCertStore::empty();
        roots
            .add(self.ca.clone())
            .map_err(|e| tls_err(format!("the CA certificate: {e}")))?;
        Ok(Arc::new(roots))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Checks that `tls` holds a certificate that chains to its CA and names
/// node `id`, for both server and client use: a node refuses to start
/// otherwise, rather than failing every handshake later.
pub(crate) fn check_node_certificate(tls: &RaftTls, id: NodeId) -> Result<(), MetaError> {
    let refuse = |e: &dyn std::fmt::Display| {
        tls_err(format!(
            "the certificate given to node {id} is not valid for it (it must chain to the \
             cluster CA and name {}): {e}",
            node_name(id)
        ))
    };
    let (leaf, intermediates) = tls
        .cert_chain
        .split_first()
        .ok_or_else(|| tls_err("no node certificate"))?;
    let roots = tls.roots()?;
    let name = ServerName::try_from(node_name(id)).map_err(|e| refuse(&e))?;
    let now = UnixTime::now();
    WebPkiServerVerifier::builder_with_provider(roots.clone(), provider())
        .build()
        .map_err(tls_err)?
        .verify_server_cert(leaf, intermediates, &name, &[], now)
        .map_err(|e| refuse(&e))?;
    WebPkiClientVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(tls_err)?
        .verify_client_cert(leaf, intermediates, now)
        .map_err(|e| refuse(&e))?;
    Ok(())
}

/// Whether `cert` (already verified against the CA in the handshake) names
/// node `id`.
pub(crate) fn peer_names_node(cert: &CertificateDer<'_>, id: NodeId) -> bool {
    let Ok(parsed) = ParsedCertificate::try_from(cert) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(node_name(id)) else {
        return false;
    };
    verify_server_name(&parsed, &name).is_ok()
}

/// The leaf certificate a peer presented on `conn`.
pub(crate) fn peer_certificate(conn: &quinn::Connection) -> Option<CertificateDer<'static>> {
    conn.peer_identity()?
        .downcast::<Vec<CertificateDer<'static>>>()
        .ok()?
        .into_iter()
        .next()
}

fn transport(accepts_streams: bool) -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    // fewer, larger packets where the path allows (quinn stops at 1452);
    // a 1500-byte path is still found, as with quinn's default bound
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.upper_bound(JUMBO_UDP_PAYLOAD);
    t.mtu_discovery_config(Some(mtu));
    if let Ok(idle) = quinn::IdleTimeout::try_from(Duration::from_secs(10)) {
        t.max_idle_timeout(Some(idle));
    }
    t.keep_alive_interval(Some(Duration::from_secs(2)));
    // requests travel only on connections the caller opened: a dialed peer
    // may open no stream back, and nobody needs unidirectional ones
    let streams = if accepts_streams {
        MAX_CONCURRENT_REQUESTS
    } else {
        0
    };
    t.max_concurrent_bidi_streams(streams.into());
    t.max_concurrent_uni_streams(0u32.into());
    Arc::new(t)
}

/// rustls settings for accepting peers: a client certificate from the CA is required.
#[cfg(test)]
pub(crate) fn server_crypto(tls: &RaftTls) -> Result<rustls::ServerConfig, MetaError> {
    server_crypto_offering(tls, &[])
}

/// The server side, offering the metastore's protocol and `services`.
pub(crate) fn server_crypto_offering(
    tls: &RaftTls,
    services: &[Vec<u8>],
) -> Result<rustls::ServerConfig, MetaError> {
    let verifier = WebPkiClientVerifier::builder_with_provider(tls.roots()?, provider())
        .build()
        .map_err(tls_err)?;
    let mut server = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(tls.cert_chain.clone(), tls.key())
        .map_err(tls_err)?;
    server.alpn_protocols = std::iter::once(ALPN.to_vec())
        .chain(services.iter().cloned())
        .collect();
    Ok(server)
}

/// rustls settings for dialing peers: the server must present the dialed
/// node's certificate from the CA; this node presents its own.
pub(crate) fn client_crypto(tls: &RaftTls) -> Result<rustls::ClientConfig, MetaError> {
    client_crypto_for(tls, ALPN)
}

/// The client side of one protocol (ALPN name) on the cluster endpoint.
pub(crate) fn client_crypto_for(
    tls: &RaftTls,
    alpn: &[u8],
) -> Result<rustls::ClientConfig, MetaError> {
    let mut client = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err)?
        .with_root_certificates(tls.roots()?)
        .with_client_auth_cert(tls.cert_chain.clone(), tls.key())
        .map_err(tls_err)?;
    client.alpn_protocols = vec![alpn.to_vec()];
    Ok(client)
}

/// Like [`client_crypto`], but presenting no certificate: what an outsider does.
#[cfg(test)]
pub(crate) fn client_crypto_without_certificate(
    tls: &RaftTls,
) -> Result<rustls::ClientConfig, MetaError> {
    let mut client = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err)?
        .with_root_certificates(tls.roots()?)
        .with_no_client_auth();
    client.alpn_protocols = vec![ALPN.to_vec()];
    Ok(client)
}

/// quinn's server and client configurations from rustls ones.
pub(crate) fn quic_configs(
    server: rustls::ServerConfig,
    client: rustls::ClientConfig,
) -> Result<(quinn::ServerConfig, quinn::ClientConfig), MetaError> {
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(
        QuicServerConfig::try_from(server).map_err(tls_err)?,
    ));
    server.transport_config(transport(true));
    let mut client = quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(client).map_err(tls_err)?,
    ));
    client.transport_config(transport(false));
    Ok((server, client))
}

/// Node `id`'s server configuration offering the metastore's protocol and
/// `services`, and its client configuration for the metastore's protocol.
pub(crate) fn configs_offering(
    tls: &RaftTls,
    id: NodeId,
    services: &[Vec<u8>],
) -> Result<(quinn::ServerConfig, quinn::ClientConfig), MetaError> {
    check_node_certificate(tls, id)?;
    quic_configs(server_crypto_offering(tls, services)?, client_crypto(tls)?)
}

/// The client configuration for one of the endpoint's other protocols.
pub(crate) fn service_client_config(
    tls: &RaftTls,
    alpn: &[u8],
) -> Result<quinn::ClientConfig, MetaError> {
    let mut client = quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(client_crypto_for(tls, alpn)?).map_err(tls_err)?,
    ));
    client.transport_config(transport(false));
    Ok(client)
}
