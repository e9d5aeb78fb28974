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
//!    range acknowledged so far), restart the log where the first recorded
//!    range begins, or where the manifest's contiguous run of entries ends
//!    when no range is recorded, with the idempotent producer state
//!    uploaded with the segment ending there;
//! 3. read every range (a few at a time, in order) and append its batches
//!    as a follower appends its leader's.
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
    let covered = manifest_end(first_entry, &manifest).max(start);
    let at = match ranges.first() {
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
    let mut reads = futures::stream::iter(ranges.iter().cloned())
        .map(|r| async move {
            let bytes = writer.read(&r.key, r.offset, r.len).await;
            (r, bytes)
        })
        .buffered(READS_IN_FLIGHT);
    let mut replayed = 0usize;
    while let Some((r, bytes)) = reads.next().await {
        handle.replica_append(view(end), bytes?, i64::MAX).await?;
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
