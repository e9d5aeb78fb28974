//! Checkpoints in object storage: what makes the output exactly once.
//!
//! Under the sink URL the processor keeps
//!
//! - `part-<epoch>.parquet`: the windows closed during one checkpoint
//!   interval (the epoch 0-padded to 20 digits, so names sort by epoch);
//! - `_checkpoints/<epoch>.json`: one [`Delta`] per checkpoint: what
//!   changed since the checkpoint before (windows changed and removed, the
//!   data files added) and the offsets, watermark and partition clocks;
//! - `_checkpoints/<epoch>.base.json`: now and then, a whole [`Checkpoint`]
//!   (every open window, every committed data file) that a chain of deltas
//!   starts from (see [`crate::delta`]).
//!
//! A checkpoint is taken by writing the data file first, then the base
//! when one is due, then the delta: one PUT of one object, atomic on S3,
//! the commit point. A base or data file newer than the latest delta was
//! written by a processor that died before its commit; the next start
//! deletes it, restores the latest delta's state (its base and the deltas
//! after it) and reads again from its offsets, so those windows are written
//! again, once. A reader sees every window exactly once by reading the
//! files the latest state lists (or, once the processor has started and
//! caught up, every `part-*.parquet` file of the prefix).
//!
//! Once a base commits, the objects older than the base before it are
//! deleted: the latest chain and the one before stay (a topic sink may
//! resume from the checkpoint before the latest).
//!
//! One processor writes under a URL at a time; two at once would overwrite
//! each other's checkpoints. The prefix is a parameter of
//! [`CheckpointStore::new`], so several writers can each have their own.

use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};

pub use crate::delta::{Chain, Checkpoint, Delta, Stored};

const CHECKPOINTS: &str = "_checkpoints";
const DELTA_SUFFIX: &str = ".json";
const BASE_SUFFIX: &str = ".base.json";
/// Objects larger than this go up in parts.
const MULTIPART_ABOVE: usize = 8 << 20;

/// The latest committed delta (or whole checkpoint), as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Head {
    pub stored: Stored,
    /// A hash of the object's bytes: tells one run's epoch `n` from
    /// another's.
    pub fingerprint: u64,
    pub bytes: u64,
}

/// A state restored from object storage, and the chain it ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored {
    pub checkpoint: Checkpoint,
    /// None: a whole checkpoint of the old layout (the next checkpoint
    /// writes a base).
    pub chain: Option<Chain>,
}

/// The hash [`Head::fingerprint`] holds.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    twox_hash::XxHash64::oneshot(0, bytes)
}

/// The name of epoch `epoch`'s data file.
pub fn data_file(epoch: u64) -> String {
    format!("part-{epoch:020}.parquet")
}

/// Where late records go under the sink URL.
pub const LATE_DIR: &str = "late";

/// The name of epoch `epoch`'s file of late records.
pub fn late_file(epoch: u64) -> String {
    format!("{LATE_DIR}/part-{epoch:020}.parquet")
}

/// The data files and checkpoints under a sink URL.
#[derive(Clone)]
pub struct CheckpointStore {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
}

/// A checkpoint object's kind, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Delta,
    Base,
}

/// The epoch and kind of checkpoint object `name`.
fn parse_name(name: &str) -> Option<(u64, Kind)> {
    if let Some(epoch) = name.strip_suffix(BASE_SUFFIX) {
        return Some((epoch.parse().ok()?, Kind::Base));
    }
    Some((name.strip_suffix(DELTA_SUFFIX)?.parse().ok()?, Kind::Delta))
}

