//! Rolls hand their fsyncs to the background flusher: the append path does
//! not wait for the device, the flushed offset does, and the durability
//! points (`flush`, `close`, truncation) wait for it too.

use std::sync::mpsc;
use std::time::Duration;

use crate::files::RECOVERY_POINT_FILE;
use crate::flusher::read_recovery_point;
use crate::test_support::batch;
use crate::{LogConfig, PartitionLog, ReadSlice, StorageError};

/// How long a test gives a held flush to (wrongly) complete; only ever
/// used to show that something does *not* happen while held.
const HELD: Duration = Duration::from_millis(100);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    }
}

/// Appends until the log has rolled once; returns the sealed segment's end.
fn append_until_rolled(log: &mut PartitionLog) -> i64 {
    while log.segments().len() < 2 {
        log.append(&mut batch(30_000), 0, 1_000).expect("append");
    }
    log.segments()[1].base_offset
}

#[test]
fn append_after_a_roll_succeeds_while_the_seal_fsync_is_still_held() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    let gate = log.hold_flushes();
    let sealed_end = append_until_rolled(&mut log);
    assert!(
        log.segments()[0].sealed,
        "the old segment is sealed at once"
    );

    // The device work of the roll has not run, yet appends go on.
    for _ in 0..5 {
        log.append(&mut batch(1_000), 0, 1_001).expect("append");
    }
    log.tick(1_002).expect("tick");
    std::thread::sleep(HELD);
    assert_eq!(log.pending.len(), 1);
    assert!(log.pending[0].ticket.poll().is_none(), "fsync must be held");
    assert_eq!(log.flushed_offset(), 0, "nothing is durable yet");
    assert_eq!(
        read_recovery_point(d.path()).expect("read"),
        Some(0),
        "the recovery point is not raised before the fsync"
    );

    gate.open();
    let ticket = log.pending[0].ticket.clone();
    ticket.wait().expect("background fsync");
    assert_eq!(
        log.flushed_offset(),
        sealed_end,
        "the sealed segment counts as flushed once its fsync completed"
    );
    assert_eq!(
        read_recovery_point(d.path()).expect("read"),
        Some(sealed_end)
    );
    log.append(&mut batch(10), 0, 1_003).expect("append");
    assert!(log.pending.is_empty(), "the next append retires the ticket");
    assert_eq!(log.flushed_offset(), sealed_end);
    log.flush().expect("flush");
    assert_eq!(log.flushed_offset(), log.log_end_offset());
}

#[test]
fn flush_waits_for_a_held_seal_fsync() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    let gate = log.hold_flushes();
    append_until_rolled(&mut log);
    let end = log.log_end_offset();
    let (tx, rx) = mpsc::channel();
    let flusher = std::thread::spawn(move || {
        let r = log.flush().map(|()| log.flushed_offset());
        tx.send(r).expect("send");
        log
    });
    assert!(
        rx.recv_timeout(HELD).is_err(),
        "flush must not return before the roll's fsync ran"
    );
    gate.open();
    let flushed = rx.recv().expect("recv").expect("flush");
    assert_eq!(flushed, end);
    flusher.join().expect("join");
}

#[test]
fn close_waits_for_a_held_seal_fsync_and_records_the_log_end_as_recovery_point() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    let gate = log.hold_flushes();
    append_until_rolled(&mut log);
    let end = log.log_end_offset();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(log.close().is_ok()).expect("send"));
    assert!(rx.recv_timeout(HELD).is_err(), "close must wait");
    assert!(!d.path().join("clean-shutdown").exists());
    gate.open();
    assert!(rx.recv().expect("recv"), "close succeeds");
    assert_eq!(read_recovery_point(d.path()).expect("read"), Some(end));
    assert!(d.path().join("clean-shutdown").exists());
}

