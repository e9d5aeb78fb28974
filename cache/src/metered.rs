//! [`MeteredStore`]: wraps any [`ObjectStore`], counts the requests it
//! forwards by the kinds cloud providers bill, and the bytes written and read.
//!
//! The agent wraps its store once, where it is built, so every caller (the
//! uploader, the cold cache, retention, the tiered producer and transaction
//! indexes) is counted without knowing it. The counts feed the cost report
//! (`/v1/cost`, `aerostream cost`) and `/metrics`.
//!
//! What is counted, and when:
//!
//! 1. A call is counted when it is made, before it is forwarded: a request
//!    the store fails is still a request (providers bill failed requests
//!    too), and it is also counted in `errors`.
//! 2. A multipart upload counts its creation, every part and its completion
//!    (or abort) separately: S3 bills each as its own request.
//! 3. A GET counts once whether whole or ranged; a GET with `head` set is a
//!    HEAD. Batched reads ([`ObjectStore::get_ranges`]) are left to the
//!    trait's default, which issues one ranged GET per coalesced range
//!    through this wrapper, so each GET the backend would send is counted.
//! 4. A listing counts one request per page of up to 1,000 entries (the
//!    page size S3, GCS and Azure use by default), as the entries stream by.
//! 5. A deletion counts one request per object, although S3 and Azure batch
//!    them (DELETE requests are free on S3 anyway).
//! 6. Bytes written are the payloads of PUTs and parts; bytes read are the
//!    ranges GETs answered (what the caller was sent, read or not).
//!
//! This sits above the HTTP client: the client's own retries of one call are
//! not seen, so a call retried by the client counts once.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, UploadPart,
};

/// Entries in one listing page (S3's `max-keys` default; GCS and Azure page
/// the same way).
pub const LIST_PAGE: u64 = 1000;

/// The kinds of requests counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Put,
    CreateMultipart,
    PutPart,
    CompleteMultipart,
    AbortMultipart,
    Get,
    Head,
    List,
    Delete,
    Copy,
    Rename,
}

const KINDS: usize = 11;

/// Live counters shared by a [`MeteredStore`] and whoever reports them;
/// cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct RequestCounters {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    requests: [AtomicU64; KINDS],
    errors: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
}

/// The counts at one moment, since the store was wrapped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RequestCounts {
    /// Single-request uploads (PUT Object).
    pub put: u64,
    /// Multipart uploads started (S3 CreateMultipartUpload, a POST).
    pub create_multipart: u64,
    /// Multipart parts uploaded (one PUT each).
    pub put_part: u64,
    /// Multipart uploads completed (S3 CompleteMultipartUpload, a POST).
    pub complete_multipart: u64,
    /// Multipart uploads aborted (free on S3).
    pub abort_multipart: u64,
    /// GETs, whole or ranged.
    pub get: u64,
    pub head: u64,
    /// Listing pages.
    pub list: u64,
    /// Objects deleted.
    pub delete: u64,
    pub copy: u64,
    pub rename: u64,
    /// Requests (of any kind above) that failed.
    pub errors: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
}

impl RequestCounts {
    /// Requests S3 bills at its PUT, COPY, POST, LIST rate: uploads, every
    /// multipart step but aborts, listings, copies and renames (a copy on S3).
    pub fn put_class(&self) -> u64 {
        self.put
            + self.create_multipart
            + self.put_part
            + self.complete_multipart
            + self.list
            + self.copy
            + self.rename
    }

    /// Requests S3 bills at its GET-and-others rate: GETs and HEADs.
    pub fn get_class(&self) -> u64 {
        self.get + self.head
    }

    /// Requests S3 does not bill: DELETEs and multipart aborts.
    pub fn free_class(&self) -> u64 {
        self.delete + self.abort_multipart
    }

    /// Every counter added to `other`'s (summing agents).
    pub fn plus(&self, o: &RequestCounts) -> RequestCounts {
        RequestCounts {
            put: self.put + o.put,
            create_multipart: self.create_multipart + o.create_multipart,
            put_part: self.put_part + o.put_part,
            complete_multipart: self.complete_multipart + o.complete_multipart,
            abort_multipart: self.abort_multipart + o.abort_multipart,
            get: self.get + o.get,
            head: self.head + o.head,
            list: self.list + o.list,
            delete: self.delete + o.delete,
            copy: self.copy + o.copy,
            rename: self.rename + o.rename,
            errors: self.errors + o.errors,
            bytes_written: self.bytes_written + o.bytes_written,
            bytes_read: self.bytes_read + o.bytes_read,
        }
    }
}

impl RequestCounters {
    fn count(&self, kind: Kind) {
        self.add(kind, 1);
    }

    fn add(&self, kind: Kind, n: u64) {
        self.inner.requests[kind as usize].fetch_add(n, Ordering::Relaxed);
    }

    fn wrote(&self, bytes: u64) {
        self.inner.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }

