//! A cluster CA and per-node certificates for the metastore's mutual TLS
//! (see [`super::tls`] for how they are checked).
//!
//! ```no_run
//! # fn demo() -> Result<(), metastore::MetaError> {
//! use std::path::Path;
//! use metastore::network::certs::create_cluster_certificates;
//! use metastore::RaftTls;
//!
//! // once, on an operator's machine: ca.pem, ca.key, node-<id>.pem, node-<id>.key
//! create_cluster_certificates(Path::new("certs"), [1, 2, 3])?;
//! // then on node 2, with ca.pem, node-2.pem and node-2.key copied to it
//! let tls = RaftTls::load(Path::new("certs"), 2)?;
//! # let _ = tls;
//! # Ok(())
//! # }
//! ```
//!
//! Keys are ECDSA P-256. Certificates carry no expiry (rcgen's far-future
//! default): to retire a node's certificate, make a new CA and re-issue.
//! Key files are written readable by their owner only; nothing is ever
//! overwritten.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::tls::{check_node_certificate, node_name, RaftTls};
use crate::error::MetaError;
use crate::raft_types::NodeId;

/// The CA certificate: every node needs it.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The CA's private key: needed only to issue certificates; keep it off the nodes.
pub const CA_KEY_FILE: &str = "ca.key";

const CA_COMMON_NAME: &str = "AeroStream metastore cluster CA";

/// The files that hold one node's certificate and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFiles {
    /// `node-<id>.pem`
    pub cert: String,
    /// `node-<id>.key`
    pub key: String,
}

/// Where [`NodeCertificate::save`] puts node `id`'s files.
pub fn node_files(id: NodeId) -> NodeFiles {
    NodeFiles {
        cert: format!("node-{id}.pem"),
        key: format!("node-{id}.key"),
    }
}

fn cert_err(e: impl std::fmt::Display) -> MetaError {
    MetaError::InvalidSettings {
        reason: format!("cluster certificates: {e}"),
    }
}

/// The parameters of every CA made here. Issuing with a loaded CA rebuilds
/// them, so they must stay the same.
fn ca_params() -> Result<CertificateParams, MetaError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// A cluster's certificate authority: signs the certificate of every node.
pub struct ClusterCa {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCa").finish_non_exhaustive()
    }
}

impl ClusterCa {
    /// A new CA with a fresh key.
    pub fn generate() -> Result<ClusterCa, MetaError> {
        let key = KeyPair::generate().map_err(cert_err)?;
        let cert = ca_params()?.self_signed(&key).map_err(cert_err)?;
        Ok(ClusterCa {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(ca_params()?, key),
        })
    }

    /// A CA made by [`ClusterCa::generate`], from its certificate and key in
    /// PEM. A CA made elsewhere can be used by nodes ([`RaftTls`]) but not
    /// to issue certificates here: [`ClusterCa::issue`] then fails its check.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<ClusterCa, MetaError> {
        let cert_der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| cert_err(format!("the CA certificate: {e}")))?;
        let key = KeyPair::from_pem(key_pem).map_err(|e| cert_err(format!("the CA key: {e}")))?;
        Ok(ClusterCa {
            cert_pem: cert_pem.to_owned(),
            cert_der,
            issuer: Issuer::new(ca_params()?, key),
        })
    }

    /// Reads `ca.pem` and `ca.key` from `dir`.
    pub fn load(dir: &Path) -> Result<ClusterCa, MetaError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map_err(|e| cert_err(format!("cannot read {}: {e}", path.display())))
        };
        ClusterCa::from_pem(&read(CA_CERT_FILE)?, &read(CA_KEY_FILE)?)
    }

    /// Writes `ca.pem` and `ca.key` (owner-only) into `dir`, creating it.
    pub fn save(&self, dir: &Path) -> Result<(), MetaError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| cert_err(format!("cannot create {}: {e}", dir.display())))?;
        write_new(&dir.join(CA_CERT_FILE), &self.cert_pem, 0o644)?;
        write_new(
            &dir.join(CA_KEY_FILE),
            &self.issuer.key().serialize_pem(),
            0o600,
        )
    }

    /// The CA certificate in PEM, for every node's [`RaftTls`].
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A certificate and key for node `id`: it names [`node_name`]`(id)`
    /// and serves both to accept and to dial peers.
    pub fn issue(&self, id: NodeId) -> Result<NodeCertificate, MetaError> {
        let key = KeyPair::generate().map_err(cert_err)?;
        let name = node_name(id);
        let mut params = CertificateParams::new(vec![name.clone()]).map_err(cert_err)?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.issuer).map_err(cert_err)?;
        let node = NodeCertificate {
            node_id: id,
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        };
        // catches a CA whose certificate and key do not belong together
        check_node_certificate(&node.tls(self), id)?;
        Ok(node)
    }
}

