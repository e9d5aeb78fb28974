//! The manifest seam: which sealed objects hold which offsets of a partition.
//!
//! The metastore is the production manifest (a Raft write per committed
//! segment); [`MemoryManifest`] serves tests. A manifest entry is the commit
//! point of an upload: objects without an entry are never read, so a crash
//! between upload and commit leaves at worst an orphan that the next upload
//! of the same segment overwrites (keys are deterministic).

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use parking_lot::Mutex;

use super::PartitionKey;

/// One sealed segment in object storage, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TieredSegment {
    /// Full object key of the `.seg` object; the `.idx` and `.tix` objects sit
    /// next to it with their own extensions.
    pub key: String,
    pub base_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    /// Base timestamp of the first batch (-1 if unknown).
    pub first_timestamp: i64,
    /// Largest batch max timestamp (-1 if unknown).
    pub max_timestamp: i64,
    /// Bytes of the `.seg` object.
    pub size: u64,
    /// CRC-32C of the `.seg` object's bytes.
    pub checksum: u32,
    /// Bytes of the `.idx` object.
    pub index_size: u64,
    /// Bytes of the `.tix` object.
    pub time_index_size: u64,
    /// First offset the entry serves, when above `base_offset` (`None`: from
    /// `base_offset`). A new partition leader's local segments have their
    /// own boundaries; one that straddles the end of what earlier leaders
    /// committed is uploaded whole and serves only the offsets after that
    /// end, which earlier entries serve. `base_offset` stays the object's
    /// own base: its `.idx` and `.tix` count from there.
    pub served_from: Option<i64>,
    /// Where the entry's bytes are when it was packed with other segments
    /// into one object (see [`PackedAt`]); `None`: its own objects, named
    /// from `key`.
    pub pack: Option<PackedAt>,
}

/// An entry's place in a packed object: several sealed segments, of any
/// partitions, uploaded as one object to save requests. A segment's `.seg`
/// bytes start at `offset`; its `.idx`, `.tix`, producer snapshot and
/// aborted-transaction index follow back to back, sized by the entry
/// (`index_size`, `time_index_size`) and by this record. The entry's `key`
/// stays the segment's own `.seg` key: it names the entry (commits,
/// replaces), never an object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PackedAt {
    /// Key of the packed object.
    pub key: String,
    pub offset: u64,
    /// Bytes of the whole packed object.
    pub object_size: u64,
    /// Bytes of the producer snapshot (0: none).
    pub producers_size: u64,
    /// Bytes of the aborted-transaction index (0: none).
    pub txn_index_size: u64,
}

/// Where one of an entry's objects lies: the object holding it, where in
/// that object it starts, its length when known, and the object's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectPlace {
    pub key: String,
    pub start: u64,
    /// `None` for an unpacked optional sidecar, whose size the manifest
    /// does not record (the whole object, if there is one).
    pub len: Option<u64>,
    /// Bytes of the whole object holding it (0 when unknown).
    pub object_size: u64,
}

/// The key of a segment's sibling object (`.idx`, `.tix`) from its `.seg` key.
pub fn sibling_key(seg_key: &str, extension: &str) -> String {
    let stem = seg_key
        .strip_suffix(&format!(".{}", cache::layout::SEGMENT_EXT))
        .unwrap_or(seg_key);
    format!("{stem}.{extension}")
}

impl TieredSegment {
    /// Where the entry's object of `kind` lies.
    pub fn place(&self, kind: cache::layout::ObjectKind) -> ObjectPlace {
        use cache::layout::ObjectKind;
        match &self.pack {
            Some(p) => {
                let (before, len) = match kind {
                    ObjectKind::Segment => (0, self.size),
                    ObjectKind::Index => (self.size, self.index_size),
                    ObjectKind::TimeIndex => (self.size + self.index_size, self.time_index_size),
                    ObjectKind::ProducerSnapshot => (
                        self.size + self.index_size + self.time_index_size,
                        p.producers_size,
                    ),
                    ObjectKind::TxnIndex => (
                        self.size + self.index_size + self.time_index_size + p.producers_size,
                        p.txn_index_size,
                    ),
                };
                ObjectPlace {
                    key: p.key.clone(),
                    start: p.offset + before,
                    len: Some(len),
                    object_size: p.object_size,
                }
            }
            None => {
                let (len, object_size) = match kind {
                    ObjectKind::Segment => (Some(self.size), self.size),
                    ObjectKind::Index => (Some(self.index_size), self.index_size),
                    ObjectKind::TimeIndex => (Some(self.time_index_size), self.time_index_size),
                    ObjectKind::ProducerSnapshot | ObjectKind::TxnIndex => (None, 0),
                };
                let key = match kind {
                    ObjectKind::Segment => self.key.clone(),
                    other => sibling_key(&self.key, other.extension()),
                };
                ObjectPlace {
                    key,
                    start: 0,
                    len,
                    object_size,
                }
            }
        }
    }

