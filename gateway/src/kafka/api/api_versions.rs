//! ApiVersions: every API and version range this broker serves, and the
//! features (KIP-584) it supports and has finalized.

use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::ApiVersionsResponse;

use super::{advertised, s};
use crate::kafka::versions::{FEATURES, FINALIZED_FEATURES_EPOCH};

pub(super) fn api_versions_body(error_code: i16) -> ApiVersionsResponse {
    let supported = FEATURES
        .iter()
        .map(|&(name, min, max)| {
            SupportedFeatureKey::default()
                .with_name(s(name.to_owned()))
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let finalized = FEATURES
        .iter()
        .map(|&(name, _, max)| {
            FinalizedFeatureKey::default()
                .with_name(s(name.to_owned()))
                .with_min_version_level(max)
                .with_max_version_level(max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(advertised())
        .with_supported_features(supported)
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(finalized)
}