/// One node's certificate and private key.
pub struct NodeCertificate {
    node_id: NodeId,
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    key_pem: String,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for NodeCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCertificate")
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl NodeCertificate {
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The PKCS#8 private key in PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Writes `node-<id>.pem` and `node-<id>.key` (owner-only) into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), MetaError> {
        let files = node_files(self.node_id);
        std::fs::create_dir_all(dir)
            .map_err(|e| cert_err(format!("cannot create {}: {e}", dir.display())))?;
        write_new(&dir.join(files.cert), &self.cert_pem, 0o644)?;
        write_new(&dir.join(files.key), &self.key_pem, 0o600)
    }

    /// The node's TLS settings, trusting `ca`.
    pub fn tls(&self, ca: &ClusterCa) -> RaftTls {
        RaftTls::new(
            ca.cert_der.clone(),
            vec![self.cert_der.clone()],
            self.key_der.clone(),
        )
    }
}

impl RaftTls {
    /// Checks that these settings belong to node `id`: the certificate chains
    /// to the CA and names the node. A node refuses to start otherwise; this
    /// lets a caller check before starting one.
    pub fn check_node(&self, id: NodeId) -> Result<(), MetaError> {
        check_node_certificate(self, id)
    }

    /// Reads what [`crate::network::certs`] writes into `dir`: `ca.pem`,
    /// `node-<id>.pem` and `node-<id>.key`.
    pub fn load(dir: &Path, node: NodeId) -> Result<RaftTls, MetaError> {
        let read = |name: String| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map_err(|e| cert_err(format!("cannot read {}: {e}", path.display())))
        };
        let files = node_files(node);
        RaftTls::from_pem(
            &read(CA_CERT_FILE.to_owned())?,
            &read(files.cert)?,
            &read(files.key)?,
        )
    }
}

/// Makes a CA and a certificate for each of `nodes`, and writes them all into
/// `dir` (see [`CA_CERT_FILE`], [`CA_KEY_FILE`], [`node_files`]). Refuses to
/// overwrite existing files.
pub fn create_cluster_certificates(
    dir: &Path,
    nodes: impl IntoIterator<Item = NodeId>,
) -> Result<ClusterCa, MetaError> {
    let ca = ClusterCa::generate()?;
    ca.save(dir)?;
    for id in nodes {
        ca.issue(id)?.save(dir)?;
    }
    Ok(ca)
}

/// What [`ensure_cluster_certificates`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertificatesWritten {
    /// Whether the CA was made now (false: an existing one was reused).
    pub new_ca: bool,
    /// Files written, by name within the folder.
    pub written: Vec<String>,
    /// Nodes whose certificate and key were already there (left unchanged).
    pub kept: Vec<NodeId>,
}

/// Makes sure `dir` holds a CA and a certificate for each of `nodes`: makes
/// the CA when the folder has none, reuses it when both `ca.pem` and
/// `ca.key` are there, and issues certificates only for nodes that have
/// neither file yet. Nothing existing is overwritten; a half-present pair
/// (a certificate without its key, or the reverse) is an error.
pub fn ensure_cluster_certificates(
    dir: &Path,
    nodes: impl IntoIterator<Item = NodeId>,
) -> Result<CertificatesWritten, MetaError> {
    let mut out = CertificatesWritten::default();
    let pair = |cert: &str, key: &str| -> Result<bool, MetaError> {
        match (dir.join(cert).exists(), dir.join(key).exists()) {
            (true, true) => Ok(true),
            (false, false) => Ok(false),
            (has_cert, _) => Err(cert_err(format!(
                "{} holds {} but not {}; remove it or restore the missing file",
                dir.display(),
                if has_cert { cert } else { key },
                if has_cert { key } else { cert },
            ))),
        }
    };
    let ca = if pair(CA_CERT_FILE, CA_KEY_FILE)? {
        ClusterCa::load(dir)?
    } else {
        let ca = ClusterCa::generate()?;
        ca.save(dir)?;
        out.new_ca = true;
        out.written.push(CA_CERT_FILE.to_owned());
        out.written.push(CA_KEY_FILE.to_owned());
        ca
    };
    for id in nodes {
        let files = node_files(id);
        if pair(&files.cert, &files.key)? {
            out.kept.push(id);
            continue;
        }
        ca.issue(id)?.save(dir)?;
        out.written.push(files.cert);
        out.written.push(files.key);
    }
    Ok(out)
}

fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), MetaError> {
    let err = |e: std::io::Error| cert_err(format!("cannot write {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)
}

#[cfg(test)]
#[path = "certs_tests.rs"]
mod tests;
