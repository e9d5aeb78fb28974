//! Idempotent producer state of one partition.
//!
//! For every producer id the log remembers the epoch and the last five
//! batches it wrote (first and last sequence, first and last offset). On
//! append, a batch is checked against it, the way Kafka's broker does:
//! - an epoch older than the remembered one is fenced (`InvalidProducerEpoch`);
//! - a newer epoch must start at sequence 0;
//! - a batch equal to one of the remembered five is a retry: the append is a
//!   `Duplicate` that returns the original offsets and writes nothing;
//! - otherwise its first sequence must follow the last one (wrapping at
//!   `i32::MAX`), else `OutOfOrderSequence`;
//! - a producer the log does not know (new, expired, or its batches deleted
//!   by retention or DeleteRecords from every tier) may start at any
//!   sequence. Evicting only the local copies of tiered batches keeps the
//!   producer (see `retention`).
//!
//! Transactional producers (see `txn`): a producer's first transactional
//! batch opens its ongoing transaction at that batch's first offset; the
//! marker the coordinator has written ends it (an ABORT marker yields the
//! aborted transaction for the index). A marker must carry the producer's
//! epoch or a newer one (KIP-890 bumps it with the marker) and the
//! coordinator epoch of the latest marker or a newer one. A producer with
//! an ongoing transaction neither expires nor is forgotten below the log
//! start: the last stable offset waits for its marker.
//!
//! The state is rebuilt on open from the newest snapshot
//! (`{offset:020}.snapshot`, written at roll and close) plus a scan of the
//! batch headers after it; producers seen only in that scan count as
//! updated at the time of the open (expiry runs on broker time, never on
//! the clients' batch timestamps).

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use crate::batch::BatchHeader;
use crate::error::StorageError;
use crate::files;
use crate::txn::{AbortedTxn, ControlType};

/// Batches remembered per producer (Kafka's in-flight request limit for
/// idempotence is five).
pub(crate) const REMEMBERED_BATCHES: usize = 5;
const SNAPSHOT_MAGIC: u32 = 0xAE50_5354; // "AE" "PST"
/// Version 2 added each producer's ongoing transaction and coordinator
/// epoch; version 1 snapshots (no transactions) still load.
const SNAPSHOT_VERSION: u16 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchMeta {
    pub(crate) first_seq: i32,
    pub(crate) last_seq: i32,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) max_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerEntry {
    pub(crate) epoch: i16,
    pub(crate) batches: VecDeque<BatchMeta>,
    /// Time of the last append (for expiry), in ms.
    pub(crate) last_update_ms: i64,
    /// The first offset of the producer's ongoing transaction.
    pub(crate) txn_first_offset: Option<i64>,
    /// The coordinator epoch of the latest marker (-1: none yet).
    pub(crate) coordinator_epoch: i32,
}

impl ProducerEntry {
    fn new(epoch: i16, now_ms: i64) -> Self {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            last_update_ms: now_ms,
            txn_first_offset: None,
            coordinator_epoch: -1,
        }
    }
}

/// One producer as DescribeProducers tells it (Kafka's `ProducerState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    /// The sequence of the last record written; -1 when no batch is
    /// remembered (a producer seen only in markers).
    pub last_sequence: i32,
    /// The largest timestamp of its last batch; -1 when none is remembered.
    pub last_timestamp: i64,
    /// The coordinator epoch of its latest marker; -1 before any.
    pub coordinator_epoch: i32,
    /// The first offset of its ongoing transaction.
    pub txn_first_offset: Option<i64>,
}

/// A marker to check: producer id and epoch, commit or abort, and the
/// epoch of the coordinator that asks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarkerOf {
    pub(crate) pid: i64,
    pub(crate) epoch: i16,
    pub(crate) control: ControlType,
    pub(crate) coordinator_epoch: i32,
}

/// Changes staged by one append, committed only after the write succeeded.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    entries: Vec<(i64, ProducerEntry)>,
}

#[derive(Debug, Default)]
pub(crate) struct ProducerStates {
    map: HashMap<i64, ProducerEntry>,
}

fn next_seq(s: i32) -> i32 {
    if s == i32::MAX {
        0
    } else {
        s + 1
    }
}

