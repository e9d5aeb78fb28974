//! How a metastore node is configured.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::MetaError;
#[cfg(any(test, feature = "testing"))]
use crate::network::local::LocalRouter;
use crate::network::quic::QuicSettings;
use crate::raft_types::NodeId;

/// How this node talks to its peers.
#[derive(Debug, Default)]
pub enum Transport {
    /// No network at all: a single node embedded in the agent (the default).
    #[default]
    Embedded,
    /// QUIC on a UDP socket with mutual TLS: the clustered deployment.
    Quic(QuicSettings),
    /// In-process calls between nodes of one process (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    InProcess(LocalRouter),
}

/// What a node with an empty log does at its first start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Bootstrap {
    /// Become a one-voter cluster of itself (the default).
    #[default]
    SingleNode,
    /// Form a cluster of these voters (id -> Raft address). Every initial
    /// member is started with the same map; this node must be in it.
    Members(BTreeMap<NodeId, String>),
    /// Start empty and wait to be added by a member of an existing cluster
    /// ([`crate::ClusterControl::add_learner`]).
    Join,
}

/// Raft timers. Election timeouts are drawn at random between min and max;
/// the heartbeat must be well below the minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTiming {
    /// How often the leader sends AppendEntries when idle; openraft (0.9)
    /// also uses it as the AppendEntries timeout, which covers a
    /// follower's log fsync.
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
}

impl Default for RaftTiming {
    /// Heartbeat 100 ms, election timeouts 200-400 ms. openraft (0.9)
    /// refuses votes until `election_max_ms` has passed since a voter last
    /// heard its leader and then waits an election timeout, checking every
    /// 1.5 heartbeats: a crashed leader is replaced 0.6-0.95 s after it
    /// died, and a live one is deposed only when the others hear nothing
    /// from it for 0.6 s or more (six missed heartbeats), which a
    /// momentarily starved machine does not cause. A follower's fsync may
    /// take up to 100 ms before an AppendEntries is sent again. See
    /// docs/cluster.md, "Failover timings".
    fn default() -> RaftTiming {
        RaftTiming {
            heartbeat_ms: 100,
            election_min_ms: 200,
            election_max_ms: 400,
        }
    }
}

impl RaftTiming {
    /// Faster failover (about 0.2 s) on a quiet network and fast disks; on a
    /// loaded machine it causes needless elections. Note that openraft uses
    /// the heartbeat interval as the AppendEntries timeout too.
    pub fn fast() -> RaftTiming {
        RaftTiming {
            heartbeat_ms: 15,
            election_min_ms: 45,
            election_max_ms: 90,
        }
    }

    /// For heavily shared machines (e.g. CI runners under parallel builds).
    pub fn relaxed() -> RaftTiming {
        RaftTiming {
            heartbeat_ms: 150,
            election_min_ms: 1000,
            election_max_ms: 2000,
        }
    }
}

/// How long an agent keeps its partitions once the metastore leader stops
/// hearing it: with heartbeats every eighth of it
/// ([`agent_heartbeat_interval`]), a killed agent's partitions have new
/// leaders 0.7-0.9 s later, and an agent must be unable to reach the
/// leader for 0.7 s (seven heartbeats) to be fenced by mistake.
/// Heartbeats are not written to disk, so a slow fsync does not delay
/// them. See docs/cluster.md, "Failover timings".
pub const DEFAULT_AGENT_LEASE: Duration = Duration::from_millis(800);

/// How often an agent with lease `lease` heartbeats: eight times per
/// lease, between every 25 ms and every 500 ms.
pub fn agent_heartbeat_interval(lease: Duration) -> Duration {
    (lease / 8).clamp(Duration::from_millis(25), Duration::from_millis(500))
}

