//! The delivery ledger: which messages the broker acknowledged and which the
//! consumers received, per producer and sequence number, so that the end of
//! a run can say exactly how many acknowledged messages never arrived.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A growable set of sequence numbers (a bitmap: one bit per message, so a
/// hundred million messages cost 12 MiB).
#[derive(Debug, Clone, Default)]
pub struct SeqSet {
    words: Vec<u64>,
    len: u64,
}

impl SeqSet {
    /// Adds `seq`; returns false if it was already present.
    pub fn insert(&mut self, seq: u64) -> bool {
        let word = (seq / 64) as usize;
        if word >= self.words.len() {
            let grow = (word + 1).max(self.words.len() * 2);
            self.words.resize(grow, 0);
        }
        let bit = 1u64 << (seq % 64);
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        self.len += u64::from(fresh);
        fresh
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.words
            .get((seq / 64) as usize)
            .is_some_and(|w| w & (1u64 << (seq % 64)) != 0)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Members of `self` that `other` lacks: how many, and the first `keep`.
    pub fn difference(&self, other: &SeqSet, keep: usize) -> (u64, Vec<u64>) {
        let mut count = 0u64;
        let mut first = Vec::new();
        for (i, &w) in self.words.iter().enumerate() {
            let missing = w & !other.words.get(i).copied().unwrap_or(0);
            if missing == 0 {
                continue;
            }
            count += u64::from(missing.count_ones());
            let mut m = missing;
            while m != 0 && first.len() < keep {
                let bit = m.trailing_zeros() as u64;
                first.push(i as u64 * 64 + bit);
                m &= m - 1;
            }
        }
        (count, first)
    }
}

/// What happened to a received message in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// First time this message was seen.
    New,
    /// Seen before (a redelivery, e.g. after a rebalance).
    Duplicate,
    /// Names a producer this run does not have: corrupt or foreign.
    UnknownProducer,
}

/// The verdict of a ledger audit.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Audit {
    /// Messages the broker acknowledged.
    pub acked: u64,
    /// Distinct messages the consumers received.
    pub received: u64,
    /// Acknowledged but never received: the number that must be zero.
    pub lost: u64,
    /// Received although their send was reported failed (the write landed
    /// but the acknowledgement did not): not a loss.
    pub received_unacked: u64,
    /// Messages received more than once.
    pub duplicates: u64,
    /// Up to ten lost messages as (producer, sequence), for debugging.
    pub lost_examples: Vec<(u32, u64)>,
}

/// Shared by all producer and consumer threads of one run.
#[derive(Debug)]
pub struct Ledger {
    acked: Vec<Mutex<SeqSet>>,
    received: Vec<Mutex<SeqSet>>,
    duplicates: AtomicU64,
}

fn lock(m: &Mutex<SeqSet>) -> std::sync::MutexGuard<'_, SeqSet> {
    // A panic while holding the lock cannot leave a bitmap half-updated in a
    // way that matters for counting, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ledger {
    pub fn new(producers: u32) -> Ledger {
        Ledger {
            acked: (0..producers).map(|_| Mutex::default()).collect(),
            received: (0..producers).map(|_| Mutex::default()).collect(),
            duplicates: AtomicU64::new(0),
        }
    }

    /// Records a successful acknowledgement.
    pub fn acked(&self, producer: u32, seq: u64) {
        if let Some(set) = self.acked.get(producer as usize) {
            lock(set).insert(seq);
        }
    }

    /// Records a consumed message.
    pub fn received(&self, producer: u32, seq: u64) -> Receipt {
        let Some(set) = self.received.get(producer as usize) else {
            return Receipt::UnknownProducer;
        };
        if lock(set).insert(seq) {
            Receipt::New
        } else {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
            Receipt::Duplicate
        }
    }

    /// Acknowledged messages not (yet) received.
    pub fn outstanding(&self) -> u64 {
        self.audit().lost
    }

    /// Compares what was acknowledged with what was received.
    pub fn audit(&self) -> Audit {
        let mut a = Audit {
            duplicates: self.duplicates.load(Ordering::Relaxed),
            ..Audit::default()
        };
        for (p, (acked, received)) in self.acked.iter().zip(&self.received).enumerate() {
            // Both locks at once is safe: every other path takes only one.
            let acked = lock(acked);
            let received = lock(received);
            a.acked += acked.len();
            a.received += received.len();
            let keep = 10usize.saturating_sub(a.lost_examples.len());
            let (lost, first) = acked.difference(&received, keep);
            a.lost += lost;
            a.lost_examples
                .extend(first.into_iter().map(|s| (p as u32, s)));
            a.received_unacked += received.difference(&acked, 0).0;
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seqset_counts_distinct_members_across_word_boundaries() {
        let mut s = SeqSet::default();
        for seq in [0, 63, 64, 1000, 63] {
            s.insert(seq);
        }
        assert_eq!(s.len(), 4);
        assert!(s.contains(64) && s.contains(1000) && !s.contains(65));
        assert!(
            !s.contains(1_000_000),
            "beyond the bitmap is absent, not a panic"
        );
    }

    #[test]
    fn audit_names_every_acknowledged_message_that_never_arrived() {
        let l = Ledger::new(2);
        for seq in 0..1000 {
            l.acked(0, seq);
            l.acked(1, seq);
            if seq != 17 && seq != 700 {
                l.received(0, seq);
            }
            l.received(1, seq);
        }
        let a = l.audit();
        assert_eq!(a.acked, 2000);
        assert_eq!(a.received, 1998);
        assert_eq!(a.lost, 2);
        assert_eq!(a.lost_examples, vec![(0, 17), (0, 700)]);
        assert_eq!(l.outstanding(), 2);
    }

    #[test]
    fn redeliveries_are_counted_but_are_not_losses_or_new_receipts() {
        let l = Ledger::new(1);
        l.acked(0, 5);
        assert_eq!(l.received(0, 5), Receipt::New);
        assert_eq!(l.received(0, 5), Receipt::Duplicate);
        let a = l.audit();
        assert_eq!((a.lost, a.received, a.duplicates), (0, 1, 1));
    }

    #[test]
    fn a_write_that_landed_without_its_ack_is_not_a_loss() {
        let l = Ledger::new(1);
        l.received(0, 3);
        let a = l.audit();
        assert_eq!((a.lost, a.received_unacked), (0, 1));
    }

    #[test]
    fn messages_naming_unknown_producers_are_rejected() {
        let l = Ledger::new(1);
        assert_eq!(l.received(9, 0), Receipt::UnknownProducer);
        assert_eq!(l.audit().received, 0);
    }
}
