//! Bytes this agent exchanged with each peer agent, for the cost report's
//! cross-zone figures: the report classes a peer as in this agent's zone or
//! another by the rack the peer registered in the metastore, when it reads
//! them, so a peer whose rack changes (or that registers one later) is
//! classed by what it says now.
//!
//! Counted at the points where frames cross the wire (replica fetches on
//! the leader's and the follower's side, forwarded requests on the
//! forwarder's and the owner's side), once per frame: one short lock per
//! frame, never per record.

use std::collections::BTreeMap;
use std::sync::Mutex;

use metastore::AgentId;

/// Bytes sent to and received from one peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerBytes {
    pub sent: u64,
    pub received: u64,
}

/// Per-peer byte counters (a peer is an agent id; bounded by the cluster's size).
#[derive(Debug, Default)]
pub struct PeerTraffic {
    peers: Mutex<BTreeMap<AgentId, PeerBytes>>,
}

impl PeerTraffic {
    /// `bytes` sent to `peer`.
    pub fn sent(&self, peer: AgentId, bytes: u64) {
        self.update(peer, |p| p.sent += bytes);
    }

    /// `bytes` received from `peer`.
    pub fn received(&self, peer: AgentId, bytes: u64) {
        self.update(peer, |p| p.received += bytes);
    }

    fn update(&self, peer: AgentId, f: impl FnOnce(&mut PeerBytes)) {
        // a poisoned lock only means a panic elsewhere mid-update of plain counters
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        f(peers.entry(peer).or_default());
    }

    /// The totals per peer since start.
    pub fn snapshot(&self) -> BTreeMap<AgentId, PeerBytes> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_add_up_per_peer_and_direction() {
        let t = PeerTraffic::default();
        t.sent(2, 100);
        t.sent(2, 50);
        t.received(2, 7);
        t.received(3, 1);
        let s = t.snapshot();
        assert_eq!(
            s[&2],
            PeerBytes {
                sent: 150,
                received: 7
            }
        );
        assert_eq!(
            s[&3],
            PeerBytes {
                sent: 0,
                received: 1
            }
        );
        assert_eq!(s.len(), 2);
    }
}
