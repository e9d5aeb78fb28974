//! Object key layout for sealed segments.
//!
//! ```text
//! {prefix}/topics/{topic-id}/{partition}/{base-offset:020}-{last-offset:020}.seg
//! {prefix}/topics/{topic-id}/{partition}/{base-offset:020}-{last-offset:020}.idx
//! {prefix}/topics/{topic-id}/{partition}/{base-offset:020}-{last-offset:020}.tix   (time index)
//! {prefix}/topics/{topic-id}/{partition}/{base-offset:020}-{last-offset:020}.producers   (producer snapshot, optional)
//! {prefix}/topics/{topic-id}/{partition}/{base-offset:020}-{last-offset:020}.c{generation}.seg   (compacted copy, same siblings)
//! {prefix}/tombstones/topics/{topic-id}/{partition}/...   (deleted objects, expired by a lifecycle rule)
//! ```
//!
//! Keys are deterministic: the same sealed segment always maps to the same
//! key, so an upload repeated after a crash overwrites an orphan with the same
//! bytes instead of leaving a second copy. Offsets are zero-padded to 20
//! digits so that a lexicographic listing is also offset order.
//!
//! A compacted copy of a tiered segment (the same offsets, fewer records)
//! never takes the key of the objects it replaces: readers that looked up
//! the old manifest entry keep reading the old objects, and the cold cache,
//! which names blocks by key, never mixes the two. Its keys carry a
//! generation (`.c{generation}` before the extension, a decimal number
//! above 0, chosen by the uploader for each compaction of the range);
//! generation 0 is the plain key of the segment as first uploaded.

use object_store::path::Path;
use uuid::Uuid;

use crate::CacheError;

/// First path segment under the prefix for live segment objects.
pub const TOPICS_DIR: &str = "topics";
/// First path segment under the prefix for deleted objects awaiting expiry.
pub const TOMBSTONES_DIR: &str = "tombstones";
/// First path segment under the prefix for packed objects (sealed segments
/// of many partitions in one object, `storage::tier::pack`).
pub const PACKS_DIR: &str = "packs";
/// Extension of a segment's record data object.
pub const SEGMENT_EXT: &str = "seg";
/// Extension of a segment's offset index object.
pub const INDEX_EXT: &str = "idx";
/// Extension of a segment's time index object.
pub const TIME_INDEX_EXT: &str = "tix";
/// Extension of a segment's producer snapshot object: the idempotent
/// producer state at the segment's end. Segments tiered before these were
/// uploaded have none.
pub const PRODUCER_SNAPSHOT_EXT: &str = "producers";
/// Extension of a segment's aborted-transaction index object: the aborted
/// transactions whose ABORT marker lies in the segment. Only segments with
/// such markers have one.
pub const TXN_INDEX_EXT: &str = "txnindex";

/// Which of the objects of a sealed segment a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// The record batches, byte for byte as in the local segment file.
    Segment,
    /// The sparse offset index of the segment.
    Index,
    /// The sparse time index of the segment (ListOffsets by timestamp).
    TimeIndex,
    /// The idempotent producer state at the segment's end, for a replica
    /// whose log starts there.
    ProducerSnapshot,
    /// The aborted transactions whose marker is in the segment.
    TxnIndex,
}

impl ObjectKind {
    /// The file extension used in the key.
    pub fn extension(self) -> &'static str {
        match self {
            ObjectKind::Segment => SEGMENT_EXT,
            ObjectKind::Index => INDEX_EXT,
            ObjectKind::TimeIndex => TIME_INDEX_EXT,
            ObjectKind::ProducerSnapshot => PRODUCER_SNAPSHOT_EXT,
            ObjectKind::TxnIndex => TXN_INDEX_EXT,
        }
    }
}

/// The identity of one sealed segment of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentId {
    pub topic_id: Uuid,
    pub partition: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    /// 0 for the segment as first uploaded; above 0 for a compacted copy
    /// of the same offsets (see the module docs).
    pub generation: u64,
}