    fn read(&self, bytes: u64) {
        self.inner.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts `result` as failed when it is an error, and passes it on.
    fn outcome<T>(&self, result: object_store::Result<T>) -> object_store::Result<T> {
        if result.is_err() {
            self.failed();
        }
        result
    }

    fn failed(&self) {
        self.inner.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> RequestCounts {
        let r = |k: Kind| self.inner.requests[k as usize].load(Ordering::Relaxed);
        RequestCounts {
            put: r(Kind::Put),
            create_multipart: r(Kind::CreateMultipart),
            put_part: r(Kind::PutPart),
            complete_multipart: r(Kind::CompleteMultipart),
            abort_multipart: r(Kind::AbortMultipart),
            get: r(Kind::Get),
            head: r(Kind::Head),
            list: r(Kind::List),
            delete: r(Kind::Delete),
            copy: r(Kind::Copy),
            rename: r(Kind::Rename),
            errors: self.inner.errors.load(Ordering::Relaxed),
            bytes_written: self.inner.bytes_written.load(Ordering::Relaxed),
            bytes_read: self.inner.bytes_read.load(Ordering::Relaxed),
        }
    }

    /// Counts a listing's pages as its entries stream by: the first page
    /// when the first result (entry or error) arrives, one more every
    /// [`LIST_PAGE`] entries after it.
    fn paged(
        &self,
        stream: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // (the listing, entries seen, whether its first page is counted)
        let state = (stream, self.clone(), 0u64, false);
        futures::stream::unfold(
            state,
            |(mut listing, counters, mut seen, counted)| async move {
                let Some(item) = listing.next().await else {
                    // an empty listing is still one request
                    if !counted {
                        counters.count(Kind::List);
                    }
                    return None;
                };
                if !counted || (item.is_ok() && seen > 0 && seen % LIST_PAGE == 0) {
                    counters.count(Kind::List);
                }
                match &item {
                    Ok(_) => seen += 1,
                    Err(_) => counters.failed(),
                }
                Some((item, (listing, counters, seen, true)))
            },
        )
        .boxed()
    }
}

/// An [`ObjectStore`] that counts every request and forwards it to `inner`.
#[derive(Debug, Clone)]
pub struct MeteredStore {
    inner: Arc<dyn ObjectStore>,
    counters: RequestCounters,
}

impl MeteredStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        MeteredStore {
            inner,
            counters: RequestCounters::default(),
        }
    }

    /// The counters, to read while the store is in use.
    pub fn counters(&self) -> RequestCounters {
        self.counters.clone()
    }
}

impl fmt::Display for MeteredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MeteredStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for MeteredStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.counters.count(Kind::Put);
        self.counters.wrote(payload.content_length() as u64);
        self.counters
            .outcome(self.inner.put_opts(location, payload, opts).await)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.counters.count(Kind::CreateMultipart);
        let inner = self
            .counters
            .outcome(self.inner.put_multipart_opts(location, opts).await)?;
        Ok(Box::new(MeteredUpload {
            inner,
            counters: self.counters.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let head = options.head;
        self.counters
            .count(if head { Kind::Head } else { Kind::Get });
        let result = self
            .counters
            .outcome(self.inner.get_opts(location, options).await)?;
        if !head {
            self.counters
                .read(result.range.end.saturating_sub(result.range.start));
        }
        Ok(result)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let counters = self.counters.clone();
        let ask = locations
            .inspect({
                let counters = counters.clone();
                move |l| {
                    if l.is_ok() {
                        counters.count(Kind::Delete);
                    }
                }
            })
            .boxed();
        self.inner
            .delete_stream(ask)
            .map(move |r| counters.outcome(r))
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counters.paged(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // forwarded as such: S3 and GCS start the listing at the offset
        self.counters
            .paged(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.counters.count(Kind::List);
        let listed = self
            .counters
            .outcome(self.inner.list_with_delimiter(prefix).await)?;
        let entries = (listed.objects.len() + listed.common_prefixes.len()) as u64;
        // the first page is counted above
        self.counters
            .add(Kind::List, entries.saturating_sub(1) / LIST_PAGE);
        Ok(listed)
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.counters.count(Kind::Copy);
        self.counters
            .outcome(self.inner.copy_opts(from, to, options).await)
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.counters.count(Kind::Rename);
        self.counters
            .outcome(self.inner.rename_opts(from, to, options).await)
    }
}

/// A multipart upload whose parts and completion are counted.
#[derive(Debug)]
struct MeteredUpload {
    inner: Box<dyn MultipartUpload>,
    counters: RequestCounters,
}

#[async_trait]
impl MultipartUpload for MeteredUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.counters.count(Kind::PutPart);
        self.counters.wrote(data.content_length() as u64);
        let part = self.inner.put_part(data);
        let counters = self.counters.clone();
        Box::pin(async move { counters.outcome(part.await) })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.counters.count(Kind::CompleteMultipart);
        self.counters.outcome(self.inner.complete().await)
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.counters.count(Kind::AbortMultipart);
        self.counters.outcome(self.inner.abort().await)
    }
}

#[cfg(test)]
#[path = "metered_tests.rs"]
mod tests;
