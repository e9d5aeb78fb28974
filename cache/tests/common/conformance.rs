//! The object-store conformance suite: what the uploader, retention and the
//! cold reader rely on, run unchanged against every backend.
//!
//! Each check works under its own fresh key prefix, so one bucket serves the
//! whole suite and reruns never see each other's objects.

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use cache::layout::{
    parse_key, partition_prefix, tombstone_key, tombstone_root, ObjectKind, SegmentId,
};
use cache::object_store::path::Path;
use cache::object_store::{PutMode, PutOptions, PutPayload};
use cache::{ObjectStoreExt, ObjectStoreHandle};
use futures::TryStreamExt;

/// What a backend can do here; a check needing more is reported as skipped.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// object_store can write to it (fake-gcs-server: no).
    pub writes: bool,
    /// `PutMode::Create` is honoured.
    pub conditional_create: bool,
    /// Server-side copy works (moto's GCS XML API ignores `x-goog-copy-source`
    /// and stores an empty object instead).
    pub server_side_copy: bool,
}

/// Writes an object by whatever means the backend accepts (for read-only
/// clients, the server's own API).
pub type Seeder =
    Arc<dyn Fn(Path, Bytes) -> Pin<Box<dyn Future<Output = Result<()>> + Send>> + Send + Sync>;

/// A seeder using the store itself.
pub fn store_seeder(handle: &ObjectStoreHandle) -> Seeder {
    let store = Arc::clone(&handle.store);
    Arc::new(move |path, data| {
        let store = Arc::clone(&store);
        Box::pin(async move {
            store.put(&path, PutPayload::from(data)).await?;
            Ok(())
        })
    })
}

/// Deterministic, position-dependent bytes so misplaced ranges are caught.
pub fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[i % 4] ^ seed)
        .collect::<Vec<u8>>()
        .into()
}

/// What a writer records of `data` as it writes it.
pub fn as_written(data: &[u8]) -> cache::KnownBytes {
    cache::KnownBytes {
        size: data.len() as u64,
        crc32c: crc32c::crc32c(data),
    }
}

pub struct Report {
    pub backend: String,
    pub results: Vec<(&'static str, Outcome)>,
}

pub enum Outcome {
    Pass,
    Skip(&'static str),
    Fail(String),
}

impl Report {
    /// Prints every check and fails with the list of failed ones.
    pub fn assert_passed(&self) {
        let mut failed = Vec::new();
        for (name, outcome) in &self.results {
            match outcome {
                Outcome::Pass => println!("[{}] PASS {name}", self.backend),
                Outcome::Skip(why) => println!("[{}] SKIP {name}: {why}", self.backend),
                Outcome::Fail(e) => {
                    println!("[{}] FAIL {name}: {e}", self.backend);
                    failed.push(format!("{name}: {e}"));
                }
            }
        }
        let passed = self
            .results
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Pass))
            .count();
        assert!(
            failed.is_empty(),
            "{} conformance failures:\n{}",
            self.backend,
            failed.join("\n")
        );
        assert!(passed > 0, "{}: no conformance check ran", self.backend);
    }
}

struct Ctx {
    handle: ObjectStoreHandle,
    seed: Seeder,
    caps: Caps,
    run: String,
}

impl Ctx {
    /// A fresh prefix for one check, under the store's prefix.
    fn base(&self, check: &str) -> Path {
        self.handle
            .prefix
            .clone()
            .join(format!("conformance-{}", self.run))
            .join(check)
    }
}

macro_rules! check {
    ($report:expr, $ctx:expr, $name:literal, needs_writes, $f:ident) => {{
        let outcome = if !$ctx.caps.writes {
            Outcome::Skip("the client cannot write to this server")
        } else {
            outcome($f(&$ctx, $name).await)
        };
        $report.results.push(($name, outcome));
    }};
    ($report:expr, $ctx:expr, $name:literal, $f:ident) => {{
        let outcome = outcome($f(&$ctx, $name).await);
        $report.results.push(($name, outcome));
    }};
}

