//! [`ColdCache`]: read-through block cache over object storage for cold reads.
//!
//! Objects are cut into fixed-size blocks; a block is the unit of caching and
//! of fetching (one ranged GET). The cache is a foyer `HybridCache` (memory
//! tier, optionally a local-disk tier) keyed by (object key, block size,
//! block index).
//!
//! Concurrency, step by step:
//! 1. `read_range` maps the byte range to blocks and asks foyer for each with
//!    `get_or_fetch`. foyer looks in memory, then on disk; on a miss it runs
//!    the fetch closure (one ranged GET). Concurrent callers missing on the
//!    same key while that fetch is in flight wait on it instead of fetching
//!    again (single-flight), whether they are readers or read-ahead tasks.
//! 2. A fetched block is checked against the length the caller's object size
//!    implies; a short or long answer fails the read and is not cached.
//! 3. After a read, the [`ReadAheadPolicy`] engine says which next blocks a
//!    sequential reader will want; they are fetched by background tasks on the
//!    runtime that opened the cache, bounded by a semaphore. When no permit is
//!    free the block is simply not read ahead (no queue builds up).
//!
//! Keys are immutable in AeroStream's layout, so a cached block never goes
//! stale; the block size is part of the key so a disk tier recovered after a
//! configuration change cannot serve wrongly cut blocks.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder,
    HybridCachePolicy, RecoverMode, Source,
};
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore};
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use crate::block::{BlockKey, CachedBlock};
use crate::objects::ObjectStoreHandle;
use crate::readahead::ReadAheadPolicy;
use crate::CacheError;

/// The local-disk tier.
#[derive(Debug, Clone)]
pub struct DiskTierConfig {
    /// Directory holding the cache files (created if missing).
    pub dir: PathBuf,
    /// Bytes of disk the tier may use.
    pub capacity_bytes: usize,
    /// Reuse the blocks cached by a previous run of the process.
    pub recover: bool,
}

/// Sizes and policies of a [`ColdCache`].
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Bytes of memory for cached blocks.
    pub memory_bytes: usize,
    /// The local-disk tier; `None` for memory only.
    pub disk: Option<DiskTierConfig>,
    /// Size of a block: the unit of caching and of one ranged GET.
    pub block_size: u64,
    /// Blocks fetched ahead of a sequential reader (0 disables read-ahead).
    pub read_ahead_blocks: u64,
    /// Read-ahead fetches in flight at once across the whole cache.
    pub read_ahead_in_flight: usize,
    /// Sequential readers remembered by the read-ahead policy.
    pub read_ahead_cursors: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            memory_bytes: 256 << 20,
            disk: None,
            block_size: 1 << 20,
            read_ahead_blocks: 4,
            read_ahead_in_flight: 16,
            read_ahead_cursors: 4096,
        }
    }
}

const MIN_BLOCK: u64 = 4 << 10;
const MAX_BLOCK: u64 = 64 << 20;

impl CacheConfig {
    fn validate(&self) -> Result<(), CacheError> {
        let invalid = |reason: String| Err(CacheError::InvalidConfig { reason });
        if !(MIN_BLOCK..=MAX_BLOCK).contains(&self.block_size) {
            return invalid(format!(
                "block_size {} must be within {MIN_BLOCK}..={MAX_BLOCK} bytes",
                self.block_size
            ));
        }
        if (self.memory_bytes as u64) < self.block_size {
            return invalid(format!(
                "memory_bytes {} cannot hold one {}-byte block",
                self.memory_bytes, self.block_size
            ));
        }
        if let Some(disk) = &self.disk {
            let engine_block = engine_block_size(self.block_size);
            if disk.capacity_bytes < 4 * engine_block {
                return invalid(format!(
                    "disk capacity_bytes {} must be at least {} (4 disk blocks of {engine_block} bytes)",
                    disk.capacity_bytes,
                    4 * engine_block
                ));
            }
        }
        Ok(())
    }
}

/// foyer's disk engine writes entries into large blocks; one must hold a whole
/// cached block plus its header.
fn engine_block_size(block_size: u64) -> usize {
    let needed = (block_size as usize)
        .saturating_mul(2)
        .next_multiple_of(4096);
    needed.max(16 << 20)
}

