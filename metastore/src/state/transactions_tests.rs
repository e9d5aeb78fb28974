use super::super::testkit::*;
use super::*;
use crate::command::Command;

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

fn init(s: &mut MetaState, now: i64, id: &str, expected: Option<(i64, i16)>) -> CommandResult {
    apply_at(
        s,
        now,
        Command::InitTransaction {
            transactional_id: id.into(),
            timeout_ms: 60_000,
            expected,
            coordinator: None,
        },
    )
    .0
}

fn add(s: &mut MetaState, now: i64, producer: (i64, i16), parts: &[(&str, i32)]) -> CommandResult {
    apply_at(
        s,
        now,
        Command::AddTxnPartitions {
            transactional_id: "tx".into(),
            producer,
            partitions: parts
                .iter()
                .map(|(t, p)| TxnPartition {
                    topic: (*t).into(),
                    partition: *p,
                })
                .collect(),
            coordinator: None,
            implicit: false,
        },
    )
    .0
}

fn end(s: &mut MetaState, producer: (i64, i16), commit: bool) -> CommandResult {
    apply(
        s,
        Command::EndTransaction {
            transactional_id: "tx".into(),
            producer,
            commit,
            coordinator: None,
            bump_epoch: false,
        },
    )
}

fn complete(s: &mut MetaState, producer: (i64, i16), commit: bool) -> CommandResult {
    apply_at(
        s,
        T0 + 50,
        Command::CompleteTransaction {
            transactional_id: "tx".into(),
            producer,
            commit,
        },
    )
    .0
}

fn offset(partition: i32, offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic: "in".into(),
        partition,
        offset,
        leader_epoch: 0,
        metadata: None,
        commit_time_ms: 0,
    }
}

#[test]
fn a_new_producer_fences_the_last_one_and_aborts_its_open_transaction() {
    let mut s = with_agents(1);
    create(&mut s, "t", 2, 1);
    let first = record(init(&mut s, T0, "tx", None));
    assert_eq!((first.producer_epoch, first.state), (0, TxnState::Empty));
    let p0 = (first.producer_id, 0);
    let open = record(add(&mut s, T0 + 1, p0, &[("t", 0), ("t", 1)]));
    assert_eq!(open.state, TxnState::Ongoing);
    assert!(open.admits(
        p0.0,
        0,
        &TxnPartition {
            topic: "t".into(),
            partition: 1
        }
    ));

    // a second instance with the same transactional id
    let second = record(init(&mut s, T0 + 2, "tx", None));
    assert_eq!(second.producer_id, first.producer_id, "same id, next epoch");
    assert_eq!(second.producer_epoch, 1);
    assert_eq!(
        second.state,
        TxnState::PrepareAbort,
        "the open transaction is aborted"
    );
    assert_eq!(
        second.partitions.len(),
        2,
        "its partitions get ABORT markers"
    );
    // the old producer can no longer touch it
    assert_eq!(refusal(end(&mut s, p0, true)), TxnRefusal::ProducerFenced);
    assert_eq!(
        refusal(add(&mut s, T0 + 3, p0, &[("t", 0)])),
        TxnRefusal::ProducerFenced
    );
    // until the abort completes, asking again answers the same record
    assert_eq!(
        record(init(&mut s, T0 + 3, "tx", None)).state,
        TxnState::PrepareAbort
    );
    let done = record(complete(&mut s, (first.producer_id, 1), false));
    assert_eq!(done.state, TxnState::CompleteAbort);
    let ready = record(init(&mut s, T0 + 4, "tx", None));
    assert_eq!((ready.producer_epoch, ready.state), (2, TxnState::Empty));
}