impl ProducerStates {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    pub(crate) fn get(&self, pid: i64) -> Option<&ProducerEntry> {
        self.map.get(&pid)
    }

    /// Checks `h` (whose first record will get `first_offset`) against the
    /// state including earlier batches of the same append, and stages its
    /// effect. Returns the original batch if `h` is a retry.
    pub(crate) fn check_and_stage(
        &self,
        staged: &mut Staged,
        h: &BatchHeader,
        first_offset: i64,
        now_ms: i64,
    ) -> Result<Option<BatchMeta>, StorageError> {
        let pid = h.producer_id;
        let current = staged
            .entries
            .iter()
            .find(|(p, _)| *p == pid)
            .map(|(_, e)| e)
            .or_else(|| self.map.get(&pid));
        if let Some(e) = current {
            if h.producer_epoch < e.epoch {
                return Err(StorageError::InvalidProducerEpoch {
                    producer_id: pid,
                    current: e.epoch,
                    received: h.producer_epoch,
                });
            }
            if h.producer_epoch > e.epoch {
                if h.base_sequence != 0 {
                    return Err(StorageError::OutOfOrderSequence {
                        producer_id: pid,
                        expected: 0,
                        received: h.base_sequence,
                    });
                }
            } else {
                let last_seq = h.last_sequence();
                if let Some(dup) = e
                    .batches
                    .iter()
                    .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
                {
                    return Ok(Some(*dup));
                }
                if let Some(last) = e.batches.back() {
                    let expected = next_seq(last.last_seq);
                    if h.base_sequence != expected {
                        return Err(StorageError::OutOfOrderSequence {
                            producer_id: pid,
                            expected,
                            received: h.base_sequence,
                        });
                    }
                }
            }
        }
        if !h.is_transactional() && current.is_some_and(|e| e.txn_first_offset.is_some()) {
            return Err(StorageError::InvalidTxnState {
                producer_id: pid,
                reason: "a non-transactional batch while the producer's transaction is ongoing"
                    .into(),
            });
        }
        let mut entry = current
            .cloned()
            .unwrap_or_else(|| ProducerEntry::new(h.producer_epoch, now_ms));
        apply(&mut entry, h, first_offset, now_ms);
        match staged.entries.iter_mut().find(|(p, _)| *p == pid) {
            Some(slot) => slot.1 = entry,
            None => staged.entries.push((pid, entry)),
        }
        Ok(None)
    }

    /// Checks marker `m` to be written at `offset`, and stages its effect;
    /// returns the aborted transaction it ends, if any.
    pub(crate) fn check_and_stage_marker(
        &self,
        staged: &mut Staged,
        m: MarkerOf,
        offset: i64,
        now_ms: i64,
    ) -> Result<Option<AbortedTxn>, StorageError> {
        let MarkerOf {
            pid,
            epoch,
            control,
            coordinator_epoch,
        } = m;
        let current = self.map.get(&pid);
        if let Some(e) = current {
            if epoch < e.epoch {
                return Err(StorageError::InvalidProducerEpoch {
                    producer_id: pid,
                    current: e.epoch,
                    received: epoch,
                });
            }
            if coordinator_epoch < e.coordinator_epoch {
                return Err(StorageError::CoordinatorFenced {
                    producer_id: pid,
                    current: e.coordinator_epoch,
                    received: coordinator_epoch,
                });
            }
        }
        let mut entry = current
            .cloned()
            .unwrap_or_else(|| ProducerEntry::new(epoch, now_ms));
        let aborted = apply_marker(
            &mut entry,
            pid,
            epoch,
            control,
            coordinator_epoch,
            offset,
            now_ms,
        );
        staged.entries.push((pid, entry));
        Ok(aborted)
    }

    /// Replays a marker read back from the log; no checks.
    pub(crate) fn replay_marker(
        &mut self,
        h: &BatchHeader,
        control: ControlType,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Option<AbortedTxn> {
        let e = self
            .map
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry::new(h.producer_epoch, now_ms));
        apply_marker(
            e,
            h.producer_id,
            h.producer_epoch,
            control,
            coordinator_epoch,
            h.base_offset,
            now_ms,
        )
    }

