//! The native protocol over QUIC: a quinn endpoint on the UDP port of the
//! same number as the native TCP listener (`aero+quic://host:9091`).
//!
//! - **TLS**: TLS 1.3 (as QUIC requires), ALPN [`ALPN`] (`aerostream/1`),
//!   no client certificates. The server's certificate is given
//!   ([`NativeTls::from_pem`]) or issued at startup by a small CA of the
//!   agent's own ([`NativeCa`]), whose certificate clients then trust.
//! - **Streams**: one QUIC connection per client. The first bidirectional
//!   stream the client opens carries the hello and then requests exactly as
//!   a TCP connection does (same frames, pipelining, up to
//!   [`super::MAX_IN_FLIGHT`] in flight per stream). Each further
//!   bidirectional stream is served the same way without a hello of its
//!   own: it shares the version and client id of the connection's hello,
//!   and waits for that hello if it comes first. Streams are independent,
//!   so a long poll on one never holds up another. At most
//!   [`MAX_STREAMS`] are open at once; the server opens none.
//! - **Ends**: a bad frame on any stream is answered with an error frame on
//!   that stream, and the connection is closed (application code
//!   [`CLOSE_REFUSED`]); other connections are unaffected. A stream whose
//!   client finishes its side is answered and finished; the connection
//!   stays open for its other streams, and closes once it has had no open
//!   stream for `connections.max.idle.ms`. At shutdown every stream
//!   answers what it was asked, then the connection closes with
//!   [`CLOSE_SHUTDOWN`].
//! - **Limits**: a QUIC connection counts as one connection against
//!   `max.connections` and `max.connections.per.ip` (one over a limit is
//!   refused before its handshake), and its requests share
//!   `queued.max.request.bytes` with everyone else's.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::task::TaskTracker;

use super::{serve_stream, Link, Session, Start, StreamEnd};
use crate::broker::{Broker, Metrics};
use crate::connections::Admitted;
use crate::kafka::api::Client;

/// The ALPN protocol name of the native protocol over QUIC.
pub const ALPN: &[u8] = b"aerostream/1";

/// Bidirectional streams a client may have open at once on one connection.
pub const MAX_STREAMS: u32 = 256;
/// The largest UDP payload QUIC's MTU discovery tries: a 9001-byte
/// jumbo-frame MTU (AWS VPCs) less IPv6's 40 and UDP's 8 header bytes.
const JUMBO_UDP_PAYLOAD: u16 = 8953;

/// Application close code: the server is shutting down.
pub const CLOSE_SHUTDOWN: u32 = 0;
/// Application close code: a frame was refused (the error frame says why).
pub const CLOSE_REFUSED: u32 = 1;
/// Application close code: no stream for `connections.max.idle.ms`.
pub const CLOSE_IDLE: u32 = 2;

/// How long the TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// QUIC's own idle timeout: a peer silent this long (no keep-alive either)
/// is gone.
const QUIC_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a finished stream waits for the client to acknowledge its last
/// bytes before the connection may close under it.
const LINGER: Duration = Duration::from_secs(2);
/// How long shutdown waits for connections to answer and close.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The file names [`NativeCa::load_or_create`] uses.
pub const CA_CERT_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca.key";
const CA_COMMON_NAME: &str = "AeroStream native protocol CA";

/// Why the native TLS settings could not be made.
#[derive(Debug, Clone, thiserror::Error)]
#[error("native TLS: {0}")]
pub struct TlsError(pub String);

fn tls_err(e: impl std::fmt::Display) -> TlsError {
    TlsError(e.to_string())
}

