//! Idempotent producers, leader epochs, DeleteRecords, retention and
//! follower truncation: state that must stay right across reopen.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use kafka_protocol::records::Compression;
use storage::{AppendOutcome, LogConfig, PartitionLog, StorageError};

fn fill(log: &mut PartitionLog, batches: usize, epoch: i32, ts: i64) {
    for _ in 0..batches {
        let mut b = batch_with(2, 20_000, ts, Compression::None, None, 0);
        log.append(&mut b, epoch, ts).unwrap();
    }
}

#[test]
fn idempotent_retry_is_a_duplicate_with_the_original_offsets() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut batch(3, 0), 0, 0).unwrap();
    let first = log.append(&mut idem_batch(42, 0, 0, 4), 0, 0).unwrap();
    assert!(matches!(first, AppendOutcome::Appended(i) if i.base_offset == 3));
    log.append(&mut idem_batch(42, 0, 4, 2), 0, 0).unwrap();
    let size = log.segments()[0].size;
    let retry = log.append(&mut idem_batch(42, 0, 0, 4), 0, 0).unwrap();
    match retry {
        AppendOutcome::Duplicate(i) => assert_eq!((i.base_offset, i.last_offset), (3, 6)),
        other => panic!("expected duplicate, got {other:?}"),
    }
    assert_eq!(log.segments()[0].size, size, "a duplicate writes nothing");
    assert_eq!(log.log_end_offset(), 9);
}

#[test]
fn sequence_gaps_and_fenced_epochs_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut idem_batch(1, 3, 0, 2), 0, 0).unwrap();
    assert!(matches!(
        log.append(&mut idem_batch(1, 3, 5, 1), 0, 0).unwrap_err(),
        StorageError::OutOfOrderSequence {
            producer_id: 1,
            expected: 2,
            received: 5
        }
    ));
    assert!(matches!(
        log.append(&mut idem_batch(1, 2, 2, 1), 0, 0).unwrap_err(),
        StorageError::InvalidProducerEpoch {
            current: 3,
            received: 2,
            ..
        }
    ));
    assert!(matches!(
        log.append(&mut idem_batch(1, 4, 7, 1), 0, 0).unwrap_err(),
        StorageError::OutOfOrderSequence { expected: 0, .. }
    ));
    log.append(&mut idem_batch(1, 4, 0, 1), 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 3);
}

fn assert_producer_state_restored(log: &mut PartitionLog) {
    assert!(matches!(
        log.append(&mut idem_batch(9, 0, 10, 5), 0, 0).unwrap(),
        AppendOutcome::Duplicate(i) if i.base_offset == 10
    ));
    assert!(matches!(
        log.append(&mut idem_batch(9, 0, 16, 1), 0, 0).unwrap_err(),
        StorageError::OutOfOrderSequence { expected: 15, .. }
    ));
}

#[test]
fn producer_state_survives_clean_close_and_crash() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    for i in 0..3 {
        log.append(&mut idem_batch(9, 0, i * 5, 5), 0, 0).unwrap();
    }
    log.close().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_producer_state_restored(&mut log);
    drop(log); // no close: the next open recovers from snapshot + scan
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_producer_state_restored(&mut log);
    // Rolls write snapshots; state spanning many segments is rebuilt too.
    fill(&mut log, 200, 0, 0);
    assert!(log.segments().len() > 3);
    drop(log);
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_producer_state_restored(&mut log);
}

