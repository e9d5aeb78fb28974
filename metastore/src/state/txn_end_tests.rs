use super::super::testkit::*;
use crate::command::{Command, CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::state::MetaState;
use crate::transactions::{TxnPartition, TxnRecord, TxnRefusal, TxnState};

fn record(r: CommandResult) -> TxnRecord {
    match r {
        Ok(CommandOutput::Transaction(t)) => t,
        other => panic!("expected a transaction record, got {other:?}"),
    }
}

fn refusal(r: CommandResult) -> TxnRefusal {
    match r {
        Err(MetaError::Transaction { refusal, .. }) => refusal,
        other => panic!("expected a transaction refusal, got {other:?}"),
    }
}

fn init(s: &mut MetaState) -> TxnRecord {
    record(apply(
        s,
        Command::InitTransaction {
            transactional_id: "tx".into(),
            timeout_ms: 60_000,
            expected: None,
            coordinator: None,
        },
    ))
}

/// The partition leader's add for a producer on transaction version 2.
fn write(s: &mut MetaState, producer: (i64, i16)) -> CommandResult {
    apply(
        s,
        Command::AddTxnPartitions {
            transactional_id: "tx".into(),
            producer,
            partitions: vec![TxnPartition {
                topic: "t".into(),
                partition: 0,
            }],
            coordinator: None,
            implicit: true,
        },
    )
}

fn end(s: &mut MetaState, producer: (i64, i16), commit: bool, bump_epoch: bool) -> CommandResult {
    apply(
        s,
        Command::EndTransaction {
            transactional_id: "tx".into(),
            producer,
            commit,
            coordinator: None,
            bump_epoch,
        },
    )
}

fn complete(s: &mut MetaState, producer: (i64, i16), commit: bool) -> CommandResult {
    apply(
        s,
        Command::CompleteTransaction {
            transactional_id: "tx".into(),
            producer,
            commit,
        },
    )
}

fn setup() -> (MetaState, i64) {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    let pid = init(&mut s).producer_id;
    (s, pid)
}

#[test]
fn each_end_bumps_the_epoch_and_a_retry_of_it_is_answered() {
    let (mut s, pid) = setup();
    let open = record(write(&mut s, (pid, 0)));
    assert!(open.epoch_bumps, "opened by a version 2 client's write");
    let prepared = record(end(&mut s, (pid, 0), true, true));
    assert_eq!(
        (prepared.state, prepared.producer_epoch),
        (TxnState::PrepareCommit, 1),
        "the markers carry the bumped epoch"
    );
    assert_eq!(prepared.producer_after_completion(), (pid, 1));
    // a retry while the markers are written, and once complete
    assert_eq!(
        record(end(&mut s, (pid, 0), true, true)).state,
        TxnState::PrepareCommit
    );
    assert_eq!(
        refusal(end(&mut s, (pid, 0), false, true)),
        TxnRefusal::InvalidTxnState,
        "the other outcome"
    );
    record(complete(&mut s, (pid, 1), true));
    let again = record(end(&mut s, (pid, 0), true, true));
    assert_eq!(
        (again.state, again.producer_epoch),
        (TxnState::CompleteCommit, 1),
        "answered as it stands, not bumped again"
    );
    // the next transaction runs at the new epoch; the old one is fenced
    assert_eq!(refusal(write(&mut s, (pid, 0))), TxnRefusal::ProducerFenced);
    record(write(&mut s, (pid, 1)));
    let aborted = record(end(&mut s, (pid, 1), false, true));
    assert_eq!(
        (aborted.state, aborted.producer_epoch),
        (TxnState::PrepareAbort, 2)
    );
    assert_eq!(
        refusal(end(&mut s, (pid, 0), false, true)),
        TxnRefusal::ProducerFenced,
        "two epochs back is no retry"
    );
}

#[test]
fn the_current_epoch_may_abort_with_nothing_open() {
    let (mut s, pid) = setup();
    assert_eq!(
        refusal(end(&mut s, (pid, 0), true, true)),
        TxnRefusal::InvalidTxnState,
        "nothing to commit"
    );
    let aborted = record(end(&mut s, (pid, 0), false, true));
    assert_eq!(
        (
            aborted.state,
            aborted.producer_epoch,
            aborted.partitions.len()
        ),
        (TxnState::PrepareAbort, 1, 0)
    );
    // before version 2, the same is refused as it always was
    let (mut s, pid) = setup();
    assert_eq!(
        refusal(end(&mut s, (pid, 0), false, false)),
        TxnRefusal::InvalidTxnState
    );
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let (mut s, pid) = setup();
    assert!(s.set_producer_epoch("tx", i16::MAX - 1));
    record(write(&mut s, (pid, i16::MAX - 1)));
    let prepared = record(end(&mut s, (pid, i16::MAX - 1), true, true));
    assert_eq!(prepared.producer_id, pid, "the markers are the old id's");
    assert_eq!(prepared.producer_epoch, i16::MAX);
    let (next, epoch) = prepared.producer_after_completion();
    assert_ne!(next, pid);
    assert_eq!(epoch, 0);
    let done = record(complete(&mut s, (pid, i16::MAX), true));
    assert_eq!((done.producer_id, done.producer_epoch), (next, 0));
    assert_eq!(
        record(complete(&mut s, (pid, i16::MAX), true)).producer_id,
        next,
        "completing again answers the record"
    );
    let retried = record(end(&mut s, (pid, i16::MAX - 1), true, true));
    assert_eq!(
        (retried.producer_id, retried.producer_epoch),
        (next, 0),
        "the old id's retry is answered with the new id"
    );
    record(write(&mut s, (next, 0)));
}

#[test]
fn a_fenced_or_expired_producer_end_is_no_retry() {
    let (mut s, pid) = setup();
    record(write(&mut s, (pid, 0)));
    // a new instance fences the producer at epoch 0
    let fenced = init(&mut s);
    assert_eq!(fenced.producer_epoch, 1);
    assert_eq!(
        refusal(end(&mut s, (pid, 0), false, true)),
        TxnRefusal::ProducerFenced
    );

    // a transaction past its timeout: the coordinator's abort bumps the
    // epoch once, and the expired producer's abort is fenced, not a retry
    let (mut s, pid) = setup();
    record(write(&mut s, (pid, 0)));
    let (expired, _) = apply_at(
        &mut s,
        T0 + 60_000,
        Command::ExpireTransaction {
            transactional_id: "tx".into(),
            producer: (pid, 0),
        },
    );
    let expired = record(expired);
    assert_eq!(
        (expired.state, expired.producer_epoch),
        (TxnState::PrepareAbort, 1)
    );
    assert_eq!(
        refusal(end(&mut s, (pid, 0), false, true)),
        TxnRefusal::ProducerFenced
    );
}
