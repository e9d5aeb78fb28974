//! The transaction coordinator's records (see [`crate::transactions`]).
//! Every change names the producer (id and epoch) it comes from and is
//! refused once a newer producer took the transactional id over, so a
//! zombie producer or coordinator cannot move a transaction it lost.

use std::sync::Arc;

use super::txn_end::LAST_PRODUCER_EPOCH;
use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::transactions::{
    TxnPartition, TxnRecord, TxnRefusal, TxnState, MAX_TRANSACTION_TIMEOUT_MS,
};
use crate::types::{MetaEvent, OffsetCommit};

fn refuse(refusal: TxnRefusal, reason: impl Into<String>) -> MetaError {
    MetaError::Transaction {
        refusal,
        reason: reason.into(),
    }
}

impl MetaState {
    /// A transactional id's record.
    pub fn transaction(&self, transactional_id: &str) -> Option<&TxnRecord> {
        self.transactions.get(transactional_id).map(Arc::as_ref)
    }

    /// Every transactional id's record, by id.
    pub fn transactions(&self) -> impl Iterator<Item = &TxnRecord> {
        self.transactions.values().map(Arc::as_ref)
    }

    /// See [`crate::Metastore::set_producer_epoch_locally`].
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn set_producer_epoch(&mut self, transactional_id: &str, epoch: i16) -> bool {
        match self.transactions.get_mut(transactional_id) {
            Some(r) => {
                Arc::make_mut(r).producer_epoch = epoch;
                true
            }
            None => false,
        }
    }

    fn take_producer_id(&mut self) -> Result<i64, MetaError> {
        let id = self.next_producer_id;
        self.next_producer_id = id.checked_add(1).ok_or(MetaError::ProducerIdsExhausted)?;
        Ok(id)
    }