impl SegmentId {
    /// Checks the offsets and partition: all non-negative, `last_offset >= base_offset`.
    pub fn new(
        topic_id: Uuid,
        partition: i32,
        base_offset: i64,
        last_offset: i64,
    ) -> Result<Self, CacheError> {
        if partition < 0 {
            return Err(CacheError::InvalidKey {
                reason: format!("partition {partition} is negative"),
            });
        }
        if base_offset < 0 {
            return Err(CacheError::InvalidKey {
                reason: format!("base offset {base_offset} is negative"),
            });
        }
        if last_offset < base_offset {
            return Err(CacheError::InvalidKey {
                reason: format!("last offset {last_offset} is below base offset {base_offset}"),
            });
        }
        Ok(SegmentId {
            topic_id,
            partition,
            base_offset,
            last_offset,
            generation: 0,
        })
    }

    /// The same offsets under the keys of compaction generation
    /// `generation` (0: the plain keys).
    pub fn with_generation(self, generation: u64) -> Self {
        SegmentId { generation, ..self }
    }

    /// `{base:020}-{last:020}.{ext}`, or `{base:020}-{last:020}.c{generation}.{ext}`
    /// for a compacted copy.
    pub fn file_name(&self, kind: ObjectKind) -> String {
        if self.generation == 0 {
            format!(
                "{:020}-{:020}.{}",
                self.base_offset,
                self.last_offset,
                kind.extension()
            )
        } else {
            format!(
                "{:020}-{:020}.c{}.{}",
                self.base_offset,
                self.last_offset,
                self.generation,
                kind.extension()
            )
        }
    }

    /// The key of the data (`.seg`) or index (`.idx`) object under `prefix`.
    pub fn key(&self, prefix: &Path, kind: ObjectKind) -> Path {
        partition_prefix(prefix, self.topic_id, self.partition).join(self.file_name(kind))
    }

    /// The key of the record data object.
    pub fn segment_key(&self, prefix: &Path) -> Path {
        self.key(prefix, ObjectKind::Segment)
    }

    /// The key of the offset index object.
    pub fn index_key(&self, prefix: &Path) -> Path {
        self.key(prefix, ObjectKind::Index)
    }

    /// The key of the time index object.
    pub fn time_index_key(&self, prefix: &Path) -> Path {
        self.key(prefix, ObjectKind::TimeIndex)
    }

    /// The key of the producer snapshot object.
    pub fn producer_snapshot_key(&self, prefix: &Path) -> Path {
        self.key(prefix, ObjectKind::ProducerSnapshot)
    }

    /// The key of the aborted-transaction index object.
    pub fn txn_index_key(&self, prefix: &Path) -> Path {
        self.key(prefix, ObjectKind::TxnIndex)
    }

    /// Whether `offset` lies in this segment.
    pub fn contains(&self, offset: i64) -> bool {
        (self.base_offset..=self.last_offset).contains(&offset)
    }
}

/// `{prefix}/topics/{topic-id}`: everything of one topic (topic deletion lists this).
pub fn topic_prefix(prefix: &Path, topic_id: Uuid) -> Path {
    prefix
        .clone()
        .join(TOPICS_DIR)
        .join(topic_id.hyphenated().to_string())
}

/// `{prefix}/topics/{topic-id}/{partition}`: everything of one partition.
pub fn partition_prefix(prefix: &Path, topic_id: Uuid, partition: i32) -> Path {
    topic_prefix(prefix, topic_id).join(partition.to_string())
}

/// `{prefix}/tombstones`: the prefix a bucket lifecycle rule should expire.
pub fn tombstone_root(prefix: &Path) -> Path {
    prefix.clone().join(TOMBSTONES_DIR)
}

/// The tombstone key for a live key: the same relative path under `{prefix}/tombstones/`.
///
/// Fails if `key` is not under `prefix` (it would not be ours to delete).
pub fn tombstone_key(prefix: &Path, key: &Path) -> Result<Path, CacheError> {
    let rest = key
        .prefix_match(prefix)
        .ok_or_else(|| CacheError::InvalidKey {
            reason: format!("{key} is not under the store prefix {prefix}"),
        })?;
    let mut out = tombstone_root(prefix);
    for part in rest {
        out = out.join(part);
    }
    Ok(out)
}

