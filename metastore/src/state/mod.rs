//! The replicated state machine: cluster metadata plus the rules that guard it.
//!
//! [`MetaState::apply`] is a pure function of the state, the command and the
//! proposal's `now_ms`: no IO, no clock, no randomness. Every replica applies
//! the same log and so reaches the same state. Each command is validated here
//! and returns a typed [`MetaError`] that the gateway maps to a Kafka code.

mod agents;
mod coordinators;
mod dedup;
mod groups;
mod leaving;
mod log_start;
mod reassign;
mod segments;
mod topics;
mod transactions;
mod txn_end;
mod wal;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use topics::MAX_PARTITIONS_PER_TOPIC;

use crate::acl::{AclBinding, AclFilter};
use crate::command::{Command, CommandOutput, CommandResult, Proposal, Span};
use crate::coordinators::CoordinatorSlots;
use crate::error::MetaError;
use crate::quota::{QuotaEntity, QuotaTable};
use crate::types::{
    AgentId, AgentInfo, CommittedOffset, DeletedTopic, MetaEvent, ScramCredential, ScramMechanism,
    SegmentEntry, TopicInfo, SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS,
};

/// Largest producer id block one request may take.
pub const MAX_PRODUCER_ID_BLOCK: u32 = 1_000_000;

/// Offsets of one group: topic name -> partition -> committed offset.
pub type GroupOffsets = BTreeMap<String, BTreeMap<i32, CommittedOffset>>;

/// All cluster metadata. Serialised as a whole into snapshots.
///
/// The bulky values (topics, manifests, group offsets, remembered results)
/// sit behind `Arc`s, so a clone costs one pointer copy per topic, partition
/// manifest and group rather than a deep copy: snapshots are built from such a
/// clone outside the lock, and a change copies only the value it touches
/// (`Arc::make_mut`) while a snapshot or a reader still holds the old one.
/// `Arc<T>` serialises as `T`, so the snapshot format is unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaState {
    pub(crate) cluster_id: Option<String>,
    pub(crate) agents: BTreeMap<AgentId, AgentInfo>,
    pub(crate) topics: BTreeMap<Uuid, Arc<TopicInfo>>,
    pub(crate) topic_names: BTreeMap<String, Uuid>,
    /// Tiered segment manifests: topic id -> partition -> entries by base offset.
    pub(crate) segments: BTreeMap<Uuid, BTreeMap<i32, Arc<Vec<SegmentEntry>>>>,
    pub(crate) deleted_topics: BTreeMap<Uuid, Arc<DeletedTopic>>,
    pub(crate) groups: BTreeMap<String, Arc<GroupOffsets>>,
    pub(crate) next_producer_id: i64,
    /// Where the next round-robin replica assignment starts.
    pub(crate) assignment_cursor: u64,
    /// Applied request ids, for retried writes.
    #[serde(default)]
    pub(crate) recent_requests: dedup::RecentRequests,
    /// Log start floors (DeleteRecords): topic id -> partition -> offset.
    #[serde(default)]
    pub(crate) log_starts: BTreeMap<Uuid, Arc<BTreeMap<i32, i64>>>,
    /// Where retention last trimmed each partition's manifest (the highest
    /// `TrimSegments` offset): topic id -> partition -> offset.
    #[serde(default)]
    pub(crate) trimmed_below: BTreeMap<Uuid, Arc<BTreeMap<i32, i64>>>,
    /// SASL/SCRAM users: name -> mechanism -> credential.
    #[serde(default)]
    pub(crate) scram_users: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    /// ACL bindings (CreateAcls), each once.
    #[serde(default)]
    pub(crate) acls: BTreeSet<AclBinding>,
    /// Client quotas (AlterClientQuotas): entity -> key -> value.
    #[serde(default, with = "crate::quota::table_as_list")]
    pub(crate) client_quotas: QuotaTable,
    /// Which agent coordinates which consumer groups.
    #[serde(default)]
    pub(crate) coordinators: CoordinatorSlots,
    /// Transactional ids and their transactions.
    #[serde(default)]
    pub(crate) transactions: BTreeMap<String, Arc<crate::transactions::TxnRecord>>,
    /// The schema registry's schemas, subjects and settings.
    #[serde(default)]
    pub(crate) registry: crate::registry::RegistryState,
    /// The Connect engine's connectors, statuses and source offsets.
    #[serde(default)]
    pub(crate) connect: crate::connect::ConnectState,
    /// The stream processor's workers and their partition leases.
    #[serde(default)]
    pub(crate) processors: crate::processors::ProcessorState,
    /// Write-ahead ranges of object-store-durable partitions not yet
    /// served by manifest entries: topic id -> partition -> ranges.
    #[serde(default)]
    pub(crate) wal: BTreeMap<Uuid, BTreeMap<i32, Arc<Vec<crate::types::WalRange>>>>,
}

