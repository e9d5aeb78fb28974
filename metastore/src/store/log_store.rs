//! [`LogStore`]: openraft's log storage over the [`Wal`], with group commit.
//!
//! Entries live in memory (from the last purge to the tail) for the
//! replication tasks to read, and on disk in the WAL. All disk writes go,
//! in order, through one writer thread. The thread takes everything queued,
//! writes it, issues one `fdatasync`, and only then reports the appends as
//! flushed, so concurrent writes share an fsync instead of paying one each.
//! openraft counts the leader's own vote for an entry only after that report,
//! so a write is acknowledged only once it is on disk.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::fsutil;
use super::wal::Wal;
use crate::raft_types::{Entry, LogId, StorageError, TypeConfig, Vote};

const VOTE_FILE: &str = "vote.json";
const PURGED_FILE: &str = "purged.json";
/// Most operations one writer round takes before it fsyncs.
const MAX_GROUP: usize = 4096;

#[derive(Default)]
struct Cache {
    entries: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
    committed: Option<LogId>,
    vote: Option<Vote>,
}

enum Op {
    Append {
        records: Vec<(u64, Vec<u8>)>,
        done: LogFlushed<TypeConfig>,
    },
    Committed {
        payload: Vec<u8>,
    },
    Truncate {
        since: u64,
        done: oneshot::Sender<io::Result<()>>,
    },
    Purge {
        upto: u64,
        marker: Vec<u8>,
        done: oneshot::Sender<io::Result<()>>,
    },
    Vote {
        payload: Vec<u8>,
        done: oneshot::Sender<io::Result<()>>,
    },
}

/// Signals when the writer thread has closed its files.
pub(crate) type WriterExit = oneshot::Receiver<()>;

/// openraft's log storage for one node.
pub(crate) struct LogStore {
    cache: Arc<Mutex<Cache>>,
    tx: mpsc::Sender<Op>,
}

/// Read handle used by replication tasks.
#[derive(Clone)]
pub(crate) struct LogReader {
    cache: Arc<Mutex<Cache>>,
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(&e).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

fn gone() -> StorageError {
    write_err(io::Error::other("the raft log writer has stopped"))
}

impl LogStore {
    /// The last entry purged from the head of the log: the log holds only
    /// the entries after it.
    pub(crate) fn last_purged(&self) -> Option<LogId> {
        self.cache.lock().last_purged
    }

    /// Opens the log in `dir` (creating it), recovering what the last run left.
    #[allow(clippy::result_large_err)] // openraft's error type, returned as openraft expects
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
    ) -> Result<(LogStore, WriterExit), StorageError> {
        let purged: Option<LogId> =
            match fsutil::read_optional(&dir.join(PURGED_FILE)).map_err(read_err)? {
                Some(b) => serde_json::from_slice(&b).map_err(read_err)?,
                None => None,
            };
        let vote: Option<Vote> =
            match fsutil::read_optional(&dir.join(VOTE_FILE)).map_err(read_err)? {
                Some(b) => Some(
                    serde_json::from_slice(&b)
                        .map_err(|e| StorageError::from(StorageIOError::read_vote(&e)))?,
                ),
                None => None,
            };
        let (wal, recovered) =
            Wal::open(dir, segment_bytes, purged.map(|p| p.index)).map_err(read_err)?;
        let mut entries = BTreeMap::new();
        for (index, payload) in recovered.entries {
            let entry: Entry = serde_json::from_slice(&payload).map_err(read_err)?;
            if entry.log_id.index != index {
                return Err(read_err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("raft log record {index} holds entry {}", entry.log_id.index),
                )));
            }
            entries.insert(index, entry);
        }
        let last_index = entries
            .keys()
            .next_back()
            .copied()
            .or(purged.map(|p| p.index));
        let committed: Option<LogId> = match recovered.committed {
            Some(b) => serde_json::from_slice(&b).map_err(read_err)?,
            None => None,
        };
        // the hint is written without fsync: never trust it past what the log holds
        let committed = committed
            .filter(|c| last_index.is_some_and(|l| c.index <= l))
            .or(purged);
        tracing::info!(
            dir = %dir.display(),
            entries = entries.len(),
            purged = ?purged.map(|p| p.index),
            committed = ?committed.map(|c| c.index),
            torn_bytes = recovered.truncated_bytes,
            "raft log recovered"
        );
        let cache = Cache {
            entries,
            last_purged: purged,
            committed,
            vote,
        };
        let (tx, rx) = mpsc::channel();
        let (exit_tx, exit_rx) = oneshot::channel();
        let dir = dir.to_owned();
        std::thread::Builder::new()
            .name("meta-wal".into())
            .spawn(move || {
                writer_loop(wal, dir, rx);
                let _ = exit_tx.send(());
            })
            .map_err(write_err)?;
        Ok((
            LogStore {
                cache: Arc::new(Mutex::new(cache)),
                tx,
            },
            exit_rx,
        ))
    }

    async fn call(&self, op: impl FnOnce(oneshot::Sender<io::Result<()>>) -> Op) -> io::Result<()> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(op(done))
            .map_err(|_| io::Error::other("the raft log writer has stopped"))?;
        wait.await
            .map_err(|_| io::Error::other("the raft log writer has stopped"))?
    }
}

