use std::path::Path;

use kafka_protocol::records::Compression as Codec;

use super::*;
use crate::compaction::tests::{append, compact, config, encode, fill, read_all, NOW};
use crate::config::LogConfig;
use crate::log::PartitionLog;
use crate::txn::ControlType;

fn span(base: i64, next: i64, size: u64) -> Span {
    Span { base, next, size }
}

fn limits(max_bytes: u64) -> GroupLimits {
    GroupLimits {
        max_bytes,
        index_interval: 4096,
        index_capacity: 1 << 20,
    }
}

#[test]
fn groups_hold_what_fits_in_segment_bytes_and_never_reorder() {
    let segs = [
        span(0, 10, 10),
        span(10, 20, 10),
        span(20, 30, 10),
        span(30, 40, 5),
    ];
    assert_eq!(group(&segs, limits(25)), vec![0..2, 2..4]);
    assert_eq!(group(&segs, limits(35)), vec![0..4]);
    // nothing fits with anything: one for one
    assert_eq!(group(&segs, limits(0)), vec![0..1, 1..2, 2..3, 3..4]);
    // a segment larger than the limit stays alone, the rest still merge
    let segs = [span(0, 10, 30), span(10, 20, 5), span(20, 30, 5)];
    assert_eq!(group(&segs, limits(25)), vec![0..1, 1..3]);
    assert!(group(&[], limits(25)).is_empty());
}

#[test]
fn a_group_never_spans_more_offsets_than_a_relative_offset_holds() {
    let max = i64::from(i32::MAX);
    let fits = [span(0, 100, 1), span(100, max, 1)];
    assert_eq!(group(&fits, limits(1 << 30)), vec![0..2]);
    let too_far = [
        span(0, 100, 1),
        span(100, max + 1, 1),
        span(max + 1, max + 5, 1),
    ];
    assert_eq!(group(&too_far, limits(1 << 30)), vec![0..1, 1..3]);
}

#[test]
fn a_group_never_needs_more_index_entries_than_the_index_holds() {
    let segs = [span(0, 1, 10), span(1, 2, 10), span(2, 3, 10)];
    let small_index = GroupLimits {
        max_bytes: 1000,
        index_interval: 10,
        index_capacity: 3,
    };
    assert_eq!(group(&segs, small_index), vec![0..2, 2..3]);
}

#[test]
fn the_journal_round_trips_and_refuses_groups_that_do_not_hold_together() {
    let groups = vec![
        Group {
            base: 0,
            end: 30,
            olds: vec![0, 10, 20],
        },
        Group {
            base: 30,
            end: 35,
            olds: vec![30],
        },
    ];
    let text = encode_journal(&groups);
    assert_eq!(decode_journal(text.as_bytes()), Some(groups));
    for bad in [
        "v1\n0 30 10 20\n",   // the first old segment is not the base
        "v1\n0 30 0 20 10\n", // out of order
        "v1\n0 20 0 20\n",    // an old segment at the end
        "v1\n0 x 0\n",
        "v2\n0 10 0\n",
        "",
    ] {
        assert_eq!(decode_journal(bad.as_bytes()), None, "{bad:?}");
    }
}

/// Five sealed segments of keyed records and one holding an aborted
/// transaction, then a record in the active segment:
/// `[0,6) [6,12) [12,18) [18,20) [20,26) [26,32)`, active from 32.
fn scenario(dir: &Path, cfg: LogConfig) -> PartitionLog {
    let mut log = PartitionLog::open(dir, cfg).unwrap();
    fill(&mut log, 6, 3, Codec::Lz4);
    append(
        &mut log,
        encode(
            &[("k0", Some("aborted"), NOW)],
            Codec::None,
            Some((7, 0, 0, true)),
        ),
    );
    log.append_marker(7, 0, ControlType::Abort, 0, 0, NOW)
        .unwrap();
    log.roll(NOW).unwrap();
    fill(&mut log, 6, 2, Codec::None);
    append(
        &mut log,
        encode(&[("k1", Some("active"), NOW)], Codec::None, None),
    );
    log.flush().unwrap();
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset).collect();
    assert_eq!(bases, vec![0, 6, 12, 18, 20, 26, 32]);
    log
}

fn bases(log: &PartitionLog) -> Vec<i64> {
    log.segments().iter().map(|s| s.base_offset).collect()
}

