//! Incremental checkpoints, without IO: what a checkpoint object holds,
//! how a chain of them is applied, and when a full base is due.
//!
//! A committed state ([`Checkpoint`]) is a *base* (a full state, written
//! now and then) followed by *deltas*, each holding what changed since the
//! one before: the windows changed (their current figures) and removed
//! (closed, or merged into another session), the offsets, watermark and
//! partition clocks (small, so whole), and the data files added. Every
//! checkpoint writes one delta: its PUT is the commit point. A delta names
//! the base its chain starts from, so a restore reads exactly the objects
//! that make the state: that base and every delta after it, in order.
//!
//! A delta taken at a base's epoch holds no windows nor files (the base
//! written just before it holds them all).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::window::{WindowId, WindowRow, WindowsSnapshot};

/// A new base after this many deltas.
pub const MAX_DELTAS: u64 = 32;

/// One committed state of a pipeline, whole: what a base holds (and what
/// a checkpoint object held before checkpoints were incremental).
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

/// What changed between the checkpoint before `epoch` and `epoch`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub pipeline: String,
    pub topic: String,
    pub epoch: u64,
    /// The epoch of the base this chain starts from (`epoch` itself when a
    /// base was written with this delta).
    pub base: u64,
    /// Per partition, the next offset to read.
    pub offsets: BTreeMap<i32, i64>,
    pub watermark: Option<i64>,
    /// Per partition, the largest event time seen.
    pub max_event_time: BTreeMap<i32, i64>,
    /// Windows opened or changed, with their figures now.
    pub changed: Vec<WindowRow>,
    /// Windows no longer open.
    pub removed: Vec<WindowId>,
    /// Data files committed by this checkpoint.
    pub files: Vec<String>,
    /// Files of late records committed by this checkpoint.
    pub late_files: Vec<String>,
}

/// A checkpoint object `_checkpoints/<epoch>.json` as read: a delta, or a
/// whole checkpoint written before checkpoints were incremental.
#[derive(Clone, Debug, PartialEq)]
pub enum Stored {
    Delta(Delta),
    Whole(Checkpoint),
}

impl Stored {
    /// Reads a checkpoint object (not `serde(untagged)`: its buffering
    /// cannot read the JSON objects keyed by partition number).
    pub fn parse(bytes: &[u8]) -> Result<Stored, serde_json::Error> {
        match serde_json::from_slice::<Delta>(bytes) {
            Ok(d) => Ok(Stored::Delta(d)),
            Err(e) => match serde_json::from_slice::<Checkpoint>(bytes) {
                Ok(c) => Ok(Stored::Whole(c)),
                Err(_) => Err(e),
            },
        }
    }

    pub fn epoch(&self) -> u64 {
        match self {
            Stored::Delta(d) => d.epoch,
            Stored::Whole(c) => c.epoch,
        }
    }

    pub fn topic(&self) -> &str {
        match self {
            Stored::Delta(d) => &d.topic,
            Stored::Whole(c) => &c.topic,
        }
    }
}

/// A chain that does not hold together.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error(
        "delta {delta} follows epoch {state}, not the epoch before it: a checkpoint is missing"
    )]
    Gap { state: u64, delta: u64 },
    #[error("delta {epoch} belongs to pipeline {found}, not {expected}")]
    Pipeline {
        epoch: u64,
        found: String,
        expected: String,
    },
}

/// The chain the next checkpoint extends: how big it is decides when a
/// new base is due.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    /// The base's epoch.
    pub base: u64,
    /// Deltas committed after the base.
    pub deltas: u64,
    /// Their encoded size, in bytes.
    pub delta_bytes: u64,
    /// The base's encoded size, in bytes.
    pub base_bytes: u64,
}

impl Chain {
    /// Whether the checkpoint with a delta of `next_bytes` writes a base:
    /// with no chain to extend, after [`MAX_DELTAS`] deltas, or once the
    /// deltas would outweigh the base (a restore then reads less from a
    /// new base).
    pub fn base_due(chain: Option<&Chain>, next_bytes: u64) -> bool {
        match chain {
            None => true,
            Some(c) => {
                c.deltas + 1 > MAX_DELTAS || c.delta_bytes.saturating_add(next_bytes) > c.base_bytes
            }
        }
    }

    /// The chain after a committed delta of `bytes` (and a base of
    /// `base_bytes` at `epoch`, when one was written with it).
    pub fn after(chain: Option<Chain>, epoch: u64, bytes: u64, base_bytes: Option<u64>) -> Chain {
        match (chain, base_bytes) {
            (_, Some(base_bytes)) => Chain {
                base: epoch,
                deltas: 0,
                delta_bytes: 0,
                base_bytes,
            },
            (Some(c), None) => Chain {
                deltas: c.deltas + 1,
                delta_bytes: c.delta_bytes.saturating_add(bytes),
                ..c
            },
            // a delta without a chain is never written; count it as a base
            (None, None) => Chain {
                base: epoch,
                deltas: 0,
                delta_bytes: 0,
                base_bytes: bytes,
            },
        }
    }
}

/// `base` with `deltas` (the deltas right after it, in order) applied.
pub fn apply(base: Checkpoint, deltas: &[Delta]) -> Result<Checkpoint, ChainError> {
    let mut state = base;
    let mut open: BTreeMap<(String, i64), WindowRow> = std::mem::take(&mut state.windows.open)
        .into_iter()
        .map(|w| ((w.key.clone(), w.start), w))
        .collect();
    for d in deltas {
        if d.epoch != state.epoch + 1 {
            return Err(ChainError::Gap {
                state: state.epoch,
                delta: d.epoch,
            });
        }
        if d.pipeline != state.pipeline {
            return Err(ChainError::Pipeline {
                epoch: d.epoch,
                found: d.pipeline.clone(),
                expected: state.pipeline.clone(),
            });
        }
        for id in &d.removed {
            open.remove(&(id.key.clone(), id.start));
        }
        for w in &d.changed {
            open.insert((w.key.clone(), w.start), w.clone());
        }
        state.epoch = d.epoch;
        state.offsets = d.offsets.clone();
        state.windows.watermark = d.watermark;
        state.windows.max_event_time = d.max_event_time.clone();
        state.files.extend(d.files.iter().cloned());
        state.late_files.extend(d.late_files.iter().cloned());
    }
    state.windows.open = open.into_values().collect();
    Ok(state)
}
