//! TLS for the metastore's QUIC endpoint.
//!
//! The crypto provider (aws-lc-rs) is passed to rustls explicitly rather than
//! installed process-wide, so embedding the metastore never changes what the
//! rest of the process uses.

use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::MetaError;

/// The DNS name every metastore node presents and expects.
pub const SERVER_NAME: &str = "aerostream-meta";
const ALPN: &[u8] = b"aerostream-meta/1";

/// How nodes prove who they are to each other.
#[derive(Clone, Default)]
pub enum RaftTls {
    /// Each node makes a throwaway self-signed certificate at start. Traffic
    /// is encrypted but peers are **not** authenticated: use only on a
    /// trusted network (or a single node).
    #[default]
    SelfSigned,
    /// Mutual TLS: each node presents `cert_chain` (whose leaf names
    /// [`SERVER_NAME`]) and accepts only peers whose certificate chains to `ca`.
    Mutual {
        ca: CertificateDer<'static>,
        cert_chain: Vec<CertificateDer<'static>>,
        /** PKCS#8 DER */
        key: Vec<u8>,
    },
}

impl std::fmt::Debug for RaftTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RaftTls::SelfSigned => f.write_str("SelfSigned"),
            RaftTls::Mutual { .. } => f.write_str("Mutual { .. }"),
        }
    }
}

fn tls_err(e: impl std::fmt::Display) -> MetaError {
    MetaError::InvalidSettings {
        reason: format!("raft TLS: {e}"),
    }
}

fn transport() -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    if let Ok(idle) = quinn::IdleTimeout::try_from(Duration::from_secs(10)) {
        t.max_idle_timeout(Some(idle));
    }
    t.keep_alive_interval(Some(Duration::from_secs(2)));
    t.max_concurrent_bidi_streams(1024u32.into());
    Arc::new(t)
}

/// Server and client configurations for one node's endpoint.
pub(crate) fn configs(
    tls: &RaftTls,
) -> Result<(quinn::ServerConfig, quinn::ClientConfig), MetaError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let versions = &[&rustls::version::TLS13];
    let (mut server, mut client) = match tls {
        RaftTls::SelfSigned => {
            let made = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()])
                .map_err(tls_err)?;
            let cert = made.cert.der().clone();
            let key =
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
            let server = rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(versions)
                .map_err(tls_err)?
                .with_no_client_auth()
                .with_single_cert(vec![cert], key)
                .map_err(tls_err)?;
            let client = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(versions)
                .map_err(tls_err)?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider.clone())))
                .with_no_client_auth();
            (server, client)
        }
        RaftTls::Mutual {
            ca,
            cert_chain,
            key,
        } => {
            let mut roots = RootCertStore::empty();
            roots.add(ca.clone()).map_err(tls_err)?;
            let roots = Arc::new(roots);
            let verifier =
                WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                    .build()
                    .map_err(tls_err)?;
            let server = rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(versions)
                .map_err(tls_err)?
                .with_client_cert_verifier(verifier)
                .with_single_cert(
                    cert_chain.clone(),
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.clone())),
                )
                .map_err(tls_err)?;
            let client = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(versions)
                .map_err(tls_err)?
                .with_root_certificates(roots)
                .with_client_auth_cert(
                    cert_chain.clone(),
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.clone())),
                )
                .map_err(tls_err)?;
            (server, client)
        }
    };
    server.alpn_protocols = vec![ALPN.to_vec()];
    client.alpn_protocols = vec![ALPN.to_vec()];
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(
        QuicServerConfig::try_from(server).map_err(tls_err)?,
    ));
    server.transport_config(transport());
    let mut client = quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(client).map_err(tls_err)?,
    ));
    client.transport_config(transport());
    Ok((server, client))
}

/// Accepts any server certificate but still checks the handshake signature
/// against it (the self-signed mode: encryption without authentication).
#[derive(Debug)]
struct AnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
