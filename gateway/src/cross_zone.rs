//! Bytes this agent exchanged with each peer agent (replication and
//! forwarded requests) and with Kafka clients, classed by zone: what `/metrics` and `/v1/cost`
//! report as cross-zone traffic.

use std::collections::BTreeMap;

use metastore::ClusterControl;

use crate::broker::Broker;
use crate::cost::{CrossZoneUsage, PeerUsage};

/// Bytes exchanged with each peer, classed by the racks registered in the
/// metastore (this agent's own registration first, then its `--rack`).
pub fn usage(b: &Broker) -> CrossZoneUsage {
    let agents = b.node.catalog.agents();
    let me = u64::try_from(b.config.node_id).ok();
    let own = agents
        .iter()
        .find(|a| Some(a.id) == me)
        .and_then(|a| a.rack.clone())
        .or_else(|| b.config.rack.clone());
    let mut peers: BTreeMap<u64, PeerUsage> = BTreeMap::new();
    for (id, bytes) in b.node.partitions.counters().replica_peers.snapshot() {
        let p = peer(&mut peers, &agents, id);
        p.replication_sent_bytes += bytes.sent;
        p.replication_received_bytes += bytes.received;
    }
    for (id, bytes) in b.forward_counters.peers.snapshot() {
        let p = peer(&mut peers, &agents, id);
        p.forwarding_sent_bytes += bytes.sent;
        p.forwarding_received_bytes += bytes.received;
    }
    CrossZoneUsage::of(own.as_deref(), peers.into_values().collect())
        .with_clients(b.client_zones.snapshot())
}

fn peer<'a>(
    peers: &'a mut BTreeMap<u64, PeerUsage>,
    agents: &[metastore::AgentInfo],
    id: u64,
) -> &'a mut PeerUsage {
    peers.entry(id).or_insert_with(|| PeerUsage {
        agent: id,
        rack: agents
            .iter()
            .find(|a| a.id == id)
            .and_then(|a| a.rack.clone()),
        ..PeerUsage::default()
    })
}