fn outcome(r: Result<()>) -> Outcome {
    match r {
        Ok(()) => Outcome::Pass,
        Err(e) => Outcome::Fail(format!("{e:#}")),
    }
}

/// Runs every check against `handle`.
pub async fn run(backend: &str, handle: ObjectStoreHandle, caps: Caps, seed: Seeder) -> Report {
    let ctx = Ctx {
        handle,
        seed,
        caps,
        run: uuid::Uuid::new_v4().simple().to_string(),
    };
    let mut report = Report {
        backend: backend.to_string(),
        results: Vec::new(),
    };
    check!(
        report,
        ctx,
        "whole_object_reads_back_byte_for_byte",
        whole_object_reads_back
    );
    check!(
        report,
        ctx,
        "ranged_reads_return_exactly_the_requested_bytes",
        ranged_reads
    );
    check!(
        report,
        ctx,
        "head_reports_the_object_size",
        head_reports_size
    );
    check!(
        report,
        ctx,
        "missing_objects_are_reported_as_not_found",
        missing_is_not_found
    );
    check!(
        report,
        ctx,
        "listing_is_recursive_and_bounded_by_path_segments",
        listing_by_segments
    );
    check!(
        report,
        ctx,
        "listing_with_delimiter_shows_partitions",
        listing_with_delimiter
    );
    check!(
        report,
        ctx,
        "segment_keys_list_in_offset_order_and_parse_back",
        segment_keys_list_and_parse
    );
    check!(
        report,
        ctx,
        "concurrent_ranged_reads_are_all_correct",
        concurrent_ranged_reads
    );
    check!(
        report,
        ctx,
        "delete_removes_and_repeating_it_is_harmless",
        delete_is_idempotent
    );
    check!(
        report,
        ctx,
        "cold_cache_reads_match_the_object",
        cold_cache_reads
    );
    check!(
        report,
        ctx,
        "reupload_under_the_same_key_replaces_the_object",
        needs_writes,
        reupload_replaces
    );
    check!(
        report,
        ctx,
        "multipart_upload_assembles_parts_in_order",
        needs_writes,
        multipart_assembles
    );
    check!(
        report,
        ctx,
        "aborted_multipart_upload_leaves_no_object",
        needs_writes,
        multipart_abort
    );
    check!(
        report,
        ctx,
        "bytes_changed_since_they_were_written_are_not_uploaded",
        needs_writes,
        changed_bytes_not_uploaded
    );
    let tombstone = if !ctx.caps.writes || !ctx.caps.server_side_copy {
        Outcome::Skip("this server cannot do a server-side copy with this client")
    } else {
        outcome(tombstone_move(&ctx, "tombstone").await)
    };
    report
        .results
        .push(("moving_to_the_tombstone_prefix_keeps_the_bytes", tombstone));
    let conditional = if !ctx.caps.writes || !ctx.caps.conditional_create {
        Outcome::Skip(
            "conditional create is not exercised on this backend (callers must not depend on it)",
        )
    } else {
        outcome(conditional_create(&ctx, "conditional").await)
    };
    report
        .results
        .push(("create_only_put_refuses_to_overwrite", conditional));
    report
}

async fn get_bytes(ctx: &Ctx, path: &Path) -> Result<Bytes> {
    Ok(ctx
        .handle
        .store
        .get(path)
        .await
        .with_context(|| format!("GET {path}"))?
        .bytes()
        .await?)
}

async fn whole_object_reads_back(ctx: &Ctx, name: &str) -> Result<()> {
    for (i, len) in [1usize, 4096, 300_000].into_iter().enumerate() {
        let path = ctx.base(name).join(format!("obj-{i}"));
        let data = pattern(len, i as u8);
        (ctx.seed)(path.clone(), data.clone()).await?;
        ensure!(
            get_bytes(ctx, &path).await? == data,
            "{len}-byte object came back different"
        );
    }
    Ok(())
}

