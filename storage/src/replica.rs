//! The follower side of replication: appending the batches a leader's log
//! already holds, byte for byte.
//!
//! A leader stamps base offsets and its partition leader epoch into each
//! batch on [`PartitionLog::append`]; a follower fetches those bytes and
//! hands them to [`PartitionLog::append_replicated`], which writes them as
//! they are. Step by step, and nothing is written unless every step before
//! the write succeeds:
//! 1. the same checks as `append` (online, framing, CRC-32C, record counts,
//!    size limits; no transactional or control batch);
//! 2. offsets go up: the first batch starts at the log end, each next one
//!    right after the one before (else `ReplicaOffsetMismatch`), except
//!    where the leader's compaction left a gap: in a compacted topic's log
//!    a batch may start further on, as it does in the leader's;
//! 3. leader epochs never go backwards, neither inside the input nor below
//!    the log's latest epoch (else `StaleLeaderEpoch`);
//! 4. roll if needed, record each new epoch in the leader-epoch cache at the
//!    base offset of its first batch, write (the shared last step of every
//!    append: writeback pacing, `flush.messages`, cut back on failure);
//! 5. replay the batches into idempotent producer state, as recovery does:
//!    the leader already judged duplicates and sequences, the follower only
//!    remembers them, so that once promoted it answers a retry as a
//!    duplicate and accepts the next sequence.
//!
//! Divergent tails are removed first with [`PartitionLog::truncate_to`]
//! (see `retention`).

use crate::error::StorageError;
use crate::log::{self, PartitionLog};
use crate::txn;

/// What a replicated append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAppend {
    /// Base offset of the first batch written (the log end before the
    /// append; for an empty input, the log end).
    pub first_offset: i64,
    /// Last offset written (`first_offset - 1` for an empty input).
    pub last_offset: i64,
    /// The log end offset after the append.
    pub log_end_offset: i64,
    /// Batches written.
    pub batches: usize,
    /// Bytes written.
    pub bytes: usize,
}

impl PartitionLog {
    /// Appends batches exactly as the leader's log holds them (a follower
    /// fetching from its leader).
    ///
    /// `records` is one or more complete v2 batches with base offsets and
    /// partition leader epochs already stamped by the leader. Contract:
    /// - every batch is validated as [`PartitionLog::append`] validates
    ///   (framing, CRC-32C, record counts, size limits) before any byte is
    ///   written; a bad batch anywhere refuses the whole input. Empty input
    ///   is a no-op.
    /// - the first batch must start at [`PartitionLog::log_end_offset`] and
    ///   each next one right after the previous batch's last offset, else
    ///   [`StorageError::ReplicaOffsetMismatch`] and nothing is written. In
    ///   a compacted topic (`LogConfig::compacted`) a batch may start past
    ///   that point: the leader's compaction removed the offsets between.
    /// - partition leader epochs may not go backwards, inside `records` or
    ///   below [`PartitionLog::latest_epoch`], else
    ///   [`StorageError::StaleLeaderEpoch`] and nothing is written.
    /// - the bytes are written unchanged (no stamping, no CRC recompute);
    ///   segments roll, indexes, writeback pacing, `flush.messages` and the
    ///   offline rules are those of `append`: a write that fails is cut
    ///   back out, and a failure after it takes the log offline.
    /// - each epoch new to the log is recorded at the base offset of its
    ///   first batch, so [`PartitionLog::epoch_end_offset`] answers as on
    ///   the leader.
    /// - idempotent producer state follows the batches without any
    ///   duplicate or sequence check (the leader decided); a follower later
    ///   promoted recognises a retry of a replicated batch as a duplicate.
    /// - transactional batches and the leader's markers (control batches)
    ///   move the producers' transactions and the aborted-transaction
    ///   index as on the leader.
    ///
    /// `now_ms` is the follower's time (segment age, producer expiry).
    pub fn append_replicated(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<ReplicaAppend, StorageError> {
        let first_offset = self.log_end_offset();
        if records.is_empty() {
            return Ok(ReplicaAppend {
                first_offset,
                last_offset: first_offset - 1,
                log_end_offset: first_offset,
                batches: 0,
                bytes: 0,
            });
        }
        let batches = self.validate_for_append(records, true, None)?;
        let mut expected = first_offset;
        let mut epoch = self.epochs.latest().map(|e| e.epoch);
        let mut placed = Vec::with_capacity(batches.len());
        for b in &batches {
            let h = &b.header;
            let gap_allowed = self.config.compacted && h.base_offset > expected;
            if h.base_offset != expected && !gap_allowed {
                return Err(StorageError::ReplicaOffsetMismatch {
                    expected,
                    got: h.base_offset,
                });
            }
            if let Some(before) = epoch.filter(|e| h.partition_leader_epoch < *e) {
                return Err(StorageError::StaleLeaderEpoch {
                    received: h.partition_leader_epoch,
                    latest: before,
                });
            }
            epoch = Some(h.partition_leader_epoch);
            let p = log::place(b, h.base_offset, h.max_timestamp)?;
            expected = p.next_offset;
            placed.push(p);
        }

        self.maybe_roll(records.len() as u64, expected, now_ms)?;
        let mut epochs_changed = false;
        for b in &batches {
            epochs_changed |= self
                .epochs
                .assign(b.header.partition_leader_epoch, b.header.base_offset);
        }
        if epochs_changed {
            self.epochs.persist()?;
        }
        self.write_placed(records, &placed, now_ms)?;
        for b in &batches {
            let h = &b.header;
            if !h.is_control() {
                self.producers.replay(h, now_ms);
                continue;
            }
            let bytes = &records[b.position..b.position + b.len];
            if let Some((control, coordinator_epoch)) = txn::read_marker(h, bytes) {
                if let Some(t) = self
                    .producers
                    .replay_marker(h, control, coordinator_epoch, now_ms)
                {
                    self.record_aborted(t)?;
                }
            }
        }
        Ok(ReplicaAppend {
            first_offset,
            last_offset: expected - 1,
            log_end_offset: expected,
            batches: batches.len(),
            bytes: records.len(),
        })
    }
}