/// Counters of a [`ColdCache`] since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Blocks readers found in the memory tier.
    pub memory_hits: u64,
    /// Blocks readers found in the disk tier.
    pub disk_hits: u64,
    /// Blocks readers had to wait for from the object store (their own GET,
    /// or a GET already in flight for another reader or read-ahead).
    pub misses: u64,
    /// Ranged GETs sent to the object store (reads and read-ahead).
    pub gets: u64,
    /// Bytes received from those GETs.
    pub get_bytes: u64,
    /// GETs that failed.
    pub get_errors: u64,
    /// Blocks fetched ahead for sequential readers.
    pub read_ahead_issued: u64,
    /// Read-ahead blocks skipped because the in-flight limit was reached.
    pub read_ahead_dropped: u64,
    /// Bytes returned to readers.
    pub bytes_served: u64,
}

impl CacheStats {
    /// Share of reader block lookups served by memory or disk.
    pub fn hit_ratio(&self) -> f64 {
        let hits = self.memory_hits + self.disk_hits;
        let total = hits + self.misses;
        if total == 0 {
            0.0
        } else {
            hits as f64 / total as f64
        }
    }

    /// Share of reader block lookups served by memory.
    pub fn memory_hit_ratio(&self) -> f64 {
        let total = self.memory_hits + self.disk_hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.memory_hits as f64 / total as f64
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
    gets: AtomicU64,
    get_bytes: AtomicU64,
    get_errors: AtomicU64,
    read_ahead_issued: AtomicU64,
    read_ahead_dropped: AtomicU64,
    bytes_served: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Why a fetch failed, cloneable so every waiter of a merged fetch gets it.
#[derive(Debug, Clone, thiserror::Error)]
enum FetchFailure {
    #[error("{0}")]
    Store(Arc<object_store::Error>),
    #[error("expected {expected} bytes, got {got}")]
    Size { expected: u64, got: u64 },
}

/// Read-through cache of object blocks; cheap to clone, shareable across tasks and runtimes.
#[derive(Clone)]
pub struct ColdCache {
    inner: Arc<Inner>,
}

struct Inner {
    cache: HybridCache<BlockKey, CachedBlock>,
    store: Arc<dyn ObjectStore>,
    block_size: u64,
    counters: Arc<Counters>,
    read_ahead: Mutex<ReadAheadPolicy>,
    read_ahead_permits: Arc<Semaphore>,
    tracker: TaskTracker,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for ColdCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdCache")
            .field("store", &self.inner.store.to_string())
            .field("block_size", &self.inner.block_size)
            .field("stats", &self.stats())
            .finish()
    }
}

impl ColdCache {
    /// Opens the cache over `store`. Call it on the runtime that should run
    /// cache fills and read-ahead (the control-plane runtime); `read_range`
    /// may then be awaited from any runtime.
    pub async fn open(config: CacheConfig, store: ObjectStoreHandle) -> Result<Self, CacheError> {
        config.validate()?;
        let builder = HybridCacheBuilder::new()
            .with_name("aerostream-cold")
            .with_policy(HybridCachePolicy::WriteOnEviction)
            .memory(config.memory_bytes)
            .with_weighter(|key: &BlockKey, value: &CachedBlock| key.weight() + value.len())
            .storage();
        let builder = match &config.disk {
            None => builder,
            Some(disk) => {
                std::fs::create_dir_all(&disk.dir).map_err(|source| CacheError::Directory {
                    path: disk.dir.display().to_string(),
                    source,
                })?;
                let device = FsDeviceBuilder::new(&disk.dir)
                    .with_capacity(disk.capacity_bytes)
                    .build()
                    .map_err(|e| CacheError::Cache {
                        message: format!("disk tier at {}: {e}", disk.dir.display()),
                    })?;
                builder
                    .with_engine_config(
                        BlockEngineConfig::new(device)
                            .with_block_size(engine_block_size(config.block_size)),
                    )
                    .with_recover_mode(if disk.recover {
                        RecoverMode::Quiet
                    } else {
                        RecoverMode::None
                    })
            }
        };
        let cache = builder.build().await.map_err(|e| CacheError::Cache {
            message: format!("opening the cache: {e}"),
        })?;
        Ok(ColdCache {
            inner: Arc::new(Inner {
                cache,
                store: store.store,
                block_size: config.block_size,
                counters: Arc::new(Counters::default()),
                read_ahead: Mutex::new(ReadAheadPolicy::new(
                    config.read_ahead_blocks,
                    config.read_ahead_cursors,
                )),
                read_ahead_permits: Arc::new(Semaphore::new(config.read_ahead_in_flight.max(1))),
                tracker: TaskTracker::new(),
                runtime: tokio::runtime::Handle::current(),
            }),
        })
    }

