//! Helpers shared by this crate's unit tests.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// A batch of 4 records of `value_len` bytes each.
pub(crate) fn batch(value_len: usize) -> Vec<u8> {
    let records: Vec<Record> = (0..4)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: -1,
            timestamp: 1_000 + i,
            key: None,
            value: Some(Bytes::from(vec![b'v'; value_len])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).expect("encode");
    buf.to_vec()
}
