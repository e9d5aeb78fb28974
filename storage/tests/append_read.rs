//! What producers and consumers rely on: appends get dense offsets, bad
//! input is refused whole, reads return whole batches as stored.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use storage::batch::{self, BatchHeader};
use storage::{AppendOutcome, LogConfig, PartitionLog, StorageError, TimestampType};

fn open(dir: &std::path::Path) -> PartitionLog {
    PartitionLog::open(dir, LogConfig::default()).unwrap()
}

fn appended(o: AppendOutcome) -> storage::AppendInfo {
    match o {
        AppendOutcome::Appended(i) => i,
        AppendOutcome::Duplicate(i) => panic!("unexpected duplicate {i:?}"),
    }
}

#[test]
fn appends_get_dense_offsets_and_records_read_back_intact() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let mut expected = Vec::new();
    for (tag, n) in [(1u64, 3usize), (2, 1), (3, 10)] {
        let mut b = batch_with(n, 40, 5_000, Compression::None, None, tag);
        let info = appended(log.append(&mut b, 0, 9_000).unwrap());
        assert_eq!(info.base_offset, expected.len() as i64);
        assert_eq!(info.last_offset, (expected.len() + n - 1) as i64);
        assert_eq!(info.record_count, n as u32);
        assert_eq!(info.log_append_time_ms, -1, "CreateTime topics report -1");
        expected.extend((0..n).map(|i| value_for(tag, i, 40)));
    }
    assert_eq!(log.log_end_offset(), 14);
    let got = read_all(&log, 0);
    let offsets: Vec<i64> = got.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..14).collect::<Vec<_>>());
    let values: Vec<Vec<u8>> = got
        .iter()
        .map(|r| r.value.clone().unwrap().to_vec())
        .collect();
    assert_eq!(values, expected);
}

#[test]
fn every_compression_codec_is_stored_as_sent_and_decodes() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for (tag, c) in codecs.iter().enumerate() {
        let mut b = batch_with(20, 100, 1_000, *c, None, tag as u64);
        let sent = b.clone();
        let info = appended(log.append(&mut b, 3, 2_000).unwrap());
        let slice = log
            .read(info.base_offset, 1 << 20, log.log_end_offset())
            .unwrap();
        let stored = slice.read_to_bytes().unwrap();
        assert_eq!(stored.len(), sent.len());
        // Only base offset (0..8) and leader epoch (12..16) may differ.
        assert_eq!(stored[8..12], sent[8..12]);
        assert_eq!(stored[16..], sent[16..], "codec {c:?} bytes changed");
        let sets = RecordBatchDecoder::decode_all(&mut stored.clone()).unwrap();
        assert_eq!(sets[0].compression, *c);
        assert_eq!(sets[0].records.len(), 20);
        assert_eq!(sets[0].records[0].offset, info.base_offset);
    }
}

#[test]
fn base_offset_and_leader_epoch_are_stamped_and_crc_stays_valid() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let mut first = batch(5, 10);
    log.append(&mut first, 7, 0).unwrap();
    let mut b = batch(2, 10);
    log.append(&mut b, 7, 0).unwrap();
    let bytes = log.read(5, 1 << 20, 100).unwrap().read_to_bytes().unwrap();
    let h = BatchHeader::decode(&bytes).unwrap();
    assert_eq!(h.base_offset, 5);
    assert_eq!(h.partition_leader_epoch, 7);
    assert_eq!(batch::compute_crc(&bytes), h.crc);
}

#[test]
fn log_append_time_topic_stamps_max_timestamp_and_recomputes_crc() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(d.path(), cfg).unwrap();
    let mut b = batch(3, 100);
    let info = appended(log.append(&mut b, 0, 777_000).unwrap());
    assert_eq!(info.log_append_time_ms, 777_000);
    assert_eq!(info.max_timestamp, 777_000);
    let bytes = log.read(0, 1 << 20, 3).unwrap().read_to_bytes().unwrap();
    let h = BatchHeader::decode(&bytes).unwrap();
    assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(h.max_timestamp, 777_000);
    let sets = RecordBatchDecoder::decode_all(&mut bytes.clone()).unwrap();
    assert_eq!(
        sets[0].records.len(),
        3,
        "CRC recomputed, so the batch still decodes"
    );
}

#[test]
fn several_batches_in_one_payload_are_appended_together() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let mut payload = batch(2, 1);
    payload.extend(batch(3, 1));
    payload.extend(batch(4, 1));
    let info = appended(log.append(&mut payload, 0, 0).unwrap());
    assert_eq!(
        (info.base_offset, info.last_offset, info.record_count),
        (0, 8, 9)
    );
    assert_eq!(read_all(&log, 0).len(), 9);
}

fn assert_untouched(log: &PartitionLog, end: i64, size: u64) {
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.segments().last().unwrap().size, size);
}