/// Segments follow each other without overlap, each within its range.
fn assert_tiled(log: &PartitionLog) {
    let segs = log.segments();
    for w in segs.windows(2) {
        assert!(
            w[0].last_offset < w[1].base_offset,
            "overlap: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<i64> {
    let mut out: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            files::parse_offset_name(&name)
                .filter(|(_, x)| *x == ext)
                .map(|(b, _)| b)
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn a_merged_run_serves_record_for_record_what_a_one_for_one_run_serves() {
    let one_dir = tempfile::tempdir().unwrap();
    let mut one = scenario(one_dir.path(), config());
    let job = one
        .plan_compaction(NOW, i64::MAX)
        .expect("due")
        .merging_at_most(0);
    let one_report = one.install_compaction(job.run().unwrap(), NOW).unwrap();
    assert_eq!(bases(&one), vec![0, 6, 12, 18, 20, 26, 32]);

    let dir = tempfile::tempdir().unwrap();
    let mut log = scenario(dir.path(), config());
    let before = read_all(&log);
    let report = compact(&mut log, NOW);

    // the same records at the same offsets, the same bytes, the same
    // aborted transaction; six sealed segments became one
    assert_eq!(read_all(&log), read_all(&one));
    assert_eq!(log.size_bytes(), one.size_bytes());
    assert_eq!(log.log_end_offset(), 33);
    assert_eq!(report.records_removed, one_report.records_removed);
    assert!(report.records_removed > 0 && read_all(&log).len() < before.len());
    assert_eq!((report.segments, report.segments_after), (6, 1));
    assert_eq!(bases(&log), vec![0, 32]);
    let aborted = log.aborted_transactions(0, 33);
    assert_eq!(aborted, one.aborted_transactions(0, 33));
    assert_eq!(aborted.len(), 1);
    // on disk: one sealed segment, whose aborted-transaction index took
    // over the one of the segment merged into it
    assert_eq!(files_with_ext(dir.path(), "log"), vec![0, 32]);
    assert_eq!(files_with_ext(dir.path(), "txnindex"), vec![0]);
    assert!(!dir.path().join(JOURNAL_FILE).exists());

    // a reopen after a crash (no clean close) reads the same
    let served = read_all(&log);
    drop(log);
    let log = PartitionLog::open(dir.path(), config()).unwrap();
    assert_eq!(read_all(&log), served);
    assert_eq!(log.aborted_transactions(0, 33), aborted);
    assert_eq!(bases(&log), vec![0, 32]);
}

#[test]
fn groups_stop_at_the_size_limit_and_a_later_run_merges_further() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = scenario(dir.path(), config());
    let sizes: Vec<u64> = log.segments().iter().map(|s| s.size).collect();
    let job = log
        .plan_compaction(NOW, i64::MAX)
        .expect("due")
        .merging_at_most(sizes[0] + sizes[1]);
    let before = read_all(&log);
    let report = log.install_compaction(job.run().unwrap(), NOW).unwrap();
    // the first two fit together, the third does not join them
    let after = bases(&log);
    assert_eq!(after[..2], [0, 12]);
    assert!(report.segments_after < report.segments, "{report:?}");
    assert!(after.len() < 7 && after.len() > 2, "{after:?}");
    assert_tiled(&log);
    let compacted = read_all(&log);
    assert!(compacted.iter().all(|(o, r)| before.get(o) == Some(r)));

    // the shrunk segments fit together in a later run: no record changes
    append(
        &mut log,
        encode(&[("new", Some("1"), NOW)], Codec::None, None),
    );
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    compact(&mut log, NOW);
    assert_eq!(bases(&log), vec![0, 34]);
    // (k1's record in the segment that was active goes over its older one)
    let mut expected = compacted;
    expected.retain(|o, (k, _)| k != "k1" || *o >= 32);
    expected.insert(33, ("new".into(), Some("1".into())));
    assert_eq!(read_all(&log), expected);
}

#[test]
fn a_crash_before_the_journal_leaves_the_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = scenario(dir.path(), config());
    let before = read_all(&log);
    let done = log.plan_compaction(NOW, i64::MAX).expect("due").run();
    assert!(done.is_ok());
    assert!(dir.path().join(crate::cleaner::CLEANING_DIR).exists());
    drop(log);
    let log = PartitionLog::open(dir.path(), config()).unwrap();
    assert_eq!(read_all(&log), before);
    assert_eq!(bases(&log), vec![0, 6, 12, 18, 20, 26, 32]);
    assert!(!dir.path().join(crate::cleaner::CLEANING_DIR).exists());
}

/// A run merging the scenario's six sealed segments in two groups.
fn two_group_run(log: &PartitionLog) -> crate::compaction::Compacted {
    let sizes: Vec<u64> = log.segments().iter().map(|s| s.size).collect();
    log.plan_compaction(NOW, i64::MAX)
        .expect("due")
        .merging_at_most(sizes[..3].iter().sum())
        .run()
        .unwrap()
}

#[test]
fn a_crash_at_any_step_of_an_install_reopens_to_the_whole_compacted_log() {
    let reference_dir = tempfile::tempdir().unwrap();
    let mut reference = scenario(reference_dir.path(), config());
    let done = two_group_run(&reference);
    reference.install_compaction(done, NOW).unwrap();
    let expected = read_all(&reference);
    let expected_bases = bases(&reference);
    let expected_aborted = reference.aborted_transactions(0, 33);
    assert_eq!(expected_bases.len(), 3, "two groups: {expected_bases:?}");
    assert_eq!(expected_aborted.len(), 1);
    drop(reference);

    let mut crashes = 0;
    for step in [
        Step::Journal,
        Step::TxnIndex,
        Step::IndexesRemoved,
        Step::LogRenamed,
        Step::IndexMoved,
        Step::OldFileDeleted,
        Step::Synced,
    ] {
        for nth in 0.. {
            let dir = tempfile::tempdir().unwrap();
            let mut log = scenario(dir.path(), config());
            let done = two_group_run(&log);
            CRASH_AT.with(|c| c.set(Some((step, nth))));
            let installed = log.install_compaction(done, NOW);
            let crashed = CRASH_AT.with(|c| c.replace(None)).is_none();
            if !crashed {
                installed.expect("an install that did not crash succeeds");
                break;
            }
            crashes += 1;
            let what = format!("crash at {step:?} #{nth}");
            assert!(installed.is_err(), "{what}");
            assert!(dir.path().join(JOURNAL_FILE).exists(), "{what}");
            assert!(
                log.append(
                    &mut encode(&[("x", Some("y"), NOW)], Codec::None, None),
                    0,
                    NOW
                )
                .is_err(),
                "{what}: the log must stay offline"
            );
            drop(log);

            let mut log = PartitionLog::open(dir.path(), config()).unwrap();
            assert_eq!(read_all(&log), expected, "{what}");
            assert_eq!(bases(&log), expected_bases, "{what}");
            assert_tiled(&log);
            assert_eq!(log.log_end_offset(), 33, "{what}");
            assert_eq!(log.aborted_transactions(0, 33), expected_aborted, "{what}");
            assert_eq!(files_with_ext(dir.path(), "log"), expected_bases, "{what}");
            for ext in ["index", "timeindex"] {
                assert_eq!(
                    files_with_ext(dir.path(), ext),
                    expected_bases,
                    "{what}: {ext}"
                );
            }
            assert!(!dir.path().join(JOURNAL_FILE).exists(), "{what}");
            assert!(
                !dir.path().join(crate::cleaner::CLEANING_DIR).exists(),
                "{what}"
            );
            // and it goes on: appends, reopens cleanly
            append(
                &mut log,
                encode(&[("after", Some("1"), NOW)], Codec::None, None),
            );
            log.close().unwrap();
            let log = PartitionLog::open(dir.path(), config()).unwrap();
            assert_eq!(read_all(&log).len(), expected.len() + 1, "{what}");
        }
    }
    // every step was reached at least once, several files deleted per group
    assert!(crashes >= 7 + 2 * 4, "{crashes} crashes simulated");
}

#[test]
fn an_unreadable_journal_is_dropped_and_the_log_opens_as_found() {
    let dir = tempfile::tempdir().unwrap();
    let log = scenario(dir.path(), config());
    let before = read_all(&log);
    drop(log);
    std::fs::write(dir.path().join(JOURNAL_FILE), b"garbage").unwrap();
    let log = PartitionLog::open(dir.path(), config()).unwrap();
    assert_eq!(read_all(&log), before);
    assert!(!dir.path().join(JOURNAL_FILE).exists());
}
