//! Background durability work: the fsyncs of a segment roll run here, not
//! on the partition's shard thread.
//!
//! A roll finishes the old segment in memory and on disk without waiting
//! for the device (indexes trimmed, segment marked sealed, next segment
//! created) and hands a [`SealJob`] to the process-wide seal pool (see
//! `pool`). The job holds its own handles to the files (an `Arc` of the log
//! file, duplicated descriptors of the index files), so retention may unlink
//! the segment meanwhile. A worker then
//! 1. `fdatasync`s the sealed log file and `fsync`s its trimmed indexes,
//! 2. waits for every paced writeback wait of the segment (they run on the
//!    writeback pool) and fails if one of them failed: a writeback wait that
//!    saw an I/O error consumes it, so the fsync of step 1 can report
//!    success for bytes that never reached the device,
//! 3. writes the partition's recovery point (`recovery-point-offset`,
//!    atomically: temp file, fsync, rename, directory fsync), which also
//!    makes the new segment's directory entry and the producer snapshot's
//!    rename durable,
//! 4. completes the job's [`Ticket`]. A failure at any step completes it
//!    with the error, leaves the recovery point where it was, and takes the
//!    log offline through the flag it shares with the job.
//!
//! Jobs of one partition always go to the same worker, so they complete in
//! roll order and the recovery point only moves forward. The log polls
//! tickets without blocking to advance its flushed offset, and waits for
//! them at its durability points (`flush`, `close`, truncation, sync points).

use std::collections::hash_map::DefaultHasher;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::{IoContext, StorageError};
use crate::fault::{self, DeviceOp};
use crate::files::{self, RECOVERY_POINT_FILE};
use crate::health::Health;
use crate::pool::{self, Gate};
use crate::writeback::Progress;

/// How a file of a job is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncKind {
    /// `fdatasync`: the log file (its size is already settled by writes).
    Data,
    /// `fsync`: index files, whose length changed when they were trimmed.
    All,
}

/// A file handle a job syncs, with its path for error messages.
#[derive(Debug)]
pub(crate) struct SyncTarget {
    pub(crate) file: Arc<File>,
    pub(crate) path: PathBuf,
    pub(crate) kind: SyncKind,
}

/// The durable end of one roll.
#[derive(Debug)]
pub(crate) struct SealJob {
    pub(crate) dir: PathBuf,
    pub(crate) targets: Vec<SyncTarget>,
    /// Every offset below this is durable once the targets are synced.
    pub(crate) recovery_point: i64,
    pub(crate) ticket: Arc<Ticket>,
    /// Writeback of the sealed segment: the job fails if any chunk's wait
    /// failed, even when its own fsync succeeds.
    pub(crate) progress: Arc<Progress>,
    /// The log's offline flag, set when the job fails.
    pub(crate) health: Arc<Health>,
    /// Holds the job before any sync until opened (tests of the mechanism).
    pub(crate) gate: Option<Arc<Gate>>,
}

/// Why a background flush failed, kept so the log can report it.
#[derive(Debug, Clone)]
pub(crate) struct FlushFailure {
    context: String,
    kind: io::ErrorKind,
    message: String,
}

impl FlushFailure {
    fn from_error(e: &StorageError) -> FlushFailure {
        match e {
            StorageError::Io { context, source } => FlushFailure {
                context: context.clone(),
                kind: source.kind(),
                message: source.to_string(),
            },
            other => FlushFailure {
                context: "background flush".into(),
                kind: io::ErrorKind::Other,
                message: other.to_string(),
            },
        }
    }

    pub(crate) fn to_error(&self) -> StorageError {
        StorageError::io(
            self.context.clone(),
            io::Error::new(self.kind, self.message.clone()),
        )
    }
}

/// Completion of one job: a flag the owner can poll without blocking, and
/// a condition variable for the durability points that must wait.
#[derive(Debug, Default)]
pub(crate) struct Ticket {
    done: AtomicBool,
    result: Mutex<Option<Result<(), FlushFailure>>>,
    cv: Condvar,
}

impl Ticket {
    /// The outcome if the job has finished; never blocks on the device.
    pub(crate) fn poll(&self) -> Option<Result<(), FlushFailure>> {
        if !self.done.load(Ordering::Acquire) {
            return None;
        }
        self.lock().clone()
    }

    /// Whether the job finished and succeeded.
    pub(crate) fn succeeded(&self) -> bool {
        matches!(self.poll(), Some(Ok(())))
    }

