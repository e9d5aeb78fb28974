//! Uploading a sealed segment file, and the retry schedule for whole uploads.
//!
//! [`upload_file`] streams a local file to one object key: a single PUT below
//! [`UploadOptions::multipart_threshold`], otherwise a multipart upload with at
//! most [`UploadOptions::max_concurrent_parts`] parts in flight (memory stays
//! bounded at about `part_size * max_concurrent_parts`). A failed multipart
//! upload is aborted before the error is returned, so a retry starts clean;
//! anything an abort cannot reach (a crash) is left to the bucket's
//! "abort incomplete multipart uploads" lifecycle rule.
//!
//! Retrying a whole upload is the caller's decision (the uploader engine in
//! `storage` owns its clock); [`RetrySchedule`] is the pure backoff-with-jitter
//! arithmetic it uses.

use std::path::Path as FsPath;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload, WriteMultipart};
use tokio::io::AsyncReadExt;

use crate::CacheError;

/// How a file is uploaded.
#[derive(Debug, Clone)]
pub struct UploadOptions {
    /// Files at least this large go up as multipart uploads.
    pub multipart_threshold: u64,
    /// Size of each multipart part (S3 needs at least 5 MiB except the last).
    pub part_size: usize,
    /// Parts in flight at once for one file.
    pub max_concurrent_parts: usize,
}

impl Default for UploadOptions {
    fn default() -> Self {
        UploadOptions {
            multipart_threshold: 16 << 20,
            part_size: 8 << 20,
            max_concurrent_parts: 4,
        }
    }
}

/// What was uploaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub key: Path,
    /// Bytes uploaded (the file's length when it was read).
    pub size: u64,
    /// CRC-32C of the uploaded bytes, for the manifest entry.
    pub crc32c: u32,
    /// Number of parts (1 for a single PUT).
    pub parts: u64,
    pub e_tag: Option<String>,
}

/// What the writer of a file recorded of its bytes as it wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownBytes {
    pub size: u64,
    pub crc32c: u32,
}

impl KnownBytes {
    /// Whether bytes read back for upload are the ones written.
    fn check(&self, file: &FsPath, size: u64, crc32c: u32) -> Result<(), CacheError> {
        if size == self.size && crc32c == self.crc32c {
            return Ok(());
        }
        Err(CacheError::ContentMismatch {
            path: file.display().to_string(),
            reason: format!(
                "{} bytes with CRC-32C {:08x} were written, {} bytes with CRC-32C {:08x} were read back",
                self.size, self.crc32c, size, crc32c
            ),
        })
    }
}

/// Uploads the file at `file` to `key`. Sealed segments are immutable, so
/// the bytes read are the bytes of the segment; the result says how many.
pub async fn upload_file(
    store: &dyn ObjectStore,
    key: &Path,
    file: &FsPath,
    options: &UploadOptions,
) -> Result<Uploaded, CacheError> {
    upload_file_checked(store, key, file, options, None).await
}

/// [`upload_file`], refusing to complete the upload when `known` is given
/// and the bytes read differ from it: a single PUT is never sent, a
/// multipart upload is aborted instead of completed.
pub async fn upload_file_checked(
    store: &dyn ObjectStore,
    key: &Path,
    file: &FsPath,
    options: &UploadOptions,
    known: Option<KnownBytes>,
) -> Result<Uploaded, CacheError> {
    let io_error = |source| CacheError::File {
        path: file.display().to_string(),
        source,
    };
    let mut reader = tokio::fs::File::open(file).await.map_err(io_error)?;
    let len = reader.metadata().await.map_err(io_error)?.len();
    let part_size = options.part_size.max(1);
    if len < options.multipart_threshold || len == 0 {
        let mut data = Vec::with_capacity(len as usize);
        reader.read_to_end(&mut data).await.map_err(io_error)?;
        let data = Bytes::from(data);
        let crc = crc32c::crc32c(&data);
        let size = data.len() as u64;
        if let Some(known) = known {
            known.check(file, size, crc)?;
        }
        let result = store
            .put_opts(key, PutPayload::from(data), Default::default())
            .await
            .map_err(|e| store_error(key, e))?;
        return Ok(Uploaded {
            key: key.clone(),
            size,
            crc32c: crc,
            parts: 1,
            e_tag: result.e_tag,
        });
    }

    let upload = store
        .put_multipart_opts(key, Default::default())
        .await
        .map_err(|e| store_error(key, e))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, part_size);
    let mut crc = 0u32;
    let mut size = 0u64;
    loop {
        let chunk = match read_chunk(&mut reader, part_size).await {
            Ok(chunk) => chunk,
            Err(e) => {
                abort_quietly(writer, key).await;
                return Err(io_error(e));
            }
        };
        if chunk.is_empty() {
            break;
        }
        if let Err(e) = writer
            .wait_for_capacity(options.max_concurrent_parts.max(1))
            .await
        {
            abort_quietly(writer, key).await;
            return Err(store_error(key, e));
        }
        crc = crc32c::crc32c_append(crc, &chunk);
        size += chunk.len() as u64;
        writer.put(chunk);
    }
    if let Some(known) = known {
        if let Err(e) = known.check(file, size, crc) {
            abort_quietly(writer, key).await;
            return Err(e);
        }
    }
    // `finish` aborts the upload itself when a part or the completion fails.
    let result = writer.finish().await.map_err(|e| store_error(key, e))?;
    Ok(Uploaded {
        key: key.clone(),
        size,
        crc32c: crc,
        parts: size.div_ceil(part_size as u64).max(1),
        e_tag: result.e_tag,
    })
}

