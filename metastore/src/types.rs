//! The cluster metadata as plain data: what the rest of AeroStream reads.
//!
//! These types are replicated through Raft and written into snapshots, so
//! every field added later must carry `#[serde(default)]` to keep old logs
//! and snapshots readable.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An agent (a broker process) is named by a cluster-unique number. Kafka
/// clients see it as the broker id, so keep it below `i32::MAX`.
pub type AgentId = u64;

/// Where clients reach an agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentAddrs {
    /// Kafka wire listener advertised in Metadata, `host:port`.
    pub kafka: Option<String>,
    /// Native protocol over TCP, `host:port`.
    #[serde(default)]
    pub native: Option<String>,
    /// Native protocol and agent-to-agent traffic over QUIC, `host:port`.
    #[serde(default)]
    pub quic: Option<String>,
    /// The Connect engine's listener, `host:port`, also the worker id its
    /// status reports carry; `None` when the agent runs no Connect worker
    /// (it is then given no connector tasks).
    #[serde(default)]
    pub connect: Option<String>,
}

/// What an agent tells the metastore about itself when it starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRegistration {
    pub id: AgentId,
    pub addrs: AgentAddrs,
    /// Rack or availability zone, Kafka's `broker.rack`.
    #[serde(default)]
    pub rack: Option<String>,
    /// What tells this agent apart from another process started with the
    /// same id (kept in its data folder, so the same agent restarted keeps
    /// it). While an agent holds its lease, a registration of its id with
    /// another instance is refused ([`crate::MetaError::DuplicateAgent`]).
    #[serde(default)]
    pub instance: Option<Uuid>,
}

/// An agent as the metastore knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentInfo {
    pub id: AgentId,
    pub addrs: AgentAddrs,
    pub rack: Option<String>,
    /// Metastore leader's clock when the agent last registered.
    pub registered_ms: i64,
    /// Metastore leader's wall clock when the log last renewed the agent's
    /// lease: its registration, or a heartbeat that lifted a fence. For
    /// display only: heartbeats reach the metastore leader without being
    /// logged, and leases are judged on that leader's monotonic clock
    /// ([`crate::lease`]).
    pub last_heartbeat_ms: i64,
    /// Set when the agent's lease ran out; a fenced agent leads nothing and
    /// is left out of new assignments until it heartbeats again.
    pub fenced: bool,
    /// Bumped on every registration so a restarted agent is told apart from
    /// its previous life.
    pub incarnation: u64,
    /// Set by an operator before taking the agent away: the balancer moves
    /// its replicas to other agents and places nothing new on it.
    #[serde(default)]
    pub draining: bool,
    /// The instance of its last registration ([`AgentRegistration::instance`]).
    #[serde(default)]
    pub instance: Option<Uuid>,
    /// Bumped whenever the log renews the lease (registration, a logged
    /// heartbeat). A `FenceAgent` names the generation its decision saw
    /// and is refused if a renewal landed since.
    #[serde(default)]
    pub lease_generation: u64,
    /// Set when the agent's fence came from its own controlled shutdown
    /// (`ShutdownAgent`) rather than a lapsed lease; cleared when it
    /// registers or heartbeats again. Metadata drops such an agent at once,
    /// while a crashed one stays listed a few seconds (see the gateway's
    /// `brokers::listed`).
    #[serde(default)]
    pub shut_down: bool,
}

/// A topic and its partitions, as Kafka Metadata and DescribeConfigs need them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    pub id: Uuid,
    pub name: String,
    /// Indexed by partition number: `partitions[i].index == i`.
    pub partitions: Vec<PartitionInfo>,
    /// Only the configs set explicitly; see [`crate::topic_config`] for defaults.
    pub configs: BTreeMap<String, String>,
    pub created_ms: i64,
}

impl TopicInfo {
    /// The effective value of a topic config: explicit, else the catalogue default.
    pub fn config(&self, key: &str) -> Option<&str> {
        crate::topic_config::effective(&self.configs, key)
    }

    pub fn partition(&self, index: i32) -> Option<&PartitionInfo> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }
}

