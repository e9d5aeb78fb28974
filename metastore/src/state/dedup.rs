//! Recently applied client requests, so a write retried after an unclear
//! failure (its leader died before answering) is applied once.
//!
//! A request id is chosen by the node that accepts the write and kept across
//! its retries. The first time a request's commands are applied their
//! results are kept here; a later copy of the same request returns those
//! results without applying anything. Entries are kept for
//! [`RETAIN_MS`] of leader clock (far longer than any retry) and at most
//! [`MAX_REMEMBERED`] of them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::command::CommandResult;

/// How long applied request ids are remembered.
pub const RETAIN_MS: i64 = 120_000;
/// Upper bound on remembered requests.
pub const MAX_REMEMBERED: usize = 20_000;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RecentRequests {
    /// Shared so that cloning the state for a snapshot copies no results.
    results: BTreeMap<Uuid, Arc<Vec<CommandResult>>>,
    order: VecDeque<(i64, Uuid)>,
}

impl RecentRequests {
    pub(crate) fn get(&self, id: &Uuid) -> Option<&Vec<CommandResult>> {
        self.results.get(id).map(Arc::as_ref)
    }

    pub(crate) fn remember(&mut self, now_ms: i64, id: Uuid, results: Vec<CommandResult>) {
        self.results.insert(id, Arc::new(results));
        self.order.push_back((now_ms, id));
        while let Some(&(at, old)) = self.order.front() {
            if now_ms.saturating_sub(at) <= RETAIN_MS && self.order.len() <= MAX_REMEMBERED {
                break;
            }
            self.order.pop_front();
            self.results.remove(&old);
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.results.len()
    }
}
