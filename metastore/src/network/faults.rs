//! Link faults injected by tests (feature `testing`): calls to or from a
//! blocked peer are dropped on both ends, as if the network lost them. A
//! held peer still exchanges votes, heartbeats and forwarded requests, but
//! log entries between the two are dropped: the follower lags behind while
//! staying in touch with its leader.
//! Without the feature `NetworkFaults` is an empty type whose check is
//! always false, so release builds carry no fault machinery.

#[cfg(any(test, feature = "testing"))]
mod enabled {
    use std::collections::BTreeSet;

    use parking_lot::RwLock;

    use crate::network::RpcRequest;
    use crate::raft_types::NodeId;

    /// Links a test has cut.
    #[derive(Debug, Default)]
    pub struct NetworkFaults {
        blocked: RwLock<BTreeSet<NodeId>>,
        held: RwLock<BTreeSet<NodeId>>,
        isolated: RwLock<bool>,
    }

    impl NetworkFaults {
        /// Drops all traffic with `peer` until [`NetworkFaults::heal`].
        pub fn block(&self, peer: NodeId) {
            self.blocked.write().insert(peer);
        }

        /// Drops all traffic with every peer until [`NetworkFaults::heal`].
        pub fn isolate(&self) {
            *self.isolated.write() = true;
        }

        /// Drops log entries (and snapshots) exchanged with `peer` until
        /// [`NetworkFaults::heal`]; everything else still goes through.
        pub fn hold_entries(&self, peer: NodeId) {
            self.held.write().insert(peer);
        }

        /// Restores every link.
        pub fn heal(&self) {
            self.blocked.write().clear();
            self.held.write().clear();
            *self.isolated.write() = false;
        }

        /// Whether `body`, sent to or received from `peer`, is dropped.
        pub fn drops(&self, peer: NodeId, body: &RpcRequest) -> bool {
            if *self.isolated.read() || self.blocked.read().contains(&peer) {
                return true;
            }
            let carries_entries = match body {
                RpcRequest::AppendEntries(r) => !r.entries.is_empty(),
                RpcRequest::InstallSnapshot(_) => true,
                _ => false,
            };
            carries_entries && self.held.read().contains(&peer)
        }
    }
}

#[cfg(not(any(test, feature = "testing")))]
mod disabled {
    use crate::network::RpcRequest;
    use crate::raft_types::NodeId;

    /// No faults outside tests.
    #[derive(Debug, Default)]
    pub(crate) struct NetworkFaults {
        _none: (),
    }

    impl NetworkFaults {
        #[inline(always)]
        pub(crate) fn drops(&self, _peer: NodeId, _body: &RpcRequest) -> bool {
            false
        }
    }
}

#[cfg(not(any(test, feature = "testing")))]
pub(crate) use disabled::NetworkFaults;
#[cfg(any(test, feature = "testing"))]
pub use enabled::NetworkFaults;
