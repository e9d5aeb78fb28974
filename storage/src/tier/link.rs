//! The link between partitions and the tiering service: the messages the
//! driver task receives, the registry of open partitions, and the [`Link`]
//! a [`super::TieredPartition`] holds to reach both.
//!
//! Partition tasks send over an unbounded channel and never wait on
//! tiering; a stopped service drops their messages, and the next start
//! re-reads everything from the partitions and the manifest.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::budget::DiskBudget;
use super::engine::{Event, OpId};
use super::manifest::TieredSegment;
use super::shared::PartitionShared;
use super::PartitionKey;

/// What the driver task receives.
pub(crate) enum Msg {
    Engine(Event),
    Committed {
        op: OpId,
        partition: PartitionKey,
        entry: TieredSegment,
    },
    /// A compacted copy replaced the entries `old` in the manifest.
    Replaced {
        op: OpId,
        partition: PartitionKey,
        old: Vec<TieredSegment>,
        entry: TieredSegment,
    },
    /// Delete an entry's objects once the compaction grace period is over.
    Expire(TieredSegment),
    Retention,
    /// A packed upload ended: the engine's events for its members.
    Packed(Vec<Event>),
    /// Re-read a partition's manifest (a commit was refused).
    Refresh(PartitionKey),
    Stop,
}

pub(crate) type Registry = Mutex<HashMap<PartitionKey, Arc<PartitionShared>>>;

#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) tx: mpsc::UnboundedSender<Msg>,
    pub(crate) registry: Registry,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

/// What a [`super::TieredPartition`] holds of the service.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) core: Arc<Core>,
    pub(crate) budget: Arc<DiskBudget>,
    pub(crate) registration: u64,
}

impl Link {
    pub(crate) fn send(&self, event: Event) {
        // A stopped service drops events; the next start re-reads everything.
        let _ = self.core.tx.send(Msg::Engine(event));
    }

    pub(crate) fn trim(&self, _partition: PartitionKey) {
        let _ = self.core.tx.send(Msg::Retention);
    }

    pub(crate) fn unregister(&self, partition: PartitionKey) {
        let _ = self.core.tx.send(Msg::Engine(Event::Unregister {
            partition,
            registration: self.registration,
        }));
        let mut reg = self.core.registry.lock();
        let mine = reg
            .get(&partition)
            .is_some_and(|s| s.registration() == self.registration);
        if mine {
            reg.remove(&partition);
        }
    }
}
