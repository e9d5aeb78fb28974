//! SCRAM (RFC 5802 with SHA-256 and SHA-512, RFC 7677), the server's side,
//! as Kafka clients speak it: credentials from a password, the two-message
//! exchange, and a password check for SASL/PLAIN against the same stored
//! credential. The hashing is aws-lc-rs's (the crypto rustls already uses).

use std::num::NonZeroU32;

use aws_lc_rs::{constant_time, digest, hmac, pbkdf2, rand as lc_rand};
use base64::Engine;
use metastore::{ScramCredential, ScramMechanism};

use crate::error::LoginError::{self, Malformed};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Iterations of a credential made here (Kafka's tools default to 4096).
pub const DEFAULT_ITERATIONS: u32 = 8192;

fn pbkdf2_alg(m: ScramMechanism) -> pbkdf2::Algorithm {
    match m {
        ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
        ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
    }
}

fn hmac_alg(m: ScramMechanism) -> hmac::Algorithm {
    match m {
        ScramMechanism::Sha256 => hmac::HMAC_SHA256,
        ScramMechanism::Sha512 => hmac::HMAC_SHA512,
    }
}

fn digest_alg(m: ScramMechanism) -> &'static digest::Algorithm {
    match m {
        ScramMechanism::Sha256 => &digest::SHA256,
        ScramMechanism::Sha512 => &digest::SHA512,
    }
}

fn mac(m: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac_alg(m), key), data)
        .as_ref()
        .to_vec()
}

fn hash(m: ScramMechanism, data: &[u8]) -> Vec<u8> {
    digest::digest(digest_alg(m), data).as_ref().to_vec()
}

/// Hi(password, salt, i) of RFC 5802.
pub fn salted_password(
    m: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let mut out = vec![0; m.hash_len()];
    let i = NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN);
    pbkdf2::derive(pbkdf2_alg(m), i, salt, password, &mut out);
    out
}

/// The stored credential for a salted password (what Kafka's
/// AlterUserScramCredentials carries).
pub fn credential_from_salted(
    m: ScramMechanism,
    salt: Vec<u8>,
    salted: &[u8],
    iterations: u32,
) -> ScramCredential {
    let client_key = mac(m, salted, b"Client Key");
    ScramCredential {
        salt,
        stored_key: hash(m, &client_key),
        server_key: mac(m, salted, b"Server Key"),
        iterations,
    }
}

/// A new credential for `password`, with a random salt.
pub fn credential(
    m: ScramMechanism,
    password: &str,
    iterations: u32,
) -> Result<ScramCredential, LoginError> {
    let mut salt = vec![0u8; 32];
    lc_rand::fill(&mut salt).map_err(|_| LoginError::NoRandomness("salt"))?;
    let salted = salted_password(m, password.as_bytes(), &salt, iterations);
    Ok(credential_from_salted(m, salt, &salted, iterations))
}

/// Whether `password` is the one `c` was made from.
pub fn password_matches(m: ScramMechanism, c: &ScramCredential, password: &str) -> bool {
    let salted = salted_password(m, password.as_bytes(), &c.salt, c.iterations);
    let stored = hash(m, &mac(m, &salted, b"Client Key"));
    constant_time::verify_slices_are_equal(&stored, &c.stored_key).is_ok()
}

/// `saslname` of RFC 5802: `=2C` is a comma and `=3D` an equals sign.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3)?;
        out.push(match code {
            "2C" => ',',
            "3D" => '=',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The value of attribute `key` (`n=...`) among comma-separated `attrs`.
fn attr(attrs: &str, key: char) -> Option<&str> {
    attrs.split(',').find_map(|a| {
        let mut c = a.chars();
        (c.next() == Some(key) && c.next() == Some('=')).then(|| &a[2..])
    })
}

/// The client's first message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    pub user: String,
    pub nonce: String,
    gs2_header: String,
    bare: String,
}

/// Parses `gs2-header client-first-message-bare`. Channel binding is not
/// offered (Kafka's clients never ask for it).
pub fn parse_client_first(msg: &str) -> Result<ClientFirst, LoginError> {
    let mut parts = msg.splitn(3, ',');
    let cb = parts.next().unwrap_or_default();
    let authzid = parts.next().ok_or(Malformed("no GS2 header"))?;
    let bare = parts
        .next()
        .ok_or(Malformed("no client-first-message-bare"))?;
    if cb != "n" && cb != "y" {
        return Err(LoginError::ChannelBindingUnsupported);
    }
    if !authzid.is_empty() && !authzid.starts_with("a=") {
        return Err(Malformed("a malformed authorization identity"));
    }
    let user = attr(bare, 'n').ok_or(Malformed("no user name"))?;
    let user = unescape(user).ok_or(Malformed("a malformed user name"))?;
    let nonce = attr(bare, 'r').ok_or(Malformed("no client nonce"))?;
    if nonce.is_empty() || nonce.contains(',') {
        return Err(Malformed("a malformed nonce"));
    }
    Ok(ClientFirst {
        user,
        nonce: nonce.to_string(),
        gs2_header: format!("{cb},{authzid},"),
        bare: bare.to_string(),
    })
}

/// A SCRAM exchange after the server's first message.
#[derive(Debug)]
pub struct Exchange {
    mechanism: ScramMechanism,
    credential: ScramCredential,
    first: ClientFirst,
    server_first: String,
    nonce: String,
}

impl Exchange {
    /// Answers the client's first message for a user holding `credential`.
    pub fn start(
        mechanism: ScramMechanism,
        first: ClientFirst,
        credential: ScramCredential,
    ) -> Result<(Exchange, String), LoginError> {
        let mut ours = [0u8; 24];
        lc_rand::fill(&mut ours).map_err(|_| LoginError::NoRandomness("nonce"))?;
        Ok(Exchange::start_with(
            mechanism,
            first,
            credential,
            &B64.encode(ours),
        ))
    }

    /// [`Exchange::start`] with the server's part of the nonce given.
    pub(crate) fn start_with(
        mechanism: ScramMechanism,
        first: ClientFirst,
        credential: ScramCredential,
        server_nonce: &str,
    ) -> (Exchange, String) {
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone();
        (
            Exchange {
                mechanism,
                credential,
                first,
                server_first,
                nonce,
            },
            reply,
        )
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Checks the client's final message; the server's final message when
    /// the proof holds.
    pub fn finish(self, client_final: &str) -> Result<String, LoginError> {
        let m = self.mechanism;
        let (without_proof, proof) = client_final
            .rsplit_once(",p=")
            .ok_or(Malformed("no client proof"))?;
        let binding = attr(without_proof, 'c').ok_or(Malformed("no channel binding attribute"))?;
        if B64.decode(binding).ok().as_deref() != Some(self.first.gs2_header.as_bytes()) {
            return Err(LoginError::ChannelBindingMismatch);
        }
        if attr(without_proof, 'r') != Some(self.nonce.as_str()) {
            return Err(LoginError::NonceMismatch);
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| Malformed("the proof is not base64"))?;
        let auth = format!(
            "{},{},{}",
            self.first.bare, self.server_first, without_proof
        );
        let signature = mac(m, &self.credential.stored_key, auth.as_bytes());
        if proof.len() != signature.len() {
            return Err(Malformed("the proof has the wrong length"));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        if constant_time::verify_slices_are_equal(
            &hash(m, &client_key),
            &self.credential.stored_key,
        )
        .is_err()
        {
            return Err(LoginError::InvalidProof);
        }
        let server_signature = mac(m, &self.credential.server_key, auth.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)))
    }
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
