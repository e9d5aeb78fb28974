//! Paced writeback: keep the amount of dirty page cache per partition small
//! so the kernel never has to stall a writer to flush gigabytes at once.
//!
//! Without pacing, appended bytes sit dirty in the page cache until the
//! kernel's background flusher wakes up at `dirty_background_ratio`, and a
//! writer that crosses `dirty_ratio` is throttled hard in
//! `balance_dirty_pages`; an `fsync` at segment roll then writes the whole
//! segment at once. Both show up as multi-hundred-millisecond append stalls.
//!
//! With pacing:
//! 1. every `chunk_bytes` appended, the append path hands the chunk to the
//!    writeback pool (`pool`), which starts and waits for its writeback
//!    with `sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)`, so the device
//!    is kept busy long before the kernel's thresholds would wake its
//!    flusher. The append path makes no writeback call itself: even starting
//!    writeback is not cheap (a filesystem with delayed allocation
//!    allocates the chunk's blocks then, and submitting 8 MiB of pages takes
//!    milliseconds), and every millisecond on the append path stalls every
//!    partition of its shard;
//! 2. an append blocks only when more than `MAX_PENDING_CHUNKS` (4) chunks
//!    of its segment are still unwaited, i.e. when the producer outruns the
//!    device, which bounds dirty memory per partition;
//! 3. with `drop_behind`, the worker then drops ranges that are written
//!    back and older than `keep_hot_bytes` from the page cache with
//!    `posix_fadvise(DONTNEED)`: tail readers read the newest bytes, which
//!    stay cached; older readers would come from disk (or from the tiered
//!    copy) anyway.
//!
//! `sync_file_range` gives no durability guarantee (no metadata, no device
//! cache flush); the background fsync of a sealed segment after a roll, and
//! `fsync` on close, `flush.messages`/`flush.ms` and sync points, do. But a
//! chunk's wait that fails consumes the I/O error (the kernel reports a
//! writeback error once per open file), so a later fsync of the same file
//! may succeed although the chunk never reached the device. Hence:
//! 4. a failed wait is recorded in the segment's `Progress` and takes the
//!    log offline at once (the flag in `health`); every fsync that makes the
//!    segment durable (seal, flush, close, sync point) then waits for the
//!    segment's chunk waits handed out so far and fails if one failed.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::fault::{self, DeviceOp};
use crate::health::Health;
use crate::pool::{self, Gate};

/// How appends are written back to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WritebackConfig {
    /// Start and pace writeback every `chunk_bytes` (default true).
    pub paced: bool,
    /// Bytes between writeback points (default 8 MiB).
    pub chunk_bytes: u64,
    /// Drop written-back ranges older than `keep_hot_bytes` from the page
    /// cache (default true).
    pub drop_behind: bool,
    /// Newest bytes of the active segment kept cached for tail readers
    /// (default 32 MiB).
    pub keep_hot_bytes: u64,
}

impl Default for WritebackConfig {
    fn default() -> Self {
        WritebackConfig {
            paced: true,
            chunk_bytes: 8 << 20,
            drop_behind: true,
            keep_hot_bytes: 32 << 20,
        }
    }
}

/// Flags of `sync_file_range(2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncRangeFlags(libc::c_uint);

impl SyncRangeFlags {
    /// Start writeback and wait until every page in the range has reached
    /// the device queue.
    pub const WRITE_AND_WAIT: SyncRangeFlags = SyncRangeFlags(
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
    );
}

