//! A transactional producer's dealings with the coordinator of its
//! transactional id: its producer id and epoch, the partitions and groups
//! its transaction covers, and the transaction's end.
//!
//! The coordinator is the one Kafka clients of the same transactional id
//! use: the records, fencing and timeouts are shared.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::backoff::Backoff;
use crate::client::Client;
use crate::conn::Call;
use crate::error::Error;
use crate::proto::{self, ErrorCode};

use super::accumulator::{ProducerId, Tp};

/// Where a transactional producer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// `init_transactions` not called (or failed).
    Uninitialized,
    /// Between transactions.
    Ready,
    /// Inside `begin_transaction` .. `commit`/`abort`.
    InTransaction,
    /// A newer producer of the id exists: nothing more can be done.
    Fenced,
}

struct State {
    phase: Phase,
    producer: Option<ProducerId>,
    /// Partitions added to the current transaction.
    added: HashSet<Tp>,
    /// Whether the coordinator knows the transaction (something was added).
    started: bool,
    /// The first send of the transaction that failed.
    failed: Option<Error>,
}

/// The answers of the coordinator's operations: their error and message.
pub(super) trait TxnAnswer {
    fn outcome(&self) -> (ErrorCode, &str);
}

impl TxnAnswer for proto::InitTxnResponse {
    fn outcome(&self) -> (ErrorCode, &str) {
        (self.error, &self.message)
    }
}

macro_rules! txn_answers {
    ($($t:ident),*) => {
        $(impl TxnAnswer for proto::$t {
            fn outcome(&self) -> (ErrorCode, &str) {
                (self.0.error, &self.0.message)
            }
        })*
    };
}
txn_answers!(
    AddTxnPartitionsResponse,
    AddTxnOffsetsResponse,
    TxnOffsetCommitResponse,
    EndTxnResponse
);

pub(super) struct Txn {
    pub(super) id: String,
    timeout: Duration,
    client: Client,
    backoff: Backoff,
    retries: u32,
    state: Mutex<State>,
    coordinator: Mutex<Option<u32>>,
}

/// The error a coordinator's code stands for.
fn txn_error(code: ErrorCode, message: &str) -> Error {
    match code {
        ErrorCode::PRODUCER_FENCED => Error::ProducerFenced(format!(
            "{message}: a newer producer of the transactional id took over, or the coordinator \
             aborted the transaction when it outlived its timeout"
        )),
        ErrorCode::INVALID_TXN_STATE => Error::TransactionState(message.to_owned()),
        _ => Error::server(code, message),
    }
}

