//! The replicated state machine: cluster metadata plus the rules that guard it.
//!
//! [`MetaState::apply`] is a pure function of the state, the command and the
//! proposal's `now_ms`: no IO, no clock, no randomness. Every replica applies
//! the same log and so reaches the same state. Each command is validated here
//! and returns a typed [`MetaError`] that the gateway maps to a Kafka code.

mod agents;
mod dedup;
mod groups;
mod log_start;
mod segments;
mod topics;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use topics::MAX_PARTITIONS_PER_TOPIC;

use crate::command::{Command, CommandOutput, CommandResult, Proposal, Span};
use crate::error::MetaError;
use crate::types::{
    AgentId, AgentInfo, CommittedOffset, DeletedTopic, MetaEvent, SegmentEntry, TopicInfo,
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
}

impl MetaState {
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
                self.register_agent(now_ms, registration, events)
            }
            Command::Heartbeat { agent_id } => self.heartbeat(now_ms, agent_id, events),
            Command::FenceAgent {
                agent_id,
                observed_heartbeat_ms,
            } => self.fence_agent(agent_id, observed_heartbeat_ms, events),
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
            Command::AlterIsr {
                topic_id,
                partition,
                leader,
                leader_epoch,
                isr,
            } => self.alter_isr(topic_id, partition, leader, leader_epoch, isr, events),
            Command::CheckpointHighWatermarks { entries } => {
                Ok(self.checkpoint_high_watermarks(&entries))
            }
            Command::CommitSegment {
                topic_id,
                partition,
                entry,
            } => self.commit_segment(topic_id, partition, entry, events),
            Command::TrimSegments {
                topic_id,
                partition,
                below_offset,
            } => self.trim_segments(topic_id, partition, below_offset, events),
            Command::SetLogStart {
                topic_id,
                partition,
                offset,
            } => self.set_log_start(topic_id, partition, offset, events),
            Command::ForgetDeletedTopic { topic_id } => {
                let removed = self.deleted_topics.remove(&topic_id).is_some();
                Ok(CommandOutput::Count(usize::from(removed)))
            }
            Command::CommitOffsets { group, offsets } => {
                self.commit_offsets(now_ms, group, offsets, events)
            }
            Command::DeleteGroup { group } => self.delete_group(&group, events),
            Command::DeleteOffsets { group, partitions } => {
                self.delete_offsets(&group, &partitions)
            }
            Command::AllocateProducerIds { count } => self.allocate_producer_ids(count),
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
pub(crate) mod testkit {
    //! Helpers shared by the state machine's unit tests.
    use super::*;
    use crate::types::{AgentAddrs, AgentRegistration, CreateTopic};

    pub const T0: i64 = 1_700_000_000_000;

    pub fn apply(state: &mut MetaState, cmd: Command) -> CommandResult {
        let mut events = Vec::new();
        state.apply(T0, cmd, &mut events)
    }

    pub fn apply_at(
        state: &mut MetaState,
        now: i64,
        cmd: Command,
    ) -> (CommandResult, Vec<MetaEvent>) {
        let mut events = Vec::new();
        let r = state.apply(now, cmd, &mut events);
        (r, events)
    }

    pub fn register(state: &mut MetaState, id: AgentId) {
        let registration = AgentRegistration {
            id,
            addrs: AgentAddrs {
                kafka: Some(format!("127.0.0.1:{}", 9000 + id)),
                ..AgentAddrs::default()
            },
            rack: None,
        };
        apply(state, Command::RegisterAgent { registration }).expect("register");
    }

    pub fn with_agents(n: u64) -> MetaState {
        let mut s = MetaState::default();
        for id in 1..=n {
            register(&mut s, id);
        }
        s
    }

