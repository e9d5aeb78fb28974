//! Connect's REST API, with the paths, status codes and JSON shapes of
//! Apache Kafka 4.x's Connect, so that curl scripts, UIs and provisioning
//! tools written for Connect work against AeroStream unchanged.
//!
//! Every agent serves the same answers: connectors, their target states,
//! the statuses workers report and source offsets are read from the
//! metastore's replicated state, and every change is a metastore command
//! (so no request is forwarded to a "leader worker" as Connect does).
//!
//! - `connectors`: creating, reading, changing and deleting connectors;
//! - `lifecycle`: statuses, tasks, restarts, pause, resume and stop;
//! - `offsets`: KIP-875's offsets endpoints (source offsets from the
//!   connector's state, sink offsets from the consumer group
//!   `connect-<name>`);
//! - `connector_plugins`: the plugins, their config definitions and
//!   config validation.
//!
//! Every error is Connect's `{"error_code": <HTTP status>, "message": ...}`,
//! including malformed bodies, unknown paths and wrong methods.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use metastore::{MetaError, Metastore};
use serde::de::DeserializeOwned;
use serde::Serialize;

mod connector_plugins;
mod connectors;
mod entities;
mod lifecycle;
mod offsets;

/// The largest request body taken (a connector config is at most
/// [`metastore::connect::MAX_CONFIG_BYTES`]).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The commit the engine was built from, when the build said
/// (`AEROSTREAM_GIT_COMMIT`); Connect answers `unknown` too when it cannot
/// tell.
pub const COMMIT: &str = match option_env!("AEROSTREAM_GIT_COMMIT") {
    Some(c) => c,
    None => "unknown",
};

/// Who answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestInfo {
    /// `host:port` of this listener: the worker id statuses show for
    /// work no worker has reported on yet.
    pub worker_id: String,
    /// The cluster id `GET /` shows; read from the metastore when `None`.
    pub cluster_id: Option<String>,
    /// This agent's schema registry (source connectors writing through it
    /// are refused while it is off).
    pub schema_registry: crate::convert::DefaultRegistry,
}

/// What every handler is given.
#[derive(Clone)]
struct Rest {
    meta: Metastore,
    info: Arc<RestInfo>,
}

impl Rest {
    /// The problems with `config` that depend on this agent rather than
    /// on the config alone.
    fn agent_problems(
        &self,
        plugin: crate::plugins::Plugin,
        config: &crate::config::Config,
    ) -> Vec<crate::config::Problem> {
        crate::convert::registry_problems(
            config,
            plugin.kind() == crate::plugins::Kind::Sink,
            self.info.schema_registry.is_off(),
        )
    }
}

