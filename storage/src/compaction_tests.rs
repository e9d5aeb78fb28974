use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as Codec, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType,
};

use crate::config::{CompactionConfig, LogConfig};
use crate::log::{AppendOutcome, PartitionLog};
use crate::txn::ControlType;

pub(crate) const NOW: i64 = 1_800_000_000_000;
pub(crate) const HOUR: i64 = 3_600_000;

pub(crate) fn config() -> LogConfig {
    LogConfig {
        compacted: true,
        compaction: CompactionConfig {
            delete_retention_ms: HOUR as u64,
            min_dirty_ratio_ppm: 0,
            ..CompactionConfig::default()
        },
        ..LogConfig::default()
    }
}

/// One record: key, value (`None` = tombstone), timestamp.
pub(crate) type Rec<'a> = (&'a str, Option<&'a str>, i64);

pub(crate) fn encode(
    records: &[Rec],
    codec: Codec,
    producer: Option<(i64, i16, i32, bool)>,
) -> Vec<u8> {
    let (pid, epoch, seq, txn) = producer.unwrap_or((-1, -1, -1, false));
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v, ts))| Record {
            transactional: txn,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if seq < 0 { -1 } else { seq + i as i32 },
            timestamp: *ts,
            key: Some(Bytes::from(k.to_string())),
            value: v.map(|v| Bytes::from(v.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: codec,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).expect("encode");
    buf.to_vec()
}

pub(crate) fn append(log: &mut PartitionLog, mut batch: Vec<u8>) -> i64 {
    match log.append(&mut batch, 0, NOW).expect("append") {
        AppendOutcome::Appended(info) => info.base_offset,
        AppendOutcome::Duplicate(_) => panic!("not a retry"),
    }
}

/// Every record the log serves from its start: offset -> (key, value).
pub(crate) fn read_all(log: &PartitionLog) -> BTreeMap<i64, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let slice = log
            .read(offset, 1 << 20, log.log_end_offset())
            .expect("read");
        if slice.is_empty() {
            break;
        }
        let mut bytes = slice.read_to_bytes().expect("pread");
        for set in RecordBatchDecoder::decode_all(&mut bytes).expect("the batches decode") {
            for r in set.records {
                if r.control {
                    continue;
                }
                let key = String::from_utf8_lossy(&r.key.unwrap_or_default()).to_string();
                let value = r.value.map(|v| String::from_utf8_lossy(&v).to_string());
                out.insert(r.offset, (key, value));
            }
        }
        offset = slice.next_offset;
    }
    out
}

pub(crate) fn compact(log: &mut PartitionLog, now: i64) -> crate::CompactionReport {
    let job = log
        .plan_compaction(now, i64::MAX)
        .expect("a compaction is due");
    let done = job.run().expect("the run succeeds");
    log.install_compaction(done, now).expect("install")
}

/// Writes `rounds` rounds of one record per key, rolling after each round.
pub(crate) fn fill(log: &mut PartitionLog, keys: usize, rounds: usize, codec: Codec) {
    for round in 0..rounds {
        let values: Vec<(String, String)> = (0..keys)
            .map(|k| (format!("k{k}"), format!("v{round}-{k}")))
            .collect();
        let recs: Vec<Rec> = values
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_str()), NOW))
            .collect();
        // two batches per round, so a batch may lose some records only
        let (a, b) = recs.split_at(keys / 2);
        append(log, encode(a, codec, None));
        append(log, encode(b, codec, None));
        log.roll(NOW).expect("roll");
    }
    log.flush().expect("flush");
}