/// How long the metastore leader hears nothing from an agent before it
/// tells the other agents that the agent is in doubt: three heartbeats
/// (300 ms at the default lease), well before the lease runs out. Agents
/// then hold Metadata answers that would name it as a leader until its
/// fate is known (see `gateway::kafka::api::metadata`), so that clients
/// that ask meanwhile learn the new leader the moment it is elected instead
/// of at their next periodic query. A suspicion costs nothing else: an
/// agent is fenced only when its lease runs out.
pub fn agent_suspect_after(lease: Duration) -> Duration {
    agent_heartbeat_interval(lease) * 3
}

/// Settings of one metastore node.
#[derive(Debug)]
pub struct MetastoreConfig {
    /// Unique in the cluster and stable across restarts.
    pub node_id: NodeId,
    /// Where the Raft log, vote and snapshots live (`DATA_DIR/meta`).
    pub dir: PathBuf,
    pub transport: Transport,
    pub bootstrap: Bootstrap,
    pub timing: RaftTiming,
    /// How long an agent keeps its partitions once the metastore leader
    /// stops hearing its heartbeats ([`DEFAULT_AGENT_LEASE`]).
    pub agent_lease: Duration,
    /// Partition moves the balancer keeps under way at once; 0 turns it off
    /// (nothing moves by itself, draining included).
    pub partition_moves: usize,
    /// How long a write waits for a leader (elections, forwarding) before giving up.
    pub request_timeout: Duration,
    /// Raft log entries between two snapshots.
    pub snapshot_every: u64,
    /// Most commands merged into one Raft entry.
    pub max_batch: usize,
    /// Raft log entries a leader has in flight at once; writes arriving
    /// meanwhile queue and go out together in the next entry. One is best
    /// measured (metabench, `--in-flight`): openraft's per-entry cost, not
    /// the fsync, bounds the entry rate, so fewer larger entries win.
    pub max_in_flight: usize,
    /// Size at which a Raft log segment file rolls.
    pub wal_segment_bytes: u64,
}

impl Default for MetastoreConfig {
    fn default() -> MetastoreConfig {
        MetastoreConfig {
            node_id: 1,
            dir: PathBuf::from("data/meta"),
            transport: Transport::Embedded,
            bootstrap: Bootstrap::SingleNode,
            timing: RaftTiming::default(),
            agent_lease: DEFAULT_AGENT_LEASE,
            partition_moves: crate::balance::DEFAULT_MAX_IN_FLIGHT,
            request_timeout: Duration::from_secs(10),
            snapshot_every: 10_000,
            max_batch: 512,
            max_in_flight: 1,
            wal_segment_bytes: 64 << 20,
        }
    }
}

impl MetastoreConfig {
    /// A one-node metastore embedded in the agent, storing under `dir`.
    pub fn embedded(dir: impl Into<PathBuf>) -> MetastoreConfig {
        MetastoreConfig {
            dir: dir.into(),
            ..MetastoreConfig::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), MetaError> {
        let bad = |reason: String| Err(MetaError::InvalidSettings { reason });
        let t = self.timing;
        if t.heartbeat_ms == 0
            || t.election_min_ms <= t.heartbeat_ms
            || t.election_max_ms <= t.election_min_ms
        {
            return bad(format!(
                "raft timing needs 0 < heartbeat ({}) < election min ({}) < election max ({})",
                t.heartbeat_ms, t.election_min_ms, t.election_max_ms
            ));
        }
        if self.agent_lease < Duration::from_millis(10) {
            return bad("agent lease must be at least 10 ms".into());
        }
        if self.max_batch == 0 || self.max_in_flight == 0 || self.snapshot_every == 0 {
            return bad("max_batch, max_in_flight and snapshot_every must be positive".into());
        }
        match (&self.bootstrap, &self.transport) {
            (Bootstrap::Members(m), _) if !m.contains_key(&self.node_id) => bad(format!(
                "node {} is not among the initial members {:?}",
                self.node_id,
                m.keys()
            )),
            (Bootstrap::Members(m), Transport::Embedded) if m.len() > 1 => {
                bad("a cluster of several members needs a network transport".into())
            }
            (Bootstrap::Join, Transport::Embedded) => {
                bad("joining a cluster needs a network transport".into())
            }
            _ => Ok(()),
        }
    }
}