    /// The configured block size.
    pub fn block_size(&self) -> u64 {
        self.inner.block_size
    }

    /// Returns bytes `range` of the object `key`, whose total size is
    /// `object_size` (from the manifest), through the cache.
    ///
    /// The bytes are exactly the object's bytes; a range inside one block is
    /// a zero-copy slice of the cached block.
    pub async fn read_range(
        &self,
        key: &Path,
        range: Range<u64>,
        object_size: u64,
    ) -> Result<Bytes, CacheError> {
        if range.start > range.end || range.end > object_size {
            return Err(CacheError::RangeOutOfBounds {
                key: key.to_string(),
                start: range.start,
                end: range.end,
                object_size,
            });
        }
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let bs = self.inner.block_size;
        let first = range.start / bs;
        let last = (range.end - 1) / bs;
        let object: Arc<str> = Arc::from(key.as_ref());
        let blocks = futures::future::try_join_all((first..=last).map(|index| {
            let block_key = BlockKey::new(Arc::clone(&object), bs, index);
            async move {
                let (bytes, source) = self.block(block_key, key, object_size).await?;
                let counters = &self.inner.counters;
                match source {
                    Source::Memory => bump(&counters.memory_hits, 1),
                    Source::Disk => bump(&counters.disk_hits, 1),
                    Source::Outer => bump(&counters.misses, 1),
                }
                Ok::<_, CacheError>(bytes)
            }
        }))
        .await?;
        let out = if let [only] = blocks.as_slice() {
            let offset = first * bs;
            only.slice((range.start - offset) as usize..(range.end - offset) as usize)
        } else {
            let mut out = BytesMut::with_capacity((range.end - range.start) as usize);
            for (i, block) in blocks.iter().enumerate() {
                let block_start = (first + i as u64) * bs;
                let from = range.start.saturating_sub(block_start) as usize;
                let to = ((range.end - block_start) as usize).min(block.len());
                out.extend_from_slice(&block[from..to]);
            }
            out.freeze()
        };
        bump(&self.inner.counters.bytes_served, out.len() as u64);
        let total_blocks = object_size.div_ceil(bs);
        let plan = self
            .inner
            .read_ahead
            .lock()
            .on_read(&object, first, last, total_blocks);
        self.spawn_read_ahead(&object, key, plan, object_size);
        Ok(out)
    }

    /// Fetches blocks `blocks` of `key` into the cache in the background, e.g.
    /// the first blocks of the next segment object of a sequential consumer.
    pub fn prefetch(&self, key: &Path, blocks: Range<u64>, object_size: u64) {
        let blocks = blocks.start..blocks.end.min(object_size.div_ceil(self.inner.block_size));
        self.spawn_read_ahead(&Arc::from(key.as_ref()), key, blocks, object_size);
    }

    /// Drops every cached block of `key` (after the object was deleted) and
    /// forgets its readers.
    pub fn remove_object(&self, key: &Path, object_size: u64) {
        let bs = self.inner.block_size;
        let object: Arc<str> = Arc::from(key.as_ref());
        for index in 0..object_size.div_ceil(bs) {
            self.inner
                .cache
                .remove(&BlockKey::new(Arc::clone(&object), bs, index));
        }
        self.inner.read_ahead.lock().forget(key.as_ref());
    }

