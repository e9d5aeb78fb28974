//! The AeroStream native protocol and its Rust client.
//!
//! The protocol rides on a 7-byte frame header `0xAE 0x01 <op:u8>
//! <len:u32 BE>` followed by `len` bytes of body ([`frame`]); the
//! operations and their bodies are in [`proto`], specified byte by byte in
//! `docs/native-protocol.md`. Records travel as Kafka RecordBatch v2 bytes,
//! the bytes the broker's log stores, so what one protocol writes the other
//! reads.
//!
//! ```
//! use sdk::frame::{FrameHeader, HEADER_LEN};
//!
//! let header = FrameHeader { op: 3, len: 42 };
//! let bytes = header.encode();
//! assert_eq!(bytes.len(), HEADER_LEN);
//! let decoded = FrameHeader::decode(&bytes, 1024).expect("valid header");
//! assert_eq!(decoded, header);
//! ```

mod backoff;
pub mod bootstrap;
mod client;
mod conn;
mod consumer;
pub mod error;
pub mod frame;
pub mod partitioner;
mod producer;
pub mod proto;
pub mod record;
#[cfg(test)]
mod testing;
pub mod wire;

pub use client::{Client, ClientBuilder, ClusterMetadata, NewTopic};
pub use consumer::{Consumer, ConsumerConfig, Membership, OffsetReset, StartAt};
pub use error::Error;
pub use producer::{Delivery, Producer, ProducerConfig};
pub use proto::{Acks, ErrorCode, OffsetSpec};
pub use record::{Compression, ConsumedRecord, Record};