    /// Offset after the last one held.
    pub fn next_offset(&self) -> i64 {
        self.last_offset.saturating_add(1)
    }

    /// The first offset this entry serves (see [`TieredSegment::served_from`]).
    pub fn first_served(&self) -> i64 {
        self.served_from.unwrap_or(self.base_offset)
    }

    /// Whether this entry serves `offset`.
    pub fn contains(&self, offset: i64) -> bool {
        (self.first_served()..=self.last_offset).contains(&offset)
    }
}

/// A topic whose partitions' objects must be deleted (the topic was deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicToPurge {
    pub topic_id: uuid::Uuid,
    /// Manifest entries at deletion time, per partition.
    pub segments: BTreeMap<i32, Vec<TieredSegment>>,
}

/// Why a manifest call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("manifest {operation} failed: {reason}")]
pub struct ManifestError {
    pub operation: &'static str,
    pub reason: String,
    /// Whether the same call may succeed later (the metastore is unavailable,
    /// a leader election is under way) rather than being refused for good.
    pub retriable: bool,
}

/// Where committed segments, and each partition's log start, are recorded.
///
/// Contract (checked for any backend by `storage::tier::manifest_suite`,
/// with the `testing` feature):
/// - `commit` is durable when it returns `Ok` and idempotent (the same entry
///   committed twice is one entry); an entry whose key is already recorded
///   with other content, or that serves offsets another entry of the
///   partition serves (`first_served..=last_offset`), or whose
///   `served_from` lies outside its object, is refused with a
///   non-retriable error. Objects may overlap; the offsets served never do.
/// - `segments` reads a possibly slightly stale local copy, sorted by the
///   offsets served, and always includes every entry this process committed.
/// - `trim` removes exactly the entries wholly below the offset and returns
///   them; an entry straddling it stays. A later `commit` of an entry
///   wholly below the highest trim offset, or below the log start, is
///   refused with a non-retriable error (a late commit would move the log
///   start back); the same entry committed again while still recorded is
///   still accepted.
/// - `set_log_start` is durable when it returns `Ok` and monotonic: an
///   offset at or below the recorded one changes nothing, and a negative
///   one is refused (not retriable). `log_start` reads
///   a possibly slightly stale local copy that includes this process's own
///   writes. The log start survives the loss of every local copy of the
///   partition: it is the DeleteRecords floor.
/// - `replace` swaps one or several consecutive entries for one entry
///   serving exactly the offsets they served together (a compacted copy
///   of the same segment, or of several merged into one, under new keys),
///   in place and atomically: a reader sees the old entries or the new
///   one, never both or neither. It is durable when it returns `Ok`, and
///   idempotent: once the new entry is recorded and the old ones gone, the
///   same call succeeds again. It is refused with a non-retriable error
///   when an old entry is not recorded (retention trimmed it, or another
///   replace won), when the old entries are not consecutive in the list
///   or do not serve adjacent offsets, when the new entry serves other
///   offsets than they do together (`first_served..=last_offset`) or
///   `served_from` lies outside its object, or when the new key is already
///   recorded with other content; the metastore also refuses it from a
///   deposed leader, as `commit`. The old entries' objects are the
///   caller's to delete, after readers that already looked them up are
///   done.
/// - `deleted_topics` lists a deleted topic's entries until
///   `forget_deleted_topic`.
#[async_trait]
pub trait Manifest: Send + Sync + 'static {
    /// The partition's entries, sorted by the offsets they serve.
    fn segments(&self, partition: PartitionKey) -> Vec<TieredSegment>;
    /// Records `segment` as held by object storage.
    async fn commit(
        &self,
        partition: PartitionKey,
        segment: TieredSegment,
    ) -> Result<(), ManifestError>;
    /// Replaces the consecutive entries whose `.seg` keys are `old_keys`
    /// (in offset order) by `entry`, which must serve exactly the offsets
    /// they serve together (see the contract above).
    async fn replace(
        &self,
        partition: PartitionKey,
        old_keys: &[String],
        entry: TieredSegment,
    ) -> Result<(), ManifestError>;
    /// Drops the entries wholly below `below_offset`; returns them so their
    /// objects can be deleted.
    async fn trim(
        &self,
        partition: PartitionKey,
        below_offset: i64,
    ) -> Result<Vec<TieredSegment>, ManifestError>;
    /// Deleted topics whose objects still await deletion.
    fn deleted_topics(&self) -> Vec<TopicToPurge>;
    /// Forgets a deleted topic once its objects are gone.
    async fn forget_deleted_topic(&self, topic_id: uuid::Uuid) -> Result<(), ManifestError>;
    /// The partition's recorded log start (the DeleteRecords floor), if any.
    fn log_start(&self, partition: PartitionKey) -> Option<i64>;
    /// Records `offset` as the partition's log start: durable on `Ok`; a
    /// lower or equal offset than the recorded one is a no-op.
    async fn set_log_start(
        &self,
        partition: PartitionKey,
        offset: i64,
    ) -> Result<(), ManifestError>;
    /// The keys of the packed objects that some entry of any partition
    /// still reads from ([`PackedAt::key`]), as the authoritative copy of
    /// the manifest knows them; `Ok(None)` when this process's copy cannot
    /// vouch for being complete (in a cluster: it is not the metastore's
    /// leader). A packed object absent from the set, and older than any
    /// upload that could still be committing, may be deleted.
    async fn packs_in_use(&self) -> Result<Option<BTreeSet<String>>, ManifestError>;
}