    pub fn create(state: &mut MetaState, name: &str, partitions: i32, rf: i16) -> TopicInfo {
        let cmd = Command::CreateTopic {
            id: Uuid::new_v4(),
            spec: CreateTopic::new(name, partitions, rf),
            validate_only: false,
        };
        match apply(state, cmd) {
            Ok(CommandOutput::Topic(t)) => t,
            other => panic!("create {name}: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    #[test]
    fn producer_id_blocks_never_overlap() {
        let mut s = MetaState::default();
        let a = apply(&mut s, Command::AllocateProducerIds { count: 1000 }).unwrap();
        let b = apply(&mut s, Command::AllocateProducerIds { count: 10 }).unwrap();
        assert_eq!(
            a,
            CommandOutput::ProducerIds {
                first: 0,
                count: 1000
            }
        );
        assert_eq!(
            b,
            CommandOutput::ProducerIds {
                first: 1000,
                count: 10
            }
        );
        assert_eq!(s.next_producer_id(), 1010);
    }

    #[test]
    fn producer_id_block_size_is_bounded() {
        let mut s = MetaState::default();
        for count in [0, MAX_PRODUCER_ID_BLOCK + 1] {
            let err = apply(&mut s, Command::AllocateProducerIds { count }).unwrap_err();
            assert!(matches!(err, MetaError::InvalidRequest { .. }));
        }
        assert_eq!(s.next_producer_id(), 0, "a rejected request takes no ids");
    }

    #[test]
    fn producer_id_space_exhaustion_is_reported_not_wrapped() {
        let mut s = MetaState {
            next_producer_id: i64::MAX - 5,
            ..MetaState::default()
        };
        let err = apply(&mut s, Command::AllocateProducerIds { count: 10 }).unwrap_err();
        assert_eq!(err, MetaError::ProducerIdsExhausted);
        assert_eq!(s.next_producer_id(), i64::MAX - 5);
    }

    #[test]
    fn cluster_id_is_set_once_and_never_changes() {
        let mut s = MetaState::default();
        let (r, ev) = apply_at(
            &mut s,
            T0,
            Command::SetClusterId {
                cluster_id: "first".into(),
            },
        );
        r.unwrap();
        assert_eq!(
            ev,
            vec![MetaEvent::ClusterIdAssigned {
                cluster_id: "first".into()
            }]
        );
        let (r, ev) = apply_at(
            &mut s,
            T0,
            Command::SetClusterId {
                cluster_id: "second".into(),
            },
        );
        r.unwrap();
        assert!(ev.is_empty());
        assert_eq!(s.cluster_id(), Some("first"));
    }

    fn proposal(now_ms: i64, spans: Vec<Span>, commands: Vec<Command>) -> Proposal {
        Proposal {
            now_ms,
            commands,
            spans,
        }
    }

    #[test]
    fn a_retried_request_is_applied_once_and_gets_the_first_answer() {
        let mut s = MetaState::default();
        let id = Uuid::new_v4();
        let span = vec![Span {
            request: Some(id),
            commands: 1,
        }];
        let mut ev = Vec::new();
        let first = s.apply_proposal(
            proposal(
                T0,
                span.clone(),
                vec![Command::AllocateProducerIds { count: 10 }],
            ),
            &mut ev,
        );
        let retry = s.apply_proposal(
            proposal(
                T0 + 5,
                span,
                vec![Command::AllocateProducerIds { count: 10 }],
            ),
            &mut ev,
        );
        assert_eq!(first, retry);
        assert_eq!(s.next_producer_id(), 10, "applied once");
        let other = vec![Span {
            request: Some(Uuid::new_v4()),
            commands: 1,
        }];
        s.apply_proposal(
            proposal(
                T0 + 6,
                other,
                vec![Command::AllocateProducerIds { count: 10 }],
            ),
            &mut ev,
        );
        assert_eq!(s.next_producer_id(), 20);
    }

    #[test]
    fn requests_are_forgotten_after_the_retention_window() {
        let mut s = MetaState::default();
        let id = Uuid::new_v4();
        let span = vec![Span {
            request: Some(id),
            commands: 1,
        }];
        let mut ev = Vec::new();
        s.apply_proposal(
            proposal(
                T0,
                span.clone(),
                vec![Command::AllocateProducerIds { count: 1 }],
            ),
            &mut ev,
        );
        let later = T0 + dedup::RETAIN_MS + 1;
        s.apply_proposal(
            proposal(
                later,
                vec![Span {
                    request: Some(Uuid::new_v4()),
                    commands: 1,
                }],
                vec![Command::AllocateProducerIds { count: 1 }],
            ),
            &mut ev,
        );
        assert_eq!(s.recent_requests.len(), 1, "the old id was evicted");
        s.apply_proposal(
            proposal(later, span, vec![Command::AllocateProducerIds { count: 1 }]),
            &mut ev,
        );
        assert_eq!(s.next_producer_id(), 3);
    }

    #[test]
    fn spans_split_a_batch_between_requests() {
        let mut s = MetaState::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let spans = vec![
            Span {
                request: Some(a),
                commands: 2,
            },
            Span {
                request: None,
                commands: 1,
            },
            Span {
                request: Some(b),
                commands: 1,
            },
        ];
        let cmds = vec![
            Command::AllocateProducerIds { count: 1 },
            Command::AllocateProducerIds { count: 0 },
            Command::AllocateProducerIds { count: 1 },
            Command::AllocateProducerIds { count: 1 },
        ];
        let mut ev = Vec::new();
        let out = s.apply_proposal(proposal(T0, spans, cmds), &mut ev);
        assert_eq!(out.len(), 4);
        assert!(out[0].is_ok() && out[1].is_err() && out[2].is_ok() && out[3].is_ok());
        assert_eq!(s.recent_requests.get(&a).map(Vec::len), Some(2));
        let short = vec![Span {
            request: None,
            commands: 1,
        }];
        let out = s.apply_proposal(
            proposal(
                T0,
                short,
                vec![
                    Command::AllocateProducerIds { count: 1 },
                    Command::AllocateProducerIds { count: 1 },
                ],
            ),
            &mut ev,
        );
        assert!(out[0].is_ok() && matches!(out[1], Err(MetaError::InvalidRequest { .. })));
    }

    #[test]
    fn a_clone_for_a_snapshot_shares_topics_manifests_and_offsets() {
        let mut s = with_agents(1);
        let t = create(&mut s, "orders", 2, 1);
        let entry = SegmentEntry {
            key: "k".into(),
            base_offset: 0,
            last_offset: 9,
            size: 10,
            ..Default::default()
        };
        apply(
            &mut s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 0,
                entry,
            },
        )
        .unwrap();
        let commit = crate::types::OffsetCommit {
            topic: "orders".into(),
            partition: 0,
            offset: 5,
            leader_epoch: 0,
            metadata: None,
            commit_time_ms: 0,
        };
        apply(
            &mut s,
            Command::CommitOffsets {
                group: "g".into(),
                offsets: vec![commit],
            },
        )
        .unwrap();
        let copy = s.clone();
        assert!(Arc::ptr_eq(&s.topics[&t.id], &copy.topics[&t.id]));
        assert!(Arc::ptr_eq(
            &s.segments[&t.id][&0],
            &copy.segments[&t.id][&0]
        ));
        assert!(Arc::ptr_eq(&s.groups["g"], &copy.groups["g"]));
    }

    #[test]
    fn a_topic_handed_out_is_never_changed_by_later_writes() {
        let mut s = with_agents(2);
        let t = create(&mut s, "orders", 1, 2);
        let held = Arc::clone(s.topic("orders").unwrap());
        apply(
            &mut s,
            Command::AlterTopicConfigs {
                name: "orders".into(),
                ops: vec![crate::types::ConfigOp::Set(
                    "retention.ms".into(),
                    "1000".into(),
                )],
                replace_all: false,
                validate_only: false,
            },
        )
        .unwrap();
        apply(
            &mut s,
            Command::AlterIsr {
                topic_id: t.id,
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                isr: vec![1],
            },
        )
        .unwrap();
        assert_eq!(*held, t, "the copy handed out kept its content");
        let now = s.topic("orders").unwrap();
        assert_eq!(now.config("retention.ms"), Some("1000"));
        assert_eq!(now.partitions[0].isr, vec![1]);
    }

    #[test]
    fn state_survives_a_snapshot_round_trip() {
        let mut s = with_agents(3);
        let t = create(&mut s, "orders", 3, 2);
        apply(
            &mut s,
            Command::CommitSegment {
                topic_id: t.id,
                partition: 1,
                entry: SegmentEntry {
                    key: "k".into(),
                    base_offset: 0,
                    last_offset: 9,
                    size: 10,
                    ..Default::default()
                },
            },
        )
        .unwrap();
        let commit = crate::types::OffsetCommit {
            topic: "orders".into(),
            partition: 2,
            offset: 5,
            leader_epoch: 0,
            metadata: None,
            commit_time_ms: 0,
        };
        apply(
            &mut s,
            Command::CommitOffsets {
                group: "g".into(),
                offsets: vec![commit],
            },
        )
        .unwrap();
        let bytes = serde_json::to_vec(&s).unwrap();
        let back: MetaState = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, s);
    }
}
