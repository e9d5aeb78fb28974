//! TLS on the Kafka listener (rustls): what Kafka calls the `SSL` and
//! `SASL_SSL` security protocols. TLS 1.2 and 1.3, the certificate chain and
//! key from PEM files, optionally a CA whose certificates clients must
//! present (mutual TLS).
//!
//! The certificate is re-read while the agent runs: [`KafkaTls::watch`]
//! checks the files' modification times and, when they changed and the new
//! pair loads, new handshakes use it; connections already open keep theirs.
//! A pair that does not load is logged and the old one stays.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

/// Why TLS could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTlsError(pub String);

impl std::fmt::Display for KafkaTlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KafkaTlsError {}

fn err(msg: impl std::fmt::Display) -> KafkaTlsError {
    KafkaTlsError(msg.to_string())
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn read(p: &Path) -> Result<Vec<u8>, KafkaTlsError> {
    std::fs::read(p).map_err(|e| err(format!("cannot read {}: {e}", p.display())))
}

fn certs(pem: &[u8], what: &Path) -> Result<Vec<CertificateDer<'static>>, KafkaTlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(format!("{}: {e}", what.display())))?;
    if certs.is_empty() {
        return Err(err(format!("{} holds no certificate", what.display())));
    }
    Ok(certs)
}

/// The certificate chain and key as rustls signs with them; fails when
/// either does not parse or the key does not belong to the certificate.
fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, KafkaTlsError> {
    let chain = certs(&read(cert)?, cert)?;
    let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
        .map_err(|e| err(format!("{}: {e}", key.display())))?;
    let ck = CertifiedKey::from_der(chain, key_der, &provider()).map_err(|e| {
        err(format!(
            "{} with key {}: {e}",
            cert.display(),
            key.display()
        ))
    })?;
    Ok(ck)
}

/// Why a client certificate names no principal; the connection is closed
/// rather than served as someone else.
#[derive(Debug, thiserror::Error)]
pub enum PrincipalError {
    #[error("the client certificate does not parse: {0}")]
    Unparsable(String),
    #[error("the client certificate's subject attribute {attribute} cannot be encoded: {reason}")]
    Unencodable { attribute: String, reason: String },
}

/// The principal a client certificate names, as Kafka's default principal
/// builder does: `User:` and the subject's distinguished name in RFC 2253
/// form (`User:CN=alice,O=Example`). An attribute of one of the directory
/// string types is its text (BMP, universal and teletex strings decoded);
/// any other value is `#` and the hex of its DER encoding, as RFC 2253
/// (section 2.4) and Kafka write it, so two certificates whose subjects
/// differ never share a principal.
pub fn principal_of(cert: &CertificateDer<'_>) -> Result<String, PrincipalError> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, parsed) = X509Certificate::from_der(cert.as_ref())
        .map_err(|e| PrincipalError::Unparsable(e.to_string()))?;
    let registry = x509_parser::objects::oid_registry();
    let mut parts = Vec::new();
    // RFC 2253 names the most specific attribute first: the reverse of the
    // order the certificate holds them in
    for rdn in parsed
        .subject()
        .iter()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let mut attrs = Vec::new();
        for a in rdn.iter() {
            let key = x509_parser::objects::oid2abbrev(a.attr_type(), registry)
                .map(str::to_string)
                .unwrap_or_else(|_| a.attr_type().to_id_string());
            let value =
                attribute_value(a.attr_value()).map_err(|reason| PrincipalError::Unencodable {
                    attribute: key.clone(),
                    reason,
                })?;
            attrs.push(format!("{key}={value}"));
        }
        parts.push(attrs.join("+"));
    }
    Ok(format!("User:{}", parts.join(",")))
}

/// An attribute value in RFC 2253 form: escaped text for the string types,
/// `#` and the hex of the DER encoding for anything else (or a string whose
/// bytes are not valid for its type).
fn attribute_value(v: &x509_parser::der_parser::asn1_rs::Any<'_>) -> Result<String, String> {
    use x509_parser::der_parser::asn1_rs::{Tag, ToDer};
    let data = v.data;
    let units = |n: usize| data.len().is_multiple_of(n);
    let text: Option<String> = match v.tag() {
        Tag::Utf8String
        | Tag::PrintableString
        | Tag::NumericString
        | Tag::Ia5String
        | Tag::VisibleString => std::str::from_utf8(data).ok().map(str::to_string),
        // ISO 8859-1, as Java reads it
        Tag::TeletexString => Some(data.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString if units(2) => {
            let u16s = data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            char::decode_utf16(u16s).collect::<Result<String, _>>().ok()
        }
        Tag::UniversalString if units(4) => data
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    };
    if let Some(text) = text {
        return Ok(escape_dn_value(&text));
    }
    let der = v.to_der_vec().map_err(|e| e.to_string())?;
    let mut out = String::with_capacity(1 + 2 * der.len());
    out.push('#');
    for b in der {
        out.push_str(&format!("{b:02x}"));
    }
    Ok(out)
}

/// A distinguished name's attribute value with RFC 2253's special
/// characters escaped.
fn escape_dn_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i + 1 == v.chars().count() && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Hands every handshake the current certificate.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

/// The Kafka listener's TLS settings and current certificate.
#[derive(Clone)]
pub struct KafkaTls {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<Current>,
    config: Arc<rustls::ServerConfig>,
    /// Whether clients must present a certificate from the client CA.
    pub mutual: bool,
}

impl std::fmt::Debug for KafkaTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaTls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("mutual", &self.mutual)
            .finish_non_exhaustive()
    }
}

impl KafkaTls {
    /// Loads the certificate chain (PEM, leaf first) and its private key
    /// (PKCS#8, PKCS#1 or SEC1); with `client_ca`, clients must present a
    /// certificate that CA issued.
    pub fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<KafkaTls, KafkaTlsError> {
        let current = Arc::new(Current(RwLock::new(Arc::new(certified_key(cert, key)?))));
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(err)?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in certs(&read(ca)?, ca)? {
                    roots
                        .add(c)
                        .map_err(|e| err(format!("{}: {e}", ca.display())))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                        .build()
                        .map_err(|e| err(format!("{}: {e}", ca.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder.with_cert_resolver(current.clone());
        Ok(KafkaTls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current,
            config: Arc::new(config),
            mutual: client_ca.is_some(),
        })
    }

    /// What accepts TLS connections with these settings.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }

    /// Re-reads the certificate and key now; on failure the current pair
    /// stays in use.
    pub fn reload(&self) -> Result<(), KafkaTlsError> {
        let fresh = certified_key(&self.cert, &self.key)?;
        *self.current.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(fresh);
        Ok(())
    }

    /// Checks the files every `every` until `stop` turns true, and reloads
    /// the pair when either file's modification time changed.
    pub async fn watch(self, every: Duration, mut stop: watch::Receiver<bool>) {
        let stamp = |t: &KafkaTls| (modified(&t.cert), modified(&t.key));
        let mut seen = stamp(&self);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let now = stamp(&self);
            if now == seen {
                continue;
            }
            seen = now;
            match self.reload() {
                Ok(()) => {
                    tracing::info!(cert = %self.cert.display(), "Kafka listener certificate reloaded")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the Kafka listener keeps its certificate: the new one does not load")
                }
            }
        }
    }
}

/// How long a client has to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the certificate files are checked for changes.
pub const RELOAD_CHECK: Duration = Duration::from_secs(10);

#[cfg(test)]
#[path = "kafka_tls_tests.rs"]
mod tests;
