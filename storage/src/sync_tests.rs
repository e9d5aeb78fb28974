//! Durability points: the flushed offset follows only recorded, successful
//! syncs, a sync covers the rolls before it, and a failed one takes the log
//! offline.

use std::sync::mpsc;
use std::time::Duration;

use crate::fault::{self, DeviceOp};
use crate::flusher::read_recovery_point;
use crate::test_support::batch;
use crate::{LogConfig, PartitionLog, StorageError};

const HELD: Duration = Duration::from_millis(100);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    }
}

#[test]
fn flushed_offset_moves_only_once_sync_done_records_a_successful_sync() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    log.append(&mut batch(100), 0, 1_000).expect("append");
    let sp = log.sync_point();
    assert_eq!(sp.end(), 4);
    log.append(&mut batch(100), 0, 1_000)
        .expect("append while syncing");
    let done = std::thread::spawn(move || sp.run()).join().expect("join");
    assert!(done.is_ok());
    assert_eq!(
        log.flushed_offset(),
        0,
        "not before the outcome is recorded"
    );
    assert_eq!(log.sync_done(done).expect("sync"), 4);
    assert_eq!(
        log.flushed_offset(),
        4,
        "appends after the sync point wait for the next one"
    );
    let sp = log.sync_point();
    assert_eq!(log.sync_done(sp.run()).expect("sync"), 8);
}

#[test]
fn a_roll_between_two_sync_points_is_covered_by_the_second() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    log.append(&mut batch(10), 0, 1_000).expect("append");
    let first = log.sync_point();
    log.sync_done(first.run()).expect("first sync");
    let gate = log.hold_flushes();
    while log.segments().len() < 2 {
        log.append(&mut batch(30_000), 0, 1_000).expect("append");
    }
    let sealed_end = log.segments()[1].base_offset;
    log.append(&mut batch(10), 0, 1_000).expect("append");
    let sp = log.sync_point();
    let end = sp.end();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(sp.run()).expect("send"));
    assert!(
        rx.recv_timeout(HELD).is_err(),
        "the sync waits for the held seal fsync of the roll before it"
    );
    assert_eq!(log.flushed_offset(), 4);
    gate.open();
    let done = rx.recv().expect("recv");
    assert_eq!(log.sync_done(done).expect("sync"), end);
    assert_eq!(
        read_recovery_point(d.path()).expect("read"),
        Some(sealed_end),
        "the sealed segment's own flush raised the recovery point"
    );
}

#[test]
fn a_failed_sync_takes_the_log_offline_and_keeps_the_flushed_offset() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    log.append(&mut batch(10), 0, 1_000).expect("append");
    log.flush().expect("flush");
    log.append(&mut batch(10), 0, 1_000).expect("append");
    let active = log.segments()[0].path.clone();
    fault::fail_next(DeviceOp::Fsync, &active, 1);
    let done = log.sync_point().run();
    assert!(!done.is_ok());
    let err = log.sync_done(done).expect_err("the failure is reported");
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    assert_eq!(log.flushed_offset(), 4);
    let refused = log.append(&mut batch(10), 0, 1_000).expect_err("offline");
    assert!(matches!(refused, StorageError::Offline { .. }), "{refused}");
    let later = log.sync_point().run();
    assert!(
        matches!(log.sync_done(later), Err(StorageError::Offline { .. })),
        "an offline log makes no durability point"
    );
    assert_eq!(log.flushed_offset(), 4);
}

#[test]
fn a_sync_started_before_a_truncation_does_not_count_for_the_new_bytes() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    for _ in 0..3 {
        log.append(&mut batch(10), 0, 1_000).expect("append");
    }
    let sp = log.sync_point();
    assert_eq!(sp.end(), 12);
    log.truncate_to(4).expect("truncate");
    for _ in 0..2 {
        log.append(&mut batch(10), 0, 1_000).expect("append");
    }
    let flushed = log.sync_done(sp.run()).expect("sync");
    assert!(flushed <= 4, "flushed {flushed} past the truncation point");
}
