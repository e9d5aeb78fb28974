//! Consumer-group membership: a background task that joins a group, keeps
//! the member alive with heartbeats, and tells the consumer which
//! partitions to read.
//!
//! A [`Consumer`](crate::Consumer) with [`Membership::Group`](crate::Membership::Group)
//! starts the task with [`Consumer::subscribe`](crate::Consumer::subscribe).
//! The server assigns the partitions (range assignment, per topic); the
//! task and the consumer talk over two channels:
//!
//! 1. The task finds the group's coordinator (FindCoordinator), joins
//!    (JoinGroup, which waits for the whole group), reads the group's
//!    committed offsets of its new partitions, and sends the consumer an
//!    assignment. The consumer reads each partition from its committed
//!    offset, or where [`ConsumerConfig::offset_reset`](crate::ConsumerConfig::offset_reset)
//!    says when the group committed none.
//! 2. It heartbeats every [`GroupOptions::heartbeat_interval`] (a third of
//!    the session timeout by default) on the coordinator's connection.
//! 3. When a heartbeat says the group rebalances (a member joined, left or
//!    timed out) or that the member is no longer known, the task asks the
//!    consumer to give up every partition; the consumer answers, from
//!    inside its `poll_next`, with the positions it reached. With
//!    [`GroupOptions::auto_commit`] the task commits them (still as a
//!    member of the old generation), then joins again, so the partitions'
//!    next owners start where this one stopped. The rebalance waits for the
//!    consumer to be polled, up to the rebalance timeout, as Kafka's waits
//!    for `poll`.
//! 4. [`Consumer::close`](crate::Consumer::close) (or dropping the
//!    consumer) commits the positions (with auto-commit) and leaves the
//!    group, so the others rebalance at once rather than after the
//!    session timeout.
//!
//! Commits made by the application ([`Consumer::commit`](crate::Consumer::commit))
//! carry the member's generation and id; the server refuses those of a
//! generation the group has left (ILLEGAL_GENERATION).

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::client::{commit_outcome, commit_request, committed_outcome, Client};
use crate::conn::Conn;
use crate::error::Error;
use crate::proto::{self, ErrorCode};

/// How a consumer takes part in a group it joins
/// ([`Membership::Group`](crate::Membership::Group)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOptions {
    /// How long the member stays in the group without a heartbeat
    /// (default 10 s). The server allows `group.min.session.timeout.ms`
    /// (6 s by default) to `group.max.session.timeout.ms`.
    pub session_timeout: Duration,
    /// How long a rebalance waits for every member to join again, and so
    /// how long the consumer may go unpolled while one is under way
    /// (default 30 s).
    pub rebalance_timeout: Duration,
    /// Time between heartbeats; `None` for a third of the session timeout.
    pub heartbeat_interval: Option<Duration>,
    /// Commit the positions reached when partitions are given up
    /// (rebalance) and when the consumer closes or is dropped (default
    /// true). There is no periodic commit: call
    /// [`Consumer::commit`](crate::Consumer::commit) for that. A member the
    /// group removed (its session expired) can no longer commit, and
    /// without auto-commit a partition's next owner starts at the last
    /// offset the application committed: either way, records read since
    /// are read again.
    pub auto_commit: bool,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            heartbeat_interval: None,
            auto_commit: true,
        }
    }
}

impl GroupOptions {
    fn heartbeat_every(&self) -> Duration {
        self.heartbeat_interval
            .unwrap_or(self.session_timeout / 3)
            .max(Duration::from_millis(10))
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        let ms = |d: Duration| u32::try_from(d.as_millis()).ok();
        if ms(self.session_timeout).is_none_or(|m| m == 0)
            || ms(self.rebalance_timeout).is_none_or(|m| m == 0)
        {
            return Err(Error::Config(
                "the session and rebalance timeouts must be between 1 ms and 49 days".into(),
            ));
        }
        if self.heartbeat_every() >= self.session_timeout {
            return Err(Error::Config(
                "the heartbeat interval must be shorter than the session timeout".into(),
            ));
        }
        Ok(())
    }
}

/// `(topic, partition, next offset to read)`.
pub(crate) type Position = (String, u32, i64);

/// Where a newly assigned partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// The group's committed offset.
    At(i64),
    /// The group committed nothing: the consumer's offset reset decides.
    Reset,
    /// The committed offset could not be read now: read it while polling.
    Committed,
}

