//! The async driver of the group [`engine`](super::engine): one task owns the
//! engine, receives requests over a channel, answers parked JoinGroup and
//! SyncGroup requests through oneshots, and sleeps until the engine's next
//! deadline. Time is a monotonic clock started with the task.
//!
//! Before each request, and whenever the metastore moves a coordinator
//! slot, the task reads from the local metastore replica which slots its
//! agent holds and hands them to the engine (`ownership.rs`), so the engine
//! never serves a group on a view older than the one the request was
//! routed on.

use std::collections::HashMap;

use metastore::{AgentId, Groups, MetaEvent, Metastore};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::{Duration, Instant};

use super::consumer::{
    ConsumerAnswer, ConsumerGroupDescription, ConsumerHeartbeat, ConsumerRefusal,
};
use super::engine::{
    Deletion, GroupDescription, GroupEngine, GroupError, GroupLimits, GroupState, JoinRequest,
    JoinResponse, Reply, ReplyId, SlotFence, SyncRequest, SyncResponse,
};

enum Msg {
    Join(JoinRequest, oneshot::Sender<JoinResponse>),
    Sync(SyncRequest, oneshot::Sender<SyncResponse>),
    Heartbeat {
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
        reply: oneshot::Sender<Result<(), GroupError>>,
    },
    Leave {
        group: String,
        members: Vec<(String, Option<String>)>,
        reply: oneshot::Sender<Vec<Result<(), GroupError>>>,
    },
    ValidateCommit {
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
        reply: oneshot::Sender<Result<SlotFence, GroupError>>,
    },
    ValidateFetch {
        group: String,
        member: Option<String>,
        epoch: i32,
        reply: oneshot::Sender<Result<(), GroupError>>,
    },
    Describe(
        String,
        oneshot::Sender<Result<Option<GroupDescription>, GroupError>>,
    ),
    List(oneshot::Sender<Vec<(String, GroupState, String, &'static str)>>),
    ConsumerHeartbeat(
        ConsumerHeartbeat,
        oneshot::Sender<Result<ConsumerAnswer, ConsumerRefusal>>,
    ),
    ConsumerDescribe(
        String,
        oneshot::Sender<Result<Option<ConsumerGroupDescription>, GroupError>>,
    ),
    Delete(String, oneshot::Sender<Result<Deletion, GroupError>>),
}

enum Parked {
    Join(oneshot::Sender<JoinResponse>),
    Sync(oneshot::Sender<SyncResponse>),
}

/// Error when the coordinator task has stopped (broker shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the group coordinator is not running")]
pub struct CoordinatorGone;

/// Handle to the coordinator task.
#[derive(Clone)]
pub struct Coordinator {
    tx: mpsc::Sender<Msg>,
}

/// Where the coordinator learns which groups it may serve: the coordinator
/// slots `agent` holds, as the local replica of `catalog` says.
pub struct Ownership {
    pub catalog: Metastore,
    pub agent: AgentId,
}

impl Coordinator {
    /// Spawns the coordinator task on the current runtime.
    pub fn start(limits: GroupLimits, id_prefix: String, ownership: Ownership) -> Coordinator {
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(run(GroupEngine::new(limits, id_prefix), rx, ownership));
        Coordinator { tx }
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Msg,
    ) -> Result<T, CoordinatorGone> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(|_| CoordinatorGone)?;
        rx.await.map_err(|_| CoordinatorGone)
    }

    pub async fn join(&self, req: JoinRequest) -> Result<JoinResponse, CoordinatorGone> {
        self.ask(|r| Msg::Join(req, r)).await
    }

    pub async fn sync(&self, req: SyncRequest) -> Result<SyncResponse, CoordinatorGone> {
        self.ask(|r| Msg::Sync(req, r)).await
    }

    pub async fn heartbeat(
        &self,
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
    ) -> Result<Result<(), GroupError>, CoordinatorGone> {
        self.ask(|reply| Msg::Heartbeat {
            group,
            member,
            instance,
            generation,
            reply,
        })
        .await
    }

    pub async fn leave(
        &self,
        group: String,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<Result<(), GroupError>>, CoordinatorGone> {
        self.ask(|reply| Msg::Leave {
            group,
            members,
            reply,
        })
        .await
    }

    /// The fence the commit must carry to the metastore, or why the
    /// commit is refused.
    pub async fn validate_commit(
        &self,
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
    ) -> Result<Result<SlotFence, GroupError>, CoordinatorGone> {
        self.ask(|reply| Msg::ValidateCommit {
            group,
            member,
            instance,
            generation,
            reply,
        })
        .await
    }

    /// The member check of an OffsetFetch (v9+) made by a member of a
    /// consumer group (KIP-848): the member must be known and at its
    /// current epoch. Fetches without a member (admin tools, older
    /// clients) and fetches for other groups pass.
    pub async fn validate_fetch(
        &self,
        group: String,
        member: Option<String>,
        epoch: i32,
    ) -> Result<Result<(), GroupError>, CoordinatorGone> {
        self.ask(|reply| Msg::ValidateFetch {
            group,
            member,
            epoch,
            reply,
        })
        .await
    }

    /// NOT_COORDINATOR for a group whose slot this agent does not hold;
    /// `None` when it holds no state for the group.
    pub async fn describe(
        &self,
        group: String,
    ) -> Result<Result<Option<GroupDescription>, GroupError>, CoordinatorGone> {
        self.ask(|r| Msg::Describe(group, r)).await
    }

    /// A ConsumerGroupHeartbeat (KIP-848).
    pub async fn consumer_heartbeat(
        &self,
        req: ConsumerHeartbeat,
    ) -> Result<Result<ConsumerAnswer, ConsumerRefusal>, CoordinatorGone> {
        self.ask(|r| Msg::ConsumerHeartbeat(req, r)).await
    }

    /// A consumer group as ConsumerGroupDescribe shows it; `None` when this
    /// coordinator has no consumer group of that id.
    pub async fn consumer_describe(
        &self,
        group: String,
    ) -> Result<Result<Option<ConsumerGroupDescription>, GroupError>, CoordinatorGone> {
        self.ask(|r| Msg::ConsumerDescribe(group, r)).await
    }

    pub async fn list(
        &self,
    ) -> Result<Vec<(String, GroupState, String, &'static str)>, CoordinatorGone> {
        self.ask(Msg::List).await
    }

    pub async fn delete(
        &self,
        group: String,
    ) -> Result<Result<Deletion, GroupError>, CoordinatorGone> {
        self.ask(|r| Msg::Delete(group, r)).await
    }
}

/// Whether a metastore change may have moved coordinator slots.
fn moves_slots(change: &Result<MetaEvent, RecvError>) -> bool {
    match change {
        Ok(MetaEvent::CoordinatorSlotMoved { .. }) | Ok(MetaEvent::Resync) => true,
        Err(RecvError::Lagged(_)) => true,
        Ok(_) | Err(RecvError::Closed) => false,
    }
}

/// The next metastore change; never, once the metastore stopped.
async fn next_change(changes: &mut Option<broadcast::Receiver<MetaEvent>>) -> bool {
    let Some(rx) = changes else {
        return std::future::pending().await;
    };
    let change = rx.recv().await;
    if matches!(change, Err(RecvError::Closed)) {
        *changes = None;
    }
    moves_slots(&change)
}

async fn run(mut engine: GroupEngine, mut rx: mpsc::Receiver<Msg>, ownership: Ownership) {
    let start = Instant::now();
    let now = move || start.elapsed().as_millis() as i64;
    let mut parked: HashMap<ReplyId, Parked> = HashMap::new();
    let mut next_id: ReplyId = 0;
    let mut changes = Some(ownership.catalog.subscribe());
    let held = || ownership.catalog.coordinator_slots_of(ownership.agent);
    loop {
        let wake = engine
            .next_deadline()
            .map(|d| start + Duration::from_millis(d.max(0) as u64))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        let msg = tokio::select! {
            m = rx.recv() => match m { Some(m) => m, None => return },
            _ = tokio::time::sleep_until(wake) => {
                deliver(&mut parked, engine.tick(now()));
                continue;
            }
            moved = next_change(&mut changes) => {
                if moved {
                    deliver(&mut parked, engine.hold(held()));
                }
                continue;
            }
        };
        deliver(&mut parked, engine.hold(held()));
        next_id += 1;
        let id = next_id;
        let replies = match msg {
            Msg::Join(req, tx) => {
                parked.insert(id, Parked::Join(tx));
                engine.join(now(), req, id)
            }
            Msg::Sync(req, tx) => {
                parked.insert(id, Parked::Sync(tx));
                engine.sync(now(), req, id)
            }
            Msg::Heartbeat {
                group,
                member,
                instance,
                generation,
                reply,
            } => {
                let _ = reply.send(engine.heartbeat(
                    now(),
                    &group,
                    &member,
                    instance.as_deref(),
                    generation,
                ));
                Vec::new()
            }
            Msg::Leave {
                group,
                members,
                reply,
            } => {
                let (results, out) = engine.leave_batch(now(), &group, &members);
                let _ = reply.send(results);
                out
            }
            Msg::ValidateFetch {
                group,
                member,
                epoch,
                reply,
            } => {
                let _ = reply.send(engine.consumer_fetch_check(&group, member.as_deref(), epoch));
                Vec::new()
            }
            Msg::ValidateCommit {
                group,
                member,
                instance,
                generation,
                reply,
            } => {
                let _ = reply.send(engine.validate_commit(
                    &group,
                    &member,
                    instance.as_deref(),
                    generation,
                ));
                Vec::new()
            }
            Msg::Describe(group, reply) => {
                let _ = reply.send(engine.describe(&group));
                Vec::new()
            }
            Msg::List(reply) => {
                let _ = reply.send(engine.list());
                Vec::new()
            }
            Msg::ConsumerHeartbeat(req, reply) => {
                let _ = reply.send(engine.consumer_heartbeat(now(), req));
                Vec::new()
            }
            Msg::ConsumerDescribe(group, reply) => {
                let _ = reply.send(engine.consumer_describe(&group));
                Vec::new()
            }
            Msg::Delete(group, reply) => {
                let _ = reply.send(engine.delete(&group));
                Vec::new()
            }
        };
        deliver(&mut parked, replies);
    }
}

fn deliver(parked: &mut HashMap<ReplyId, Parked>, replies: Vec<Reply>) {
    for r in replies {
        match r {
            Reply::Join(id, resp) => {
                if let Some(Parked::Join(tx)) = parked.remove(&id) {
                    let _ = tx.send(resp);
                }
            }
            Reply::Sync(id, resp) => {
                if let Some(Parked::Sync(tx)) = parked.remove(&id) {
                    let _ = tx.send(resp);
                }
            }
        }
    }
}
