//! Consumer groups, classic and KIP-848 ([`consumer`]): the pure
//! [`engine`] and its async [`coordinator`] driver.

pub mod admin;
pub mod assignor;
pub mod consumer;
mod consumer_state;
pub mod coordinator;
pub mod engine;
mod ownership;
mod state;
pub mod types;
