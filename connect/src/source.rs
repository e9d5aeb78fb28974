//! Source connectors: records from an outside system into topics.

pub mod datagen;
pub mod http;
pub mod postgres;

use bytes::Bytes;

/// A record to produce: its topic, key and value.
pub struct Produced {
    pub topic: String,
    pub key: Option<Bytes>,
    pub value: Bytes,
}

/// One poll: the records, and the offsets of the source partitions they
/// came from, to keep once they are all acknowledged.
#[derive(Default)]
pub struct Polled {
    pub records: Vec<Produced>,
    pub offsets: Vec<(String, String)>,
}