impl Txn {
    pub(super) fn new(
        id: String,
        timeout: Duration,
        client: Client,
        backoff: Backoff,
        retries: u32,
    ) -> Txn {
        Txn {
            id,
            timeout,
            client,
            backoff,
            retries,
            state: Mutex::new(State {
                phase: Phase::Uninitialized,
                producer: None,
                added: HashSet::new(),
                started: false,
                failed: None,
            }),
            coordinator: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn phase(&self) -> Phase {
        self.lock().phase
    }

    /// Checks the phase is `want`, or says why not.
    pub(super) fn require(&self, want: Phase, doing: &str) -> Result<(), Error> {
        match self.phase() {
            p if p == want => Ok(()),
            Phase::Fenced => Err(Error::ProducerFenced(format!(
                "a newer producer of transactional id {:?} exists; cannot {doing}",
                self.id
            ))),
            Phase::Uninitialized => Err(Error::TransactionState(format!(
                "cannot {doing} before init_transactions"
            ))),
            Phase::Ready => Err(Error::TransactionState(format!(
                "cannot {doing} outside a transaction (begin_transaction first)"
            ))),
            Phase::InTransaction => Err(Error::TransactionState(format!(
                "cannot {doing} inside a transaction (commit or abort it first)"
            ))),
        }
    }

    pub(super) fn set_phase(&self, phase: Phase) {
        self.lock().phase = phase;
    }

    /// Notes a failed send of the current transaction: committing it is
    /// refused then, and a fenced producer stays fenced.
    pub(super) fn send_failed(&self, e: &Error) {
        let mut s = self.lock();
        if matches!(e, Error::ProducerFenced(_)) || e.code() == Some(ErrorCode::PRODUCER_FENCED) {
            s.phase = Phase::Fenced;
        }
        s.failed.get_or_insert_with(|| e.clone());
    }

    /// The partitions among `tps` not added to the transaction yet.
    pub(super) fn missing(&self, tps: impl Iterator<Item = Tp>) -> Vec<Tp> {
        let s = self.lock();
        let mut out: Vec<Tp> = tps.filter(|tp| !s.added.contains(tp)).collect();
        out.sort();
        out.dedup();
        out
    }

    /// The producer id and epoch the coordinator knows this producer by,
    /// once initialised.
    pub(super) fn current(&self) -> Option<(i64, i16)> {
        self.lock().producer.map(|p| (p.id, p.epoch))
    }

    fn producer(&self) -> Result<proto::TxnProducer, Error> {
        let s = self.lock();
        let p = s.producer.ok_or_else(|| {
            Error::TransactionState("the producer has no producer id: init_transactions".into())
        })?;
        Ok(proto::TxnProducer {
            transactional_id: self.id.clone(),
            producer_id: p.id,
            producer_epoch: p.epoch,
        })
    }

    async fn coordinator(&self) -> Result<u32, Error> {
        let cached = *self.coordinator.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = cached {
            return Ok(node);
        }
        let answer = self
            .client
            .call_any(proto::FindTxnCoordinator {
                correlation: 0,
                transactional_id: self.id.clone(),
            })
            .await?;
        if answer.error != ErrorCode::NONE {
            return Err(Error::server(
                answer.error,
                format!("finding the coordinator of transactional id {:?}", self.id),
            ));
        }
        self.client.learn_node(
            answer.node_id,
            crate::bootstrap::Address {
                host: answer.host,
                port: answer.port,
            },
        );
        *self.coordinator.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer.node_id);
        Ok(answer.node_id)
    }

    /// Sends a request to the coordinator, finding it again and retrying
    /// while the answer says to (another coordinator, a previous
    /// transaction still completing, connection trouble).
    async fn call<R>(&self, request: R) -> Result<R::Response, Error>
    where
        R: Call + Clone,
        R::Response: TxnAnswer,
    {
        let mut attempt = 0;
        let started = std::time::Instant::now();
        loop {
            let result = async {
                let node = self.coordinator().await?;
                let conn = self.client.node_conn(node).await?;
                conn.call(request.clone(), self.client.request_timeout())
                    .await
            }
            .await;
            let error = match result {
                Ok(answer) => {
                    let (code, message) = answer.outcome();
                    if code == ErrorCode::NONE {
                        return Ok(answer);
                    }
                    txn_error(code, message)
                }
                Err(e) => e,
            };
            // the last transaction is still being completed (its markers
            // wait for a partition's new leader after a crash): waited for
            // as long as a transaction may last, not a count of tries
            let completing = error.code() == Some(ErrorCode::CONCURRENT_TRANSACTIONS)
                && started.elapsed() < self.timeout;
            if !error.is_retriable() || (attempt >= self.retries && !completing) {
                return Err(error);
            }
            if matches!(
                error.code(),
                Some(ErrorCode::NOT_COORDINATOR | ErrorCode::NOT_AVAILABLE) | None
            ) {
                *self.coordinator.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
            tokio::time::sleep(self.backoff.jittered(attempt)).await;
            attempt += 1;
        }
    }

    fn fenced_if(&self, e: Error) -> Error {
        if matches!(e, Error::ProducerFenced(_)) {
            self.set_phase(Phase::Fenced);
        }
        e
    }

    /// Takes the id's producer id and a new epoch (fencing older ones); a
    /// transaction the previous epoch left open is ended by the coordinator.
    pub(super) async fn init(&self) -> Result<ProducerId, Error> {
        let answer = self
            .call(proto::InitTxn {
                correlation: 0,
                transactional_id: self.id.clone(),
                timeout_ms: u32::try_from(self.timeout.as_millis()).unwrap_or(u32::MAX),
            })
            .await
            .map_err(|e| self.fenced_if(e))?;
        let producer = ProducerId {
            id: answer.producer_id,
            epoch: answer.producer_epoch,
        };
        let mut s = self.lock();
        s.producer = Some(producer);
        s.phase = Phase::Ready;
        s.added.clear();
        s.started = false;
        s.failed = None;
        Ok(producer)
    }

    /// Adds partitions to the transaction before batches are sent to them.
    pub(super) async fn add_partitions(&self, tps: Vec<Tp>) -> Result<(), Error> {
        if tps.is_empty() {
            return Ok(());
        }
        let mut topics: Vec<(String, Vec<u32>)> = Vec::new();
        for (topic, partition) in &tps {
            match topics.iter_mut().find(|(t, _)| **t == **topic) {
                Some((_, ps)) => ps.push(*partition),
                None => topics.push((topic.to_string(), vec![*partition])),
            }
        }
        self.call(proto::AddTxnPartitions {
            correlation: 0,
            producer: self.producer()?,
            topics,
        })
        .await
        .map_err(|e| self.fenced_if(e))?;
        let mut s = self.lock();
        s.started = true;
        s.added.extend(tps);
        Ok(())
    }

    /// Adds `group` to the transaction, then hands its offsets to the
    /// group's coordinator, which holds them until the transaction ends.
    pub(super) async fn send_offsets(
        &self,
        offsets: &[(&str, u32, i64)],
        member: &crate::consumer::GroupMetadata,
    ) -> Result<(), Error> {
        let group = member.group.as_str();
        let producer = self.producer()?;
        self.call(proto::AddTxnOffsets {
            correlation: 0,
            producer: producer.clone(),
            group: group.to_owned(),
        })
        .await
        .map_err(|e| self.fenced_if(e))?;
        self.lock().started = true;
        let request = proto::TxnOffsetCommit {
            correlation: 0,
            producer,
            group: group.to_owned(),
            generation: member.generation,
            member_id: member.member_id.clone(),
            offsets: offsets
                .iter()
                .map(|&(t, p, o)| (t.to_owned(), p, o))
                .collect(),
        };
        let mut attempt = 0;
        loop {
            let result = async {
                let node = self.client.find_coordinator(group).await?;
                let conn = self.client.node_conn(node).await?;
                conn.call(request.clone(), self.client.request_timeout())
                    .await
            }
            .await;
            let error = match result {
                Ok(answer) => {
                    let (code, message) = answer.outcome();
                    if code == ErrorCode::NONE {
                        return Ok(());
                    }
                    txn_error(code, message)
                }
                Err(e) => e,
            };
            if !error.is_retriable() || attempt >= self.retries {
                return Err(self.fenced_if(error));
            }
            tokio::time::sleep(self.backoff.jittered(attempt)).await;
            attempt += 1;
        }
    }

    /// Ends the transaction (once every send of it is answered). A commit
    /// is refused while a send of it failed: abort then. Returns whether a
    /// new producer epoch is needed (an aborted transaction with a failed
    /// send: the broker may hold part of a batch's sequence).
    pub(super) async fn end(&self, commit: bool) -> Result<bool, Error> {
        let (started, failed) = {
            let s = self.lock();
            (s.started, s.failed.clone())
        };
        if commit {
            if let Some(e) = failed {
                return Err(Error::TransactionState(format!(
                    "a send of the transaction failed ({e}): abort the transaction"
                )));
            }
        }
        if started {
            self.call(proto::EndTxn {
                correlation: 0,
                producer: self.producer()?,
                commit,
            })
            .await
            .map_err(|e| self.fenced_if(e))?;
        }
        let mut s = self.lock();
        s.phase = Phase::Ready;
        s.added.clear();
        s.started = false;
        Ok(s.failed.take().is_some())
    }
}

/// Shared between the producer handle and its background task.
pub(super) type TxnRef = Arc<Txn>;
