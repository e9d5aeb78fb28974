//! The follower's side of replication: one fetcher per leader agent pulls
//! the batches of every partition this node follows on that leader, over
//! one stream, and appends them to the local logs.
//!
//! Each round: ask every followed partition's task where its log ends and
//! its newest epoch; send one fetch naming them all; apply the answer per
//! partition — truncate where the leader says the logs diverge, restart
//! below the leader's local start, otherwise append the batches and move
//! the follower's high watermark.
//!
//! A follower that restarts (a new replica, or one that fell behind what
//! its leader keeps locally) starts where object storage's contiguous
//! manifest ends, if that is past the leader's local start: what lies
//! below is read from object storage, so a moved replica copies only what
//! is not there yet, whatever the leader keeps locally. It takes the
//! idempotent producer state uploaded with the segment ending there.
//!
//! Answers are applied only while still current (see `task::follower`): an
//! answer for a partition whose leader epoch or task changed while the
//! fetch was out is dropped here, and the task refuses any other answer
//! fetched under another leader, epoch or log end than its own. The leader holds the fetch while it has
//! nothing new, so an idle follower costs one round trip per `max_wait`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use metastore::{AgentId, ClusterControl, Manifests, Metastore};
use storage::tier::PartitionKey;
use tokio::sync::watch;
use tracing::Instrument;

use super::service::ALPN;
use super::wire::{
    self, Diverging, FetchPartition, FetchRequest, FetchResponse, FetchedPartition, Refusal,
    WireError,
};
use crate::backend::LogError;
use crate::partition::{FetchedAt, PartitionCounters, PartitionHandle};
use crate::telemetry::sampling::{sampled, SPAN_TARGET};

/// A partition this node follows, as the fetcher sees it.
#[derive(Clone)]
pub struct Followed {
    pub key: PartitionKey,
    pub leader_epoch: i32,
    pub handle: PartitionHandle,
}

impl PartialEq for Followed {
    fn eq(&self, other: &Followed) -> bool {
        self.key == other.key
            && self.leader_epoch == other.leader_epoch
            && self.handle.same_task(&other.handle)
    }
}

/// How fetchers fetch.
#[derive(Debug, Clone, Copy)]
pub struct FetchSettings {
    /// How long the leader may hold a fetch that finds nothing new.
    pub max_wait_ms: u32,
    /// Most record bytes per partition per fetch.
    pub partition_max_bytes: u32,
}

impl Default for FetchSettings {
    fn default() -> FetchSettings {
        FetchSettings {
            max_wait_ms: 500,
            partition_max_bytes: 1 << 20,
        }
    }
}

/// Fetches from `leader` until `set`'s sender is dropped.
pub async fn run(
    me: AgentId,
    leader: AgentId,
    meta: Metastore,
    mut set: watch::Receiver<Vec<Followed>>,
    settings: FetchSettings,
    counters: Arc<PartitionCounters>,
) {
    let mut failures = 0u32;
    loop {
        if set.has_changed().is_err() {
            return;
        }
        match fetch_from(me, leader, &meta, &mut set, settings, &counters).await {
            Ok(()) => return,
            Err(e) => {
                failures = failures.saturating_add(1);
                if failures == 1 || failures.is_power_of_two() {
                    tracing::warn!(leader, error = %e, failures, "replica fetching from a leader failed; retrying");
                }
                let wait = Duration::from_millis(50u64 << failures.min(4));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    r = set.changed() => if r.is_err() { return },
                }
            }
        }
    }
}

