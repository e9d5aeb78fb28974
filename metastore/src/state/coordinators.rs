//! Coordinator slots in the state machine: filling the table, moving a
//! slot, and checking the fence of a coordinator's write. The rules are in
//! [`crate::coordinators`]; who moves which slot is
//! [`crate::coordinator_plan`].

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::coordinators::{CoordinatorSlots, SlotFence, SlotHolder, COORDINATOR_SLOTS};
use crate::error::MetaError;
use crate::types::{AgentId, MetaEvent};

impl MetaState {
    /// The coordinator slot table.
    pub fn coordinator_slots(&self) -> &CoordinatorSlots {
        &self.coordinators
    }

    /// Fills an empty table with `agent` holding every slot: the first
    /// agent of a cluster coordinates everything until others join.
    pub(super) fn fill_coordinator_slots(&mut self, agent: AgentId) {
        if self.coordinators.slots.is_empty() {
            let holder = SlotHolder { agent, epoch: 1 };
            self.coordinators.slots = vec![holder; COORDINATOR_SLOTS as usize];
        }
    }

    pub(super) fn move_coordinator_slot(
        &mut self,
        now_ms: i64,
        slot: u32,
        expected_epoch: i32,
        holder: AgentId,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let stale = |reason: String| Err(MetaError::StaleRequest { reason });
        let Some(current) = self.coordinators.holder(slot) else {
            return Err(MetaError::invalid_request(format!(
                "there is no coordinator slot {slot}"
            )));
        };
        if current.epoch != expected_epoch {
            return stale(format!(
                "coordinator slot {slot} is at epoch {}, not {expected_epoch}",
                current.epoch
            ));
        }
        if !self.is_live(holder) {
            return stale(format!(
                "agent {holder} cannot take coordinator slot {slot}: it is fenced or unknown"
            ));
        }
        if current.agent == holder {
            return Ok(CommandOutput::Done);
        }
        if !self.is_live(current.agent) {
            // it failed: it gets no slot back by balancing for a while
            self.coordinators.lost_ms.insert(current.agent, now_ms);
        }
        let epoch = current.epoch.saturating_add(1);
        if let Some(s) = usize::try_from(slot)
            .ok()
            .and_then(|i| self.coordinators.slots.get_mut(i))
        {
            *s = SlotHolder {
                agent: holder,
                epoch,
            };
        }
        events.push(MetaEvent::CoordinatorSlotMoved {
            slot,
            holder,
            epoch,
        });
        Ok(CommandOutput::Done)
    }

    /// Refuses a write for `group` fenced at a slot it no longer holds.
    pub(super) fn check_coordinator(
        &self,
        group: &str,
        fence: Option<SlotFence>,
    ) -> Result<(), MetaError> {
        let Some(fence) = fence else {
            return Ok(());
        };
        let refuse = |reason: String| {
            Err(MetaError::NotCoordinator {
                group: group.to_owned(),
                reason,
            })
        };
        match self.coordinators.place(group) {
            None => refuse("no agent coordinates groups yet".to_owned()),
            Some(p) if p.slot != fence.slot => refuse(format!(
                "the group is in coordinator slot {}, not {}",
                p.slot, fence.slot
            )),
            Some(p) if p.holder.epoch != fence.epoch => refuse(format!(
                "coordinator slot {} moved to agent {} at epoch {} (the write was made at epoch {})",
                p.slot, p.holder.agent, p.holder.epoch, fence.epoch
            )),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "coordinators_tests.rs"]
mod tests;
