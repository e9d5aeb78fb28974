//! The Kafka wire protocol: framing, versions, dispatch and per-API handlers.

pub mod api;
pub mod consumer_protocol;
pub mod frame;
pub mod response;
pub mod versions;