    /// The record of `transactional_id`, if `(producer_id, epoch)` is its
    /// current producer.
    fn txn_of(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&mut TxnRecord, MetaError> {
        let record = self
            .transactions
            .get_mut(transactional_id)
            .map(Arc::make_mut)
            .ok_or_else(|| {
                refuse(
                    TxnRefusal::InvalidProducerIdMapping,
                    format!("transactional id '{transactional_id}' has no producer; call InitProducerId first"),
                )
            })?;
        if record.producer_id != producer_id {
            return Err(refuse(
                TxnRefusal::InvalidProducerIdMapping,
                format!(
                    "transactional id '{transactional_id}' belongs to producer {}, not {producer_id}",
                    record.producer_id
                ),
            ));
        }
        if producer_epoch < record.producer_epoch {
            return Err(refuse(
                TxnRefusal::ProducerFenced,
                format!(
                    "producer {producer_id} at epoch {producer_epoch} was fenced by epoch {} of '{transactional_id}'",
                    record.producer_epoch
                ),
            ));
        }
        if producer_epoch > record.producer_epoch {
            return Err(refuse(
                TxnRefusal::InvalidProducerEpoch,
                format!(
                    "epoch {producer_epoch} of producer {producer_id} is ahead of '{transactional_id}' (epoch {})",
                    record.producer_epoch
                ),
            ));
        }
        Ok(record)
    }

    /// InitProducerId with a transactional id: a new producer id (first
    /// time), or the next epoch of the id's producer, which fences the
    /// previous one. An ongoing transaction is aborted first: the record
    /// moves to PrepareAbort under a new epoch and is answered as it is,
    /// for the coordinator to write the markers and ask again; so is a
    /// transaction already being completed. `expected` is the producer
    /// and epoch a client recovering from an error names (KIP-360).
    pub(super) fn init_transaction(
        &mut self,
        now_ms: i64,
        transactional_id: String,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> CommandResult {
        if transactional_id.is_empty() {
            return Err(MetaError::invalid_request(
                "a transactional id must not be empty",
            ));
        }
        if !(1..=MAX_TRANSACTION_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(refuse(
                TxnRefusal::InvalidTransactionTimeout,
                format!(
                    "transaction timeout {timeout_ms} ms is outside 1..={MAX_TRANSACTION_TIMEOUT_MS}"
                ),
            ));
        }
        let Some(current) = self.transactions.get(&transactional_id).map(Arc::as_ref) else {
            let producer_id = self.take_producer_id()?;
            let record = TxnRecord {
                transactional_id: transactional_id.clone(),
                producer_id,
                producer_epoch: 0,
                last_producer_epoch: None,
                timeout_ms,
                state: TxnState::Empty,
                partitions: Default::default(),
                groups: Default::default(),
                pending_offsets: Default::default(),
                pending_connect: Default::default(),
                started_ms: now_ms,
                updated_ms: now_ms,
                epoch_bumps: false,
                next_producer_id: None,
                previous_producer_id: None,
            };
            self.transactions
                .insert(transactional_id, Arc::new(record.clone()));
            return Ok(CommandOutput::Transaction(record));
        };
        if let Some((pid, epoch)) = expected {
            let known = pid == current.producer_id
                && (epoch == current.producer_epoch || Some(epoch) == current.last_producer_epoch);
            if !known {
                return Err(refuse(
                    TxnRefusal::ProducerFenced,
                    format!(
                        "producer {pid} epoch {epoch} is not the current producer of '{transactional_id}' ({} epoch {})",
                        current.producer_id, current.producer_epoch
                    ),
                ));
            }
        }
        let needs_new_id = current.producer_epoch >= LAST_PRODUCER_EPOCH;
        let fresh_id = match (current.state, needs_new_id) {
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, true) => {
                Some(self.take_producer_id()?)
            }
            _ => None,
        };
        let record = self
            .transactions
            .get_mut(&transactional_id)
            .map(Arc::make_mut)
            .ok_or_else(|| MetaError::invalid_request("the transaction vanished"))?;
        record.updated_ms = now_ms;
        match record.state {
            TxnState::Ongoing => {
                // fence the running producer and abort its transaction; an
                // EndTxn of the fenced producer is no retry of this abort
                record.last_producer_epoch = Some(record.producer_epoch);
                record.producer_epoch = record.producer_epoch.saturating_add(1);
                record.state = TxnState::PrepareAbort;
                record.timeout_ms = timeout_ms;
                record.epoch_bumps = false;
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {}
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                match fresh_id {
                    Some(id) => {
                        record.producer_id = id;
                        record.producer_epoch = 0;
                    }
                    None => record.producer_epoch += 1,
                }
                record.last_producer_epoch = None;
                record.previous_producer_id = None;
                record.epoch_bumps = false;
                record.state = TxnState::Empty;
                record.timeout_ms = timeout_ms;
                record.partitions.clear();
                record.groups.clear();
                record.pending_offsets.clear();
                record.pending_connect.clear();
                record.started_ms = now_ms;
            }
        }
        Ok(CommandOutput::Transaction(record.clone()))
    }

    /// Opens the transaction if none is ongoing; refused while the last
    /// one is still being completed. `implicit`: opened by a write or an
    /// offset commit of a client on transaction version 2.
    fn begin(record: &mut TxnRecord, now_ms: i64, implicit: bool) -> Result<(), MetaError> {
        match record.state {
            TxnState::Ongoing => {
                record.epoch_bumps |= implicit;
                Ok(())
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => Err(refuse(
                TxnRefusal::ConcurrentTransactions,
                format!(
                    "the last transaction of '{}' is still being completed",
                    record.transactional_id
                ),
            )),
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                record.state = TxnState::Ongoing;
                record.partitions.clear();
                record.groups.clear();
                record.pending_offsets.clear();
                record.pending_connect.clear();
                record.started_ms = now_ms;
                record.epoch_bumps = implicit;
                record.previous_producer_id = None;
                Ok(())
            }
        }
    }

    pub(super) fn add_txn_partitions(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        partitions: Vec<TxnPartition>,
        implicit: bool,
    ) -> CommandResult {
        for p in &partitions {
            let known = self
                .topic(&p.topic)
                .is_some_and(|t| t.partition(p.partition).is_some());
            if !known {
                return Err(MetaError::UnknownPartition {
                    topic: p.topic.clone(),
                    partition: p.partition,
                });
            }
        }
        let record = self.txn_of(transactional_id, producer_id, producer_epoch)?;
        Self::begin(record, now_ms, implicit)?;
        record.partitions.extend(partitions);
        record.updated_ms = now_ms;
        Ok(CommandOutput::Transaction(record.clone()))
    }

    pub(super) fn add_txn_group(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        group: String,
    ) -> CommandResult {
        if group.is_empty() {
            return Err(MetaError::InvalidGroupId {
                reason: "the group id is empty".to_owned(),
            });
        }
        let record = self.txn_of(transactional_id, producer_id, producer_epoch)?;
        Self::begin(record, now_ms, false)?;
        record.groups.insert(group);
        record.updated_ms = now_ms;
        Ok(CommandOutput::Transaction(record.clone()))
    }

    /// TxnOffsetCommit: offsets held in the transaction until it commits.
    /// One result per offset, in order. `implicit` (TxnOffsetCommit v5)
    /// adds the group to the transaction, opening it if need be.
    pub(super) fn txn_offset_commit(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        group: String,
        offsets: Vec<OffsetCommit>,
        implicit: bool,
    ) -> CommandResult {
        let checks: Vec<Result<(), MetaError>> =
            offsets.iter().map(|c| self.check_offset(c)).collect();
        let record = self.txn_of(transactional_id, producer_id, producer_epoch)?;
        if implicit {
            Self::begin(record, now_ms, true)?;
            record.groups.insert(group.clone());
        }
        if record.state != TxnState::Ongoing || !record.groups.contains(&group) {
            return Err(refuse(
                TxnRefusal::InvalidTxnState,
                format!(
                    "group '{group}' was not added to the ongoing transaction of '{transactional_id}' (AddOffsetsToTxn first)"
                ),
            ));
        }
        let pending = record.pending_offsets.entry(group).or_default();
        for (mut c, check) in offsets.into_iter().zip(&checks) {
            if check.is_ok() {
                if c.commit_time_ms <= 0 {
                    c.commit_time_ms = now_ms;
                }
                pending.retain(|p| p.topic != c.topic || p.partition != c.partition);
                pending.push(c);
            }
        }
        record.updated_ms = now_ms;
        Ok(CommandOutput::OffsetResults(checks))
    }

    /// EndTxn: the outcome is logged (PrepareCommit or PrepareAbort) before
    /// any marker is written. A retry of the same outcome answers the record
    /// as it stands; the other outcome is refused. With `bump_epoch` (EndTxn
    /// v5, transaction version 2) the epoch moves on with the outcome (see
    /// [`super::txn_end`]).
    pub(super) fn end_transaction(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        bump_epoch: bool,
    ) -> CommandResult {
        let current = self.transactions.get(transactional_id).ok_or_else(|| {
            refuse(
                TxnRefusal::InvalidProducerIdMapping,
                format!("transactional id '{transactional_id}' has no producer; call InitProducerId first"),
            )
        })?;
        let new_producer_id = match super::txn_end::plan(current, producer, commit, bump_epoch)? {
            super::txn_end::Step::Answer => {
                return Ok(CommandOutput::Transaction(current.as_ref().clone()))
            }
            super::txn_end::Step::Prepare { new_producer_id } => new_producer_id,
        };
        let fresh_id = if new_producer_id {
            Some(self.take_producer_id()?)
        } else {
            None
        };
        let record = self
            .transactions
            .get_mut(transactional_id)
            .map(Arc::make_mut)
            .ok_or_else(|| MetaError::invalid_request("the transaction vanished"))?;
        super::txn_end::prepare(record, now_ms, commit, bump_epoch, fresh_id);
        Ok(CommandOutput::Transaction(record.clone()))
    }

    /// Aborts a transaction that outlived its timeout (judged on the
    /// metastore leader's clock, `now_ms`): the producer's epoch is bumped,
    /// which fences it, and the record moves to PrepareAbort.
    pub(super) fn expire_transaction(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
    ) -> CommandResult {
        let record = self.txn_of(transactional_id, producer_id, producer_epoch)?;
        let age = now_ms.saturating_sub(record.started_ms);
        if record.state != TxnState::Ongoing || age < i64::from(record.timeout_ms) {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "the transaction of '{transactional_id}' is {} and {age} ms old (timeout {} ms)",
                    record.state.name(),
                    record.timeout_ms
                ),
            });
        }
        record.last_producer_epoch = Some(record.producer_epoch);
        record.producer_epoch = record.producer_epoch.saturating_add(1);
        record.state = TxnState::PrepareAbort;
        record.updated_ms = now_ms;
        // the expired producer's late EndTxn is fenced, not taken for a retry
        record.epoch_bumps = false;
        Ok(CommandOutput::Transaction(record.clone()))
    }

    /// Every partition holds the prepared outcome's marker: the transaction
    /// is complete and, on commit, its offsets become the groups' committed
    /// offsets in the same step. Completing one already complete answers
    /// the record.
    pub(super) fn complete_transaction(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let done = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        // completed already, and moved to the producer id it took then
        if let Some(r) = self.transaction(transactional_id) {
            if r.state == done && r.previous_producer_id == Some(producer_id) {
                return Ok(CommandOutput::Transaction(r.clone()));
            }
        }
        let record = self.txn_of(transactional_id, producer_id, producer_epoch)?;
        if record.state == done {
            return Ok(CommandOutput::Transaction(record.clone()));
        }
        if record.state.preparing() != Some(commit) {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "the transaction of '{transactional_id}' is {}, not preparing to {}",
                    record.state.name(),
                    if commit { "commit" } else { "abort" }
                ),
            });
        }
        record.state = done;
        record.updated_ms = now_ms;
        record.partitions.clear();
        record.groups.clear();
        if let Some(next) = record.next_producer_id.take() {
            // the exhausted epoch's markers are written: the client goes
            // on as the new producer id, at epoch 0
            record.previous_producer_id = Some(record.producer_id);
            record.producer_id = next;
            record.producer_epoch = 0;
            record.last_producer_epoch = None;
        }
        let offsets = std::mem::take(&mut record.pending_offsets);
        let source_offsets = std::mem::take(&mut record.pending_connect);
        let answer = record.clone();
        if commit {
            for (group, offsets) in offsets {
                // checked when they were added; a partition deleted since is
                // skipped, as in a plain commit
                self.commit_offsets(now_ms, group, offsets, events)?;
            }
            for (connector, offsets) in source_offsets {
                // the records they describe are committed: whatever the
                // connector's generation now, they are where it goes on from
                // (a connector deleted since has nowhere to keep them)
                self.connect.commit_transactional(&connector, offsets);
            }
        }
        Ok(CommandOutput::Transaction(answer))
    }

    /// An exactly-once source task's offsets, held in its ongoing
    /// transaction until it commits (KIP-618). The connector must exist;
    /// the task's generation is checked by its fencing (each task is the
    /// only producer of its transactional id).
    pub(super) fn txn_connect_offsets(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        connector: String,
        offsets: Vec<(String, Option<String>)>,
    ) -> CommandResult {
        if self.connect.connector(&connector).is_none() {
            return Err(MetaError::Connect {
                status: 404,
                message: format!("Connector {connector} not found"),
            });
        }
        let record = self.txn_of(transactional_id, producer_id, producer_epoch)?;
        if record.state != TxnState::Ongoing {
            return Err(refuse(
                TxnRefusal::InvalidTxnState,
                format!(
                    "'{transactional_id}' has no ongoing transaction to hold source offsets (it is {})",
                    record.state.name()
                ),
            ));
        }
        let pending = record.pending_connect.entry(connector).or_default();
        for (partition, offset) in offsets {
            pending.retain(|(p, _)| *p != partition);
            pending.push((partition, offset));
        }
        record.updated_ms = now_ms;
        Ok(CommandOutput::Transaction(record.clone()))
    }
}

#[cfg(test)]
#[path = "transactions_tests.rs"]
mod tests;