impl From<TlsError> for io::Error {
    fn from(e: TlsError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The server's certificate chain (leaf first) and private key for the
/// QUIC endpoint.
pub struct NativeTls {
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for NativeTls {
    fn clone(&self) -> NativeTls {
        NativeTls {
            cert_chain: self.cert_chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl std::fmt::Debug for NativeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeTls")
            .field("certificates", &self.cert_chain.len())
            .finish_non_exhaustive()
    }
}

impl NativeTls {
    /// From PEM: the certificate chain (leaf first) and the private key
    /// (PKCS#8, PKCS#1 or SEC1). Checks that the key is usable with the
    /// certificate.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<NativeTls, TlsError> {
        let cert_chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_err(format!("the certificate PEM: {e}")))?;
        if cert_chain.is_empty() {
            return Err(tls_err("the certificate PEM holds no certificate"));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| tls_err(format!("the private key PEM: {e}")))?;
        let tls = NativeTls { cert_chain, key };
        // refuses a key that does not belong to the certificate
        tls.server_crypto()?;
        Ok(tls)
    }

    /// Reads the certificate chain and key from PEM files.
    pub fn load(cert: &Path, key: &Path) -> Result<NativeTls, TlsError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| tls_err(format!("cannot read {}: {e}", p.display())))
        };
        NativeTls::from_pem(&read(cert)?, &read(key)?).map_err(|e| {
            TlsError(format!(
                "{} with key {}: {}",
                cert.display(),
                key.display(),
                e.0
            ))
        })
    }

    fn server_crypto(&self) -> Result<rustls::ServerConfig, TlsError> {
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(self.cert_chain.clone(), self.key.clone_key())
            .map_err(|e| tls_err(format!("the certificate and key: {e}")))?;
        server.alpn_protocols = vec![ALPN.to_vec()];
        Ok(server)
    }

    /// quinn's server configuration: TLS 1.3, [`ALPN`], [`MAX_STREAMS`]
    /// bidirectional streams, no unidirectional ones.
    pub fn server_config(&self) -> Result<quinn::ServerConfig, TlsError> {
        let crypto = QuicServerConfig::try_from(self.server_crypto()?).map_err(tls_err)?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let mut t = quinn::TransportConfig::default();
        // fewer, larger packets where the path allows (quinn stops at 1452);
        // a 1500-byte path is still found, as with quinn's default bound
        let mut mtu = quinn::MtuDiscoveryConfig::default();
        mtu.upper_bound(JUMBO_UDP_PAYLOAD);
        t.mtu_discovery_config(Some(mtu));
        t.max_concurrent_bidi_streams(MAX_STREAMS.into());
        t.max_concurrent_uni_streams(0u32.into());
        // what one connection may have buffered unread (requests are read
        // as they come, so this bounds memory, not request size)
        t.receive_window((16u32 << 20).into());
        t.stream_receive_window((4u32 << 20).into());
        if let Ok(idle) = quinn::IdleTimeout::try_from(QUIC_IDLE_TIMEOUT) {
            t.max_idle_timeout(Some(idle));
        }
        server.transport_config(Arc::new(t));
        Ok(server)
    }
}

/// A small certificate authority that issues the endpoint's certificate
/// when none is given. Clients trust its certificate (`ca.pem`); a
/// self-signed leaf would not do, as rustls refuses an end-entity
/// certificate used as its own trust anchor.
pub struct NativeCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for NativeCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeCa").finish_non_exhaustive()
    }
}

/// The parameters of the CA whose key is `key`; issuing with a loaded CA
/// rebuilds them, so they depend on nothing else. The name carries a
/// fingerprint of the key, so two agents' CAs (or a CA and the one made
/// after it) never share a name, and a client trusting the wrong one is
/// told the issuer is unknown.
fn ca_params(key: &KeyPair) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    let mut dn = DistinguishedName::new();
    let fingerprint = crc32c::crc32c(key.public_key_raw());
    dn.push(
        DnType::CommonName,
        format!("{CA_COMMON_NAME} {fingerprint:08x}"),
    );
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// What [`NativeCa::load_or_create`] found.
#[derive(Debug)]
pub struct LoadedCa {
    pub ca: NativeCa,
    /// Whether the CA was made now (false: the one in the folder was reused).
    pub created: bool,
    /// The CA certificate's file, for clients to trust.
    pub cert_path: std::path::PathBuf,
}

