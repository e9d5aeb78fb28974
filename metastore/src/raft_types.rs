//! The openraft type configuration of the metastore.

use std::fmt;
use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::command::{Proposal, ProposalResults};

/// A metastore node as Raft membership records it: where its Raft endpoint listens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaNode {
    /// `host:port` of the node's Raft (QUIC) endpoint; `local:<id>` for the in-process transport.
    pub addr: String,
}

impl fmt::Display for MetaNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.addr)
    }
}

openraft::declare_raft_types!(
    /// Types the metastore's Raft instance is built from.
    pub TypeConfig:
        D = Proposal,
        R = ProposalResults,
        NodeId = u64,
        Node = MetaNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type NodeId = u64;
pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StoredMembership = openraft::StoredMembership<NodeId, MetaNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, MetaNode>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
