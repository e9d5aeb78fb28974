//! Per-partition and per-group series on `/metrics`, with bounded
//! cardinality.
//!
//! Each open partition carries a [`PartitionStats`](super::stats::PartitionStats) of atomics that the
//! produce and fetch paths add to (no lock, no allocation per request). A
//! scrape walks the open partitions and the groups' committed offsets. The
//! first `max_series` (topic, partition) pairs a scrape sees get series of
//! their own and keep them while they stay open; any more are summed into
//! one series labelled `topic="other",partition="other"`, so a broker with
//! a hundred thousand partitions still answers a scrape of bounded size.
//! Consumer lag is bounded the same way per (group, topic).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use metastore::{AgentId, Groups, Metastore, Topics};

use crate::partition::Partitions;
use crate::telemetry::prometheus::{write_family, write_sample};

/// The label value of the series that sums everything past the cap.
pub const OTHER: &str = "other";

/// The bounded series of one agent's open partitions and of the groups'
/// lag on the partitions it leads.
pub struct Series {
    catalog: Metastore,
    open: Arc<Partitions>,
    node: AgentId,
    max_series: usize,
    /// Keys with series of their own, admitted in the order scrapes saw them.
    partitions: Mutex<HashSet<(Arc<str>, i32)>>,
    groups: Mutex<HashSet<(String, String)>>,
}

#[derive(Default, Clone, Copy)]
struct Row {
    bytes_in: u64,
    records_in: u64,
    bytes_out: u64,
    log_end: u64,
    high_watermark: u64,
    dirty_bytes: u64,
    compactable_bytes: u64,
    cleaner_runs: u64,
    cleaner_bytes_removed: u64,
    cleaner_records_removed: u64,
}

impl Row {
    fn add(&mut self, o: &Row) {
        self.bytes_in += o.bytes_in;
        self.records_in += o.records_in;
        self.bytes_out += o.bytes_out;
        self.log_end += o.log_end;
        self.high_watermark += o.high_watermark;
        self.dirty_bytes += o.dirty_bytes;
        self.compactable_bytes += o.compactable_bytes;
        self.cleaner_runs += o.cleaner_runs;
        self.cleaner_bytes_removed += o.cleaner_bytes_removed;
        self.cleaner_records_removed += o.cleaner_records_removed;
    }

    /// Whether the partition has anything to say about compaction.
    fn compacted(&self) -> bool {
        self.compactable_bytes > 0 || self.cleaner_runs > 0
    }
}

/// Keeps the admitted keys that are still present and admits new ones, in
/// sorted order, while fewer than `cap` are admitted; returns whether each
/// present key has a series of its own.
fn admit<K: Ord + Clone + std::hash::Hash>(
    admitted: &mut HashSet<K>,
    present: &[K],
    cap: usize,
) -> HashSet<K> {
    let now: HashSet<&K> = present.iter().collect();
    admitted.retain(|k| now.contains(k));
    let mut fresh: Vec<&K> = present.iter().filter(|k| !admitted.contains(k)).collect();
    fresh.sort();
    for k in fresh {
        if admitted.len() >= cap {
            break;
        }
        admitted.insert(k.clone());
    }
    admitted.clone()
}

impl Series {
    /// Series of `open`'s partitions and of lag on those `node` leads, at
    /// most `max_series` of each kind.
    pub fn new(
        catalog: Metastore,
        open: Arc<Partitions>,
        node: AgentId,
        max_series: usize,
    ) -> Self {
        Series {
            catalog,
            open,
            node,
            max_series,
            partitions: Mutex::default(),
            groups: Mutex::default(),
        }
    }

