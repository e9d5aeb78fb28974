//! The local state store: the latest checkpoint this process committed,
//! kept on local disk in redb, so a processor restarting on the same host
//! takes its windows up without downloading them.
//!
//! Invariants:
//!
//! 1. The in-memory windows are the hot path; the store is written once
//!    per committed checkpoint, never per record.
//! 2. It is written after the checkpoint's delta committed in object
//!    storage, in one redb write transaction holding the windows changed
//!    and removed, the data files added, and the epoch, offsets,
//!    watermark, clocks and the committed delta's fingerprint. A crash
//!    before that transaction leaves the store one checkpoint behind.
//! 3. At start it is used only when its epoch and fingerprint equal those
//!    of the checkpoint the processor resumes from. Behind, ahead (a
//!    checkpoint whose topic transaction did not commit) or from another
//!    run: object storage wins, and the store is rebuilt from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{Chain, Checkpoint, CheckpointStore, Delta, Head, Restored};
use crate::pipeline::Pipeline;
use crate::window::{WindowAcc, WindowRow, WindowsSnapshot};

/// (key, start) -> the window's end and figures, as JSON.
const WINDOWS: TableDefinition<(&str, i64), &[u8]> = TableDefinition::new("windows");
/// Committed file name -> [`DATA`] or [`LATE`].
const FILES: TableDefinition<&str, u8> = TableDefinition::new("files");
/// [`META_KEY`] -> [`Meta`] as JSON.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const META_KEY: &str = "checkpoint";
const DATA: u8 = 0;
const LATE: u8 = 1;

/// Everything of a checkpoint but its windows and files.
#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    pipeline: String,
    topic: String,
    sink: String,
    epoch: u64,
    fingerprint: u64,
    offsets: BTreeMap<i32, i64>,
    watermark: Option<i64>,
    max_event_time: BTreeMap<i32, i64>,
    chain: Option<Chain>,
}

#[derive(Serialize, Deserialize)]
struct OpenWindow {
    end: i64,
    acc: WindowAcc,
}

/// Which checkpoint a start resumes from.
#[derive(Clone, Copy, Debug)]
pub struct Wanted<'a> {
    pub pipeline: &'a str,
    pub topic: &'a str,
    pub sink: &'a str,
    pub epoch: u64,
    pub fingerprint: u64,
}

/// A checkpoint committed in object storage, as the store takes it up.
pub struct Committed<'a> {
    /// With the windows it changed and removed (also for a delta written
    /// with a base).
    pub delta: &'a Delta,
    pub sink: &'a str,
    pub fingerprint: u64,
    pub chain: Chain,
}

/// The local store of a pipeline.
pub struct StateStore {
    db: Database,
    path: PathBuf,
}

impl StateStore {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> anyhow::Result<StateStore> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the state folder {}", dir.display()))?;
        let path = dir.join("state.redb");
        let db = Database::create(&path).with_context(|| {
            format!(
                "cannot open the state store {} (is another processor using it?)",
                path.display()
            )
        })?;
        Ok(StateStore { db, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The epoch the store holds, if any.
    pub fn epoch(&self) -> anyhow::Result<Option<u64>> {
        Ok(self.meta()?.map(|m| m.epoch))
    }

    fn meta(&self) -> anyhow::Result<Option<Meta>> {
        let txn = self
            .db
            .begin_read()
            .context("cannot read the state store")?;
        let table = match txn.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e).context("cannot read the state store"),
        };
        let Some(bytes) = table.get(META_KEY).context("cannot read the state store")? else {
            return Ok(None);
        };
        // a store this version cannot read is only a cache: start from
        // object storage
        Ok(serde_json::from_slice(bytes.value()).ok())
    }

    /// The checkpoint the store holds, when it is `wanted`'s.
    pub fn load(&self, wanted: Wanted<'_>) -> anyhow::Result<Option<Restored>> {
        let Some(meta) = self.meta()? else {
            return Ok(None);
        };
        if meta.epoch != wanted.epoch
            || meta.fingerprint != wanted.fingerprint
            || meta.pipeline != wanted.pipeline
            || meta.topic != wanted.topic
            || meta.sink != wanted.sink
        {
            return Ok(None);
        }
        let txn = self.db.begin_read().map_err(read_err)?;
        let mut open = Vec::new();
        for entry in txn
            .open_table(WINDOWS)
            .map_err(read_err)?
            .iter()
            .map_err(read_err)?
        {
            let (k, v) = entry.map_err(read_err)?;
            let (key, start) = k.value();
            let Ok(w) = serde_json::from_slice::<OpenWindow>(v.value()) else {
                return Ok(None);
            };
            open.push(WindowRow {
                key: key.to_owned(),
                start,
                end: w.end,
                acc: w.acc,
            });
        }
        let (mut files, mut late_files) = (Vec::new(), Vec::new());
        for entry in txn
            .open_table(FILES)
            .map_err(read_err)?
            .iter()
            .map_err(read_err)?
        {
            let (name, kind) = entry.map_err(read_err)?;
            // names sort by epoch
            match kind.value() {
                LATE => late_files.push(name.value().to_owned()),
                _ => files.push(name.value().to_owned()),
            }
        }
        Ok(Some(Restored {
            checkpoint: Checkpoint {
                pipeline: meta.pipeline,
                topic: meta.topic,
                epoch: meta.epoch,
                offsets: meta.offsets,
                windows: WindowsSnapshot {
                    watermark: meta.watermark,
                    max_event_time: meta.max_event_time,
                    open,
                },
                files,
                late_files,
            },
            chain: meta.chain,
        }))
    }

