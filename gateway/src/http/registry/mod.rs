//! The schema registry's listener: Confluent's Schema Registry REST API
//! (`--schema-registry-addr`, 127.0.0.1:8081 by default, as Confluent's),
//! so Confluent's serializers and clients use AeroStream's registry with
//! nothing but its URL changed. Schemas, subjects and settings live in the
//! metastore ([`metastore::registry`]), so every agent serves the same ids;
//! parsing and compatibility are the `registry` crate's.
//!
//! The same logins as the HTTP listener (`auth.rs`: Basic with a SCRAM
//! user, or a bearer JWT), and ACLs mapped onto Kafka's resources
//! (`authz.rs`). Errors are the registry's: `{"error_code": 40401,
//! "message": ...}` with the HTTP status of the code's first three digits.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::HttpState;
use crate::broker::Broker;

mod authz;
mod handlers;
mod request;
mod service;
mod settings;

/// The registry's JSON media type (clients accept plain JSON too).
const MEDIA: &str = "application/vnd.schemaregistry.v1+json";

/// A refusal in the registry's own terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    pub code: u32,
    pub message: String,
}

impl RegistryError {
    pub fn new(code: u32, message: impl Into<String>) -> RegistryError {
        RegistryError {
            code,
            message: message.into(),
        }
    }

    fn status(&self) -> StatusCode {
        let head = if self.code >= 1000 {
            self.code / 100
        } else {
            self.code
        };
        u16::try_from(head)
            .ok()
            .and_then(|s| StatusCode::from_u16(s).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<metastore::MetaError> for RegistryError {
    fn from(e: metastore::MetaError) -> RegistryError {
        match e {
            metastore::MetaError::Registry { code, message } => RegistryError { code, message },
            other if other.is_retriable() => RegistryError::new(
                50002,
                format!("the registry's store did not answer in time: {other}"),
            ),
            other => RegistryError::new(metastore::registry::code::STORE_ERROR, other.to_string()),
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error_code: u32,
    message: &'a str,
}

impl IntoResponse for RegistryError {
    fn into_response(self) -> Response {
        let body = serde_json::to_string(&ErrorBody {
            error_code: self.code,
            message: &self.message,
        })
        .unwrap_or_default();
        (self.status(), [(header::CONTENT_TYPE, MEDIA)], body).into_response()
    }
}

/// A JSON answer with the registry's media type.
fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => (StatusCode::OK, [(header::CONTENT_TYPE, MEDIA)], body).into_response(),
        Err(e) => RegistryError::new(50001, format!("answer not encoded: {e}")).into_response(),
    }
}

type Answer = Result<Response, RegistryError>;

/// Where the HTTP listener serves the registry's API as well.
pub const MOUNT: &str = "/schema-registry";

/// The registry's endpoints, without a login layer (the listener that
/// mounts them adds its own).
pub fn routes() -> Router<HttpState> {
    settings::routes(handlers::routes())
}

/// The registry's routes with the HTTP listener's logins.
pub fn router(broker: Arc<Broker>) -> Router {
    let state = HttpState {
        broker,
        extensions: Arc::new(Vec::new()),
    };
    routes()
        .layer(middleware::from_fn_with_state(
            state.clone(),
            super::auth::require_login,
        ))
        .with_state(state)
}

/// Serves the registry on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    let app = router(broker).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stopped)
        .await
    {
        tracing::warn!(error = %e, "the schema registry listener stopped");
    }
}