/// One partition's placement and leadership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub index: i32,
    /// The agent that may append, or `None` while no in-sync replica is
    /// alive (Kafka reports leader -1, `LEADER_NOT_AVAILABLE`).
    pub leader: Option<AgentId>,
    /// Bumped on every leader change; fences writes from older leaders.
    pub leader_epoch: i32,
    /// Bumped on every change of leader or ISR (Kafka's partition epoch).
    pub partition_epoch: i32,
    /// Assigned replicas; the first is the preferred leader.
    pub replicas: Vec<AgentId>,
    /// In-sync replicas, always a non-empty subset of `replicas`.
    pub isr: Vec<AgentId>,
    /// Last high watermark the leader checkpointed (`-1` before the first).
    pub high_watermark: i64,
    /// Replicas a reassignment in progress adds (Kafka's `addingReplicas`):
    /// they follow the leader and join the ISR once caught up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<AgentId>,
    /// Replicas a reassignment in progress removes once every replica it
    /// targets is in the ISR (Kafka's `removingReplicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<AgentId>,
}

impl PartitionInfo {
    /// Whether a reassignment is under way.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas a reassignment under way ends with, in order (the first
    /// preferred); the current replicas when none is.
    pub fn target_replicas(&self) -> Vec<AgentId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing_replicas.contains(r))
            .collect()
    }

    /// The replicas before the reassignment under way began.
    pub fn original_replicas(&self) -> Vec<AgentId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding_replicas.contains(r))
            .collect()
    }
}

/// One sealed segment that lives in object storage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentEntry {
    /// Object key under the store's prefix.
    pub key: String,
    pub base_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    /// Object size in bytes.
    pub size: u64,
    /// CRC-32C of the object's bytes.
    pub checksum: u32,
    /// Bytes of the segment's offset index object (`.idx`), which cold reads
    /// need to read it through the block cache.
    #[serde(default)]
    pub index_size: u64,
    /// Bytes of the segment's time index object (`.tix`).
    #[serde(default)]
    pub time_index_size: u64,
    /// First offset this entry serves, when above `base_offset`: a new
    /// partition leader uploads a local segment that straddles the end of
    /// what earlier leaders committed whole (its boundaries are its own),
    /// and the entry serves only the offsets after that end. The object's
    /// base offset stays `base_offset`: its indexes count from there.
    /// `None` serves from `base_offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_from: Option<i64>,
    /// Where the entry's bytes lie when its segment was packed with others
    /// into one object; `None`: in the segment's own objects, named from
    /// `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<PackedObject>,
}

/// A segment's place in a packed object: its `.seg` bytes start at
/// `offset`, followed back to back by its offset index, time index,
/// producer snapshot and aborted-transaction index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackedObject {
    /// Object key under the store's prefix.
    pub key: String,
    pub offset: u64,
    /// Bytes of the whole object.
    pub object_size: u64,
    /// Bytes of the producer snapshot (0: none).
    pub producers_size: u64,
    /// Bytes of the aborted-transaction index (0: none).
    pub txn_index_size: u64,
}

/// Records of a partition whose topic is durable in object storage
/// (`durability=object-store`), written to a write-ahead object and not
/// yet served by a manifest entry: offsets `base_offset..=last_offset`,
/// appended by the leader at `leader_epoch`, lie as whole record batches at
/// bytes `offset..offset + len` of the object `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalRange {
    pub base_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    pub leader_epoch: i32,
    /// Object key under the store's prefix.
    pub key: String,
    pub offset: u64,
    pub len: u64,
}

/// One partition's share of a write-ahead object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalAppend {
    pub topic_id: Uuid,
    pub partition: i32,
    pub range: WalRange,
}

impl SegmentEntry {
    /// The first offset this entry serves (see [`SegmentEntry::served_from`]).
    pub fn first_served(&self) -> i64 {
        self.served_from.unwrap_or(self.base_offset)
    }
}

/// A consumer group's committed position in one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    pub offset: i64,
    /// `-1` when the client did not say.
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_time_ms: i64,
}

/// One entry of an OffsetCommit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    /// `<= 0` means "now" on the metastore leader's clock.
    pub commit_time_ms: i64,
}

/// A CreateTopics request for one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateTopic {
    pub name: String,
    /// `-1` means the default (1).
    pub partitions: i32,
    /// `-1` means the default: three, or fewer when fewer agents are alive.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// Explicit replica lists per partition (Kafka's `assignments`); empty
    /// means round-robin over live agents. When set, `partitions` and
    /// `replication_factor` must be `-1`.
    #[serde(default)]
    pub assignments: Vec<Vec<AgentId>>,
}

impl CreateTopic {
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> CreateTopic {
        CreateTopic {
            name: name.into(),
            partitions,
            replication_factor,
            ..CreateTopic::default()
        }
    }

    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> CreateTopic {
        self.configs.insert(key.into(), value.into());
        self
    }
}

pub use crate::topic_config::ConfigOp;

/// Kafka's ElectLeaders election types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// Move leadership back to the first replica if it is alive and in sync.
    Preferred,
    /// Only if the partition has no live leader: pick a live in-sync replica,
    /// else any live replica (may lose acknowledged records).
    Unclean,
}