impl NativeCa {
    /// A new CA with a fresh ECDSA P-256 key.
    pub fn generate() -> Result<NativeCa, TlsError> {
        let key = KeyPair::generate().map_err(tls_err)?;
        let cert = ca_params(&key)?.self_signed(&key).map_err(tls_err)?;
        Ok(NativeCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(ca_params(&key)?, key),
        })
    }

    /// A CA made by [`NativeCa::generate`], from its certificate and key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<NativeCa, TlsError> {
        CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| tls_err(format!("the CA certificate: {e}")))?;
        let key = KeyPair::from_pem(key_pem).map_err(|e| tls_err(format!("the CA key: {e}")))?;
        Ok(NativeCa {
            cert_pem: cert_pem.to_owned(),
            issuer: Issuer::new(ca_params(&key)?, key),
        })
    }

    /// The CA in `dir` (`ca.pem` and `ca.key`), or a new one written
    /// there (the key readable by its owner only) when the folder does not
    /// hold a usable pair. Reusing it keeps clients that trust `ca.pem`
    /// trusting the server across restarts.
    pub fn load_or_create(dir: &Path) -> Result<LoadedCa, TlsError> {
        let (cert_path, key_path) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
        if let (Ok(cert), Ok(key)) = (
            std::fs::read_to_string(&cert_path),
            std::fs::read_to_string(&key_path),
        ) {
            match NativeCa::from_pem(&cert, &key).and_then(|ca| {
                // a pair that cannot issue a certificate its own
                // certificate verifies is not reused
                ca.issue(&["localhost".to_owned()])?;
                Ok(ca)
            }) {
                Ok(ca) => {
                    return Ok(LoadedCa {
                        ca,
                        created: false,
                        cert_path,
                    })
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "the native TLS CA in the folder is unusable; making a new one")
                }
            }
        }
        let ca = NativeCa::generate()?;
        std::fs::create_dir_all(dir)
            .map_err(|e| tls_err(format!("cannot create {}: {e}", dir.display())))?;
        write_file(&key_path, &ca.issuer.key().serialize_pem(), 0o600)?;
        write_file(&cert_path, &ca.cert_pem, 0o644)?;
        Ok(LoadedCa {
            ca,
            created: true,
            cert_path,
        })
    }

    /// The CA certificate in PEM: what clients trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A server certificate naming `names` (host names or IP addresses),
    /// signed by this CA, with a fresh key.
    pub fn issue(&self, names: &[String]) -> Result<NativeTls, TlsError> {
        let key = KeyPair::generate().map_err(tls_err)?;
        let mut params = CertificateParams::new(names.to_vec()).map_err(tls_err)?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(
            DnType::CommonName,
            names
                .first()
                .cloned()
                .unwrap_or_else(|| "aerostream".into()),
        );
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).map_err(tls_err)?;
        let chain = format!("{}{}", cert.pem(), self.cert_pem);
        let tls = NativeTls::from_pem(chain.as_bytes(), key.serialize_pem().as_bytes())?;
        // catches a CA whose certificate and key do not belong together
        verify_chain(&tls, &self.cert_pem, names.first().map(String::as_str))?;
        Ok(tls)
    }
}

/// Checks that `tls`'s leaf chains to the CA in `ca_pem` (and names `name`).
fn verify_chain(tls: &NativeTls, ca_pem: &str, name: Option<&str>) -> Result<(), TlsError> {
    use rustls::client::danger::ServerCertVerifier as _;
    let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(tls_err)?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).map_err(tls_err)?;
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(tls_err)?;
    let name = rustls::pki_types::ServerName::try_from(name.unwrap_or("localhost").to_owned())
        .map_err(tls_err)?;
    let (leaf, rest) = tls
        .cert_chain
        .split_first()
        .ok_or_else(|| tls_err("no certificate"))?;
    verifier
        .verify_server_cert(leaf, rest, &name, &[], rustls::pki_types::UnixTime::now())
        .map_err(|e| tls_err(format!("the issued certificate does not verify: {e}")))?;
    Ok(())
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), TlsError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| tls_err(format!("cannot write {}: {e}", tmp.display())))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| tls_err(format!("cannot write {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| tls_err(format!("cannot write {}: {e}", path.display())))
}

/// Binds the QUIC endpoint on `socket` (the UDP twin of the native TCP
/// listener). Must be called inside the tokio runtime that will drive the
/// endpoint's socket.
pub(crate) fn endpoint(socket: UdpSocket, tls: &NativeTls) -> io::Result<quinn::Endpoint> {
    let server = tls.server_config()?;
    sdk::udp::widen_buffers(&socket);
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
}

/// Accepts QUIC connections until `stop` turns true, spreading them over
/// `shards` (the runtimes that serve TCP connections too). Then refuses
/// new ones, lets the open ones answer what they were asked and close
/// (for at most [`SHUTDOWN_WAIT`]), and closes the endpoint.
pub(crate) async fn serve(
    endpoint: quinn::Endpoint,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    shards: Vec<tokio::runtime::Handle>,
) {
    let tracker = TaskTracker::new();
    let mut next = 0usize;
    if !broker.clients_may_connect(&mut stop).await {
        endpoint.close(CLOSE_SHUTDOWN.into(), b"shutdown");
        return;
    }
    loop {
        let incoming = tokio::select! {
            biased;
            _ = stop.changed() => break,
            i = endpoint.accept() => match i {
                Some(i) => i,
                None => break,
            },
        };
        let peer = incoming.remote_address();
        // Over a limit: refused before the handshake costs anything.
        let Ok(admitted) = broker.connections.admit(peer.ip().to_canonical()) else {
            incoming.refuse();
            continue;
        };
        Metrics::add(&broker.metrics.connections_opened, 1);
        let task = tracker.track_future(connection(
            incoming,
            peer,
            admitted,
            broker.clone(),
            stop.clone(),
        ));
        match shards.get(next % shards.len().max(1)) {
            Some(shard) => drop(shard.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
        next = next.wrapping_add(1);
    }
    endpoint.set_server_config(None);
    tracker.close();
    if tokio::time::timeout(SHUTDOWN_WAIT, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = tracker.len(),
            "native QUIC connections still open at shutdown; closing them"
        );
    }
    endpoint.close(CLOSE_SHUTDOWN.into(), b"shutdown");
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
}

/// One QUIC connection: the handshake, then a task per bidirectional
/// stream the client opens.
async fn connection(
    incoming: quinn::Incoming,
    peer: SocketAddr,
    admitted: Admitted,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
) {
    let id = admitted.id;
    let conn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, incoming).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::debug!(%peer, transport = "quic", error = %e, "native QUIC handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, transport = "quic", "native QUIC handshake timed out");
            None
        }
    };
    if let Some(conn) = conn {
        tracing::debug!(%peer, transport = "quic", id, "native connection open");
        let link = Arc::new(Link {
            client: Client::direct(format!("/{}", peer.ip().to_canonical()), id),
            broker: broker.clone(),
            peer,
            transport: "quic",
        });
        let why = streams(&conn, &link, &mut stop).await;
        let (code, reason): (u32, &[u8]) = match why {
            Closing::Shutdown => (CLOSE_SHUTDOWN, b"shutdown"),
            Closing::Refused => (CLOSE_REFUSED, b"a frame was refused"),
            Closing::Idle => (CLOSE_IDLE, b"idle"),
            Closing::Gone => (CLOSE_SHUTDOWN, b""),
        };
        conn.close(code.into(), reason);
        tracing::debug!(%peer, transport = "quic", id, ?why, "native connection closed");
    }
    drop(admitted);
    Metrics::add(&broker.metrics.connections_closed, 1);
}

