use super::*;
use crate::testing::record;
use bytes::BytesMut;
use kafka_protocol::records::{Compression, RecordBatchEncoder, RecordEncodeOptions};

fn batch(first: i64, n: i64, compression: Compression) -> Bytes {
    let records: Vec<Record> = (first..first + n)
        .map(|o| {
            let mut r = record(o, &format!("{{\"o\":{o}}}"));
            r.sequence = i32::try_from(o - first).unwrap();
            r
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.freeze()
}

#[test]
fn every_complete_batch_is_decoded_and_a_partial_one_left_for_the_next_fetch() {
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(&batch(0, 3, Compression::None));
    bytes.extend_from_slice(&batch(3, 2, Compression::Gzip));
    let third = batch(5, 4, Compression::None);
    bytes.extend_from_slice(&third[..third.len() - 7]);
    let records = decode(bytes.freeze()).unwrap();
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(records[4].value.as_deref(), Some(&b"{\"o\":4}"[..]));
}

#[test]
fn a_corrupt_batch_is_an_error() {
    let mut bytes = BytesMut::from(&batch(0, 3, Compression::None)[..]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    assert!(decode(bytes.freeze()).is_err());
}

#[test]
fn offsets_out_of_range_end_the_run_and_leadership_changes_are_retried() {
    assert!(matches!(classify("t/0", 1), FetchError::Fatal(_)));
    assert!(matches!(classify("t/0", 6), FetchError::Retry(_)));
    assert!(matches!(classify("t/0", 3), FetchError::Retry(_)));
    assert_eq!(
        error_name(6),
        ResponseError::NotLeaderOrFollower.to_string()
    );
}