#[test]
fn leader_epochs_answer_offset_for_leader_epoch_across_reopen() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut batch(5, 0), 1, 0).unwrap();
    log.append(&mut batch(5, 0), 1, 0).unwrap();
    log.append(&mut batch(5, 0), 4, 0).unwrap();
    assert_eq!(log.epoch_end_offset(1), Some((1, 10)));
    assert_eq!(log.epoch_end_offset(2), Some((1, 10)));
    assert_eq!(log.epoch_end_offset(4), Some((4, 15)));
    assert_eq!(log.epoch_end_offset(5), None);
    assert!(matches!(
        log.append(&mut batch(1, 0), 3, 0).unwrap_err(),
        StorageError::StaleLeaderEpoch {
            received: 3,
            latest: 4
        }
    ));
    drop(log);
    let log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    assert_eq!(log.epoch_end_offset(1), Some((1, 10)));
    assert_eq!(log.latest_epoch(), Some(4));
    drop(log);
    // A lost checkpoint is rebuilt from the epochs stamped in the batches.
    std::fs::remove_file(d.path().join("leader-epoch-checkpoint")).unwrap();
    let log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    assert_eq!(log.epoch_end_offset(1), Some((1, 10)));
    assert_eq!(log.epoch_end_offset(4), Some((4, 15)));
}

#[test]
fn delete_records_raises_the_log_start_durably_and_drops_whole_segments() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    fill(&mut log, 150, 0, 0);
    let segs = log.segments();
    assert!(segs.len() >= 4);
    let target = segs[2].base_offset + 1;
    assert_eq!(log.delete_records_before(target).unwrap(), target);
    assert_eq!(log.segments()[0].base_offset, segs[2].base_offset);
    assert!(!segs[0].path.exists() && !segs[1].path.exists());
    assert!(matches!(
        log.read(target - 1, 100, 1_000).unwrap_err(),
        StorageError::OffsetOutOfRange { .. }
    ));
    assert_eq!(
        log.delete_records_before(5).unwrap(),
        target,
        "never lowers"
    );
    assert!(log.delete_records_before(log.log_end_offset() + 1).is_err());
    drop(log);
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_start_offset(), target);
    let first = read_all(&log, target);
    assert_eq!(first[0].offset, target);
}

#[test]
fn delete_records_at_the_log_end_empties_the_log_but_keeps_offsets() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut batch(10, 0), 0, 0).unwrap();
    assert_eq!(log.delete_records_before(10).unwrap(), 10);
    assert_eq!(log.segments().len(), 1);
    assert_eq!(log.segments()[0].base_offset, 10);
    let info = log.append(&mut batch(1, 0), 0, 0).unwrap();
    assert_eq!(info.info().base_offset, 10);
    drop(log);
    let log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 11));
}

#[test]
fn retention_by_size_deletes_oldest_sealed_segments_only_below_the_deletable_offset() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    fill(&mut log, 200, 0, 0);
    let segs = log.segments();
    let n = segs.len();
    assert!(n >= 5);
    // Nothing is deletable below offset 0 (nothing tiered yet).
    assert!(log
        .enforce_retention(0, Some(1), None, 0)
        .unwrap()
        .is_empty());
    // Allow the first two segments only.
    let gone = log
        .enforce_retention(0, Some(1), None, segs[2].base_offset)
        .unwrap();
    assert_eq!(gone.len(), 2);
    assert_eq!(log.log_start_offset(), segs[2].base_offset);
    // Keep about three segments' worth of bytes.
    let keep = segs[0].size * 3;
    let gone = log
        .enforce_retention(0, Some(keep), None, i64::MAX)
        .unwrap();
    assert!(!gone.is_empty());
    let total: u64 = log.segments().iter().map(|s| s.size).sum();
    assert!(total >= keep, "retention must not go below retention.bytes");
    assert!(
        !log.segments().last().unwrap().sealed,
        "the active segment stays"
    );
}

#[test]
fn retention_by_time_uses_each_segments_newest_timestamp() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    fill(&mut log, 60, 0, 1_000);
    fill(&mut log, 60, 0, 50_000);
    let before = log.segments();
    let gone = log
        .enforce_retention(60_000, None, Some(30_000), i64::MAX)
        .unwrap();
    assert!(!gone.is_empty());
    assert!(gone.iter().all(|s| s.max_timestamp == Some(1_001)));
    assert!(log.segments().len() < before.len());
    assert!(log
        .segments()
        .iter()
        .all(|s| s.max_timestamp.is_none_or(|t| t >= 50_000)));
}

