//! Packed objects: sealed segments of many partitions uploaded together as
//! one object, to spend one PUT where each segment's own objects would
//! spend four or more.
//!
//! Role: with packing on ([`PackConfig`]), the driver hands each upload the
//! engine asks for to the `Packer` instead of uploading it alone. The
//! packer keeps the segments waiting (their files stay on local disk, so
//! nothing acknowledged depends on it) until they hold `target_bytes`, or
//! until the oldest has waited `linger` and they hold `floor_bytes`, or
//! until it has waited `max_wait`; then `upload` writes them into one
//! object under `{prefix}/packs/` and each segment's manifest entry records
//! its place there ([`PackedAt`]). Every segment's parts lie back to back:
//! `.seg` bytes, offset index, time index, producer snapshot, aborted-
//! transaction index. Cold reads fetch byte ranges of the packed object
//! through the block cache, as they fetch ranges of a segment's own object.
//!
//! A packed object is deleted by `sweep` once no manifest entry of any
//! partition reads from it (retention trimmed, compaction replaced or topic
//! deletion removed all of them) and it is older than `grace`: the sweep
//! lists `{prefix}/packs/` and asks the manifest which packs are in use,
//! which only the manifest's authoritative copy answers (the metastore's
//! leader). An object whose commit never landed (the agent stopped between
//! the upload and the commit) is unreferenced too, and goes the same way.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cache::object_store::path::Path;
use cache::object_store::{PutPayload, WriteMultipart};
use cache::{CacheError, ObjectStoreExt, ObjectStoreHandle};
use futures::StreamExt;
use tokio::time::Instant;

use super::engine::{OpId, SealedSegment};
use super::error::TierError;
use super::manifest::{Manifest, PackedAt, TieredSegment};
use super::retention::ObjectDeleter;
use super::PartitionKey;

/// First path segment under the store's prefix for packed objects.
pub use cache::layout::PACKS_DIR;
/// Extension of a packed object.
pub const PACK_EXT: &str = "pack";
/// Packs larger than this go up as a multipart upload of parts this large.
const MULTIPART_ABOVE: u64 = 256 << 20;
/// Larger segments are not packed: they go up as their own objects,
/// streamed from the file, so a pack never holds more than this (and the
/// target) in memory.
pub(super) const LARGEST_PACKED: u64 = MULTIPART_ABOVE;
const PART_SIZE: usize = 64 << 20;

/// When segments are packed together, and how long packed objects stay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackConfig {
    /// A pack goes up once the segments waiting hold this many bytes.
    pub target_bytes: u64,
    /// No pack is smaller than this unless `max_wait` forces it.
    pub floor_bytes: u64,
    /// After the oldest segment waited this long, a pack of at least
    /// `floor_bytes` goes up.
    pub linger: Duration,
    /// After the oldest segment waited this long, whatever waits goes up.
    pub max_wait: Duration,
    /// Packs uploading at once (each is held in memory while it goes up).
    pub max_uploading: usize,
    /// Sealed segments that may wait at once on the agent.
    pub max_waiting: usize,
    /// How long an object no entry reads from stays (uploads whose commit
    /// is still under way, reads that looked an entry up before it went).
    pub grace: Duration,
    /// How often the packed objects are listed to find unreferenced ones.
    pub sweep_interval: Duration,
}

impl Default for PackConfig {
    fn default() -> Self {
        PackConfig {
            target_bytes: 64 << 20,
            floor_bytes: 8 << 20,
            linger: Duration::from_secs(10),
            max_wait: Duration::from_secs(60),
            max_uploading: 2,
            max_waiting: 4096,
            grace: Duration::from_secs(600),
            sweep_interval: Duration::from_secs(300),
        }
    }
}

/// A segment the engine asked to upload, waiting for its pack.
#[derive(Debug, Clone)]
pub(super) struct Waiting {
    pub(super) op: OpId,
    pub(super) partition: PartitionKey,
    pub(super) segment: SealedSegment,
    pub(super) attempt: u32,
    pub(super) since: Instant,
}

/// Which waiting segments go up together, and when.
#[derive(Debug)]
pub(super) struct Packer {
    config: PackConfig,
    waiting: Vec<Waiting>,
    bytes: u64,
    uploading: usize,
}

