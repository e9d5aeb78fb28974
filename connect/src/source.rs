//! Source connectors: records from an outside system into topics.

pub mod datagen;
pub mod http;
