//! Recovery after a power loss that hit sealed segments whose background
//! fsync had not finished: every segment ending above the recovery point
//! is scanned, a torn one becomes the log end and what follows it goes.
#![allow(clippy::unwrap_used)]

mod common;

use std::fs::{self, OpenOptions};
use std::path::Path;

use common::*;
use kafka_protocol::records::Compression;
use storage::PartitionLog;

const RECOVERY_POINT: &str = "recovery-point-offset";

/// Writes `batches` batches of 3 records (record at offset `o` holds
/// `values[o]`), waits for every fsync, and drops the log without closing
/// it, as a crash would. Returns the segment bases and the values.
fn write_unclean(dir: &Path, batches: usize) -> (Vec<i64>, Vec<Vec<u8>>) {
    let mut log = PartitionLog::open(dir, small_segments()).unwrap();
    let mut values = Vec::new();
    for i in 0..batches {
        let mut b = batch_with(3, 3_000, i as i64 * 10, Compression::None, None, i as u64);
        log.append(&mut b, 0, 0).unwrap();
        values.extend((0..3).map(|r| value_for(i as u64, r, 3_000)));
    }
    // No background flush may land after the test edits the directory.
    log.flush().unwrap();
    let bases = log.segments().iter().map(|s| s.base_offset).collect();
    drop(log);
    (bases, values)
}

fn log_path(dir: &Path, base: i64) -> std::path::PathBuf {
    dir.join(format!("{base:020}.log"))
}

fn set_recovery_point(dir: &Path, offset: i64) {
    fs::write(dir.join(RECOVERY_POINT), format!("{offset}\n")).unwrap();
}

fn recovery_point(dir: &Path) -> Option<i64> {
    let s = fs::read_to_string(dir.join(RECOVERY_POINT)).ok()?;
    s.trim().parse().ok()
}

fn cut(path: &Path, drop_bytes: u64) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len.saturating_sub(drop_bytes)).unwrap();
}

fn values(log: &PartitionLog) -> Vec<Vec<u8>> {
    read_all(log, log.log_start_offset())
        .into_iter()
        .map(|r| r.value.unwrap().to_vec())
        .collect()
}

fn log_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count()
}

#[test]
fn a_torn_sealed_segment_above_the_recovery_point_becomes_the_log_end() {
    let d = tempfile::tempdir().unwrap();
    let (bases, vals) = write_unclean(d.path(), 400);
    assert!(bases.len() >= 4, "need segments after the torn one");
    // Segment 0 was durable; segment 1 lost its last half batch.
    set_recovery_point(d.path(), bases[1]);
    cut(&log_path(d.path(), bases[1]), 1_000);

    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    let end = log.log_end_offset();
    assert!(
        bases[1] < end && end < bases[2],
        "end {end} must fall inside the torn segment [{}, {})",
        bases[1],
        bases[2]
    );
    assert_eq!(end % 3, 0, "cut after a whole batch");
    assert_eq!(end, bases[2] - 3, "only the torn batch is lost");
    assert_eq!(values(&log), vals[..end as usize]);
    assert_eq!(log.segments().len(), 2, "segments after the hole are gone");
    assert_eq!(log_files(d.path()), 2);
    assert!(
        !log.segments()[1].sealed,
        "the torn segment is active again"
    );
    assert_eq!(recovery_point(d.path()), Some(bases[1]));

    // Appends continue densely from the new end and survive a clean close.
    let info = log.append(&mut batch(2, 7), 0, 0).unwrap();
    assert_eq!(info.info().base_offset, end);
    log.close().unwrap();
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), end + 2);
    assert_eq!(values(&log)[..end as usize], vals[..end as usize]);
}

#[test]
fn a_sealed_segment_that_lost_all_its_bytes_drops_every_later_segment() {
    let d = tempfile::tempdir().unwrap();
    let (bases, vals) = write_unclean(d.path(), 400);
    set_recovery_point(d.path(), bases[1]);
    // Cut at a batch boundary (nothing torn inside it): it simply ends
    // before the next segment begins, which is a hole all the same.
    OpenOptions::new()
        .write(true)
        .open(log_path(d.path(), bases[1]))
        .unwrap()
        .set_len(0)
        .unwrap();
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), bases[1]);
    assert_eq!(values(&log), vals[..bases[1] as usize]);
    assert_eq!(log_files(d.path()), 2);
}

#[test]
fn without_a_recovery_point_an_unclean_open_scans_every_segment() {
    let d = tempfile::tempdir().unwrap();
    let (bases, vals) = write_unclean(d.path(), 400);
    fs::remove_file(d.path().join(RECOVERY_POINT)).unwrap();
    // The very first segment is torn: only a full scan can find it.
    cut(&log_path(d.path(), bases[0]), 1_000);
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), bases[1] - 3);
    assert_eq!(values(&log), vals[..(bases[1] - 3) as usize]);
    assert_eq!(log.segments().len(), 1);
    assert_eq!(recovery_point(d.path()), Some(0));
}

#[test]
fn segments_below_the_recovery_point_are_trusted_without_a_scan() {
    let d = tempfile::tempdir().unwrap();
    let (bases, _) = write_unclean(d.path(), 400);
    let end_before = {
        let log = PartitionLog::open(d.path(), small_segments()).unwrap();
        log.log_end_offset()
    };
    set_recovery_point(d.path(), bases[2]);
    // A bit flip deep inside segment 0's records: a CRC scan would cut
    // there, so an unchanged log shows segment 0 was not rescanned.
    let p = log_path(d.path(), bases[0]);
    let mut bytes = fs::read(&p).unwrap();
    // Batches here all have the same length; hit record bytes (covered by
    // the CRC) of a batch in the middle.
    let batch_len = 12 + i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let mid = (bytes.len() / batch_len / 2) * batch_len + 200;
    bytes[mid] ^= 0x01;
    fs::write(&p, &bytes).unwrap();
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), end_before);
    assert_eq!(log.segments().len(), bases.len());
}

#[test]
fn an_unclean_open_checkpoints_so_the_next_one_scans_only_the_last_segment() {
    let d = tempfile::tempdir().unwrap();
    let (bases, _) = write_unclean(d.path(), 400);
    fs::remove_file(d.path().join(RECOVERY_POINT)).unwrap();
    drop(PartitionLog::open(d.path(), small_segments()).unwrap());
    assert_eq!(
        recovery_point(d.path()),
        Some(*bases.last().unwrap()),
        "everything below the last segment was scanned and fsynced"
    );
}
