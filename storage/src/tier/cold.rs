//! Cold reads: offsets below the local log start, served from sealed objects
//! through the [`ColdCache`].
//!
//! A read finds the manifest entry serving the offset (entries never serve
//! the same offset twice, though a new leader's object may also hold
//! offsets an earlier entry serves: those are never read from it), looks
//! the offset up in the entry's `.idx` object (the same sparse index the local segment
//! had: 8-byte entries `relative offset u32 | position u32`), walks batch
//! headers from there to the batch holding the offset, and returns whole
//! batches from it, byte for byte as the local segment held them, after
//! checking each batch's CRC-32C (damaged bytes are an error, never records;
//! the object's cached blocks are dropped so a retry fetches it again). Like
//! a local read it stays within one segment and always returns the first
//! batch whole. Near the end of a segment the first blocks of the next one
//! are fetched ahead, so a consumer crossing segments does not wait.
//!
//! A compacted copy (a compacted topic's segment rewritten with fewer
//! records, see `cache::layout`) serves its entry's offsets with gaps, and
//! may end before its last offset or hold no batch at all: a read at an
//! offset after its last batch goes on with the next entry, as a local read
//! goes on with the next segment.
//!
//! ListOffsets by timestamp uses the `.tix` object (12-byte entries
//! `max timestamp i64 | relative offset u32`) the same way the local log
//! uses its time index.

use bytes::Bytes;
use cache::layout::ObjectKind;
use cache::object_store::path::Path;
use cache::ColdCache;

use super::error::TierError;
pub use super::manifest::sibling_key;
use super::manifest::TieredSegment;
use crate::batch::{self, BatchHeader, Compression, TimestampType, HEADER_LEN};
use crate::log::TimestampOffset;

const OFFSET_ENTRY: u64 = 8;
const TIME_ENTRY: u64 = 12;
/// Blocks of the next segment fetched ahead when a reader nears the end of one.
const NEXT_SEGMENT_BLOCKS: u64 = 4;

/// Whole batches read from object storage.
#[derive(Debug, Clone)]
pub struct ColdRead {
    pub bytes: Bytes,
    /// Base offset of the first batch (may be below the offset asked for).
    pub first_offset: i64,
    /// Offset after the last batch returned.
    pub next_offset: i64,
}

/// Reads tiered segments through a [`ColdCache`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct ColdReader {
    cache: ColdCache,
}

/// Whether an entry's object is a compacted copy (its key has a generation).
fn is_compacted(e: &TieredSegment) -> bool {
    cache::layout::generation_of(&e.key).is_some_and(|g| g > 0)
}

fn object_path(key: &str) -> Result<Path, TierError> {
    Path::parse(key).map_err(|e| TierError::CorruptObject {
        key: key.to_string(),
        position: 0,
        reason: format!("the manifest holds an unusable key: {e}"),
    })
}

/// One of an entry's objects as read: positions count from the start of
/// the entry's part, which lies at `start` in the object at `path` (a
/// packed object holds several; an unpacked part starts at 0).
#[derive(Debug, Clone)]
struct Obj {
    path: Path,
    start: u64,
    object_size: u64,
}

impl Obj {
    fn of(e: &TieredSegment, kind: ObjectKind) -> Result<Obj, TierError> {
        let place = e.place(kind);
        Ok(Obj {
            path: object_path(&place.key)?,
            start: place.start,
            object_size: place.object_size,
        })
    }

    /// The cache blocks holding the part's first `blocks` blocks.
    fn first_blocks(&self, block_size: u64, blocks: u64) -> std::ops::Range<u64> {
        let first = self.start / block_size.max(1);
        first..first + blocks
    }
}

