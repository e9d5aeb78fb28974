//! Sink connectors: records from topics to an outside system.

pub mod http;
pub mod object_store;
pub mod postgres;
