//! Classic consumer groups: the pure [`engine`] and its async [`coordinator`] driver.

pub mod admin;
pub mod coordinator;
pub mod engine;
mod ownership;
mod state;
pub mod types;