/// Parses a live segment key back into its identity and kind.
///
/// Returns `None` for keys that are not segment objects under `prefix`
/// (tombstones, multipart leftovers, foreign files), so listings can skip them.
pub fn parse_key(prefix: &Path, key: &Path) -> Option<(SegmentId, ObjectKind)> {
    let mut parts = key.prefix_match(prefix)?;
    if parts.next()?.as_ref() != TOPICS_DIR {
        return None;
    }
    let topic_id = Uuid::parse_str(parts.next()?.as_ref()).ok()?;
    let partition: i32 = parts.next()?.as_ref().parse().ok()?;
    let file = parts.next()?;
    if parts.next().is_some() {
        return None;
    }
    let (stem, ext) = file.as_ref().rsplit_once('.')?;
    let kind = match ext {
        SEGMENT_EXT => ObjectKind::Segment,
        INDEX_EXT => ObjectKind::Index,
        TIME_INDEX_EXT => ObjectKind::TimeIndex,
        PRODUCER_SNAPSHOT_EXT => ObjectKind::ProducerSnapshot,
        TXN_INDEX_EXT => ObjectKind::TxnIndex,
        _ => return None,
    };
    let (range, generation) = match stem.split_once('.') {
        None => (stem, 0),
        Some((range, tag)) => (range, parse_generation_tag(tag)?),
    };
    let (base, last) = range.split_once('-')?;
    if base.len() != 20 || last.len() != 20 {
        return None;
    }
    let id = SegmentId::new(topic_id, partition, base.parse().ok()?, last.parse().ok()?).ok()?;
    Some((id.with_generation(generation), kind))
}

/// `c{generation}` with a generation above 0, in its canonical decimal form
/// (so one generation has one key).
fn parse_generation_tag(tag: &str) -> Option<u64> {
    let digits = tag.strip_prefix('c')?;
    let generation: u64 = digits.parse().ok()?;
    (generation > 0 && generation.to_string() == digits).then_some(generation)
}

