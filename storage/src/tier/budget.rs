//! The node's local disk budget for partition data.
//!
//! Two totals over every tiered partition of the node: bytes on local disk,
//! and the part of them not yet in object storage. Each partition publishes
//! its own figures as deltas, so a check on the append path is two atomic
//! loads.
//!
//! Policy (applied by [`super::TieredPartition`]):
//! - local bytes above the limit: segments already in object storage are
//!   deleted locally early, ahead of `local.retention.*`;
//! - bytes not yet uploaded plus an incoming append above the limit: the
//!   append is refused with a retriable error until uploads catch up.

use std::sync::atomic::{AtomicU64, Ordering};

/// Shared by all tiered partitions of a node.
#[derive(Debug, Default)]
pub struct DiskBudget {
    limit: Option<u64>,
    local: AtomicU64,
    pending: AtomicU64,
    refusals: AtomicU64,
    early_evictions: AtomicU64,
}

impl DiskBudget {
    /// `None`: no limit (the file system's own size is the limit).
    pub fn new(limit: Option<u64>) -> Self {
        DiskBudget {
            limit,
            ..DiskBudget::default()
        }
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Bytes of partition data on local disk.
    pub fn local_bytes(&self) -> u64 {
        self.local.load(Ordering::Relaxed)
    }

    /// Bytes on local disk not yet committed to object storage.
    pub fn pending_bytes(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Appends refused because the budget was exhausted.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Times tiered segments were deleted locally ahead of their retention.
    pub fn early_evictions(&self) -> u64 {
        self.early_evictions.load(Ordering::Relaxed)
    }

    pub(crate) fn note_refusal(&self) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_early_eviction(&self) {
        self.early_evictions.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether local data passes the limit.
    pub(crate) fn local_over(&self, incoming: u64) -> bool {
        self.limit
            .is_some_and(|l| self.local_bytes().saturating_add(incoming) > l)
    }

    /// `Some((pending, limit))` when an append of `incoming` bytes must wait.
    pub(crate) fn refuses(&self, incoming: u64) -> Option<(u64, u64)> {
        let limit = self.limit?;
        let pending = self.pending_bytes();
        (pending.saturating_add(incoming) > limit).then_some((pending, limit))
    }

    /// Replaces one partition's contribution `old` by `new`.
    pub(crate) fn update(&self, old: Usage, new: Usage) {
        shift(&self.local, old.local, new.local);
        shift(&self.pending, old.pending, new.pending);
    }
}

fn shift(counter: &AtomicU64, old: u64, new: u64) {
    if new >= old {
        counter.fetch_add(new - old, Ordering::Relaxed);
    } else {
        // Never below zero, even if contributions were published out of order.
        let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(old - new))
        });
    }
}

/// One partition's contribution to the budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) local: u64,
    pub(crate) pending: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contributions_add_up_and_refusal_follows_pending_bytes_only() {
        let b = DiskBudget::new(Some(1000));
        b.update(
            Usage::default(),
            Usage {
                local: 900,
                pending: 300,
            },
        );
        b.update(
            Usage::default(),
            Usage {
                local: 50,
                pending: 50,
            },
        );
        assert_eq!((b.local_bytes(), b.pending_bytes()), (950, 350));
        assert!(b.local_over(100), "local data would pass the limit");
        assert_eq!(b.refuses(100), None, "but most of it is already tiered");
        assert_eq!(b.refuses(700), Some((350, 1000)));
        b.update(
            Usage {
                local: 900,
                pending: 300,
            },
            Usage {
                local: 0,
                pending: 0,
            },
        );
        assert_eq!((b.local_bytes(), b.pending_bytes()), (50, 50));
        assert_eq!(DiskBudget::new(None).refuses(u64::MAX), None);
    }
}
