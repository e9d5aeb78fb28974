//! The HTTP admin listener (axum): `/health` (also `/healthz`), `/metrics`
//! (Prometheus text), the JSON REST API under `/v1` ([`crate::rest`]), the
//! web console under `/aerostream/console/` ([`crate::console`]), the
//! schema registry's API under `/schema-registry` (as on its own listener,
//! [`registry`]), and
//! whatever [`HttpExtension`]s the binary adds (tiering figures, test-only
//! admin endpoints). With security on, all but the probes and `/metrics`
//! need a login (`auth.rs`), and the ACLs decide what the login's principal
//! may see and do, as they decide for a Kafka client (`caller.rs`).
//! Changes from another site's pages are refused (`csrf.rs`). Every answer
//! closes its connection, as the listener always has: probes and scrapers
//! open one connection per request.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;

mod auth;
mod caller;
mod csrf;
pub mod extension;
pub mod registry;

pub use caller::Caller;
pub use extension::{HttpExtension, HttpState};

const TEXT: &str = "text/plain";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn health(State(st): State<HttpState>) -> Response {
    if st.broker.is_leaving() {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "shutting down\n".into(),
        )
    } else {
        text(StatusCode::OK, TEXT, "ok\n".into())
    }
}

async fn metrics(State(st): State<HttpState>) -> Response {
    text(
        StatusCode::OK,
        PROMETHEUS_TEXT,
        render_metrics(&st.broker, &st.extensions),
    )
}

/// The Prometheus text `/metrics` serves (and the OpenTelemetry export
/// reads): the broker's figures, the connections', the logins', the
/// cross-zone bytes, then every HTTP extension's.
pub(crate) fn render_metrics(b: &Broker, extensions: &[Arc<dyn HttpExtension>]) -> String {
    let mut body = b.metrics.render(
        b.node.partitions.len(),
        b.node.partitions.counters(),
        &b.forward_counters,
    );
    if let Some(wal) = b.node.partitions.wal_writer() {
        body.push_str(&crate::broker::render_wal(wal.counters()));
    }
    body.push_str(&b.connections.render());
    body.push_str(&b.logins.render());
    body.push_str(&crate::cost::render_cross_zone(&crate::cross_zone::usage(
        b,
    )));
    for x in extensions {
        body.push_str(&x.metrics());
    }
    body
}

/// Extensions answer first, whatever the method, with their own status
/// (200, 404, anything else as 400) in plain text, to a caller with
/// DESCRIBE (reads) or ALTER (anything else) on the cluster. Others are not
/// asked about (an extension's endpoint may change something as it
/// answers): their request goes on to the routes, which do not know it.
async fn extensions_first(State(st): State<HttpState>, req: Request, next: Next) -> Response {
    if st.extensions.is_empty() {
        return next.run(req).await;
    }
    let allowed = req
        .extensions()
        .get::<Caller>()
        .is_some_and(|c| auth::cluster_gate(&st.broker, c, req.method()).is_ok());
    if !allowed {
        return next.run(req).await;
    }
    let target = req.uri().path_and_query().map_or_else(
        || req.uri().path().to_string(),
        |pq| pq.as_str().to_string(),
    );
    if let Some((code, body)) = st.extensions.iter().find_map(|x| x.handle(&target)) {
        let status = match code {
            200 => StatusCode::OK,
            404 => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        };
        return text(status, TEXT, body);
    }
    next.run(req).await
}

async fn close_after(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// An extension's routes answer a caller with DESCRIBE (reads) or ALTER
/// (changes) on the cluster only.
async fn cluster_gated(State(st): State<HttpState>, req: Request, next: Next) -> Response {
    let verdict = match req.extensions().get::<Caller>() {
        Some(c) => auth::cluster_gate(&st.broker, c, req.method()),
        None => Err(crate::rest::ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a login is needed".to_owned(),
        )),
    };
    match verdict {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

async fn not_found(req: Request) -> Response {
    if req.uri().path().starts_with("/v1/") {
        return crate::rest::ApiError::not_found(req.uri().path()).into_response();
    }
    text(StatusCode::NOT_FOUND, TEXT, "not found\n".into())
}

/// The whole HTTP service: probes, metrics, the REST API and extensions.
pub fn router(state: HttpState) -> Router {
    let mut app = Router::new();
    for x in state.extensions.iter() {
        if let Some((mount, routes)) = x.routes() {
            app = app.nest_service(
                mount,
                routes.layer(middleware::from_fn_with_state(state.clone(), cluster_gated)),
            );
        }
    }
    app.route("/health", any(health))
        .route("/healthz", any(health))
        .route("/metrics", any(metrics))
        .merge(crate::rest::router())
        .merge(crate::console::router())
        // the registry's API on this listener too, for the console (same
        // origin) and for clients that reach only this port
        .nest(registry::MOUNT, registry::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            extensions_first,
        ))
        // before extensions: their endpoints need a login too
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_login,
        ))
        // before the login: a forged request costs no password check
        .layer(middleware::from_fn(csrf::same_origin_changes))
        .layer(middleware::from_fn(close_after))
        .with_state(state)
}

/// Serves until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    extensions: Vec<Arc<dyn HttpExtension>>,
    mut stop: watch::Receiver<bool>,
) {
    let app = router(HttpState {
        broker,
        extensions: Arc::new(extensions),
    });
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stopped)
        .await
    {
        tracing::warn!(error = %e, "the HTTP listener stopped");
    }
}
