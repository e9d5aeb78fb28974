//! Which groups the engine may serve: those whose coordinator slot
//! (`metastore::coordinators`) its agent holds.
//!
//! The driver tells the engine the slots its agent holds, with their
//! epochs, before every request and whenever the metastore moves a slot.
//! The engine keeps one invariant: every group it holds in memory belongs
//! to a slot it holds at the epoch the group was built at. So when a slot
//! goes, or comes back at a newer epoch (it was elsewhere meanwhile, and
//! its groups moved on there), the groups of the slot are dropped: their
//! parked joins and syncs are answered NOT_COORDINATOR, and members that
//! heartbeat or commit later get NOT_COORDINATOR too; they look the
//! coordinator up again. A slot gained starts its groups fresh: members
//! rejoin, and committed offsets come from the metastore, whose replica
//! here already holds every commit the previous holder made (they precede
//! the move in the log).

use super::engine::{GroupEngine, GroupError, HeldSlots, Reply, SlotFence};
use super::state::Group;
use super::types::{JoinResponse, SyncResponse};

impl GroupEngine {
    /// The slots this engine's agent holds now; drops the groups of slots
    /// it no longer holds at the same epoch, and answers their parked
    /// requests.
    pub fn hold(&mut self, held: HeldSlots) -> Vec<Reply> {
        if held == self.held {
            return Vec::new();
        }
        let before = std::mem::replace(&mut self.held, held);
        let lost: Vec<String> = self
            .groups
            .keys()
            .filter(|g| before.fence(g).is_none_or(|f| !self.held.holds(f)))
            .cloned()
            .collect();
        if !lost.is_empty() {
            tracing::info!(
                groups = lost.len(),
                "coordinator slots moved away: dropping their groups"
            );
        }
        let mut out = Vec::new();
        for id in lost {
            if let Some(group) = self.groups.remove(&id) {
                out.extend(abandon(group));
            }
        }
        // consumer groups have nothing parked: their members learn it at
        // their next heartbeat (NOT_COORDINATOR)
        let held = &self.held;
        self.consumer
            .retain(|g, _| before.fence(g).is_some_and(|f| held.holds(f)));
        out
    }

    /// The slots this engine's agent holds.
    pub fn held(&self) -> &HeldSlots {
        &self.held
    }

    /// The fence of `group_id`'s slot, or NOT_COORDINATOR.
    pub(super) fn fence(&self, group_id: &str) -> Result<SlotFence, GroupError> {
        self.held.fence(group_id).ok_or(GroupError::NotCoordinator)
    }
}

/// The answers of a dropped group's parked requests.
fn abandon(group: Group) -> Vec<Reply> {
    let mut out = Vec::new();
    for (id, m) in group.members {
        if let Some(r) = m.pending_join {
            out.push(Reply::Join(
                r,
                JoinResponse::error(GroupError::NotCoordinator, id),
            ));
        }
        if let Some(r) = m.pending_sync {
            out.push(Reply::Sync(
                r,
                SyncResponse::error(GroupError::NotCoordinator),
            ));
        }
    }
    out
}

#[cfg(test)]
#[path = "ownership_tests.rs"]
mod tests;
