//! KIP-890's verification guard: a transactional write verified against
//! the coordinator's record before a marker ended that transaction here
//! must not land after the marker.
//!
//! The produce path checks that the producer's ongoing transaction
//! includes the partition, then hands the batch to the partition's task.
//! Between the two, the transaction may end: a late request (one held on a
//! cut network link, delivered once it heals) can be verified just before
//! the coordinator's marker reaches this leader and be appended just after
//! it. Written after the marker, it would open a transaction no
//! coordinator knows of: no marker ever closes it, and the partition's last
//! stable offset stays behind it for good (read_committed consumers stop
//! there). The task therefore remembers when it last wrote a marker for
//! each producer, and refuses a transactional batch verified no later than
//! that. The marker path makes its own replica of the metastore current
//! before writing, so a verification that starts after a marker already
//! sees the transaction ended.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// When the transactional batch's producer was verified (taken before the
/// check began).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnGuard {
    pub producer_id: i64,
    pub verified_at: Instant,
}

/// Entries older than this are dropped once the map is large: no produce
/// request lives this long (Kafka's longest request timeout is far below).
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// The size above which old entries are dropped.
const PRUNE_ABOVE: usize = 4096;

/// The last marker written for each producer, by time.
#[derive(Debug, Default)]
pub(super) struct EndedTransactions {
    ended_at: HashMap<i64, Instant>,
}

impl EndedTransactions {
    /// A marker for `producer_id` was written at `at`.
    pub(super) fn ended(&mut self, producer_id: i64, at: Instant) {
        if self.ended_at.len() >= PRUNE_ABOVE {
            self.ended_at
                .retain(|_, t| at.saturating_duration_since(*t) < FORGET_AFTER);
        }
        self.ended_at.insert(producer_id, at);
    }

    /// Why a batch verified as `guard` says must not be written; `None`
    /// when no marker for its producer came after the verification began.
    pub(super) fn refusal(&self, guard: &TxnGuard) -> Option<String> {
        let ended = self.ended_at.get(&guard.producer_id)?;
        (*ended >= guard.verified_at).then(|| {
            format!(
                "producer {}'s transaction ended on this partition while the write was being verified: it belongs to no ongoing transaction",
                guard.producer_id
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_verified_before_the_marker_is_refused_and_one_after_it_is_not() {
        let mut ended = EndedTransactions::default();
        let before = Instant::now();
        let guard = |verified_at| TxnGuard {
            producer_id: 7,
            verified_at,
        };
        assert_eq!(ended.refusal(&guard(before)), None, "no marker yet");
        std::thread::sleep(Duration::from_millis(2));
        let marker_at = Instant::now();
        ended.ended(7, marker_at);
        assert!(ended.refusal(&guard(before)).is_some());
        assert!(
            ended.refusal(&guard(marker_at)).is_some(),
            "ties are refused"
        );
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(ended.refusal(&guard(Instant::now())), None);
        // another producer's marker says nothing about this one
        assert_eq!(
            ended.refusal(&TxnGuard {
                producer_id: 8,
                verified_at: before
            }),
            None
        );
    }

    #[test]
    fn old_entries_are_dropped_only_once_the_map_is_large() {
        let mut ended = EndedTransactions::default();
        let start = Instant::now();
        for pid in 0..PRUNE_ABOVE as i64 {
            ended.ended(pid, start);
        }
        let later = start + FORGET_AFTER + Duration::from_secs(1);
        ended.ended(-1, later);
        assert_eq!(ended.ended_at.len(), 1, "the stale entries went");
        assert!(ended
            .refusal(&TxnGuard {
                producer_id: -1,
                verified_at: start
            })
            .is_some());
    }
}