/// What the group task asks of the consumer.
#[derive(Debug)]
pub(crate) enum Change {
    /// Give up every partition and answer with the positions reached.
    Revoke(oneshot::Sender<Vec<Position>>),
    /// Read these partitions from now on.
    Assign(Vec<(String, u32, Start)>),
    /// The group refused the member in a way the application should know
    /// of (the task keeps trying).
    Failed(Error),
}

enum Command {
    /// Commit these (with auto-commit), leave, then answer.
    Leave {
        positions: Vec<Position>,
        done: Option<oneshot::Sender<Result<(), Error>>>,
    },
}

/// The member as its last join made it.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    generation: i32,
    coordinator: u32,
}

type Shared = Arc<Mutex<Option<Member>>>;

fn current(shared: &Shared) -> Option<Member> {
    shared
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

fn set(shared: &Shared, member: Option<Member>) {
    *shared.lock().unwrap_or_else(PoisonError::into_inner) = member;
}

/// The consumer's end of a group task. Dropping it makes the task leave
/// the group.
pub(crate) struct Group {
    name: String,
    client: Client,
    auto_commit: bool,
    changes: mpsc::UnboundedReceiver<Change>,
    commands: mpsc::UnboundedSender<Command>,
    member: Shared,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("name", &self.name)
            .field("member", &current(&self.member))
            .finish_non_exhaustive()
    }
}

impl Group {
    /// Starts the task that joins `name` with a subscription to `topics`.
    pub(crate) fn start(
        client: Client,
        name: String,
        topics: Vec<String>,
        options: GroupOptions,
    ) -> Result<Group, Error> {
        options.check()?;
        if topics.is_empty() || topics.iter().any(String::is_empty) {
            return Err(Error::Config("subscribe to one or more topic names".into()));
        }
        let (changes_tx, changes) = mpsc::unbounded_channel();
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let member = Shared::default();
        let task = Task {
            client: client.clone(),
            group: name.clone(),
            topics,
            options: options.clone(),
            changes: changes_tx,
            member: Arc::clone(&member),
            member_id: String::new(),
            coordinator: None,
            backoff: Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_secs(5),
            },
        };
        client.runtime().spawn(task.run(commands_rx));
        Ok(Group {
            name,
            client,
            auto_commit: options.auto_commit,
            changes,
            commands,
            member,
        })
    }

    /// The next change the task asks for; `Ready(None)` once the task ended.
    pub(crate) fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Option<Change>> {
        self.changes.poll_recv(cx)
    }

    /// Commits offsets as the member, on the coordinator's connection.
    pub(crate) async fn commit(&self, offsets: &[(&str, u32, i64)]) -> Result<(), Error> {
        let Some(member) = current(&self.member) else {
            return Err(Error::server(
                ErrorCode::REBALANCE_IN_PROGRESS,
                format!("the consumer is joining group {:?}", self.name),
            ));
        };
        commit_as(&self.client, &self.name, &member, offsets).await
    }

    /// Commits `positions` (with auto-commit) and leaves the group; the
    /// outcome of the commit.
    pub(crate) async fn leave(self, positions: Vec<Position>) -> Result<(), Error> {
        let (done, outcome) = oneshot::channel();
        let positions = if self.auto_commit {
            positions
        } else {
            Vec::new()
        };
        let sent = self.commands.send(Command::Leave {
            positions,
            done: Some(done),
        });
        if sent.is_err() {
            return Ok(());
        }
        outcome.await.unwrap_or(Ok(()))
    }

    /// The member as its last join made it, for offsets committed in a
    /// transaction: generation -1 and no id before the first join.
    pub(crate) fn metadata(&self) -> GroupMetadata {
        match current(&self.member) {
            Some(m) => GroupMetadata {
                group: self.name.clone(),
                member_id: m.id,
                generation: m.generation,
            },
            None => GroupMetadata::outside(&self.name),
        }
    }

    /// [`Group::leave`] without waiting (a consumer being dropped).
    pub(crate) fn leave_in_background(self, positions: Vec<Position>) {
        let positions = if self.auto_commit {
            positions
        } else {
            Vec::new()
        };
        let _ = self.commands.send(Command::Leave {
            positions,
            done: None,
        });
    }
}

async fn commit_as(
    client: &Client,
    group: &str,
    member: &Member,
    offsets: &[(&str, u32, i64)],
) -> Result<(), Error> {
    let mut request = commit_request(group, offsets);
    request.generation = member.generation;
    request.member_id = member.id.clone();
    let conn = client.node_conn(member.coordinator).await?;
    let answer = conn.call(request, client.request_timeout()).await?;
    commit_outcome(group, &answer)
}

