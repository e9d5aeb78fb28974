//! Batches concurrent writes into Raft entries on the leader.
//!
//! Callers queue their commands; one task takes whatever is queued (up to
//! `max_batch` commands) and proposes it as one [`Proposal`], stamped with
//! the leader's clock. Up to `max_in_flight` proposals (default one) are in
//! flight; while they are busy, new commands pile up and go out together in
//! the next one. So under load many offset commits or heartbeats share one
//! Raft entry and one fsync, and under light load a write goes out at once.
//! A batch also stops before it would exceed [`MAX_WRITE_BYTES`], so every
//! entry fits in one replication message.

use std::sync::Arc;

use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;

use uuid::Uuid;

use crate::command::{check_write_size, Command, CommandResult, Proposal, Span, MAX_WRITE_BYTES};
use crate::error::MetaError;
use crate::raft_types::{NodeId, Raft};

/// A batch that made it into the log and was applied.
#[derive(Debug)]
pub(crate) struct Written {
    pub log_index: u64,
    pub results: Vec<CommandResult>,
}

#[derive(Debug)]
pub(crate) enum ProposeError {
    /// This node is not the leader (any more). The commands were not
    /// applied: either never appended, or appended and then truncated.
    NotLeader {
        leader: Option<NodeId>,
    },
    Failed(MetaError),
}

struct Pending {
    request: Option<Uuid>,
    commands: Vec<Command>,
    /// JSON size of `commands`.
    bytes: usize,
    reply: oneshot::Sender<Result<Written, ProposeError>>,
}

/// Handle to the batching task.
#[derive(Clone)]
pub(crate) struct Proposer {
    tx: mpsc::Sender<Pending>,
}

/// Milliseconds since the Unix epoch on this machine's clock.
pub(crate) fn wall_clock_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

impl Proposer {
    pub(crate) fn spawn(
        raft: Raft,
        max_batch: usize,
        max_in_flight: usize,
    ) -> (Proposer, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(max_batch.max(1) * 4);
        let task = tokio::spawn(run(raft, rx, max_batch, max_in_flight));
        (Proposer { tx }, task)
    }

    /// Proposes `commands`; with a `request` id they are applied at most
    /// once however often the same request is proposed.
    pub(crate) async fn propose(
        &self,
        request: Option<Uuid>,
        commands: Vec<Command>,
    ) -> Result<Written, ProposeError> {
        let bytes = check_write_size(&commands).map_err(ProposeError::Failed)?;
        let (reply, wait) = oneshot::channel();
        self.tx
            .send(Pending {
                request,
                commands,
                bytes,
                reply,
            })
            .await
            .map_err(|_| ProposeError::Failed(MetaError::ShuttingDown))?;
        wait.await
            .map_err(|_| ProposeError::Failed(MetaError::ShuttingDown))?
    }
}

async fn run(raft: Raft, mut rx: mpsc::Receiver<Pending>, max_batch: usize, max_in_flight: usize) {
    let slots = Arc::new(Semaphore::new(max_in_flight));
    // a write that did not fit the previous batch opens the next one
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (batch, count, next) = fill_batch(first, &mut rx, max_batch);
        carried = next;
        let raft = raft.clone();
        tokio::spawn(async move {
            propose_batch(&raft, batch, count).await;
            drop(slot);
        });
    }
}

/// Adds what is queued to `first` until the batch holds `max_batch` commands
/// or the next write would take it over [`MAX_WRITE_BYTES`]; that write is
/// returned to open the next batch. Also returns the command count.
fn fill_batch(
    first: Pending,
    rx: &mut mpsc::Receiver<Pending>,
    max_batch: usize,
) -> (Vec<Pending>, usize, Option<Pending>) {
    let mut count = first.commands.len();
    let mut bytes = first.bytes;
    let mut batch = vec![first];
    while count < max_batch {
        match rx.try_recv() {
            Ok(p) if bytes + p.bytes > MAX_WRITE_BYTES => return (batch, count, Some(p)),
            Ok(p) => {
                count += p.commands.len();
                bytes += p.bytes;
                batch.push(p);
            }
            Err(_) => break,
        }
    }
    (batch, count, None)
}

async fn propose_batch(raft: &Raft, batch: Vec<Pending>, count: usize) {
    let mut commands = Vec::with_capacity(count);
    let mut waiters = Vec::with_capacity(batch.len());
    let mut spans = Vec::with_capacity(batch.len());
    for p in batch {
        let n = p.commands.len();
        spans.push(Span {
            request: p.request,
            commands: u32::try_from(n).unwrap_or(u32::MAX),
        });
        waiters.push((n, p.reply));
        commands.extend(p.commands);
    }
    let proposal = Proposal {
        now_ms: wall_clock_ms(),
        commands,
        spans,
    };
    match raft.client_write(proposal).await {
        Ok(resp) => {
            let log_index = resp.log_id.index;
            let mut results = resp.data.0.into_iter();
            for (n, reply) in waiters {
                let mine: Vec<CommandResult> = results.by_ref().take(n).collect();
                let answer = if mine.len() == n {
                    Ok(Written {
                        log_index,
                        results: mine,
                    })
                } else {
                    Err(ProposeError::Failed(MetaError::Storage {
                        reason: format!("entry {log_index} returned fewer results than commands"),
                    }))
                };
                let _ = reply.send(answer);
            }
        }
        Err(e) => {
            for (_, reply) in waiters {
                let _ = reply.send(Err(map_write_error(&e)));
            }
        }
    }
}

fn map_write_error(
    e: &RaftError<NodeId, ClientWriteError<NodeId, crate::raft_types::MetaNode>>,
) -> ProposeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ProposeError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => {
            ProposeError::Failed(MetaError::Membership {
                reason: c.to_string(),
            })
        }
        RaftError::Fatal(openraft::error::Fatal::Stopped) => {
            ProposeError::Failed(MetaError::ShuttingDown)
        }
        RaftError::Fatal(f) => ProposeError::Failed(MetaError::Storage {
            reason: f.to_string(),
        }),
    }
}

#[cfg(test)]
#[path = "proposer_tests.rs"]
mod tests;