impl Packer {
    pub(super) fn new(config: PackConfig) -> Self {
        Packer {
            config,
            waiting: Vec::new(),
            bytes: 0,
            uploading: 0,
        }
    }

    pub(super) fn add(&mut self, w: Waiting) {
        self.bytes += w.segment.size;
        self.waiting.push(w);
    }

    /// One pack's worth of waiting segments, when one is due and fewer than
    /// `max_uploading` are going up; the caller reports its end with
    /// [`Packer::finished`].
    pub(super) fn take(&mut self, now: Instant) -> Option<Vec<Waiting>> {
        let oldest = self.waiting.first()?.since;
        let waited = now.saturating_duration_since(oldest);
        let c = &self.config;
        let due = self.bytes >= c.target_bytes
            || (waited >= c.linger && self.bytes >= c.floor_bytes)
            || waited >= c.max_wait;
        if !due || self.uploading >= c.max_uploading {
            return None;
        }
        let mut size = 0;
        let mut n = 0;
        for w in &self.waiting {
            if n > 0 && size + w.segment.size > c.target_bytes {
                break;
            }
            size += w.segment.size;
            n += 1;
        }
        self.bytes -= size;
        self.uploading += 1;
        Some(self.waiting.drain(..n).collect())
    }

    pub(super) fn finished(&mut self) {
        self.uploading = self.uploading.saturating_sub(1);
    }
}

/// The parts of one segment, read from its local files and checked.
struct Parts {
    seg: Bytes,
    idx: Bytes,
    tix: Bytes,
    producers: Bytes,
    txn_index: Bytes,
    crc32c: u32,
}

impl Parts {
    fn len(&self) -> u64 {
        (self.seg.len()
            + self.idx.len()
            + self.tix.len()
            + self.producers.len()
            + self.txn_index.len()) as u64
    }
}

