use base64::Engine;

use super::*;

/// RFC 7677's example exchange (SCRAM-SHA-256, user "user", password "pencil").
#[test]
fn the_rfc_7677_exchange_is_answered_as_the_rfc_answers_it() {
    let m = ScramMechanism::Sha256;
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let salted = salted_password(m, b"pencil", &salt, 4096);
    let c = credential_from_salted(m, salt, &salted, 4096);
    let first = parse_client_first("n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
    assert_eq!(first.user, "user");
    let (x, server_first) =
        Exchange::start_with(m, first, c.clone(), "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
    assert_eq!(
        server_first,
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let server_final = x
        .finish("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        .unwrap();
    assert_eq!(
        server_final,
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
    assert!(password_matches(m, &c, "pencil"));
    assert!(!password_matches(m, &c, "pencil2"));
}

/// What a client computes for its final message.
fn client_final(m: ScramMechanism, password: &str, first_bare: &str, server_first: &str) -> String {
    let salt = B64.decode(attr(server_first, 's').unwrap()).unwrap();
    let i: u32 = attr(server_first, 'i').unwrap().parse().unwrap();
    let nonce = attr(server_first, 'r').unwrap();
    let salted = salted_password(m, password.as_bytes(), &salt, i);
    let client_key = mac(m, &salted, b"Client Key");
    let stored = hash(m, &client_key);
    let without = format!("c=biws,r={nonce}");
    let auth = format!("{first_bare},{server_first},{without}");
    let sig = mac(m, &stored, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
    format!("{without},p={}", B64.encode(proof))
}

#[test]
fn a_sha512_exchange_succeeds_with_the_password_and_fails_without_it() {
    let m = ScramMechanism::Sha512;
    let c = credential(m, "s3cret", 4096).unwrap();
    for (password, ok) in [("s3cret", true), ("wrong", false)] {
        let first = parse_client_first("n,,n=al=2Cice,r=abc").unwrap();
        assert_eq!(first.user, "al,ice");
        let (x, server_first) = Exchange::start(m, first, c.clone()).unwrap();
        let fin = client_final(m, password, "n=al=2Cice,r=abc", &server_first);
        assert_eq!(x.finish(&fin).is_ok(), ok, "{password}");
    }
}

#[test]
fn malformed_first_messages_are_refused() {
    for bad in [
        "",
        "n,,",
        "p=tls-unique,,n=u,r=x",
        "n,,r=x",
        "n,,n=u",
        "n,,n=u=41,r=x",
        "n,x,n=u,r=x",
    ] {
        assert!(parse_client_first(bad).is_err(), "{bad:?}");
    }
}
