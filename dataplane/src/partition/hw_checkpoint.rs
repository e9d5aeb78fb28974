//! Leaders record their partitions' high watermarks in the metastore every
//! few seconds (as Kafka checkpoints them every
//! `replica.high.watermark.checkpoint.interval.ms`), so every agent can
//! tell how far a partition it does not lead is committed: `/v1/topics`
//! and a group's lag answer from it on other agents. Only forward moves are
//! written, and nothing when no high watermark moved.

use std::sync::Arc;
use std::time::Duration;

use metastore::{AgentId, ClusterControl, Metastore, Topics};
use storage::tier::PartitionKey;
use tokio::sync::watch;
use uuid::Uuid;

use crate::partition::Partitions;

/// How often moved high watermarks are written.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// High watermarks of partitions this agent leads, open here, that are
/// ahead of what the metastore holds.
pub fn moved(catalog: &Metastore, partitions: &Partitions, node: AgentId) -> Vec<(Uuid, i32, i64)> {
    let mut out = Vec::new();
    for t in catalog.topics() {
        for p in t.partitions.iter().filter(|p| p.leader == Some(node)) {
            let Some(h) = partitions.get_open(PartitionKey::new(t.id, p.index)) else {
                continue;
            };
            let hw = *h.high_watermark().borrow();
            if hw > p.high_watermark {
                out.push((t.id, p.index, hw));
            }
        }
    }
    out
}

/// Writes moved high watermarks every `every` until `stop` turns true.
pub async fn run(
    catalog: Metastore,
    partitions: Arc<Partitions>,
    node: AgentId,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let entries = moved(&catalog, &partitions, node);
        if entries.is_empty() {
            continue;
        }
        if let Err(e) = catalog.checkpoint_high_watermarks(entries).await {
            // the next tick tries again with whatever moved by then
            tracing::debug!(error = %e, "could not record high watermarks");
        }
    }
}
