//! Records for the unit tests.

use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Record, TimestampType};

/// A data record at `offset` with `value` (and no key).
pub fn record(offset: i64, value: &str) -> Record {
    binary_record(offset, value.as_bytes())
}

/// A data record at `offset` with the bytes `value` (and no key).
pub fn binary_record(offset: i64, value: &[u8]) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: -1,
        timestamp: 0,
        key: None,
        value: Some(Bytes::copy_from_slice(value)),
        headers: IndexMap::new(),
    }
}