fn corrupt(obj: &Obj, position: u64, reason: impl Into<String>) -> TierError {
    TierError::CorruptObject {
        key: obj.path.to_string(),
        position: obj.start + position,
        reason: reason.into(),
    }
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Checks a batch header read from an object and returns its total length.
fn checked_len(h: &BatchHeader, key: &Obj, pos: u64, object_size: u64) -> Result<u64, TierError> {
    if h.magic != 2 {
        return Err(corrupt(
            key,
            pos,
            format!("magic {} where a batch should start", h.magic),
        ));
    }
    match h.total_len() {
        Some(len) if len >= HEADER_LEN && pos + len as u64 <= object_size => Ok(len as u64),
        _ => Err(corrupt(
            key,
            pos,
            format!(
                "batch length {} runs past the object's {object_size} bytes",
                h.batch_length
            ),
        )),
    }
}

/// ListOffsets MAX_TIMESTAMP across tiers: the larger timestamp of the
/// tiered and the local answer; on a tie the earlier record, which is the
/// tiered one (tiered offsets come first).
pub fn latest_max_timestamp(
    tiered: Option<TimestampOffset>,
    local: Option<TimestampOffset>,
) -> Option<TimestampOffset> {
    match (tiered, local) {
        (Some(t), Some(l)) if l.timestamp > t.timestamp => Some(l),
        (Some(t), _) => Some(t),
        (None, l) => l,
    }
}

/// Checks the CRC-32C of every batch in `bytes` (read from the object at
/// `pos`), so that damaged bytes are never served as records.
fn verify_batches(bytes: &[u8], key: &Obj, pos: u64) -> Result<(), TierError> {
    for item in batch::BatchIter::new(bytes) {
        match item {
            Ok(_) => {}
            Err(crate::StorageError::CorruptBatch { position, reason }) => {
                return Err(corrupt(key, pos + position as u64, reason));
            }
            Err(e) => return Err(corrupt(key, pos, e.to_string())),
        }
    }
    Ok(())
}

impl ColdReader {
    pub fn new(cache: ColdCache) -> Self {
        ColdReader { cache }
    }

    pub fn cache(&self) -> &ColdCache {
        &self.cache
    }

    /// Bytes `range` of an entry's part, through the cache.
    async fn range(&self, obj: &Obj, range: std::ops::Range<u64>) -> Result<Bytes, TierError> {
        let at = obj.start + range.start..obj.start + range.end;
        Ok(self
            .cache
            .read_range(&obj.path, at, obj.object_size)
            .await?)
    }

    /// Whole batches from the one holding `offset` (or the first after it),
    /// at most `max_bytes` but always the first batch; `None` when no entry
    /// holds `offset` or anything after it.
    pub async fn read(
        &self,
        entries: &[TieredSegment],
        offset: i64,
        max_bytes: usize,
    ) -> Result<Option<ColdRead>, TierError> {
        let mut i = entries.partition_point(|e| e.last_offset < offset);
        let mut offset = offset;
        let (e, key, pos, first) = loop {
            let Some(e) = entries.get(i) else {
                return Ok(None);
            };
            // below what the entry serves (a gap, or the log start): its first
            // offset served, never the object's earlier batches
            offset = offset.max(e.first_served());
            let key = Obj::of(e, ObjectKind::Segment)?;
            match self.translate(e, &key, offset).await? {
                Some((pos, first)) => break (e, key, pos, first),
                // the rest of a compacted copy's range is a gap
                None if is_compacted(e) => {
                    offset = e.next_offset();
                    i += 1;
                }
                None => {
                    return Err(corrupt(
                        &key,
                        e.size,
                        format!(
                            "the object ends before offset {offset}, inside its manifest range"
                        ),
                    ))
                }
            }
        };
        let first_len = checked_len(&first, &key, pos, e.size)?;
        let end = (pos + first_len.max(max_bytes as u64)).min(e.size);
        let chunk = self.range(&key, pos..end).await?;
        let mut used = first_len as usize;
        let mut next = first.next_offset();
        while let Some(h) = chunk.get(used..).and_then(BatchHeader::decode) {
            let len = checked_len(&h, &key, pos + used as u64, e.size)? as usize;
            if used + len > chunk.len() {
                break;
            }
            used += len;
            next = h.next_offset();
        }
        if let Err(err) = verify_batches(&chunk[..used], &key, pos) {
            // The bytes may be damaged in the cache or in transit rather than
            // in the object: drop them so a retry fetches the object again.
            self.cache.remove_object(&key.path, key.object_size);
            return Err(err);
        }
        let returned_end = pos + used as u64;
        if let Some(after) = entries.get(i + 1) {
            let near_end = returned_end + 2 * self.cache.block_size() >= e.size;
            if near_end {
                if let Ok(next) = Obj::of(after, ObjectKind::Segment) {
                    let blocks = next.first_blocks(self.cache.block_size(), NEXT_SEGMENT_BLOCKS);
                    self.cache.prefetch(&next.path, blocks, next.object_size);
                }
            }
        }
        Ok(Some(ColdRead {
            bytes: chunk.slice(..used),
            first_offset: first.base_offset,
            next_offset: next,
        }))
    }

    /// ListOffsets by timestamp over tiered data: the first record at or
    /// after `log_start` whose timestamp is `>= ts`.
    pub async fn offset_for_timestamp(
        &self,
        entries: &[TieredSegment],
        ts: i64,
        log_start: i64,
    ) -> Result<Option<TimestampOffset>, TierError> {
        for e in entries {
            if e.last_offset < log_start || e.max_timestamp < ts {
                continue;
            }
            let from = log_start.max(e.first_served());
            if let Some(found) = self.find_timestamp_in(e, ts, from).await? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP over tiered data: the largest timestamp and
    /// the first record carrying it.
    ///
    /// An entry's `max_timestamp` covers its whole object, also the offsets
    /// an earlier entry serves; when its largest timestamp lies there, the
    /// earlier entry (first on a tie) or a later one answers.
    pub async fn max_timestamp(
        &self,
        entries: &[TieredSegment],
        log_start: i64,
    ) -> Result<Option<TimestampOffset>, TierError> {
        let mut candidates: Vec<&TieredSegment> = entries
            .iter()
            .filter(|e| e.last_offset >= log_start && e.max_timestamp >= 0)
            .collect();
        // largest first; on a tie the earlier entry (a stable sort keeps order)
        candidates.sort_by_key(|e| std::cmp::Reverse(e.max_timestamp));
        for e in candidates {
            let from = log_start.max(e.first_served());
            if let Some(found) = self.find_timestamp_in(e, e.max_timestamp, from).await? {
                if found.timestamp == e.max_timestamp {
                    return Ok(Some(found));
                }
            }
        }
        Ok(None)
    }

    async fn find_timestamp_in(
        &self,
        e: &TieredSegment,
        ts: i64,
        log_start: i64,
    ) -> Result<Option<TimestampOffset>, TierError> {
        let key = Obj::of(e, ObjectKind::Segment)?;
        let mut pos = match self.time_index_floor(e, ts).await? {
            Some(offset) => match self.translate(e, &key, offset).await? {
                Some((p, _)) => p,
                None => e.size,
            },
            None => 0,
        };
        while pos < e.size {
            let h = self.header_at(&key, pos, e.size).await?;
            let len = checked_len(&h, &key, pos, e.size)?;
            if h.max_timestamp >= ts && h.last_offset() >= log_start {
                return self
                    .refine(&key, e.size, pos, len, &h, ts, log_start)
                    .await
                    .map(Some);
            }
            pos += len;
        }
        Ok(None)
    }

    /// The exact record inside an uncompressed CreateTime batch; the batch's
    /// first offset otherwise (records are not decompressed), as the local
    /// log answers.
    #[allow(clippy::too_many_arguments)]
    async fn refine(
        &self,
        key: &Obj,
        size: u64,
        pos: u64,
        len: u64,
        h: &BatchHeader,
        ts: i64,
        log_start: i64,
    ) -> Result<TimestampOffset, TierError> {
        let fallback = TimestampOffset {
            timestamp: h.max_timestamp,
            offset: h.base_offset.max(log_start),
        };
        if h.timestamp_type() == TimestampType::LogAppendTime
            || h.compression() != Ok(Compression::None)
        {
            return Ok(fallback);
        }
        debug_assert!(pos + len <= size);
        let bytes = self.range(key, pos..pos + len).await?;
        for (delta, t) in batch::RecordTimestamps::new(&bytes) {
            let offset = h.base_offset + i64::from(delta);
            if offset >= log_start && t >= ts {
                return Ok(TimestampOffset {
                    timestamp: t,
                    offset,
                });
            }
        }
        Ok(fallback)
    }

    /// Position and header of the first batch whose last offset is `>= offset`.
    async fn translate(
        &self,
        e: &TieredSegment,
        key: &Obj,
        offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>, TierError> {
        let mut pos = if offset <= e.base_offset {
            0
        } else {
            self.index_floor(e, offset).await?
        };
        while pos < e.size {
            let h = self.header_at(key, pos, e.size).await?;
            let len = checked_len(&h, key, pos, e.size)?;
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += len;
        }
        Ok(None)
    }

    async fn header_at(&self, key: &Obj, pos: u64, size: u64) -> Result<BatchHeader, TierError> {
        if pos + HEADER_LEN as u64 > size {
            return Err(corrupt(
                key,
                pos,
                "a batch header would run past the end of the object",
            ));
        }
        let b = self.range(key, pos..pos + HEADER_LEN as u64).await?;
        BatchHeader::decode(&b).ok_or_else(|| corrupt(key, pos, "short batch header"))
    }

    /// File position of the last `.idx` entry at or below `offset` (0 if none).
    async fn index_floor(&self, e: &TieredSegment, offset: i64) -> Result<u64, TierError> {
        let n = e.index_size / OFFSET_ENTRY;
        if n == 0 {
            return Ok(0);
        }
        let key = Obj::of(e, ObjectKind::Index)?;
        let idx = self.range(&key, 0..n * OFFSET_ENTRY).await?;
        let entry = |i: u64| {
            let at = (i * OFFSET_ENTRY) as usize;
            (
                e.base_offset + i64::from(be_u32(&idx, at)),
                u64::from(be_u32(&idx, at + 4)),
            )
        };
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if entry(mid).0 <= offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.checked_sub(1).map_or(0, |i| entry(i).1))
    }

    /// Offset of the last `.tix` entry whose timestamp is `<= ts`, if any.
    async fn time_index_floor(&self, e: &TieredSegment, ts: i64) -> Result<Option<i64>, TierError> {
        let n = e.time_index_size / TIME_ENTRY;
        if n == 0 {
            return Ok(None);
        }
        let key = Obj::of(e, ObjectKind::TimeIndex)?;
        let tix = self.range(&key, 0..n * TIME_ENTRY).await?;
        let entry = |i: u64| {
            let at = (i * TIME_ENTRY) as usize;
            (
                be_i64(&tix, at),
                e.base_offset + i64::from(be_u32(&tix, at + 8)),
            )
        };
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if entry(mid).0 <= ts {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.checked_sub(1).map(|i| entry(i).1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_max_timestamp_wins_and_a_tie_goes_to_the_earlier_tiered_record() {
        let at = |timestamp, offset| Some(TimestampOffset { timestamp, offset });
        assert_eq!(latest_max_timestamp(at(5, 1), at(9, 50)), at(9, 50));
        assert_eq!(latest_max_timestamp(at(9, 1), at(5, 50)), at(9, 1));
        assert_eq!(latest_max_timestamp(at(9, 1), at(9, 50)), at(9, 1));
        assert_eq!(latest_max_timestamp(None, at(9, 50)), at(9, 50));
        assert_eq!(latest_max_timestamp(at(9, 1), None), at(9, 1));
        assert_eq!(latest_max_timestamp(None, None), None);
    }

    #[test]
    fn sibling_keys_swap_only_the_extension() {
        assert_eq!(
            sibling_key(
                "p/topics/t/0/00000000000000000000-00000000000000000009.seg",
                "idx"
            ),
            "p/topics/t/0/00000000000000000000-00000000000000000009.idx"
        );
        assert_eq!(sibling_key("odd", "tix"), "odd.tix");
    }
}
