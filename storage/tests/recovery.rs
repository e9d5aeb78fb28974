//! Opening a log that was closed cleanly, dropped mid-flight, or damaged.
#![allow(clippy::unwrap_used)]

mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use common::*;
use kafka_protocol::records::Compression;
use storage::PartitionLog;

fn write_some(dir: &Path, batches: usize) -> (i64, Vec<Vec<u8>>) {
    let mut log = PartitionLog::open(dir, small_segments()).unwrap();
    let mut values = Vec::new();
    for i in 0..batches {
        let mut b = batch_with(3, 3_000, i as i64 * 10, Compression::None, None, i as u64);
        log.append(&mut b, 0, 0).unwrap();
        values.extend((0..3).map(|r| value_for(i as u64, r, 3_000)));
    }
    let end = log.log_end_offset();
    drop(log); // as if the process died: no close
    (end, values)
}

fn active_log(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

fn values(log: &PartitionLog) -> Vec<Vec<u8>> {
    read_all(log, log.log_start_offset())
        .into_iter()
        .map(|r| r.value.unwrap().to_vec())
        .collect()
}

#[test]
fn clean_close_reopens_with_everything_and_removes_the_marker() {
    let d = tempfile::tempdir().unwrap();
    let (end, vals) = write_some(d.path(), 300);
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    log.close().unwrap();
    assert!(d.path().join("clean-shutdown").exists());
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert!(!d.path().join("clean-shutdown").exists());
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(values(&log), vals);
    assert!(log.segments().len() > 2);
}

#[test]
fn a_torn_tail_is_cut_back_to_the_last_whole_batch() {
    let d = tempfile::tempdir().unwrap();
    let (end, vals) = write_some(d.path(), 50);
    let active = active_log(d.path());
    let good_len = fs::metadata(&active).unwrap().len();
    // Half a batch, as a write interrupted by a crash leaves it.
    let half = batch_with(3, 3_000, 0, Compression::None, None, 999);
    OpenOptions::new()
        .append(true)
        .open(&active)
        .unwrap()
        .write_all(&half[..half.len() / 2])
        .unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(fs::metadata(&active).unwrap().len(), good_len);
    assert_eq!(values(&log), vals);
    let info = log.append(&mut batch(1, 0), 0, 0).unwrap();
    assert_eq!(info.info().base_offset, end);
}

#[test]
fn a_corrupt_last_batch_is_dropped_and_the_rest_kept() {
    let d = tempfile::tempdir().unwrap();
    let (end, vals) = write_some(d.path(), 50);
    let active = active_log(d.path());
    let mut bytes = fs::read(&active).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    fs::write(&active, &bytes).unwrap();
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), end - 3);
    assert_eq!(values(&log), vals[..vals.len() - 3]);
}

#[test]
fn missing_or_garbage_index_files_are_rebuilt() {
    let d = tempfile::tempdir().unwrap();
    let (end, vals) = write_some(d.path(), 300);
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    let segs = log.segments();
    log.close().unwrap();
    fs::remove_file(&segs[0].offset_index_path).unwrap();
    fs::remove_file(&segs[0].time_index_path).unwrap();
    fs::write(&segs[1].offset_index_path, [0xffu8; 24]).unwrap();
    fs::write(&segs[1].time_index_path, [0x01u8; 7]).unwrap();
    fs::write(segs.last().unwrap().offset_index_path.clone(), [0x42u8; 16]).unwrap();
    let log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(values(&log), vals);
    for (i, s) in segs.iter().enumerate() {
        let probe = s.base_offset + 4;
        let r = log.read(probe, 1, end).unwrap();
        assert!(
            r.first_offset <= probe && probe < r.next_offset,
            "segment {i}"
        );
    }
    // Batch i holds timestamps 10i..10i+2 at offsets 3i..3i+2.
    let t = log.offset_for_timestamp(1_502).unwrap().unwrap();
    assert_eq!((t.timestamp, t.offset), (1_502, 452));
    let t = log.offset_for_timestamp(1_505).unwrap().unwrap();
    assert_eq!((t.timestamp, t.offset), (1_510, 453));
}

#[test]
fn damaged_checkpoints_snapshots_and_stray_files_do_not_stop_an_open() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    for i in 0..50 {
        log.append(&mut idem_batch(4, 0, i * 2, 2), 1, 0).unwrap();
        log.append(
            &mut batch_with(1, 40_000, 0, Compression::None, None, 0),
            1,
            0,
        )
        .unwrap();
    }
    let end = log.log_end_offset();
    log.close().unwrap();
    for e in fs::read_dir(d.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|e| e == "snapshot") {
            fs::write(&p, b"not a snapshot").unwrap();
        }
    }
    fs::write(d.path().join("leader-epoch-checkpoint"), b"0\n9\n").unwrap();
    fs::write(d.path().join("log-start-offset"), b"banana").unwrap();
    fs::write(d.path().join("00000000000000000000.snapshot.tmp"), b"junk").unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, end));
    assert_eq!(log.latest_epoch(), Some(1));
    assert!(!d.path().join("00000000000000000000.snapshot.tmp").exists());
    // Producer state was rebuilt from the log itself.
    assert!(matches!(
        log.append(&mut idem_batch(4, 0, 98, 2), 1, 0).unwrap(),
        storage::AppendOutcome::Duplicate(_)
    ));
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().ino()
}

