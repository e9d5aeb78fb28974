#![allow(clippy::unwrap_used, clippy::expect_used)]

use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair};
use rustls::pki_types::CertificateDer;

use super::{principal_of, PrincipalError};

/// A self-signed certificate whose subject has `attrs`, in that order.
fn cert_with(attrs: Vec<(DnType, DnValue)>) -> CertificateDer<'static> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    for (t, v) in attrs {
        dn.push(t, v);
    }
    params.distinguished_name = dn;
    let key = KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().der().clone()
}

/// `der` with every PrintableString holding `text` retagged as `tag`
/// (same length, so the structure stays valid; the signature does not,
/// which naming the principal does not check).
fn retag(der: &CertificateDer<'_>, text: &[u8], tag: u8) -> CertificateDer<'static> {
    let mut needle = vec![0x13, u8::try_from(text.len()).unwrap()];
    needle.extend_from_slice(text);
    let mut bytes = der.as_ref().to_vec();
    let mut found = 0;
    let mut i = 0;
    while i + needle.len() <= bytes.len() {
        if bytes[i..i + needle.len()] == needle[..] {
            bytes[i] = tag;
            found += 1;
            i += needle.len();
        } else {
            i += 1;
        }
    }
    assert!(found > 0, "the attribute is in the certificate");
    CertificateDer::from(bytes)
}

#[test]
fn the_principal_is_the_subject_in_rfc_2253_order_and_escapes() {
    let cert = cert_with(vec![
        (DnType::OrganizationName, "Example, Inc".into()),
        (DnType::CommonName, "alice".into()),
    ]);
    assert_eq!(
        principal_of(&cert).unwrap(),
        "User:CN=alice,O=Example\\, Inc"
    );
}

#[test]
fn every_directory_string_type_is_its_text() {
    let cert = cert_with(vec![
        (
            DnType::OrganizationName,
            DnValue::BmpString("Ærø".try_into().unwrap()),
        ),
        (
            DnType::OrganizationalUnitName,
            DnValue::UniversalString("ops ☂".try_into().unwrap()),
        ),
        (
            DnType::LocalityName,
            DnValue::TeletexString("Oslo".try_into().unwrap()),
        ),
        (
            DnType::CommonName,
            DnValue::PrintableString("svc".try_into().unwrap()),
        ),
    ]);
    assert_eq!(
        principal_of(&cert).unwrap(),
        "User:CN=svc,L=Oslo,OU=ops ☂,O=Ærø"
    );
}

/// A value of a type that is no string (here an OCTET STRING and an
/// INTEGER where a name belongs) is written as RFC 2253 writes it: `#` and
/// its DER encoding in hex. Read as an empty string instead, every such
/// certificate would share the one principal `User:CN=`.
#[test]
fn a_value_that_is_no_string_is_written_in_hex_not_dropped() {
    let base = cert_with(vec![
        (
            DnType::OrganizationName,
            DnValue::PrintableString("QQQQ".try_into().unwrap()),
        ),
        (
            DnType::CommonName,
            DnValue::PrintableString("XXXX".try_into().unwrap()),
        ),
    ]);
    let octets = retag(&retag(&base, b"XXXX", 0x04), b"QQQQ", 0x02);
    assert_eq!(
        principal_of(&octets).unwrap(),
        "User:CN=#040458585858,O=#020451515151"
    );
    // another value, another principal
    let other = cert_with(vec![(
        DnType::CommonName,
        DnValue::PrintableString("YYYY".try_into().unwrap()),
    )]);
    let other = retag(&other, b"YYYY", 0x04);
    assert_eq!(principal_of(&other).unwrap(), "User:CN=#040459595959");
}

#[test]
fn a_certificate_that_does_not_parse_names_no_principal() {
    let garbage = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01]);
    assert!(matches!(
        principal_of(&garbage),
        Err(PrincipalError::Unparsable(_))
    ));
}
