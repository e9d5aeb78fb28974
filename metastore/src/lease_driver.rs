//! The lease driver: on the metastore leader, serves the agents'
//! heartbeats into [`crate::liveness`], runs the [`crate::lease`] engine
//! every tick and proposes its decisions, then the
//! [`crate::coordinator_plan`] planner and proposes the coordinator slot
//! moves it decides, then the [`crate::balance`] planner and proposes the
//! partition moves it starts; also assigns the cluster id once, when a
//! cluster first gets a leader.
//!
//! It reacts to leadership changes at once (it watches Raft metrics) so a
//! fresh single-node metastore has its cluster id within one write, and a
//! new leader starts judging leases (with a grace period, see
//! [`crate::liveness`]) as soon as it leads.
//!
//! A fence and the heartbeat that may race it both pass through the
//! liveness lock: the driver judges an agent silent and marks its fence
//! under way in one step, and a heartbeat arriving from then on is logged,
//! so whichever of the two entries lands second wins for the agent (see
//! `FenceAgent`'s lease generation).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use openraft::ServerState;

use crate::command::{runs_within_write_limit, Command};
use crate::error::MetaError;
use crate::network::ForwardResponse;
use crate::node::Node;
use crate::proposer::{wall_clock_ms, ProposeError};
use crate::types::AgentId;
use crate::{balance, coordinator_plan, lease};

/// A Kafka-style cluster id: 16 random bytes in URL-safe base64, 22 characters.
pub fn new_cluster_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

/// How often the leader judges leases: a sixteenth of a lease, so a silent
/// agent is fenced at most that long after its lease ran out.
pub(crate) fn tick_interval(lease: Duration) -> Duration {
    (lease / 16).clamp(Duration::from_millis(10), Duration::from_millis(500))
}

fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

pub(crate) async fn run(node: Arc<Node>) {
    let mut metrics = node.raft.metrics();
    let lease = node.agent_lease;
    let mut ticker = tokio::time::interval(tick_interval(lease));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // the Raft term this node leads in: a new term is a new leadership,
    // even if this node did not see itself follow in between
    let mut led_term: Option<u64> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = metrics.changed() => if changed.is_err() { return },
        }
        let (leading, term) = {
            let m = metrics.borrow_and_update();
            (
                m.state == ServerState::Leader && m.current_leader == Some(node.id),
                m.current_term,
            )
        };
        {
            let mut liveness = node.liveness.lock();
            if !leading {
                if led_term.take().is_some() {
                    liveness.stepped_down();
                }
                continue;
            }
            if led_term != Some(term) {
                led_term = Some(term);
                liveness.took_over(now());
            } else if liveness.wake(now(), lease) {
                tracing::info!(
                    "the lease driver ran late; agents get a grace period before any is fenced"
                );
            }
        }
        round(&node, lease).await;
        node.liveness.lock().rest(now());
    }
}

/// One round on the leader: the cluster id, leases, coordinator slots,
/// balancing.
async fn round(node: &Node, lease: Duration) {
    if node.applied.read().state.cluster_id().is_none() {
        let cmd = Command::SetClusterId {
            cluster_id: new_cluster_id(),
        };
        if let Err(e) = node.proposer.propose(None, vec![cmd]).await {
            tracing::debug!(error = ?e, "could not assign the cluster id yet");
            return;
        }
    }
    // fencing and re-election are two steps; plan again right after a fence
    for _ in 0..3 {
        let plan = {
            let mut liveness = node.liveness.lock();
            let a = node.applied.read();
            let at = now();
            let silent = |id| liveness.silent_for(id, at, lease);
            let plan = lease::plan(&a.state, silent, lease);
            let reasons: Vec<Option<String>> = plan
                .iter()
                .map(|c| lease::reason(&a.state, c, silent, lease))
                .collect();
            for id in lease::fenced_agents(&plan) {
                liveness.fencing(id);
            }
            (plan, reasons)
        };
        let (plan, reasons) = plan;
        if plan.is_empty() {
            break;
        }
        let fenced = lease::fenced_agents(&plan);
        let proposed = propose_explained(node, plan, reasons, "lease decision").await;
        {
            let mut liveness = node.liveness.lock();
            for id in &fenced {
                liveness.fence_settled(*id);
            }
        }
        if !proposed || fenced.is_empty() {
            break;
        }
    }
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    propose_slot_moves(node, wall_clock_ms(), lease_ms).await;
    let moves = {
        let a = node.applied.read();
        balance::plan(&a.state, node.partition_moves)
    };
    if !moves.is_empty() {
        propose_all(node, moves, "partition move").await;
    }
}