/// Why a follower's connection to its leader ended; the fetcher retries
/// with a backoff.
#[derive(Debug, thiserror::Error)]
enum FetchFailed {
    #[error("agent {0} has no cluster address registered")]
    NoAddress(AgentId),
    #[error("cannot reach the leader: {0}")]
    Dial(#[from] metastore::MetaError),
    #[error("the connection to the leader failed: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("sending the fetch failed: {0}")]
    Send(#[from] quinn::WriteError),
    #[error("reading the answer failed: {0}")]
    Read(#[from] quinn::ReadExactError),
    #[error("the leader's answer is malformed: {0}")]
    Wire(#[from] WireError),
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    #[error("the leader answered for {answered} partitions, asked for {asked}")]
    Mismatched { asked: usize, answered: usize },
}

/// One connection's life: `Ok` when the fetcher should stop.
async fn fetch_from(
    me: AgentId,
    leader: AgentId,
    meta: &Metastore,
    set: &mut watch::Receiver<Vec<Followed>>,
    settings: FetchSettings,
    counters: &PartitionCounters,
) -> Result<(), FetchFailed> {
    let addr = meta
        .agents()
        .into_iter()
        .find(|a| a.id == leader)
        .and_then(|a| a.addrs.quic)
        .ok_or(FetchFailed::NoAddress(leader))?;
    let conn = meta.dial_cluster(&addr, leader, ALPN).await?;
    let (mut send, mut recv) = conn.open_bi().await?;
    loop {
        let followed = set.borrow_and_update().clone();
        if followed.is_empty() {
            if set.changed().await.is_err() {
                return Ok(());
            }
            continue;
        }
        // Positions are asked of every task at once: without write caching
        // each answers once its last append is durable, and those
        // fdatasyncs run side by side.
        let positions =
            futures::future::join_all(followed.iter().map(|f| f.handle.position())).await;
        let mut asked = Vec::with_capacity(followed.len());
        for (f, pos) in followed.iter().zip(positions) {
            match pos {
                Ok(pos) => asked.push((f, pos)),
                // an offline log or a closed task: the others go on
                Err(e) => {
                    tracing::debug!(topic_id = %f.key.topic_id, partition = f.key.partition, error = %e, "a followed partition cannot say where its log stands; skipped this round")
                }
            }
        }
        if asked.is_empty() {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                r = set.changed() => if r.is_err() { return Ok(()) },
            }
            continue;
        }
        let partitions = asked
            .iter()
            .map(|(f, pos)| FetchPartition {
                topic_id: f.key.topic_id,
                partition: f.key.partition,
                leader_epoch: f.leader_epoch,
                fetch_offset: pos.log_end,
                last_fetched_epoch: pos.latest_epoch,
                max_bytes: settings.partition_max_bytes,
            })
            .collect();
        let req = FetchRequest {
            follower: me,
            max_wait_ms: settings.max_wait_ms,
            partitions,
        };
        let asking = req.encode();
        send.write_all(&asking).await?;
        counters.replica_peers.sent(leader, asking.len() as u64);
        let limit =
            Duration::from_millis(u64::from(settings.max_wait_ms)) + Duration::from_secs(10);
        let answered = {
            let read = tokio::time::timeout(limit, read_response(&mut recv));
            tokio::pin!(read);
            loop {
                tokio::select! {
                    r = &mut read => break Some(r),
                    r = set.changed() => {
                        if r.is_err() {
                            return Ok(());
                        }
                        if gained(&set.borrow(), &asked) {
                            break None;
                        }
                    }
                }
            }
        };
        let Some(answered) = answered else {
            // A partition joined the set while the leader holds this fetch
            // (it took over a partition this node follows, say): it would
            // wait up to `max_wait` for the next round, and with it every
            // acks=all write the new leader holds until this node has it.
            // Drop the held fetch and ask again at once on a new stream.
            let _ = send.reset(0u32.into());
            let _ = recv.stop(0u32.into());
            (send, recv) = conn.open_bi().await?;
            continue;
        };
        let (resp, bytes) = answered.map_err(|_| FetchFailed::TimedOut(limit))??;
        counters
            .replica_bytes_received
            .fetch_add(bytes as u64, Ordering::Relaxed);
        counters.replica_peers.received(leader, bytes as u64);
        if resp.partitions.len() != asked.len() {
            return Err(FetchFailed::Mismatched {
                asked: asked.len(),
                answered: resp.partitions.len(),
            });
        }
        let mut progressed = false;
        for ((f, pos), p) in asked.into_iter().zip(resp.partitions) {
            // the set may have moved on while the fetch was out (a new
            // epoch, another leader, a reopened log): Kafka drops such
            // answers, and so does this
            if !still_followed(&set.borrow(), f) {
                tracing::debug!(topic_id = %f.key.topic_id, partition = f.key.partition, leader_epoch = f.leader_epoch, "dropped a replica fetch answer for a view no longer current");
                continue;
            }
            let fetched = FetchedAt {
                leader,
                leader_epoch: f.leader_epoch,
                fetch_offset: pos.log_end,
            };
            let span = if sampled() {
                tracing::info_span!(
                    target: SPAN_TARGET,
                    "replicate",
                    topic = &*f.handle.stats().topic,
                    partition = f.key.partition,
                    leader = i64::try_from(leader).unwrap_or(-1),
                    bytes = p.records.len() as i64,
                )
            } else {
                tracing::Span::none()
            };
            let manifest = || meta.segments(f.key.topic_id, f.key.partition);
            progressed |= apply(f, fetched, p, manifest).instrument(span).await;
        }
        if !progressed {
            // every partition refused (e.g. a leadership change the
            // metastore has not shown us yet): do not spin
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Whether `set` holds a partition (or a leader epoch of one) that the
/// fetch under way did not ask for.
fn gained(set: &[Followed], asked: &[(&Followed, crate::partition::ReplicaPosition)]) -> bool {
    set.iter().any(|n| !asked.iter().any(|(f, _)| *f == n))
}

/// Whether `f` (what a fetch was made for) is still in the fetcher's set:
/// the same partition at the same leader epoch, on the same task.
pub fn still_followed(set: &[Followed], f: &Followed) -> bool {
    set.iter().any(|c| c == f)
}

/// The next response and its size on the wire.
async fn read_response(
    recv: &mut quinn::RecvStream,
) -> Result<(FetchResponse, usize), FetchFailed> {
    let mut prefix = [0u8; 4];
    recv.read_exact(&mut prefix).await?;
    let len = wire::body_len(prefix, wire::MAX_RESPONSE_BYTES)?;
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body).await?;
    let resp = FetchResponse::decode(body.into())?;
    Ok((resp, 4 + len))
}

/// Where a follower cuts its log when its leader says they diverge at
/// `d` (KIP-320): at the leader's end of that epoch, or earlier where the
/// follower's own largest epoch at or below it ends (what follows there is
/// from epochs the leader never had); with no such epoch, everything goes.
pub fn truncation_point(d: Diverging, own: Option<(i32, i64)>, log_start: i64) -> i64 {
    match own {
        Some((_, own_end)) => d.end_offset.min(own_end),
        None => d.end_offset.min(log_start),
    }
}

/// Where a restarting follower starts: the leader's local start, or past
/// it where the manifest's segments cover the offsets contiguously from
/// there, never past the leader's high watermark (`hw`, `-1` unknown).
pub fn restart_offset(local_start: i64, hw: i64, manifest: &[metastore::SegmentEntry]) -> i64 {
    let at = super::rebuild::manifest_end(local_start, manifest);
    if hw >= local_start {
        at.min(hw)
    } else {
        local_start
    }
}

/// Applies one partition's answer to a fetch made under `fetched`;
/// whether the fetch made progress. Every change to the log names
/// `fetched`, so the partition's task refuses it if the follower's view
/// moved on meanwhile (see `task::follower`). `manifest` reads the
/// partition's tiered segments, for a restart.
pub async fn apply(
    f: &Followed,
    fetched: FetchedAt,
    p: FetchedPartition,
    manifest: impl FnOnce() -> Vec<metastore::SegmentEntry>,
) -> bool {
    if p.topic_id != f.key.topic_id || p.partition != f.key.partition {
        tracing::warn!("a leader answered for another partition than asked; ignored");
        return false;
    }
    let done = if p.error == 0 {
        match p.diverging {
            Some(d) => match (f.handle.epoch_end(d.epoch).await, f.handle.bounds().await) {
                (Ok(own), Ok((log_start, _))) => f
                    .handle
                    .truncate(fetched, truncation_point(d, own, log_start))
                    .await
                    .map(|()| true),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            None => f
                .handle
                .replica_append(fetched, p.records, p.high_watermark)
                .await
                .map(|()| true),
        }
    } else if p.error == Refusal::OffsetOutOfRange.code() && p.log_start_offset >= 0 {
        if fetched.fetch_offset < p.log_start_offset {
            restart(f, fetched, &p, manifest).await.map(|()| true)
        } else if p.high_watermark >= 0 {
            // ahead of the leader: keep only what it committed
            f.handle
                .truncate(fetched, p.high_watermark)
                .await
                .map(|()| true)
        } else {
            Ok(false)
        }
    } else {
        Ok(false)
    };
    match done {
        Ok(progress) => progress,
        Err(e) => {
            tracing::debug!(topic_id = %f.key.topic_id, partition = f.key.partition, error = %e, "applying a replica fetch failed");
            false
        }
    }
}

/// A follower fell below what its leader keeps locally: it restarts its
/// log there, or where object storage ends if that is later. Where a
/// tiered segment ends, the idempotent producer state uploaded with it
/// comes along (KIP-405), so that once this replica leads it still knows
/// the producers that wrote below; object storage out of reach postpones
/// the restart to a later round rather than lose that state.
async fn restart(
    f: &Followed,
    fetched: FetchedAt,
    p: &FetchedPartition,
    manifest: impl FnOnce() -> Vec<metastore::SegmentEntry>,
) -> Result<(), LogError> {
    let at = restart_offset(p.log_start_offset, p.high_watermark, &manifest());
    let producers = f.handle.producer_snapshot(at).await?;
    tracing::info!(
        topic_id = %f.key.topic_id,
        partition = f.key.partition,
        leader_local_start = p.log_start_offset,
        start = at,
        producer_snapshot = producers.is_some(),
        "replica restarts its log"
    );
    f.handle.restart(fetched, at, producers).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(epoch: i32, end_offset: i64) -> Diverging {
        Diverging { epoch, end_offset }
    }

    #[test]
    fn a_follower_cuts_where_the_leaders_epoch_ends_when_it_has_that_epoch_longer() {
        // follower: epoch 2 up to 40; leader: epoch 2 ends at 30
        assert_eq!(truncation_point(d(2, 30), Some((2, 40)), 0), 30);
    }

    #[test]
    fn a_follower_cuts_where_its_own_older_epoch_ends_when_later_ones_are_unknown_to_the_leader() {
        // follower: [e1 0..10) [e3 10..20); leader: [e1 0..15) [e2 15..30)
        // the leader answers for e3 with e2 ending at 30; the follower's
        // largest epoch at or below 2 is e1, ending at 10: cut there
        assert_eq!(truncation_point(d(2, 30), Some((1, 10)), 0), 10);
    }

    fn seg(base_offset: i64, last_offset: i64) -> metastore::SegmentEntry {
        metastore::SegmentEntry {
            base_offset,
            last_offset,
            ..Default::default()
        }
    }

    #[test]
    fn a_restarting_follower_skips_what_object_storage_holds_from_the_leaders_local_start() {
        let manifest = [seg(0, 99), seg(100, 199), seg(200, 299), seg(400, 499)];
        assert_eq!(
            restart_offset(150, 1000, &manifest),
            300,
            "the gap at 300 stops it"
        );
        assert_eq!(restart_offset(300, 1000, &manifest), 300);
        assert_eq!(
            restart_offset(0, 250, &manifest),
            250,
            "never past the high watermark"
        );
        assert_eq!(
            restart_offset(150, -1, &manifest),
            150,
            "unknown high watermark"
        );
        assert_eq!(restart_offset(150, 1000, &[]), 150, "nothing tiered");
    }

    #[test]
    fn the_manifest_ends_at_its_first_gap() {
        use crate::partition::replication::rebuild::manifest_end;
        let manifest = [seg(0, 99), seg(100, 199), seg(300, 399)];
        assert_eq!(manifest_end(0, &manifest), 200);
        assert_eq!(manifest_end(150, &manifest), 200);
        assert_eq!(manifest_end(250, &manifest), 250);
        assert_eq!(manifest_end(7, &[]), 7);
    }

    #[test]
    fn a_follower_with_no_epoch_the_leader_knows_keeps_nothing() {
        assert_eq!(truncation_point(d(0, 50), None, 5), 5);
    }
}
