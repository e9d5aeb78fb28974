//! Durable storage behind Raft: the log ([`log_store`]) and the state
//! machine with its snapshots ([`state_machine`]).

pub(crate) mod fsutil;
pub(crate) mod log_store;
pub(crate) mod state_machine;
pub(crate) mod wal;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
