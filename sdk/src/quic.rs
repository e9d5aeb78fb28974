//! The QUIC transport (`aero+quic://`): one QUIC connection per server,
//! TLS 1.3 with ALPN `aerostream/1`, the server's certificate checked
//! against the CA certificates the client was given.
//!
//! The connection's first bidirectional stream carries the hello and then
//! requests, exactly as a TCP connection does ([`crate::conn::Conn`]);
//! [`crate::conn::Conn::open_stream`] opens further streams on the same
//! connection that share the hello.
//!
//! No system or webpki roots are used: they are not there offline, and an
//! AeroStream agent's certificate is issued by its own CA anyway (written to
//! `<data dir>/native-tls/ca.pem`). Without a CA the client refuses to
//! connect over QUIC, unless told to accept any certificate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicClientConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::bootstrap::Address;
use crate::error::Error;

/// The ALPN protocol name of the native protocol over QUIC.
pub const ALPN: &[u8] = b"aerostream/1";

/// How often an idle connection tells the server it is still there.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// The largest UDP payload QUIC's MTU discovery tries: a 9001-byte
/// jumbo-frame MTU (AWS VPCs) less IPv6's 40 and UDP's 8 header bytes.
const JUMBO_UDP_PAYLOAD: u16 = 8953;
/// A server silent this long (keep-alives unanswered) is gone.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Whom the client trusts to be the server, as the builder was told.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustSettings {
    /// CA certificates in PEM, given as bytes.
    pub ca_pems: Vec<Vec<u8>>,
    /// Files of CA certificates in PEM.
    pub ca_files: Vec<PathBuf>,
    /// Accept any certificate (no verification of the server's identity).
    pub accept_invalid_certs: bool,
}

/// What a client that connects over QUIC needs: its UDP endpoint (one for
/// every server) and its TLS settings.
#[derive(Debug, Clone)]
pub(crate) struct QuicClient {
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

impl TrustSettings {
    /// The rustls settings these call for; a clear error when no CA was
    /// given and verification was not turned off.
    fn client_crypto(&self) -> Result<rustls::ClientConfig, Error> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| Error::Config(format!("TLS settings: {e}")))?;
        let mut config = if self.accept_invalid_certs {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider())))
                .with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            let mut pems: Vec<(String, Vec<u8>)> = self
                .ca_pems
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("CA PEM #{}", i + 1), p.clone()))
                .collect();
            for f in &self.ca_files {
                let bytes = std::fs::read(f).map_err(|e| {
                    Error::Config(format!("cannot read the CA file {}: {e}", f.display()))
                })?;
                pems.push((f.display().to_string(), bytes));
            }
            for (what, pem) in &pems {
                let certs = CertificateDer::pem_slice_iter(pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| Error::Config(format!("{what} is not PEM certificates: {e}")))?;
                if certs.is_empty() {
                    return Err(Error::Config(format!("{what} holds no certificate")));
                }
                for c in certs {
                    roots.add(c).map_err(|e| {
                        Error::Config(format!("{what} holds an unusable certificate: {e}"))
                    })?;
                }
            }
            if roots.is_empty() {
                return Err(Error::Config(
                    "aero+quic:// needs the CA that signed the server's certificate: give it \
                     with ClientBuilder::tls_ca_file or tls_ca_pem (an AeroStream agent that \
                     was given no certificate writes its own CA to <data dir>/native-tls/ca.pem); \
                     no system roots are used. To try things out without verifying the \
                     server, ClientBuilder::danger_accept_invalid_certs()"
                        .into(),
                ));
            }
            builder
                .with_root_certificates(Arc::new(roots))
                .with_no_client_auth()
        };
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(config)
    }
}