impl CheckpointStore {
    /// The store `url` names (`s3://bucket/prefix` with the standard AWS
    /// variables, or `file:///dir`).
    pub fn open(url: &str) -> anyhow::Result<CheckpointStore> {
        let handle = cache::store_from_url(url, &cache::StoreEnv::from_process())
            .with_context(|| format!("cannot use the sink URL {url}"))?;
        Ok(CheckpointStore::new(handle.store, handle.prefix, url))
    }

    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path, url: &str) -> CheckpointStore {
        CheckpointStore {
            store,
            prefix,
            url: url.to_owned(),
        }
    }

    fn checkpoint_path(&self, epoch: u64, kind: Kind) -> Path {
        let suffix = match kind {
            Kind::Delta => DELTA_SUFFIX,
            Kind::Base => BASE_SUFFIX,
        };
        self.prefix
            .clone()
            .join(CHECKPOINTS)
            .join(format!("{epoch:020}{suffix}"))
    }

    /// Every checkpoint object's epoch and kind, oldest first.
    async fn objects(&self) -> anyhow::Result<Vec<(u64, Kind)>> {
        let dir = self.prefix.clone().join(CHECKPOINTS);
        let mut objects: Vec<(u64, Kind)> = self
            .list(&dir)
            .await?
            .iter()
            .filter_map(|name| parse_name(name))
            .collect();
        objects.sort_unstable_by_key(|(epoch, kind)| (*epoch, *kind == Kind::Delta));
        Ok(objects)
    }

    /// The committed checkpoints' epochs (those with a delta), oldest first.
    pub async fn epochs(&self) -> anyhow::Result<Vec<u64>> {
        Ok(self
            .objects()
            .await?
            .into_iter()
            .filter(|(_, k)| *k == Kind::Delta)
            .map(|(e, _)| e)
            .collect())
    }

    /// The names of the objects right under `dir`.
    async fn list(&self, dir: &Path) -> anyhow::Result<Vec<String>> {
        match self.store.list_with_delimiter(Some(dir)).await {
            Ok(listing) => Ok(listing
                .objects
                .iter()
                .filter_map(|o| o.location.filename().map(str::to_owned))
                .collect()),
            Err(object_store::Error::NotFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("cannot list {}/{}", self.url, dir.as_ref())),
        }
    }

    async fn get_bytes(&self, path: &Path) -> anyhow::Result<Bytes> {
        self.store
            .get(path)
            .await
            .with_context(|| format!("cannot read checkpoint object {path}"))?
            .bytes()
            .await
            .with_context(|| format!("cannot read checkpoint object {path}"))
    }

    /// The committed checkpoint `epoch`'s own object (its delta).
    pub async fn head(&self, epoch: u64) -> anyhow::Result<Head> {
        let path = self.checkpoint_path(epoch, Kind::Delta);
        let bytes = self.get_bytes(&path).await?;
        let stored = Stored::parse(&bytes).with_context(|| {
            format!("checkpoint {path} is neither a delta nor a whole checkpoint")
        })?;
        if stored.epoch() != epoch {
            bail!("checkpoint {path} holds epoch {}", stored.epoch());
        }
        Ok(Head {
            stored,
            fingerprint: fingerprint(&bytes),
            bytes: bytes.len() as u64,
        })
    }

    /// The state `head` ends: its base with every delta after it applied.
    pub async fn restore(&self, head: &Head) -> anyhow::Result<Restored> {
        let delta = match &head.stored {
            Stored::Whole(c) => {
                return Ok(Restored {
                    checkpoint: c.clone(),
                    chain: None,
                })
            }
            Stored::Delta(d) => d,
        };
        let base_path = self.checkpoint_path(delta.base, Kind::Base);
        let base_bytes = self.get_bytes(&base_path).await?;
        let base: Checkpoint = serde_json::from_slice(&base_bytes)
            .with_context(|| format!("checkpoint base {base_path} is not a checkpoint"))?;
        if base.epoch != delta.base {
            bail!("checkpoint base {base_path} holds epoch {}", base.epoch);
        }
        let mut deltas = Vec::new();
        let mut delta_bytes = 0;
        // a few GETs at a time: a chain is up to MAX_DELTAS objects
        let heads: Vec<Head> = futures::stream::iter(delta.base + 1..delta.epoch)
            .map(|epoch| self.head(epoch))
            .buffered(8)
            .try_collect()
            .await?;
        for h in heads {
            let epoch = h.stored.epoch();
            match h.stored {
                Stored::Delta(d) => deltas.push(d),
                Stored::Whole(_) => bail!(
                    "checkpoint {epoch} is a whole checkpoint inside the chain of base {}",
                    delta.base
                ),
            }
            delta_bytes += h.bytes;
        }
        if delta.epoch > delta.base {
            deltas.push(delta.clone());
            delta_bytes += head.bytes;
        }
        let checkpoint = crate::delta::apply(base, &deltas)
            .with_context(|| format!("the checkpoints under {} do not chain", self.url))?;
        Ok(Restored {
            checkpoint,
            chain: Some(Chain {
                base: delta.base,
                deltas: deltas.len() as u64,
                delta_bytes,
                base_bytes: base_bytes.len() as u64,
            }),
        })
    }

    /// The latest committed state, if any.
    pub async fn latest(&self) -> anyhow::Result<Option<Restored>> {
        let Some(epoch) = self.epochs().await?.last().copied() else {
            return Ok(None);
        };
        let head = self.head(epoch).await?;
        self.restore(&head).await.map(Some)
    }

    /// Deletes the checkpoint objects (deltas and bases) newer than
    /// `epoch` (all of them for none): left by a processor that died
    /// before its commit, or a checkpoint whose topic transaction did not
    /// commit. Their epochs.
    pub async fn remove_after(&self, epoch: Option<u64>) -> anyhow::Result<Vec<u64>> {
        let mut removed = Vec::new();
        for (e, kind) in self.objects().await? {
            if epoch.is_none_or(|c| e > c) {
                let path = self.checkpoint_path(e, kind);
                self.store
                    .delete(&path)
                    .await
                    .with_context(|| format!("cannot delete the uncommitted checkpoint {path}"))?;
                removed.push(e);
            }
        }
        Ok(removed)
    }

    /// Deletes the data files (and files of late records) under the
    /// prefix that `committed` does not list (left by a processor that died
    /// before its checkpoint); their names.
    pub async fn remove_uncommitted(&self, committed: &[String]) -> anyhow::Result<Vec<String>> {
        let committed: std::collections::HashSet<&str> =
            committed.iter().map(String::as_str).collect();
        let mut removed = Vec::new();
        let top = self.list(&self.prefix).await?;
        let late = self.list(&self.prefix.clone().join(LATE_DIR)).await?;
        let foldered = self.list_partition_folders().await?;
        let names = top
            .into_iter()
            .chain(late.into_iter().map(|n| format!("{LATE_DIR}/{n}")))
            .chain(foldered);
        for name in names {
            let file = name.rsplit('/').next().unwrap_or_default();
            if file.starts_with("part-")
                && file.ends_with(".parquet")
                && !committed.contains(name.as_str())
            {
                let path = self.file_path(&name);
                self.store
                    .delete(&path)
                    .await
                    .with_context(|| format!("cannot delete the uncommitted file {path}"))?;
                removed.push(name);
            }
        }
        Ok(removed)
    }

    /// The objects under the `dt=` folders of `sink.partition_by`, named
    /// relative to the prefix.
    async fn list_partition_folders(&self) -> anyhow::Result<Vec<String>> {
        use futures::TryStreamExt;
        let folders: Vec<Path> = match self.store.list_with_delimiter(Some(&self.prefix)).await {
            Ok(listing) => listing.common_prefixes,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot list {}", self.url));
            }
        };
        let mut names = Vec::new();
        let base = format!("{}/", self.prefix.as_ref());
        for folder in folders
            .into_iter()
            .filter(|f| f.filename().is_some_and(|n| n.starts_with("dt=")))
        {
            let objects: Vec<object_store::ObjectMeta> = self
                .store
                .list(Some(&folder))
                .try_collect()
                .await
                .with_context(|| format!("cannot list {}/{}", self.url, folder.as_ref()))?;
            for o in objects {
                let full = o.location.as_ref();
                let relative = if self.prefix.as_ref().is_empty() {
                    full
                } else {
                    full.strip_prefix(&base).unwrap_or(full)
                };
                names.push(relative.to_owned());
            }
        }
        Ok(names)
    }

    /// The path of `name` (which may hold `/`) under the prefix.
    fn file_path(&self, name: &str) -> Path {
        name.split('/')
            .fold(self.prefix.clone(), |path, part| path.join(part))
    }

    /// Writes `bytes` to `path`: one PUT, or a multipart upload when large.
    async fn put(&self, path: &Path, bytes: Bytes) -> anyhow::Result<()> {
        if bytes.len() <= MULTIPART_ABOVE {
            self.store
                .put(path, bytes.into())
                .await
                .with_context(|| format!("cannot write {path}"))?;
            return Ok(());
        }
        let upload = self
            .store
            .put_multipart(path)
            .await
            .with_context(|| format!("cannot start a multipart upload of {path}"))?;
        let mut writer = WriteMultipart::new(upload);
        writer.put(bytes);
        writer
            .finish()
            .await
            .with_context(|| format!("cannot write {path} in parts"))?;
        Ok(())
    }

    /// Writes data file `name`.
    pub async fn put_data(&self, name: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        self.put(&self.file_path(name), Bytes::from(bytes)).await
    }

    /// Commits checkpoint `epoch`: writes `base` (when one is due), then
    /// the `delta` (the commit point). After a base, drops the objects
    /// older than the base before it.
    pub async fn commit(
        &self,
        epoch: u64,
        delta: Bytes,
        base: Option<Bytes>,
    ) -> anyhow::Result<()> {
        let based = base.is_some();
        if let Some(base) = base {
            self.put(&self.checkpoint_path(epoch, Kind::Base), base)
                .await?;
        }
        self.put(&self.checkpoint_path(epoch, Kind::Delta), delta)
            .await?;
        if based {
            self.prune(epoch).await;
        }
        Ok(())
    }

    /// Best effort: deletes the objects the chains of the bases at `epoch`
    /// and before it do not need (a stale object left behind is never
    /// read: a restore follows the latest delta's base).
    async fn prune(&self, epoch: u64) {
        let objects = match self.objects().await {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!("cannot list checkpoints to prune: {e:#}");
                return;
            }
        };
        let previous = objects
            .iter()
            .filter(|(e, k)| *k == Kind::Base && *e < epoch)
            .map(|(e, _)| *e)
            .max();
        // no base before: keep the checkpoint before (a whole one, from
        // before checkpoints were incremental)
        let keep_from = previous.unwrap_or(epoch.saturating_sub(1));
        for (e, kind) in objects.into_iter().filter(|(e, _)| *e < keep_from) {
            let p = self.checkpoint_path(e, kind);
            if let Err(err) = self.store.delete(&p).await {
                tracing::debug!("cannot delete old checkpoint {p}: {err}");
            }
        }
    }

    /// Every object under the prefix, for tests.
    #[cfg(test)]
    pub async fn all(&self) -> Vec<String> {
        let listed: Vec<_> = self
            .store
            .list(Some(&self.prefix))
            .try_collect()
            .await
            .unwrap_or_default();
        let mut names: Vec<String> = listed.iter().map(|o| o.location.to_string()).collect();
        names.sort();
        names
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