fn commit_positions(
    client: &Client,
    group: &str,
    member: &Member,
    positions: &[Position],
) -> impl std::future::Future<Output = Result<(), Error>> + Send {
    let offsets: Vec<(String, u32, i64)> = positions.to_vec();
    let (client, group, member) = (client.clone(), group.to_owned(), member.clone());
    async move {
        let borrowed: Vec<(&str, u32, i64)> = offsets
            .iter()
            .map(|(t, p, o)| (t.as_str(), *p, *o))
            .collect();
        commit_as(&client, &group, &member, &borrowed).await
    }
}

/// How a spell of membership ended.
enum Ended {
    /// Join again.
    Rejoin,
    /// The consumer left or is gone.
    Stop,
}

struct Task {
    client: Client,
    group: String,
    topics: Vec<String>,
    options: GroupOptions,
    changes: mpsc::UnboundedSender<Change>,
    member: Shared,
    /// Empty until the first join answers, and after the group forgot it.
    member_id: String,
    coordinator: Option<u32>,
    backoff: Backoff,
}

/// Errors after which the coordinator must be found again.
fn lost_coordinator(e: &Error) -> bool {
    match e {
        Error::Server { code, .. } => matches!(
            *code,
            ErrorCode::NOT_COORDINATOR | ErrorCode::NOT_AVAILABLE | ErrorCode::TIMED_OUT
        ),
        _ => e.is_retriable(),
    }
}

/// The consumer's requests to the task.
type Commands = mpsc::UnboundedReceiver<Command>;

impl Task {
    async fn run(mut self, mut commands: Commands) {
        let mut failures = 0u32;
        loop {
            let joined = tokio::select! {
                biased;
                command = commands.recv() => return self.leave(command).await,
                joined = self.join() => joined,
            };
            let answer = match joined {
                Ok(answer) => answer,
                Err(e) => {
                    failures += 1;
                    let code = e.code();
                    let again_now = matches!(
                        code,
                        Some(ErrorCode::UNKNOWN_MEMBER)
                            | Some(ErrorCode::REBALANCE_IN_PROGRESS)
                            | Some(ErrorCode::ILLEGAL_GENERATION)
                    );
                    if lost_coordinator(&e) {
                        self.coordinator = None;
                    }
                    tracing::debug!(group = %self.group, error = %e, failures, "joining failed");
                    if !again_now && !e.is_retriable() && !lost_coordinator(&e) {
                        // the group refuses this member: say so, once a streak
                        if failures == 1 && self.changes.send(Change::Failed(e)).is_err() {
                            return self.leave(None).await;
                        }
                    }
                    if !again_now || failures > 3 {
                        let pause = tokio::time::sleep(self.backoff.jittered(failures));
                        tokio::select! {
                            biased;
                            command = commands.recv() => return self.leave(command).await,
                            () = pause => {}
                        }
                    }
                    continue;
                }
            };
            failures = 0;
            match self.follow(&mut commands, answer).await {
                Ended::Rejoin => continue,
                Ended::Stop => return,
            }
        }
    }

    /// The coordinator's connection, finding the coordinator first if it
    /// is not known.
    async fn coordinator_conn(&mut self) -> Result<(u32, Arc<Conn>), Error> {
        let node = match self.coordinator {
            Some(node) => node,
            None => {
                let node = self.client.find_coordinator(&self.group).await?;
                self.coordinator = Some(node);
                node
            }
        };
        match self.client.node_conn(node).await {
            Ok(conn) => Ok((node, conn)),
            Err(e) => {
                self.coordinator = None;
                Err(e)
            }
        }
    }

    /// One JoinGroup: the generation and this member's partitions.
    async fn join(&mut self) -> Result<proto::JoinGroupResponse, Error> {
        let (_, conn) = self.coordinator_conn().await?;
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let request = proto::JoinGroup {
            correlation: 0,
            group: self.group.clone(),
            member_id: self.member_id.clone(),
            topics: self.topics.clone(),
            session_timeout_ms: ms(self.options.session_timeout),
            rebalance_timeout_ms: ms(self.options.rebalance_timeout),
        };
        // the server waits for the group's join and sync phases, each
        // bounded by the rebalance timeout
        let patience = self.options.rebalance_timeout * 2 + self.client.request_timeout();
        let answer = conn.call(request, patience).await?;
        match answer.error {
            ErrorCode::NONE => Ok(answer),
            code => {
                if code == ErrorCode::UNKNOWN_MEMBER {
                    self.member_id.clear();
                } else if !answer.member_id.is_empty() {
                    self.member_id = answer.member_id;
                }
                Err(Error::server(
                    code,
                    format!("joining group {:?}", self.group),
                ))
            }
        }
    }

