//! EndTxn's rules: which requests end the current transaction, which are
//! retries of the last end, and which are refused.
//!
//! Transaction version 1 (EndTxn up to v4): the producer keeps its epoch
//! across transactions, so only the current epoch may end one, and the
//! same outcome asked again of a transaction already prepared or complete
//! is a retry.
//!
//! Transaction version 2 (EndTxn v5, KIP-890 part 2): each end bumps the
//! epoch as it prepares the outcome, and the client continues with the
//! epoch (or, once the epoch is exhausted, the new producer id) the answer
//! names. The epoch alone tells a retry from the next request:
//!
//! - a transaction ongoing (or none open) is ended by the current epoch;
//! - a prepared or complete one was ended by the epoch just before the
//!   bump, which is the only one whose request is a retry (answered as the
//!   record stands; the other outcome is INVALID_TXN_STATE); after an
//!   exhausted epoch moved the record to a new producer id, the retry names
//!   the old id at the last epoch;
//! - any other epoch is a fenced producer's (PRODUCER_FENCED);
//! - the current epoch may abort when no transaction is open (the client
//!   cannot know whether a write it sent reached its leader): the abort is
//!   prepared with no partitions, and the epoch bumped as for any end.

use crate::error::MetaError;
use crate::transactions::{TxnRecord, TxnRefusal, TxnState};

/// Epochs stop short of `i16::MAX`: the last one is left for a
/// coordinator's abort of a timed-out transaction.
pub(super) const LAST_PRODUCER_EPOCH: i16 = i16::MAX - 1;

/// What an EndTxn does to the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// A retry: answer the record as it stands.
    Answer,
    /// Prepare the outcome; `new_producer_id` when the bump finds the
    /// epoch exhausted.
    Prepare { new_producer_id: bool },
}

fn refuse(refusal: TxnRefusal, reason: String) -> MetaError {
    MetaError::Transaction { refusal, reason }
}

/// Decides what EndTxn from `(producer_id, epoch)` does to `r`;
/// `bump_epoch` for EndTxn v5.
pub(super) fn plan(
    r: &TxnRecord,
    (producer_id, epoch): (i64, i16),
    commit: bool,
    bump_epoch: bool,
) -> Result<Step, MetaError> {
    let id = &r.transactional_id;
    let retry_of_bump = r.epoch_bumps
        && r.producer_id == producer_id
        && epoch.checked_add(1) == Some(r.producer_epoch);
    let retry_of_new_id = r.epoch_bumps
        && r.previous_producer_id == Some(producer_id)
        && epoch == LAST_PRODUCER_EPOCH
        && r.producer_epoch == 0;
    if r.producer_id != producer_id && !retry_of_new_id {
        return Err(refuse(
            TxnRefusal::InvalidProducerIdMapping,
            format!(
                "transactional id '{id}' belongs to producer {}, not {producer_id}",
                r.producer_id
            ),
        ));
    }
    let current = epoch == r.producer_epoch;
    let retry = if r.epoch_bumps {
        let valid = match r.state {
            TxnState::Empty | TxnState::Ongoing => current,
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_of_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_of_bump || retry_of_new_id || current
            }
        };
        if !valid {
            return Err(refuse(
                TxnRefusal::ProducerFenced,
                format!(
                    "producer {producer_id} at epoch {epoch} is not the current producer of '{id}' (epoch {}) and retries no EndTxn of it",
                    r.producer_epoch
                ),
            ));
        }
        retry_of_bump || retry_of_new_id
    } else {
        if epoch < r.producer_epoch {
            return Err(refuse(
                TxnRefusal::ProducerFenced,
                format!(
                    "producer {producer_id} at epoch {epoch} was fenced by epoch {} of '{id}'",
                    r.producer_epoch
                ),
            ));
        }
        if epoch > r.producer_epoch {
            return Err(refuse(
                TxnRefusal::InvalidProducerEpoch,
                format!(
                    "epoch {epoch} of producer {producer_id} is ahead of '{id}' (epoch {})",
                    r.producer_epoch
                ),
            ));
        }
        // the same epoch asking again is a retry
        true
    };
    let fresh = || Step::Prepare {
        new_producer_id: bump_epoch && r.producer_epoch >= LAST_PRODUCER_EPOCH,
    };
    let same = match r.state {
        TxnState::Ongoing => return Ok(fresh()),
        TxnState::PrepareCommit | TxnState::CompleteCommit => retry && commit,
        TxnState::PrepareAbort | TxnState::CompleteAbort => retry && !commit,
        TxnState::Empty => false,
    };
    if same {
        return Ok(Step::Answer);
    }
    let ends_nothing = matches!(
        r.state,
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
    );
    if bump_epoch && !commit && current && ends_nothing {
        return Ok(fresh());
    }
    Err(refuse(
        TxnRefusal::InvalidTxnState,
        format!(
            "cannot {} the transaction of '{id}' in state {}",
            if commit { "commit" } else { "abort" },
            r.state.name()
        ),
    ))
}

/// Logs the outcome of the current transaction (none open: an abort with
/// no partitions); `bump_epoch` moves the epoch on, and `fresh_id` is the
/// producer id taken for an exhausted epoch.
pub(super) fn prepare(
    r: &mut TxnRecord,
    now_ms: i64,
    commit: bool,
    bump_epoch: bool,
    fresh_id: Option<i64>,
) {
    if r.state != TxnState::Ongoing {
        r.partitions.clear();
        r.groups.clear();
        r.pending_offsets.clear();
        r.pending_connect.clear();
        r.started_ms = now_ms;
    }
    if bump_epoch {
        r.last_producer_epoch = Some(r.producer_epoch);
        r.producer_epoch = r.producer_epoch.saturating_add(1);
        r.next_producer_id = fresh_id;
    }
    r.epoch_bumps = bump_epoch;
    r.state = if commit {
        TxnState::PrepareCommit
    } else {
        TxnState::PrepareAbort
    };
    r.updated_ms = now_ms;
}

#[cfg(test)]
#[path = "txn_end_tests.rs"]
mod tests;
