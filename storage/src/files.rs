//! File names of a partition directory and crash-safe small-file writes.
//!
//! A partition directory holds:
//! - `{base:020}.log`, `.index`, `.timeindex`: one segment and its indexes;
//! - `{base:020}.txnindex`: the aborted transactions whose marker is in
//!   that segment (only where there are some; see `txn`);
//! - `{offset:020}.snapshot`: producer state as of `offset`;
//! - `log-start-offset`, `leader-epoch-checkpoint`: small checkpoints;
//! - `producer-start-offset`: only while local copies below the log start
//!   were evicted (tiering): producer state is kept down to this offset;
//! - `recovery-point-offset`: every offset below it is on the device;
//! - `clean-shutdown`: present only while the log is closed cleanly.
//! - `cleaner-checkpoint`, and `cleaning/` and `cleaner-install` only while
//!   a compaction run is written or installed (see `compaction`, `merge`).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, StorageError};

pub(crate) const LOG_EXT: &str = "log";
pub(crate) const INDEX_EXT: &str = "index";
pub(crate) const TIME_INDEX_EXT: &str = "timeindex";
pub(crate) const SNAPSHOT_EXT: &str = "snapshot";
pub(crate) const LOG_START_FILE: &str = "log-start-offset";
pub(crate) const PRODUCER_START_FILE: &str = "producer-start-offset";
pub(crate) const EPOCH_FILE: &str = "leader-epoch-checkpoint";
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
pub(crate) const RECOVERY_POINT_FILE: &str = "recovery-point-offset";
const TMP_SUFFIX: &str = ".tmp";

pub(crate) fn offset_path(dir: &Path, offset: i64, ext: &str) -> PathBuf {
    dir.join(format!("{offset:020}.{ext}"))
}

/// Parses `{offset:020}.{ext}`; anything else is `None`.
pub(crate) fn parse_offset_name(name: &str) -> Option<(i64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, ext))
}

/// The temporary name a file is written under before it is renamed to
/// `path` (removed by the next open if a crash leaves it).
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(TMP_SUFFIX);
    PathBuf::from(name)
}

pub(crate) fn is_tmp(name: &str) -> bool {
    name.ends_with(TMP_SUFFIX)
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx(|| format!("fsync directory {}", dir.display()))
}

/// Replaces `dir/name` with `bytes` through a temporary file and a rename.
/// With `durable`, the new content and the rename are fsynced before
/// returning, and a crash at any point leaves either the old or the new
/// content, never a mix. Without it, a process kill still leaves old or new
/// content, but a power loss can leave the new name pointing at an empty or
/// partly written file (the rename may reach the device before the data):
/// use it only for files whose readers detect damage and cope with it, as
/// producer snapshots do with their CRC.
pub fn write_atomic(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durable: bool,
) -> Result<(), StorageError> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let dst = dir.join(name);
    let mut f = File::create(&tmp).ctx(|| format!("create {}", tmp.display()))?;
    f.write_all(bytes)
        .ctx(|| format!("write {}", tmp.display()))?;
    if durable {
        f.sync_all().ctx(|| format!("fsync {}", tmp.display()))?;
    }
    drop(f);
    fs::rename(&tmp, &dst).ctx(|| format!("rename {} to {}", tmp.display(), dst.display()))?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Removes a file, treating "already gone" as success.
pub(crate) fn remove_if_exists(path: &Path) -> Result<(), StorageError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io(format!("remove {}", path.display()), e)),
    }
}

/// Reads a whole small file; `None` if it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StorageError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::io(format!("read {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_names_round_trip_and_reject_strangers() {
        let p = offset_path(Path::new("/x"), 42, LOG_EXT);
        assert_eq!(p, Path::new("/x/00000000000000000042.log"));
        assert_eq!(
            parse_offset_name("00000000000000000042.log"),
            Some((42, "log"))
        );
        assert_eq!(parse_offset_name("42.log"), None);
        assert_eq!(parse_offset_name("0000000000000000004x.log"), None);
        assert_eq!(parse_offset_name("99999999999999999999.log"), None);
    }

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        write_atomic(d.path(), "cp", b"one", true).unwrap();
        write_atomic(d.path(), "cp", b"two", false).unwrap();
        assert_eq!(fs::read(d.path().join("cp")).unwrap(), b"two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