/// An in-process manifest (tests, single-process tools); with the
/// `testing` feature it can be told to fail.
#[derive(Debug, Default)]
pub struct MemoryManifest {
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    partitions: BTreeMap<PartitionKey, Vec<TieredSegment>>,
    log_starts: BTreeMap<PartitionKey, i64>,
    /// The highest offset each partition was trimmed below.
    trimmed_below: BTreeMap<PartitionKey, i64>,
    deleted: Vec<TopicToPurge>,
    failing: bool,
    commits: u64,
}

impl MemoryManifest {
    pub fn new() -> Self {
        MemoryManifest::default()
    }

    /// While `true`, every write fails with a retriable error.
    #[cfg(any(test, feature = "testing"))]
    pub fn set_failing(&self, failing: bool) {
        self.state.lock().failing = failing;
    }

    /// Successful commits so far (retries of the same entry included).
    #[cfg(any(test, feature = "testing"))]
    pub fn commits(&self) -> u64 {
        self.state.lock().commits
    }

    /// Moves a topic's entries to the deleted list, as topic deletion does.
    pub fn delete_topic(&self, topic_id: uuid::Uuid) {
        let mut s = self.state.lock();
        s.log_starts.retain(|k, _| k.topic_id != topic_id);
        s.trimmed_below.retain(|k, _| k.topic_id != topic_id);
        let keys: Vec<PartitionKey> = s
            .partitions
            .keys()
            .filter(|k| k.topic_id == topic_id)
            .copied()
            .collect();
        let mut segments = BTreeMap::new();
        for k in keys {
            if let Some(list) = s.partitions.remove(&k) {
                segments.insert(k.partition, list);
            }
        }
        s.deleted.push(TopicToPurge { topic_id, segments });
    }

    fn check(&self, s: &MemoryState, operation: &'static str) -> Result<(), ManifestError> {
        if s.failing {
            return Err(ManifestError {
                operation,
                reason: "the manifest is failing on purpose".into(),
                retriable: true,
            });
        }
        Ok(())
    }
}

