//! The vocabulary of the group engine: requests, answers, limits and states.

use bytes::Bytes;
pub use metastore::coordinators::{HeldSlots, SlotFence};

/// Caller-chosen handle for a parked request.
pub type ReplyId = u64;

/// Error codes the group protocol answers with (a subset of Kafka's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupError {
    InvalidGroupId,
    InvalidSessionTimeout,
    InconsistentGroupProtocol,
    UnknownMemberId,
    MemberIdRequired,
    IllegalGeneration,
    RebalanceInProgress,
    FencedInstanceId,
    GroupMaxSizeReached,
    NonEmptyGroup,
    /// This agent does not hold the group's coordinator slot (any more).
    NotCoordinator,
    /// A consumer-protocol request lacks a field it must carry.
    InvalidRequest,
    /// A consumer group member sent an epoch it does not have: it must
    /// rejoin with epoch 0.
    FencedMemberEpoch,
    /// A live static member holds the instance id.
    UnreleasedInstanceId,
    /// The member names a server assignor that is not served.
    UnsupportedAssignor,
    /// An offset commit carries another epoch than the member's.
    StaleMemberEpoch,
    /// The group exists with the other protocol.
    GroupIdNotFound,
    /// The subscription's regular expression does not compile.
    InvalidRegularExpression,
}

/// Limits that Kafka exposes as broker settings.
#[derive(Debug, Clone)]
pub struct GroupLimits {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long a new group waits for more members.
    pub initial_rebalance_delay_ms: i64,
    pub max_size: usize,
    /// `group.consumer.session.timeout.ms`: a consumer-protocol member
    /// silent this long is removed.
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: how often consumer-protocol
    /// members heartbeat.
    pub consumer_heartbeat_interval_ms: i32,
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: usize::MAX,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
        }
    }
}

/// State of a group, named as DescribeGroups reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    /// A consumer group whose target assignment is being computed.
    Assigning,
    /// A consumer group whose members move towards their targets.
    Reconciling,
}

impl GroupState {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
        }
    }
}

/// A JoinGroup request, decoded.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a dynamic member without an id first gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
    /// JoinGroup v9+ (KIP-814): a returning static leader may be told it
    /// leads but must not assign.
    pub supports_skip_assignment: bool,
}

/// One member as the leader sees it in its JoinGroup answer.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub members: Vec<JoinedMember>,
    /// The leader keeps the current assignment instead of computing one.
    pub skip_assignment: bool,
}

impl JoinResponse {
    pub(super) fn error(error: GroupError, member_id: String) -> Self {
        JoinResponse {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id,
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// A SyncGroup request, decoded.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

/// The answer to a SyncGroup.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    pub(super) fn error(error: GroupError) -> Self {
        SyncResponse {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// A parked request's answer, produced later.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Join(ReplyId, JoinResponse),
    Sync(ReplyId, SyncResponse),
}

/// One member of a group, for DescribeGroups.
#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// What deleting a group's in-memory state found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deletion {
    /// The group's coordinator slot as this coordinator holds it: the
    /// fence of the metastore write that deletes the group's offsets.
    pub fence: SlotFence,
    /// Whether the coordinator held state for the group (it had none
    /// when only offsets remain).
    pub had_state: bool,
}

/// A group, for DescribeGroups.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}
