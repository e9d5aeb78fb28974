//! A writeback or fsync failure anywhere takes the log offline, and no
//! later fsync can make the bytes it concerned count as durable.

use std::time::Duration;

use crate::fault::{self, DeviceOp};
use crate::flusher::read_recovery_point;
use crate::pool::{Gate, GateGuard};
use crate::test_support::batch;
use crate::writeback::WritebackConfig;
use crate::{LogConfig, PartitionLog, StorageError};

/// Small segments and writeback chunks, so a few appends start chunk waits
/// and roll.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        writeback: WritebackConfig {
            chunk_bytes: 512 << 10,
            ..WritebackConfig::default()
        },
        ..LogConfig::default()
    }
}

/// Holds the writeback waits of the log's active segment until opened.
fn hold_writeback(log: &mut PartitionLog) -> GateGuard {
    let gate = Gate::closed();
    log.active_mut().pacer.gate = Some(gate.clone());
    GateGuard(gate)
}

fn assert_offline(log: &mut PartitionLog) {
    let err = log
        .append(&mut batch(10), 0, 2_000)
        .expect_err("an offline log refuses appends");
    assert!(matches!(err, StorageError::Offline { .. }), "{err}");
}

#[test]
fn a_writeback_error_fails_the_seal_of_its_segment_although_the_fsync_succeeds() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    let first = log.segments()[0].path.clone();
    let writeback = hold_writeback(&mut log);
    // The chunk's wait sees the error; the seal's own fdatasync then
    // succeeds, as the kernel's would once the error was consumed.
    fault::fail_next(DeviceOp::WritebackWait, &first, 1);
    while log.segments().len() < 2 {
        log.append(&mut batch(30_000), 0, 1_000).expect("append");
    }
    let sealed_end = log.segments()[1].base_offset;
    let ticket = log.pending[0].ticket.clone();
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        ticket.poll().is_none(),
        "the seal waits for the segment's writeback"
    );
    writeback.open();
    assert!(ticket.wait().is_err(), "the seal must report the failure");
    assert_eq!(
        read_recovery_point(d.path()).expect("read"),
        Some(0),
        "the recovery point must not pass the segment"
    );
    assert_eq!(log.flushed_offset(), 0);
    assert!(sealed_end > 0);
    assert_offline(&mut log);
    assert!(log.flush().is_err());
    assert_eq!(log.flushed_offset(), 0);
}

#[test]
fn flush_after_a_failed_writeback_wait_fails_and_takes_the_log_offline() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    let active = log.segments()[0].path.clone();
    let writeback = hold_writeback(&mut log);
    fault::fail_next(DeviceOp::WritebackWait, &active, 1);
    for _ in 0..6 {
        log.append(&mut batch(30_000), 0, 1_000).expect("append");
    }
    writeback.open();
    let err = log.flush().expect_err("the fsync alone would succeed");
    assert!(err.to_string().contains("paced writeback"), "{err}");
    assert_eq!(log.flushed_offset(), 0);
    assert_offline(&mut log);
}

#[test]
fn a_failed_flush_takes_the_log_offline() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    log.append(&mut batch(10), 0, 1_000).expect("append");
    let active = log.segments()[0].path.clone();
    fault::fail_next(DeviceOp::Fsync, &active, 1);
    assert!(log.flush().is_err());
    assert_offline(&mut log);
    assert!(
        log.flush().is_err(),
        "no later fsync may report the lost bytes durable"
    );
    assert!(log.tick(3_000).is_err());
    assert_eq!(log.flushed_offset(), 0);
}

#[test]
fn an_append_whose_own_fsync_fails_is_undone_and_the_log_goes_offline() {
    let d = tempfile::tempdir().expect("dir");
    let config = LogConfig {
        flush_messages: Some(1),
        ..config()
    };
    let mut log = PartitionLog::open(d.path(), config.clone()).expect("open");
    log.append(&mut batch(10), 0, 1_000).expect("append");
    let size = log.segments()[0].size;
    let end = log.subscribe();
    let active = log.segments()[0].path.clone();
    fault::fail_next(DeviceOp::Fsync, &active, 1);
    assert!(log.append(&mut batch(10), 0, 1_000).is_err());
    assert_eq!(
        log.log_end_offset(),
        4,
        "the failed append is not in the log"
    );
    assert_eq!(*end.borrow(), 4, "nobody was told about it");
    assert_eq!(log.segments()[0].size, size);
    assert!(log.read(4, 1 << 20, i64::MAX).expect("read").is_empty());
    assert_offline(&mut log);
    drop(log);
    let log = PartitionLog::open(d.path(), config).expect("reopen");
    assert_eq!(log.log_end_offset(), 4, "nor is it found after a reopen");
}