#[test]
fn the_latest_record_of_each_key_stays_at_its_offset_in_every_codec() {
    for codec in [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(dir.path(), config()).unwrap();
        fill(&mut log, 10, 5, codec);
        // round 5 overwrites keys k0..k4 only, in the active segment
        let recs: Vec<Rec> = (0..5).map(|_| ("k0", Some("active"), NOW)).collect();
        append(&mut log, encode(&recs, codec, None));
        let before = read_all(&log);
        let size_before = log.size_bytes();

        let report = compact(&mut log, NOW);

        assert!(report.segments >= 4, "{codec:?}: {report:?}");
        assert_eq!(report.records_removed, 40, "{codec:?}");
        let after = read_all(&log);
        // sealed segments: one record per key, the last round's, at its offset
        let sealed: BTreeMap<_, _> = after.iter().filter(|(o, _)| **o < 50).collect();
        assert_eq!(sealed.len(), 10, "{codec:?}: {sealed:?}");
        for (offset, (key, value)) in &sealed {
            assert_eq!(before.get(offset), Some(&(key.clone(), value.clone())));
            assert!(
                value.as_deref().unwrap_or("").starts_with("v4-"),
                "{value:?}"
            );
        }
        // the active segment is never touched
        let active: Vec<_> = after.iter().filter(|(o, _)| **o >= 50).collect();
        assert_eq!(active.len(), 5, "{codec:?}");
        assert!(log.size_bytes() < size_before, "{codec:?}");
        assert_eq!(log.log_end_offset(), 55);
    }
}

#[test]
fn tombstones_stay_for_delete_retention_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    let old = NOW - 2 * HOUR;
    append(
        &mut log,
        encode(
            &[("a", Some("1"), old), ("b", Some("1"), old)],
            Codec::None,
            None,
        ),
    );
    append(&mut log, encode(&[("a", None, old)], Codec::None, None));
    log.roll(NOW).unwrap();
    append(
        &mut log,
        encode(&[("b", Some("2"), NOW)], Codec::None, None),
    );
    append(
        &mut log,
        encode(&[("c", Some("1"), NOW)], Codec::None, None),
    );
    append(&mut log, encode(&[("c", None, NOW)], Codec::None, None));
    log.roll(NOW).unwrap();
    // in the active segment, never compacted
    append(
        &mut log,
        encode(&[("d", Some("1"), NOW)], Codec::None, None),
    );
    log.flush().unwrap();

    let report = compact(&mut log, NOW);
    let after = read_all(&log);
    // a's tombstone is older than delete.retention.ms: gone with a's value;
    // c's is recent: it stays, c's value goes
    assert_eq!(
        after.values().cloned().collect::<Vec<_>>(),
        vec![
            ("b".to_string(), Some("2".to_string())),
            ("c".to_string(), None),
            ("d".to_string(), Some("1".to_string()))
        ],
        "{report:?}"
    );
    assert_eq!(after.keys().copied().collect::<Vec<_>>(), vec![3, 5, 6]);

    // nothing new is written, but the kept tombstone falls due
    assert!(log.plan_compaction(NOW + HOUR - 1, i64::MAX).is_none());
    compact(&mut log, NOW + HOUR + 1);
    let after = read_all(&log);
    assert_eq!(after.keys().copied().collect::<Vec<_>>(), vec![3, 6]);
}

#[test]
fn the_last_batch_of_the_log_stays_so_readers_reach_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    let old = NOW - 2 * HOUR;
    append(
        &mut log,
        encode(&[("a", Some("1"), old)], Codec::None, None),
    );
    append(
        &mut log,
        encode(&[("a", Some("2"), old)], Codec::None, None),
    );
    append(&mut log, encode(&[("a", None, old)], Codec::None, None));
    // a quiet partition: its active segment rolled and is empty
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    compact(&mut log, NOW);
    // a's values go, its tombstone is old enough to go too, but it ends the
    // log: a reader at offset 1 finds it and reaches the log end
    assert_eq!(
        read_all(&log).into_iter().collect::<Vec<_>>(),
        vec![(2, ("a".to_string(), None))]
    );
    let slice = log.read(1, 1 << 20, log.log_end_offset()).unwrap();
    assert_eq!(slice.next_offset, 3);
}

