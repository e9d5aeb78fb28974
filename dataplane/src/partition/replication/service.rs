//! The leader's side of replication: serves followers' fetches on the
//! cluster endpoint (ALPN [`ALPN`]).
//!
//! A follower opens a connection (mutual TLS: its certificate names its
//! node id) and one stream per leader, and sends one fetch at a time. Each
//! fetch names the follower; it is served only if the certificate names the
//! same node, so one agent cannot pose as another to move a high watermark.
//! A fetch that finds no new data for any of its partitions waits at the
//! leader until one of their logs grows or `max_wait_ms` passes (a long
//! poll, never a loop on the follower's side).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use metastore::network::services::{ClusterService, PeerCertificate};
use storage::tier::PartitionKey;

use super::wire::{self, FetchRequest, FetchResponse, FetchedPartition, Refusal};
use crate::partition::{FollowerFetch, PartitionHandle, Partitions};

/// The ALPN name of replica fetches on the cluster endpoint.
pub const ALPN: &[u8] = b"aerostream-replica/1";

/// Longest a follower's fetch may wait at the leader.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// Serves followers' fetches from this node's partitions.
pub struct ReplicaService {
    partitions: Arc<Partitions>,
}

impl ReplicaService {
    pub fn new(partitions: Arc<Partitions>) -> Arc<ReplicaService> {
        Arc::new(ReplicaService { partitions })
    }

    /// Answers one fetch, waiting up to its `max_wait_ms` for data.
    pub async fn answer(&self, req: &FetchRequest) -> FetchResponse {
        let handles: Vec<Option<PartitionHandle>> = req
            .partitions
            .iter()
            .map(|p| {
                self.partitions
                    .get_open(PartitionKey::new(p.topic_id, p.partition))
            })
            .collect();
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(u64::from(req.max_wait_ms)).min(MAX_WAIT);
        let mut watches: Vec<_> = handles.iter().flatten().map(|h| h.log_end()).collect();
        loop {
            for w in &mut watches {
                w.borrow_and_update();
            }
            let answer = self.read_once(req, &handles).await;
            let has_data = answer
                .partitions
                .iter()
                .any(|p| !p.records.is_empty() || p.error != 0 || p.diverging.is_some());
            if has_data || watches.is_empty() || tokio::time::Instant::now() >= deadline {
                return answer;
            }
            let changed =
                futures::future::select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.read_once(req, &handles).await;
            }
        }
    }

    async fn read_once(
        &self,
        req: &FetchRequest,
        handles: &[Option<PartitionHandle>],
    ) -> FetchResponse {
        let reads = req.partitions.iter().zip(handles).map(|(p, h)| async move {
            let mut out = FetchedPartition {
                topic_id: p.topic_id,
                partition: p.partition,
                error: Refusal::NotLeaderOrFollower.code(),
                high_watermark: -1,
                log_start_offset: -1,
                diverging: None,
                records: bytes::Bytes::new(),
            };
            let Some(h) = h else { return out };
            let fetch = FollowerFetch {
                follower: req.follower,
                leader_epoch: p.leader_epoch,
                fetch_offset: p.fetch_offset,
                last_fetched_epoch: p.last_fetched_epoch,
                max_bytes: p.max_bytes as usize,
            };
            if let Ok(a) = h.follower_fetch(fetch).await {
                out.error = a.error;
                out.high_watermark = a.high_watermark;
                out.log_start_offset = a.local_start_offset;
                out.diverging = a.diverging;
                out.records = a.records;
            }
            out
        });
        FetchResponse {
            partitions: futures::future::join_all(reads).await,
        }
    }

    async fn serve_stream(
        self: Arc<Self>,
        peer: PeerCertificate,
        mut send: quinn::SendStream,
        mut recv: quinn::RecvStream,
    ) {
        loop {
            let mut prefix = [0u8; 4];
            if recv.read_exact(&mut prefix).await.is_err() {
                return;
            }
            let len = match wire::body_len(prefix, wire::MAX_REQUEST_BYTES) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "refused a replica fetch");
                    return;
                }
            };
            let mut body = vec![0u8; len];
            if recv.read_exact(&mut body).await.is_err() {
                return;
            }
            let req = match FetchRequest::decode(body.into()) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "undecodable replica fetch");
                    return;
                }
            };
            if !peer.names_node(req.follower) {
                tracing::warn!(
                    claimed = req.follower,
                    "refused a replica fetch whose follower is not the node its certificate names"
                );
                return;
            }
            let answer = self.answer(&req).await.encode();
            let counters = self.partitions.counters();
            counters
                .replica_bytes_sent
                .fetch_add(answer.len() as u64, std::sync::atomic::Ordering::Relaxed);
            counters
                .replica_peers
                .received(req.follower, (prefix.len() + len) as u64);
            counters
                .replica_peers
                .sent(req.follower, answer.len() as u64);
            if send.write_all(&answer).await.is_err() {
                return;
            }
        }
    }
}

impl ClusterService for ReplicaService {
    fn serve(&self, peer: PeerCertificate, conn: quinn::Connection) -> BoxFuture<'static, ()> {
        let this = Arc::new(ReplicaService {
            partitions: self.partitions.clone(),
        });
        Box::pin(async move {
            while let Ok((send, recv)) = conn.accept_bi().await {
                tokio::spawn(this.clone().serve_stream(peer.clone(), send, recv));
            }
        })
    }
}