/// The compaction generation of a segment object key (any of its objects,
/// full key or file name): 0 for a plain key, `None` when the name is not
/// a segment object's.
pub fn generation_of(key: &str) -> Option<u64> {
    let file = key.rsplit('/').next()?;
    let (stem, _ext) = file.rsplit_once('.')?;
    match stem.split_once('.') {
        None => Some(0),
        Some((_, tag)) => parse_generation_tag(tag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic() -> Uuid {
        Uuid::parse_str("6f1c0a52-3d4e-4b7a-9c1e-0123456789ab").unwrap()
    }

    #[test]
    fn segment_keys_follow_the_documented_layout() {
        let id = SegmentId::new(topic(), 3, 100, 199).unwrap();
        let prefix = Path::from("cluster-a/data");
        assert_eq!(
            id.segment_key(&prefix).as_ref(),
            "cluster-a/data/topics/6f1c0a52-3d4e-4b7a-9c1e-0123456789ab/3/00000000000000000100-00000000000000000199.seg"
        );
        assert_eq!(
            id.index_key(&Path::default()).as_ref(),
            "topics/6f1c0a52-3d4e-4b7a-9c1e-0123456789ab/3/00000000000000000100-00000000000000000199.idx"
        );
    }

    #[test]
    fn listing_order_is_offset_order() {
        let prefix = Path::from("p");
        let mut keys: Vec<Path> = [(0, 9), (10, 99), (100, 1_000_000), (1_000_001, i64::MAX)]
            .iter()
            .map(|&(b, l)| {
                SegmentId::new(topic(), 0, b, l)
                    .unwrap()
                    .segment_key(&prefix)
            })
            .collect();
        let in_offset_order = keys.clone();
        keys.sort();
        assert_eq!(keys, in_offset_order);
    }

    #[test]
    fn keys_parse_back_to_the_same_segment() {
        let prefix = Path::from("a/b");
        let id = SegmentId::new(topic(), 7, 42, 4242).unwrap();
        for kind in [
            ObjectKind::Segment,
            ObjectKind::Index,
            ObjectKind::TimeIndex,
            ObjectKind::ProducerSnapshot,
            ObjectKind::TxnIndex,
        ] {
            assert_eq!(parse_key(&prefix, &id.key(&prefix, kind)), Some((id, kind)));
        }
    }

    #[test]
    fn compacted_keys_carry_their_generation_and_parse_back() {
        let prefix = Path::from("a/b");
        let plain = SegmentId::new(topic(), 7, 42, 4242).unwrap();
        let compacted = plain.with_generation(1_700_000_000_123);
        assert_eq!(
            compacted.segment_key(&prefix).as_ref(),
            "a/b/topics/6f1c0a52-3d4e-4b7a-9c1e-0123456789ab/7/00000000000000000042-00000000000000004242.c1700000000123.seg"
        );
        assert_ne!(compacted.segment_key(&prefix), plain.segment_key(&prefix));
        for kind in [
            ObjectKind::Segment,
            ObjectKind::Index,
            ObjectKind::TimeIndex,
            ObjectKind::ProducerSnapshot,
            ObjectKind::TxnIndex,
        ] {
            assert_eq!(
                parse_key(&prefix, &compacted.key(&prefix, kind)),
                Some((compacted, kind))
            );
            assert_eq!(
                parse_key(&prefix, &plain.key(&prefix, kind)),
                Some((plain, kind)),
                "plain keys still parse, as generation 0"
            );
        }
        assert_eq!(
            generation_of(compacted.segment_key(&prefix).as_ref()),
            Some(1_700_000_000_123)
        );
        assert_eq!(generation_of(plain.index_key(&prefix).as_ref()), Some(0));
        let dir = partition_prefix(&prefix, topic(), 7);
        for odd in [
            "00000000000000000042-00000000000000004242.c0.seg",
            "00000000000000000042-00000000000000004242.c01.seg",
            "00000000000000000042-00000000000000004242.x5.seg",
            "00000000000000000042-00000000000000004242.c.seg",
            "00000000000000000042-00000000000000004242.c5.c6.seg",
        ] {
            assert_eq!(parse_key(&prefix, &dir.clone().join(odd)), None, "{odd}");
        }
    }

    #[test]
    fn foreign_and_tombstoned_keys_are_not_mistaken_for_segments() {
        let prefix = Path::from("a");
        let id = SegmentId::new(topic(), 0, 0, 5).unwrap();
        let live = id.segment_key(&prefix);
        let dead = tombstone_key(&prefix, &live).unwrap();
        assert_eq!(parse_key(&prefix, &dead), None);
        assert_eq!(parse_key(&Path::from("other"), &live), None);
        assert_eq!(
            parse_key(&prefix, &Path::from("a/topics/not-a-uuid/0/x.seg")),
            None
        );
        assert_eq!(
            parse_key(
                &prefix,
                &prefix
                    .clone()
                    .join("topics")
                    .join(topic().to_string())
                    .join("0")
                    .join("1-2.seg")
            ),
            None
        );
    }

    #[test]
    fn tombstone_keeps_the_relative_path_under_the_tombstone_prefix() {
        let prefix = Path::from("x");
        let live = SegmentId::new(topic(), 1, 0, 9).unwrap().index_key(&prefix);
        let dead = tombstone_key(&prefix, &live).unwrap();
        assert_eq!(
            dead.as_ref(),
            "x/tombstones/topics/6f1c0a52-3d4e-4b7a-9c1e-0123456789ab/1/00000000000000000000-00000000000000000009.idx"
        );
        assert!(tombstone_key(&Path::from("y"), &live).is_err());
    }

    #[test]
    fn invalid_offsets_are_rejected() {
        assert!(SegmentId::new(topic(), 0, -1, 5).is_err());
        assert!(SegmentId::new(topic(), 0, 10, 9).is_err());
        assert!(SegmentId::new(topic(), -1, 0, 0).is_err());
        assert!(SegmentId::new(topic(), 0, 10, 10).is_ok());
    }
}