#[test]
fn aborted_records_go_and_never_hide_a_committed_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    append(
        &mut log,
        encode(&[("k", Some("committed"), NOW)], Codec::None, None),
    );
    // a transaction writes k and aborts
    append(
        &mut log,
        encode(
            &[("k", Some("aborted"), NOW)],
            Codec::None,
            Some((7, 0, 0, true)),
        ),
    );
    log.append_marker(7, 0, ControlType::Abort, 0, 0, NOW)
        .unwrap();
    // another commits j
    append(
        &mut log,
        encode(
            &[("j", Some("in-txn"), NOW)],
            Codec::None,
            Some((7, 0, 1, true)),
        ),
    );
    log.append_marker(7, 0, ControlType::Commit, 0, 0, NOW)
        .unwrap();
    log.roll(NOW).unwrap();
    log.flush().unwrap();

    compact(&mut log, NOW);
    let after = read_all(&log);
    assert_eq!(
        after.into_iter().collect::<Vec<_>>(),
        vec![
            (0, ("k".to_string(), Some("committed".to_string()))),
            (3, ("j".to_string(), Some("in-txn".to_string()))),
        ]
    );
    // the markers stay: read_committed readers still learn of the abort
    assert_eq!(log.aborted_transactions(0, 10).len(), 1);
}

#[test]
fn an_open_transaction_bounds_what_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    append(
        &mut log,
        encode(&[("k", Some("1"), NOW)], Codec::None, None),
    );
    log.roll(NOW).unwrap();
    append(
        &mut log,
        encode(
            &[("t", Some("open"), NOW)],
            Codec::None,
            Some((9, 0, 0, true)),
        ),
    );
    log.roll(NOW).unwrap();
    append(
        &mut log,
        encode(&[("k", Some("2"), NOW)], Codec::None, None),
    );
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    // only the segment before the open transaction may be compacted, and
    // alone it holds nothing to remove
    let job = log.plan_compaction(NOW, i64::MAX).expect("due");
    assert_eq!(job.range(), (0, 1));
    let report = log.install_compaction(job.run().unwrap(), NOW).unwrap();
    assert_eq!(report.records_removed, 0);
    assert_eq!(read_all(&log).len(), 3);
}

#[test]
fn a_compacted_log_reopens_and_replicates_with_its_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    fill(&mut log, 6, 4, Codec::Lz4);
    compact(&mut log, NOW);
    let compacted = read_all(&log);
    let end = log.log_end_offset();
    log.close().unwrap();

    // recovery after a crash too: no clean-shutdown marker
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    assert_eq!(read_all(&log), compacted);
    assert_eq!(log.log_end_offset(), end);
    log.flush().unwrap();
    drop(log);
    std::fs::remove_file(dir.path().join(crate::files::CLEAN_SHUTDOWN_FILE)).ok();
    let log = PartitionLog::open(dir.path(), config()).unwrap();
    assert_eq!(read_all(&log), compacted);

    // a follower copies the compacted bytes, gaps and all
    let fdir = tempfile::tempdir().unwrap();
    let mut follower = PartitionLog::open(fdir.path(), config()).unwrap();
    let bytes = log
        .read(0, usize::MAX >> 1, end)
        .unwrap()
        .read_to_bytes()
        .unwrap();
    follower.append_replicated(&bytes, NOW).unwrap();
    assert_eq!(read_all(&follower), compacted);
    assert_eq!(follower.log_end_offset(), end);

    // a topic that is not compacted refuses a gap from its leader
    let pdir = tempfile::tempdir().unwrap();
    let mut plain = PartitionLog::open(pdir.path(), LogConfig::default()).unwrap();
    let err = plain.append_replicated(&bytes, NOW).unwrap_err();
    assert!(
        matches!(err, crate::StorageError::ReplicaOffsetMismatch { .. }),
        "{err}"
    );
}

#[test]
fn a_run_planned_before_a_truncation_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    fill(&mut log, 4, 3, Codec::None);
    let before = read_all(&log);
    let job = log.plan_compaction(NOW, i64::MAX).expect("due");
    let done = job.run().unwrap();
    log.truncate_to(10).unwrap();
    let report = log.install_compaction(done, NOW).unwrap();
    assert_eq!(report.segments, 0);
    let kept: BTreeMap<_, _> = before.into_iter().filter(|(o, _)| *o < 10).collect();
    assert_eq!(read_all(&log), kept);
    assert!(!dir.path().join(super::CLEANING_DIR).exists());
}