fn to_off(v: u64) -> io::Result<libc::off64_t> {
    libc::off64_t::try_from(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Safe wrapper over `sync_file_range(2)`, which `nix` does not bind.
pub fn sync_file_range(
    fd: &impl AsFd,
    offset: u64,
    len: u64,
    flags: SyncRangeFlags,
) -> io::Result<()> {
    let (off, n) = (to_off(offset)?, to_off(len)?);
    let raw = fd.as_fd().as_raw_fd();
    // SAFETY: `raw` is a valid open descriptor borrowed for the duration of
    // the call; the call takes plain integers and touches no user memory.
    #[expect(unsafe_code, reason = "nix has no sync_file_range wrapper")]
    let rc = unsafe { libc::sync_file_range(raw, off, n, flags.0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `posix_fadvise(POSIX_FADV_DONTNEED)`: drop clean cached pages of a range.
pub fn drop_cache(fd: &impl AsFd, offset: u64, len: u64) -> io::Result<()> {
    let off = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
    let n = libc::off_t::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
    nix::fcntl::posix_fadvise(
        fd.as_fd(),
        off,
        n,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )
    .map_err(io::Error::from)
}

/// Chunks a segment may have handed to writeback but not yet seen written
/// back before the append path waits: bounds dirty memory per partition.
pub(crate) const MAX_PENDING_CHUNKS: u64 = 4;

/// How far the background half of pacing got on one segment file.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    state: Mutex<ProgressState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct ProgressState {
    /// Everything below has been handed to writeback jobs.
    submitted: u64,
    /// Everything below has been waited on (is on the device queue).
    waited: u64,
    /// Everything below has been dropped from the page cache.
    dropped: u64,
    /// The first writeback failure, reported by the next append of the
    /// segment and by every durability point that covers it.
    failed: Option<(io::ErrorKind, String)>,
}

impl Progress {
    pub(crate) fn starting_at(already: u64) -> Arc<Progress> {
        Arc::new(Progress {
            state: Mutex::new(ProgressState {
                submitted: already,
                waited: already,
                dropped: already,
                failed: None,
            }),
            cv: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, ProgressState> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Blocks until everything below `offset` was waited on (returns at
    /// once when it already was) or a failure was recorded.
    fn wait_for(&self, offset: u64) -> io::Result<()> {
        let mut g = self.lock();
        loop {
            if let Some((kind, msg)) = &g.failed {
                return Err(io::Error::new(*kind, msg.clone()));
            }
            if g.waited >= offset {
                return Ok(());
            }
            g = match self.cv.wait(g) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }

    /// Blocks until every writeback job handed out so far has finished;
    /// fails if any of them failed. A durability point calls this after its
    /// fsync: a writeback wait that saw an I/O error consumed it, and the
    /// fsync may then have reported success.
    pub(crate) fn wait_for_submitted(&self) -> io::Result<()> {
        let submitted = self.lock().submitted;
        self.wait_for(submitted)
    }

    fn note_submitted(&self, to: u64) {
        let mut g = self.lock();
        g.submitted = g.submitted.max(to);
    }

    #[cfg(test)]
    pub(crate) fn marks(&self) -> (u64, u64) {
        let g = self.lock();
        (g.waited, g.dropped)
    }
}

/// Pacing one chunk, run by the writeback pool: start the chunk's
/// writeback and wait until it reached the device queue, then drop
/// written-back bytes older than the hot window from the page cache.
#[derive(Debug)]
pub(crate) struct WritebackJob {
    file: Arc<File>,
    path: PathBuf,
    from: u64,
    to: u64,
    /// `Some(keep_hot_bytes)` with drop-behind.
    keep_hot: Option<u64>,
    progress: Arc<Progress>,
    health: Arc<Health>,
    gate: Option<Arc<Gate>>,
}

impl WritebackJob {
    pub(crate) fn run(self) {
        if let Some(g) = &self.gate {
            g.pass();
        }
        let waited = fault::check(DeviceOp::WritebackWait, &self.path).and_then(|()| {
            sync_file_range(
                &*self.file,
                self.from,
                self.to - self.from,
                SyncRangeFlags::WRITE_AND_WAIT,
            )
        });
        if let Err(e) = waited {
            // The error is now consumed: no later fsync of this file will
            // report it, so the log must not count these bytes durable.
            self.health.set_offline(format!(
                "paced writeback of {} failed: {e}",
                self.path.display()
            ));
            self.progress
                .lock()
                .failed
                .get_or_insert((e.kind(), e.to_string()));
            self.progress.cv.notify_all();
            return;
        }
        let dropped = self.drop_behind();
        let mut g = self.progress.lock();
        g.waited = g.waited.max(self.to);
        g.dropped = g.dropped.max(dropped);
        drop(g);
        self.progress.cv.notify_all();
    }

    /// Drops written-back bytes older than the hot window from the page
    /// cache; returns how far the cache is dropped. A failure only costs
    /// memory, so it is logged, not reported.
    fn drop_behind(&self) -> u64 {
        let dropped = self.progress.lock().dropped;
        if let Some(keep) = self.keep_hot {
            let cold_end = self.to.saturating_sub(keep);
            if cold_end > dropped {
                if let Err(e) = drop_cache(&*self.file, dropped, cold_end - dropped) {
                    tracing::warn!(file = %self.path.display(), error = %e, "dropping written-back pages from the cache failed");
                    return dropped;
                }
                return cold_end;
            }
        }
        dropped
    }
}

/// Writeback pacing of one segment file. The append path only queues each
/// full chunk's writeback, wait and cache drop on the writeback pool; it
/// blocks only when more than [`MAX_PENDING_CHUNKS`] chunks are still
/// unwaited.
#[derive(Debug)]
pub(crate) struct Pacer {
    /// Everything below has been handed to the writeback pool.
    submitted: u64,
    progress: Arc<Progress>,
    /// Flusher worker route: one per segment keeps its chunks in order.
    route: u64,
    /// Holds background chunk jobs while set (tests only).
    pub(crate) gate: Option<Arc<Gate>>,
}

impl Pacer {
    /// A pacer for a file whose first `already` bytes need no pacing (they
    /// were written before the log was opened, and recovery synced them).
    pub(crate) fn starting_at(already: u64) -> Pacer {
        static ROUTES: AtomicU64 = AtomicU64::new(0);
        Pacer {
            submitted: already,
            progress: Progress::starting_at(already),
            route: ROUTES.fetch_add(1, Ordering::Relaxed),
            gate: None,
        }
    }

    /// Called after the file grew to `size` bytes.
    pub(crate) fn after_append(
        &mut self,
        file: &Arc<File>,
        path: &Path,
        size: u64,
        cfg: &WritebackConfig,
        health: &Arc<Health>,
    ) -> io::Result<()> {
        if !cfg.paced || cfg.chunk_bytes == 0 {
            return Ok(());
        }
        while size.saturating_sub(self.submitted) >= cfg.chunk_bytes {
            let from = self.submitted;
            self.submitted += cfg.chunk_bytes;
            self.progress.note_submitted(self.submitted);
            let job = WritebackJob {
                file: file.clone(),
                path: path.to_path_buf(),
                from,
                to: self.submitted,
                keep_hot: cfg.drop_behind.then_some(cfg.keep_hot_bytes),
                progress: self.progress.clone(),
                health: Arc::clone(health),
                gate: self.gate.clone(),
            };
            pool::WRITEBACK.submit(self.route, Box::new(move || job.run()));
        }
        // Returns at once unless the device is more than the allowed
        // number of chunks behind (or an earlier chunk failed).
        let must_be_waited = self
            .submitted
            .saturating_sub(cfg.chunk_bytes.saturating_mul(MAX_PENDING_CHUNKS));
        self.progress.wait_for(must_be_waited)
    }

    /// How far this segment's background writeback got.
    pub(crate) fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// After the file was truncated to `size`: chunk jobs still queued
    /// report to the old progress, which nobody reads any more.
    pub(crate) fn truncated(&mut self, size: u64) {
        if size < self.submitted {
            let gate = self.gate.take();
            *self = Pacer::starting_at(size);
            self.gate = gate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    use std::sync::mpsc;
    use std::time::Duration;

    use crate::pool::GateGuard;

    fn file_of(len: usize) -> Arc<File> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; len]).unwrap();
        Arc::new(f)
    }

    fn health() -> Arc<Health> {
        Arc::new(Health::default())
    }

    fn small_chunks() -> WritebackConfig {
        WritebackConfig {
            paced: true,
            chunk_bytes: 8 << 10,
            drop_behind: true,
            keep_hot_bytes: 8 << 10,
        }
    }

    #[test]
    fn appends_only_queue_chunks_and_the_pool_writes_them_back_and_drops_behind() {
        let f = file_of(64 << 10);
        let cfg = small_chunks();
        let gate = GateGuard(Gate::closed());
        let mut p = Pacer::starting_at(0);
        p.gate = Some(gate.0.clone());
        p.after_append(&f, Path::new("t"), 12 << 10, &cfg, &health())
            .unwrap();
        assert_eq!(p.submitted, 8 << 10, "whole chunks only");
        p.after_append(&f, Path::new("t"), 32 << 10, &cfg, &health())
            .unwrap();
        assert_eq!(p.submitted, 32 << 10);
        assert_eq!(
            p.progress.marks(),
            (0, 0),
            "four chunks pending: the append returned without any wait"
        );
        gate.open();
        p.progress.wait_for(32 << 10).unwrap();
        assert_eq!(
            p.progress.marks(),
            (32 << 10, 24 << 10),
            "the hot window stays cached"
        );
    }

    #[test]
    fn an_append_waits_only_when_more_than_four_chunks_are_unwaited() {
        let f = file_of(64 << 10);
        let cfg = small_chunks();
        let gate = GateGuard(Gate::closed());
        let mut p = Pacer::starting_at(0);
        p.gate = Some(gate.0.clone());
        p.after_append(&f, Path::new("t"), 32 << 10, &cfg, &health())
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let appender = std::thread::spawn(move || {
            let r = p.after_append(&f, Path::new("t"), 40 << 10, &cfg, &health());
            tx.send(r.is_ok()).unwrap();
            p
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "a fifth unwaited chunk must hold the append back"
        );
        gate.open();
        assert!(rx.recv().unwrap());
        let p = appender.join().unwrap();
        assert!(p.progress.marks().0 >= 8 << 10);
    }

    #[test]
    fn truncation_restarts_pacing_at_the_new_size() {
        let f = file_of(64 << 10);
        let cfg = small_chunks();
        let mut p = Pacer::starting_at(0);
        p.after_append(&f, Path::new("t"), 40 << 10, &cfg, &health())
            .unwrap();
        p.truncated(10 << 10);
        assert_eq!(p.submitted, 10 << 10);
        assert_eq!(p.progress.marks(), (10 << 10, 10 << 10));
        p.after_append(&f, Path::new("t"), 18 << 10, &cfg, &health())
            .unwrap();
        assert_eq!(p.submitted, 18 << 10);
    }

    #[test]
    fn unpaced_config_issues_no_writeback() {
        let f = file_of(0);
        let cfg = WritebackConfig {
            paced: false,
            ..WritebackConfig::default()
        };
        let mut p = Pacer::starting_at(0);
        p.after_append(&f, Path::new("t"), 100 << 20, &cfg, &health())
            .unwrap();
        assert_eq!(p.submitted, 0);
    }

    #[test]
    fn writeback_syscalls_succeed_on_files_and_report_bad_ranges() {
        let f = tempfile::tempfile().unwrap();
        assert!(sync_file_range(&f, 0, 4096, SyncRangeFlags::WRITE_AND_WAIT).is_ok());
        assert!(drop_cache(&f, 0, 4096).is_ok());
        assert!(sync_file_range(&f, u64::MAX, 1, SyncRangeFlags::WRITE_AND_WAIT).is_err());
    }
}