#[test]
fn a_bad_batch_anywhere_in_the_payload_rejects_all_of_it() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    log.append(&mut batch(1, 1), 0, 0).unwrap();
    let size = log.segments()[0].size;

    let good = batch(2, 1);
    let mut bad_crc = batch(3, 1);
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;
    let mut payload = [good.clone(), bad_crc].concat();
    let err = log.append(&mut payload, 0, 0).unwrap_err();
    assert!(matches!(err, StorageError::CorruptBatch { .. }), "{err}");
    assert_untouched(&log, 1, size);

    let mut truncated = [good.clone(), batch(3, 1)].concat();
    truncated.truncate(truncated.len() - 5);
    assert!(matches!(
        log.append(&mut truncated, 0, 0).unwrap_err(),
        StorageError::CorruptBatch { .. }
    ));
    assert_untouched(&log, 1, size);

    let mut v1 = batch(1, 1);
    v1[16] = 1;
    assert!(matches!(
        log.append(&mut v1, 0, 0).unwrap_err(),
        StorageError::UnsupportedMagic { magic: 1, .. }
    ));
    assert!(matches!(
        log.append(&mut [], 0, 0).unwrap_err(),
        StorageError::InvalidRecord { .. }
    ));
    assert_untouched(&log, 1, size);
}

fn set_attributes(b: &mut [u8], attrs: i16) {
    b[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = batch::compute_crc(b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn control_batches_from_producers_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let mut control = batch(1, 0);
    set_attributes(&mut control, 1 << 5);
    assert!(matches!(
        log.append(&mut control, 0, 0).unwrap_err(),
        StorageError::InvalidRecord { .. }
    ));
    let mut bad_codec = batch(1, 0);
    set_attributes(&mut bad_codec, 6);
    assert!(matches!(
        log.append(&mut bad_codec, 0, 0).unwrap_err(),
        StorageError::UnsupportedCompression { codec: 6, .. }
    ));
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn batches_over_max_message_bytes_are_too_large() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        max_message_bytes: 2_000,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(d.path(), cfg).unwrap();
    let mut big = batch_with(10, 300, 0, Compression::None, None, 0);
    let err = log.append(&mut big, 0, 0).unwrap_err();
    assert!(
        matches!(err, StorageError::RecordTooLarge { max: 2_000, .. }),
        "{err}"
    );
    let mut ok = batch_with(2, 300, 0, Compression::None, None, 0);
    log.append(&mut ok, 0, 0).unwrap();
}

fn sized_batches(log: &mut PartitionLog, count: usize) -> Vec<usize> {
    (0..count)
        .map(|i| {
            let mut b = batch_with(1, 1_000, i as i64, Compression::None, None, i as u64);
            log.append(&mut b, 0, 0).unwrap();
            b.len()
        })
        .collect()
}

#[test]
fn read_returns_whole_batches_up_to_max_bytes_but_at_least_one() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let lens = sized_batches(&mut log, 10);
    let s = log.read(0, lens[0] + lens[1] + 10, 10).unwrap();
    assert_eq!(s.len, lens[0] + lens[1]);
    assert_eq!((s.first_offset, s.next_offset), (0, 2));
    let s = log.read(3, 10, 10).unwrap();
    assert_eq!(
        s.len, lens[3],
        "the first batch comes whole even above max_bytes"
    );
    assert_eq!(s.next_offset, 4);
    let s = log.read(0, 1 << 30, 10).unwrap();
    assert_eq!(s.len, lens.iter().sum::<usize>());
}

#[test]
fn read_stops_before_the_upper_bound_and_starts_at_the_batch_holding_the_offset() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    log.append(&mut batch(5, 0), 0, 0).unwrap();
    log.append(&mut batch(5, 0), 0, 0).unwrap();
    log.append(&mut batch(5, 0), 0, 0).unwrap();
    let s = log.read(7, 1 << 20, 15).unwrap();
    assert_eq!((s.first_offset, s.next_offset), (5, 15));
    let s = log.read(0, 1 << 20, 10).unwrap();
    assert_eq!(s.next_offset, 10, "high watermark 10 hides the third batch");
    let s = log.read(10, 1 << 20, 10).unwrap();
    assert!(s.is_empty());
    let s = log.read(0, 1 << 20, 7).unwrap();
    assert_eq!(
        s.next_offset, 5,
        "a batch straddling the bound is not returned"
    );
}

#[test]
fn read_at_log_end_is_empty_and_outside_the_log_is_out_of_range() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    log.append(&mut batch(3, 0), 0, 0).unwrap();
    let s = log.read(3, 1 << 20, 3).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.next_offset, 3);
    assert!(matches!(
        log.read(4, 100, 10).unwrap_err(),
        StorageError::OffsetOutOfRange {
            offset: 4,
            log_start: 0,
            log_end: 3
        }
    ));
    assert!(matches!(
        log.read(-1, 100, 10).unwrap_err(),
        StorageError::OffsetOutOfRange { .. }
    ));
}

