//! Installing a finished compaction run on the log's owning task (see
//! [`crate::compaction`] for the run and [`crate::merge`] for the steps on
//! disk and their recovery).

use crate::cleaner::{remove_cleaning_dir, write_checkpoint, CLEANING_DIR};
use crate::compaction::{Compacted, CompactionReport};
use crate::error::StorageError;
use crate::log::PartitionLog;
use crate::merge::{self, Group};

impl PartitionLog {
    /// Puts a finished run's segments in place of the ones it read (see
    /// the module docs). A run planned before a truncation, or whose
    /// segments changed since, installs nothing for them; its files are
    /// removed.
    pub fn install_compaction(
        &mut self,
        done: Compacted,
        now_ms: i64,
    ) -> Result<CompactionReport, StorageError> {
        self.install_compaction_segments(done, now_ms, |_| false)
            .map(|(report, _)| report)
    }

    /// [`PartitionLog::install_compaction`], leaving out the groups of
    /// which a segment's base offset `keep` names (as if it had changed
    /// since the plan); also returns the base offsets of the segments it
    /// wrote.
    pub(crate) fn install_compaction_segments(
        &mut self,
        done: Compacted,
        now_ms: i64,
        keep: impl Fn(i64) -> bool,
    ) -> Result<(CompactionReport, Vec<i64>), StorageError> {
        self.check_online()?;
        let mut installed = Vec::new();
        let cleaning = self.dir.join(CLEANING_DIR);
        let mut report = CompactionReport {
            compacted_below: self.cleaner.compacted_below,
            ..CompactionReport::default()
        };
        if done.truncations != self.truncations {
            remove_cleaning_dir(&cleaning)?;
            return Ok((report, installed));
        }
        // every segment of a group must still be the one planned
        let (ready, changed): (Vec<_>, Vec<_>) = done.replacements.into_iter().partition(|r| {
            r.olds.iter().all(|o| {
                !keep(o.base)
                    && self
                        .segments
                        .get(&o.base)
                        .is_some_and(|s| s.sealed && s.next_offset == o.next && s.size == o.size)
            })
        });
        let all_in_place = changed.is_empty();
        drop(changed);
        if !ready.is_empty() {
            let groups: Vec<Group> = ready
                .iter()
                .map(|r| Group {
                    base: r.base,
                    end: r.next,
                    olds: r.olds.iter().map(|o| o.base).collect(),
                })
                .collect();
            merge::write_journal(&self.dir, &groups)?;
            if let Err(e) = merge::crash_point(merge::Step::Journal) {
                self.health.set_offline(e.to_string());
                return Err(e);
            }
            // past the commit point: a failure leaves the install to the
            // next open, and the log offline until then
            for (r, g) in ready.into_iter().zip(&groups) {
                let old_bytes: u64 = r.olds.iter().map(|o| o.size).sum();
                let replaced = r.olds.len();
                let swapped = self.swap_group(r, g, &cleaning);
                let new_size = match swapped {
                    Ok(size) => size,
                    Err(e) => {
                        self.health
                            .set_offline(format!("installing a compaction run failed: {e}"));
                        return Err(e);
                    }
                };
                report.segments += replaced;
                report.segments_after += 1;
                report.bytes_before += old_bytes;
                report.bytes_after += new_size;
                installed.push(g.base);
            }
            if let Err(e) = merge::remove_journal(&self.dir) {
                self.health
                    .set_offline(format!("finishing a compaction install failed: {e}"));
                return Err(e);
            }
        }
        remove_cleaning_dir(&cleaning)?;
        report.records_removed = done.records_removed;
        if all_in_place {
            self.cleaner.compacted_below = self.cleaner.compacted_below.max(done.end);
            self.cleaner.tombstones_due_ms = done.tombstones_due_ms;
        }
        report.compacted_below = self.cleaner.compacted_below;
        let t = &mut self.cleaner.totals;
        t.runs += 1;
        t.bytes_read += done.bytes_read;
        t.bytes_written += report.bytes_after;
        t.bytes_removed += report.bytes_before.saturating_sub(report.bytes_after);
        t.records_removed += done.records_removed;
        t.last_run_ms = now_ms;
        write_checkpoint(&self.dir, &self.cleaner)?;
        Ok((report, installed))
    }

    /// Steps 2 to 4 of an install (see `merge`) for one group, on disk and
    /// in the segment map; returns the new segment's size.
    fn swap_group(
        &mut self,
        r: crate::compaction::Replacement,
        g: &Group,
        cleaning: &std::path::Path,
    ) -> Result<u64, StorageError> {
        for o in &r.olds {
            if let Some(old) = self.segments.get_mut(&o.base) {
                old.unload_indexes();
            }
        }
        let (dir, aborted) = (&self.dir, &self.aborted);
        let swapped = merge::swap_in(dir, cleaning, g, || {
            aborted.persist_segment(dir, g.base, g.end)
        })?;
        if !swapped {
            return Err(StorageError::io(
                format!(
                    "install the compacted segment {} of {}",
                    g.base,
                    dir.display()
                ),
                std::io::Error::other("neither the new nor the old log file is there"),
            ));
        }
        for o in &r.olds[1..] {
            self.segments.remove(&o.base);
        }
        let mut new = r.new;
        let log = crate::files::offset_path(&self.dir, g.base, crate::files::LOG_EXT);
        let ix = crate::files::offset_path(&self.dir, g.base, crate::files::INDEX_EXT);
        let tix = crate::files::offset_path(&self.dir, g.base, crate::files::TIME_INDEX_EXT);
        new.path = log;
        new.offset_index.renamed(ix);
        new.time_index.renamed(tix);
        new.next_offset = r.next;
        new.sealed = true;
        new.unload_indexes();
        let size = new.size;
        self.segments.insert(g.base, new);
        Ok(size)
    }
}
