//! Authentication to a server that requires it: the same SASL mechanisms
//! and credentials as its Kafka listener (SCRAM-SHA-256/512, PLAIN,
//! OAUTHBEARER), so one user serves both ways in.
//!
//! One-message mechanisms (PLAIN, OAUTHBEARER) ride in the hello; SCRAM's
//! two round trips follow it as Authenticate messages (operation 0x14).
//! The client side of SCRAM (RFC 5802, RFC 7677) is here: it proves the
//! password without sending it and checks the server's signature, so a
//! server that does not hold the user's credential is not believed.

use std::num::NonZeroU32;
use std::sync::Arc;

use aws_lc_rs::{digest, hmac, pbkdf2, rand as lc_rand};
use base64::Engine;

use crate::error::Error;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The SCRAM hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// The mechanism's SASL name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }
}

/// Gives a fresh OAuth bearer token (a JWT) each time the client connects.
pub type TokenProvider = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// Who the client is, to a server that authenticates its clients.
#[derive(Clone)]
pub enum Credentials {
    /// A SCRAM user and password (the server keeps only a salted proof).
    Scram {
        mechanism: ScramMechanism,
        user: String,
        password: String,
    },
    /// A user and password, sent as they are: over QUIC (TLS) only, or on a
    /// network you trust.
    Plain { user: String, password: String },
    /// An OAuth bearer token, asked for again on every connection.
    OAuthBearer(TokenProvider),
}

impl Credentials {
    /// SCRAM-SHA-512 with this user and password.
    pub fn scram_sha512(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials::Scram {
            mechanism: ScramMechanism::Sha512,
            user: user.into(),
            password: password.into(),
        }
    }

    /// SCRAM-SHA-256 with this user and password.
    pub fn scram_sha256(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials::Scram {
            mechanism: ScramMechanism::Sha256,
            user: user.into(),
            password: password.into(),
        }
    }

    /// PLAIN with this user and password.
    pub fn plain(user: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials::Plain {
            user: user.into(),
            password: password.into(),
        }
    }

    /// OAUTHBEARER with a fixed token (it stops working when it expires;
    /// see [`Credentials::oauth_provider`]).
    pub fn oauth_token(token: impl Into<String>) -> Credentials {
        let token = token.into();
        Credentials::OAuthBearer(Arc::new(move || Ok(token.clone())))
    }

    /// OAUTHBEARER with a token from `provider`, called on every connection.
    pub fn oauth_provider(
        provider: impl Fn() -> Result<String, String> + Send + Sync + 'static,
    ) -> Credentials {
        Credentials::OAuthBearer(Arc::new(provider))
    }

    /// The mechanism and message of a one-message mechanism, for the
    /// hello; `None` for SCRAM, which follows it.
    pub(crate) fn hello_message(&self) -> Result<Option<(String, Vec<u8>)>, Error> {
        match self {
            Credentials::Scram { .. } => Ok(None),
            Credentials::Plain { user, password } => {
                let mut m = Vec::with_capacity(user.len() + password.len() + 2);
                m.push(0);
                m.extend_from_slice(user.as_bytes());
                m.push(0);
                m.extend_from_slice(password.as_bytes());
                Ok(Some(("PLAIN".into(), m)))
            }
            Credentials::OAuthBearer(provider) => {
                let token = provider()
                    .map_err(|e| Error::Config(format!("no OAuth token to log in with: {e}")))?;
                // RFC 7628's initial client response
                let m = format!("n,,\x01auth=Bearer {token}\x01\x01");
                Ok(Some(("OAUTHBEARER".into(), m.into_bytes())))
            }
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // never the secret
        match self {
            Credentials::Scram {
                mechanism, user, ..
            } => write!(f, "{} as {user}", mechanism.name()),
            Credentials::Plain { user, .. } => write!(f, "PLAIN as {user}"),
            Credentials::OAuthBearer(_) => f.write_str("OAUTHBEARER"),
        }
    }
}

/// Hi(password, salt, iterations) of RFC 5802: what a SCRAM credential
/// stores a proof of (Kafka's AlterUserScramCredentials carries it).
pub fn salted_password(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: NonZeroU32,
) -> Vec<u8> {
    let mut salted = vec![0u8; mechanism.digest().output_len()];
    pbkdf2::derive(
        mechanism.pbkdf2(),
        iterations,
        salt,
        password.as_bytes(),
        &mut salted,
    );
    salted
}

/// A SCRAM exchange from the client's side, after its first message: for
/// any Kafka-wire client too (SaslAuthenticate carries the same messages).
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    first_bare: String,
}