#[async_trait]
impl Manifest for MemoryManifest {
    fn segments(&self, partition: PartitionKey) -> Vec<TieredSegment> {
        self.state
            .lock()
            .partitions
            .get(&partition)
            .cloned()
            .unwrap_or_default()
    }

    async fn commit(
        &self,
        partition: PartitionKey,
        segment: TieredSegment,
    ) -> Result<(), ManifestError> {
        let mut s = self.state.lock();
        self.check(&s, "commit")?;
        let first = segment.first_served();
        if !(segment.base_offset..=segment.last_offset).contains(&first) {
            return Err(ManifestError {
                operation: "commit",
                reason: format!(
                    "{} [{}..={}] cannot serve from {first}",
                    segment.key, segment.base_offset, segment.last_offset
                ),
                retriable: false,
            });
        }
        let start = s
            .trimmed_below
            .get(&partition)
            .copied()
            .max(s.log_starts.get(&partition).copied());
        let list = s.partitions.entry(partition).or_default();
        if let Some(existing) = list.iter().find(|e| e.key == segment.key) {
            if *existing == segment {
                s.commits += 1;
                return Ok(());
            }
            return Err(ManifestError {
                operation: "commit",
                reason: format!("{} is already recorded differently", segment.key),
                retriable: false,
            });
        }
        if let Some(start) = start.filter(|start| segment.last_offset < *start) {
            return Err(ManifestError {
                operation: "commit",
                reason: format!("{} lies wholly below the log start {start}", segment.key),
                retriable: false,
            });
        }
        if let Some(e) = list
            .iter()
            .find(|e| e.first_served() <= segment.last_offset && first <= e.last_offset)
        {
            return Err(ManifestError {
                operation: "commit",
                reason: format!("{} overlaps {}", segment.key, e.key),
                retriable: false,
            });
        }
        let at = list.partition_point(|e| e.first_served() < first);
        list.insert(at, segment);
        s.commits += 1;
        Ok(())
    }

    async fn replace(
        &self,
        partition: PartitionKey,
        old_keys: &[String],
        entry: TieredSegment,
    ) -> Result<(), ManifestError> {
        let mut s = self.state.lock();
        self.check(&s, "replace")?;
        let refused = |reason: String| ManifestError {
            operation: "replace",
            reason,
            retriable: false,
        };
        let Some(first_key) = old_keys.first() else {
            return Err(refused(format!("{} replaces no entry", entry.key)));
        };
        if old_keys.contains(&entry.key) {
            return Err(refused(format!("{} cannot replace itself", entry.key)));
        }
        let list = s.partitions.entry(partition).or_default();
        let found: Vec<Option<usize>> = old_keys
            .iter()
            .map(|k| list.iter().position(|e| e.key == *k))
            .collect();
        if let Some(existing) = list.iter().find(|e| e.key == entry.key) {
            if *existing == entry && found.iter().all(Option::is_none) {
                return Ok(());
            }
            return Err(refused(format!(
                "{} is already recorded differently",
                entry.key
            )));
        }
        let Some(at) = found[0] else {
            return Err(refused(format!("{first_key} is not recorded")));
        };
        let olds = replaced_run(list, at, old_keys, &found).map_err(refused)?;
        let (first, last) = (olds[0].first_served(), olds[olds.len() - 1].last_offset);
        if !(entry.base_offset..=entry.last_offset).contains(&entry.first_served())
            || entry.first_served() != first
            || entry.last_offset != last
        {
            return Err(refused(format!(
                "{} serves [{}..={}], {first_key}.. [{first}..={last}]",
                entry.key,
                entry.first_served(),
                entry.last_offset,
            )));
        }
        list.splice(at..at + old_keys.len(), [entry]);
        Ok(())
    }

    async fn trim(
        &self,
        partition: PartitionKey,
        below_offset: i64,
    ) -> Result<Vec<TieredSegment>, ManifestError> {
        let mut s = self.state.lock();
        self.check(&s, "trim")?;
        let trimmed = s.trimmed_below.entry(partition).or_insert(below_offset);
        *trimmed = (*trimmed).max(below_offset);
        let Some(list) = s.partitions.get_mut(&partition) else {
            return Ok(Vec::new());
        };
        let keep_from = list.partition_point(|e| e.last_offset < below_offset);
        Ok(list.drain(..keep_from).collect())
    }