/// [`propose_all`], logging why each applied command was made (`reasons`,
/// one per command) so that an operator can tell why a leader moved.
async fn propose_explained(
    node: &Node,
    commands: Vec<Command>,
    reasons: Vec<Option<String>>,
    what: &str,
) -> bool {
    let paired: Vec<(Command, Option<String>)> = commands.into_iter().zip(reasons).collect();
    for run in runs_within_write_limit(paired) {
        let (run, reasons): (Vec<Command>, Vec<Option<String>>) = run.into_iter().unzip();
        match node.proposer.propose(None, run).await {
            Ok(w) => {
                for (r, why) in w.results.iter().zip(reasons) {
                    match (r, why) {
                        (Ok(_), Some(why)) => tracing::info!("{why}"),
                        (Ok(_), None) => {}
                        (Err(r), _) => tracing::debug!(error = %r, "{what} refused"),
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = ?e, "{what} not proposed");
                return false;
            }
        }
    }
    true
}

/// Proposes `commands`, each standing alone (checked against the state it
/// saw), so a long list may go out as several entries. Returns false if a
/// write failed (as opposed to a command being refused).
async fn propose_all(node: &Node, commands: Vec<Command>, what: &str) -> bool {
    for run in runs_within_write_limit(commands) {
        match node.proposer.propose(None, run).await {
            Ok(w) => {
                for r in w.results.iter().filter_map(|r| r.as_ref().err()) {
                    tracing::debug!(error = %r, "{what} refused");
                }
            }
            Err(e) => {
                tracing::debug!(error = ?e, "{what} not proposed");
                return false;
            }
        }
    }
    true
}

impl Node {
    /// An agent's heartbeat reached this node, which should lead: noted on
    /// this node's clock, and logged only when it must lift a fence or
    /// race one (see [`crate::liveness`]).
    pub(crate) async fn serve_heartbeat(
        &self,
        agent_id: AgentId,
    ) -> Result<ForwardResponse, MetaError> {
        let leads = {
            let m = self.raft.metrics();
            let m = m.borrow();
            m.state == ServerState::Leader && m.current_leader == Some(self.id)
        };
        if !leads {
            return Err(MetaError::NotLeader {
                node_id: self.id,
                leader: self.leader_id(),
            });
        }
        let (must_log, silent) = {
            let mut liveness = self.liveness.lock();
            let at = now();
            let racing_a_fence = liveness.heard(agent_id, at);
            let applied = self.applied.read();
            let must_log = match applied.state.agent(agent_id) {
                None => return Err(MetaError::UnknownAgent { agent_id }),
                Some(a) => racing_a_fence || a.fenced,
            };
            let lease = self.agent_lease;
            let silent: Vec<AgentId> = applied
                .state
                .agents()
                .map(|a| a.id)
                .filter(|id| {
                    liveness.silent_for(*id, at, lease)
                        >= crate::options::agent_suspect_after(lease)
                })
                .collect();
            (must_log, silent)
        };
        if !must_log {
            return Ok(ForwardResponse::Heartbeat {
                log_index: None,
                silent,
            });
        }
        match self
            .proposer
            .propose(None, vec![Command::Heartbeat { agent_id }])
            .await
        {
            Ok(w) => match w.results.into_iter().next() {
                Some(Ok(_)) => Ok(ForwardResponse::Heartbeat {
                    log_index: Some(w.log_index),
                    silent,
                }),
                Some(Err(e)) => Err(e),
                None => Err(MetaError::Storage {
                    reason: "a heartbeat entry returned no result".into(),
                }),
            },
            Err(ProposeError::NotLeader { leader }) => Err(MetaError::NotLeader {
                node_id: self.id,
                leader,
            }),
            Err(ProposeError::Failed(e)) => Err(e),
        }
    }

    /// Notes that `agent` registered through this node, which leads.
    pub(crate) fn registering(&self, agent: AgentId) {
        self.liveness.lock().heard(agent, now());
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