/// Why a QUIC connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    Shutdown,
    Refused,
    Idle,
    /// The client closed it, or it was lost.
    Gone,
}

/// Serves the streams of `conn` until it must close.
async fn streams(
    conn: &quinn::Connection,
    link: &Arc<Link>,
    stop: &mut watch::Receiver<bool>,
) -> Closing {
    let idle = link.broker.connections.limits().idle_timeout;
    let (said_hello, hello) = watch::channel(None);
    let mut said_hello = Some(said_hello);
    let mut tasks: JoinSet<StreamEnd> = JoinSet::new();
    loop {
        let no_streams = tasks.is_empty();
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            Some(ended) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok(StreamEnd::Refused) = ended {
                    return Closing::Refused;
                }
            }
            accepted = accept_within(conn, no_streams.then_some(idle)) => {
                let (send, recv) = match accepted {
                    Accepted::Stream(send, recv) => (send, recv),
                    // (its streams' idle ends were counted as TCP's are)
                    Accepted::Idle => return Closing::Idle,
                    Accepted::Gone => return Closing::Gone,
                };
                let start = said_hello.take().map(Start::Hello);
                tasks.spawn(stream(link.clone(), send, recv, start, hello.clone(), stop.clone()));
            }
        }
    }
    // Shutdown: every stream answers what it was asked, then finishes.
    while let Some(ended) = tasks.join_next().await {
        if let Ok(StreamEnd::Refused) = ended {
            return Closing::Refused;
        }
    }
    Closing::Shutdown
}

enum Accepted {
    Stream(quinn::SendStream, quinn::RecvStream),
    Idle,
    Gone,
}

async fn accept_within(conn: &quinn::Connection, idle: Option<Duration>) -> Accepted {
    let accept = async {
        match conn.accept_bi().await {
            Ok((send, recv)) => Accepted::Stream(send, recv),
            Err(_) => Accepted::Gone,
        }
    };
    match idle {
        Some(idle) => tokio::time::timeout(idle, accept)
            .await
            .unwrap_or(Accepted::Idle),
        None => accept.await,
    }
}

/// Serves one bidirectional stream. The connection's first stream says
/// hello (`start`); the others wait for that hello's outcome.
async fn stream(
    link: Arc<Link>,
    mut send: quinn::SendStream,
    recv: quinn::RecvStream,
    start: Option<Start>,
    mut hello: watch::Receiver<Option<Session>>,
    mut stop: watch::Receiver<bool>,
) -> StreamEnd {
    let start = match start {
        Some(start) => start,
        None => {
            let session = tokio::select! {
                biased;
                _ = stop.changed() => None,
                s = hello.wait_for(Option::is_some) => s.ok().and_then(|s| s.clone()),
            };
            match session {
                Some(session) => Start::After(session),
                // the first stream ended without a hello, or shutdown began
                None => return StreamEnd::Done,
            }
        }
    };
    let end = serve_stream(&link, recv, &mut send, start, stop).await;
    // Finish the stream and let the client acknowledge its last bytes (an
    // error frame above all) before the connection may close under them.
    if send.finish().is_ok() {
        let _ = tokio::time::timeout(LINGER, send.stopped()).await;
    }
    end
}
