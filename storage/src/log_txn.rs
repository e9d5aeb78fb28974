//! The log's side of transactions (see `txn`): markers written as the
//! leader, and what read_committed reads need to know.

use crate::batch;
use crate::error::StorageError;
use crate::log::{place, AppendInfo, PartitionLog};
use crate::producer::{MarkerOf, ProducerSummary, Staged};
use crate::txn::{self, AbortedTxn, ControlType};

impl PartitionLog {
    /// The first offset of the oldest transaction still waiting for its
    /// marker: the last stable offset is the lower of this and the high
    /// watermark. `None` when no transaction is ongoing.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers.first_unstable_offset()
    }

    /// Every producer the partition remembers (DescribeProducers).
    pub fn producers(&self) -> Vec<ProducerSummary> {
        self.producers.summaries()
    }

    /// Ongoing transactions as `(producer id, epoch, first offset)`.
    pub fn ongoing_transactions(&self) -> Vec<(i64, i16, i64)> {
        self.producers.ongoing()
    }

    /// The aborted transactions a read_committed fetch of `[from, upto)`
    /// must name, by first offset.
    pub fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<AbortedTxn> {
        self.aborted.overlapping(from, upto)
    }

    /// Writes the marker that ends producer `producer_id`'s transaction
    /// (`control`: commit or abort), asked for by a transaction coordinator
    /// at `coordinator_epoch`, as a control batch at the log end. The
    /// producer's epoch must be `producer_epoch` or older; a marker for a
    /// producer without an ongoing transaction is still written (a retried
    /// marker, or a transaction with no record here), as Kafka does.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        control: ControlType,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        self.poll_flushes();
        self.check_online()?;
        if let Some(latest) = self.epochs.latest() {
            if leader_epoch < latest.epoch {
                return Err(StorageError::StaleLeaderEpoch {
                    received: leader_epoch,
                    latest: latest.epoch,
                });
            }
        }
        let mut records = txn::encode_marker(
            producer_id,
            producer_epoch,
            control,
            coordinator_epoch,
            now_ms,
        );
        let b = batch::validate(&records, 0, self.config.batch_limits())?;
        let offset = self.log_end_offset();
        let mut staged = Staged::default();
        let marker = MarkerOf {
            pid: producer_id,
            epoch: producer_epoch,
            control,
            coordinator_epoch,
        };
        let aborted = self
            .producers
            .check_and_stage_marker(&mut staged, marker, offset, now_ms)?;
        let p = place(&b, offset, now_ms)?;
        self.maybe_roll(records.len() as u64, p.next_offset, now_ms)?;
        batch::stamp(&mut records, offset, leader_epoch);
        if self.epochs.assign(leader_epoch, offset) {
            self.epochs.persist()?;
        }
        self.write_placed(&records, std::slice::from_ref(&p), now_ms)?;
        self.producers.commit(staged);
        if let Some(t) = aborted {
            self.record_aborted(t)?;
        }
        Ok(AppendInfo {
            base_offset: offset,
            last_offset: offset,
            log_append_time_ms: -1,
            max_timestamp: now_ms,
            record_count: 1,
            bytes: records.len(),
        })
    }

    /// Remembers an aborted transaction and rewrites the index file of the
    /// segment holding its marker.
    pub(crate) fn record_aborted(&mut self, t: AbortedTxn) -> Result<(), StorageError> {
        self.aborted.insert(t);
        let Some((base, seg)) = self.segments.range(..=t.last_offset).next_back() else {
            return Ok(());
        };
        self.aborted
            .persist_segment(&self.dir, *base, seg.next_offset.max(t.last_offset + 1))
    }
}
