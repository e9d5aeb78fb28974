//! Sink connectors: records from topics to an outside system.

pub mod object_store;