/// The `saslname` of RFC 5802: `,` and `=` escaped.
fn sasl_name(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

fn attr(message: &str, key: char) -> Option<&str> {
    message.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(key) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

/// The fewest PBKDF2 iterations a server may ask for (RFC 7677's minimum,
/// and Kafka's): with fewer, a proof captured on the way (a server that is
/// not the real one, on a connection without TLS) is cheap to crack.
pub const MIN_ITERATIONS: u32 = 4096;

/// The most PBKDF2 iterations a server may ask for: servers store at most
/// 16384 (Kafka's limit), and a count far past it would only stall the
/// client (about a second of CPU at this bound).
pub const MAX_ITERATIONS: u32 = 1_000_000;

fn refused(why: impl Into<String>) -> Error {
    Error::server(crate::proto::ErrorCode::AUTHENTICATION_FAILED, why.into())
}

impl ScramClient {
    /// Starts an exchange; the client-first message to send.
    pub fn start(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
    ) -> Result<(ScramClient, String), Error> {
        let mut raw = [0u8; 24];
        lc_rand::fill(&mut raw).map_err(|_| Error::Config("no randomness for a nonce".into()))?;
        Ok(ScramClient::start_with(
            mechanism,
            user,
            password,
            &B64.encode(raw),
        ))
    }

    pub(crate) fn start_with(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: &str,
    ) -> (ScramClient, String) {
        let first_bare = format!("n={},r={nonce}", sasl_name(user));
        let first = format!("n,,{first_bare}");
        (
            ScramClient {
                mechanism,
                password: password.to_string(),
                nonce: nonce.to_string(),
                first_bare,
            },
            first,
        )
    }

    /// Answers the server-first message: the client-final message to send,
    /// and the server signature its final message must carry.
    pub fn answer(&self, server_first: &str) -> Result<(String, Vec<u8>), Error> {
        let m = self.mechanism;
        let nonce = attr(server_first, 'r').ok_or_else(|| refused("server-first without r="))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(refused("the server's nonce does not extend the client's"));
        }
        let salt = attr(server_first, 's')
            .and_then(|s| B64.decode(s).ok())
            .ok_or_else(|| refused("server-first without a base64 salt"))?;
        let iterations = attr(server_first, 'i')
            .and_then(|i| i.parse::<u32>().ok())
            .and_then(NonZeroU32::new)
            .ok_or_else(|| refused("server-first without an iteration count"))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations.get()) {
            return Err(refused(format!(
                "the server asks for {iterations} SCRAM iterations; this client accepts {MIN_ITERATIONS} to {MAX_ITERATIONS} (fewer would make the proof cheap to crack if captured, more would stall the client)"
            )));
        }
        let salted = salted_password(m, &self.password, &salt, iterations);
        let key = hmac::Key::new(m.hmac(), &salted);
        let client_key = hmac::sign(&key, b"Client Key");
        let stored = digest::digest(m.digest(), client_key.as_ref());
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = hmac::sign(
            &hmac::Key::new(m.hmac(), stored.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(signature.as_ref())
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = hmac::sign(&key, b"Server Key");
        let server_signature = hmac::sign(
            &hmac::Key::new(m.hmac(), server_key.as_ref()),
            auth_message.as_bytes(),
        );
        Ok((
            format!("{without_proof},p={}", B64.encode(proof)),
            server_signature.as_ref().to_vec(),
        ))
    }

    /// Checks the server-final message against the signature expected.
    pub fn verify(server_final: &str, expected: &[u8]) -> Result<(), Error> {
        if let Some(e) = attr(server_final, 'e') {
            return Err(refused(format!("the server refused the proof: {e}")));
        }
        let v = attr(server_final, 'v')
            .and_then(|v| B64.decode(v).ok())
            .ok_or_else(|| refused("server-final without a signature"))?;
        if aws_lc_rs::constant_time::verify_slices_are_equal(&v, expected).is_err() {
            return Err(refused(
                "the server's signature is wrong: it does not hold this user's credential",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
