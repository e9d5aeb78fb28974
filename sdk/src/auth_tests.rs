use super::*;

/// RFC 7677's example exchange (SCRAM-SHA-256, user "user", password "pencil").
#[test]
fn the_rfc_7677_exchange_is_what_the_client_sends_and_accepts() {
    let (x, first) = ScramClient::start_with(
        ScramMechanism::Sha256,
        "user",
        "pencil",
        "rOprNGfwEbeRWgbNEkqO",
    );
    assert_eq!(first, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let server_first =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    let (fin, expected) = x.answer(server_first).unwrap();
    assert_eq!(
        fin,
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    ScramClient::verify("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", &expected).unwrap();
    // a server that does not hold the credential cannot sign
    let forged = ScramClient::verify("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", &expected);
    assert!(forged.is_err());
    assert!(ScramClient::verify("e=invalid-proof", &expected).is_err());
}

#[test]
fn a_server_first_message_that_does_not_extend_the_nonce_or_lacks_fields_is_refused() {
    let (x, _) = ScramClient::start_with(ScramMechanism::Sha512, "a,b=c", "pw", "abc");
    for bad in [
        "r=xyz1,s=c2FsdA==,i=4096",
        "r=abc,s=c2FsdA==,i=4096",
        "r=abcd,i=4096",
        "r=abcd,s=c2FsdA==",
        "r=abcd,s=c2FsdA==,i=0",
        "r=abcd,s=!!,i=4096",
    ] {
        assert!(x.answer(bad).is_err(), "{bad:?}");
    }
    assert_eq!(x.first_bare, "n=a=2Cb=3Dc,r=abc");
}

/// A server (or someone in the middle) that asks for a few iterations
/// would get a proof cheap to crack offline; one that asks for billions
/// would stall the client: both are refused before any PBKDF2 runs.
#[test]
fn a_server_asking_for_too_few_or_too_many_iterations_is_refused() {
    let (x, _) = ScramClient::start_with(ScramMechanism::Sha256, "user", "pencil", "abc");
    for count in [1, 4095, MAX_ITERATIONS + 1, u32::MAX] {
        let err = x
            .answer(&format!("r=abcd,s=c2FsdA==,i={count}"))
            .expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("iterations"), "{count}: {text}");
        assert_eq!(
            err.code(),
            Some(crate::proto::ErrorCode::AUTHENTICATION_FAILED),
            "{count}"
        );
    }
    for count in [MIN_ITERATIONS, 16384] {
        assert!(
            x.answer(&format!("r=abcd,s=c2FsdA==,i={count}")).is_ok(),
            "{count}"
        );
    }
}

#[test]
fn one_message_mechanisms_ride_in_the_hello_and_secrets_stay_out_of_debug() {
    let plain = Credentials::plain("alice", "s3cret");
    let (m, bytes) = plain.hello_message().unwrap().unwrap();
    assert_eq!(
        (m.as_str(), bytes.as_slice()),
        ("PLAIN", &b"\0alice\0s3cret"[..])
    );
    let token = Credentials::oauth_token("a.b.c");
    let (m, bytes) = token.hello_message().unwrap().unwrap();
    assert_eq!(m, "OAUTHBEARER");
    assert_eq!(bytes, b"n,,\x01auth=Bearer a.b.c\x01\x01");
    assert!(Credentials::scram_sha512("u", "p")
        .hello_message()
        .unwrap()
        .is_none());
    for c in [plain, Credentials::scram_sha256("alice", "s3cret")] {
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
