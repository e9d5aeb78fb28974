//! What the log keeps of its compaction between runs and across restarts
//! (see [`crate::compaction`] for the runs themselves): where the log was
//! compacted up to, when kept tombstones fall due, and running totals.

use std::path::Path;

use crate::error::StorageError;
use crate::files;

/// File in the partition directory: `<compacted below> <tombstones due ms>`.
pub(crate) const CHECKPOINT_FILE: &str = "cleaner-checkpoint";
/// Directory in the partition directory where a run writes new segments.
pub(crate) const CLEANING_DIR: &str = "cleaning";

/// The cleaner's state of one log (kept in memory, checkpointed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CleanerState {
    /// Every offset below this was compacted at least once.
    pub(crate) compacted_below: i64,
    /// When a tombstone kept by the last run falls due (`None`: none kept).
    pub(crate) tombstones_due_ms: Option<i64>,
    /// Figures since the log was opened.
    pub(crate) totals: CleanerTotals,
}

/// What the cleaner did to one log since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerTotals {
    /// Runs installed.
    pub runs: u64,
    /// Bytes of the segments runs read.
    pub bytes_read: u64,
    /// Bytes the segments runs rewrote hold now (unchanged segments not
    /// counted on either side).
    pub bytes_written: u64,
    /// Bytes the runs removed from the log.
    pub bytes_removed: u64,
    /// Records the runs removed.
    pub records_removed: u64,
    /// When the last run was installed (ms since the epoch), 0 if none.
    pub last_run_ms: i64,
}

/// Loads the checkpoint of `dir` and removes what an interrupted run left.
pub(crate) fn load(dir: &Path, log_end: i64) -> Result<CleanerState, StorageError> {
    remove_cleaning_dir(&dir.join(CLEANING_DIR))?;
    let Some(bytes) = files::read_optional(&dir.join(CHECKPOINT_FILE))? else {
        return Ok(CleanerState::default());
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut fields = text.split_whitespace().map(|f| f.parse::<i64>().ok());
    let compacted_below = fields.next().flatten().unwrap_or(0).clamp(0, log_end);
    let tombstones_due_ms = fields.next().flatten().filter(|t| *t >= 0);
    Ok(CleanerState {
        compacted_below,
        tombstones_due_ms,
        totals: CleanerTotals::default(),
    })
}

pub(crate) fn write_checkpoint(dir: &Path, state: &CleanerState) -> Result<(), StorageError> {
    let text = format!(
        "{} {}\n",
        state.compacted_below,
        state.tombstones_due_ms.unwrap_or(-1)
    );
    files::write_atomic(dir, CHECKPOINT_FILE, text.as_bytes(), true)
}

pub(crate) fn remove_cleaning_dir(path: &Path) -> Result<(), StorageError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io(format!("remove {}", path.display()), e)),
    }
}
