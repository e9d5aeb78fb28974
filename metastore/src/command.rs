//! The commands that travel through the Raft log, and what applying them returns.
//!
//! A [`Proposal`] is one Raft entry: a batch of commands from concurrent
//! callers, stamped once with the leader's clock so that every replica applies
//! them identically. Each command is validated by the state machine on its
//! own; one failing command does not affect the others in its batch.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::{AclBinding, AclFilter};
use crate::coordinators::SlotFence;
use crate::error::MetaError;
use crate::quota::{QuotaEntity, QuotaOps};
use crate::types::{
    AgentId, AgentInfo, AgentRegistration, ConfigOp, CreateTopic, ElectionType, LeaderAndEpoch,
    OffsetCommit, ScramCredential, ScramMechanism, SegmentEntry, TopicInfo,
};

/// Largest write: the commands of one request, and of one Raft entry, JSON
/// encoded. It keeps every entry small enough to replicate in one message
/// ([`crate::network::MAX_REQUEST_BYTES`]); the largest real command, a
/// topic of 100,000 partitions with explicit three-replica assignments, is
/// under 1 MiB.
pub const MAX_WRITE_BYTES: usize = 4 << 20;

/// The JSON size of `value`, without building the JSON.
pub(crate) fn encoded_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        // our commands always serialise; count a failure as too large
        Err(_) => usize::MAX,
    }
}

/// Refuses `commands` whose encoding exceeds [`MAX_WRITE_BYTES`]; returns its size.
pub(crate) fn check_write_size(commands: &[Command]) -> Result<usize, MetaError> {
    let bytes = encoded_len(commands);
    if bytes > MAX_WRITE_BYTES {
        return Err(MetaError::invalid_request(format!(
            "a metastore write of {bytes} bytes exceeds the limit of {MAX_WRITE_BYTES}"
        )));
    }
    Ok(bytes)
}