    /// Hands the consumer its partitions, then heartbeats until the
    /// membership ends.
    async fn follow(&mut self, commands: &mut Commands, answer: proto::JoinGroupResponse) -> Ended {
        let Some(coordinator) = self.coordinator else {
            return Ended::Rejoin;
        };
        self.member_id = answer.member_id.clone();
        let member = Member {
            id: answer.member_id,
            generation: answer.generation,
            coordinator,
        };
        tracing::debug!(group = %self.group, member = %member.id, generation = member.generation,
            assignment = ?answer.assignment, "joined");
        set(&self.member, Some(member.clone()));
        let assigned: Vec<(String, u32)> = answer
            .assignment
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic;
                t.partitions.into_iter().map(move |p| (topic.clone(), p))
            })
            .collect();
        let starts = self.starts(&assigned).await;
        if self.changes.send(Change::Assign(starts)).is_err() {
            self.leave(None).await;
            return Ended::Stop;
        }
        self.heartbeat_until_rebalance(commands, member).await
    }

    /// Where each assigned partition starts: the group's committed offset,
    /// asked of the coordinator, where the members commit (a server reads
    /// its own writes; another one's copy of the offsets may lag).
    async fn starts(&mut self, assigned: &[(String, u32)]) -> Vec<(String, u32, Start)> {
        if assigned.is_empty() {
            return Vec::new();
        }
        // warm the routes, so that the first fetches go out at once
        let mut topics: Vec<&str> = assigned.iter().map(|(t, _)| t.as_str()).collect();
        topics.dedup();
        for t in topics {
            let _ = self.client.route(t).await;
        }
        let pairs: Vec<(&str, u32)> = assigned.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        let request = proto::FetchOffsets {
            correlation: 0,
            group: self.group.clone(),
            partitions: assigned.to_vec(),
        };
        let mut found = Err(Error::Closed);
        for attempt in 1..=3 {
            found = match self.coordinator_conn().await {
                Ok((_, conn)) => match conn
                    .call(request.clone(), self.client.request_timeout())
                    .await
                {
                    Ok(answer) => committed_outcome(&self.group, &pairs, &answer),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            match &found {
                Err(e) if e.is_retriable() => {
                    tokio::time::sleep(self.backoff.jittered(attempt)).await;
                }
                _ => break,
            }
        }
        assigned
            .iter()
            .enumerate()
            .map(|(i, (t, p))| {
                let start = match &found {
                    Ok(offsets) => match offsets.get(i).copied().flatten() {
                        Some(o) => Start::At(o),
                        None => Start::Reset,
                    },
                    Err(e) => {
                        tracing::debug!(error = %e, "reading committed offsets failed; the consumer reads them");
                        Start::Committed
                    }
                };
                (t.clone(), *p, start)
            })
            .collect()
    }

    /// A heartbeat on the coordinator's connection.
    async fn heartbeat(&mut self, member: &Member) -> Result<(), Error> {
        let (_, conn) = self.coordinator_conn().await?;
        let answer = conn
            .call(
                proto::Heartbeat {
                    correlation: 0,
                    group: self.group.clone(),
                    member_id: member.id.clone(),
                    generation: member.generation,
                },
                self.client
                    .request_timeout()
                    .min(self.options.session_timeout),
            )
            .await?;
        match answer.0.error {
            ErrorCode::NONE => Ok(()),
            code => Err(Error::server(
                code,
                format!("heartbeat to group {:?}", self.group),
            )),
        }
    }

    async fn heartbeat_until_rebalance(
        &mut self,
        commands: &mut Commands,
        member: Member,
    ) -> Ended {
        let every = self.options.heartbeat_every();
        let mut last_ok = Instant::now();
        let mut failures = 0u32;
        loop {
            let wait = if failures == 0 {
                every
            } else {
                self.backoff.jittered(failures).min(every)
            };
            tokio::select! {
                biased;
                command = commands.recv() => {
                    self.leave(command).await;
                    return Ended::Stop;
                }
                () = tokio::time::sleep(wait) => {}
            }
            let outcome = self.heartbeat(&member).await;
            let Err(e) = outcome else {
                last_ok = Instant::now();
                failures = 0;
                continue;
            };
            match e.code() {
                // the member's generation is over: give the partitions up
                // (committing their positions while still a member), join again
                Some(ErrorCode::REBALANCE_IN_PROGRESS) => {
                    return self.revoke(commands, &member, true).await
                }
                Some(ErrorCode::ILLEGAL_GENERATION) => {
                    return self.revoke(commands, &member, false).await
                }
                Some(ErrorCode::UNKNOWN_MEMBER) => {
                    self.member_id.clear();
                    return self.revoke(commands, &member, false).await;
                }
                _ => {}
            }
            failures += 1;
            if lost_coordinator(&e) {
                self.coordinator = None;
            }
            tracing::debug!(group = %self.group, error = %e, failures, "heartbeat failed");
            if last_ok.elapsed() >= self.options.session_timeout {
                // the session is over by now: the group has moved on
                return self.revoke(commands, &member, false).await;
            }
        }
    }

    /// Takes every partition back from the consumer, commits where it got
    /// to (with auto-commit, when the member may still commit), and ends
    /// this membership.
    async fn revoke(
        &mut self,
        commands: &mut Commands,
        member: &Member,
        may_commit: bool,
    ) -> Ended {
        let (reply, positions) = oneshot::channel();
        if self.changes.send(Change::Revoke(reply)).is_err() {
            self.leave(None).await;
            return Ended::Stop;
        }
        // the consumer answers when next polled; keep the session alive
        // meanwhile, for up to the rebalance timeout
        let deadline = Instant::now() + self.options.rebalance_timeout;
        let every = self.options.heartbeat_every();
        let mut positions = std::pin::pin!(positions);
        let reached = loop {
            tokio::select! {
                biased;
                command = commands.recv() => {
                    self.leave(command).await;
                    return Ended::Stop;
                }
                reached = &mut positions => break reached.ok(),
                () = tokio::time::sleep_until(deadline) => break None,
                () = tokio::time::sleep(every) => {
                    let _ = self.heartbeat(member).await;
                }
            }
        };
        if let Some(reached) = reached.filter(|r| may_commit && !r.is_empty()) {
            if self.options.auto_commit {
                if let Err(e) = commit_positions(&self.client, &self.group, member, &reached).await
                {
                    tracing::warn!(group = %self.group, error = %e, "committing on rebalance failed");
                }
            }
        }
        set(&self.member, None);
        Ended::Rejoin
    }

    /// Commits what the consumer reached (the positions of a Leave),
    /// leaves the group and answers the command.
    async fn leave(&mut self, command: Option<Command>) {
        let (positions, done) = match command {
            Some(Command::Leave { positions, done }) => (positions, done),
            None => (Vec::new(), None),
        };
        let mut outcome = Ok(());
        if let Some(member) = current(&self.member) {
            if !positions.is_empty() {
                outcome = commit_positions(&self.client, &self.group, &member, &positions).await;
            }
        }
        set(&self.member, None);
        if !self.member_id.is_empty() {
            let left = async {
                let (_, conn) = self.coordinator_conn().await?;
                let answer = conn
                    .call(
                        proto::LeaveGroup {
                            correlation: 0,
                            group: self.group.clone(),
                            member_id: self.member_id.clone(),
                        },
                        self.client.request_timeout(),
                    )
                    .await?;
                match answer.0.error {
                    ErrorCode::NONE | ErrorCode::UNKNOWN_MEMBER => Ok(()),
                    code => Err(Error::server(code, "leaving the group")),
                }
            }
            .await;
            if let Err(e) = left {
                tracing::debug!(group = %self.group, error = %e, "leaving the group failed; the session expires instead");
            }
        }
        if let Some(done) = done {
            let _ = done.send(outcome);
        }
    }
}

/// A consumer's group as a transaction commits offsets for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    pub group: String,
    /// Empty outside group membership.
    pub member_id: String,
    /// -1 outside group membership.
    pub generation: i32,
}

impl GroupMetadata {
    /// A group committed to from outside its membership.
    pub fn outside(group: &str) -> GroupMetadata {
        GroupMetadata {
            group: group.to_owned(),
            member_id: String::new(),
            generation: -1,
        }
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
