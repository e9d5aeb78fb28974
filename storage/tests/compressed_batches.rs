//! Compressed batches are decompressed on append to count their records:
//! a batch that lies about its record count is refused before it can move
//! offsets or roll segments, a compression bomb is refused once its records
//! pass the uncompressed limit, and real producers' batches of every codec
//! are stored as sent.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;

use common::*;
use kafka_protocol::records::Compression;
use storage::batch::{compute_crc, HEADER_LEN};
use storage::{AppendOutcome, LogConfig, PartitionLog, StorageError};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn reseal(b: &mut [u8]) {
    let crc = compute_crc(b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Rewrites the declared record count (and the last offset delta with it,
/// so the header stays self-consistent) and reseals the CRC.
fn claim_records(b: &mut [u8], count: i32) {
    b[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    b[57..61].copy_from_slice(&count.to_be_bytes());
    reseal(b);
}

/// Replaces the records part of `b` and sets its codec, length and CRC.
fn with_records(b: &[u8], codec: i16, records: &[u8]) -> Vec<u8> {
    let mut out = b[..HEADER_LEN].to_vec();
    out.extend_from_slice(records);
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let attrs = (i16::from_be_bytes([out[21], out[22]]) & !0x07) | codec;
    out[21..23].copy_from_slice(&attrs.to_be_bytes());
    reseal(&mut out);
    out
}

fn file_count(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

fn assert_lies_roll_nothing(codec: Compression) {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    log.append(&mut batch(2, 0), 0, 0).unwrap();
    let segments = log.segments().len();
    let files = file_count(d.path());
    for attempt in 0..50 {
        let mut lie = batch_with(3, 30, 0, codec, None, attempt);
        claim_records(&mut lie, i32::MAX);
        let err = log.append(&mut lie, 0, 0).unwrap_err();
        assert!(
            matches!(&err, StorageError::InvalidRecord { reason, .. } if reason.contains("more records")
                || reason.contains("holds 3 records")),
            "{codec:?}: {err}"
        );
    }
    assert_eq!(
        log.log_end_offset(),
        2,
        "{codec:?}: the log end must not move"
    );
    assert_eq!(log.segments().len(), segments, "{codec:?}: no roll");
    assert_eq!(file_count(d.path()), files, "{codec:?}: no new files");
    let next = log.append(&mut batch(1, 0), 0, 0).unwrap();
    assert_eq!(next.info().base_offset, 2);
}

#[test]
fn a_gzip_batch_that_lies_about_its_record_count_is_refused_and_rolls_nothing() {
    assert_lies_roll_nothing(Compression::Gzip);
}

#[test]
fn a_zstd_batch_that_lies_about_its_record_count_is_refused_and_rolls_nothing() {
    assert_lies_roll_nothing(Compression::Zstd);
}

#[test]
fn snappy_and_lz4_batches_that_lie_about_their_record_count_are_refused_too() {
    assert_lies_roll_nothing(Compression::Snappy);
    assert_lies_roll_nothing(Compression::Lz4);
}

#[test]
fn a_batch_declaring_fewer_records_than_it_holds_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    for codec in CODECS {
        let mut b = batch_with(5, 30, 0, codec, None, 1);
        claim_records(&mut b, 4);
        let err = log.append(&mut b, 0, 0).unwrap_err();
        assert!(
            matches!(&err, StorageError::InvalidRecord { reason, .. } if reason.contains("more records than the 4")),
            "{codec:?}: {err}"
        );
    }
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn an_uncompressed_batch_claiming_more_records_than_it_holds_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    // Three records of ~40 bytes: room enough for 10 minimal records, so
    // only walking the records shows the lie.
    let mut b = batch_with(3, 30, 0, Compression::None, None, 1);
    claim_records(&mut b, 10);
    let err = log.append(&mut b, 0, 0).unwrap_err();
    assert!(
        matches!(&err, StorageError::InvalidRecord { reason, .. } if reason.contains("holds 3 records but declares 10")),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn a_compression_bomb_is_refused_once_its_records_pass_the_uncompressed_limit() {
    let d = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_uncompressed_batch_bytes: Some(1 << 20),
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(d.path(), config).unwrap();
    // 8 MiB of records that compress to a few kilobytes; the count is true.
    let mut bomb = batch_with(128, 64 << 10, 0, Compression::Gzip, None, 3);
    assert!(bomb.len() < 256 << 10, "{} bytes compressed", bomb.len());
    let err = log.append(&mut bomb, 0, 0).unwrap_err();
    assert!(
        matches!(&err, StorageError::InvalidRecord { reason, .. } if reason.contains("more than 1048576 bytes")),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 0);
    // The same records in a batch under the limit are fine.
    let mut fine = batch_with(8, 64 << 10, 0, Compression::Gzip, None, 3);
    assert_eq!(log.append(&mut fine, 0, 0).unwrap().info().last_offset, 7);
}

#[test]
fn a_record_claiming_a_gigabyte_is_refused_without_decompressing_it() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    // One record whose length varint says 1 GiB, followed by a few zeros.
    let mut plain = Vec::new();
    let mut raw = (1u64 << 30) << 1;
    while raw >= 0x80 {
        plain.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    plain.push(raw as u8);
    plain.extend_from_slice(&[0; 64]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let template = batch_with(1, 1, 0, Compression::Gzip, None, 0);
    let mut bomb = with_records(&template, 1, &gz.finish().unwrap());
    let err = log.append(&mut bomb, 0, 0).unwrap_err();
    assert!(
        matches!(&err, StorageError::InvalidRecord { reason, .. } if reason.contains("decompress to more than")),
        "{err}"
    );
}

#[test]
fn a_compressed_batch_that_does_not_decompress_is_corrupt() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    let template = batch_with(1, 1, 0, Compression::Gzip, None, 0);
    for codec in [1, 2, 3, 4] {
        let mut junk = with_records(&template, codec, b"this is not compressed at all");
        let err = log.append(&mut junk, 0, 0).unwrap_err();
        assert!(
            matches!(err, StorageError::CorruptBatch { .. }),
            "codec {codec}: {err}"
        );
    }
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn batches_of_every_codec_from_a_real_encoder_are_accepted_at_the_right_offsets() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), small_segments()).unwrap();
    let mut expected = Vec::new();
    let mut next = 0;
    for round in 0..4u64 {
        for (i, codec) in CODECS.into_iter().enumerate() {
            let n = 1 + (round as usize * 7 + i * 13) % 40;
            let tag = round * 10 + i as u64;
            let mut b = batch_with(n, 200, 0, codec, None, tag);
            let AppendOutcome::Appended(info) = log.append(&mut b, 0, 0).unwrap() else {
                panic!("not a duplicate");
            };
            assert_eq!(
                (info.base_offset, info.last_offset),
                (next, next + n as i64 - 1),
                "{codec:?}"
            );
            next += n as i64;
            expected.extend((0..n).map(|r| value_for(tag, r, 200)));
        }
    }
    let got: Vec<Vec<u8>> = read_all(&log, 0)
        .into_iter()
        .map(|r| r.value.unwrap().to_vec())
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn raw_snappy_as_librdkafka_writes_it_is_accepted() {
    let d = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(d.path(), LogConfig::default()).unwrap();
    let plain = batch_with(12, 100, 0, Compression::None, None, 5);
    let raw = snap::raw::Encoder::new()
        .compress_vec(&plain[HEADER_LEN..])
        .unwrap();
    let mut b = with_records(&plain, 2, &raw);
    let info = *log.append(&mut b, 0, 0).unwrap().info();
    assert_eq!((info.base_offset, info.last_offset), (0, 11));
    let values: Vec<Vec<u8>> = read_all(&log, 0)
        .into_iter()
        .map(|r| r.value.unwrap().to_vec())
        .collect();
    assert_eq!(
        values,
        (0..12).map(|i| value_for(5, i, 100)).collect::<Vec<_>>()
    );
}
