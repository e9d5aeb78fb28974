//! [`StateMachineStore`]: applies committed entries to [`MetaState`] and
//! keeps snapshots on disk.
//!
//! The state lives in memory behind a read-write lock shared with the
//! [`crate::Metastore`] handle, which serves local reads from it. It is made
//! durable by snapshots (written atomically, CRC-checked) plus the Raft log:
//! on restart the latest snapshot is loaded and openraft re-applies the
//! committed entries after it. A node whose newest snapshot is unreadable
//! and whose log no longer reaches back to an older one refuses to start,
//! naming the file, instead of coming up without the entries in between.
//!
//! Each applied command's events go to a broadcast channel after the batch
//! is applied, in log order.
//!
//! # Building a snapshot never stalls readers
//!
//! Every produce and fetch reads topics under the shared lock, and
//! parking_lot's lock is fair: once `apply` waits for the write lock, new
//! readers queue behind it. So nothing slow may run under the lock:
//!
//! 1. under the read lock the builder takes a clone of the state, which is
//!    cheap ([`MetaState`] shares its bulky values through `Arc`s), plus the
//!    last applied log id and membership that describe exactly that clone;
//! 2. the lock is released; the clone is serialised on a blocking thread
//!    while `apply` and readers go on (a change copies only the value it
//!    touches if the clone still shares it);
//! 3. the file is written atomically (tmp, fsync, rename, directory fsync).

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};
use parking_lot::RwLock;
use tokio::sync::broadcast;

use super::fsutil;
use crate::command::ProposalResults;
use crate::raft_types::{
    Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::state::MetaState;
use crate::types::MetaEvent;

const MAGIC: &[u8; 8] = b"AEROMSN1";
/// Snapshot files kept besides the newest. If the newest is unreadable the
/// older one serves only while the log still reaches back to it (see
/// [`StateMachineStore::open`]).
const KEEP_OLDER: usize = 1;

/// The applied state, shared with readers.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub state: MetaState,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
}

pub(crate) type SharedState = Arc<RwLock<Applied>>;

/// openraft's state machine for one node. Cheap to clone; clones share state.
#[derive(Clone)]
pub(crate) struct StateMachineStore {
    applied: SharedState,
    events: broadcast::Sender<MetaEvent>,
    dir: PathBuf,
    seq: Arc<AtomicU64>,
    #[cfg(test)]
    pub(crate) hooks: test_hooks::Hooks,
}

#[cfg(test)]
pub(crate) mod test_hooks {
    //! Pause points for tests that need a snapshot build caught mid-way.
    use std::sync::Arc;

    pub(crate) type Hook = Box<dyn FnOnce() + Send>;

    #[derive(Clone, Default)]
    pub(crate) struct Hooks {
        mid_serialisation: Arc<parking_lot::Mutex<Option<Hook>>>,
    }

    impl Hooks {
        /// Runs `hook` once, on the next snapshot build, after the first
        /// bytes of the state are written.
        pub(crate) fn on_mid_serialisation(&self, hook: impl FnOnce() + Send + 'static) {
            *self.mid_serialisation.lock() = Some(Box::new(hook));
        }

        pub(crate) fn take_mid_serialisation(&self) -> Option<Hook> {
            self.mid_serialisation.lock().take()
        }
    }
}

/// Collects the serialised state; in tests it can pause after the first write.
#[derive(Default)]
struct StateWriter {
    bytes: Vec<u8>,
    #[cfg(test)]
    pause: Option<test_hooks::Hook>,
}

impl std::io::Write for StateWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        #[cfg(test)]
        if let Some(pause) = self.pause.take() {
            pause();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn snap_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_snapshot(None, &e).into()
}

fn read_snap_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_snapshot(None, &e).into()
}

