//! The lease driver: on the metastore leader, runs the [`crate::lease`]
//! engine every tick and proposes its decisions, then the
//! [`crate::coordinator_plan`] planner and proposes the coordinator slot
//! moves it decides, then the [`crate::balance`] planner and proposes the
//! partition moves it starts;
//! also assigns the cluster id once, when a cluster first gets a leader.
//!
//! It reacts to leadership changes at once (it watches Raft metrics) so a
//! fresh single-node metastore has its cluster id within one write.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use openraft::ServerState;

use crate::command::{runs_within_write_limit, Command};
use crate::node::Node;
use crate::proposer::wall_clock_ms;
use crate::{balance, coordinator_plan, lease};

/// A Kafka-style cluster id: 16 random bytes in URL-safe base64, 22 characters.
pub fn new_cluster_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

fn tick_interval(lease: Duration) -> Duration {
    (lease / 10).clamp(Duration::from_millis(20), Duration::from_millis(500))
}

pub(crate) async fn run(node: Arc<Node>) {
    let mut metrics = node.raft.metrics();
    let mut ticker = tokio::time::interval(tick_interval(node.agent_lease));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let lease_ms = u64::try_from(node.agent_lease.as_millis()).unwrap_or(u64::MAX);
    let mut leader_since: Option<i64> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = metrics.changed() => if changed.is_err() { return },
        }
        let leading = {
            let m = metrics.borrow_and_update();
            m.state == ServerState::Leader && m.current_leader == Some(node.id)
        };
        if !leading {
            leader_since = None;
            continue;
        }
        let now = wall_clock_ms();
        let since = *leader_since.get_or_insert(now);
        if node.applied.read().state.cluster_id().is_none() {
            let cmd = Command::SetClusterId {
                cluster_id: new_cluster_id(),
            };
            if let Err(e) = node.proposer.propose(None, vec![cmd]).await {
                tracing::debug!(error = ?e, "could not assign the cluster id yet");
                continue;
            }
        }
        // fencing and re-election are two steps; plan again right after a fence
        for _ in 0..3 {
            let plan = {
                let a = node.applied.read();
                lease::plan(&a.state, now, since, lease_ms)
            };
            if plan.is_empty() {
                break;
            }
            let again = lease::fences_agents(&plan);
            // each decision stands alone (checked against the epoch it saw),
            // so a long plan may go out as several entries
            let mut proposed = true;
            for run in runs_within_write_limit(plan) {
                match node.proposer.propose(None, run).await {
                    Ok(w) => {
                        for r in w.results.iter().filter_map(|r| r.as_ref().err()) {
                            tracing::debug!(error = %r, "lease decision refused");
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = ?e, "lease decisions not proposed");
                        proposed = false;
                        break;
                    }
                }
            }
            if !proposed || !again {
                break;
            }
        }
        propose_slot_moves(&node, wall_clock_ms(), lease_ms).await;
        let moves = {
            let a = node.applied.read();
            balance::plan(&a.state, node.partition_moves)
        };
        if !moves.is_empty() {
            match node.proposer.propose(None, moves).await {
                Ok(w) => {
                    for r in w.results.iter().filter_map(|r| r.as_ref().err()) {
                        tracing::debug!(error = %r, "partition move refused");
                    }
                }
                Err(e) => tracing::debug!(error = ?e, "partition moves not proposed"),
            }
        }
    }
}

/// Moves coordinator slots off fenced agents (right after the lease
/// engine fenced them) and onto new ones ([`coordinator_plan`]).
async fn propose_slot_moves(node: &Node, now: i64, lease_ms: u64) {
    let moves = {
        let a = node.applied.read();
        coordinator_plan::plan(&a.state, now, lease_ms)
    };
    for run in runs_within_write_limit(moves) {
        match node.proposer.propose(None, run).await {
            Ok(w) => {
                for r in w.results.iter().filter_map(|r| r.as_ref().err()) {
                    tracing::debug!(error = %r, "coordinator slot move refused");
                }
            }
            Err(e) => {
                tracing::debug!(error = ?e, "coordinator slot moves not proposed");
                return;
            }
        }
    }
}

#[cfg(test)]
#[path = "lease_driver_tests.rs"]
mod tests;
