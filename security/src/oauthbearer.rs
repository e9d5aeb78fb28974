//! SASL/OAUTHBEARER (RFC 7628, KIP-255): the client sends a JWT its
//! identity provider signed, and the agent checks it against the issuer's
//! public keys, as Kafka's JWT validator does (KIP-768): the signature with
//! a key of the configured JWKS file (chosen by `kid`), `exp` (required)
//! and `nbf` with 30 s of leeway, `iss` and `aud` when configured. The
//! principal is `User:` and the `sub` claim (or the configured claim).
//!
//! Only asymmetric algorithms are accepted (RS*, PS*, ES*, EdDSA): a JWKS
//! holds public keys, and an HMAC key in it would let anyone who can read
//! the file sign tokens. The file is read again when it changes, so keys
//! rotate without a restart.

use std::path::PathBuf;
use std::sync::RwLock;
use std::time::SystemTime;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// Seconds of clock difference tolerated on `exp` and `nbf`.
pub const LEEWAY_SECONDS: u64 = 30;

/// How tokens are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// A JSON Web Key Set file (`{"keys": [...]}`) with the issuer's public keys.
    pub jwks: PathBuf,
    /// The `iss` every token must carry, if set.
    pub issuer: Option<String>,
    /// An `aud` every token must include, if set.
    pub audience: Option<String>,
    /// The claim naming the principal (Kafka's `sasl.oauthbearer.sub.claim.name`).
    pub principal_claim: String,
}

/// The keys, as last read, with the file's modification time.
#[derive(Debug)]
struct Keys {
    modified: Option<SystemTime>,
    set: JwkSet,
}

/// Checks tokens against the configured keys.
#[derive(Debug)]
pub struct Validator {
    config: OAuthConfig,
    keys: RwLock<Keys>,
}

fn modified(config: &OAuthConfig) -> Option<SystemTime> {
    std::fs::metadata(&config.jwks)
        .and_then(|m| m.modified())
        .ok()
}

fn load(config: &OAuthConfig) -> Result<Keys, String> {
    let modified = modified(config);
    let text = std::fs::read_to_string(&config.jwks)
        .map_err(|e| format!("cannot read {}: {e}", config.jwks.display()))?;
    let set: JwkSet = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a JSON Web Key Set: {e}", config.jwks.display()))?;
    if set.keys.is_empty() {
        return Err(format!("{} holds no key", config.jwks.display()));
    }
    for k in &set.keys {
        if matches!(
            k.algorithm,
            jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
        ) {
            return Err(format!(
                "{} holds a symmetric (oct) key: only public keys are accepted",
                config.jwks.display()
            ));
        }
    }
    Ok(Keys { modified, set })
}

const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl Validator {
    /// Reads the key set; fails when it cannot be used at all.
    pub fn new(config: OAuthConfig) -> Result<Validator, String> {
        let keys = load(&config)?;
        Ok(Validator {
            config,
            keys: RwLock::new(keys),
        })
    }

    /// Re-reads the key set when the file changed; a set that does not load
    /// is logged and the old one stays.
    fn refresh(&self) {
        let now = modified(&self.config);
        let stale = self.keys.read().map(|k| k.modified != now).unwrap_or(false);
        if !stale {
            return;
        }
        match load(&self.config) {
            Ok(keys) => {
                if let Ok(mut k) = self.keys.write() {
                    tracing::info!(path = %self.config.jwks.display(), keys = keys.set.keys.len(), "OAUTHBEARER keys reloaded");
                    *k = keys;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "OAUTHBEARER keys not reloaded; the old ones stay")
            }
        }
    }

    /// The principal's name a valid token stands for and when the token
    /// expires (seconds since the epoch), or why it is not valid.
    pub fn validate(&self, token: &str) -> Result<(String, u64), String> {
        self.refresh();
        let header = jsonwebtoken::decode_header(token).map_err(|e| format!("bad token: {e}"))?;
        if !ASYMMETRIC.contains(&header.alg) {
            return Err(format!("algorithm {:?} is not accepted", header.alg));
        }
        let jwk: Jwk = {
            let keys = self.keys.read().map_err(|_| "the key set is unavailable")?;
            let found = match &header.kid {
                Some(kid) => keys.set.find(kid),
                None if keys.set.keys.len() == 1 => keys.set.keys.first(),
                None => None,
            };
            found
                .cloned()
                .ok_or_else(|| format!("no key {:?} in the key set", header.kid))?
        };
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| format!("unusable key: {e}"))?;
        let mut v = Validation::new(header.alg);
        v.leeway = LEEWAY_SECONDS;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp"]);
        match &self.config.issuer {
            Some(iss) => v.set_issuer(&[iss]),
            None => v.iss = None,
        }
        match &self.config.audience {
            Some(aud) => v.set_audience(&[aud]),
            None => v.validate_aud = false,
        }
        let data =
            jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(token, &key, &v)
                .map_err(|e| format!("token refused: {e}"))?;
        let claim = &self.config.principal_claim;
        let exp = data
            .claims
            .get("exp")
            .and_then(serde_json::Value::as_u64)
            .ok_or("the token's exp is not a number of seconds")?;
        match data.claims.get(claim) {
            Some(serde_json::Value::String(p)) if !p.is_empty() => Ok((p.clone(), exp)),
            _ => Err(format!(
                "the token has no {claim} claim naming the principal"
            )),
        }
    }
}

/// A client's initial response (RFC 7628 section 3.1):
/// `n,[a=authzid],` `^A` `auth=Bearer TOKEN` `^A` (other pairs) `^A`.
#[derive(Debug, PartialEq, Eq)]
pub struct InitialResponse<'a> {
    pub token: &'a str,
    /// Whom the client asks to act as; it must be the token's principal.
    pub authzid: Option<&'a str>,
}

pub fn initial_response(message: &[u8]) -> Result<InitialResponse<'_>, String> {
    let text = std::str::from_utf8(message).map_err(|_| "not UTF-8".to_string())?;
    let mut parts = text.split('\u{1}');
    let gs2 = parts.next().unwrap_or_default();
    let mut fields = gs2.split(',');
    if !matches!(fields.next(), Some("n" | "y")) {
        return Err("no GS2 header (n,,)".into());
    }
    let authzid = match fields.next() {
        Some("") | None => None,
        Some(a) => Some(
            a.strip_prefix("a=")
                .ok_or_else(|| format!("bad GS2 authzid {a:?}"))?,
        ),
    };
    for kv in parts {
        if let Some(value) = kv.strip_prefix("auth=") {
            let token = value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
                .ok_or("the auth value is not a Bearer token")?;
            return Ok(InitialResponse {
                token: token.trim(),
                authzid,
            });
        }
    }
    Err("no auth=Bearer pair".into())
}

#[cfg(test)]
#[path = "oauthbearer_tests.rs"]
mod tests;
