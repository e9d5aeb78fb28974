use std::collections::BTreeMap;

use openraft::{
    CommittedLeaderId, EntryPayload, LogId, Membership, SnapshotMeta, StoredMembership,
};

use super::*;
use crate::command::{Command, Proposal, MAX_WRITE_BYTES};
use crate::raft_types::{Entry, Vote};

fn vote(node: NodeId) -> Vote {
    Vote::new_committed(3, node)
}

fn encoded(body: RpcRequest) -> usize {
    let envelope = Envelope {
        from: 1,
        to: 2,
        body,
    };
    serde_json::to_vec(&envelope).expect("encode").len()
}

fn entry(index: u64, commands: Vec<Command>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(3, 1), index),
        payload: EntryPayload::Normal(Proposal {
            now_ms: i64::MAX,
            commands,
            spans: Vec::new(),
        }),
    }
}

#[test]
fn a_full_snapshot_chunk_fits_in_one_request() {
    let members: BTreeMap<NodeId, MetaNode> = (1..=5)
        .map(|id| {
            let addr = format!("metastore-node-{id}.example.internal:65535");
            (id, MetaNode { addr })
        })
        .collect();
    let membership = Membership::new(vec![(1..=5).collect()], members);
    let log_id = LogId::new(CommittedLeaderId::new(u64::MAX, 1), u64::MAX);
    let request = InstallSnapshotRequest {
        vote: vote(1),
        meta: SnapshotMeta {
            last_log_id: Some(log_id),
            last_membership: StoredMembership::new(Some(log_id), membership),
            snapshot_id: "x".repeat(100),
        },
        offset: u64::MAX,
        // the widest bytes in JSON: "255,"
        data: vec![255u8; SNAPSHOT_CHUNK_BYTES as usize],
        done: false,
    };
    let bytes = encoded(RpcRequest::InstallSnapshot(request));
    assert!(bytes <= MAX_REQUEST_BYTES, "{bytes} > {MAX_REQUEST_BYTES}");
}

#[test]
fn an_entry_as_large_as_a_write_may_be_fits_in_one_request() {
    let group = "g".repeat(MAX_WRITE_BYTES - 100);
    let commands = vec![Command::DeleteGroup {
        group,
        coordinator: None,
    }];
    crate::command::check_write_size(&commands).expect("at the limit, still accepted");
    let request = AppendEntriesRequest {
        vote: vote(1),
        prev_log_id: Some(LogId::new(CommittedLeaderId::new(3, 1), u64::MAX - 1)),
        entries: vec![entry(u64::MAX, commands)],
        leader_commit: Some(LogId::new(CommittedLeaderId::new(3, 1), u64::MAX)),
    };
    let bytes = encoded(RpcRequest::AppendEntries(request));
    assert!(bytes <= MAX_REQUEST_BYTES, "{bytes} > {MAX_REQUEST_BYTES}");
}

/// Refuses AppendEntries with more than `fits` entries as too large.
struct Fits {
    fits: usize,
}

impl Transport for Fits {
    fn call(
        &self,
        _addr: &str,
        envelope: Envelope,
    ) -> BoxFuture<'_, Result<RpcResponse, TransportError>> {
        let n = match &envelope.body {
            RpcRequest::AppendEntries(r) => r.entries.len(),
            _ => 0,
        };
        let fits = self.fits;
        Box::pin(async move {
            if n > fits {
                Err(TransportError::TooLarge {
                    node: envelope.to,
                    bytes: n * 1000,
                    limit: fits * 1000,
                })
            } else {
                Ok(RpcResponse::AppendEntries(Ok(
                    AppendEntriesResponse::Success,
                )))
            }
        })
    }
}

fn append(n: u64) -> AppendEntriesRequest<TypeConfig> {
    AppendEntriesRequest {
        vote: vote(1),
        prev_log_id: None,
        entries: (1..=n).map(|i| entry(i, Vec::new())).collect(),
        leader_commit: None,
    }
}

#[tokio::test]
async fn a_batch_too_large_for_one_request_makes_openraft_send_fewer_entries() {
    let mut client = PeerClient {
        net: Network {
            id: 1,
            transport: Arc::new(Fits { fits: 100 }),
            faults: Arc::new(NetworkFaults::default()),
        },
        target: 2,
        addr: "peer".into(),
    };
    let option = RPCOption::new(Duration::from_secs(1));
    match client.append_entries(append(300), option.clone()).await {
        Err(RPCError::PayloadTooLarge(p)) => {
            let hint = p.entries_hint();
            assert!((1..=100).contains(&hint), "hint {hint}")
        }
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    let r = client.append_entries(append(90), option.clone()).await;
    assert!(matches!(r, Ok(AppendEntriesResponse::Success)), "{r:?}");
    // a single entry too large for any request cannot be split: a plain error
    client.net.transport = Arc::new(Fits { fits: 0 });
    let r = client.append_entries(append(1), option).await;
    assert!(matches!(r, Err(RPCError::Network(_))), "{r:?}");
}

#[test]
fn raft_messages_must_name_the_peer_that_sends_them() {
    let vote_req = RpcRequest::Vote(VoteRequest::new(Vote::new(4, 2), None));
    assert!(vote_req.sent_by(2));
    assert!(!vote_req.sent_by(3));
    let append = RpcRequest::AppendEntries(append(1));
    assert!(append.sent_by(1));
    assert!(!append.sent_by(2));
    assert!(RpcRequest::Forward(ForwardRequest::ReadIndex).sent_by(9));
}
