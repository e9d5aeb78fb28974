//! A new leader of a partition durable in object storage
//! (`durability=object-store`) rebuilds its log from object storage before
//! it serves: its followers copied nothing, so whatever its local log holds
//! may be stale, and what the last leader acknowledged is in the manifest
//! (sealed segments) and in the write-ahead ranges above it.
//!
//! Steps, each refused by the partition's task unless it still follows
//! this node at the new epoch with the log ending where the step expects
//! (as a follower's fetch answers are, see `task::follower`):
//! 1. follow this node itself at the new leader epoch: writes are refused
//!    meanwhile, and the next steps name that view;
//! 2. after a linearizable barrier (the metastore replica then holds every
//!    range acknowledged so far), restart the log where the manifest's
//!    contiguous run of entries ends, with the idempotent producer state
//!    uploaded with the segment ending there; or where the first recorded
//!    range begins, should object storage hold no copy of the offsets
//!    between the two (logged as an error);
//! 3. read every range (a few at a time, in order) and append its batches
//!    from the restart point on as a follower appends its leader's.
//!
//! The first range may begin inside sealed segments: the write-ahead
//! writer makes one range of a partition's consecutive batches in one
//! object, a segment may roll between two of them, and the metastore keeps
//! a range until manifest entries serve all of its offsets. Restarting at
//! the range's start instead would find no producer snapshot there (the
//! idempotent producer state of the sealed offsets lost) and would be
//! refused below the tiered end while the local log still reaches past it
//! (the rebuild failing at every try). The range's batches below the
//! manifest's end are skipped instead: segments end at batch boundaries,
//! and every leader's log holds the same batches as the ranges it rebuilt
//! from.
//!
//! The log then holds exactly what object storage does above the restart
//! point, and the caller tells the task to lead.

use futures::StreamExt;
use metastore::{AgentId, Manifests, Metastore};
use storage::tier::wal::WalWriter;

use crate::backend::LogError;
use crate::partition::{FetchedAt, PartitionHandle};

/// Ranges read from object storage at once.
const READS_IN_FLIGHT: usize = 8;

/// Why a rebuild did not finish; the replica manager tries again.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error("the metastore could not vouch for its ranges: {0}")]
    Metastore(#[from] metastore::MetaError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("reading a write-ahead range failed: {0}")]
    Read(#[from] storage::tier::TierError),
    #[error("write-ahead range [{base_offset}..={last_offset}] of '{key}': {reason}")]
    Range {
        key: String,
        base_offset: i64,
        last_offset: i64,
        reason: String,
    },
}

/// The batches of `bytes` (a write-ahead range's) from offset `at` on.
/// Refused when a batch holds offsets on both sides of `at`, or the bytes
/// are not whole batches.
pub fn batches_from(bytes: bytes::Bytes, at: i64) -> Result<bytes::Bytes, String> {
    let mut pos = 0usize;
    while let Some(rest) = bytes.get(pos..).filter(|r| !r.is_empty()) {
        let Some(h) = storage::BatchHeader::decode(rest) else {
            return Err(format!("{} bytes at {pos} are no batch header", rest.len()));
        };
        if h.base_offset >= at {
            return Ok(bytes.slice(pos..));
        }
        if h.last_offset() >= at {
            return Err(format!(
                "its batch [{}..={}] holds offsets on both sides of the restart offset {at}",
                h.base_offset,
                h.last_offset()
            ));
        }
        let len = h
            .total_len()
            .filter(|l| *l <= rest.len())
            .ok_or_else(|| format!("the batch at {pos} has a bad length"))?;
        pos += len;
    }
    Ok(bytes::Bytes::new())
}

/// Where the manifest's entries serve offsets contiguously from `from`.
pub fn manifest_end(from: i64, manifest: &[metastore::SegmentEntry]) -> i64 {
    let mut at = from;
    for e in manifest {
        if e.first_served() <= at && e.last_offset >= at {
            at = e.last_offset.saturating_add(1);
        }
    }
    at
}

/// Rebuilds `handle`'s log for this node (`me`) to lead at `leader_epoch`;
/// returns where the log ends.
pub async fn rebuild(
    meta: &Metastore,
    writer: &WalWriter,
    handle: &PartitionHandle,
    me: AgentId,
    leader_epoch: i32,
) -> Result<i64, RebuildError> {
    let key = handle.key();
    handle.follow(me, leader_epoch).await?;
    meta.linearizable_barrier().await?;
    let manifest = meta.segments(key.topic_id, key.partition);
    let ranges = meta.wal_ranges(key.topic_id, key.partition);
    let start = meta
        .read(|s| s.manifest_start(key.topic_id, key.partition))
        .unwrap_or(0);
    let first_entry = manifest.first().map_or(start, |e| e.first_served());
    // where the sealed segments' run ends: a batch boundary
    let sealed_end = manifest_end(first_entry, &manifest);
    let covered = sealed_end.max(start);
    let at = match ranges.first() {
        // the first range begins inside sealed segments: restart where
        // they end (see the module docs)
        Some(r) if !manifest.is_empty() && r.base_offset < sealed_end => sealed_end,
        Some(r) => {
            if r.base_offset > covered {
                tracing::error!(
                    topic_id = %key.topic_id,
                    partition = key.partition,
                    manifest_end = covered,
                    first_range = r.base_offset,
                    "object storage holds no copy of the offsets between the manifest's end and the first write-ahead range"
                );
            }
            r.base_offset
        }
        None => covered,
    };
    let producers = handle.producer_snapshot(at).await?;
    let view = |fetch_offset| FetchedAt {
        leader: me,
        leader_epoch,
        fetch_offset,
    };
    let end = *handle.log_end().borrow();
    handle.restart(view(end), at, producers).await?;
    let mut end = at;
    let above: Vec<_> = ranges
        .iter()
        .filter(|r| r.last_offset >= at)
        .cloned()
        .collect();
    let mut reads = futures::stream::iter(above)
        .map(|r| async move {
            let bytes = writer.read(&r.key, r.offset, r.len).await;
            (r, bytes)
        })
        .buffered(READS_IN_FLIGHT);
    let mut replayed = 0usize;
    while let Some((r, bytes)) = reads.next().await {
        let bytes = match bytes? {
            b if r.base_offset < at => {
                batches_from(b, at).map_err(|reason| RebuildError::Range {
                    key: r.key.clone(),
                    base_offset: r.base_offset,
                    last_offset: r.last_offset,
                    reason,
                })?
            }
            b => b,
        };
        handle.replica_append(view(end), bytes, i64::MAX).await?;
        end = r.last_offset.saturating_add(1);
        replayed += 1;
    }
    tracing::info!(
        topic_id = %key.topic_id,
        partition = key.partition,
        leader_epoch,
        restart = at,
        ranges = replayed,
        log_end = end,
        "rebuilt the log from object storage before leading"
    );
    Ok(end)
}

#[cfg(test)]
#[path = "rebuild_tests.rs"]
mod tests;
