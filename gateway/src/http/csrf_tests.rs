use axum::http::{HeaderMap, HeaderValue, Method};

use super::refusal;

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_static(v));
    }
    h
}

fn code(method: Method, pairs: &[(&'static str, &'static str)]) -> Option<&'static str> {
    refusal(&method, &headers(pairs)).map(|e| e.code)
}

#[test]
fn a_simple_cross_site_post_is_refused() {
    // what a page elsewhere can send without a preflight
    let forged = [
        ("host", "127.0.0.1:9001"),
        ("origin", "https://evil.example"),
        ("content-type", "text/plain"),
        ("content-length", "30"),
    ];
    assert_eq!(code(Method::POST, &forged), Some("cross_origin"));
    let no_origin = [
        ("host", "127.0.0.1:9001"),
        ("content-type", "text/plain;charset=UTF-8"),
        ("content-length", "30"),
    ];
    assert_eq!(
        code(Method::POST, &no_origin),
        Some("unsupported_media_type")
    );
    let form = [
        ("host", "127.0.0.1:9001"),
        ("content-type", "application/x-www-form-urlencoded"),
        ("content-length", "30"),
    ];
    assert_eq!(code(Method::POST, &form), Some("unsupported_media_type"));
    let untyped = [("host", "127.0.0.1:9001"), ("transfer-encoding", "chunked")];
    assert_eq!(code(Method::PUT, &untyped), Some("unsupported_media_type"));
}

#[test]
fn the_listeners_own_pages_and_programs_may_change_things() {
    for origin in [
        "http://127.0.0.1:9001",
        "HTTP://127.0.0.1:9001",
        "https://127.0.0.1:9001",
    ] {
        let h = [
            ("host", "127.0.0.1:9001"),
            ("origin", origin),
            ("content-type", "application/json"),
            ("content-length", "2"),
        ];
        assert_eq!(code(Method::POST, &h), None, "{origin}");
    }
    // default ports are left out of one or the other
    let h = [
        ("host", "console.example:443"),
        ("origin", "https://console.example"),
    ];
    assert_eq!(code(Method::DELETE, &h), None);
    let h = [
        ("host", "console.example"),
        ("origin", "http://console.example:80"),
    ];
    assert_eq!(code(Method::DELETE, &h), None);
    // curl: no Origin
    let h = [
        ("host", "127.0.0.1:9001"),
        ("content-type", "application/json; charset=utf-8"),
        ("content-length", "2"),
    ];
    assert_eq!(code(Method::POST, &h), None);
    // a DELETE has no body to type
    assert_eq!(code(Method::DELETE, &[("host", "127.0.0.1:9001")]), None);
    let empty = [("host", "h"), ("content-length", "0")];
    assert_eq!(code(Method::POST, &empty), None);
}

#[test]
fn only_the_very_same_host_and_port_is_the_same_origin() {
    for origin in [
        "http://127.0.0.1:9002",
        "http://127.0.0.1",
        "http://127.0.0.1:9001.evil.example",
        "http://evil.example/127.0.0.1:9001",
        "null",
        "file://",
        "127.0.0.1:9001",
        "ftp://127.0.0.1:9001",
    ] {
        let h = [("host", "127.0.0.1:9001"), ("origin", origin)];
        assert_eq!(code(Method::DELETE, &h), Some("cross_origin"), "{origin}");
    }
    let no_host = [("origin", "http://127.0.0.1:9001")];
    assert_eq!(code(Method::DELETE, &no_host), Some("cross_origin"));
}

#[test]
fn reads_are_never_refused() {
    let h = [
        ("host", "127.0.0.1:9001"),
        ("origin", "https://evil.example"),
        ("content-type", "text/plain"),
        ("content-length", "3"),
    ];
    for m in [Method::GET, Method::HEAD, Method::OPTIONS] {
        assert_eq!(code(m, &h), None);
    }
}
