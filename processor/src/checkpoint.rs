//! Checkpoints: what makes the output exactly once.
//!
//! Under the sink URL the processor keeps
//!
//! - `part-<epoch>.parquet`: the windows closed during one checkpoint
//!   interval (the epoch 0-padded to 20 digits, so names sort by epoch);
//! - `_checkpoints/<epoch>.json`: one [`Checkpoint`]: the next offset to
//!   read per partition, the open windows and the watermark, and the list
//!   of every committed data file.
//!
//! A checkpoint is taken by writing the data file first, then the
//! checkpoint object (one PUT, atomic on S3). A data file that no
//! checkpoint lists was written by a processor that died before its
//! checkpoint; the next start deletes it, restores the open windows and
//! reads again from the checkpoint's offsets, so those windows are written
//! again, once. A reader sees every window exactly once by reading the
//! files the latest checkpoint lists (or, once the processor has started
//! and caught up, every `part-*.parquet` file of the prefix).
//!
//! One processor writes under a URL at a time; two at once would overwrite
//! each other's checkpoints.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};

use crate::window::WindowsSnapshot;

const CHECKPOINTS: &str = "_checkpoints";
/// Checkpoint objects kept: the latest and the one before.
const KEEP: usize = 2;

/// One committed state of a pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub pipeline: String,
    pub topic: String,
    pub epoch: u64,
    /// Per partition, the next offset to read.
    pub offsets: BTreeMap<i32, i64>,
    pub windows: WindowsSnapshot,
    /// Every committed data file, relative to the sink URL, oldest first.
    pub files: Vec<String>,
    /// Every committed file of late records (`late/part-<epoch>.parquet`),
    /// oldest first.
    #[serde(default)]
    pub late_files: Vec<String>,
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
pub struct CheckpointStore {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
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

    fn checkpoint_path(&self, epoch: u64) -> Path {
        self.prefix
            .clone()
            .join(CHECKPOINTS)
            .join(format!("{epoch:020}.json"))
    }

    /// The checkpoints' epochs, oldest first.
    pub async fn epochs(&self) -> anyhow::Result<Vec<u64>> {
        let dir = self.prefix.clone().join(CHECKPOINTS);
        let mut epochs: Vec<u64> = self
            .list(&dir)
            .await?
            .iter()
            .filter_map(|name| name.strip_suffix(".json")?.parse().ok())
            .collect();
        epochs.sort_unstable();
        Ok(epochs)
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

    /// The latest checkpoint, if any.
    pub async fn latest(&self) -> anyhow::Result<Option<Checkpoint>> {
        let Some(epoch) = self.epochs().await?.last().copied() else {
            return Ok(None);
        };
        self.get(epoch).await.map(Some)
    }

    /// Checkpoint `epoch`.
    pub async fn get(&self, epoch: u64) -> anyhow::Result<Checkpoint> {
        let path = self.checkpoint_path(epoch);
        let bytes = self
            .store
            .get(&path)
            .await
            .with_context(|| format!("cannot read checkpoint {path}"))?
            .bytes()
            .await
            .with_context(|| format!("cannot read checkpoint {path}"))?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("checkpoint {path} is not a checkpoint"))
    }

    /// Deletes the data files (and files of late records) under the
    /// prefix that `committed` does not list (left by a processor that died
    /// before its checkpoint); their names.
    pub async fn remove_uncommitted(&self, committed: &[String]) -> anyhow::Result<Vec<String>> {
        let mut removed = Vec::new();
        let top = self.list(&self.prefix).await?;
        let late = self.list(&self.prefix.clone().join(LATE_DIR)).await?;
        let names = top
            .into_iter()
            .chain(late.into_iter().map(|n| format!("{LATE_DIR}/{n}")));
        for name in names {
            let file = name.rsplit('/').next().unwrap_or_default();
            if file.starts_with("part-") && file.ends_with(".parquet") && !committed.contains(&name)
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

    /// The path of `name` (which may hold `/`) under the prefix.
    fn file_path(&self, name: &str) -> Path {
        name.split('/')
            .fold(self.prefix.clone(), |path, part| path.join(part))
    }

    /// Writes data file `name`.
    pub async fn put_data(&self, name: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        let path = self.file_path(name);
        self.store
            .put(&path, Bytes::from(bytes).into())
            .await
            .with_context(|| format!("cannot write {path}"))?;
        Ok(())
    }

    /// Writes `checkpoint`, committing it, then drops checkpoints older
    /// than the one before it.
    pub async fn commit(&self, checkpoint: &Checkpoint) -> anyhow::Result<()> {
        let path = self.checkpoint_path(checkpoint.epoch);
        let bytes = serde_json::to_vec(checkpoint).context("cannot encode a checkpoint")?;
        self.store
            .put(&path, Bytes::from(bytes).into())
            .await
            .with_context(|| format!("cannot write checkpoint {path}"))?;
        let epochs = self.epochs().await.unwrap_or_default();
        let old: Vec<Path> = epochs
            .iter()
            .filter(|e| **e < checkpoint.epoch)
            .rev()
            .skip(KEEP - 1)
            .map(|e| self.checkpoint_path(*e))
            .collect();
        for p in old {
            // best effort: a stale checkpoint left behind is never read
            if let Err(e) = self.store.delete(&p).await {
                tracing::debug!("cannot delete old checkpoint {p}: {e}");
            }
        }
        Ok(())
    }

    /// Every object under the prefix, for tests.
    #[cfg(test)]
    pub async fn all(&self) -> Vec<String> {
        use futures::TryStreamExt;
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