impl QuicClient {
    /// Binds the client's UDP endpoint (any local port, IPv6 with IPv4
    /// mapped where the system has IPv6, else IPv4). Must run inside a
    /// tokio runtime.
    pub(crate) fn new(trust: &TrustSettings) -> Result<QuicClient, Error> {
        let crypto = QuicClientConfig::try_from(trust.client_crypto()?)
            .map_err(|e| Error::Config(format!("TLS settings: {e}")))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        let mut t = quinn::TransportConfig::default();
        // fewer, larger packets where the path allows (quinn stops at 1452);
        // a 1500-byte path is still found, as with quinn's default bound
        let mut mtu = quinn::MtuDiscoveryConfig::default();
        mtu.upper_bound(JUMBO_UDP_PAYLOAD);
        t.mtu_discovery_config(Some(mtu));
        t.keep_alive_interval(Some(KEEP_ALIVE));
        if let Ok(idle) = quinn::IdleTimeout::try_from(IDLE_TIMEOUT) {
            t.max_idle_timeout(Some(idle));
        }
        // the server opens no stream towards the client
        t.max_concurrent_bidi_streams(0u32.into());
        t.max_concurrent_uni_streams(0u32.into());
        config.transport_config(Arc::new(t));
        let socket =
            std::net::UdpSocket::bind(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)))
                .or_else(|_| std::net::UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0))))?;
        crate::udp::widen_buffers(&socket);
        let runtime = quinn::default_runtime()
            .ok_or_else(|| Error::Config("the QUIC transport needs a tokio runtime".into()))?;
        let endpoint =
            quinn::Endpoint::new(quinn::EndpointConfig::default(), None, socket, runtime)?;
        Ok(QuicClient { endpoint, config })
    }

    /// A QUIC connection to `addr`, its certificate checked for the host
    /// named in `addr` (a DNS name or an IP address). A host that resolves
    /// to several addresses is tried on all at once; the first handshake
    /// that completes wins.
    pub(crate) async fn connect(&self, addr: &Address) -> Result<quinn::Connection, Error> {
        let name = addr.to_string();
        let connect_error = |source: std::io::Error| Error::Connect {
            addr: name.clone(),
            source: Arc::new(source),
        };
        let resolved: Vec<SocketAddr> = tokio::net::lookup_host((addr.host.as_str(), addr.port))
            .await
            .map_err(connect_error)?
            .collect();
        if resolved.is_empty() {
            return Err(connect_error(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} resolves to no address", addr.host),
            )));
        }
        let attempts = resolved.into_iter().map(|sock| {
            let name = name.clone();
            Box::pin(async move {
                let connecting = self
                    .endpoint
                    .connect_with(self.config.clone(), sock, &addr.host)
                    .map_err(|e| match e {
                        quinn::ConnectError::InvalidServerName(n) => Error::Tls {
                            addr: name.clone(),
                            reason: format!("{n:?} is not a valid TLS server name"),
                        },
                        other => Error::Connect {
                            addr: name.clone(),
                            source: Arc::new(std::io::Error::other(other.to_string())),
                        },
                    })?;
                connecting.await.map_err(|e| handshake_error(&name, e))
            })
        });
        match futures::future::select_ok(attempts).await {
            Ok((conn, _)) => Ok(conn),
            Err(e) => Err(e),
        }
    }
}

/// Whether a QUIC error code is a TLS alert (RFC 9001: 0x0100 + alert).
fn is_tls_alert(code: quinn::TransportErrorCode) -> bool {
    (0x100..=0x1ff).contains(&u64::from(code))
}

/// The client's error for a failed QUIC handshake: [`Error::Tls`] when TLS
/// refused it (an untrusted certificate above all), [`Error::Connect`]
/// otherwise.
fn handshake_error(addr: &str, e: quinn::ConnectionError) -> Error {
    let tls = |reason: String| {
        let hint = if reason.contains("certificate") || reason.contains("Certificate") {
            ": the server's certificate is not trusted; give the CA that signed it with \
             ClientBuilder::tls_ca_file (an AeroStream agent writes its own to \
             <data dir>/native-tls/ca.pem)"
        } else {
            ""
        };
        Error::Tls {
            addr: addr.to_owned(),
            reason: format!("{reason}{hint}"),
        }
    };
    let io = |kind: std::io::ErrorKind, what: String| Error::Connect {
        addr: addr.to_owned(),
        source: Arc::new(std::io::Error::new(kind, what)),
    };
    match e {
        quinn::ConnectionError::TransportError(t) if is_tls_alert(t.code) => tls(t.reason),
        quinn::ConnectionError::ConnectionClosed(c) if is_tls_alert(c.error_code) => tls(format!(
            "the server refused the handshake: {}",
            String::from_utf8_lossy(&c.reason)
        )),
        quinn::ConnectionError::ConnectionClosed(c)
            if u64::from(c.error_code)
                == u64::from(quinn::TransportErrorCode::CONNECTION_REFUSED) =>
        {
            io(
                std::io::ErrorKind::ConnectionRefused,
                "the server refused the QUIC connection (a connection limit?)".into(),
            )
        }
        quinn::ConnectionError::TimedOut => io(
            std::io::ErrorKind::TimedOut,
            "no QUIC handshake answer (is the UDP port open?)".into(),
        ),
        other => io(std::io::ErrorKind::Other, other.to_string()),
    }
}

/// The verifier of [`crate::ClientBuilder::danger_accept_invalid_certs`]:
/// any certificate names the server, but the handshake signatures are
/// still checked (the server must hold the key of what it presents).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
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
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // QUIC is TLS 1.3 only
        Err(rustls::Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls12NotOffered,
        ))
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
