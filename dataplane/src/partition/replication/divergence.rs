//! The leader's answer to a follower whose log may part from its own
//! (KIP-101, KIP-320): from the follower's last fetched epoch and fetch
//! offset, and what the leader's leader-epoch cache says of that epoch,
//! where the follower must cut its log before it fetches again.
//!
//! The rules:
//! 1. The leader holds the follower's last epoch and at least up to the
//!    fetch offset in it: no divergence, the fetch goes on.
//! 2. The leader's largest epoch at or below the follower's ends before
//!    the fetch offset, or is another epoch: the follower cuts at that
//!    epoch's end (and earlier, where its own epochs say so).
//! 3. The follower's epoch is newer than every epoch in the leader's log:
//!    it holds batches of a leader this one never replicated from (a
//!    leader that took over and wrote before this one, in sync, had
//!    fetched that write). Everything up to the leader's log end in its
//!    newest epoch is shared, so the follower cuts at the leader's log
//!    end, and earlier where its own newest epoch up to that one ends.
//!    Answering "nothing in common" here would have an in-sync follower
//!    throw away committed records, and lead with that empty log later.
//! 4. The leader's log has no epoch at all (it holds no batch): the
//!    follower keeps nothing above the leader's local start.

use super::wire::Diverging;

/// What the leader's log says for a follower's fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderLog {
    /// The leader's leader-epoch cache for the follower's last fetched
    /// epoch: the largest epoch at or below it and where that epoch ends;
    /// `None` when the cache is empty or every epoch in it is older.
    pub epoch_end: Option<(i32, i64)>,
    /// The epoch of the leader's newest batch, if any.
    pub latest_epoch: Option<i32>,
    pub log_end: i64,
    pub local_start: i64,
}

/// Where the follower must cut, or `None` when its log continues the
/// leader's at `fetch_offset`.
pub fn diverging(
    leader: LeaderLog,
    last_fetched_epoch: i32,
    fetch_offset: i64,
) -> Option<Diverging> {
    if last_fetched_epoch < 0 {
        return None;
    }
    match leader.epoch_end {
        Some((e, end)) if e != last_fetched_epoch || end < fetch_offset => Some(Diverging {
            epoch: e.max(0),
            end_offset: end,
        }),
        Some(_) => None,
        None => match leader.latest_epoch {
            Some(latest) if latest < last_fetched_epoch => Some(Diverging {
                epoch: latest.max(0),
                end_offset: leader.log_end,
            }),
            _ => Some(Diverging {
                epoch: 0,
                end_offset: leader.local_start,
            }),
        },
    }
}

#[cfg(test)]
#[path = "divergence_tests.rs"]
mod tests;