#[test]
fn segments_roll_at_segment_bytes_and_reads_cross_them() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    for i in 0..300u64 {
        let mut b = batch_with(4, 4_000, i as i64, Compression::None, None, i);
        log.append(&mut b, 0, 0).unwrap();
    }
    let segs = log.segments();
    assert!(segs.len() >= 4, "{} segments", segs.len());
    for w in segs.windows(2) {
        assert!(w[0].sealed);
        assert!(w[0].size <= 1 << 20);
        assert_eq!(w[0].last_offset + 1, w[1].base_offset);
    }
    assert!(!segs.last().unwrap().sealed);
    let all = read_all(&log, 0);
    assert_eq!(all.len(), 1_200);
    assert!(all.iter().enumerate().all(|(i, r)| r.offset == i as i64));
    // Random access lands on the right batch in every segment.
    for off in [0i64, 333, 601, 1_199] {
        let s = log.read(off, 1, 1_200).unwrap();
        assert!(s.first_offset <= off && off < s.next_offset);
    }
}

#[test]
fn segment_ms_rolls_an_old_active_segment_on_tick() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: Some(1_000),
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(d.path(), cfg).unwrap();
    log.tick(0).unwrap();
    assert_eq!(log.segments().len(), 1, "an empty segment never rolls");
    log.append(&mut batch(1, 0), 0, 10_000).unwrap();
    log.tick(10_500).unwrap();
    assert_eq!(log.segments().len(), 1);
    log.tick(11_000).unwrap();
    assert_eq!(log.segments().len(), 2);
    assert!(log.segments()[0].sealed);
}

#[test]
fn flush_messages_and_flush_ms_decide_when_appends_are_fsynced() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_messages: Some(5),
        flush_ms: Some(100),
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(d.path(), cfg).unwrap();
    log.append(&mut batch(3, 0), 0, 1_000).unwrap();
    assert_eq!(log.flushed_offset(), 0);
    log.append(&mut batch(3, 0), 0, 1_010).unwrap();
    assert_eq!(log.flushed_offset(), 6, "five records reached: fsynced");
    log.append(&mut batch(1, 0), 0, 1_020).unwrap();
    log.tick(1_050).unwrap();
    assert_eq!(log.flushed_offset(), 6);
    log.tick(1_120).unwrap();
    assert_eq!(log.flushed_offset(), 7, "flush.ms elapsed: fsynced on tick");
}

#[test]
fn offset_for_timestamp_finds_the_first_record_at_or_after_it() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    // Batch i holds timestamps 1000*i .. 1000*i+9 at offsets 10*i ..
    for i in 0..200i64 {
        let mut b = batch_with(10, 1_500, 1_000 * i, Compression::None, None, 0);
        log.append(&mut b, 0, 0).unwrap();
    }
    assert!(log.segments().len() > 1);
    let at = |ts| {
        log.offset_for_timestamp(ts)
            .unwrap()
            .map(|t| (t.timestamp, t.offset))
    };
    assert_eq!(at(-5), Some((0, 0)));
    assert_eq!(at(0), Some((0, 0)));
    assert_eq!(
        at(5),
        Some((5, 5)),
        "exact record inside an uncompressed batch"
    );
    assert_eq!(at(10), Some((1_000, 10)));
    assert_eq!(at(123_004), Some((123_004, 1_234)));
    assert_eq!(at(199_009), Some((199_009, 1_999)));
    assert_eq!(at(199_010), None);
    let max = log.max_timestamp().unwrap();
    assert_eq!((max.timestamp, max.offset), (199_009, 1_999));
}

#[test]
fn offset_for_timestamp_in_compressed_batches_answers_the_batch_start() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    log.append(
        &mut batch_with(10, 50, 100, Compression::Lz4, None, 0),
        0,
        0,
    )
    .unwrap();
    log.append(
        &mut batch_with(10, 50, 200, Compression::Zstd, None, 0),
        0,
        0,
    )
    .unwrap();
    let t = log.offset_for_timestamp(205).unwrap().unwrap();
    assert_eq!((t.timestamp, t.offset), (209, 10));
}

#[tokio::test]
async fn a_subscriber_is_woken_when_the_log_end_moves() {
    let d = tempfile::tempdir().unwrap();
    let mut log = open(d.path());
    let mut rx = log.subscribe();
    assert_eq!(*rx.borrow_and_update(), 0);
    let waiter = tokio::spawn(async move {
        rx.changed().await.unwrap();
        *rx.borrow_and_update()
    });
    tokio::task::yield_now().await;
    log.append(&mut batch(4, 0), 0, 0).unwrap();
    assert_eq!(waiter.await.unwrap(), 4);
}

#[test]
fn a_read_slice_stays_readable_after_retention_deletes_its_segment() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    for _ in 0..100 {
        log.append(
            &mut batch_with(2, 20_000, 0, Compression::None, None, 0),
            0,
            0,
        )
        .unwrap();
    }
    let slice = log.read(0, 1 << 16, log.log_end_offset()).unwrap();
    let deleted = log
        .delete_records_before(log.segments()[1].base_offset)
        .unwrap();
    assert!(deleted > 0);
    assert!(!log.segments()[0].path.ends_with("00000000000000000000.log"));
    let bytes = slice.read_to_bytes().unwrap();
    assert_eq!(BatchHeader::decode(&bytes).unwrap().base_offset, 0);
}

#[test]
fn segment_bytes_below_one_mebibyte_is_rejected() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    };
    assert!(matches!(
        PartitionLog::open(d.path(), cfg).unwrap_err(),
        StorageError::InvalidConfig { .. }
    ));
}