/// Like [`upload_file`], but when `handle` is a local folder on the same
/// filesystem as `file`, the object becomes a hard link to the file instead
/// of a copy: no bytes are written, so sealing a segment does not double the
/// disk's write load. Sealed segments are never written again (retention
/// only unlinks them), so the object keeps the bytes the manifest records.
/// Anything that prevents the link (another filesystem, no link support)
/// falls back to copying.
///
/// `known` is what the file's writer recorded of its bytes. An upload that
/// reads them back checks them against it; a link takes its size and
/// checksum from it instead of reading the file again.
pub async fn link_or_upload_file(
    handle: &crate::ObjectStoreHandle,
    key: &Path,
    file: &FsPath,
    options: &UploadOptions,
    known: Option<KnownBytes>,
) -> Result<Uploaded, CacheError> {
    let Some(local) = &handle.local else {
        return upload_file_checked(handle.store.as_ref(), key, file, options, known).await;
    };
    let file_error = |source: std::io::Error| CacheError::File {
        path: file.display().to_string(),
        source,
    };
    if let Some(uploaded) = link_file(local, key, file, known)
        .await
        .map_err(file_error)?
    {
        return Ok(uploaded);
    }
    let uploaded = upload_file_checked(handle.store.as_ref(), key, file, options, known).await?;
    // The folder store writes without fsync; the manifest entry committed
    // next must not name an object a power loss can empty.
    if let Ok(target) = local.path_to_filesystem(key) {
        tokio::task::spawn_blocking(move || sync_file_and_dir(&target, true))
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r)
            .map_err(file_error)?;
    }
    Ok(uploaded)
}