    /// The first offset of the oldest ongoing transaction: the last stable
    /// offset can be no higher.
    pub(crate) fn first_unstable_offset(&self) -> Option<i64> {
        self.map.values().filter_map(|e| e.txn_first_offset).min()
    }

    /// Every producer the partition remembers, by producer id.
    pub(crate) fn summaries(&self) -> Vec<ProducerSummary> {
        let mut out: Vec<ProducerSummary> = self
            .map
            .iter()
            .map(|(pid, e)| {
                let last = e.batches.back();
                ProducerSummary {
                    producer_id: *pid,
                    epoch: e.epoch,
                    last_sequence: last.map_or(-1, |b| b.last_seq),
                    last_timestamp: last.map_or(-1, |b| b.max_timestamp),
                    coordinator_epoch: e.coordinator_epoch,
                    txn_first_offset: e.txn_first_offset,
                }
            })
            .collect();
        out.sort_unstable_by_key(|p| p.producer_id);
        out
    }

    /// Producers with an ongoing transaction, with its first offset.
    pub(crate) fn ongoing(&self) -> Vec<(i64, i16, i64)> {
        let mut out: Vec<_> = self
            .map
            .iter()
            .filter_map(|(pid, e)| e.txn_first_offset.map(|f| (*pid, e.epoch, f)))
            .collect();
        out.sort_unstable();
        out
    }

    pub(crate) fn commit(&mut self, staged: Staged) {
        for (pid, e) in staged.entries {
            self.map.insert(pid, e);
        }
    }

    /// Replays a batch read back from the log (recovery); no checks, the
    /// log is the truth. `now_ms` is the broker's time of the replay: the
    /// batch's own timestamps are the client's (and may be years old for a
    /// backfill), while expiry counts from the broker's time as on the live
    /// path, so a replayed producer is not expired by the next tick.
    pub(crate) fn replay(&mut self, h: &BatchHeader, now_ms: i64) {
        if !h.has_producer_id() {
            return;
        }
        let e = self
            .map
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry::new(h.producer_epoch, now_ms));
        apply(e, h, h.base_offset, now_ms);
    }

    /// The smallest last offset over the producers' newest batches: state
    /// starting there keeps every producer remembered.
    pub(crate) fn oldest_last_offset(&self) -> Option<i64> {
        self.map
            .values()
            .filter_map(|e| e.batches.back().map(|b| b.last_offset))
            .min()
    }

    /// Forgets producers idle for `expiration_ms` or longer, except those
    /// with an ongoing transaction.
    pub(crate) fn expire(&mut self, now_ms: i64, expiration_ms: i64) {
        self.map.retain(|_, e| {
            e.txn_first_offset.is_some() || now_ms.saturating_sub(e.last_update_ms) < expiration_ms
        });
    }

    /// Forgets producers whose last batch lies wholly below `log_start`,
    /// except those with an ongoing transaction.
    pub(crate) fn remove_below(&mut self, log_start: i64) {
        self.map.retain(|_, e| {
            e.txn_first_offset.is_some()
                || e.batches.back().is_some_and(|b| b.last_offset >= log_start)
        });
    }

    pub(crate) fn encode_snapshot(&self, offset: i64) -> Vec<u8> {
        let mut b = Vec::with_capacity(32 + self.map.len() * 64);
        b.extend_from_slice(&SNAPSHOT_MAGIC.to_be_bytes());
        b.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        b.extend_from_slice(&offset.to_be_bytes());
        b.extend_from_slice(&(self.map.len() as u32).to_be_bytes());
        let mut pids: Vec<_> = self.map.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            let Some(e) = self.map.get(&pid) else {
                continue;
            };
            b.extend_from_slice(&pid.to_be_bytes());
            b.extend_from_slice(&e.epoch.to_be_bytes());
            b.extend_from_slice(&e.last_update_ms.to_be_bytes());
            b.extend_from_slice(&e.txn_first_offset.unwrap_or(-1).to_be_bytes());
            b.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            b.push(e.batches.len() as u8);
            for m in &e.batches {
                b.extend_from_slice(&m.first_seq.to_be_bytes());
                b.extend_from_slice(&m.last_seq.to_be_bytes());
                b.extend_from_slice(&m.first_offset.to_be_bytes());
                b.extend_from_slice(&m.last_offset.to_be_bytes());
                b.extend_from_slice(&m.max_timestamp.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        b
    }

    /// Decodes a snapshot; `None` if it is damaged in any way.
    pub(crate) fn decode_snapshot(bytes: &[u8]) -> Option<(i64, ProducerStates)> {
        let body_len = bytes.len().checked_sub(4)?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut r = Reader(body);
        if r.u32()? != SNAPSHOT_MAGIC {
            return None;
        }
        let version = r.u16()?;
        if version != 1 && version != SNAPSHOT_VERSION {
            return None;
        }
        let offset = r.i64()?;
        let count = r.u32()?;
        let mut map = HashMap::new();
        for _ in 0..count {
            let pid = r.i64()?;
            let epoch = r.u16()? as i16;
            let last_update_ms = r.i64()?;
            let (txn_first_offset, coordinator_epoch) = if version >= 2 {
                let first = r.i64()?;
                ((first >= 0).then_some(first), r.u32()? as i32)
            } else {
                (None, -1)
            };
            let n = usize::from(r.u8()?);
            if n > REMEMBERED_BATCHES {
                return None;
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchMeta {
                    first_seq: r.u32()? as i32,
                    last_seq: r.u32()? as i32,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    max_timestamp: r.i64()?,
                });
            }
            map.insert(
                pid,
                ProducerEntry {
                    epoch,
                    batches,
                    last_update_ms,
                    txn_first_offset,
                    coordinator_epoch,
                },
            );
        }
        r.0.is_empty().then_some((offset, ProducerStates { map }))
    }

    /// Writes `{offset:020}.snapshot` (not fsynced: a lost or torn snapshot
    /// only costs a longer header scan on open, its CRC catches damage).
    pub(crate) fn write_snapshot(&self, dir: &Path, offset: i64) -> Result<(), StorageError> {
        let name = format!("{offset:020}.{}", files::SNAPSHOT_EXT);
        files::write_atomic(dir, &name, &self.encode_snapshot(offset), false)
    }
}