#[test]
fn a_commit_is_logged_before_its_markers_and_applies_the_offsets_with_it() {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    create(&mut s, "in", 2, 1);
    let pid = record(init(&mut s, T0, "tx", None)).producer_id;
    let p = (pid, 0);
    record(add(&mut s, T0, p, &[("t", 0)]));
    let commit_offsets = |s: &mut MetaState| {
        apply(
            s,
            Command::TxnOffsetCommit {
                transactional_id: "tx".into(),
                producer: p,
                group: "g".into(),
                offsets: vec![offset(0, 10), offset(9, 1)],
                coordinator: None,
                implicit: false,
            },
        )
    };
    assert_eq!(
        refusal(commit_offsets(&mut s)),
        TxnRefusal::InvalidTxnState,
        "the group was not added"
    );
    record(apply(
        &mut s,
        Command::AddTxnGroup {
            transactional_id: "tx".into(),
            producer: p,
            group: "g".into(),
            coordinator: None,
        },
    ));
    let Ok(CommandOutput::OffsetResults(results)) = commit_offsets(&mut s) else {
        panic!("offsets answered per partition")
    };
    assert!(results[0].is_ok());
    assert!(matches!(
        results[1],
        Err(MetaError::UnknownPartition { .. })
    ));
    assert!(!s.groups.contains_key("g"), "not visible before the commit");

    let prepared = record(end(&mut s, p, true));
    assert_eq!(prepared.state, TxnState::PrepareCommit);
    assert!(
        !s.groups.contains_key("g"),
        "not visible while markers are written"
    );
    assert_eq!(refusal(end(&mut s, p, false)), TxnRefusal::InvalidTxnState);
    assert_eq!(
        record(end(&mut s, p, true)).state,
        TxnState::PrepareCommit,
        "a retry"
    );
    assert_eq!(
        refusal(add(&mut s, T0, p, &[("t", 0)])),
        TxnRefusal::ConcurrentTransactions
    );
    let done = record(complete(&mut s, p, true));
    assert_eq!(done.state, TxnState::CompleteCommit);
    assert!(done.partitions.is_empty() && done.pending_offsets.is_empty());
    assert_eq!(
        s.groups["g"]["in"][&0].offset, 10,
        "applied with the commit"
    );
    assert_eq!(
        record(complete(&mut s, p, true)).state,
        TxnState::CompleteCommit
    );
    assert_eq!(
        record(end(&mut s, p, true)).state,
        TxnState::CompleteCommit,
        "a late retry"
    );

    // the next transaction starts clean
    let next = record(add(&mut s, T0 + 9, p, &[("t", 0)]));
    assert_eq!(next.state, TxnState::Ongoing);
    assert_eq!(next.started_ms, T0 + 9);
}

#[test]
fn an_abort_drops_the_offsets_it_held() {
    let mut s = with_agents(1);
    create(&mut s, "in", 1, 1);
    let p = (record(init(&mut s, T0, "tx", None)).producer_id, 0);
    record(apply(
        &mut s,
        Command::AddTxnGroup {
            transactional_id: "tx".into(),
            producer: p,
            group: "g".into(),
            coordinator: None,
        },
    ));
    apply(
        &mut s,
        Command::TxnOffsetCommit {
            transactional_id: "tx".into(),
            producer: p,
            group: "g".into(),
            offsets: vec![offset(0, 10)],
            coordinator: None,
            implicit: false,
        },
    )
    .expect("held");
    record(end(&mut s, p, false));
    assert_eq!(
        record(complete(&mut s, p, false)).state,
        TxnState::CompleteAbort
    );
    assert!(!s.groups.contains_key("g"));
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    let pid = record(init(&mut s, T0, "tx", None)).producer_id;
    record(add(&mut s, T0 + 1_000, (pid, 0), &[("t", 0)]));
    let expire = |s: &mut MetaState, now| {
        apply_at(
            s,
            now,
            Command::ExpireTransaction {
                transactional_id: "tx".into(),
                producer: (pid, 0),
            },
        )
        .0
    };
    assert!(
        matches!(
            expire(&mut s, T0 + 60_999),
            Err(MetaError::StaleRequest { .. })
        ),
        "not yet: the leader's clock decides"
    );
    let aborted = record(expire(&mut s, T0 + 61_000));
    assert_eq!(
        (aborted.state, aborted.producer_epoch),
        (TxnState::PrepareAbort, 1)
    );
    assert_eq!(
        refusal(end(&mut s, (pid, 0), true)),
        TxnRefusal::ProducerFenced
    );
    record(complete(&mut s, (pid, 1), false));
    // the same producer re-initialising with the epoch it had is recognised
    let back = record(init(&mut s, T0 + 62_000, "tx", Some((pid, 0))));
    assert_eq!((back.producer_id, back.producer_epoch), (pid, 2));
    assert_eq!(
        refusal(init(&mut s, T0 + 63_000, "tx", Some((pid, 0)))),
        TxnRefusal::ProducerFenced,
        "an epoch two behind is a zombie"
    );
}

#[test]
fn requests_from_unknown_producers_and_bad_timeouts_are_refused() {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    assert_eq!(
        refusal(add(&mut s, T0, (7, 0), &[("t", 0)])),
        TxnRefusal::InvalidProducerIdMapping
    );
    let pid = record(init(&mut s, T0, "tx", None)).producer_id;
    assert_eq!(
        refusal(add(&mut s, T0, (pid + 1, 0), &[("t", 0)])),
        TxnRefusal::InvalidProducerIdMapping
    );
    assert_eq!(
        refusal(add(&mut s, T0, (pid, 5), &[("t", 0)])),
        TxnRefusal::InvalidProducerEpoch
    );
    assert!(matches!(
        add(&mut s, T0, (pid, 0), &[("t", 3)]),
        Err(MetaError::UnknownPartition { partition: 3, .. })
    ));
    assert_eq!(
        record(init(&mut s, T0, "tx", None)).state,
        TxnState::Empty,
        "a refused add opens nothing"
    );
    assert_eq!(
        refusal(end(&mut s, (pid, 1), true)),
        TxnRefusal::InvalidTxnState
    );
    let zero = apply(
        &mut s,
        Command::InitTransaction {
            transactional_id: "other".into(),
            timeout_ms: 0,
            expected: None,
            coordinator: None,
        },
    );
    assert_eq!(refusal(zero), TxnRefusal::InvalidTransactionTimeout);
}

