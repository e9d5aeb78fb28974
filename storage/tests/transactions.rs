//! Transactions in the partition log: transactional batches open a
//! producer's transaction, markers end it, the first unstable offset bounds
//! what read_committed consumers may read, and aborted transactions are
//! remembered across restarts, truncations and replication.
#![allow(clippy::unwrap_used)]

mod common;

use common::{batch, idem_batch, small_segments, txn_batch};
use storage::{AbortedTxn, ControlType, PartitionLog, StorageError};

const NOW: i64 = 1_800_000_000_000;

fn open(dir: &std::path::Path) -> PartitionLog {
    PartitionLog::open(dir, small_segments()).unwrap()
}

fn append(log: &mut PartitionLog, mut b: Vec<u8>) -> i64 {
    log.append(&mut b, 0, NOW).unwrap().info().base_offset
}

fn marker(log: &mut PartitionLog, pid: i64, epoch: i16, c: ControlType, coord: i32) -> i64 {
    log.append_marker(pid, epoch, c, coord, 0, NOW)
        .unwrap()
        .base_offset
}

#[test]
fn a_transaction_holds_the_first_unstable_offset_until_its_marker() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    append(&mut log, batch(3, 1_000));
    assert_eq!(log.first_unstable_offset(), None);
    let first = append(&mut log, txn_batch(7, 0, 0, 2));
    append(&mut log, batch(2, 1_000));
    append(&mut log, txn_batch(7, 0, 2, 2));
    assert_eq!(first, 3);
    assert_eq!(log.first_unstable_offset(), Some(3));
    assert_eq!(log.ongoing_transactions(), vec![(7, 0, 3)]);
    let at = marker(&mut log, 7, 0, ControlType::Commit, 0);
    assert_eq!(at, 9);
    assert_eq!(log.log_end_offset(), 10, "the marker takes one offset");
    assert_eq!(log.first_unstable_offset(), None);
    assert!(
        log.aborted_transactions(0, 100).is_empty(),
        "a commit aborts nothing"
    );
}

#[test]
fn an_aborted_transaction_is_named_to_fetches_that_overlap_it() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let a = append(&mut log, txn_batch(1, 0, 0, 3)); // 0..=2
    let b = append(&mut log, txn_batch(2, 0, 0, 3)); // 3..=5
    assert_eq!(log.first_unstable_offset(), Some(a));
    let a_end = marker(&mut log, 1, 0, ControlType::Abort, 0); // 6
    assert_eq!(
        log.first_unstable_offset(),
        Some(b),
        "the other is still ongoing"
    );
    let b_end = marker(&mut log, 2, 0, ControlType::Commit, 0); // 7
    assert_eq!(log.first_unstable_offset(), None);
    let aborted = AbortedTxn {
        producer_id: 1,
        first_offset: a,
        last_offset: a_end,
    };
    assert_eq!(log.aborted_transactions(0, b_end + 1), vec![aborted]);
    assert_eq!(log.aborted_transactions(a_end, b_end + 1), vec![aborted]);
    assert!(log.aborted_transactions(a_end + 1, b_end + 1).is_empty());
}

#[test]
fn markers_check_producer_and_coordinator_epochs_and_a_plain_batch_cannot_interleave() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    append(&mut log, txn_batch(5, 2, 0, 1));
    let mut plain = idem_batch(5, 2, 1, 1);
    assert!(matches!(
        log.append(&mut plain, 0, NOW).unwrap_err(),
        StorageError::InvalidTxnState { producer_id: 5, .. }
    ));
    assert!(matches!(
        log.append_marker(5, 1, ControlType::Commit, 0, 0, NOW)
            .unwrap_err(),
        StorageError::InvalidProducerEpoch {
            current: 2,
            received: 1,
            ..
        }
    ));
    marker(&mut log, 5, 2, ControlType::Commit, 4);
    assert!(matches!(
        log.append_marker(5, 2, ControlType::Commit, 3, 0, NOW)
            .unwrap_err(),
        StorageError::CoordinatorFenced {
            current: 4,
            received: 3,
            ..
        }
    ));
    // KIP-890: the marker bumps the epoch; the next transaction starts at 0
    marker(&mut log, 5, 3, ControlType::Abort, 4);
    let next = append(&mut log, txn_batch(5, 3, 0, 1));
    assert_eq!(log.first_unstable_offset(), Some(next));
    let mut old = txn_batch(5, 2, 1, 1);
    assert!(matches!(
        log.append(&mut old, 0, NOW).unwrap_err(),
        StorageError::InvalidProducerEpoch { .. }
    ));
}

#[test]
fn transactions_and_aborts_survive_a_clean_close_and_a_crash() {
    for crash in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let mut log = open(d.path());
        let a = append(&mut log, txn_batch(1, 0, 0, 2));
        let a_end = marker(&mut log, 1, 0, ControlType::Abort, 0);
        let ongoing = append(&mut log, txn_batch(2, 0, 0, 2));
        let expected = log.aborted_transactions(0, i64::MAX);
        assert_eq!(
            expected,
            vec![AbortedTxn {
                producer_id: 1,
                first_offset: a,
                last_offset: a_end
            }]
        );
        if crash {
            log.flush().unwrap();
            // the index file is lost too: the replay of markers finds it again
            for e in std::fs::read_dir(d.path()).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "txnindex") {
                    std::fs::remove_file(p).unwrap();
                }
            }
            drop(log);
        } else {
            log.close().unwrap();
        }
        let mut log = open(d.path());
        assert_eq!(
            log.aborted_transactions(0, i64::MAX),
            expected,
            "crash: {crash}"
        );
        assert_eq!(log.first_unstable_offset(), Some(ongoing), "crash: {crash}");
        // the reopened log goes on where it was
        marker(&mut log, 2, 0, ControlType::Commit, 0);
        assert_eq!(log.first_unstable_offset(), None);
    }
}

#[test]
fn a_truncation_forgets_the_markers_it_cuts_and_reopens_their_transactions() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let a = append(&mut log, txn_batch(1, 0, 0, 2));
    let a_end = marker(&mut log, 1, 0, ControlType::Abort, 0);
    log.truncate_to(a_end).unwrap();
    assert!(log.aborted_transactions(0, i64::MAX).is_empty());
    assert_eq!(
        log.first_unstable_offset(),
        Some(a),
        "the transaction is ongoing again"
    );
    log.close().unwrap();
    let log = open(d.path());
    assert!(
        log.aborted_transactions(0, i64::MAX).is_empty(),
        "also on disk"
    );
}

#[test]
fn a_follower_fed_the_leaders_batches_has_the_same_transactions() {
    let d = tempfile::tempdir().unwrap();
    let f = tempfile::tempdir().unwrap();
    let mut leader = open(d.path());
    append(&mut leader, txn_batch(1, 0, 0, 2));
    append(&mut leader, txn_batch(2, 0, 0, 2));
    marker(&mut leader, 1, 0, ControlType::Abort, 0);
    append(&mut leader, batch(2, 1_000));
    let end = leader.log_end_offset();
    let slice = leader.read(0, 1 << 20, end).unwrap();
    let mut follower = open(f.path());
    follower
        .append_replicated(&slice.read_to_bytes().unwrap(), NOW)
        .unwrap();
    assert_eq!(follower.log_end_offset(), end);
    assert_eq!(
        follower.aborted_transactions(0, end),
        leader.aborted_transactions(0, end)
    );
    assert_eq!(
        follower.first_unstable_offset(),
        leader.first_unstable_offset()
    );
    assert_eq!(follower.ongoing_transactions(), vec![(2, 0, 2)]);
}
