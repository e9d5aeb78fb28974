//! [`Groups`]: what consumer groups have committed, and producer ids.

use std::collections::BTreeMap;
use std::ops::Range;

use super::{unexpected, Metastore};
use crate::command::{runs_within_write_limit, Command, CommandOutput};
use crate::coordinators::{HeldSlots, Placement, SlotFence};
use crate::error::MetaError;
use crate::types::{AgentId, CommittedOffset, OffsetCommit};

/// Consumer groups' committed offsets (commit, delete, read back), where
/// each group is coordinated (its coordinator slot), and blocks of producer
/// ids for InitProducerId. Group membership is not here: it lives in
/// memory on the group's coordinator.
///
/// A coordinator's writes name the fence of the group's slot
/// ([`Placement::fence`]) and fail with [`MetaError::NotCoordinator`]
/// once the slot has moved; `None` writes unfenced (tools and tests).
///
/// Writes go through Raft (forwarded to the leader, wherever it is) and
/// resolve once committed and applied on this replica too: a committed
/// offset survives any failover, and no producer id is handed out twice.
/// Reads come from the local replica, possibly stale by
/// [`Metastore::staleness`].
#[expect(
    async_fn_in_trait,
    reason = "implemented by Metastore only; callers hold the concrete type, whose futures are Send"
)]
pub trait Groups {
    /// Stores a group's offsets; one result per offset, in order. Concurrent
    /// commits from many groups share Raft entries. A commit too large for
    /// one write (about 2 MiB of offsets, some 20,000 partitions) goes out as
    /// several in order; if one fails, the offsets before it are stored
    /// (committing them again is harmless).
    async fn commit_offsets(
        &self,
        group: &str,
        coordinator: Option<SlotFence>,
        offsets: Vec<OffsetCommit>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError>;

    async fn delete_group(
        &self,
        group: &str,
        coordinator: Option<SlotFence>,
    ) -> Result<(), MetaError>;

    /// Removes some of a group's offsets; returns how many existed.
    async fn delete_offsets(
        &self,
        group: &str,
        coordinator: Option<SlotFence>,
        partitions: Vec<(String, i32)>,
    ) -> Result<usize, MetaError>;

    /// Where a group (or a transactional id) is coordinated; `None` until
    /// the first agent registered.
    fn coordinator(&self, key: &str) -> Option<Placement>;

    /// The coordinator slots `agent` holds.
    fn coordinator_slots_of(&self, agent: AgentId) -> HeldSlots;

    /// A group's offsets keyed by (topic, partition); empty for an unknown group.
    fn committed_offsets(&self, group: &str) -> BTreeMap<(String, i32), CommittedOffset>;

    /// Groups that have committed offsets.
    fn groups(&self) -> Vec<String>;

    /// A block of `count` producer ids no one else will get.
    async fn allocate_producer_ids(&self, count: u32) -> Result<Range<i64>, MetaError>;
}

impl Groups for Metastore {
    async fn commit_offsets(
        &self,
        group: &str,
        coordinator: Option<SlotFence>,
        offsets: Vec<OffsetCommit>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError> {
        let mut results = Vec::with_capacity(offsets.len());
        // an empty commit is still written: the group id gets checked
        let runs = if offsets.is_empty() {
            vec![Vec::new()]
        } else {
            runs_within_write_limit(offsets)
        };
        for run in runs {
            let command = Command::CommitOffsets {
                group: group.to_owned(),
                offsets: run,
                coordinator,
            };
            match self.submit_one(command).await? {
                CommandOutput::OffsetResults(r) => results.extend(r),
                other => return Err(unexpected(other)),
            }
        }
        Ok(results)
    }

    async fn delete_group(
        &self,
        group: &str,
        coordinator: Option<SlotFence>,
    ) -> Result<(), MetaError> {
        self.unit_command(Command::DeleteGroup {
            group: group.to_owned(),
            coordinator,
        })
        .await
    }

    async fn delete_offsets(
        &self,
        group: &str,
        coordinator: Option<SlotFence>,
        partitions: Vec<(String, i32)>,
    ) -> Result<usize, MetaError> {
        match self
            .submit_one(Command::DeleteOffsets {
                group: group.to_owned(),
                partitions,
                coordinator,
            })
            .await?
        {
            CommandOutput::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    fn committed_offsets(&self, group: &str) -> BTreeMap<(String, i32), CommittedOffset> {
        self.read(|s| {
            s.group(group)
                .map(|g| {
                    g.iter()
                        .flat_map(|(t, parts)| {
                            parts.iter().map(move |(p, o)| ((t.clone(), *p), o.clone()))
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    fn groups(&self) -> Vec<String> {
        self.read(|s| s.group_names().cloned().collect())
    }

    fn coordinator(&self, key: &str) -> Option<Placement> {
        self.read(|s| s.coordinator_slots().place(key))
    }

    fn coordinator_slots_of(&self, agent: AgentId) -> HeldSlots {
        self.read(|s| s.coordinator_slots().held_by(agent))
    }

    async fn allocate_producer_ids(&self, count: u32) -> Result<Range<i64>, MetaError> {
        match self
            .submit_one(Command::AllocateProducerIds { count })
            .await?
        {
            CommandOutput::ProducerIds { first, count } => Ok(first..first + i64::from(count)),
            other => Err(unexpected(other)),
        }
    }
}
