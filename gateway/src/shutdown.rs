//! Controlled shutdown (Kafka's): before an agent in a cluster closes, it
//! hands the leadership of its partitions to in-sync followers, so clients
//! pause for a leader change instead of waiting out its lease.
//!
//! [`Gateway::hand_over`], step by step:
//! 1. `/health` answers 503, so load balancers send new clients elsewhere;
//!    requests are still served.
//! 2. Heartbeats stop, and the one under way gets its answer first (a late
//!    heartbeat would lift the fence of step 3).
//! 3. The agent proposes `ShutdownAgent` (metastore `state/leaving.rs`): in
//!    one step it is fenced and each partition it leads goes to the first
//!    other live in-sync replica, with a new leader epoch and the ISR
//!    without it. The write resolves once this agent's replica applied it.
//! 4. Its own partition tasks follow the new leaders at once, rather than
//!    on the replica manager's next walk: acks=all writes still waiting for
//!    the followers get NOT_LEADER_OR_FOLLOWER (those the high watermark
//!    covered were answered already) and producers retry at the new leader,
//!    which KIP-951 names in the answer; forwarding agents send them there
//!    themselves (`kafka/api/produce_forward.rs`).
//! 5. It keeps serving for [`HAND_OVER_LINGER`] while clients still
//!    connected learn the new leaders from those answers. Other agents
//!    stop listing it in Metadata at once (`brokers.rs`), and librdkafka,
//!    when one metadata answer both drops a broker and moves a partition
//!    away from it, parks the partition on its internal broker until its
//!    next leader query, about a second later. A client that moved the
//!    partition already (KIP-951) forgets the broker cleanly.
//!
//! [`Gateway::shutdown`] then refuses forwarded requests, lets in-flight
//! ones finish and closes the logs. Partitions with no other live in-sync
//! replica stay led here and close with the agent, as before. Each step is
//! bounded: a metastore that does not answer only costs the lease failover
//! the agent would have had without it.

use std::time::{Duration, Instant};

use metastore::{AgentKeepAlive, ClusterControl, Topics};

use crate::Gateway;

/// How long an agent keeps serving after its leaderships moved (step 5):
/// a producer with records queued sends within its `linger.ms` (5 ms by
/// default in librdkafka, 0 in the Java client) and a consumer's fetch
/// returns within its wait, both answered NOT_LEADER_OR_FOLLOWER with the
/// new leader.
pub const HAND_OVER_LINGER: Duration = Duration::from_millis(250);

/// What a hand-over did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HandOver {
    /// Leaderships that moved to another agent.
    pub moved: usize,
    /// Partitions still led here: no other live in-sync replica.
    pub kept: usize,
    /// Whether the metastore applied the shutdown (else the lease decides).
    pub applied: bool,
    pub took: Duration,
}

impl Gateway {
    /// Hands this agent's leaderships over before [`Gateway::shutdown`]
    /// (see the module docs); each metastore step waits at most `wait`.
    pub async fn hand_over(&self, keep_alive: Option<AgentKeepAlive>, wait: Duration) -> HandOver {
        let started = Instant::now();
        let b = self.broker();
        b.begin_leaving();
        if let Some(k) = keep_alive {
            if tokio::time::timeout(wait, k.finish()).await.is_err() {
                tracing::warn!("the last heartbeat got no answer; handing over anyway");
            }
        }
        let Ok(me) = u64::try_from(b.config.node_id) else {
            return HandOver::default();
        };
        let catalog = &b.node.catalog;
        let mut out = HandOver::default();
        match tokio::time::timeout(wait, catalog.shutdown_agent(me)).await {
            Ok(Ok(moved)) => {
                out.moved = moved;
                out.applied = true;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the metastore refused the controlled shutdown; partitions move when the lease runs out");
            }
            Err(_) => {
                tracing::warn!(
                    waited_ms = wait.as_millis() as u64,
                    "the metastore did not apply the controlled shutdown in time; partitions move when the lease runs out"
                );
            }
        }
        for h in b.node.partitions.open_handles() {
            let key = h.key();
            let Some(p) = catalog
                .topic_by_id(key.topic_id)
                .and_then(|t| t.partition(key.partition).cloned())
            else {
                continue;
            };
            match p.leader {
                Some(l) if l == me => out.kept += 1,
                Some(l) if out.applied => {
                    if let Err(e) = h.follow(l, p.leader_epoch).await {
                        tracing::debug!(error = %e, partition = key.partition, "could not follow the new leader");
                    }
                }
                _ => {}
            }
        }
        if out.applied && out.moved > 0 {
            tokio::time::sleep(HAND_OVER_LINGER).await;
        }
        out.took = started.elapsed();
        out
    }
}