#[test]
fn the_dirty_ratio_and_the_lag_decide_when_a_run_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.compaction.min_dirty_ratio_ppm = 500_000;
    cfg.compaction.min_lag_ms = 60_000;
    let mut log = PartitionLog::open(dir.path(), cfg).unwrap();
    fill(&mut log, 4, 2, Codec::None);
    // too young for min.compaction.lag.ms
    assert!(log.plan_compaction(NOW + 59_999, i64::MAX).is_none());
    compact(&mut log, NOW + 60_000);
    let figures = log.cleaner_figures();
    assert_eq!(figures.dirty_bytes, 0);
    assert_eq!(figures.compacted_below, 8);
    assert_eq!(figures.totals.runs, 1);
    assert_eq!(figures.totals.records_removed, 4);
    // a little new data is below the ratio
    append(
        &mut log,
        encode(&[("k0", Some("x"), NOW)], Codec::None, None),
    );
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let figures = log.cleaner_figures();
    assert!(
        figures.dirty_ratio > 0.0 && figures.dirty_ratio < 0.5,
        "{figures:?}"
    );
    assert!(log.plan_compaction(NOW + 60_000, i64::MAX).is_none());
    // the checkpoint survives a restart
    log.close().unwrap();
    let log = PartitionLog::open(dir.path(), config()).unwrap();
    assert_eq!(log.cleaner_figures().compacted_below, 8);
}

#[test]
fn a_topic_that_is_not_compacted_is_never_planned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    append(
        &mut log,
        encode(&[("k", Some("1"), NOW)], Codec::None, None),
    );
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    assert!(log.plan_compaction(NOW, i64::MAX).is_none());
}

#[test]
fn a_run_keeping_tombstones_keeps_even_old_ones_and_schedules_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    let old = NOW - 2 * HOUR;
    append(
        &mut log,
        encode(&[("a", Some("1"), old)], Codec::None, None),
    );
    append(&mut log, encode(&[("a", None, old)], Codec::None, None));
    log.roll(NOW).unwrap();
    append(
        &mut log,
        encode(&[("b", Some("1"), NOW)], Codec::None, None),
    );
    log.flush().unwrap();
    let job = log.plan_compaction(NOW, i64::MAX).expect("due");
    let report = log
        .install_compaction(job.keeping_tombstones().run().unwrap(), NOW)
        .unwrap();
    assert_eq!(
        report.records_removed, 1,
        "a's value goes, its tombstone stays"
    );
    assert_eq!(
        read_all(&log).into_iter().collect::<Vec<_>>(),
        vec![
            (1, ("a".to_string(), None)),
            (2, ("b".to_string(), Some("1".to_string())))
        ]
    );
    // nothing falls due: no run every tick for tombstones it must keep
    assert!(log.plan_compaction(NOW + 10 * HOUR, i64::MAX).is_none());
}

#[test]
fn only_what_was_written_since_the_last_run_is_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config()).unwrap();
    fill(&mut log, 4, 2, Codec::None);
    compact(&mut log, NOW);
    let first = read_all(&log);
    // new values of half the keys: the older values of exactly those go
    append(
        &mut log,
        encode(
            &[("k0", Some("new"), NOW), ("k1", Some("new"), NOW)],
            Codec::None,
            None,
        ),
    );
    log.roll(NOW).unwrap();
    append(
        &mut log,
        encode(&[("k9", Some("tail"), NOW)], Codec::None, None),
    );
    log.flush().unwrap();
    let report = compact(&mut log, NOW);
    assert_eq!(report.records_removed, 2);
    let after = read_all(&log);
    for (o, (k, v)) in &first {
        let superseded = k == "k0" || k == "k1";
        assert_eq!(after.contains_key(o), !superseded, "{k}={v:?} at {o}");
    }
}