#[test]
fn follower_truncation_waits_for_held_flushes_and_lowers_the_recovery_point() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    let first_end = append_until_rolled(&mut log);
    log.flush().expect("flush");
    let gate = log.hold_flushes();
    while log.segments().len() < 3 {
        log.append(&mut batch(30_000), 0, 1_000).expect("append");
    }
    assert_eq!(log.pending.len(), 1);
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let r = log.truncate_to(first_end - 2);
        tx.send(r.is_ok()).expect("send");
        log
    });
    assert!(rx.recv_timeout(HELD).is_err(), "truncation waits");
    gate.open();
    assert!(rx.recv().expect("recv"));
    let log = worker.join().expect("join");
    assert_eq!(log.segments().len(), 1);
    // The held roll's checkpoint must not land after the lowered one.
    assert_eq!(read_recovery_point(d.path()).expect("read"), Some(0));
}

#[test]
fn a_failed_background_fsync_takes_the_log_offline() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    // The checkpoint's temp path is taken by a directory, so its write fails.
    let blocker = d.path().join(format!("{RECOVERY_POINT_FILE}.tmp"));
    std::fs::create_dir(&blocker).expect("mkdir");
    std::fs::write(blocker.join("x"), b"x").expect("write");
    append_until_rolled(&mut log);
    let ticket = log.pending[0].ticket.clone();
    assert!(ticket.wait().is_err());
    let err = log
        .append(&mut batch(10), 0, 1_001)
        .expect_err("a log that lost a flush must refuse appends");
    assert!(matches!(err, StorageError::Offline { .. }), "{err}");
    assert!(log.flush().is_err());
    assert_eq!(log.flushed_offset(), 0);
}

#[test]
fn a_log_can_move_to_its_shard_task_and_slices_to_any_task() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<PartitionLog>();
    send_sync::<ReadSlice>();
    send_sync::<StorageError>();
}

/// Appends about `bytes` in batches of four 1 KiB records; returns the
/// sealed segments' sizes.
fn sealed_sizes_after(log: &mut PartitionLog, bytes: usize) -> Vec<u64> {
    let mut written = 0;
    while written < bytes {
        let mut b = batch(1_000);
        written += b.len();
        log.append(&mut b, 0, 1_000).expect("append");
    }
    log.segments()
        .iter()
        .filter(|s| s.sealed)
        .map(|s| s.size)
        .collect()
}

#[test]
fn with_a_roll_jitter_segments_roll_at_different_points_within_it() {
    let jitter = 256 << 10;
    let cfg = LogConfig {
        segment_jitter_bytes: jitter,
        ..config()
    };
    let one_batch = batch(1_000).len() as u64;
    let mut sizes = Vec::new();
    for _ in 0..3 {
        let d = tempfile::tempdir().expect("dir");
        let mut log = PartitionLog::open(d.path(), cfg.clone()).expect("open");
        sizes.extend(sealed_sizes_after(&mut log, 6 << 20));
    }
    assert!(sizes.len() >= 15, "{sizes:?}");
    for &size in &sizes {
        assert!(size <= cfg.segment_bytes, "{size} past segment.bytes");
        assert!(
            size + one_batch > cfg.segment_bytes - jitter,
            "{size} rolled before the jitter allows"
        );
    }
    let distinct: std::collections::BTreeSet<u64> = sizes.iter().copied().collect();
    assert!(
        distinct.len() > sizes.len() / 2,
        "segments roll at the same point: {sizes:?}"
    );
}

#[test]
fn without_a_roll_jitter_every_segment_rolls_at_segment_bytes() {
    let d = tempfile::tempdir().expect("dir");
    let mut log = PartitionLog::open(d.path(), config()).expect("open");
    let one_batch = batch(1_000).len() as u64;
    let sizes = sealed_sizes_after(&mut log, 4 << 20);
    assert!(sizes.len() >= 3, "{sizes:?}");
    for size in sizes {
        assert!(size <= config().segment_bytes && size + one_batch > config().segment_bytes);
    }
}

#[test]
fn a_roll_jitter_over_half_a_segment_is_refused() {
    let cfg = LogConfig {
        segment_jitter_bytes: (1 << 19) + 1,
        ..config()
    };
    let d = tempfile::tempdir().expect("dir");
    assert!(matches!(
        PartitionLog::open(d.path(), cfg),
        Err(StorageError::InvalidConfig { .. })
    ));
}
