//! Cross-site request forgery: a web page on another site can make a
//! browser send requests here (with the browser's remembered Basic login,
//! or none at all with security off). Without a preflight it may only send
//! a "simple" request: GET, HEAD or POST with a form or `text/plain` body,
//! and the browser names the page's origin in `Origin` on every POST.
//!
//! So every request that may change something (any method but GET, HEAD
//! and OPTIONS) is refused with 403 when it carries an `Origin` that is
//! not this listener's own (the `Host` the request was sent to), and a body
//! that is not JSON is refused with 415 `unsupported_media_type`, which a
//! simple request cannot send. The console sends JSON from the listener's
//! own origin; `curl` and other programs send no `Origin` at all. Reads
//! stay open to any origin: the browser keeps their answers from the other
//! site's page (no CORS headers are sent).

use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::rest::ApiError;

/// Whether the request's method may change something.
fn unsafe_method(m: &Method) -> bool {
    !matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether `origin` (`scheme://host[:port]`) names the host the request
/// was sent to (`Host`, with its port when not the scheme's default).
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        // `null` (a sandboxed page, a redirect across sites) or garbage
        return false;
    };
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https") || authority.contains('/') {
        return false;
    }
    let default_port = if scheme == "http" { ":80" } else { ":443" };
    let bare = |a: &str| {
        a.strip_suffix(default_port)
            .unwrap_or(a)
            .to_ascii_lowercase()
    };
    bare(authority) == bare(host)
}

/// Whether the body is declared JSON (`application/json`, with or without
/// parameters such as `charset`, or a `+json` type).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Whether the request carries a body (chunks, or a length that is not
/// zero).
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    match headers.get(header::CONTENT_LENGTH) {
        None => false,
        Some(v) => v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) != Some(0),
    }
}

/// Why a request that may change something is refused, if it is.
pub(super) fn refusal(method: &Method, headers: &HeaderMap) -> Option<ApiError> {
    if !unsafe_method(method) {
        return None;
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let origin = origin.to_str().unwrap_or("");
        if !same_origin(origin, host) {
            return Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "cross_origin",
                format!(
                    "a {method} from the page of another origin ({origin}) is refused: \
                     changes are accepted from this listener's own pages or from programs \
                     that send no Origin"
                ),
            ));
        }
    }
    if has_body(headers) && !is_json(headers) {
        return Some(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a request body must be JSON, sent with Content-Type: application/json",
        ));
    }
    None
}

/// The middleware: refuses cross-origin changes and bodies that are not
/// JSON, before any login is checked.
pub(super) async fn same_origin_changes(req: Request, next: Next) -> Response {
    if let Some(refused) = refusal(req.method(), req.headers()) {
        tracing::info!(
            method = %req.method(),
            path = req.uri().path(),
            code = refused.code,
            "HTTP request refused"
        );
        return refused.into_response();
    }
    next.run(req).await
}

#[cfg(test)]
#[path = "csrf_tests.rs"]
mod tests;