async fn ranged_reads(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("obj");
    let len = 1_000_003usize;
    let data = pattern(len, 7);
    (ctx.seed)(path.clone(), data.clone()).await?;
    let n = len as u64;
    for range in [
        0..1,
        0..n,
        1..n,
        n - 1..n,
        4095..4097,
        65_536..131_072,
        999_000..n,
        123_457..123_458,
    ] {
        let got = ctx
            .handle
            .store
            .get_range(&path, range.clone())
            .await
            .with_context(|| format!("range {range:?}"))?;
        ensure!(
            got == data.slice(range.start as usize..range.end as usize),
            "range {range:?} returned wrong bytes"
        );
    }
    Ok(())
}

async fn head_reports_size(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("obj");
    (ctx.seed)(path.clone(), pattern(12_345, 1)).await?;
    let meta = ctx.handle.store.head(&path).await?;
    ensure!(meta.size == 12_345, "head said {} bytes", meta.size);
    ensure!(
        meta.location == path,
        "head named {} instead of {path}",
        meta.location
    );
    Ok(())
}

async fn missing_is_not_found(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("never-written");
    for (what, result) in [
        ("get", ctx.handle.store.get(&path).await.map(|_| ())),
        ("head", ctx.handle.store.head(&path).await.map(|_| ())),
        (
            "get_range",
            ctx.handle.store.get_range(&path, 0..10).await.map(|_| ()),
        ),
    ] {
        match result {
            Err(cache::object_store::Error::NotFound { .. }) => {}
            Err(e) => bail!("{what} of a missing object failed with {e} instead of NotFound"),
            Ok(()) => bail!("{what} of a missing object succeeded"),
        }
    }
    Ok(())
}

async fn listing_by_segments(ctx: &Ctx, name: &str) -> Result<()> {
    let base = ctx.base(name);
    let inside = [
        base.clone().join("p1").join("a"),
        base.clone().join("p1").join("deep").join("b"),
    ];
    let outside = base.clone().join("p10").join("c");
    for p in inside.iter().chain([&outside]) {
        (ctx.seed)(p.clone(), pattern(10, 0)).await?;
    }
    let mut listed: Vec<Path> = ctx
        .handle
        .store
        .list(Some(&base.clone().join("p1")))
        .map_ok(|m| m.location)
        .try_collect()
        .await?;
    listed.sort();
    let mut expected = inside.to_vec();
    expected.sort();
    ensure!(
        listed == expected,
        "listing p1 gave {listed:?}, expected {expected:?}"
    );
    Ok(())
}

async fn listing_with_delimiter(ctx: &Ctx, name: &str) -> Result<()> {
    let topic = uuid::Uuid::new_v4();
    let prefix = ctx.base(name);
    for partition in [0, 1, 2] {
        let id = SegmentId::new(topic, partition, 0, 9)?;
        (ctx.seed)(id.segment_key(&prefix), pattern(5, 0)).await?;
    }
    let topic_dir = cache::layout::topic_prefix(&prefix, topic);
    let listed = ctx
        .handle
        .store
        .list_with_delimiter(Some(&topic_dir))
        .await?;
    let mut dirs: Vec<String> = listed
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename().map(str::to_string))
        .collect();
    dirs.sort();
    ensure!(dirs == ["0", "1", "2"], "partitions listed as {dirs:?}");
    ensure!(
        listed.objects.is_empty(),
        "no object sits directly under the topic"
    );
    Ok(())
}

