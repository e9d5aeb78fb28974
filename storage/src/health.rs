//! Whether a log may still be written, shared by the log and its
//! background jobs.
//!
//! A failed write, fsync or writeback wait leaves the log unable to tell
//! which acknowledged bytes reached the device. Kafka takes the whole log
//! directory offline then; here the one partition log goes offline: the
//! first failure is recorded (by whichever thread saw it: the owning task,
//! a flusher worker, a writeback worker, or a thread running a sync point)
//! and from then on appends, flushes and durability points are refused with
//! [`StorageError::Offline`] until the log is reopened, whose recovery scans
//! everything above the recovery point.

use std::path::Path;

use parking_lot::Mutex;

use crate::error::StorageError;

/// The offline flag of one log; the first reason recorded wins.
#[derive(Debug, Default)]
pub(crate) struct Health {
    offline: Mutex<Option<String>>,
}

impl Health {
    /// Takes the log offline (keeps the first reason).
    pub(crate) fn set_offline(&self, reason: String) {
        let mut g = self.offline.lock();
        if g.is_none() {
            tracing::error!(%reason, "partition log goes offline");
            *g = Some(reason);
        }
    }

    /// `Offline` for the log in `dir` once a failure was recorded.
    pub(crate) fn check(&self, dir: &Path) -> Result<(), StorageError> {
        match &*self.offline.lock() {
            Some(reason) => Err(StorageError::Offline {
                dir: dir.to_path_buf(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
