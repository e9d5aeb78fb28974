//! Leader-epoch cache: the offset at which each partition leader epoch
//! started, persisted as `leader-epoch-checkpoint`. Answers
//! OffsetForLeaderEpoch, which followers use to find where their log
//! diverges from a new leader's.
//!
//! File format (text, like Kafka's checkpoint files): a version line `0`,
//! a count line, then one `epoch start_offset` line per entry.

use std::path::{Path, PathBuf};

use crate::error::StorageError;
use crate::files::{self, EPOCH_FILE};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EpochEntry {
    pub(crate) epoch: i32,
    pub(crate) start_offset: i64,
}

#[derive(Debug)]
pub(crate) struct LeaderEpochCache {
    dir: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint. A missing or unreadable file gives an empty
    /// cache and `false`, and the caller rebuilds it from batch headers.
    pub(crate) fn load(dir: &Path) -> Result<(LeaderEpochCache, bool), StorageError> {
        let mut cache = LeaderEpochCache {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
        };
        let Some(bytes) = files::read_optional(&dir.join(EPOCH_FILE))? else {
            return Ok((cache, false));
        };
        match parse(&bytes) {
            Some(entries) => {
                cache.entries = entries;
                Ok((cache, true))
            }
            None => {
                tracing::warn!(dir = %dir.display(), "leader epoch checkpoint unreadable; rebuilding from the log");
                Ok((cache, false))
            }
        }
    }

    pub(crate) fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    #[cfg(test)]
    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Records that `epoch` starts at `start_offset`. Returns true if the
    /// cache changed (and needs persisting). Negative epochs and epochs not
    /// above the latest are ignored.
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 {
            return false;
        }
        if let Some(last) = self.entries.last() {
            if epoch <= last.epoch {
                return false;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// Forgets epochs that start at or after `end_offset` (log truncated).
    pub(crate) fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        before != self.entries.len()
    }

    /// Moves the history's start up to `start_offset` (log start raised):
    /// entries wholly below it are dropped, the one spanning it is clamped.
    pub(crate) fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let below = self
            .entries
            .iter()
            .take_while(|e| e.start_offset < start_offset)
            .count();
        if below == 0 {
            return false;
        }
        let mut spanning = self.entries[below - 1];
        self.entries.drain(..below);
        let next_starts_here = self
            .entries
            .first()
            .is_some_and(|e| e.start_offset == start_offset);
        if !next_starts_here {
            spanning.start_offset = start_offset;
            self.entries.insert(0, spanning);
        }
        true
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// OffsetForLeaderEpoch: the largest epoch `<= requested` and the offset
    /// where the next higher epoch starts (or `log_end` for the latest).
    pub(crate) fn end_offset_for(&self, requested: i32, log_end: i64) -> Option<(i32, i64)> {
        let latest = self.entries.last()?;
        if requested == latest.epoch {
            return Some((requested, log_end));
        }
        let higher = self.entries.iter().find(|e| e.epoch > requested)?;
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => Some((floor.epoch, higher.start_offset)),
            None => Some((requested, higher.start_offset)),
        }
    }

    pub(crate) fn persist(&self) -> Result<(), StorageError> {
        let mut s = format!("0\n{}\n", self.entries.len());
        for e in &self.entries {
            s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        files::write_atomic(&self.dir, EPOCH_FILE, s.as_bytes(), true)
    }
}

fn parse(bytes: &[u8]) -> Option<Vec<EpochEntry>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut out: Vec<EpochEntry> = Vec::new();
    for line in lines.by_ref().take(count) {
        let (e, o) = line.trim().split_once(' ')?;
        let entry = EpochEntry {
            epoch: e.parse().ok()?,
            start_offset: o.parse().ok()?,
        };
        if let Some(prev) = out.last() {
            if entry.epoch <= prev.epoch || entry.start_offset < prev.start_offset {
                return None;
            }
        }
        out.push(entry);
    }
    (out.len() == count).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let dir = tempfile::tempdir().unwrap().keep();
        let (mut c, _) = LeaderEpochCache::load(&dir).unwrap();
        for &(e, o) in entries {
            assert!(c.assign(e, o));
        }
        c
    }

    #[test]
    fn end_offset_follows_kafka_offset_for_leader_epoch() {
        let c = cache(&[(1, 0), (3, 100), (5, 250)]);
        assert_eq!(
            c.end_offset_for(5, 300),
            Some((5, 300)),
            "latest epoch ends at log end"
        );
        assert_eq!(c.end_offset_for(3, 300), Some((3, 250)));
        assert_eq!(
            c.end_offset_for(4, 300),
            Some((3, 250)),
            "unknown epoch maps to its floor"
        );
        assert_eq!(
            c.end_offset_for(0, 300),
            Some((0, 0)),
            "below the first epoch"
        );
        assert_eq!(c.end_offset_for(6, 300), None, "above the latest epoch");
    }

    #[test]
    fn epochs_only_move_forward() {
        let mut c = cache(&[(2, 10)]);
        assert!(!c.assign(2, 20));
        assert!(!c.assign(1, 30));
        assert!(!c.assign(-1, 30));
        assert_eq!(c.latest().unwrap().start_offset, 10);
    }

    #[test]
    fn checkpoint_survives_reload_and_truncations() {
        let c = cache(&[(1, 0), (3, 100), (5, 250)]);
        c.persist().unwrap();
        let (mut r, ok) = LeaderEpochCache::load(&c.dir).unwrap();
        assert!(ok);
        assert_eq!(r.entries(), c.entries());
        assert!(r.truncate_from_end(250));
        assert_eq!(r.latest().unwrap().epoch, 3);
        assert!(r.truncate_from_start(120));
        assert_eq!(
            r.entries(),
            &[EpochEntry {
                epoch: 3,
                start_offset: 120
            }]
        );
    }

    #[test]
    fn garbage_checkpoint_is_reported_for_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(EPOCH_FILE), b"0\n2\n1 0\n").unwrap();
        let (c, ok) = LeaderEpochCache::load(dir.path()).unwrap();
        assert!(!ok);
        assert!(c.latest().is_none());
    }
}