fn writer_loop(mut wal: Wal, dir: PathBuf, rx: mpsc::Receiver<Op>) {
    // After a failed write the log's state on disk is unknown: refuse everything.
    let mut poisoned: Option<String> = None;
    while let Ok(first) = rx.recv() {
        let mut ops = vec![first];
        while ops.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        let mut flushed = Vec::new();
        let mut replies = Vec::new();
        let mut result: io::Result<()> = match &poisoned {
            Some(msg) => Err(io::Error::other(msg.clone())),
            None => Ok(()),
        };
        for op in ops {
            match op {
                Op::Append { records, done } => {
                    if result.is_ok() {
                        result = records
                            .iter()
                            .try_for_each(|(i, p)| wal.append_entry(*i, p));
                    }
                    flushed.push(done);
                }
                Op::Committed { payload } => {
                    if result.is_ok() {
                        result = wal.append_committed(&payload);
                    }
                }
                Op::Truncate { since, done } => {
                    if result.is_ok() {
                        result = wal.truncate_from(since);
                    }
                    replies.push(done);
                }
                Op::Purge { upto, marker, done } => {
                    if result.is_ok() {
                        result = wal
                            .sync()
                            .and_then(|_| fsutil::write_atomic(&dir.join(PURGED_FILE), &marker))
                            .and_then(|_| wal.remove_segments_upto(upto));
                    }
                    replies.push(done);
                }
                Op::Vote { payload, done } => {
                    if result.is_ok() {
                        result = fsutil::write_atomic(&dir.join(VOTE_FILE), &payload);
                    }
                    replies.push(done);
                }
            }
        }
        if result.is_ok() {
            result = wal.sync();
        }
        if let Err(e) = &result {
            if poisoned.is_none() {
                tracing::error!(error = %e, "raft log write failed; this node stops accepting writes");
                poisoned = Some(format!("raft log write failed earlier: {e}"));
            }
        }
        let outcome = || match &result {
            Ok(()) => Ok(()),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        };
        for done in flushed {
            done.log_io_completed(outcome());
        }
        for done in replies {
            let _ = done.send(outcome());
        }
    }
}

fn read_range<RB: RangeBounds<u64>>(cache: &Mutex<Cache>, range: RB) -> Vec<Entry> {
    cache
        .lock()
        .entries
        .range(range)
        .map(|(_, e)| e.clone())
        .collect()
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(read_range(&self.cache, range))
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(read_range(&self.cache, range))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let c = self.cache.lock();
        let last = c
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(c.last_purged);
        Ok(LogState {
            last_purged_log_id: c.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        LogReader {
            cache: self.cache.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let payload = serde_json::to_vec(vote)
            .map_err(|e| StorageError::from(StorageIOError::write_vote(&e)))?;
        self.call(|done| Op::Vote { payload, done })
            .await
            .map_err(|e| StorageError::from(StorageIOError::write_vote(&e)))?;
        self.cache.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.cache.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let payload = serde_json::to_vec(&committed).map_err(write_err)?;
        self.cache.lock().committed = committed;
        self.tx.send(Op::Committed { payload }).map_err(|_| gone())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.cache.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut records = Vec::new();
        {
            let mut c = self.cache.lock();
            for e in entries {
                let payload = serde_json::to_vec(&e).map_err(write_err)?;
                records.push((e.log_id.index, payload));
                c.entries.insert(e.log_id.index, e);
            }
        }
        self.tx
            .send(Op::Append {
                records,
                done: callback,
            })
            .map_err(|_| gone())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        drop(self.cache.lock().entries.split_off(&log_id.index));
        self.call(|done| Op::Truncate {
            since: log_id.index,
            done,
        })
        .await
        .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let marker = serde_json::to_vec(&Some(log_id)).map_err(write_err)?;
        {
            let mut c = self.cache.lock();
            let keep = c.entries.split_off(&(log_id.index + 1));
            c.entries = keep;
            c.last_purged = Some(log_id);
        }
        self.call(|done| Op::Purge {
            upto: log_id.index,
            marker,
            done,
        })
        .await
        .map_err(write_err)
    }
}