fn invalid(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

fn file_name(meta: &SnapshotMeta) -> String {
    let (term, index) = meta
        .last_log_id
        .map(|l| (l.leader_id.term, l.index))
        .unwrap_or((0, 0));
    format!("snap-{index:020}-{term:010}-{}.bin", meta.snapshot_id)
}

/// `MAGIC | u32 crc of the rest | u32 meta length | meta JSON | state JSON`
fn encode(meta: &SnapshotMeta, data: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let meta_json = serde_json::to_vec(meta)?;
    let mut body = Vec::with_capacity(4 + meta_json.len() + data.len());
    body.extend_from_slice(
        &u32::try_from(meta_json.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    body.extend_from_slice(&meta_json);
    body.extend_from_slice(data);
    let mut out = Vec::with_capacity(12 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

fn decode(path: &Path, bytes: &[u8]) -> std::io::Result<(SnapshotMeta, Vec<u8>)> {
    let bad = |what: &str| invalid(format!("snapshot {} is unreadable: {what}", path.display()));
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad("bad header"));
    }
    let sum = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let body = &bytes[12..];
    if crc32c::crc32c(body) != sum {
        return Err(bad("checksum mismatch"));
    }
    let meta_len = u32::from_le_bytes([body[0], body[1], body[2], body[3]]) as usize;
    if body.len() < 4 + meta_len {
        return Err(bad("metadata runs past the end"));
    }
    let meta: SnapshotMeta =
        serde_json::from_slice(&body[4..4 + meta_len]).map_err(|e| bad(&e.to_string()))?;
    Ok((meta, body[4 + meta_len..].to_vec()))
}

/// Why the state cannot be rebuilt: the newest snapshot is unreadable and
/// the log no longer reaches back to an older one (or to the start).
fn cannot_rebuild(
    unreadable: Option<(PathBuf, std::io::Error)>,
    log_purged_upto: Option<u64>,
    older: Option<(&PathBuf, &SnapshotMeta)>,
) -> std::io::Error {
    let purged = log_purged_upto.unwrap_or(0);
    let newest = match &unreadable {
        Some((path, e)) => format!("snapshot {} is unreadable ({e})", path.display()),
        None => "no newer snapshot is left".to_owned(),
    };
    let older = match older {
        Some((path, meta)) => format!(
            "past the older snapshot {} (up to entry {})",
            path.display(),
            meta.last_log_id.map_or(0, |l| l.index)
        ),
        None => "and no older snapshot is readable".to_owned(),
    };
    invalid(format!(
        "cannot rebuild the metastore state: {newest}, and the raft log was purged up to entry \
         {purged}, {older}, so the entries in between are gone. Restore that file from a backup, \
         or, in a cluster, empty this node's data directory and add it again so that it gets a \
         snapshot from the leader"
    ))
}

fn snapshot_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("snap-") && n.ends_with(".bin"))
        })
        .collect();
    files.sort();
    Ok(files)
}

impl StateMachineStore {
    /// Loads the newest readable snapshot in `dir`, if any.
    ///
    /// The log holds only the entries after `log_purged_upto`, so the state
    /// can be rebuilt only from a snapshot at or past that index (plus the
    /// log). When the newest snapshot is unreadable an older one is used only
    /// if the log still reaches back to it; otherwise the entries between the
    /// two are gone and this refuses, naming the unreadable file, rather than
    /// come up with a state that silently lacks them.
    #[allow(clippy::result_large_err)] // openraft's error type, returned as openraft expects
    pub(crate) fn open(
        dir: &Path,
        events: broadcast::Sender<MetaEvent>,
        log_purged_upto: Option<u64>,
    ) -> Result<StateMachineStore, StorageError> {
        std::fs::create_dir_all(dir).map_err(read_snap_err)?;
        let mut applied = Applied::default();
        let mut unreadable: Option<(PathBuf, std::io::Error)> = None;
        let covers = |meta: &SnapshotMeta| {
            log_purged_upto.is_none_or(|p| meta.last_log_id.is_some_and(|l| l.index >= p))
        };
        let mut found = false;
        for path in snapshot_files(dir).map_err(read_snap_err)?.iter().rev() {
            let loaded =
                std::fs::read(path)
                    .and_then(|b| decode(path, &b))
                    .and_then(|(meta, data)| {
                        let state: MetaState =
                            serde_json::from_slice(&data).map_err(|e| invalid(e.to_string()))?;
                        Ok((meta, state))
                    });
            match loaded {
                Ok((meta, _)) if !covers(&meta) => {
                    return Err(read_snap_err(cannot_rebuild(
                        unreadable,
                        log_purged_upto,
                        Some((path, &meta)),
                    )))
                }
                Ok((meta, state)) => {
                    tracing::info!(path = %path.display(), last = ?meta.last_log_id, "state machine loaded from snapshot");
                    applied = Applied {
                        state,
                        last_applied: meta.last_log_id,
                        membership: meta.last_membership,
                    };
                    found = true;
                    break;
                }
                Err(e) => {
                    tracing::error!(error = %e, "skipping unreadable snapshot");
                    // the newest unreadable one is the one to name
                    unreadable.get_or_insert((path.clone(), e));
                }
            }
        }
        if !found && log_purged_upto.is_some() {
            return Err(read_snap_err(cannot_rebuild(
                unreadable,
                log_purged_upto,
                None,
            )));
        }
        Ok(StateMachineStore {
            applied: Arc::new(RwLock::new(applied)),
            events,
            dir: dir.to_owned(),
            seq: Arc::new(AtomicU64::new(0)),
            #[cfg(test)]
            hooks: test_hooks::Hooks::default(),
        })
    }

