//! The commands that travel through the Raft log, and what applying them returns.
//!
//! A [`Proposal`] is one Raft entry: a batch of commands from concurrent
//! callers, stamped once with the leader's clock so that every replica applies
//! them identically. Each command is validated by the state machine on its
//! own; one failing command does not affect the others in its batch.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::{AclBinding, AclFilter};
use crate::connect::{ConnectCommand, ConnectOutput};
use crate::coordinators::SlotFence;
use crate::error::MetaError;
use crate::processors::{ProcessorCommand, ProcessorOutput};
use crate::quota::{QuotaEntity, QuotaOps};
use crate::registry::{RegistryCommand, RegistryOutput};
use crate::transactions::{TxnPartition, TxnRecord};
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
    /// A renewal of the agent's lease written to the log: proposed by the
    /// metastore leader when a heartbeat reaches it while the agent is
    /// fenced (this lifts the fence) or while a fence of it is being
    /// proposed. Other heartbeats are not logged (see [`crate::lease`]).
    Heartbeat {
        agent_id: AgentId,
    },
    /// Proposed by the lease driver; rejected as stale if the log renewed
    /// the agent's lease after the driver looked (its `lease_generation`
    /// is no longer `observed_generation`).
    FenceAgent {
        agent_id: AgentId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observed_generation: Option<u64>,
        /// Set instead of the generation in entries logged while
        /// heartbeats were log entries: those replay as they applied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observed_heartbeat_ms: Option<i64>,
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
    /// Proposed by an agent on its way down (controlled shutdown, as
    /// Kafka's): in one step the agent is fenced and every partition it
    /// leads moves to the first other live in-sync replica (a new leader
    /// epoch, the ISR without it); it leaves the ISR of partitions it
    /// follows. Partitions with no other live in-sync replica stay led by
    /// it. Answers how many leaderships moved.
    ShutdownAgent {
        agent_id: AgentId,
    },
    /// InitProducerId with a transactional id (see
    /// [`crate::transactions`]); `expected` is the producer id and epoch a
    /// recovering producer names (KIP-360). Takes a producer id from the
    /// same sequence as [`Command::AllocateProducerIds`].
    InitTransaction {
        transactional_id: String,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        coordinator: Option<SlotFence>,
    },
    /// AddPartitionsToTxn: opens the transaction if none is ongoing.
    /// `producer` is (producer id, epoch) here and below.
    AddTxnPartitions {
        transactional_id: String,
        producer: (i64, i16),
        partitions: Vec<TxnPartition>,
        coordinator: Option<SlotFence>,
        /// Added by the partition's leader on a transactional write of a
        /// client on transaction version 2 (KIP-890 part 2), which marks
        /// the transaction as one whose EndTxn bumps the epoch.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        implicit: bool,
    },
    /// AddOffsetsToTxn: the transaction will commit offsets of `group`.
    AddTxnGroup {
        transactional_id: String,
        producer: (i64, i16),
        group: String,
        coordinator: Option<SlotFence>,
    },
    /// TxnOffsetCommit, from the group's coordinator (fenced by the
    /// group's slot): offsets held until the transaction commits.
    TxnOffsetCommit {
        transactional_id: String,
        producer: (i64, i16),
        group: String,
        offsets: Vec<OffsetCommit>,
        coordinator: Option<SlotFence>,
        /// TxnOffsetCommit v5 (transaction version 2): the group joins the
        /// transaction here, with no AddOffsetsToTxn before.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        implicit: bool,
    },
    /// An exactly-once source task of the Connect engine: its source
    /// offsets, held in its ongoing transaction until it commits.
    TxnConnectOffsets {
        transactional_id: String,
        producer: (i64, i16),
        connector: String,
        offsets: Vec<(String, Option<String>)>,
    },
    /// EndTxn: logs the outcome (PrepareCommit or PrepareAbort).
    EndTransaction {
        transactional_id: String,
        producer: (i64, i16),
        commit: bool,
        coordinator: Option<SlotFence>,
        /// EndTxn v5 (transaction version 2): the outcome bumps the epoch.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bump_epoch: bool,
    },
    /// Aborts a transaction past its timeout (refused as stale unless it is
    /// still ongoing and older than its timeout on the leader's clock).
    ExpireTransaction {
        transactional_id: String,
        producer: (i64, i16),
    },
    /// Every partition holds the prepared outcome's marker.
    CompleteTransaction {
        transactional_id: String,
        producer: (i64, i16),
        commit: bool,
    },
    /// An operator removes a fenced agent for good (Kafka
    /// UnregisterBroker): it leaves the agent list, and the balancer
    /// re-places its replicas. Refused while the agent holds its lease.
    RemoveAgent {
        agent_id: AgentId,
    },
    /// Kafka AlterPartition: the partition leader changes the ISR.
    /// Refused unless the leader is still at `leader_epoch` and the
    /// partition at `expected_partition_epoch` (the metadata the leader
    /// counted with when it proposed), so a proposal that arrives late
    /// cannot undo a change made since.
    AlterIsr {
        topic_id: Uuid,
        partition: i32,
        leader: AgentId,
        leader_epoch: i32,
        isr: Vec<AgentId>,
        /// `None` only in entries written before the partition epoch was
        /// checked: they apply unchecked, so a log replays as it applied.
        /// [`crate::ClusterControl::alter_isr`] always sets it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_partition_epoch: Option<i32>,
    },
    /// Leaders report their high watermarks now and then, so a new leader
    /// knows a lower bound of what was committed.
    CheckpointHighWatermarks {
        entries: Vec<(Uuid, i32, i64)>,
    },
    /// Adds a sealed object to a partition's manifest. Refused when the
    /// committing leader's `leader_epoch` has been passed (a deposed
    /// leader's late commit) and when the entry lies wholly below what
    /// retention trimmed or DeleteRecords removed (it would move the log
    /// start back); committing an entry already recorded is a no-op.
    CommitSegment {
        topic_id: Uuid,
        partition: i32,
        entry: SegmentEntry,
        /// `None`: unchecked, in entries logged before it was sent and from
        /// callers that lead nothing (tools).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leader_epoch: Option<i32>,
    },
    /// Replaces the manifest entry whose key is `old_key`, and the entries
    /// `merged_keys` right after it, by `entry`, which serves exactly the
    /// offsets they serve together (a compacted copy of the segment under
    /// new keys, or of several segments merged into one). Refused unless
    /// the old entries are recorded one after the other and serve adjacent
    /// offsets, and, like `CommitSegment`, when the leader's `leader_epoch`
    /// has been passed; applying it again once done is a no-op.
    ReplaceSegment {
        topic_id: Uuid,
        partition: i32,
        old_key: String,
        /// Empty in entries logged before merges existed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        merged_keys: Vec<String>,
        entry: SegmentEntry,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leader_epoch: Option<i32>,
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
    /// Records write-ahead ranges of object-store-durable partitions, each
    /// on its own (see `state/wal.rs`): refused when the leader epoch has
    /// been passed or the range does not follow the partition's recorded
    /// end; a range already recorded is a no-op.
    AppendWal {
        appends: Vec<crate::types::WalAppend>,
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
    /// A change to the schema registry ([`crate::registry`]).
    Registry {
        command: RegistryCommand,
    },
    /// A change to the Connect engine's state ([`crate::connect`]).
    Connect {
        command: ConnectCommand,
    },
    /// A stream processor worker's heartbeat or leave
    /// ([`crate::processors`]).
    Processor {
        command: ProcessorCommand,
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
                | Command::ReplaceSegment { .. }
                | Command::SetLogStart { .. }
                | Command::AppendWal { .. }
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
    /// One result per range of an AppendWal, in request order.
    WalResults(Vec<Result<(), MetaError>>),
    /// How many entries a bulk command changed.
    Count(usize),
    /// A partition's log start floor after the command.
    LogStart(i64),
    /// The ACL bindings a command removed.
    Acls(Vec<AclBinding>),
    /// A transactional id's record after the command.
    Transaction(TxnRecord),
    /// What a schema registry command answered.
    Registry(RegistryOutput),
    /// What a Connect command answered.
    Connect(ConnectOutput),
    /// What a processor command answered.
    Processor(ProcessorOutput),
}

/// The result of one command.
pub type CommandResult = Result<CommandOutput, MetaError>;

/// The response of one Raft entry: one result per command, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposalResults(pub Vec<CommandResult>);

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