    /// Blocks until the job has finished.
    pub(crate) fn wait(&self) -> Result<(), FlushFailure> {
        let mut g = self.lock();
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            g = match self.cv.wait(g) {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }

    fn complete(&self, r: Result<(), FlushFailure>) {
        *self.lock() = Some(r);
        self.done.store(true, Ordering::Release);
        self.cv.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Result<(), FlushFailure>>> {
        // A panic while holding this lock cannot leave the Option torn.
        match self.result.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// Hands `job` to the seal worker that owns its partition directory.
pub(crate) fn submit(job: SealJob) {
    let mut h = DefaultHasher::new();
    job.dir.hash(&mut h);
    pool::SEAL.submit(h.finish(), Box::new(move || run(job)));
}

fn run(job: SealJob) {
    if let Some(g) = &job.gate {
        g.pass();
    }
    let r = sync_and_checkpoint(&job);
    if let Err(e) = &r {
        job.health
            .set_offline(format!("background flush of a sealed segment failed: {e}"));
    }
    job.ticket
        .complete(r.map_err(|e| FlushFailure::from_error(&e)));
}

fn sync_and_checkpoint(job: &SealJob) -> Result<(), StorageError> {
    let mut log_file = None;
    for t in &job.targets {
        match t.kind {
            SyncKind::Data => {
                log_file = Some(&t.path);
                fault::check(DeviceOp::Fsync, &t.path).and_then(|()| t.file.sync_data())
            }
            SyncKind::All => t.file.sync_all(),
        }
        .ctx(|| format!("fsync {}", t.path.display()))?;
    }
    // Only now, with the fsync done, is every writeback wait of the segment
    // known: one that failed took the error the fsync would have reported.
    job.progress.wait_for_submitted().ctx(|| {
        format!(
            "paced writeback of {}",
            log_file.map_or_else(
                || job.dir.display().to_string(),
                |p| p.display().to_string()
            )
        )
    })?;
    write_recovery_point(&job.dir, job.recovery_point)
}

/// Durably records that every offset below `offset` is on the device.
pub(crate) fn write_recovery_point(dir: &Path, offset: i64) -> Result<(), StorageError> {
    files::write_atomic(
        dir,
        RECOVERY_POINT_FILE,
        format!("{offset}\n").as_bytes(),
        true,
    )
}

/// Reads the recovery point; `None` if missing or unreadable.
pub(crate) fn read_recovery_point(dir: &Path) -> Result<Option<i64>, StorageError> {
    let Some(bytes) = files::read_optional(&dir.join(RECOVERY_POINT_FILE))? else {
        return Ok(None);
    };
    let parsed = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|v| *v >= 0);
    if parsed.is_none() {
        tracing::warn!(dir = %dir.display(), "recovery point unreadable; scanning every segment");
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    use crate::pool::GateGuard;

    fn job(dir: &Path, point: i64, gate: Option<Arc<Gate>>) -> (SealJob, Arc<Ticket>) {
        let path = dir.join("data");
        let mut f = File::create(&path).unwrap();
        f.write_all(b"bytes").unwrap();
        let ticket = Arc::new(Ticket::default());
        let j = SealJob {
            dir: dir.to_path_buf(),
            targets: vec![SyncTarget {
                file: Arc::new(f),
                path,
                kind: SyncKind::Data,
            }],
            recovery_point: point,
            ticket: ticket.clone(),
            progress: Progress::starting_at(0),
            health: Arc::new(Health::default()),
            gate,
        };
        (j, ticket)
    }

    #[test]
    fn a_held_job_neither_completes_nor_moves_the_recovery_point_until_released() {
        let d = tempfile::tempdir().unwrap();
        let gate = GateGuard(Gate::closed());
        let (j, ticket) = job(d.path(), 42, Some(gate.0.clone()));
        submit(j);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(ticket.poll().is_none(), "held job must not complete");
        assert_eq!(read_recovery_point(d.path()).unwrap(), None);
        gate.open();
        assert!(ticket.wait().is_ok());
        assert!(ticket.succeeded());
        assert_eq!(read_recovery_point(d.path()).unwrap(), Some(42));
    }

    #[test]
    fn jobs_of_one_partition_complete_in_order_so_the_recovery_point_only_rises() {
        let d = tempfile::tempdir().unwrap();
        let gate = GateGuard(Gate::closed());
        let (first, t1) = job(d.path(), 10, Some(gate.0.clone()));
        submit(first);
        let mut later = Vec::new();
        for p in [20, 30, 40] {
            let (j, t) = job(d.path(), p, None);
            submit(j);
            later.push(t);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            later.iter().all(|t| t.poll().is_none()),
            "later rolls of the partition wait behind the held one"
        );
        gate.open();
        t1.wait().unwrap();
        for t in &later {
            t.wait().unwrap();
        }
        assert_eq!(read_recovery_point(d.path()).unwrap(), Some(40));
    }

    #[test]
    fn a_failed_flush_reports_the_failing_file() {
        let d = tempfile::tempdir().unwrap();
        let (mut j, ticket) = job(d.path(), 5, None);
        j.dir = d.path().join("gone");
        submit(j);
        let err = ticket.wait().unwrap_err().to_error().to_string();
        assert!(err.contains("gone"), "{err}");
    }

    #[test]
    fn recovery_point_is_replaced_whole_and_garbage_reads_as_missing() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_recovery_point(d.path()).unwrap(), None);
        write_recovery_point(d.path(), 7).unwrap();
        write_recovery_point(d.path(), 1_048_576).unwrap();
        assert_eq!(read_recovery_point(d.path()).unwrap(), Some(1_048_576));
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(RECOVERY_POINT_FILE)]);
        // A torn write (no newline) or garbage is not trusted.
        std::fs::write(d.path().join(RECOVERY_POINT_FILE), b"10485").unwrap();
        assert_eq!(read_recovery_point(d.path()).unwrap(), None);
        std::fs::write(d.path().join(RECOVERY_POINT_FILE), b"x\n").unwrap();
        assert_eq!(read_recovery_point(d.path()).unwrap(), None);
    }
}