/// The local object store links an uploaded segment's files instead of
/// copying them, so a damaged index must be rebuilt into a new file: the
/// linked object keeps its bytes and its size.
#[test]
fn a_damaged_index_of_a_sealed_segment_is_rebuilt_into_a_new_file_leaving_links_alone() {
    for damage in ["unordered", "ragged"] {
        let d = tempfile::tempdir().unwrap();
        let objects = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
        let mut values = Vec::new();
        for i in 0..200u64 {
            let mut b = batch_with(3, 3_000, i as i64, Compression::None, None, i);
            log.append(&mut b, 0, 0).unwrap();
            values.extend((0..3).map(|r| value_for(i, r, 3_000)));
        }
        let sealed = log.segments()[0].clone();
        assert!(sealed.sealed);
        log.close().unwrap();
        let index = sealed.offset_index_path.clone();
        let intact = fs::read(&index).unwrap();
        assert!(intact.len() >= 16, "the segment has index entries");
        let object = objects.path().join("segment.idx");
        fs::hard_link(&index, &object).unwrap();
        // Damage the shared inode in place, as a torn or garbled write would.
        let mut f = OpenOptions::new().write(true).open(&index).unwrap();
        match damage {
            "unordered" => {
                use std::os::unix::fs::FileExt;
                f.write_all_at(&u32::MAX.to_be_bytes(), 0).unwrap();
            }
            _ => {
                use std::io::Seek;
                f.seek(std::io::SeekFrom::End(0)).unwrap();
                f.write_all(&[1, 2, 3]).unwrap();
            }
        }
        drop(f);
        let linked = fs::read(&object).unwrap();

        let log = PartitionLog::open(d.path(), small_segments()).unwrap();
        assert_eq!(
            fs::read(&object).unwrap(),
            linked,
            "{damage}: the linked object is not rewritten"
        );
        assert_ne!(inode(&index), inode(&object), "{damage}: a new file");
        assert_eq!(
            fs::read(&index).unwrap(),
            intact,
            "{damage}: rebuilt as it was"
        );
        let got: Vec<Vec<u8>> = read_all(&log, 0)
            .into_iter()
            .map(|r| r.value.unwrap().to_vec())
            .collect();
        assert_eq!(got, values);
        assert!(fs::read_dir(d.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")));
    }
}

/// Snapshots are written without fsync; after a power loss one may be an
/// empty file under its final name. Producer state then comes from the
/// batch headers, so a retry is still recognised.
#[test]
fn an_empty_producer_snapshot_left_by_a_power_loss_is_ignored() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    let retry = idem_batch(9, 0, 0, 3);
    log.append(&mut retry.clone(), 0, 0).unwrap();
    log.close().unwrap();
    let snapshots: Vec<PathBuf> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .collect();
    assert!(!snapshots.is_empty());
    for p in &snapshots {
        fs::write(p, b"").unwrap();
    }
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    let again = log.append(&mut retry.clone(), 0, 0).unwrap();
    assert!(
        matches!(again, storage::AppendOutcome::Duplicate(_)),
        "{again:?}"
    );
}

/// Descriptors this process holds on files under `dir`.
fn open_files_under(dir: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

/// [`open_files_under`] once it is `want`, or after 5 s: a seal job marks
/// its flush done just before its thread drops the segment's handles.
fn open_files_settling_at(dir: &Path, want: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n = open_files_under(dir);
        if n == want || std::time::Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_sealed_segment_nobody_reads_keeps_only_its_log_file_open() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().canonicalize().unwrap();
    let mut log = PartitionLog::open(&dir, small_segments()).unwrap();
    let mut i = 0u64;
    while log.segments().len() < 6 {
        let mut b = batch_with(3, 3_000, 0, Compression::None, None, i);
        log.append(&mut b, 0, 0).unwrap();
        i += 1;
    }
    log.flush().unwrap();
    let sealed = log.segments().len() - 1;
    assert_eq!(
        open_files_settling_at(&dir, sealed + 3),
        sealed + 3,
        "1 per sealed, 3 active"
    );
    drop(log);
    let log = PartitionLog::open(&dir, small_segments()).unwrap();
    assert_eq!(
        open_files_settling_at(&dir, sealed + 3),
        sealed + 3,
        "the same after an open"
    );
    // Reading an old segment loads its indexes; they serve the read.
    let first = read_all(&log, 0).len();
    assert_eq!(first as u64, i * 3);
    assert!(open_files_under(&dir) > sealed + 3);
}
