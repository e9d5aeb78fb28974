//! `GET /v1/tiering`: uploads to object storage, upload lag and the
//! cold-read cache, as the agent's tiered storage counts them. Needs
//! DESCRIBE on the cluster.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::ApiError;
use crate::http::extension::HttpState;
use crate::http::Caller;
use metastore::acl::AclOperation;

/// The cold-read cache.
#[derive(Debug, Serialize, ToSchema)]
pub struct CacheView {
    /// Share of block lookups served from memory or disk (0 to 1).
    pub hit_ratio: f64,
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub misses: u64,
    /// Ranged GETs sent to the object store.
    pub gets: u64,
    pub get_bytes: u64,
    pub get_errors: u64,
    pub bytes_served: u64,
}

/// This agent's tiered storage.
#[derive(Debug, Serialize, ToSchema)]
pub struct TieringView {
    pub uploaded_segments: u64,
    pub uploaded_bytes: u64,
    pub uploaded_objects: u64,
    pub upload_failures: u64,
    pub uploads_in_flight: u64,
    /// Sealed segments waiting for upload, and their bytes.
    pub pending_segments: u64,
    pub pending_bytes: u64,
    /// Seconds since the oldest segment still waiting for upload was sealed.
    pub upload_lag_seconds: f64,
    /// Offsets on local disk not yet in object storage, over all partitions.
    pub upload_lag_offsets: u64,
    /// Bytes of partition data on local disk.
    pub local_bytes: u64,
    pub local_disk_limit: Option<u64>,
    pub cold_reads: u64,
    pub cold_read_bytes: u64,
    pub cold_read_errors: u64,
    pub deleted_objects: u64,
    pub cache: CacheView,
}

/// Upload progress and lag, and the cold-read cache's hit ratio.
#[utoipa::path(
    get,
    path = "/v1/tiering",
    tag = "tiering",
    responses(
        (status = 200, description = "Tiering figures", body = TieringView),
        (status = 403, description = "`forbidden`: no DESCRIBE on the cluster", body = super::ErrorBody),
        (status = 404, description = "`tiering_disabled`: this agent has no tiered storage", body = super::ErrorBody)
    )
)]
pub async fn get_tiering(
    State(st): State<HttpState>,
    caller: Caller,
) -> Result<Json<TieringView>, ApiError> {
    caller.require_on_cluster(&st.broker, AclOperation::Describe)?;
    let s = st
        .extensions
        .iter()
        .find_map(|x| x.tiering())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "tiering_disabled",
                "this agent has no tiered storage",
            )
        })?;
    Ok(Json(TieringView {
        uploaded_segments: s.uploaded_segments,
        uploaded_bytes: s.uploaded_bytes,
        uploaded_objects: s.uploaded_objects,
        upload_failures: s.upload_failures,
        uploads_in_flight: s.uploads_in_flight,
        pending_segments: s.pending_segments,
        pending_bytes: s.pending_bytes,
        upload_lag_seconds: s.upload_lag_seconds,
        upload_lag_offsets: s.upload_lag_offsets,
        local_bytes: s.local_bytes,
        local_disk_limit: s.local_disk_limit,
        cold_reads: s.cold_reads,
        cold_read_bytes: s.cold_read_bytes,
        cold_read_errors: s.cold_read_errors,
        deleted_objects: s.deleted_objects,
        cache: CacheView {
            hit_ratio: s.cache.hit_ratio(),
            memory_hits: s.cache.memory_hits,
            disk_hits: s.cache.disk_hits,
            misses: s.cache.misses,
            gets: s.cache.gets,
            get_bytes: s.cache.get_bytes,
            get_errors: s.cache.get_errors,
            bytes_served: s.cache.bytes_served,
        },
    }))
}
