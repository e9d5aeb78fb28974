use super::*;
use bytes::BytesMut;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

fn batch(first: i64, n: i64, compression: Compression) -> Bytes {
    let records: Vec<Record> = (first..first + n)
        .map(|o| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: o,
            sequence: i32::try_from(o - first).unwrap(),
            timestamp: 0,
            key: None,
            value: Some(Bytes::from(format!("{{\"o\":{o}}}"))),
            headers: IndexMap::new(),
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
    let records = decode_records(bytes.freeze()).unwrap();
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(records[4].value.as_deref(), Some(&b"{\"o\":4}"[..]));
}

#[test]
fn a_corrupt_batch_is_an_error() {
    let mut bytes = BytesMut::from(&batch(0, 3, Compression::None)[..]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    assert!(decode_records(bytes.freeze()).is_err());
}

#[test]
fn a_lying_batch_length_waits_for_more_bytes_rather_than_reading_past_the_end() {
    let mut bytes = BytesMut::from(&batch(0, 3, Compression::None)[..]);
    bytes[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(decode_records(bytes.freeze()).unwrap().is_empty());
}