/// A partition's leader after an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderAndEpoch {
    pub leader: Option<AgentId>,
    pub leader_epoch: i32,
}

/// A deleted topic whose tiered objects still await deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedTopic {
    pub id: Uuid,
    pub name: String,
    pub deleted_ms: i64,
    /// The manifest at deletion time, per partition.
    pub segments: BTreeMap<i32, Vec<SegmentEntry>>,
}

/// Raft membership as seen by this node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipInfo {
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// Raft address of every member.
    pub addrs: BTreeMap<u64, String>,
}

/// Who is in the cluster and who leads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Kafka-style cluster id (22 characters of URL-safe base64), fixed when
    /// the cluster is first initialised; empty until this node has learnt it.
    pub cluster_id: String,
    /// This metastore node.
    pub node_id: u64,
    /// The metastore leader (Kafka's controller id), if known.
    pub controller: Option<u64>,
    pub agents: Vec<AgentInfo>,
    pub membership: MembershipInfo,
    /// How long an agent's lease lasts after each heartbeat.
    pub agent_lease_ms: u64,
}

/// A change to the metadata, delivered in apply order on every node.
///
/// A subscriber that lags behind (`RecvError::Lagged`) or sees [`MetaEvent::Resync`]
/// must re-read the whole view it cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaEvent {
    TopicCreated {
        id: Uuid,
        name: String,
    },
    TopicDeleted {
        id: Uuid,
        name: String,
    },
    PartitionsCreated {
        id: Uuid,
        name: String,
        total: i32,
    },
    ConfigChanged {
        id: Uuid,
        name: String,
    },
    LeaderChanged {
        topic_id: Uuid,
        topic: String,
        partition: i32,
        leader: Option<AgentId>,
        leader_epoch: i32,
    },
    IsrChanged {
        topic_id: Uuid,
        topic: String,
        partition: i32,
        isr: Vec<AgentId>,
    },
    /// A partition's assigned replicas changed (a reassignment began,
    /// completed or was cancelled).
    ReplicasChanged {
        topic_id: Uuid,
        topic: String,
        partition: i32,
        replicas: Vec<AgentId>,
    },
    AgentRegistered {
        agent_id: AgentId,
    },
    /// An operator started or stopped draining an agent.
    AgentDraining {
        agent_id: AgentId,
        draining: bool,
    },
    AgentFenced {
        agent_id: AgentId,
    },
    AgentUnfenced {
        agent_id: AgentId,
    },
    /// An operator removed a fenced agent for good; its replicas are
    /// placed on other agents.
    AgentRemoved {
        agent_id: AgentId,
    },
    /// A coordinator slot changed holder: the agent that held it drops
    /// the groups it kept in memory for it.
    CoordinatorSlotMoved {
        slot: u32,
        holder: AgentId,
        epoch: i32,
    },
    SegmentCommitted {
        topic_id: Uuid,
        partition: i32,
        entry: SegmentEntry,
    },
    /// An entry (and the entries `merged_keys` after it) gave way to a
    /// compacted copy serving the same offsets.
    SegmentReplaced {
        topic_id: Uuid,
        partition: i32,
        old_key: String,
        merged_keys: Vec<String>,
        entry: SegmentEntry,
    },
    SegmentsTrimmed {
        topic_id: Uuid,
        partition: i32,
        removed: usize,
    },
    /// A partition's log start floor rose (DeleteRecords).
    LogStartRaised {
        topic_id: Uuid,
        partition: i32,
        log_start: i64,
    },
    OffsetsCommitted {
        group: String,
    },
    GroupDeleted {
        group: String,
    },
    ClusterIdAssigned {
        cluster_id: String,
    },
    /// The state was replaced wholesale (a snapshot from the leader):
    /// everything may have changed.
    Resync,
}

/// A SCRAM mechanism Kafka clients authenticate with (RFC 5802, RFC 7677).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name (`SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// The mechanism's number in Kafka's Describe/AlterUserScramCredentials.
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL
            .into_iter()
            .find(|m| m.kafka_type() == t)
    }

    /// Bytes of the mechanism's hash (and so of its keys).
    pub fn hash_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }
}

/// The SCRAM iteration counts Kafka accepts.
pub const SCRAM_MIN_ITERATIONS: u32 = 4096;
pub const SCRAM_MAX_ITERATIONS: u32 = 16384;

/// A user's credential for one SCRAM mechanism as the metastore keeps it:
/// the salt, the iteration count and the two keys derived from the salted
/// password. The password itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}
