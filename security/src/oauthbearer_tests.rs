use std::time::UNIX_EPOCH;

use base64::Engine;
use jsonwebtoken::{EncodingKey, Header};

use super::*;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// An EC P-256 signing key and the JWK of its public half.
fn key(kid: &str) -> (EncodingKey, serde_json::Value) {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let point = pair.public_key_raw().to_vec();
    let jwk = serde_json::json!({
        "kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256",
        "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65]),
    });
    (EncodingKey::from_ec_der(&pair.serialize_der()), jwk)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn token(key: &EncodingKey, kid: &str, claims: serde_json::Value) -> String {
    let mut h = Header::new(Algorithm::ES256);
    h.kid = Some(kid.into());
    jsonwebtoken::encode(&h, &claims, key).expect("signs")
}

fn validator(keys: &[serde_json::Value], issuer: Option<&str>) -> (tempfile::TempDir, Validator) {
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, serde_json::json!({ "keys": keys }).to_string()).expect("write");
    let v = Validator::new(OAuthConfig {
        jwks,
        issuer: issuer.map(str::to_string),
        audience: None,
        principal_claim: "sub".into(),
    })
    .expect("loads");
    (dir, v)
}

#[test]
fn a_token_signed_by_a_listed_key_names_its_subject() {
    let (k, jwk) = key("k1");
    let (_dir, v) = validator(&[jwk], Some("https://idp"));
    let t = token(
        &k,
        "k1",
        serde_json::json!({"sub": "alice", "iss": "https://idp", "exp": now() + 600}),
    );
    assert_eq!(v.validate(&t).map(|(p, _)| p), Ok("alice".to_string()));
}

#[test]
fn expired_foreign_or_misissued_tokens_are_refused() {
    let (k, jwk) = key("k1");
    let (other, _) = key("k1");
    let (_dir, v) = validator(&[jwk], Some("https://idp"));
    let claims = |iss: &str, exp: u64| serde_json::json!({"sub": "alice", "iss": iss, "exp": exp});
    let expired = token(&k, "k1", claims("https://idp", now() - 3600));
    let forged = token(&other, "k1", claims("https://idp", now() + 600));
    let elsewhere = token(&k, "k1", claims("https://evil", now() + 600));
    let unknown_kid = token(&k, "k9", claims("https://idp", now() + 600));
    let no_exp = token(
        &k,
        "k1",
        serde_json::json!({"sub": "alice", "iss": "https://idp"}),
    );
    for (what, t) in [
        ("expired", expired),
        ("another key's", forged),
        ("another issuer's", elsewhere),
        ("an unknown kid's", unknown_kid),
        ("a token without exp", no_exp),
    ] {
        assert!(v.validate(&t).is_err(), "{what} token was accepted");
    }
    assert!(v.validate("not.a.token").is_err());
}

#[test]
fn an_hmac_token_is_refused_and_a_symmetric_key_set_does_not_load() {
    let (_k, jwk) = key("k1");
    let (_dir, v) = validator(&[jwk], None);
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &serde_json::json!({"sub": "mallory", "exp": now() + 600}),
        &EncodingKey::from_secret(b"guess"),
    )
    .expect("signs");
    assert!(v.validate(&hs).is_err());
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).expect("write");
    let cfg = OAuthConfig {
        jwks,
        issuer: None,
        audience: None,
        principal_claim: "sub".into(),
    };
    assert!(Validator::new(cfg).is_err());
}

#[test]
fn a_rotated_key_set_is_read_again() {
    let (k1, jwk1) = key("k1");
    let (k2, jwk2) = key("k2");
    let (dir, v) = validator(&[jwk1], None);
    let t2 = token(
        &k2,
        "k2",
        serde_json::json!({"sub": "bob", "exp": now() + 600}),
    );
    assert!(v.validate(&t2).is_err());
    // a later modification time, as a rename of a new file gives
    std::thread::sleep(std::time::Duration::from_millis(20));
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, serde_json::json!({ "keys": [jwk2] }).to_string()).expect("write");
    let later = SystemTime::now() + std::time::Duration::from_secs(5);
    let f = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_modified(later).expect("mtime");
    assert_eq!(v.validate(&t2).map(|(p, _)| p), Ok("bob".to_string()));
    let t1 = token(
        &k1,
        "k1",
        serde_json::json!({"sub": "alice", "exp": now() + 600}),
    );
    assert!(v.validate(&t1).is_err(), "the old key is gone");
}

#[test]
fn the_initial_response_yields_the_token_and_authzid() {
    let r = initial_response(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01").expect("parses");
    assert_eq!(
        r,
        InitialResponse {
            token: "abc.def.ghi",
            authzid: None
        }
    );
    let r = initial_response(b"n,a=alice,\x01host=x\x01auth=Bearer t\x01\x01").expect("parses");
    assert_eq!(r.authzid, Some("alice"));
    for bad in [
        &b"auth=Bearer t"[..],
        b"n,,\x01auth=Basic xyz\x01\x01",
        b"n,,\x01\x01",
        b"\xff",
    ] {
        assert!(initial_response(bad).is_err(), "{bad:?}");
    }
}