/// Splits `items` into runs of at most half [`MAX_WRITE_BYTES`] of JSON each,
/// in order, so that a long list (the offsets of a large group, the lease
/// driver's decisions after an agent died) goes out as several writes
/// rather than one refused as too large. An item too large on its own gets
/// a run of its own (and is refused when written).
pub(crate) fn runs_within_write_limit<T: Serialize>(items: Vec<T>) -> Vec<Vec<T>> {
    let budget = MAX_WRITE_BYTES / 2;
    let mut runs = Vec::new();
    let mut run = Vec::new();
    let mut bytes = 0usize;
    for item in items {
        let size = encoded_len(&item).saturating_add(1);
        if !run.is_empty() && bytes.saturating_add(size) > budget {
            runs.push(std::mem::take(&mut run));
            bytes = 0;
        }
        bytes = bytes.saturating_add(size);
        run.push(item);
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

/// One state change. Ids and random values are chosen by the proposer and
/// carried here, so applying stays deterministic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Accepted only once, when the cluster is first initialised.
    SetClusterId {
        cluster_id: String,
    },
    CreateTopic {
        id: Uuid,
        spec: CreateTopic,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        total: i32,
        validate_only: bool,
    },
    AlterTopicConfigs {
        name: String,
        ops: Vec<ConfigOp>,
        replace_all: bool,
        validate_only: bool,
    },
    RegisterAgent {
        registration: AgentRegistration,
    },
    Heartbeat {
        agent_id: AgentId,
    },
    /// Proposed by the lease driver; rejected as stale if the agent
    /// heartbeated after the driver looked (`observed_heartbeat_ms` differs).
    FenceAgent {
        agent_id: AgentId,
        observed_heartbeat_ms: i64,
    },
    /// Kafka ElectLeaders (preferred or unclean).
    ElectLeader {
        topic_id: Uuid,
        partition: i32,
        election: ElectionType,
    },
    /// Proposed by the lease driver: set leader and ISR of a partition whose
    /// leader or followers lost their lease. Rejected as stale unless the
    /// partition is still at `expected_partition_epoch`.
    ReassignLeadership {
        topic_id: Uuid,
        partition: i32,
        expected_partition_epoch: i32,
        leader: Option<AgentId>,
        isr: Vec<AgentId>,
    },
    /// Kafka AlterPartitionReassignments for one partition (KIP-455): move
    /// it to `target` (the first replica preferred), or cancel the
    /// reassignment under way (`None`). The replicas become target ∪
    /// original until every target replica is in the ISR.
    AlterReassignment {
        topic_id: Uuid,
        partition: i32,
        target: Option<Vec<AgentId>>,
        /// Set by the balancer: refused as stale unless the partition is
        /// still at this epoch (so it never overrides an operator's move).
        #[serde(default)]
        expected_partition_epoch: Option<i32>,
    },
    /// Proposed by the lease driver once every target replica of a
    /// reassignment is in the ISR: the replicas become the target. Rejected
    /// as stale unless the partition is still at `expected_partition_epoch`.
    CompleteReassignment {
        topic_id: Uuid,
        partition: i32,
        expected_partition_epoch: i32,
    },
    /// An operator drains an agent (its replicas move away) or stops doing so.
    SetAgentDraining {
        agent_id: AgentId,
        draining: bool,
    },
    /// Kafka AlterPartition: the partition leader changes the ISR.
    AlterIsr {
        topic_id: Uuid,
        partition: i32,
        leader: AgentId,
        leader_epoch: i32,
        isr: Vec<AgentId>,
    },
    /// Leaders report their high watermarks now and then, so a new leader
    /// knows a lower bound of what was committed.
    CheckpointHighWatermarks {
        entries: Vec<(Uuid, i32, i64)>,
    },
    CommitSegment {
        topic_id: Uuid,
        partition: i32,
        entry: SegmentEntry,
    },
    TrimSegments {
        topic_id: Uuid,
        partition: i32,
        below_offset: i64,
    },
    /// Raises a partition's log start floor (DeleteRecords); a lower
    /// offset than the current floor changes nothing.
    SetLogStart {
        topic_id: Uuid,
        partition: i32,
        offset: i64,
    },
    /// Drops a deleted topic's manifest once its objects are gone.
    ForgetDeletedTopic {
        topic_id: Uuid,
    },
    /// A coordinator commits a group's offsets; with `coordinator` set,
    /// refused (NOT_COORDINATOR) unless the group's coordinator slot is
    /// still at that epoch. `None` is an unfenced write (tools, tests, and
    /// entries written before slots existed).
    CommitOffsets {
        group: String,
        offsets: Vec<OffsetCommit>,
        #[serde(default)]
        coordinator: Option<SlotFence>,
    },
    /// Fenced as `CommitOffsets`.
    DeleteGroup {
        group: String,
        #[serde(default)]
        coordinator: Option<SlotFence>,
    },
    /// Fenced as `CommitOffsets`.
    DeleteOffsets {
        group: String,
        partitions: Vec<(String, i32)>,
        #[serde(default)]
        coordinator: Option<SlotFence>,
    },
    /// Proposed by the lease driver ([`crate::coordinator_plan`]): a
    /// coordinator slot goes to `holder`, a live agent, at the next epoch.
    /// Refused as stale unless the slot is still at `expected_epoch`.
    MoveCoordinatorSlot {
        slot: u32,
        expected_epoch: i32,
        holder: AgentId,
    },
    AllocateProducerIds {
        count: u32,
    },
    /// Sets a user's credential for one SCRAM mechanism (creating the user).
    UpsertScramCredential {
        user: String,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    },
    /// Removes a user's credential for one mechanism; counts 0 or 1.
    DeleteScramCredential {
        user: String,
        mechanism: ScramMechanism,
    },
    /// Adds an ACL binding (CreateAcls); adding one that exists changes nothing.
    CreateAcl {
        binding: AclBinding,
    },
    /// Removes every binding the filter selects (DeleteAcls) and returns them.
    DeleteAcls {
        filter: AclFilter,
    },
    /// Sets (`Some`) or removes (`None`) quota values of one entity
    /// (AlterClientQuotas); all or none apply.
    AlterClientQuota {
        entity: QuotaEntity,
        ops: QuotaOps,
    },
}

impl Command {
    /// Whether applying this command a second time changes nothing a
    /// client could observe (so a retry needs no de-duplication).
    pub fn is_idempotent(&self) -> bool {
        matches!(
            self,
            Command::Heartbeat { .. }
                | Command::UpsertScramCredential { .. }
                | Command::CreateAcl { .. }
                | Command::AlterClientQuota { .. }
                | Command::CommitOffsets { .. }
                | Command::CommitSegment { .. }
                | Command::SetLogStart { .. }
        )
    }
}

/// The payload of one Raft entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The leader's wall clock when the batch was proposed (ms since epoch).
    pub now_ms: i64,
    pub commands: Vec<Command>,
    /// How `commands` split into client requests, in order. Empty means one
    /// request without an id.
    #[serde(default)]
    pub spans: Vec<Span>,
}

/// One client request's share of a [`Proposal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Set for requests that may be retried: applied once per id.
    pub request: Option<Uuid>,
    pub commands: u32,
}

/// What a command returns when it succeeds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandOutput {
    Done,
    Topic(TopicInfo),
    Agent(AgentInfo),
    Leader(LeaderAndEpoch),
    Segments(Vec<SegmentEntry>),
    /// The first id of a block of `count` producer ids.
    ProducerIds {
        first: i64,
        count: u32,
    },
    /// One result per offset of a CommitOffsets, in request order.
    OffsetResults(Vec<Result<(), MetaError>>),
    /// How many entries a bulk command changed.
    Count(usize),
    /// A partition's log start floor after the command.
    LogStart(i64),
    /// The ACL bindings a command removed.
    Acls(Vec<AclBinding>),
}

/// The result of one command.
pub type CommandResult = Result<CommandOutput, MetaError>;

/// The response of one Raft entry: one result per command, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposalResults(pub Vec<CommandResult>);

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
