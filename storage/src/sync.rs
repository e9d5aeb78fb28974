//! Durability points that many appends share (group commit).
//!
//! A caller that must answer a write only once its bytes are on the device
//! (acks=all with durable produce) should not fsync per request. On the
//! log's owning task it calls [`PartitionLog::sync_point`], runs the
//! returned [`SyncPoint`] on a blocking thread, and hands the outcome back
//! to [`PartitionLog::sync_done`] on the owning task. Every offset below the
//! sync point's end is then durable, and every request waiting for such an
//! offset can be answered; requests appended while a sync runs wait for the
//! next one, so one `fdatasync` serves every append in between.
//!
//! Step by step:
//! 1. `sync_point` (owner, never blocks) records the log end `end`, the
//!    tickets of the background seal flushes still pending (segments rolled
//!    since the last durability point hold offsets below `end`), and its own
//!    handles to the active segment's file and writeback progress.
//! 2. `SyncPoint::run` (any thread, blocks) waits for those tickets: each
//!    one fdatasyncs a sealed segment and fsyncs the partition directory,
//!    which also makes the active segment's directory entry durable. Then
//!    it fdatasyncs the active segment, and waits for the segment's paced
//!    writeback waits that were started by then and checks that none of them
//!    failed: a writeback wait that saw an I/O error consumes it, so the
//!    fdatasync alone may report success for bytes that never reached the
//!    device.
//! 3. `sync_done` (owner) records the outcome. On success the flushed
//!    offset rises to `end`, unless the log was truncated after step 1 (the
//!    offsets below `end` may then hold newer bytes the sync did not cover).
//!    On failure the log goes offline, as for any failed fsync: bytes that
//!    were acknowledged may not be durable, and only a reopen (which scans
//!    everything above the recovery point) can tell.
//!
//! The flushed offset never moves past a sync that failed or has not been
//! recorded yet; the background seal flushes move it past whole sealed
//! segments on their own, as before.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{IoContext, StorageError};
use crate::fault::{self, DeviceOp};
use crate::flusher::Ticket;
use crate::health::Health;
use crate::log::PartitionLog;
use crate::writeback::Progress;

/// A durability point at a log end, to be run off the owning task.
/// `Send + 'static`; see the module docs.
#[derive(Debug)]
#[must_use = "a sync point does nothing until it is run and its outcome recorded"]
pub struct SyncPoint {
    end: i64,
    generation: u64,
    seals: Vec<Arc<Ticket>>,
    active: Option<ActiveFile>,
    health: Arc<Health>,
    dir: PathBuf,
}

#[derive(Debug)]
struct ActiveFile {
    file: Arc<File>,
    path: PathBuf,
    progress: Arc<Progress>,
}

/// The outcome of [`SyncPoint::run`], to be recorded with
/// [`PartitionLog::sync_done`] on the owning task.
#[derive(Debug)]
#[must_use = "the outcome must be recorded with sync_done"]
pub struct SyncDone {
    end: i64,
    generation: u64,
    result: Result<(), StorageError>,
}

impl SyncPoint {
    /// Every offset below this is durable once the sync succeeded.
    pub fn end(&self) -> i64 {
        self.end
    }

    /// Blocking: waits for the background flushes of earlier rolls, then
    /// fdatasyncs the active segment and checks its writeback. Run it off
    /// the owning task (a blocking pool thread).
    pub fn run(self) -> SyncDone {
        let result = self.sync();
        if let Err(e) = &result {
            self.health
                .set_offline(format!("a durability point failed: {e}"));
        }
        SyncDone {
            end: self.end,
            generation: self.generation,
            result,
        }
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.health.check(&self.dir)?;
        for t in &self.seals {
            t.wait().map_err(|f| f.to_error())?;
        }
        if let Some(a) = &self.active {
            fault::check(DeviceOp::Fsync, &a.path)
                .and_then(|()| a.file.sync_data())
                .ctx(|| format!("fsync {}", a.path.display()))?;
            a.progress
                .wait_for_submitted()
                .ctx(|| format!("paced writeback of {}", a.path.display()))?;
        }
        Ok(())
    }
}

impl SyncDone {
    /// The end of the sync point this is the outcome of.
    pub fn end(&self) -> i64 {
        self.end
    }

    /// Whether the sync succeeded.
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }
}

impl PartitionLog {
    /// Starts a durability point at the current log end. Cheap and
    /// non-blocking; see the [`SyncPoint`] docs for what to do with it.
    pub fn sync_point(&mut self) -> SyncPoint {
        self.poll_flushes();
        let end = self.log_end_offset();
        let active = self.active();
        let covered = self.flushed_offset() >= end;
        SyncPoint {
            end,
            generation: self.truncations,
            seals: self.pending.iter().map(|p| Arc::clone(&p.ticket)).collect(),
            active: (!covered).then(|| ActiveFile {
                file: Arc::clone(&active.file),
                path: active.path.clone(),
                progress: active.pacer.progress(),
            }),
            health: Arc::clone(&self.health),
            dir: self.dir.clone(),
        }
    }

    /// Records the outcome of [`SyncPoint::run`] and returns the flushed
    /// offset afterwards: every offset below it is durable, so requests
    /// waiting for those offsets may be answered. On `Ok` it is at least
    /// the sync point's end, unless the log was truncated since the sync
    /// point started. A failed sync takes the log offline (appends and
    /// further syncs are refused until it is reopened) and returns its error.
    pub fn sync_done(&mut self, done: SyncDone) -> Result<i64, StorageError> {
        if let Err(e) = done.result {
            self.health
                .set_offline(format!("a durability point failed: {e}"));
            return Err(e);
        }
        self.poll_flushes();
        // Another failure since the sync started may concern the same bytes.
        self.health.check(&self.dir)?;
        if done.generation == self.truncations {
            let end = done.end.min(self.log_end_offset());
            self.flushed_offset = self.flushed_offset.max(end);
            if end >= self.log_end_offset() {
                self.unflushed_records = 0;
                self.first_unflushed_ms = None;
            }
        }
        Ok(self.flushed_offset())
    }
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