async fn read_optional(path: &std::path::Path) -> Result<Bytes, TierError> {
    match tokio::fs::read(path).await {
        Ok(b) => Ok(Bytes::from(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Bytes::new()),
        Err(e) => Err(CacheError::File {
            path: path.display().to_string(),
            source: e,
        }
        .into()),
    }
}

async fn read_parts(seg: &SealedSegment) -> Result<Parts, TierError> {
    let data = tokio::fs::read(&seg.path)
        .await
        .map_err(|e| CacheError::File {
            path: seg.path.display().to_string(),
            source: e,
        })?;
    let crc32c = crc32c::crc32c(&data);
    let sealed = seg.crc32c.is_none_or(|known| known == crc32c);
    if data.len() as u64 != seg.size || !sealed {
        return Err(TierError::CorruptObject {
            key: seg.path.display().to_string(),
            position: 0,
            reason: format!(
                "the sealed segment held {} bytes (CRC-32C {:?}) while sealed but {} (CRC-32C {crc32c}) were read for upload",
                seg.size,
                seg.crc32c,
                data.len()
            ),
        });
    }
    Ok(Parts {
        seg: Bytes::from(data),
        idx: read_optional(&seg.offset_index_path).await?,
        tix: read_optional(&seg.time_index_path).await?,
        producers: super::producers::prepared(seg)
            .await
            .map_or_else(Bytes::new, Bytes::from),
        txn_index: super::txn_index::prepared(seg)
            .await?
            .map_or_else(Bytes::new, Bytes::from),
        crc32c,
    })
}

/// A fresh packed object's key: the upload time first, so a listing is in
/// upload order, then a random part, so two agents never collide.
fn pack_key(prefix: &Path) -> Path {
    prefix.clone().join(PACKS_DIR).join(format!(
        "{:013}-{}.{PACK_EXT}",
        now_ms(),
        uuid::Uuid::new_v4().simple()
    ))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// When a packed object was uploaded, from its key (see `pack_key`).
fn uploaded_ms(key: &str) -> Option<i64> {
    let name = key.rsplit('/').next()?;
    name.split('-').next()?.parse().ok()
}

/// Whether an entry's packed object is too old to commit an entry for:
/// past half its grace period the sweep may delete it before the commit
/// lands (clocks of agents differ), so the segment is uploaded again.
pub(super) fn too_old_to_commit(entry: &TieredSegment, grace: Duration) -> bool {
    let Some(pack) = &entry.pack else {
        return false;
    };
    let half = i64::try_from(grace.as_millis() / 2).unwrap_or(i64::MAX);
    uploaded_ms(&pack.key).is_none_or(|at| now_ms().saturating_sub(at) > half)
}

/// Uploads `members` as one packed object; returns each member's manifest
/// entry (in order) and the bytes sent.
pub(super) async fn upload(
    store: &ObjectStoreHandle,
    members: &[Waiting],
    upload_timeout: Duration,
    min_bytes_per_sec: u64,
) -> Result<(Vec<TieredSegment>, u64), TierError> {
    let mut parts = Vec::with_capacity(members.len());
    for m in members {
        parts.push(read_parts(&m.segment).await?);
    }
    let total: u64 = parts.iter().map(Parts::len).sum();
    let key = pack_key(&store.prefix);
    let mut entries = Vec::with_capacity(members.len());
    let mut chunks = Vec::with_capacity(parts.len() * 5);
    let mut offset = 0u64;
    for (m, p) in members.iter().zip(parts) {
        let seg = &m.segment;
        let id = cache::layout::SegmentId::new(
            m.partition.topic_id,
            m.partition.partition,
            seg.base_offset,
            seg.last_offset,
        )?;
        entries.push(TieredSegment {
            key: id.segment_key(&store.prefix).to_string(),
            base_offset: seg.base_offset,
            last_offset: seg.last_offset,
            first_timestamp: seg.first_timestamp,
            max_timestamp: seg.max_timestamp,
            size: p.seg.len() as u64,
            checksum: p.crc32c,
            index_size: p.idx.len() as u64,
            time_index_size: p.tix.len() as u64,
            served_from: None,
            pack: Some(PackedAt {
                key: key.to_string(),
                offset,
                object_size: total,
                producers_size: p.producers.len() as u64,
                txn_index_size: p.txn_index.len() as u64,
            }),
        });
        offset += p.len();
        chunks.extend([p.seg, p.idx, p.tix, p.producers, p.txn_index]);
    }
    let deadline = upload_timeout + Duration::from_secs(total / min_bytes_per_sec.max(1));
    let put = async {
        if total <= MULTIPART_ABOVE {
            let payload: PutPayload = chunks.into_iter().filter(|c| !c.is_empty()).collect();
            store.store.put(&key, payload).await.map(|_| ())
        } else {
            let upload = store.store.put_multipart(&key).await?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            for chunk in chunks {
                writer.wait_for_capacity(2).await?;
                writer.write(&chunk);
            }
            writer.finish().await.map(|_| ())
        }
    };
    match tokio::time::timeout(deadline, put).await {
        Ok(Ok(())) => Ok((entries, total)),
        Ok(Err(source)) => Err(CacheError::Store {
            key: key.to_string(),
            source: Arc::new(source),
        }
        .into()),
        Err(_) => Err(TierError::Timeout {
            what: format!("upload of {key}"),
            seconds: deadline.as_secs(),
        }),
    }
}

/// Deletes packed objects no manifest entry reads from, once older than
/// `grace`; returns how many went (`None`: this process's manifest cannot
/// tell which are in use, so nothing was listed).
pub(super) async fn sweep(
    deleter: &ObjectDeleter,
    manifest: &dyn Manifest,
    grace: Duration,
) -> Result<Option<usize>, TierError> {
    let Some(in_use) = manifest.packs_in_use().await? else {
        return Ok(None);
    };
    let dir = deleter.store.prefix.clone().join(PACKS_DIR);
    let listed: Vec<_> = deleter.store.store.list(Some(&dir)).collect().await;
    let now_ms = now_ms();
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let mut unreferenced = Vec::new();
    for item in listed {
        let meta = item.map_err(|source| CacheError::Store {
            key: dir.to_string(),
            source: Arc::new(source),
        })?;
        let age_ms = now_ms.saturating_sub(meta.last_modified.timestamp_millis());
        if age_ms >= grace_ms && !in_use.contains(meta.location.as_ref()) {
            unreferenced.push(meta);
        }
    }
    let mut deleted = 0;
    for meta in unreferenced {
        if deleter.delete_object(&meta.location, meta.size).await {
            deleted += 1;
        }
    }
    Ok(Some(deleted))
}

#[cfg(test)]
#[path = "pack_tests.rs"]
mod tests;
