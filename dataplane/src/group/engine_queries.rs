//! The group engine's answers that change no membership: whether an
//! OffsetCommit may be written (and the fence it carries), descriptions and
//! listings of groups, and deleting an empty group.

use super::{
    Deletion, GroupDescription, GroupEngine, GroupError, GroupState, MemberDescription, SlotFence,
};

impl GroupEngine {
    /// Checks an OffsetCommit against the group's membership, as Kafka does,
    /// and returns the fence the commit must carry to the metastore.
    /// Commits with a negative generation are "simple" commits (admin
    /// tools, consumers without a group), accepted only while the group has
    /// no members.
    pub fn validate_commit(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<SlotFence, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let fence = self.fence(group_id)?;
        // a consumer group: the member's epoch (KIP-848)
        if let Some(checked) = self.consumer_commit_check(group_id, member_id, generation_id) {
            return checked.map(|()| fence);
        }
        let Some(group) = self.groups.get(group_id) else {
            return if generation_id < 0 {
                Ok(fence)
            } else {
                Err(GroupError::IllegalGeneration)
            };
        };
        if let Some(inst) = instance_id {
            if group
                .static_members
                .get(inst)
                .is_some_and(|current| current != member_id)
            {
                return Err(GroupError::FencedInstanceId);
            }
        }
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(fence);
        }
        if !group.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        if generation_id != group.generation {
            return Err(GroupError::IllegalGeneration);
        }
        match group.state {
            GroupState::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(fence),
        }
    }

    /// Describes one group; `None` if the coordinator holds no state for it.
    pub fn describe(&self, group_id: &str) -> Result<Option<GroupDescription>, GroupError> {
        self.fence(group_id)?;
        if let Some(c) = self.consumer.get(group_id) {
            // the classic view of a consumer group: its state and members
            return Ok(Some(GroupDescription {
                state: c.state(),
                protocol_type: "consumer".to_string(),
                protocol: c.assignor.clone(),
                members: c
                    .members
                    .iter()
                    .map(|(id, m)| MemberDescription {
                        member_id: id.clone(),
                        group_instance_id: m.instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: Default::default(),
                        assignment: Default::default(),
                    })
                    .collect(),
            }));
        }
        let Some(g) = self.groups.get(group_id) else {
            return Ok(None);
        };
        let protocol = g.protocol.clone().unwrap_or_default();
        Ok(Some(GroupDescription {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: protocol.clone(),
            members: g
                .members
                .iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }))
    }

    /// Every group with in-memory state, with its state, protocol type and
    /// group type (`classic` or `consumer`, KIP-848).
    pub fn list(&self) -> Vec<(String, GroupState, String, &'static str)> {
        let mut all: Vec<_> = self
            .groups
            .iter()
            .map(|(id, g)| {
                (
                    id.clone(),
                    g.state,
                    g.protocol_type.clone().unwrap_or_default(),
                    "classic",
                )
            })
            .chain(
                self.consumer
                    .iter()
                    .map(|(id, c)| (id.clone(), c.state(), "consumer".to_string(), "consumer")),
            )
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Forgets a group that has no members; NON_EMPTY_GROUP otherwise.
    pub fn delete(&mut self, group_id: &str) -> Result<Deletion, GroupError> {
        let fence = self.fence(group_id)?;
        if let Some(c) = self.consumer.get(group_id) {
            if !c.members.is_empty() {
                return Err(GroupError::NonEmptyGroup);
            }
            self.consumer.remove(group_id);
            return Ok(Deletion {
                fence,
                had_state: true,
            });
        }
        match self.groups.get(group_id) {
            Some(g) if !g.members.is_empty() => Err(GroupError::NonEmptyGroup),
            Some(_) => {
                self.groups.remove(group_id);
                Ok(Deletion {
                    fence,
                    had_state: true,
                })
            }
            None => Ok(Deletion {
                fence,
                had_state: false,
            }),
        }
    }
}