async fn segment_keys_list_and_parse(ctx: &Ctx, name: &str) -> Result<()> {
    let topic = uuid::Uuid::new_v4();
    let prefix = ctx.base(name);
    let ranges = [
        (0i64, 99i64),
        (100, 1_099),
        (1_100, 99_999),
        (100_000, 100_000),
    ];
    for (base, last) in ranges {
        let id = SegmentId::new(topic, 3, base, last)?;
        (ctx.seed)(id.segment_key(&prefix), pattern(10, 1)).await?;
        (ctx.seed)(id.index_key(&prefix), pattern(4, 2)).await?;
    }
    let mut listed: Vec<Path> = ctx
        .handle
        .store
        .list(Some(&partition_prefix(&prefix, topic, 3)))
        .map_ok(|m| m.location)
        .try_collect()
        .await?;
    listed.sort();
    let segments: Vec<(i64, i64)> = listed
        .iter()
        .filter_map(|p| parse_key(&prefix, p))
        .filter(|(_, kind)| *kind == ObjectKind::Segment)
        .map(|(id, _)| (id.base_offset, id.last_offset))
        .collect();
    ensure!(segments == ranges, "segments listed as {segments:?}");
    ensure!(
        listed.len() == 8,
        "expected 8 objects, listed {}",
        listed.len()
    );
    Ok(())
}

async fn concurrent_ranged_reads(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("obj");
    let data = pattern(2 << 20, 9);
    (ctx.seed)(path.clone(), data.clone()).await?;
    let reads = (0..16u64).map(|i| {
        let store = Arc::clone(&ctx.handle.store);
        let path = path.clone();
        async move {
            let range = i * 131_072..(i + 1) * 131_072;
            store
                .get_range(&path, range.clone())
                .await
                .map(|b| (range, b))
        }
    });
    for (range, got) in futures::future::try_join_all(reads).await? {
        ensure!(
            got == data.slice(range.start as usize..range.end as usize),
            "concurrent range {range:?} wrong"
        );
    }
    Ok(())
}

