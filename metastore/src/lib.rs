//! AeroStream's metastore (work in progress).

pub mod command;
pub mod config;
pub mod error;
pub mod lease;
pub mod state;
pub mod types;

pub use error::MetaError;
pub mod raft_types;
mod store;
