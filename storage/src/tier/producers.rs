//! Producer snapshots in object storage (KIP-405): each sealed segment's
//! snapshot goes up with it as `<segment key>.producers`, and a replica
//! whose log restarts where object storage ends reads the one of the last
//! tiered segment back (see `crate::snapshots` for the local side).
//!
//! The object is optional: segments tiered before snapshots were uploaded,
//! or whose local snapshot was lost (it is written without an fsync at the
//! roll; recovery never needs more than the newest), have none, and a
//! replica restarting there starts with no producer state, as it did
//! before. A snapshot that does not decode, or was taken elsewhere than at
//! its segment's end, is not uploaded. Nothing else reads these objects:
//! they are deleted with their segment's other objects.

use std::time::Duration;

use bytes::Bytes;
use cache::object_store::path::Path;
use cache::ObjectStoreHandle;

use super::engine::SealedSegment;
use super::error::TierError;
use super::manifest::TieredSegment;
use crate::producer::ProducerStates;

/// Uploads `seg`'s producer snapshot to `key`, if it has a usable one;
/// returns the bytes sent (0: none). The put must finish within `deadline`.
pub(super) async fn upload(
    store: &ObjectStoreHandle,
    key: Path,
    seg: &SealedSegment,
    deadline: Duration,
) -> Result<u64, TierError> {
    match prepared(seg).await {
        Some(bytes) => super::sidecar::put(store, &key, bytes, deadline).await,
        None => Ok(0),
    }
}

/// The bytes of `seg`'s producer snapshot, if it has a usable one.
pub(super) async fn prepared(seg: &SealedSegment) -> Option<Vec<u8>> {
    let path = &seg.producer_snapshot_path;
    let bytes = match tokio::fs::read(path).await {
        Ok(b) => b,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(snapshot = %path.display(), error = %e, "a sealed segment's producer snapshot is unreadable; the segment goes up without it");
            }
            return None;
        }
    };
    match ProducerStates::decode_snapshot(&bytes) {
        Some((at, _)) if at == seg.next_offset() => Some(bytes),
        _ => {
            tracing::warn!(snapshot = %path.display(), "a sealed segment's producer snapshot is damaged; the segment goes up without it");
            None
        }
    }
}

/// The producer snapshot uploaded with the entry of `entries` that ends
/// right before `next_offset`; `None` when no entry ends there or it has no
/// snapshot.
pub(super) async fn read(
    store: &ObjectStoreHandle,
    entries: &[TieredSegment],
    next_offset: i64,
    deadline: Duration,
) -> Result<Option<Bytes>, TierError> {
    let Some(e) = entries.iter().find(|e| e.next_offset() == next_offset) else {
        return Ok(None);
    };
    let place = e.place(cache::layout::ObjectKind::ProducerSnapshot);
    super::sidecar::get_placed(store, &place, deadline).await
}
