//! ApiVersions: every API and version range this broker serves.

use kafka_protocol::messages::ApiVersionsResponse;

use super::advertised;

pub(super) fn api_versions_body(error_code: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(advertised())
        .with_finalized_features_epoch(-1)
}