    /// Prometheus text of the per-partition and per-group series.
    pub fn render(&self) -> String {
        let cap = self.max_series;
        let handles = self.open.open_handles();
        let mut rows: BTreeMap<(Arc<str>, i32), Row> = BTreeMap::new();
        for h in &handles {
            let s = h.stats();
            let row = Row {
                bytes_in: s.bytes_in.load(Ordering::Relaxed),
                records_in: s.records_in.load(Ordering::Relaxed),
                bytes_out: s.bytes_out.load(Ordering::Relaxed),
                log_end: u64::try_from(*h.log_end().borrow()).unwrap_or(0),
                high_watermark: u64::try_from(*h.high_watermark().borrow()).unwrap_or(0),
                dirty_bytes: s.cleaner.dirty_bytes.load(Ordering::Relaxed),
                compactable_bytes: s.cleaner.compactable_bytes.load(Ordering::Relaxed),
                cleaner_runs: s.cleaner.runs.load(Ordering::Relaxed),
                cleaner_bytes_removed: s.cleaner.bytes_removed.load(Ordering::Relaxed),
                cleaner_records_removed: s.cleaner.records_removed.load(Ordering::Relaxed),
            };
            rows.insert((s.topic.clone(), h.key().partition), row);
        }
        let keys: Vec<(Arc<str>, i32)> = rows.keys().cloned().collect();
        let own = {
            let mut admitted = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
            admit(&mut admitted, &keys, cap)
        };
        let mut other: Option<Row> = None;
        let mut shown = Vec::with_capacity(rows.len().min(cap));
        for (k, r) in &rows {
            if own.contains(k) {
                shown.push((k.0.to_string(), k.1.to_string(), *r));
            } else {
                other.get_or_insert_with(Row::default).add(r);
            }
        }
        let beyond = rows.len() - shown.len();
        if let Some(r) = other {
            shown.push((OTHER.to_string(), OTHER.to_string(), r));
        }
        let mut out = String::new();
        type Field = fn(&Row) -> u64;
        let families: [(&str, &str, &str, Field); 5] = [
            (
                "aerostream_partition_bytes_in_total",
                "counter",
                "Record bytes appended to the partition (retries of batches already in the log not counted)",
                |r| r.bytes_in,
            ),
            (
                "aerostream_partition_records_in_total",
                "counter",
                "Records appended to the partition",
                |r| r.records_in,
            ),
            (
                "aerostream_partition_bytes_out_total",
                "counter",
                "Record bytes sent to consumers from the partition",
                |r| r.bytes_out,
            ),
            (
                "aerostream_partition_log_end_offset",
                "gauge",
                "Offset the next record appended to the partition gets (summed under topic=\"other\")",
                |r| r.log_end,
            ),
            (
                "aerostream_partition_high_watermark",
                "gauge",
                "Offset below which consumers may read (summed under topic=\"other\")",
                |r| r.high_watermark,
            ),
        ];
        for (name, kind, help, field) in families {
            write_family(&mut out, name, kind, help);
            for (topic, partition, r) in &shown {
                write_sample(
                    &mut out,
                    name,
                    &[("topic", topic), ("partition", partition)],
                    field(r),
                );
            }
        }
        // compaction: only the partitions of compacted topics
        let cleaner: [(&str, &str, &str, Field); 5] = [
            (
                "aerostream_partition_cleaner_dirty_bytes",
                "gauge",
                "Bytes of a compacted partition's sealed segments written since they were last compacted",
                |r| r.dirty_bytes,
            ),
            (
                "aerostream_partition_cleaner_compactable_bytes",
                "gauge",
                "Bytes of a compacted partition's sealed segments (the dirty ratio is dirty over these)",
                |r| r.compactable_bytes,
            ),
            (
                "aerostream_partition_cleaner_runs_total",
                "counter",
                "Compaction runs installed on the partition since it was opened",
                |r| r.cleaner_runs,
            ),
            (
                "aerostream_partition_cleaner_bytes_removed_total",
                "counter",
                "Bytes compaction removed from the partition's log since it was opened",
                |r| r.cleaner_bytes_removed,
            ),
            (
                "aerostream_partition_cleaner_records_removed_total",
                "counter",
                "Records compaction removed from the partition's log since it was opened",
                |r| r.cleaner_records_removed,
            ),
        ];
        if shown.iter().any(|(_, _, r)| r.compacted()) {
            for (name, kind, help, field) in cleaner {
                write_family(&mut out, name, kind, help);
                for (topic, partition, r) in shown.iter().filter(|(_, _, r)| r.compacted()) {
                    write_sample(
                        &mut out,
                        name,
                        &[("topic", topic), ("partition", partition)],
                        field(r),
                    );
                }
            }
        }
        write_family(
            &mut out,
            "aerostream_partition_series_aggregated",
            "gauge",
            "Open partitions past the series cap, summed under topic=\"other\"",
        );
        write_sample(
            &mut out,
            "aerostream_partition_series_aggregated",
            &[],
            beyond as u64,
        );
        self.render_lag(&mut out, &rows, cap);
        out
    }

    /// Consumer lag per (group, topic): the high watermark minus the
    /// committed offset, summed over the topic's partitions this node leads
    /// (each leader reports its own partitions).
    fn render_lag(&self, out: &mut String, rows: &BTreeMap<(Arc<str>, i32), Row>, cap: usize) {
        let catalog = &self.catalog;
        let mut led: HashMap<(&str, i32), u64> = HashMap::new();
        for ((topic, partition), r) in rows {
            let leads = catalog.topic(topic).is_some_and(|t| {
                usize::try_from(*partition)
                    .ok()
                    .and_then(|i| t.partitions.get(i))
                    .is_some_and(|p| p.leader == Some(self.node))
            });
            if leads {
                led.insert((topic, *partition), r.high_watermark);
            }
        }
        let mut lag: BTreeMap<(String, String), u64> = BTreeMap::new();
        for group in catalog.groups() {
            for ((topic, partition), committed) in catalog.committed_offsets(&group) {
                let Some(hw) = led.get(&(topic.as_str(), partition)) else {
                    continue;
                };
                let behind = hw.saturating_sub(u64::try_from(committed.offset).unwrap_or(0));
                *lag.entry((group.clone(), topic)).or_default() += behind;
            }
        }
        let keys: Vec<(String, String)> = lag.keys().cloned().collect();
        let own = {
            let mut admitted = self.groups.lock().unwrap_or_else(|p| p.into_inner());
            admit(&mut admitted, &keys, cap)
        };
        let name = "aerostream_consumer_group_lag";
        write_family(
            out,
            name,
            "gauge",
            "Records between a group's committed offset and the high watermark, summed over the topic's partitions led here",
        );
        let mut other: Option<u64> = None;
        for (k, v) in &lag {
            if own.contains(k) {
                write_sample(out, name, &[("group", &k.0), ("topic", &k.1)], *v);
            } else {
                *other.get_or_insert(0) += v;
            }
        }
        if let Some(v) = other {
            write_sample(out, name, &[("group", OTHER), ("topic", OTHER)], v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admitted_keys_keep_their_series_and_newcomers_wait_for_room() {
        let mut admitted = HashSet::new();
        let own = admit(&mut admitted, &["b", "a", "c"], 2);
        assert_eq!(own, HashSet::from(["a", "b"]));
        // "0" sorts first but "a" and "b" keep their series
        let own = admit(&mut admitted, &["0", "a", "b", "c"], 2);
        assert_eq!(own, HashSet::from(["a", "b"]));
        // "a" closed: the first waiting key takes its place
        let own = admit(&mut admitted, &["0", "b", "c"], 2);
        assert_eq!(own, HashSet::from(["0", "b"]));
    }
}