#[test]
fn truncate_to_removes_the_tail_and_appends_continue_from_there() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    fill(&mut log, 120, 1, 0);
    log.append(&mut batch(4, 0), 2, 0).unwrap();
    let segs = log.segments();
    let target = segs[1].base_offset + 4;
    log.truncate_to(target).unwrap();
    assert_eq!(log.log_end_offset(), target);
    assert_eq!(log.segments().len(), 2);
    assert_eq!(log.epoch_end_offset(1), Some((1, target)));
    assert_eq!(log.epoch_end_offset(2), None, "epoch 2 was cut away");
    assert!(!segs[2].path.exists());
    let info = log.append(&mut batch(3, 0), 3, 0).unwrap();
    assert_eq!(info.info().base_offset, target);
    assert_eq!(read_all(&log, 0).len() as i64, target + 3);
    drop(log);
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), target + 3);
}

#[test]
fn truncating_inside_a_batch_drops_the_whole_batch() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut batch(5, 0), 0, 0).unwrap();
    log.append(&mut batch(5, 0), 0, 0).unwrap();
    log.truncate_to(7).unwrap();
    assert_eq!(log.log_end_offset(), 5);
    log.truncate_to(0).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    assert!(log.read(0, 100, 100).unwrap().is_empty());
}

#[test]
fn truncation_rewinds_producer_state_with_the_log() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut idem_batch(3, 0, 0, 2), 0, 0).unwrap();
    log.append(&mut idem_batch(3, 0, 2, 2), 0, 0).unwrap();
    log.truncate_to(2).unwrap();
    // Sequence 2 is now the next expected one again, not a duplicate.
    let again = log.append(&mut idem_batch(3, 0, 2, 2), 0, 0).unwrap();
    assert!(matches!(again, AppendOutcome::Appended(i) if i.base_offset == 2));
}

#[test]
fn truncate_fully_restarts_the_log_at_a_new_offset() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut batch(5, 0), 0, 0).unwrap();
    log.truncate_fully_and_start_at(1_000).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (1_000, 1_000)
    );
    log.append(&mut batch(1, 0), 0, 0).unwrap();
    drop(log);
    let log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (1_000, 1_001)
    );
}

#[test]
fn a_segment_without_timestamps_expires_by_its_file_time_not_at_once() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    while log.segments().len() < 3 {
        log.append(&mut untimed_batch(10, 10_000, 0), 0, 0).unwrap();
    }
    assert_eq!(log.segments()[0].max_timestamp, Some(-1));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let hour: u64 = 3_600_000;
    let deleted = log
        .enforce_retention(now, None, Some(hour), i64::MAX)
        .unwrap();
    assert!(deleted.is_empty(), "written just now, so not an hour old");
    assert_eq!(log.log_start_offset(), 0);
    let deleted = log
        .enforce_retention(now + 2 * hour as i64, None, Some(hour), i64::MAX)
        .unwrap();
    assert_eq!(deleted.len(), 2, "both sealed segments expire by file time");
}

#[test]
fn producers_replayed_on_open_are_not_expired_by_their_old_batch_timestamps() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    // A backfill keeps its records' original time: years before now.
    let old = batch_with(
        3,
        16,
        1_000,
        Compression::None,
        Some(Idem {
            pid: 5,
            epoch: 0,
            seq: 0,
        }),
        0,
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    log.append(&mut old.clone(), 0, now).unwrap();
    drop(log); // no snapshot: the producer is replayed from batch headers
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.tick(now + 1_000).unwrap();
    assert_eq!(log.producer_count(), 1, "idle for a second, not for years");
    let retry = log.append(&mut old.clone(), 0, now + 2_000).unwrap();
    assert!(matches!(retry, AppendOutcome::Duplicate(_)), "{retry:?}");
}
