//! Producer snapshots on disk: which are kept, and restoring idempotent
//! producer state from a snapshot another replica took (KIP-405).
//!
//! A roll writes `{end:020}.snapshot`, the producer state after the sealed
//! segment's last batch. Recovery needs only the newest, so a plain log
//! keeps two. A tiered log also uploads each sealed segment's snapshot
//! with the segment (`tier::driver`), so it keeps every snapshot above what
//! object storage holds ([`PartitionLog::keep_snapshots_above`], moved by
//! `TieredPartition` as the manifest grows) until its segment is uploaded,
//! whether this replica uploads it as leader or later, once promoted.
//!
//! A replica whose log restarts empty where object storage ends (a follower
//! fallen below its leader's local start, a new or lost local log) has no
//! batch to rebuild producer state from. It restores the snapshot uploaded
//! with the last tiered segment ([`PartitionLog::restore_producers`]), so
//! once it leads, a producer retrying a batch written before that segment
//! was sealed gets a duplicate answer instead of a second copy. Step by
//! step, durable when it returns:
//! 1. the snapshot must decode (CRC, format) and be taken at this log's
//!    end, and the log must hold no batch, else nothing changes;
//! 2. the producer start is lowered to the oldest remembered batch and
//!    checkpointed, so neither a reopen nor retention forgets the restored
//!    producers while their batches exist in object storage (they are
//!    expired by the log start across tiers, as evicted local copies are);
//! 3. the snapshot is written (fsynced) as this log's snapshot at its end,
//!    where recovery finds it;
//! 4. the state is replaced.
//!
//! A crash between 2 and 3 leaves no snapshot: the state is empty, as
//! before restoring.

use crate::error::{IoContext, StorageError};
use crate::files::{self, SNAPSHOT_EXT};
use crate::log::PartitionLog;
use crate::producer::ProducerStates;
use crate::recovery;

impl PartitionLog {
    /// Keeps the `keep` newest producer snapshots, and every one above
    /// [`PartitionLog::keep_snapshots_above`]'s offset; none below the log
    /// start.
    pub(crate) fn prune_snapshots(&self, keep: usize) -> Result<(), StorageError> {
        let mut offs = Vec::new();
        for e in std::fs::read_dir(&self.dir).ctx(|| format!("list {}", self.dir.display()))? {
            let e = e.ctx(|| format!("list {}", self.dir.display()))?;
            if let Some((o, SNAPSHOT_EXT)) =
                e.file_name().to_str().and_then(files::parse_offset_name)
            {
                offs.push(o);
            }
        }
        offs.sort_unstable_by(|a, b| b.cmp(a));
        for (i, o) in offs.into_iter().enumerate() {
            let needed = o > self.snapshots_needed_above;
            if o < self.log_start || (i >= keep && !needed) {
                files::remove_if_exists(&files::offset_path(&self.dir, o, SNAPSHOT_EXT))?;
            }
        }
        Ok(())
    }

    /// Keeps every producer snapshot at an offset above `offset` from now
    /// on, whatever their number (a tiered log: the snapshots of sealed
    /// segments object storage does not hold yet).
    pub(crate) fn keep_snapshots_above(&mut self, offset: i64) {
        self.snapshots_needed_above = offset;
    }

    /// Restores idempotent producer state from `snapshot`, the bytes of a
    /// producer snapshot taken at this log's end by another replica (see
    /// the module docs). Returns `false`, changing nothing, when the
    /// snapshot is damaged, taken at another offset, or the log holds
    /// batches; `Err` only when writing the checkpoints failed.
    pub fn restore_producers(&mut self, snapshot: &[u8]) -> Result<bool, StorageError> {
        let end = self.log_end_offset();
        let Some((at, states)) = ProducerStates::decode_snapshot(snapshot) else {
            tracing::warn!(dir = %self.dir.display(), "a producer snapshot to restore is damaged; producer state starts empty");
            return Ok(false);
        };
        if at != end || self.log_start != end {
            tracing::warn!(dir = %self.dir.display(), snapshot_at = at, log_start = self.log_start, log_end = end, "a producer snapshot to restore was not taken where this empty log starts; producer state starts empty");
            return Ok(false);
        }
        let start = states.oldest_last_offset().unwrap_or(end).min(end);
        if start < self.producer_start {
            recovery::write_producer_start(&self.dir, start)?;
        }
        let name = format!("{end:020}.{SNAPSHOT_EXT}");
        files::write_atomic(&self.dir, &name, snapshot, true)?;
        self.producer_start = self.producer_start.min(start);
        self.producers = states;
        Ok(true)
    }
}
