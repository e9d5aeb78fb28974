use super::*;

fn payload(i: u64) -> Vec<u8> {
    format!("entry-{i}").into_bytes()
}

fn write(dir: &Path, seg: u64, range: std::ops::RangeInclusive<u64>) -> Wal {
    let (mut wal, _) = Wal::open(dir, seg, None).unwrap();
    for i in range {
        wal.append_entry(i, &payload(i)).unwrap();
    }
    wal.sync().unwrap();
    wal
}

fn indexes(rec: &Recovered) -> Vec<u64> {
    rec.entries.iter().map(|e| e.0).collect()
}

#[test]
fn entries_survive_reopen_across_segment_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write(dir.path(), 64, 1..=20);
    assert!(wal.segment_count() > 3, "small segments roll");
    drop(wal);
    let (_, rec) = Wal::open(dir.path(), 64, None).unwrap();
    assert_eq!(indexes(&rec), (1..=20).collect::<Vec<_>>());
    assert_eq!(rec.entries[4].1, payload(5));
}

#[test]
fn a_torn_tail_is_cut_off_at_the_last_whole_record() {
    let dir = tempfile::tempdir().unwrap();
    drop(write(dir.path(), 1 << 20, 1..=5));
    let path = dir.path().join(segment_name(1));
    let full = fs::read(&path).unwrap();
    // a crash in the middle of writing entry 5
    fs::write(&path, &full[..full.len() - 3]).unwrap();
    let (mut wal, rec) = Wal::open(dir.path(), 1 << 20, None).unwrap();
    assert_eq!(indexes(&rec), vec![1, 2, 3, 4]);
    assert!(rec.truncated_bytes > 0);
    wal.append_entry(5, b"again").unwrap();
    wal.sync().unwrap();
    drop(wal);
    let (_, rec) = Wal::open(dir.path(), 1 << 20, None).unwrap();
    assert_eq!(indexes(&rec), vec![1, 2, 3, 4, 5]);
    assert_eq!(rec.entries[4].1, b"again");
}

#[test]
fn a_flipped_bit_in_the_tail_record_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    drop(write(dir.path(), 1 << 20, 1..=3));
    let path = dir.path().join(segment_name(1));
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    fs::write(&path, &bytes).unwrap();
    let (_, rec) = Wal::open(dir.path(), 1 << 20, None).unwrap();
    assert_eq!(indexes(&rec), vec![1, 2]);
}

#[test]
fn corruption_before_the_last_segment_is_an_error_not_silent_loss() {
    let dir = tempfile::tempdir().unwrap();
    drop(write(dir.path(), 64, 1..=10));
    let path = dir.path().join(segment_name(1));
    let mut bytes = fs::read(&path).unwrap();
    bytes[HEADER + 1] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    let err = Wal::open(dir.path(), 64, None).err().expect("must refuse");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("corrupt"), "{err}");
}

#[test]
fn truncation_removes_the_tail_durably_even_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut wal = write(dir.path(), 64, 1..=20);
    wal.truncate_from(7).unwrap();
    wal.append_entry(7, b"new-7").unwrap();
    wal.sync().unwrap();
    drop(wal);
    let (mut wal, rec) = Wal::open(dir.path(), 64, None).unwrap();
    assert_eq!(indexes(&rec), (1..=7).collect::<Vec<_>>());
    assert_eq!(rec.entries[6].1, b"new-7");
    wal.truncate_from(1).unwrap();
    drop(wal);
    let (_, rec) = Wal::open(dir.path(), 64, None).unwrap();
    assert!(rec.entries.is_empty());
}

#[test]
fn purging_drops_whole_segments_and_hides_purged_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut wal = write(dir.path(), 64, 1..=20);
    let before = wal.segment_count();
    wal.remove_segments_upto(12).unwrap();
    assert!(wal.segment_count() < before);
    drop(wal);
    let (_, rec) = Wal::open(dir.path(), 64, Some(12)).unwrap();
    assert_eq!(indexes(&rec), (13..=20).collect::<Vec<_>>());
}

#[test]
fn the_last_committed_hint_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let mut wal = write(dir.path(), 1 << 20, 1..=3);
    wal.append_committed(b"c2").unwrap();
    wal.append_committed(b"c3").unwrap();
    wal.append_entry(4, &payload(4)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    let (_, rec) = Wal::open(dir.path(), 1 << 20, None).unwrap();
    assert_eq!(rec.committed.as_deref(), Some(&b"c3"[..]));
    assert_eq!(indexes(&rec), vec![1, 2, 3, 4]);
}

#[test]
fn committed_hints_on_a_full_segment_do_not_clobber_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut wal = write(dir.path(), 64, 1..=6);
    for _ in 0..10 {
        wal.append_committed(b"hint").unwrap();
    }
    for i in 7..=12 {
        wal.append_entry(i, &payload(i)).unwrap();
        wal.append_committed(b"hint").unwrap();
    }
    wal.sync().unwrap();
    wal.remove_segments_upto(3).unwrap();
    drop(wal);
    let (_, rec) = Wal::open(dir.path(), 64, Some(3)).unwrap();
    assert_eq!(indexes(&rec), (4..=12).collect::<Vec<_>>());
}

#[test]
fn a_gap_between_entries_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(dir.path(), 1 << 20, None).unwrap();
    wal.append_entry(1, b"a").unwrap();
    wal.append_entry(3, b"c").unwrap();
    wal.sync().unwrap();
    drop(wal);
    assert!(Wal::open(dir.path(), 1 << 20, None).is_err());
}