fn apply(e: &mut ProducerEntry, h: &BatchHeader, first_offset: i64, now_ms: i64) {
    if h.producer_epoch != e.epoch {
        e.epoch = h.producer_epoch;
        e.batches.clear();
    }
    if h.is_transactional() && e.txn_first_offset.is_none() {
        e.txn_first_offset = Some(first_offset);
    }
    e.batches.push_back(BatchMeta {
        first_seq: h.base_sequence,
        last_seq: h.last_sequence(),
        first_offset,
        last_offset: first_offset + i64::from(h.last_offset_delta),
        max_timestamp: h.max_timestamp,
    });
    while e.batches.len() > REMEMBERED_BATCHES {
        e.batches.pop_front();
    }
    e.last_update_ms = e.last_update_ms.max(now_ms);
}

/// Ends `e`'s ongoing transaction with a marker at `offset`; a newer epoch
/// (KIP-890's bump at the end of a transaction) restarts its sequences.
fn apply_marker(
    e: &mut ProducerEntry,
    pid: i64,
    epoch: i16,
    control: ControlType,
    coordinator_epoch: i32,
    offset: i64,
    now_ms: i64,
) -> Option<AbortedTxn> {
    if epoch != e.epoch {
        e.epoch = epoch;
        e.batches.clear();
    }
    e.coordinator_epoch = e.coordinator_epoch.max(coordinator_epoch);
    e.last_update_ms = e.last_update_ms.max(now_ms);
    let first = e.txn_first_offset.take()?;
    (control == ControlType::Abort).then_some(AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: offset,
    })
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(pid: i64, epoch: i16, seq: i32, count: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 100,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    fn append(
        s: &mut ProducerStates,
        h: &BatchHeader,
        off: i64,
    ) -> Result<Option<BatchMeta>, StorageError> {
        let mut st = Staged::default();
        let r = s.check_and_stage(&mut st, h, off, 0)?;
        s.commit(st);
        Ok(r)
    }

    #[test]
    fn retry_of_a_recent_batch_is_a_duplicate_with_original_offsets() {
        let mut s = ProducerStates::default();
        assert_eq!(append(&mut s, &hdr(7, 0, 0, 3), 10).unwrap(), None);
        assert_eq!(append(&mut s, &hdr(7, 0, 3, 2), 13).unwrap(), None);
        let dup = append(&mut s, &hdr(7, 0, 0, 3), 99).unwrap().unwrap();
        assert_eq!((dup.first_offset, dup.last_offset), (10, 12));
    }

    #[test]
    fn sequence_gap_is_out_of_order() {
        let mut s = ProducerStates::default();
        append(&mut s, &hdr(7, 0, 0, 3), 0).unwrap();
        let err = append(&mut s, &hdr(7, 0, 5, 1), 3).unwrap_err();
        assert!(matches!(
            err,
            StorageError::OutOfOrderSequence {
                expected: 3,
                received: 5,
                ..
            }
        ));
    }

    #[test]
    fn older_epoch_is_fenced_and_newer_epoch_must_start_at_zero() {
        let mut s = ProducerStates::default();
        append(&mut s, &hdr(7, 2, 0, 1), 0).unwrap();
        assert!(matches!(
            append(&mut s, &hdr(7, 1, 1, 1), 1).unwrap_err(),
            StorageError::InvalidProducerEpoch {
                current: 2,
                received: 1,
                ..
            }
        ));
        assert!(matches!(
            append(&mut s, &hdr(7, 3, 4, 1), 1).unwrap_err(),
            StorageError::OutOfOrderSequence { expected: 0, .. }
        ));
        assert_eq!(append(&mut s, &hdr(7, 3, 0, 1), 1).unwrap(), None);
        assert_eq!(s.get(7).unwrap().epoch, 3);
    }

    #[test]
    fn unknown_producer_may_start_at_any_sequence_and_sequences_wrap() {
        let mut s = ProducerStates::default();
        append(&mut s, &hdr(9, 0, i32::MAX - 1, 2), 0).unwrap();
        assert_eq!(append(&mut s, &hdr(9, 0, 0, 1), 2).unwrap(), None);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut s = ProducerStates::default();
        for i in 0..6 {
            append(&mut s, &hdr(1, 0, i, 1), i64::from(i)).unwrap();
        }
        assert!(append(&mut s, &hdr(1, 0, 0, 1), 6).is_err());
        assert!(append(&mut s, &hdr(1, 0, 1, 1), 6).unwrap().is_some());
    }

    #[test]
    fn staged_batches_of_one_append_see_each_other_but_commit_together() {
        let s = ProducerStates::default();
        let mut st = Staged::default();
        s.check_and_stage(&mut st, &hdr(1, 0, 0, 2), 0, 0).unwrap();
        assert!(s.check_and_stage(&mut st, &hdr(1, 0, 5, 1), 2, 0).is_err());
        s.check_and_stage(&mut st, &hdr(1, 0, 2, 1), 2, 0).unwrap();
        assert_eq!(s.len(), 0, "nothing is visible before commit");
    }

    #[test]
    fn snapshot_round_trips_and_rejects_any_damage() {
        let mut s = ProducerStates::default();
        for pid in 0..20 {
            append(&mut s, &hdr(pid, 1, 0, 4), pid * 4).unwrap();
        }
        let bytes = s.encode_snapshot(80);
        let (off, back) = ProducerStates::decode_snapshot(&bytes).unwrap();
        assert_eq!(off, 80);
        assert_eq!(back.map, s.map);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(ProducerStates::decode_snapshot(&bad).is_none());
            assert!(ProducerStates::decode_snapshot(&bytes[..i]).is_none());
        }
    }

    #[test]
    fn idle_producers_expire() {
        let mut s = ProducerStates::default();
        let mut st = Staged::default();
        s.check_and_stage(&mut st, &hdr(1, 0, 0, 1), 0, 1_000)
            .unwrap();
        s.commit(st);
        s.expire(1_500, 1_000);
        assert_eq!(s.len(), 1);
        s.expire(2_000, 1_000);
        assert_eq!(s.len(), 0);
    }
}