    pub(crate) fn shared(&self) -> SharedState {
        self.applied.clone()
    }

    /// Writes a snapshot file and removes all but the newest few.
    async fn persist(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<(), StorageError> {
        let bytes = encode(meta, data).map_err(snap_err)?;
        let path = self.dir.join(file_name(meta));
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            fsutil::write_atomic(&path, &bytes)?;
            let files = snapshot_files(&dir)?;
            let newest = files.iter().position(|p| *p == path).unwrap_or(files.len());
            for old in files.iter().take(newest.saturating_sub(KEEP_OLDER)) {
                std::fs::remove_file(old)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| snap_err(std::io::Error::other(e.to_string())))?
        .map_err(snap_err)
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        // step 1: a cheap copy, and the log position it stands for
        let (meta, state) = {
            let a = self.applied.read();
            let n = self.seq.fetch_add(1, Ordering::Relaxed);
            let id = match a.last_applied {
                Some(l) => format!("{}.{}.{n}", l.leader_id.term, l.index),
                None => format!("0.0.{n}"),
            };
            let meta = SnapshotMeta {
                last_log_id: a.last_applied,
                last_membership: a.membership.clone(),
                snapshot_id: id,
            };
            (meta, a.state.clone())
        };
        // step 2: serialise without the lock, off the async workers
        let mut out = StateWriter::default();
        #[cfg(test)]
        {
            out.pause = self.hooks.take_mid_serialisation();
        }
        let data = tokio::task::spawn_blocking(move || {
            serde_json::to_writer(&mut out, &state).map(|()| out.bytes)
        })
        .await
        .map_err(|e| snap_err(std::io::Error::other(e.to_string())))?
        .map_err(snap_err)?;
        // step 3
        self.persist(&meta, &data).await?;
        tracing::debug!(last = ?meta.last_log_id, bytes = data.len(), "snapshot built");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let a = self.applied.read();
        Ok((a.last_applied, a.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ProposalResults>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut results = Vec::new();
        let mut events = Vec::new();
        {
            let mut a = self.applied.write();
            for entry in entries {
                a.last_applied = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Blank => results.push(ProposalResults::default()),
                    EntryPayload::Normal(proposal) => {
                        results.push(ProposalResults(
                            a.state.apply_proposal(proposal, &mut events),
                        ));
                    }
                    EntryPayload::Membership(m) => {
                        a.membership = StoredMembership::new(Some(entry.log_id), m);
                        results.push(ProposalResults::default());
                    }
                }
            }
        }
        for e in events {
            // no subscriber is not an error
            let _ = self.events.send(e);
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let state: MetaState = serde_json::from_slice(&data).map_err(read_snap_err)?;
        self.persist(meta, &data).await?;
        {
            let mut a = self.applied.write();
            *a = Applied {
                state,
                last_applied: meta.last_log_id,
                membership: meta.last_membership.clone(),
            };
        }
        tracing::info!(last = ?meta.last_log_id, "installed snapshot from the leader");
        let _ = self.events.send(MetaEvent::Resync);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let dir = self.dir.clone();
        let newest = tokio::task::spawn_blocking(
            move || -> std::io::Result<Option<(SnapshotMeta, Vec<u8>)>> {
                for path in snapshot_files(&dir)?.iter().rev() {
                    match std::fs::read(path).and_then(|b| decode(path, &b)) {
                        Ok(found) => return Ok(Some(found)),
                        Err(e) => tracing::error!(error = %e, "skipping unreadable snapshot"),
                    }
                }
                Ok(None)
            },
        )
        .await
        .map_err(|e| read_snap_err(std::io::Error::other(e.to_string())))?
        .map_err(read_snap_err)?;
        Ok(newest.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

#[cfg(test)]
#[path = "state_machine_tests.rs"]
mod tests;
