//! Which crashed agents this agent has seen fenced, and since when (see
//! `brokers::CRASHED_LISTING`): state the broker keeps for Metadata.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// When this agent first saw each crashed agent fenced, by agent id.
#[derive(Debug, Default)]
pub struct FencedSince(Mutex<HashMap<u64, Instant>>);

impl FencedSince {
    /// The map, also after a panic elsewhere poisoned the lock (it holds
    /// only instants; any state of it is valid).
    pub fn lock(&self) -> MutexGuard<'_, HashMap<u64, Instant>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
