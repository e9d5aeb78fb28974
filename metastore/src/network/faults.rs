//! Link faults injected by tests (feature `testing`): calls to or from a
//! blocked peer are dropped on both ends, as if the network lost them.
//! Without the feature `NetworkFaults` is an empty type whose check is
//! always false, so release builds carry no fault machinery.

#[cfg(any(test, feature = "testing"))]
mod enabled {
    use std::collections::BTreeSet;

    use parking_lot::RwLock;

    use crate::raft_types::NodeId;

    /// Links a test has cut.
    #[derive(Debug, Default)]
    pub struct NetworkFaults {
        blocked: RwLock<BTreeSet<NodeId>>,
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

        /// Restores every link.
        pub fn heal(&self) {
            self.blocked.write().clear();
            *self.isolated.write() = false;
        }

        pub fn blocks(&self, peer: NodeId) -> bool {
            *self.isolated.read() || self.blocked.read().contains(&peer)
        }
    }
}

#[cfg(not(any(test, feature = "testing")))]
mod disabled {
    use crate::raft_types::NodeId;

    /// No faults outside tests.
    #[derive(Debug, Default)]
    pub(crate) struct NetworkFaults {
        _none: (),
    }

    impl NetworkFaults {
        #[inline(always)]
        pub(crate) fn blocks(&self, _peer: NodeId) -> bool {
            false
        }
    }
}

#[cfg(not(any(test, feature = "testing")))]
pub(crate) use disabled::NetworkFaults;
#[cfg(any(test, feature = "testing"))]
pub use enabled::NetworkFaults;