#[test]
fn producer_ids_of_transactions_and_idempotent_blocks_never_overlap() {
    let mut s = with_agents(1);
    let Ok(CommandOutput::ProducerIds { first, count }) =
        apply(&mut s, Command::AllocateProducerIds { count: 10 })
    else {
        panic!("a block")
    };
    let a = record(init(&mut s, T0, "a", None)).producer_id;
    let b = record(init(&mut s, T0, "b", None)).producer_id;
    assert!(
        a >= first + i64::from(count) && b > a,
        "{first}+{count}, {a}, {b}"
    );
}

#[test]
fn a_producer_at_the_last_epoch_gets_a_new_id() {
    let mut s = with_agents(1);
    let pid = record(init(&mut s, T0, "tx", None)).producer_id;
    Arc::make_mut(s.transactions.get_mut("tx").expect("record")).producer_epoch =
        LAST_PRODUCER_EPOCH;
    let next = record(init(&mut s, T0, "tx", None));
    assert_ne!(next.producer_id, pid);
    assert_eq!(next.producer_epoch, 0);
}

#[test]
fn records_survive_a_snapshot() {
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    let pid = record(init(&mut s, T0, "tx", None)).producer_id;
    record(add(&mut s, T0, (pid, 0), &[("t", 0)]));
    let json = serde_json::to_vec(&s).expect("serialises");
    let back: MetaState = serde_json::from_slice(&json).expect("deserialises");
    assert_eq!(back.transaction("tx"), s.transaction("tx"));
    assert_eq!(
        back.transaction("tx").map(|r| r.state),
        Some(TxnState::Ongoing)
    );
}

/// KIP-618: an exactly-once source task's offsets ride in its transaction:
/// invisible until the commit is complete, dropped by an abort, refused
/// with no transaction open or for a connector that does not exist.
#[test]
fn source_offsets_held_in_a_transaction_become_the_connectors_on_commit_only() {
    use crate::connect::{ConnectCommand, TargetState};
    let mut s = with_agents(1);
    create(&mut s, "t", 1, 1);
    apply(
        &mut s,
        Command::Connect {
            command: ConnectCommand::Put {
                name: "src".into(),
                config: [("connector.class".to_owned(), "DatagenSource".to_owned())].into(),
                tasks: vec![Default::default()],
                create_only: true,
                initial: TargetState::Running,
            },
        },
    )
    .expect("connector");
    let offsets = |s: &MetaState| {
        s.connect()
            .connector("src")
            .map(|c| c.offsets.clone())
            .unwrap_or_default()
    };
    let stage = |s: &mut MetaState, p, connector: &str, seq: &str| {
        apply(
            s,
            Command::TxnConnectOffsets {
                transactional_id: "tx".into(),
                producer: p,
                connector: connector.into(),
                offsets: vec![("datagen-0".into(), Some(seq.into()))],
            },
        )
    };
    let pid = record(init(&mut s, T0, "tx", None)).producer_id;
    let p = (pid, 0);
    assert_eq!(
        refusal(stage(&mut s, p, "src", "10")),
        TxnRefusal::InvalidTxnState,
        "no transaction is open"
    );
    record(add(&mut s, T0, p, &[("t", 0)]));
    assert!(matches!(
        stage(&mut s, p, "nope", "10"),
        Err(MetaError::Connect { status: 404, .. })
    ));
    record(stage(&mut s, p, "src", "10"));
    record(stage(&mut s, p, "src", "20"));
    assert!(offsets(&s).is_empty(), "not visible before the commit");
    record(end(&mut s, p, true));
    assert!(
        offsets(&s).is_empty(),
        "not visible while markers are written"
    );
    record(complete(&mut s, p, true));
    assert_eq!(
        offsets(&s).get("datagen-0").map(String::as_str),
        Some("20"),
        "the last offset held"
    );

    record(add(&mut s, T0, p, &[("t", 0)]));
    record(stage(&mut s, p, "src", "30"));
    record(end(&mut s, p, false));
    record(complete(&mut s, p, false));
    assert_eq!(
        offsets(&s).get("datagen-0").map(String::as_str),
        Some("20"),
        "an abort drops what it held"
    );
}