    fn deleted_topics(&self) -> Vec<TopicToPurge> {
        self.state.lock().deleted.clone()
    }

    async fn packs_in_use(&self) -> Result<Option<BTreeSet<String>>, ManifestError> {
        let s = self.state.lock();
        Ok(Some(
            s.partitions
                .values()
                .flatten()
                .filter_map(|e| e.pack.as_ref().map(|p| p.key.clone()))
                .collect(),
        ))
    }

    async fn forget_deleted_topic(&self, topic_id: uuid::Uuid) -> Result<(), ManifestError> {
        let mut s = self.state.lock();
        self.check(&s, "forget deleted topic")?;
        s.deleted.retain(|d| d.topic_id != topic_id);
        Ok(())
    }

    fn log_start(&self, partition: PartitionKey) -> Option<i64> {
        self.state.lock().log_starts.get(&partition).copied()
    }

    async fn set_log_start(
        &self,
        partition: PartitionKey,
        offset: i64,
    ) -> Result<(), ManifestError> {
        let mut s = self.state.lock();
        self.check(&s, "set log start")?;
        if offset < 0 {
            return Err(ManifestError {
                operation: "set log start",
                reason: format!("log start {offset} is negative"),
                retriable: false,
            });
        }
        let start = s.log_starts.entry(partition).or_insert(offset);
        *start = (*start).max(offset);
        Ok(())
    }
}

/// The entries `old_keys` name, found at the positions `found`: they must
/// follow each other from `at` on and serve adjacent offsets.
fn replaced_run<'a>(
    list: &'a [TieredSegment],
    at: usize,
    old_keys: &[String],
    found: &[Option<usize>],
) -> Result<&'a [TieredSegment], String> {
    for (i, (key, f)) in old_keys.iter().zip(found).enumerate() {
        if *f != Some(at + i) {
            return Err(match f {
                None => format!("{key} is not recorded"),
                Some(_) => format!("{key} does not follow the entry before it"),
            });
        }
    }
    let olds = &list[at..at + old_keys.len()];
    if let Some(w) = olds
        .windows(2)
        .find(|w| w[1].first_served() != w[0].last_offset.saturating_add(1))
    {
        return Err(format!("{} and {} leave a gap", w[0].key, w[1].key));
    }
    Ok(olds)
}

/// The entries a compacted local segment of `base..=last` and `size`
/// bytes replaces: the consecutive ones serving exactly its offsets
/// together, the first from its object's base; several (local compaction
/// merged their segments into one), or one with a larger object.
pub(crate) fn replaced_by(
    entries: &[TieredSegment],
    base: i64,
    last: i64,
    size: u64,
) -> Option<Vec<TieredSegment>> {
    let first = locate(entries, base)?;
    if first.base_offset != base || first.first_served() != base {
        return None;
    }
    let at = entries.iter().position(|e| e.key == first.key)?;
    let mut run: Vec<TieredSegment> = Vec::new();
    for e in &entries[at..] {
        if let Some(prev) = run.last() {
            if e.first_served() != prev.last_offset.saturating_add(1) {
                return None;
            }
        }
        run.push(e.clone());
        if e.last_offset >= last {
            break;
        }
    }
    let exact = run.last().is_some_and(|e| e.last_offset == last);
    let smaller = run.len() > 1 || run.first().is_some_and(|e| size < e.size);
    (exact && smaller).then_some(run)
}

/// The entry serving `offset`, else the first entry after it (a consumer
/// asking for an offset in a gap gets the next records, as Kafka does).
/// `entries` are sorted by the offsets they serve, which never overlap, so
/// they are sorted by last offset too.
pub fn locate(entries: &[TieredSegment], offset: i64) -> Option<&TieredSegment> {
    let i = entries.partition_point(|e| e.last_offset < offset);
    entries.get(i)
}

#[cfg(test)]
mod tests {
    use super::MemoryManifest;

    #[tokio::test]
    async fn the_memory_manifest_keeps_the_manifest_contract() {
        super::super::manifest_suite::run_all(|| async { MemoryManifest::new() }).await;
    }
}
