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
//! 1. every `chunk_bytes` appended, `sync_file_range(SYNC_FILE_RANGE_WRITE)`
//!    starts writeback of that chunk (asynchronous), so the device is kept
//!    busy long before the kernel's thresholds would wake the flusher;
//! 2. after every append, bytes more than two chunks behind the end are
//!    waited for with `sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)`.
//!    The wait advances a little on every append instead of a whole chunk
//!    at once, so a writer faster than the device is slowed by about one
//!    device write of its own size per append rather than stalled for a
//!    whole chunk now and then, and at most two chunks per partition are
//!    ever dirty or in flight;
//! 3. with `drop_behind`, ranges that are written back and older than
//!    `keep_hot_bytes` are dropped from the page cache with
//!    `posix_fadvise(DONTNEED)`: tail readers read the newest bytes, which
//!    stay cached; older readers would come from disk (or from the tiered
//!    copy) anyway.
//!
//! `sync_file_range` gives no durability guarantee (no metadata, no device
//! cache flush); the background fsync of a sealed segment after a roll, and
//! `fsync` on close and `flush.messages`/`flush.ms`, do.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};

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
    /// Start writeback of dirty pages in the range; do not wait.
    pub const WRITE: SyncRangeFlags = SyncRangeFlags(libc::SYNC_FILE_RANGE_WRITE);
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

/// Writeback progress of one segment file. Pure bookkeeping plus the two
/// syscalls above; one per active segment.
#[derive(Debug, Default)]
pub(crate) struct Pacer {
    /// Everything below has been handed to `SYNC_FILE_RANGE_WRITE`.
    submitted: u64,
    /// Everything below has been waited on (is on the device queue).
    waited: u64,
    /// Everything below has been dropped from the page cache.
    dropped: u64,
}

impl Pacer {
    /// A pacer for a file whose first `already` bytes need no pacing (they
    /// were written before the log was opened, and recovery synced them).
    pub(crate) fn starting_at(already: u64) -> Pacer {
        Pacer {
            submitted: already,
            waited: already,
            dropped: already,
        }
    }

    /// Called after the file grew to `size` bytes.
    pub(crate) fn after_append(
        &mut self,
        file: &File,
        size: u64,
        cfg: &WritebackConfig,
    ) -> io::Result<()> {
        if !cfg.paced || cfg.chunk_bytes == 0 {
            return Ok(());
        }
        while size.saturating_sub(self.submitted) >= cfg.chunk_bytes {
            sync_file_range(file, self.submitted, cfg.chunk_bytes, SyncRangeFlags::WRITE)?;
            self.submitted += cfg.chunk_bytes;
        }
        let window = cfg.chunk_bytes.saturating_mul(2);
        let wait_to = size.saturating_sub(window).min(self.submitted);
        if wait_to > self.waited {
            sync_file_range(
                file,
                self.waited,
                wait_to - self.waited,
                SyncRangeFlags::WRITE_AND_WAIT,
            )?;
            self.waited = wait_to;
        }
        if cfg.drop_behind {
            let cold_end = self.waited.saturating_sub(cfg.keep_hot_bytes);
            if cold_end > self.dropped {
                drop_cache(file, self.dropped, cold_end - self.dropped)?;
                self.dropped = cold_end;
            }
        }
        Ok(())
    }

    /// After the file was truncated to `size`.
    pub(crate) fn truncated(&mut self, size: u64) {
        self.submitted = self.submitted.min(size);
        self.waited = self.waited.min(size);
        self.dropped = self.dropped.min(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn pacer_submits_whole_chunks_and_keeps_two_chunks_in_flight() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; 40 << 10]).unwrap();
        let cfg = WritebackConfig {
            paced: true,
            chunk_bytes: 8 << 10,
            drop_behind: true,
            keep_hot_bytes: 8 << 10,
        };
        let mut p = Pacer::default();
        p.after_append(&f, 12 << 10, &cfg).unwrap();
        assert_eq!((p.submitted, p.waited, p.dropped), (8 << 10, 0, 0));
        p.after_append(&f, 21 << 10, &cfg).unwrap();
        assert_eq!(
            (p.submitted, p.waited),
            (16 << 10, 5 << 10),
            "waits creep forward"
        );
        p.after_append(&f, 40 << 10, &cfg).unwrap();
        assert_eq!(p.submitted, 40 << 10);
        assert_eq!(p.waited, 24 << 10, "at most two chunks stay unwaited");
        assert_eq!(p.dropped, 16 << 10);
    }

    #[test]
    fn unpaced_config_issues_no_writeback() {
        let f = tempfile::tempfile().unwrap();
        let cfg = WritebackConfig {
            paced: false,
            ..WritebackConfig::default()
        };
        let mut p = Pacer::default();
        p.after_append(&f, 100 << 20, &cfg).unwrap();
        assert_eq!(p.submitted, 0);
    }

    #[test]
    fn writeback_syscalls_succeed_on_files_and_report_bad_ranges() {
        let f = tempfile::tempfile().unwrap();
        assert!(sync_file_range(&f, 0, 4096, SyncRangeFlags::WRITE).is_ok());
        assert!(drop_cache(&f, 0, 4096).is_ok());
        assert!(sync_file_range(&f, u64::MAX, 1, SyncRangeFlags::WRITE).is_err());
    }
}