async fn delete_is_idempotent(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("obj");
    (ctx.seed)(path.clone(), pattern(10, 0)).await?;
    ctx.handle.store.delete(&path).await?;
    match ctx.handle.store.head(&path).await {
        Err(cache::object_store::Error::NotFound { .. }) => {}
        other => bail!("object still visible after delete: {other:?}"),
    }
    // Retention may delete twice (a crash between delete and manifest trim):
    // the second delete must succeed or say NotFound, nothing worse.
    match ctx.handle.store.delete(&path).await {
        Ok(()) | Err(cache::object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => bail!("deleting a deleted object failed with {e}"),
    }
}

async fn reupload_replaces(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("obj");
    ctx.handle.store.put(&path, pattern(1000, 1).into()).await?;
    let second = pattern(2000, 2);
    ctx.handle.store.put(&path, second.clone().into()).await?;
    ensure!(
        get_bytes(ctx, &path).await? == second,
        "second upload did not replace the first"
    );
    Ok(())
}

async fn multipart_assembles(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("big.seg");
    // S3 requires parts of at least 5 MiB except the last.
    let part = 5 << 20;
    let data = pattern(2 * part + 12_345, 5);
    let mut upload = ctx.handle.store.put_multipart(&path).await?;
    for chunk in [0..part, part..2 * part, 2 * part..data.len()] {
        upload.put_part(data.slice(chunk).into()).await?;
    }
    upload.complete().await?;
    ensure!(
        ctx.handle.store.head(&path).await?.size == data.len() as u64,
        "assembled size differs"
    );
    ensure!(
        get_bytes(ctx, &path).await? == data,
        "assembled bytes differ"
    );
    Ok(())
}

async fn multipart_abort(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("aborted.seg");
    let mut upload = ctx.handle.store.put_multipart(&path).await?;
    upload.put_part(pattern(5 << 20, 3).into()).await?;
    upload.abort().await?;
    match ctx.handle.store.head(&path).await {
        Err(cache::object_store::Error::NotFound { .. }) => Ok(()),
        other => bail!("aborted upload left an object: {other:?}"),
    }
}

/// The uploader's check of a sealed segment against the checksum kept as
/// it was written: a single PUT is never sent and a multipart upload is
/// aborted, so the server shows no object either way.
async fn changed_bytes_not_uploaded(ctx: &Ctx, name: &str) -> Result<()> {
    let options = cache::UploadOptions {
        multipart_threshold: 6 << 20,
        part_size: 5 << 20,
        max_concurrent_parts: 2,
    };
    let dir = tempfile::tempdir()?;
    for (file_name, len) in [("small.seg", 4096), ("big.seg", (11 << 20) + 7)] {
        let data = pattern(len, 11);
        let written = as_written(&data);
        let mut on_disk = data.to_vec();
        on_disk[len / 2] ^= 0x01;
        let file = dir.path().join(file_name);
        std::fs::write(&file, &on_disk)?;
        let path = ctx.base(name).join(file_name);
        match cache::upload_file_checked(
            ctx.handle.store.as_ref(),
            &path,
            &file,
            &options,
            Some(written),
        )
        .await
        {
            Err(cache::CacheError::ContentMismatch { .. }) => {}
            other => bail!("{file_name}: a changed file was not refused: {other:?}"),
        }
        match ctx.handle.store.head(&path).await {
            Err(cache::object_store::Error::NotFound { .. }) => {}
            other => bail!("{file_name}: a refused upload left an object: {other:?}"),
        }
    }
    Ok(())
}

async fn tombstone_move(ctx: &Ctx, name: &str) -> Result<()> {
    let prefix = ctx.base(name);
    let id = SegmentId::new(uuid::Uuid::new_v4(), 0, 0, 9)?;
    let live = id.segment_key(&prefix);
    let data = pattern(70_000, 4);
    ctx.handle.store.put(&live, data.clone().into()).await?;
    let dead = tombstone_key(&prefix, &live)?;
    ctx.handle.store.copy(&live, &dead).await?;
    ctx.handle.store.delete(&live).await?;
    let copied = get_bytes(ctx, &dead).await?;
    ensure!(
        copied == data,
        "tombstoned copy differs: {} bytes instead of {}",
        copied.len(),
        data.len()
    );
    let listed: Vec<Path> = ctx
        .handle
        .store
        .list(Some(&tombstone_root(&prefix)))
        .map_ok(|m| m.location)
        .try_collect()
        .await?;
    ensure!(
        listed == [dead.clone()],
        "tombstone prefix lists {listed:?}"
    );
    ensure!(
        ctx.handle.store.head(&live).await.is_err(),
        "live key still present"
    );
    Ok(())
}

async fn conditional_create(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("once");
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    ctx.handle
        .store
        .put_opts(&path, pattern(10, 1).into(), create.clone())
        .await?;
    match ctx
        .handle
        .store
        .put_opts(&path, pattern(10, 2).into(), create)
        .await
    {
        Err(cache::object_store::Error::AlreadyExists { .. }) => {}
        Err(e) => bail!("second create failed with {e} instead of AlreadyExists"),
        Ok(_) => bail!("second create overwrote the object"),
    }
    ensure!(
        get_bytes(ctx, &path).await? == pattern(10, 1),
        "object changed"
    );
    Ok(())
}

async fn cold_cache_reads(ctx: &Ctx, name: &str) -> Result<()> {
    let path = ctx.base(name).join("obj.seg");
    let data = pattern(700_001, 6);
    (ctx.seed)(path.clone(), data.clone()).await?;
    let config = cache::CacheConfig {
        block_size: 64 << 10,
        memory_bytes: 4 << 20,
        ..Default::default()
    };
    let cold = cache::ColdCache::open(config, ctx.handle.clone()).await?;
    let n = data.len() as u64;
    for range in [
        0..n,
        0..10,
        65_535..65_537,
        100_000..300_000,
        n - 5..n,
        100_000..300_000,
    ] {
        let got = cold.read_range(&path, range.clone(), n).await?;
        ensure!(
            got == data.slice(range.start as usize..range.end as usize),
            "cached range {range:?} differs"
        );
    }
    let stats = cold.stats();
    ensure!(
        stats.memory_hits > 0,
        "repeated reads never hit memory: {stats:?}"
    );
    cold.close().await?;
    Ok(())
}