impl MetaState {
    /// A user's SCRAM credential, checked as Kafka checks one.
    fn upsert_scram_credential(
        &mut self,
        user: String,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    ) -> Result<CommandOutput, MetaError> {
        if user.is_empty() {
            return Err(MetaError::invalid_request("a user name must not be empty"));
        }
        if !(SCRAM_MIN_ITERATIONS..=SCRAM_MAX_ITERATIONS).contains(&credential.iterations) {
            return Err(MetaError::invalid_request(format!(
                "{} iterations must be between {SCRAM_MIN_ITERATIONS} and {SCRAM_MAX_ITERATIONS}, not {}",
                mechanism.name(),
                credential.iterations
            )));
        }
        let len = mechanism.hash_len();
        if credential.salt.is_empty()
            || credential.stored_key.len() != len
            || credential.server_key.len() != len
        {
            return Err(MetaError::invalid_request(format!(
                "a {} credential needs a salt and two {len}-byte keys",
                mechanism.name()
            )));
        }
        self.scram_users
            .entry(user)
            .or_default()
            .insert(mechanism, credential);
        Ok(CommandOutput::Done)
    }

    /// A user's credential for `mechanism`.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<&ScramCredential> {
        self.scram_users.get(user)?.get(&mechanism)
    }

    /// Every SCRAM user with the mechanisms and iteration counts they have.
    pub fn scram_users(&self) -> impl Iterator<Item = (&String, Vec<(ScramMechanism, u32)>)> {
        self.scram_users
            .iter()
            .map(|(u, m)| (u, m.iter().map(|(k, c)| (*k, c.iterations)).collect()))
    }

    /// Every ACL binding.
    pub fn acls(&self) -> impl Iterator<Item = &AclBinding> {
        self.acls.iter()
    }

    fn create_acl(&mut self, binding: AclBinding) -> CommandResult {
        if let Some(why) = binding.invalid() {
            return Err(MetaError::invalid_request(why));
        }
        self.acls.insert(binding);
        Ok(CommandOutput::Done)
    }

    fn delete_acls(&mut self, filter: &AclFilter) -> CommandResult {
        let (gone, kept) = std::mem::take(&mut self.acls)
            .into_iter()
            .partition(|b| filter.matches(b));
        self.acls = kept;
        let gone: BTreeSet<AclBinding> = gone;
        Ok(CommandOutput::Acls(gone.into_iter().collect()))
    }

    /// Every entity with configured quotas.
    pub fn client_quotas(&self) -> &QuotaTable {
        &self.client_quotas
    }

    fn alter_client_quota(
        &mut self,
        entity: QuotaEntity,
        ops: crate::quota::QuotaOps,
    ) -> CommandResult {
        if let Some(why) = entity.invalid() {
            return Err(MetaError::invalid_request(why));
        }
        for (key, value) in &ops {
            let why = match value {
                Some(v) => crate::quota::invalid_value(key, v.0),
                None if !crate::quota::KEYS.contains(&key.as_str()) => {
                    Some(format!("quota {key} is not supported"))
                }
                None => None,
            };
            if let Some(why) = why {
                return Err(MetaError::invalid_request(why));
            }
        }
        let values = self.client_quotas.entry(entity.clone()).or_default();
        for (key, value) in ops {
            match value {
                Some(v) => values.insert(key, v),
                None => values.remove(&key),
            };
        }
        if values.is_empty() {
            self.client_quotas.remove(&entity);
        }
        Ok(CommandOutput::Done)
    }

    /// Applies one Raft entry: each request once, returning one result per command.
    pub fn apply_proposal(
        &mut self,
        proposal: Proposal,
        events: &mut Vec<MetaEvent>,
    ) -> Vec<CommandResult> {
        let now = proposal.now_ms;
        let total = u32::try_from(proposal.commands.len()).unwrap_or(u32::MAX);
        let spans = if proposal.spans.is_empty() {
            vec![Span {
                request: None,
                commands: total,
            }]
        } else {
            proposal.spans
        };
        let mut commands = proposal.commands.into_iter();
        let mut out = Vec::with_capacity(total as usize);
        for span in spans {
            let mine: Vec<Command> = commands.by_ref().take(span.commands as usize).collect();
            if let Some(cached) = span.request.and_then(|id| self.recent_requests.get(&id)) {
                if cached.len() == mine.len() {
                    out.extend(cached.iter().cloned());
                    continue;
                }
            }
            let results: Vec<CommandResult> = mine
                .into_iter()
                .map(|c| self.apply(now, c, events))
                .collect();
            if let Some(id) = span.request {
                self.recent_requests.remember(now, id, results.clone());
            }
            out.extend(results);
        }
        // commands not covered by a span (malformed proposal) are refused, not dropped silently
        out.extend(commands.map(|_| {
            Err(MetaError::invalid_request(
                "command outside any request span",
            ))
        }));
        out
    }

    /// Applies one command. On error nothing was changed.
    pub fn apply(
        &mut self,
        now_ms: i64,
        cmd: Command,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        match cmd {
            Command::SetClusterId { cluster_id } => {
                if self.cluster_id.is_none() {
                    self.cluster_id = Some(cluster_id.clone());
                    events.push(MetaEvent::ClusterIdAssigned { cluster_id });
                }
                Ok(CommandOutput::Done)
            }
            Command::CreateTopic {
                id,
                spec,
                validate_only,
            } => self.create_topic(now_ms, id, spec, validate_only, events),
            Command::DeleteTopic { name } => self.delete_topic(now_ms, &name, events),
            Command::CreatePartitions {
                name,
                total,
                validate_only,
            } => self.create_partitions(&name, total, validate_only, events),
            Command::AlterTopicConfigs {
                name,
                ops,
                replace_all,
                validate_only,
            } => self.alter_configs(&name, &ops, replace_all, validate_only, events),
            Command::RegisterAgent { registration } => {
                let id = registration.id;
                let registered = self.register_agent(now_ms, registration, events)?;
                self.fill_coordinator_slots(id);
                Ok(registered)
            }
            Command::Heartbeat { agent_id } => self.heartbeat(now_ms, agent_id, events),
            Command::FenceAgent {
                agent_id,
                observed_generation,
                observed_heartbeat_ms,
            } => self.fence_agent(
                agent_id,
                (observed_generation, observed_heartbeat_ms),
                events,
            ),
            Command::ElectLeader {
                topic_id,
                partition,
                election,
            } => self.elect_leader(topic_id, partition, election, events),
            Command::ReassignLeadership {
                topic_id,
                partition,
                expected_partition_epoch,
                leader,
                isr,
            } => self.reassign_leadership(
                topic_id,
                partition,
                expected_partition_epoch,
                leader,
                isr,
                events,
            ),
            Command::AlterReassignment {
                topic_id,
                partition,
                target,
                expected_partition_epoch,
            } => self.alter_reassignment(
                topic_id,
                partition,
                target,
                expected_partition_epoch,
                events,
            ),
            Command::CompleteReassignment {
                topic_id,
                partition,
                expected_partition_epoch,
            } => self.complete_reassignment(topic_id, partition, expected_partition_epoch, events),
            Command::SetAgentDraining { agent_id, draining } => {
                self.set_agent_draining(agent_id, draining, events)
            }
            Command::ShutdownAgent { agent_id } => self.shutdown_agent(agent_id, events),
            Command::RemoveAgent { agent_id } => self.remove_agent(agent_id, events),
            Command::AlterIsr {
                topic_id,
                partition,
                leader,
                leader_epoch,
                isr,
                expected_partition_epoch,
            } => self.alter_isr(
                topic_id,
                partition,
                (leader, leader_epoch, expected_partition_epoch),
                isr,
                events,
            ),
            Command::CheckpointHighWatermarks { entries } => {
                Ok(self.checkpoint_high_watermarks(&entries))
            }
            Command::CommitSegment {
                topic_id,
                partition,
                entry,
                leader_epoch,
            } => self
                .commit_segment(topic_id, partition, entry, leader_epoch, events)
                .inspect(|_| self.prune_wal(topic_id, partition)),
            Command::ReplaceSegment {
                topic_id,
                partition,
                old_key,
                merged_keys,
                entry,
                leader_epoch,
            } => {
                let mut old_keys = vec![old_key];
                old_keys.extend(merged_keys);
                self.replace_segment(topic_id, partition, &old_keys, entry, leader_epoch, events)
                    .inspect(|_| self.prune_wal(topic_id, partition))
            }
            Command::TrimSegments {
                topic_id,
                partition,
                below_offset,
            } => self
                .trim_segments(topic_id, partition, below_offset, events)
                .inspect(|_| self.prune_wal(topic_id, partition)),
            Command::SetLogStart {
                topic_id,
                partition,
                offset,
            } => self
                .set_log_start(topic_id, partition, offset, events)
                .inspect(|_| self.prune_wal(topic_id, partition)),
            Command::AppendWal { appends } => self.append_wal(appends),
            Command::ForgetDeletedTopic { topic_id } => {
                let removed = self.deleted_topics.remove(&topic_id).is_some();
                Ok(CommandOutput::Count(usize::from(removed)))
            }
            Command::CommitOffsets {
                group,
                offsets,
                coordinator,
            } => {
                self.check_coordinator(&group, coordinator)?;
                self.commit_offsets(now_ms, group, offsets, events)
            }
            Command::DeleteGroup { group, coordinator } => {
                self.check_coordinator(&group, coordinator)?;
                self.delete_group(&group, events)
            }
            Command::DeleteOffsets {
                group,
                partitions,
                coordinator,
            } => {
                self.check_coordinator(&group, coordinator)?;
                self.delete_offsets(&group, &partitions)
            }
            Command::MoveCoordinatorSlot {
                slot,
                expected_epoch,
                holder,
            } => self.move_coordinator_slot(now_ms, slot, expected_epoch, holder, events),
            Command::AllocateProducerIds { count } => self.allocate_producer_ids(count),
            Command::InitTransaction {
                transactional_id,
                timeout_ms,
                expected,
                coordinator,
            } => {
                self.check_coordinator(&transactional_id, coordinator)?;
                self.init_transaction(now_ms, transactional_id, timeout_ms, expected)
            }
            Command::AddTxnPartitions {
                transactional_id,
                producer,
                partitions,
                coordinator,
                implicit,
            } => {
                self.check_coordinator(&transactional_id, coordinator)?;
                self.add_txn_partitions(now_ms, &transactional_id, producer, partitions, implicit)
            }
            Command::AddTxnGroup {
                transactional_id,
                producer,
                group,
                coordinator,
            } => {
                self.check_coordinator(&transactional_id, coordinator)?;
                self.add_txn_group(now_ms, &transactional_id, producer, group)
            }
            Command::TxnOffsetCommit {
                transactional_id,
                producer,
                group,
                offsets,
                coordinator,
                implicit,
            } => {
                self.check_coordinator(&group, coordinator)?;
                self.txn_offset_commit(
                    now_ms,
                    &transactional_id,
                    producer,
                    group,
                    offsets,
                    implicit,
                )
            }
            Command::TxnConnectOffsets {
                transactional_id,
                producer,
                connector,
                offsets,
            } => self.txn_connect_offsets(now_ms, &transactional_id, producer, connector, offsets),
            Command::EndTransaction {
                transactional_id,
                producer,
                commit,
                coordinator,
                bump_epoch,
            } => {
                self.check_coordinator(&transactional_id, coordinator)?;
                self.end_transaction(now_ms, &transactional_id, producer, commit, bump_epoch)
            }
            Command::ExpireTransaction {
                transactional_id,
                producer,
            } => self.expire_transaction(now_ms, &transactional_id, producer),
            Command::CompleteTransaction {
                transactional_id,
                producer,
                commit,
            } => self.complete_transaction(now_ms, &transactional_id, producer, commit, events),
            Command::UpsertScramCredential {
                user,
                mechanism,
                credential,
            } => self.upsert_scram_credential(user, mechanism, credential),
            Command::DeleteScramCredential { user, mechanism } => {
                let users = &mut self.scram_users;
                let removed = users
                    .get_mut(&user)
                    .is_some_and(|m| m.remove(&mechanism).is_some());
                if users.get(&user).is_some_and(|m| m.is_empty()) {
                    users.remove(&user);
                }
                Ok(CommandOutput::Count(usize::from(removed)))
            }
            Command::CreateAcl { binding } => self.create_acl(binding),
            Command::DeleteAcls { filter } => self.delete_acls(&filter),
            Command::AlterClientQuota { entity, ops } => self.alter_client_quota(entity, ops),
            Command::Registry { command } => {
                self.registry.apply(command).map(CommandOutput::Registry)
            }
            Command::Connect { command } => self
                .connect
                .apply(now_ms, command)
                .map(CommandOutput::Connect),
            Command::Processor { command } => self
                .processors
                .apply(now_ms, command)
                .map(CommandOutput::Processor),
        }
    }

    fn allocate_producer_ids(&mut self, count: u32) -> CommandResult {
        if count == 0 || count > MAX_PRODUCER_ID_BLOCK {
            return Err(MetaError::invalid_request(format!(
                "a producer id block holds 1 to {MAX_PRODUCER_ID_BLOCK} ids, not {count}"
            )));
        }
        let first = self.next_producer_id;
        let next = first
            .checked_add(i64::from(count))
            .ok_or(MetaError::ProducerIdsExhausted)?;
        self.next_producer_id = next;
        Ok(CommandOutput::ProducerIds { first, count })
    }

    // ---- reads -------------------------------------------------------------

    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// The schema registry's state.
    pub fn registry(&self) -> &crate::registry::RegistryState {
        &self.registry
    }

    /// The stream processor's workers and leases.
    pub fn processors(&self) -> &crate::processors::ProcessorState {
        &self.processors
    }

    /// The Connect engine's state.
    pub fn connect(&self) -> &crate::connect::ConnectState {
        &self.connect
    }

    pub fn agents(&self) -> impl Iterator<Item = &AgentInfo> {
        self.agents.values()
    }

    pub fn agent(&self, id: AgentId) -> Option<&AgentInfo> {
        self.agents.get(&id)
    }

    /// Every topic, by id. Clone an item to keep it beyond the read lock: a
    /// clone is a pointer copy and is never changed afterwards.
    pub fn topics(&self) -> impl Iterator<Item = &Arc<TopicInfo>> {
        self.topics.values()
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topic_names
            .get(name)
            .and_then(|id| self.topics.get(id))
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicInfo>> {
        self.topics.get(&id)
    }

    pub fn segments(&self, topic_id: Uuid, partition: i32) -> &[SegmentEntry] {
        self.segments
            .get(&topic_id)
            .and_then(|p| p.get(&partition))
            .map(|entries| entries.as_slice())
            .unwrap_or(&[])
    }

    pub fn deleted_topics(&self) -> impl Iterator<Item = &DeletedTopic> {
        self.deleted_topics.values().map(Arc::as_ref)
    }

    pub fn group(&self, group: &str) -> Option<&GroupOffsets> {
        self.groups.get(group).map(Arc::as_ref)
    }

    pub fn group_names(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    /// The id of the topic called `name`, or `UnknownTopic`.
    fn topic_id(&self, name: &str) -> Result<Uuid, MetaError> {
        self.topic_names
            .get(name)
            .copied()
            .ok_or_else(|| MetaError::UnknownTopic {
                name: name.to_owned(),
            })
    }

    /// The topic to change in place; copied first if a reader or a snapshot
    /// still holds the current version.
    fn topic_mut_by_id(&mut self, id: Uuid) -> Result<&mut TopicInfo, MetaError> {
        self.topics
            .get_mut(&id)
            .map(Arc::make_mut)
            .ok_or(MetaError::UnknownTopicId { id })
    }
}

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