    /// Counters since the cache was opened.
    pub fn stats(&self) -> CacheStats {
        let c = &self.inner.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            memory_hits: load(&c.memory_hits),
            disk_hits: load(&c.disk_hits),
            misses: load(&c.misses),
            gets: load(&c.gets),
            get_bytes: load(&c.get_bytes),
            get_errors: load(&c.get_errors),
            read_ahead_issued: load(&c.read_ahead_issued),
            read_ahead_dropped: load(&c.read_ahead_dropped),
            bytes_served: load(&c.bytes_served),
        }
    }

    /// Waits until every read-ahead fetch started so far has finished.
    pub async fn read_ahead_idle(&self) {
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
        self.inner.tracker.reopen();
    }

    /// Waits for background work and flushes the disk tier.
    pub async fn close(&self) -> Result<(), CacheError> {
        self.read_ahead_idle().await;
        self.inner
            .cache
            .close()
            .await
            .map_err(|e| CacheError::Cache {
                message: format!("closing the cache: {e}"),
            })
    }

    fn spawn_read_ahead(
        &self,
        object: &Arc<str>,
        key: &Path,
        blocks: Range<u64>,
        object_size: u64,
    ) {
        let bs = self.inner.block_size;
        for index in blocks {
            let block_key = BlockKey::new(Arc::clone(object), bs, index);
            if self.inner.cache.contains(&block_key) {
                continue;
            }
            let Ok(permit) = Arc::clone(&self.inner.read_ahead_permits).try_acquire_owned() else {
                bump(&self.inner.counters.read_ahead_dropped, 1);
                continue;
            };
            bump(&self.inner.counters.read_ahead_issued, 1);
            let this = self.clone();
            let key = key.clone();
            self.inner.tracker.spawn_on(
                async move {
                    if let Err(e) = this.block(block_key, &key, object_size).await {
                        tracing::debug!(%key, block = index, error = %e, "read-ahead fetch failed");
                    }
                    drop(permit);
                },
                &self.inner.runtime,
            );
        }
    }

    /// One block through the cache: memory, disk, or one (shared) ranged GET.
    async fn block(
        &self,
        block_key: BlockKey,
        key: &Path,
        object_size: u64,
    ) -> Result<(Bytes, Source), CacheError> {
        let bs = self.inner.block_size;
        let index = block_key.index();
        let start = index * bs;
        let end = (start + bs).min(object_size);
        let store = Arc::clone(&self.inner.store);
        let counters = Arc::clone(&self.inner.counters);
        let path = key.clone();
        let entry = self
            .inner
            .cache
            .get_or_fetch(&block_key, move || async move {
                bump(&counters.gets, 1);
                let fetched = match store
                    .get_opts(&path, GetOptions::new().with_range(Some(start..end)))
                    .await
                {
                    Ok(result) => result.bytes().await,
                    Err(e) => Err(e),
                };
                let bytes = fetched.map_err(|e| {
                    bump(&counters.get_errors, 1);
                    FetchFailure::Store(Arc::new(e))
                })?;
                bump(&counters.get_bytes, bytes.len() as u64);
                if bytes.len() as u64 != end - start {
                    return Err(FetchFailure::Size {
                        expected: end - start,
                        got: bytes.len() as u64,
                    });
                }
                Ok(CachedBlock::new(bytes))
            })
            .await
            .map_err(|e| match e.downcast_ref::<FetchFailure>() {
                Some(FetchFailure::Store(source)) => CacheError::Store {
                    key: key.to_string(),
                    source: Arc::clone(source),
                },
                Some(FetchFailure::Size { expected, got }) => CacheError::SizeMismatch {
                    key: key.to_string(),
                    block: index,
                    expected: *expected,
                    got: *got,
                },
                None => CacheError::Cache {
                    message: format!("reading block {index} of {key}: {e}"),
                },
            })?;
        let bytes = entry.value().bytes().clone();
        if bytes.len() as u64 != end - start {
            // A block cached under a different object size: the caller's size is wrong.
            return Err(CacheError::SizeMismatch {
                key: key.to_string(),
                block: index,
                expected: end - start,
                got: bytes.len() as u64,
            });
        }
        Ok((bytes, entry.source()))
    }
}
