//! The web console at `/aerostream/console/`: a few pages of plain HTML,
//! CSS and JavaScript, compiled into the binary, that read the REST API
//! ([`crate::rest`]) from the browser. Nothing is fetched from elsewhere.

use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

/// Where the console is served.
pub const PATH: &str = "/aerostream/console/";

const INDEX: &str = include_str!("assets/index.html");
const APP: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The console's routes.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/aerostream/console",
            get(|| async { Redirect::permanent(PATH) }),
        )
        .route(
            PATH,
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/aerostream/console/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP) }),
        )
        .route(
            "/aerostream/console/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}
