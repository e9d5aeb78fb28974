//! The AeroStream native protocol and its Rust client.
//!
//! AeroStream speaks Kafka's protocol and, on port 9091, its own native
//! protocol: fewer round trips and fields than Kafka's, the same topics,
//! records and group offsets. This crate is both the protocol's reference
//! (frames, bodies) and the client built on it.
//!
//! ```no_run
//! use futures::StreamExt;
//! use sdk::{Client, ConsumerConfig, NewTopic, ProducerConfig, Record, StartAt};
//!
//! # async fn run() -> Result<(), sdk::Error> {
//! let client = Client::connect("aero://localhost:9091").await?;
//! client.create_topic(NewTopic::new("events", 3)).await?;
//!
//! let producer = client.producer(ProducerConfig::default())?;
//! let delivery = producer.send("events", Record::new("hello").with_key("k")).await?;
//!
//! let mut consumer = client.consumer(ConsumerConfig::default())?;
//! consumer.assign("events", Some(vec![delivery.partition]), StartAt::Offset(delivery.offset)).await?;
//! if let Some(record) = consumer.next().await {
//!     assert_eq!(record?.value.as_deref(), Some(&b"hello"[..]));
//! }
//! # Ok(()) }
//! ```
//!
//! # The client
//!
//! - [`Client`]: bootstrap URL (`aero://host:port[,host:port…]` for TCP,
//!   `aero+quic://…` for QUIC), cached metadata, one connection per
//!   server, admin calls (topics, offsets, group offsets). Cheap to clone.
//! - [`Producer`]: batches per partition, Kafka's partitioner, acks,
//!   retries, idempotence (no duplicates from retries), `flush`; with
//!   [`ProducerConfig::transactional_id()`], transactions on the coordinator
//!   Kafka clients use ([`Producer::init_transactions`],
//!   [`Producer::begin_transaction`], [`Producer::commit_transaction`],
//!   [`Producer::abort_transaction`],
//!   [`Producer::send_offsets_to_transaction`]).
//! - [`Consumer`]: a `futures::Stream` of [`ConsumedRecord`]s from assigned
//!   partitions, read by long-poll fetches or pushed by the server
//!   ([`ReadMode`]), with seeks and committed offsets, reading every
//!   record or only committed ones ([`Isolation`]); or, with
//!   [`Membership::Group`] and [`Consumer::subscribe`], a member of a
//!   consumer group whose partitions the server assigns and rebalances.
//! - [`Subscription`]: one partition's records pushed by the server as
//!   they are committed, within the credit the subscriber grants
//!   ([`Client::subscribe`]).
//! - [`Error`]: one error type; [`Error::is_retriable`] says whether trying
//!   again can help.
//!
//! Seams: the transport ([`bootstrap::Transport`]: TCP, or QUIC whose
//! further streams on one connection are there for subscriptions), the
//! producer's batching engine (I/O-free, time passed in), and the
//! consumer's [`Membership`].
//!
//! Over QUIC the client checks the server's certificate against a CA it is
//! given (no system roots are used):
//!
//! ```no_run
//! # async fn run() -> Result<(), sdk::Error> {
//! let client = sdk::Client::builder("aero+quic://localhost:9091")
//!     // the CA an AeroStream agent writes when given no certificate
//!     .tls_ca_file("data/native-tls/ca.pem")
//!     .connect()
//!     .await?;
//! client.ping().await?;
//! # Ok(()) }
//! ```
//!
//! # The protocol
//!
//! The protocol rides on a 7-byte frame header `0xAE 0x01 <op:u8>
//! <len:u32 BE>` followed by `len` bytes of body ([`frame`]); the
//! operations and their bodies are in [`proto`], specified byte by byte in
//! `docs/native-protocol.md`. Records travel as Kafka RecordBatch v2 bytes
//! ([`record`]), the bytes the broker's log stores, so what one protocol
//! writes the other reads.
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

pub mod auth;
mod backoff;
pub mod bootstrap;
mod client;
mod conn;
mod consumer;
pub mod error;
pub mod frame;
mod group;
pub mod partitioner;
mod producer;
pub mod proto;
mod quic;
pub mod record;
mod subscription;
#[cfg(test)]
mod testing;
pub mod udp;
#[cfg(test)]
mod vectors;
pub mod wire;

pub use auth::{Credentials, ScramMechanism};
pub use client::{Client, ClientBuilder, ClusterMetadata, NewTopic};
pub use consumer::{
    Consumer, ConsumerConfig, GroupMetadata, Membership, OffsetReset, ReadMode, StartAt,
};
pub use error::Error;
pub use group::GroupOptions;
pub use producer::{Delivery, Producer, ProducerConfig};
pub use proto::{Acks, ErrorCode, Isolation, OffsetSpec};
pub use record::{Compression, ConsumedRecord, Record};
pub use subscription::{Subscription, SubscriptionConfig};