/// fsyncs a file's directory entry (and, with `data`, the file itself), so
/// an object in the folder store survives a power loss once committed.
fn sync_file_and_dir(target: &FsPath, data: bool) -> std::io::Result<()> {
    if data {
        std::fs::File::open(target)?.sync_all()?;
    }
    if let Some(parent) = target.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// Hard-links `file` at `key` in the folder store; `None` when linking is
/// not possible here and the caller should copy.
async fn link_file(
    local: &object_store::local::LocalFileSystem,
    key: &Path,
    file: &FsPath,
    known: Option<KnownBytes>,
) -> std::io::Result<Option<Uploaded>> {
    let Ok(target) = local.path_to_filesystem(key) else {
        return Ok(None);
    };
    let source = file.to_path_buf();
    let linked = tokio::task::spawn_blocking(move || -> std::io::Result<bool> {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // Keys are deterministic: an earlier attempt's object is replaced.
        match std::fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        match std::fs::hard_link(&source, &target) {
            // The segment's bytes were fsynced when it was sealed; the new
            // name must be durable too before the manifest names it.
            Ok(()) => sync_file_and_dir(&target, false).map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(false),
            Err(e) => Err(e),
        }
    })
    .await
    .map_err(std::io::Error::other)??;
    if !linked {
        return Ok(None);
    }
    // The manifest records the bytes' checksum. A writer that kept one as
    // it wrote saves reading the whole file back. Otherwise reading and
    // checksumming it is a burst of CPU (and of reads, once writeback has
    // dropped the file from the page cache) that no client waits for: it
    // runs on a thread of its own below the shards' priority.
    let (crc, size) = match known {
        Some(known) => (known.crc32c, known.size),
        None => {
            let source = file.to_path_buf();
            crate::background::run("aerostream-crc", move || checksum(&source)).await??
        }
    };
    Ok(Some(Uploaded {
        key: key.clone(),
        size,
        crc32c: crc,
        parts: 1,
        e_tag: None,
    }))
}

/// crc32c and length of a file's bytes, read in 1 MiB pieces.
fn checksum(file: &FsPath) -> std::io::Result<(u32, u64)> {
    use std::io::Read;
    let mut reader = std::fs::File::open(file)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = 0u32;
    let mut size = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok((crc, size)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let read = buf.get(..n).unwrap_or_default();
        crc = crc32c::crc32c_append(crc, read);
        size += n as u64;
    }
}

fn store_error(key: &Path, source: object_store::Error) -> CacheError {
    CacheError::Store {
        key: key.to_string(),
        source: std::sync::Arc::new(source),
    }
}

async fn abort_quietly(writer: WriteMultipart, key: &Path) {
    if let Err(e) = writer.abort().await {
        tracing::warn!(%key, error = %e, "could not abort a failed multipart upload; the bucket lifecycle rule will");
    }
}

/// Reads up to `size` bytes (fewer only at end of file).
async fn read_chunk(reader: &mut tokio::fs::File, size: usize) -> std::io::Result<Bytes> {
    let mut buf = BytesMut::zeroed(size);
    let mut filled = 0;
    while filled < size {
        let n = reader.read(&mut buf[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    buf.truncate(filled);
    Ok(buf.freeze())
}

/// Exponential backoff with full jitter for retrying whole uploads.
///
/// Pure: the caller supplies the attempt number and a random `jitter` in
/// `[0, 1)`, so tests (and a deterministic engine) control both.
#[derive(Debug, Clone)]
pub struct RetrySchedule {
    pub initial: Duration,
    pub max: Duration,
    pub multiplier: f64,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        RetrySchedule {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(30),
            multiplier: 2.0,
        }
    }
}

impl RetrySchedule {
    /// The ceiling of the wait before retry number `attempt` (0 = first retry).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = self.multiplier.max(1.0).powi(attempt.min(64) as i32);
        let secs = (self.initial.as_secs_f64() * factor).min(self.max.as_secs_f64());
        Duration::from_secs_f64(secs)
    }

    /// The wait before retry number `attempt`: uniformly spread over
    /// `[ceiling / 2, ceiling)` by `jitter`, so agents retrying after one
    /// outage do not return in lockstep, yet never retry in a tight loop.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let ceiling = self.ceiling(attempt);
        ceiling.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    async fn object_bytes(handle: &crate::ObjectStoreHandle, key: &Path) -> Bytes {
        handle
            .store
            .get(key)
            .await
            .expect("get")
            .bytes()
            .await
            .expect("bytes")
    }

    #[tokio::test]
    async fn a_local_folder_store_links_sealed_files_instead_of_copying_them() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("dir");
        let handle = crate::ObjectStoreHandle::local_default(dir.path()).expect("store");
        let file = dir.path().join("00000000000000000000.log");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&file, &data).expect("write");
        let key = Path::from("topics/t/0/00000000000000000000.seg");
        let opts = UploadOptions::default();

        let up = link_or_upload_file(&handle, &key, &file, &opts, None)
            .await
            .expect("upload");
        assert_eq!(up.size, data.len() as u64);
        assert_eq!(up.crc32c, crc32c::crc32c(&data));
        assert_eq!(object_bytes(&handle, &key).await.as_ref(), &data[..]);
        assert_eq!(
            std::fs::metadata(&file).expect("meta").nlink(),
            2,
            "the object shares the segment's bytes on disk"
        );
        // Uploading again (a retry after a restart) replaces the object; a
        // writer that kept the checksum as it wrote hands it over.
        let known = KnownBytes {
            size: data.len() as u64,
            crc32c: crc32c::crc32c(&data),
        };
        let again = link_or_upload_file(&handle, &key, &file, &opts, Some(known))
            .await
            .expect("again");
        assert_eq!((again.size, again.crc32c), (known.size, known.crc32c));
        std::fs::remove_file(&file).expect("local retention");
        assert_eq!(object_bytes(&handle, &key).await.as_ref(), &data[..]);
    }

    #[tokio::test]
    async fn a_wrapped_local_store_gets_a_real_upload() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("dir");
        let plain = crate::ObjectStoreHandle::local_default(dir.path()).expect("store");
        let wrapped = plain.with_store(std::sync::Arc::clone(&plain.store));
        let file = dir.path().join("seg.log");
        std::fs::write(&file, b"sealed bytes").expect("write");
        let key = Path::from("k.seg");
        link_or_upload_file(&wrapped, &key, &file, &UploadOptions::default(), None)
            .await
            .expect("upload");
        assert_eq!(std::fs::metadata(&file).expect("meta").nlink(), 1);
        assert_eq!(object_bytes(&wrapped, &key).await.as_ref(), b"sealed bytes");
    }

    #[test]
    fn retry_waits_grow_to_the_cap_and_stay_jittered() {
        let s = RetrySchedule {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
            multiplier: 2.0,
        };
        assert_eq!(s.ceiling(0), Duration::from_millis(100));
        assert_eq!(s.ceiling(3), Duration::from_millis(800));
        assert_eq!(s.ceiling(20), Duration::from_secs(5));
        assert_eq!(s.ceiling(u32::MAX), Duration::from_secs(5));
        assert_eq!(s.delay(3, 0.0), Duration::from_millis(400));
        assert!(s.delay(3, 0.999) < Duration::from_millis(800));
        assert!(s.delay(3, 0.5) > s.delay(3, 0.1));
    }
}
