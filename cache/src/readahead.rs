//! Sequential-read detection for the cold cache: a pure engine, no IO, no clock.
//!
//! Each read of blocks `first..=last` of an object is reported. A read that
//! starts in, or right after, the last block of an earlier read of the same
//! object continues that reader's *cursor*: it is sequential, and the engine
//! answers with the next blocks to fetch ahead (at most `window` blocks past
//! the read, never past the end of the object, never the same block twice for
//! one cursor). Any other read opens a new cursor and fetches nothing ahead, so
//! random readers (index lookups, one-off fetches) cost no extra GETs.
//!
//! Several consumers of one object each keep their own cursor because cursors
//! are keyed by (object, last block read). The table is bounded: the oldest
//! cursors are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

#[derive(Debug, Clone, Copy)]
struct Cursor {
    /// Blocks below this were already requested ahead for this reader.
    ahead_until: u64,
    /// Insertion stamp, to tell live entries of `order` from stale ones.
    stamp: u64,
}

type CursorKey = (Arc<str>, u64);

/// Decides which blocks to fetch ahead of sequential readers.
#[derive(Debug)]
pub struct ReadAheadPolicy {
    window: u64,
    capacity: usize,
    cursors: HashMap<CursorKey, Cursor>,
    order: VecDeque<(CursorKey, u64)>,
    next_stamp: u64,
}

impl ReadAheadPolicy {
    /// `window` blocks ahead (0 disables read-ahead); at most `capacity` cursors remembered.
    pub fn new(window: u64, capacity: usize) -> Self {
        ReadAheadPolicy {
            window,
            capacity: capacity.max(1),
            cursors: HashMap::new(),
            order: VecDeque::new(),
            next_stamp: 0,
        }
    }

    /// Reports a read of blocks `first..=last` of `object` (which has `total_blocks`
    /// blocks) and returns the blocks to fetch ahead, possibly empty.
    pub fn on_read(
        &mut self,
        object: &Arc<str>,
        first: u64,
        last: u64,
        total_blocks: u64,
    ) -> Range<u64> {
        let last = last.max(first);
        let previous = self
            .cursors
            .remove(&(Arc::clone(object), first))
            .or_else(|| {
                first
                    .checked_sub(1)
                    .and_then(|prev| self.cursors.remove(&(Arc::clone(object), prev)))
            });
        let (plan, ahead_until) = match previous {
            Some(cursor) if self.window > 0 => {
                let start = (last + 1).max(cursor.ahead_until);
                let end = last
                    .saturating_add(1)
                    .saturating_add(self.window)
                    .min(total_blocks);
                if start < end {
                    (start..end, end)
                } else {
                    (0..0, cursor.ahead_until.max(last + 1))
                }
            }
            _ => (0..0, last + 1),
        };
        self.remember((Arc::clone(object), last), ahead_until);
        plan
    }

    /// Forgets every cursor on `object` (it was deleted).
    pub fn forget(&mut self, object: &str) {
        self.cursors.retain(|(o, _), _| o.as_ref() != object);
    }

    /// Number of cursors remembered.
    pub fn cursors(&self) -> usize {
        self.cursors.len()
    }

    fn remember(&mut self, key: CursorKey, ahead_until: u64) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.cursors
            .insert(key.clone(), Cursor { ahead_until, stamp });
        self.order.push_back((key, stamp));
        while self.cursors.len() > self.capacity {
            let Some((old, old_stamp)) = self.order.pop_front() else {
                break;
            };
            if self.cursors.get(&old).is_some_and(|c| c.stamp == old_stamp) {
                self.cursors.remove(&old);
            }
        }
        // Stale entries (cursors that moved on) pile up in `order`; compact them.
        if self.order.len() > self.capacity.saturating_mul(4) {
            let cursors = &self.cursors;
            self.order
                .retain(|(k, s)| cursors.get(k).is_some_and(|c| c.stamp == *s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn a_first_read_fetches_nothing_ahead() {
        let mut p = ReadAheadPolicy::new(4, 16);
        assert!(p.on_read(&obj("a"), 5, 5, 100).is_empty());
    }

    #[test]
    fn a_continuing_read_fetches_the_next_window() {
        let mut p = ReadAheadPolicy::new(4, 16);
        let a = obj("a");
        p.on_read(&a, 0, 0, 100);
        assert_eq!(p.on_read(&a, 1, 1, 100), 2..6);
        // The next read only tops the window up: blocks 2..6 were already asked for.
        assert_eq!(p.on_read(&a, 2, 2, 100), 6..7);
        assert_eq!(p.on_read(&a, 3, 4, 100), 7..9);
    }

    #[test]
    fn rereading_the_same_block_counts_as_sequential_small_reads() {
        let mut p = ReadAheadPolicy::new(2, 16);
        let a = obj("a");
        p.on_read(&a, 0, 0, 10);
        assert_eq!(p.on_read(&a, 0, 0, 10), 1..3);
        assert!(p.on_read(&a, 0, 0, 10).is_empty());
    }

    #[test]
    fn read_ahead_stops_at_the_end_of_the_object() {
        let mut p = ReadAheadPolicy::new(8, 16);
        let a = obj("a");
        p.on_read(&a, 0, 0, 3);
        assert_eq!(p.on_read(&a, 1, 1, 3), 2..3);
        assert!(p.on_read(&a, 2, 2, 3).is_empty());
    }

    #[test]
    fn random_reads_never_fetch_ahead() {
        let mut p = ReadAheadPolicy::new(4, 64);
        let a = obj("a");
        for block in [10, 3, 40, 7, 22, 0, 30] {
            assert!(p.on_read(&a, block, block, 100).is_empty(), "block {block}");
        }
    }

    #[test]
    fn interleaved_readers_of_one_object_keep_their_own_cursors() {
        let mut p = ReadAheadPolicy::new(2, 16);
        let a = obj("a");
        p.on_read(&a, 0, 0, 100);
        p.on_read(&a, 50, 50, 100);
        assert_eq!(p.on_read(&a, 1, 1, 100), 2..4);
        assert_eq!(p.on_read(&a, 51, 51, 100), 52..54);
    }

    #[test]
    fn different_objects_do_not_share_cursors() {
        let mut p = ReadAheadPolicy::new(2, 16);
        p.on_read(&obj("a"), 0, 0, 100);
        assert!(p.on_read(&obj("b"), 1, 1, 100).is_empty());
    }

    #[test]
    fn zero_window_disables_read_ahead() {
        let mut p = ReadAheadPolicy::new(0, 16);
        let a = obj("a");
        p.on_read(&a, 0, 0, 100);
        assert!(p.on_read(&a, 1, 1, 100).is_empty());
    }

    #[test]
    fn the_cursor_table_stays_bounded() {
        let mut p = ReadAheadPolicy::new(2, 8);
        for i in 0..1000u64 {
            p.on_read(&obj(&format!("o{}", i % 50)), i, i, u64::MAX);
        }
        assert!(p.cursors() <= 8);
        assert!(p.order.len() <= 8 * 4 + 1);
    }

    #[test]
    fn forgotten_objects_lose_their_cursors() {
        let mut p = ReadAheadPolicy::new(2, 8);
        let a = obj("a");
        p.on_read(&a, 0, 0, 10);
        p.forget("a");
        assert!(p.on_read(&a, 1, 1, 10).is_empty());
    }
}
