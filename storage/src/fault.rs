//! Failure injection for tests: makes the log's own `fdatasync` of a
//! segment file, or a writeback wait on it, fail with `EIO`, so the paths
//! that handle device errors can be exercised without a failing device.
//!
//! Compiled only into this crate's tests and with the `testing` feature;
//! otherwise [`check`] is an empty inline function and release builds call
//! the operating system directly.

use std::io;
use std::path::Path;

/// A device call the log makes on a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceOp {
    /// `fdatasync` of a segment's `.log` file (flush, seal, sync point).
    Fsync,
    /// The background writeback of a paced chunk (`sync_file_range` with
    /// `WRITE` and `WAIT_AFTER`) of a segment's `.log` file.
    WritebackWait,
}

#[cfg(any(test, feature = "testing"))]
mod armed {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use super::DeviceOp;

    /// Armed failures: the op, the file, and how many calls still fail.
    pub(super) static ARMED: Mutex<Vec<(DeviceOp, PathBuf, u32)>> = Mutex::new(Vec::new());

    pub(super) fn lock() -> std::sync::MutexGuard<'static, Vec<(DeviceOp, PathBuf, u32)>> {
        match ARMED.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

/// Makes the next `times` calls of `op` on the file at `path` fail with
/// `EIO` (other files are not affected).
#[cfg(any(test, feature = "testing"))]
pub fn fail_next(op: DeviceOp, path: &Path, times: u32) {
    armed::lock().push((op, path.to_path_buf(), times));
}

/// Fails if a failure of `op` on `path` is armed, using it up.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn check(op: DeviceOp, path: &Path) -> io::Result<()> {
    let mut armed = armed::lock();
    let hit = armed
        .iter_mut()
        .find(|(o, p, left)| *o == op && p == path && *left > 0);
    match hit {
        Some(entry) => {
            entry.2 -= 1;
            armed.retain(|e| e.2 > 0);
            Err(io::Error::from_raw_os_error(libc::EIO))
        }
        None => Ok(()),
    }
}

#[cfg(not(any(test, feature = "testing")))]
#[inline(always)]
pub(crate) fn check(_op: DeviceOp, _path: &Path) -> io::Result<()> {
    Ok(())
}