    /// Replaces what the store holds with `restored` (read from object
    /// storage; its delta's fingerprint `fingerprint`).
    pub fn rebuild(&self, restored: &Restored, sink: &str, fingerprint: u64) -> anyhow::Result<()> {
        let c = &restored.checkpoint;
        let txn = self.db.begin_write().map_err(write_err)?;
        txn.delete_table(WINDOWS).map_err(write_err)?;
        txn.delete_table(FILES).map_err(write_err)?;
        {
            let mut windows = txn.open_table(WINDOWS).map_err(write_err)?;
            for w in &c.windows.open {
                windows
                    .insert((w.key.as_str(), w.start), encode_window(w)?.as_slice())
                    .map_err(write_err)?;
            }
            let mut files = txn.open_table(FILES).map_err(write_err)?;
            for f in &c.files {
                files.insert(f.as_str(), DATA).map_err(write_err)?;
            }
            for f in &c.late_files {
                files.insert(f.as_str(), LATE).map_err(write_err)?;
            }
            let meta = Meta {
                pipeline: c.pipeline.clone(),
                topic: c.topic.clone(),
                sink: sink.to_owned(),
                epoch: c.epoch,
                fingerprint,
                offsets: c.offsets.clone(),
                watermark: c.windows.watermark,
                max_event_time: c.windows.max_event_time.clone(),
                chain: restored.chain,
            };
            put_meta(&txn, &meta)?;
        }
        txn.commit().map_err(write_err)?;
        Ok(())
    }

    /// Empties the store (a pipeline starting afresh).
    pub fn clear(&self) -> anyhow::Result<()> {
        let txn = self.db.begin_write().map_err(write_err)?;
        txn.delete_table(WINDOWS).map_err(write_err)?;
        txn.delete_table(FILES).map_err(write_err)?;
        txn.delete_table(META).map_err(write_err)?;
        txn.commit().map_err(write_err)?;
        Ok(())
    }

    /// Takes up a checkpoint committed right after the one the store holds.
    pub fn apply(&self, committed: &Committed<'_>) -> anyhow::Result<()> {
        let d = committed.delta;
        let txn = self.db.begin_write().map_err(write_err)?;
        {
            let mut windows = txn.open_table(WINDOWS).map_err(write_err)?;
            for id in &d.removed {
                windows
                    .remove((id.key.as_str(), id.start))
                    .map_err(write_err)?;
            }
            for w in &d.changed {
                windows
                    .insert((w.key.as_str(), w.start), encode_window(w)?.as_slice())
                    .map_err(write_err)?;
            }
            let mut files = txn.open_table(FILES).map_err(write_err)?;
            for f in &d.files {
                files.insert(f.as_str(), DATA).map_err(write_err)?;
            }
            for f in &d.late_files {
                files.insert(f.as_str(), LATE).map_err(write_err)?;
            }
            let meta = Meta {
                pipeline: d.pipeline.clone(),
                topic: d.topic.clone(),
                sink: committed.sink.to_owned(),
                epoch: d.epoch,
                fingerprint: committed.fingerprint,
                offsets: d.offsets.clone(),
                watermark: d.watermark,
                max_event_time: d.max_event_time.clone(),
                chain: Some(committed.chain),
            };
            put_meta(&txn, &meta)?;
        }
        txn.commit().map_err(write_err)?;
        Ok(())
    }
}

/// The state of checkpoint `head` (none: start afresh): from `state` when
/// it holds exactly that checkpoint, else from object storage, rebuilding
/// `state` from it. Whether it came from `state`.
pub async fn restore(
    store: &CheckpointStore,
    state: &StateStore,
    head: Option<&Head>,
    pipeline: &Pipeline,
) -> anyhow::Result<(Option<Restored>, bool)> {
    let Some(head) = head else {
        state.clear()?;
        return Ok((None, false));
    };
    let wanted = Wanted {
        pipeline: &pipeline.name,
        topic: &pipeline.source.topic,
        sink: &pipeline.sink.url,
        epoch: head.stored.epoch(),
        fingerprint: head.fingerprint,
    };
    if let Some(r) = state.load(wanted)? {
        return Ok((Some(r), true));
    }
    let r = store.restore(head).await?;
    state.rebuild(&r, &pipeline.sink.url, head.fingerprint)?;
    Ok((Some(r), false))
}

fn read_err(e: impl Into<redb::Error>) -> anyhow::Error {
    anyhow::Error::new(e.into()).context("cannot read the state store")
}

fn write_err(e: impl Into<redb::Error>) -> anyhow::Error {
    anyhow::Error::new(e.into()).context("cannot write the state store")
}

fn encode_window(w: &WindowRow) -> anyhow::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Ref<'a> {
        end: i64,
        acc: &'a WindowAcc,
    }
    serde_json::to_vec(&Ref {
        end: w.end,
        acc: &w.acc,
    })
    .context("cannot encode a window for the state store")
}

fn put_meta(txn: &redb::WriteTransaction, meta: &Meta) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec(meta).context("cannot encode the state store's epoch")?;
    let mut table = txn
        .open_table(META)
        .context("cannot write the state store")?;
    table
        .insert(META_KEY, bytes.as_slice())
        .context("cannot write the state store")?;
    Ok(())
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