/// Connect's REST API over `meta`.
pub fn router(meta: Metastore, info: RestInfo) -> Router {
    let state = Rest {
        meta,
        info: Arc::new(info),
    };
    let list = get(connectors::list).post(connectors::create);
    let plugins = get(connector_plugins::list);
    Router::new()
        .route("/", get(root))
        .route("/health", get(health))
        .route("/connectors", list.clone())
        .route("/connectors/", list)
        .route(
            "/connectors/{name}",
            get(connectors::info).delete(connectors::delete),
        )
        .route(
            "/connectors/{name}/config",
            get(connectors::config)
                .put(connectors::put_config)
                .patch(connectors::patch_config),
        )
        .route("/connectors/{name}/status", get(lifecycle::status))
        .route("/connectors/{name}/tasks", get(lifecycle::tasks))
        .route(
            "/connectors/{name}/tasks/{task}/status",
            get(lifecycle::task_status),
        )
        .route(
            "/connectors/{name}/tasks/{task}/restart",
            post(lifecycle::restart_task),
        )
        .route("/connectors/{name}/restart", post(lifecycle::restart))
        .route("/connectors/{name}/pause", put(lifecycle::pause))
        .route("/connectors/{name}/resume", put(lifecycle::resume))
        .route("/connectors/{name}/stop", put(lifecycle::stop))
        .route(
            "/connectors/{name}/offsets",
            get(offsets::get)
                .patch(offsets::alter)
                .delete(offsets::reset),
        )
        .route("/connector-plugins", plugins.clone())
        .route("/connector-plugins/", plugins)
        .route(
            "/connector-plugins/{plugin}/config",
            get(connector_plugins::config),
        )
        .route(
            "/connector-plugins/{plugin}/config/validate",
            put(connector_plugins::validate),
        )
        .fallback(unknown_path)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Connect's `ServerInfo`.
#[derive(Debug, Serialize)]
struct ServerInfo {
    version: &'static str,
    commit: &'static str,
    kafka_cluster_id: Option<String>,
}

async fn root(State(rest): State<Rest>) -> Json<ServerInfo> {
    let kafka_cluster_id = rest
        .info
        .cluster_id
        .clone()
        .or_else(|| rest.meta.read(|s| s.cluster_id().map(str::to_owned)));
    Json(ServerInfo {
        version: crate::plugins::VERSION,
        commit: COMMIT,
        kafka_cluster_id,
    })
}

/// KIP-1017's health check: healthy while the metastore has a leader
/// (every write needs one).
async fn health(State(rest): State<Rest>) -> Response {
    if rest.meta.metastore_leader().is_some() {
        Json(serde_json::json!({
            "status": "healthy",
            "message": "Worker has completed startup and is ready to handle requests."
        }))
        .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({
                "status": "unhealthy",
                "message": "No metastore leader is reachable: connectors cannot be changed."
            })),
        )
            .into_response()
    }
}

async fn unknown_path() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "HTTP 404 Not Found")
}

async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "HTTP 405 Method Not Allowed",
    )
}

/// An error as Connect answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub(crate) fn connector_not_found(name: &str) -> ApiError {
        ApiError::not_found(format!("Connector {name} not found"))
    }
}

impl From<MetaError> for ApiError {
    fn from(e: MetaError) -> ApiError {
        match e {
            MetaError::Connect { status, message } => ApiError::new(
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                message,
            ),
            // no leader, a timeout, a peer out of reach, a node stopping:
            // asking again later can work
            e if e.is_retriable() || matches!(e, MetaError::ShuttingDown) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            e => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

#[derive(Serialize)]
struct ErrorMessage<'a> {
    error_code: u16,
    message: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorMessage {
            error_code: self.status.as_u16(),
            message: &self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

/// A JSON request body, refused as Connect refuses it: 415 unless the
/// content type is JSON, 413 past [`MAX_BODY_BYTES`], 400 when it does not
/// parse.
pub(crate) struct Body<T>(pub T);

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

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "HTTP 415 Unsupported Media Type",
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), e.body_text()))?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|e| ApiError::bad_request(format!("Cannot deserialize the request body: {e}")))
    }
}

/// Path parameters; one that does not parse (a task id that is not a
/// number) names nothing, as in Connect: 404.
pub(crate) struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(t)| Params(t))
            .map_err(|e| ApiError::not_found(e.body_text()))
    }
}

/// The query string's parameters, in order, repeated ones included
/// (`?expand=status&expand=info`).
pub(crate) struct QueryParams(Vec<(String, String)>);

impl QueryParams {
    /// Every value of `key`.
    pub(crate) fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean as Connect reads one: `true` in any case is true, any
    /// other value false, `default` when absent (the last one counts).
    pub(crate) fn flag(&self, key: &str, default: bool) -> bool {
        self.all(key)
            .last()
            .map_or(default, |v| v.eq_ignore_ascii_case("true"))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| QueryParams(q))
            .map_err(|e: QueryRejection| ApiError::bad_request(e.body_text()))
    }
}

/// An empty answer with `status`.
pub(crate) fn empty(status: StatusCode) -> Response {
    status.into_response()
}

#[cfg(test)]
#[path = "rest/testkit.rs"]
mod testkit;

#[cfg(test)]
#[path = "rest/rest_tests.rs"]
mod tests;
