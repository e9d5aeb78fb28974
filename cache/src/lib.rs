//! Object storage and the cold-read cache of AeroStream.
//!
//! Role: everything AeroStream keeps in object storage goes through this
//! crate. Sealed segments are uploaded (by `storage`'s uploader) to keys laid
//! out by [`layout`], in a store chosen by URL through [`objects`]; reads of
//! offsets no longer on local disk come back through the [`ColdCache`], a
//! foyer hybrid (memory + local disk) cache of fixed-size blocks filled by
//! ranged GETs, with single-flight and read-ahead.
//!
//! Seams:
//! - [`objects::ObjectStoreHandle`]: an `Arc<dyn object_store::ObjectStore>`
//!   plus the key prefix; the one handle every backend (local folder, memory,
//!   S3, GCS, Azure) hides behind. Tests swap in wrappers of it.
//! - `fault::FaultInjectingStore` (cargo feature `fault-injection`, for tests
//!   and test builds of the broker only): wraps any store and fails on
//!   command (HTTP 500/503, timeouts, hangs, unreachable windows), and
//!   counts calls.
//! - [`metered::MeteredStore`]: wraps the agent's store once, where it is
//!   built, and counts requests by billed kind and bytes moved (the cost
//!   report's figures).
//! - [`readahead::ReadAheadPolicy`]: a pure engine deciding what to fetch ahead.
//! - [`upload::upload_file`]: one sealed file to one key (single PUT or
//!   bounded multipart, aborted on failure); [`upload::RetrySchedule`] is the
//!   pure backoff-with-jitter arithmetic for retrying whole uploads.
//!
//! Example:
//! ```
//! # async fn demo() -> Result<(), cache::CacheError> {
//! use cache::{CacheConfig, ColdCache, ObjectStoreExt, StoreEnv};
//! use cache::layout::SegmentId;
//!
//! let handle = cache::objects::store_from_url("memory://", &StoreEnv::from_process())?;
//! let id = SegmentId::new(uuid::Uuid::new_v4(), 0, 0, 99)?;
//! let key = id.segment_key(&handle.prefix);
//! handle.store.put(&key, bytes::Bytes::from(vec![7u8; 10_000]).into()).await.expect("put");
//!
//! let cold = ColdCache::open(CacheConfig::default(), handle).await?;
//! let bytes = cold.read_range(&key, 100..200, 10_000).await?;
//! assert_eq!(bytes.as_ref(), &[7u8; 100][..]);
//! # Ok(()) }
//! # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
//! ```

pub mod background;
mod block;
mod cold;
mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod layout;
pub mod metered;
pub mod objects;
pub mod readahead;
pub mod upload;

pub use cold::{CacheConfig, CacheStats, ColdCache, DiskTierConfig};
pub use error::CacheError;
pub use objects::{store_from_url, Backend, ObjectStoreHandle, StoreEnv, StoreOptions};
pub use upload::{
    link_or_upload_file, upload_file, upload_file_checked, KnownBytes, RetrySchedule,
    UploadOptions, Uploaded,
};

/// Re-exported so callers use the same object_store version and its convenience methods.
pub use object_store::{self, ObjectStore, ObjectStoreExt};
