//! Coordinator slots: which agent coordinates a consumer group (or, later, a
//! transactional id), as Kafka's `__consumer_offsets` partitions decide it.
//!
//! A key hashes to one of a fixed number of slots ([`COORDINATOR_SLOTS`],
//! fixed when the table is first filled: the hash never changes for a
//! cluster). Each slot has a holder agent and an epoch. The holder serves
//! the keys of its slot; every other agent answers NOT_COORDINATOR (or, in
//! load-balancer mode, forwards to the holder). The epoch grows by one at
//! every change of holder, and the writes a coordinator makes for a key
//! (committed offsets, group deletion) carry the slot and the epoch it held
//! it at ([`SlotFence`]): the state machine refuses them once the slot has
//! moved, so a coordinator that has not heard yet that it lost a slot can
//! no longer change what its successor serves.
//!
//! The invariants, step by step:
//! 1. The table is filled once, when the first agent registers: every slot
//!    goes to it at epoch 1. Nothing else creates slots.
//! 2. A slot changes holder only through `MoveCoordinatorSlot`, which names
//!    the epoch it was planned at and is refused unless the slot is still
//!    there, and unless the new holder is a live agent. Moving bumps the
//!    epoch. Who moves what, and when, is [`crate::coordinator_plan`].
//! 3. A write fenced at `(slot, epoch)` applies only while the slot is at
//!    that epoch. Raft orders it against the moves: a successor reads its
//!    groups' offsets after applying the move that gave it the slot, and so
//!    sees every write its predecessor made while it held it, and none after.
//! 4. An agent serves a key only while its own replica says it holds the
//!    key's slot, and drops what it kept in memory for the slot's keys when
//!    it sees the slot move (even when a slot comes back to it later, at a
//!    newer epoch: the state in memory belongs to the epoch it was built at).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::AgentId;

/// How many slots a new cluster's table has (Kafka's
/// `offsets.topic.num.partitions` plays the same part). A cluster keeps
/// the number it started with.
pub const COORDINATOR_SLOTS: u32 = 64;

/// The slot of `key` among `count`: FNV-1a of its bytes, stable across
/// processes, platforms and releases. `count` 0 gives slot 0.
pub fn slot_of(key: &str, count: u32) -> u32 {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    match count {
        0 => 0,
        n => u32::try_from(hash % u64::from(n)).unwrap_or(0),
    }
}

/// One slot's holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotHolder {
    pub agent: AgentId,
    /// Grows by one at every change of holder; 1 when the table was filled.
    pub epoch: i32,
}

/// What a coordinator's write carries: the slot of its key and the epoch
/// at which the writer held it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlotFence {
    pub slot: u32,
    pub epoch: i32,
}

/// Where a key is coordinated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub slot: u32,
    pub holder: SlotHolder,
}

impl Placement {
    /// The fence of a write made by the holder.
    pub fn fence(&self) -> SlotFence {
        SlotFence {
            slot: self.slot,
            epoch: self.holder.epoch,
        }
    }
}

/// The slots one agent holds, with their epochs: what its coordinator may
/// serve. Empty until the table is filled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldSlots {
    count: u32,
    epochs: BTreeMap<u32, i32>,
}

impl HeldSlots {
    /// Holding `held` (slot, epoch) pairs of a `count`-slot table.
    pub fn new(count: u32, held: impl IntoIterator<Item = (u32, i32)>) -> HeldSlots {
        HeldSlots {
            count,
            epochs: held.into_iter().filter(|(s, _)| *s < count).collect(),
        }
    }

    /// Every slot of a `count`-slot table at `epoch` (one agent alone).
    pub fn all(count: u32, epoch: i32) -> HeldSlots {
        HeldSlots::new(count, (0..count).map(|s| (s, epoch)))
    }

    /// The fence of `key` when its slot is held.
    pub fn fence(&self, key: &str) -> Option<SlotFence> {
        let slot = slot_of(key, self.count);
        self.epochs
            .get(&slot)
            .map(|&epoch| SlotFence { slot, epoch })
    }

    /// Whether `fence` is still held (same slot at the same epoch).
    pub fn holds(&self, fence: SlotFence) -> bool {
        self.epochs.get(&fence.slot) == Some(&fence.epoch)
    }

    /// The slot of `key` in this table.
    pub fn slot_of(&self, key: &str) -> u32 {
        slot_of(key, self.count)
    }

    pub fn is_empty(&self) -> bool {
        self.epochs.is_empty()
    }

    pub fn len(&self) -> usize {
        self.epochs.len()
    }
}

/// The table of coordinator slots, part of the replicated state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorSlots {
    /// Indexed by slot; empty until the first agent registers.
    pub(crate) slots: Vec<SlotHolder>,
    /// When an agent last lost slots because it was fenced or gone
    /// (the metastore leader's clock): it gets none back by balancing for
    /// a while after ([`crate::coordinator_plan`]).
    #[serde(default)]
    pub(crate) lost_ms: BTreeMap<AgentId, i64>,
}

impl CoordinatorSlots {
    /// How many slots keys hash over; 0 until the table is filled.
    pub fn count(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    /// The holder of `slot`.
    pub fn holder(&self, slot: u32) -> Option<SlotHolder> {
        self.slots.get(usize::try_from(slot).ok()?).copied()
    }

    /// Where `key` is coordinated; `None` until the table is filled.
    pub fn place(&self, key: &str) -> Option<Placement> {
        let slot = slot_of(key, self.count());
        self.holder(slot).map(|holder| Placement { slot, holder })
    }

    /// Every slot with its holder, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, SlotHolder)> + '_ {
        (0u32..).zip(self.slots.iter().copied())
    }

    /// The slots `agent` holds.
    pub fn held_by(&self, agent: AgentId) -> HeldSlots {
        HeldSlots::new(
            self.count(),
            self.iter()
                .filter(|(_, h)| h.agent == agent)
                .map(|(s, h)| (s, h.epoch)),
        )
    }

    /// When `agent` last lost slots because it failed.
    pub fn lost_ms(&self, agent: AgentId) -> Option<i64> {
        self.lost_ms.get(&agent).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_always_hashes_to_the_same_slot() {
        // fixed forever: a cluster's groups must not change slots on upgrade
        assert_eq!(slot_of("", 64), slot_of("", 64));
        assert_eq!(slot_of("orders", 64), 12);
        assert_eq!(slot_of("orders", 0), 0);
        let used: std::collections::BTreeSet<u32> =
            (0..1000).map(|i| slot_of(&format!("g{i}"), 64)).collect();
        assert_eq!(used.len(), 64, "keys spread over every slot");
    }

    #[test]
    fn held_slots_fence_only_their_own_keys_at_their_epoch() {
        let held = HeldSlots::new(4, [(slot_of("a", 4), 3)]);
        let fence = held.fence("a").expect("a's slot is held");
        assert_eq!(fence.epoch, 3);
        assert!(held.holds(fence));
        assert!(!held.holds(SlotFence { epoch: 4, ..fence }));
        let other = (0..100)
            .map(|i| format!("k{i}"))
            .find(|k| slot_of(k, 4) != fence.slot)
            .expect("some key elsewhere");
        assert_eq!(held.fence(&other), None);
    }
}
