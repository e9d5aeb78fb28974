//! Which agent runs what: a pure function of the connector and the live
//! agents, so every agent computes the same answer from its metastore
//! replica with no election or rebalance protocol.
//!
//! A connector's units (its connector instance, then its tasks) go to the
//! live agents in turn, starting at an agent picked by the connector's
//! name, so connectors' tasks spread over the cluster rather than piling on
//! the first agent. When the live set changes, units move; while two
//! replicas briefly disagree a unit may run on two agents at once, which
//! the connectors tolerate (at-least-once: a source's offsets are committed
//! per generation, the object-storage sink's files are named by their
//! first offset).

use metastore::AgentId;

/// A stable hash of a connector's name (FNV-1a): the same on every agent
/// and across releases.
fn spread(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The agent that runs `connector`'s instance (`task` None) or task
/// `task`, among `live` (sorted, no duplicates); None when no agent is
/// live.
pub fn owner(connector: &str, task: Option<u32>, live: &[AgentId]) -> Option<AgentId> {
    if live.is_empty() {
        return None;
    }
    let slot = task.map_or(0, |t| u64::from(t) + 1);
    let n = live.len() as u64;
    let at = (spread(connector) % n + slot % n) % n;
    live.get(usize::try_from(at).ok()?).copied()
}

#[cfg(test)]
#[path = "assign_tests.rs"]
mod tests;
