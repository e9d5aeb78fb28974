//! The JSON REST admin API under `/v1` on the HTTP port: cluster, topics,
//! records, consumer groups, tiering and the cost report (docs/rest-api.md).
//!
//! Handlers only translate HTTP and JSON: every operation goes through the
//! same data-plane functions the Kafka admin APIs call
//! ([`dataplane::topics`], [`dataplane::group::admin`]). Routes are
//! registered through `utoipa-axum`'s router from the handlers'
//! `#[utoipa::path]` annotations, so a route cannot be served without
//! being in the OpenAPI document (`GET /v1/openapi.json`), nor documented
//! without being served.

mod cluster;
pub mod cost;
mod error;
mod groups;
mod metrics;
mod processors;
mod records;
mod tiering;
mod topics;

use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, ErrorBody};

use crate::http::extension::HttpState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "AeroStream admin API",
        description = "Cluster, topics, records, consumer groups and tiering of an AeroStream agent. Errors are `{\"code\", \"message\"}` with the stable codes of docs/rest-api.md."
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "cluster", description = "Agents and the metastore"),
        (name = "topics", description = "Topics, partitions, configs and records"),
        (name = "groups", description = "Consumer groups and their offsets"),
        (name = "tiering", description = "Uploads to object storage and the cold-read cache"),
        (name = "processors", description = "Stream processor workers and their partition leases"),
        (name = "meta", description = "This document")
    )
)]
struct ApiDoc;

/// The OpenAPI document as JSON.
#[derive(Clone)]
struct Document(Arc<String>);

/// This API's OpenAPI 3 document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI 3 document of this API", content_type = "application/json"))
)]
async fn openapi_json(Extension(doc): Extension<Document>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.0.as_str().to_owned(),
    )
        .into_response()
}

fn api() -> OpenApiRouter<HttpState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(cluster::get_cluster))
        .routes(routes!(topics::list_topics, topics::create_topic))
        .routes(routes!(topics::get_topic, topics::delete_topic))
        .routes(routes!(records::get_records))
        .routes(routes!(groups::list_groups))
        .routes(routes!(groups::get_group))
        .routes(routes!(tiering::get_tiering))
        .routes(routes!(metrics::get_metrics))
        .routes(routes!(processors::list_processors))
        .routes(routes!(processors::heartbeat))
        .routes(routes!(processors::leave))
        .routes(routes!(cost::get_cost))
        .routes(routes!(openapi_json))
}

/// The OpenAPI document of the REST API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().split_for_parts().1
}

/// The `/v1` routes, for the HTTP listener's router.
pub fn router() -> Router<HttpState> {
    let (router, doc) = api().split_for_parts();
    let json = doc.to_pretty_json().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "the OpenAPI document does not serialise");
        "{}".to_string()
    });
    router.layer(Extension(Document(Arc::new(json))))
}
