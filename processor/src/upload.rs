//! The checkpoint in flight: its object-store writes run in a task of
//! their own while the loop goes on fetching and aggregating.
//!
//! Invariants, step by step:
//!
//! 1. The loop builds a [`Job`] with its [`Ledger`] (cheap: the windows changed since the last
//!    committed checkpoint, the closed windows and late records to write,
//!    the encoded delta, and a snapshot when a base is due) and hands it,
//!    with the topic sink, to [`upload`] in a spawned task. One job is in
//!    flight at a time: an interval that comes while one is waits for it.
//! 2. The task writes the data files, then the base (when due), then the
//!    delta: the commit point. Then it takes the checkpoint into the local
//!    state store, then (with a topic sink) commits the Kafka transaction:
//!    the checkpoint object is always committed before its transaction.
//! 3. The loop takes the [`Outcome`]. Committed: the epoch moves on and the
//!    job's rows are done with. Failed: the job's dirty windows, rows and
//!    late records go back to the loop, so the next checkpoint, under the
//!    same epoch, holds everything since the last committed one.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;

use crate::checkpoint::{data_file, late_file, Chain, Checkpoint, CheckpointStore, Delta};
use crate::pipeline::{Pipeline, SinkKind};
use crate::sink::{self, LateRow};
use crate::state::{Committed, StateStore};
use crate::topic_sink::TopicSink;
use crate::window::{Dirty, WindowRow, Windows, WindowsSnapshot};

/// What a job writes to and with.
#[derive(Clone)]
pub struct Target {
    pub store: CheckpointStore,
    pub state: Arc<StateStore>,
    pub pipeline: Arc<Pipeline>,
}

/// One checkpoint, ready to upload.
pub struct Job {
    pub epoch: u64,
    /// What changed since the last committed checkpoint (what the local
    /// store takes up, also when a base is written).
    pub delta: Delta,
    /// The delta object's bytes.
    pub delta_bytes: Bytes,
    /// The whole state, when a base is due.
    pub base: Option<Checkpoint>,
    /// The chain the job extends.
    pub chain: Option<Chain>,
    /// The windows closed since the last committed checkpoint.
    pub rows: Vec<WindowRow>,
    /// The late records since the last committed checkpoint (when written).
    pub late: Vec<LateRow>,
    /// The windows the delta covers.
    pub dirty: Dirty,
}

/// What became of a job.
pub struct Outcome {
    pub job: Job,
    /// The chain after the job, when it committed.
    pub result: anyhow::Result<Chain>,
    pub topic_sink: Option<TopicSink>,
}

/// What the last committed checkpoint holds, as the loop keeps it, and
/// how the next checkpoint's job is built from it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ledger {
    /// The last committed checkpoint's epoch (0: none yet).
    pub epoch: u64,
    /// The chain it ends (none: the next checkpoint writes a base).
    pub chain: Option<Chain>,
    /// The failed attempt at the next epoch wrote a base: so does the next.
    pub force_base: bool,
    /// Every committed data file, oldest first.
    pub files: Vec<String>,
    /// Every committed file of late records, oldest first.
    pub late_files: Vec<String>,
    /// The offsets it committed.
    pub offsets: BTreeMap<i32, i64>,
}

impl Ledger {
    /// The ledger of a restored checkpoint.
    pub fn restored(checkpoint: &Checkpoint, chain: Option<Chain>) -> Ledger {
        Ledger {
            epoch: checkpoint.epoch,
            chain,
            force_base: false,
            files: checkpoint.files.clone(),
            late_files: checkpoint.late_files.clone(),
            offsets: checkpoint.offsets.clone(),
        }
    }

    /// The next checkpoint's job, reading `offsets` next: the windows
    /// changed since the last committed checkpoint, and `pending` and
    /// `pending_late` (taken). None when nothing changed.
    pub fn job(
        &self,
        pipeline: &Pipeline,
        windows: &mut Windows,
        offsets: BTreeMap<i32, i64>,
        pending: &mut Vec<WindowRow>,
        pending_late: &mut Vec<LateRow>,
    ) -> anyhow::Result<Option<Job>> {
        if pending.is_empty()
            && pending_late.is_empty()
            && offsets == self.offsets
            && windows.is_clean()
            && self.epoch > 0
        {
            return Ok(None);
        }
        let epoch = self.epoch + 1;
        let dirty = windows.take_dirty();
        let (changed, removed) = windows.changes(&dirty);
        let mut files = Vec::new();
        if !pending.is_empty() && pipeline.sink.kind == SinkKind::Parquet {
            files.extend(sink::data_file_names(pipeline, &data_file(epoch), pending));
        }
        let mut late_files = Vec::new();
        if !pending_late.is_empty() {
            late_files.push(late_file(epoch));
        }
        let mut delta = Delta {
            pipeline: pipeline.name.clone(),
            topic: pipeline.source.topic.clone(),
            epoch,
            base: self.chain.map_or(epoch, |c| c.base),
            offsets,
            watermark: windows.watermark(),
            max_event_time: windows.max_event_times(),
            changed,
            removed,
            files,
            late_files,
        };
        let encoded = match encode_delta(&delta, self, windows) {
            Ok(e) => e,
            Err(e) => {
                windows.mark_dirty(dirty);
                return Err(e);
            }
        };
        let base = match encoded.base {
            Some(window_rows) => {
                delta.base = epoch;
                Some(Checkpoint {
                    pipeline: delta.pipeline.clone(),
                    topic: delta.topic.clone(),
                    epoch,
                    offsets: delta.offsets.clone(),
                    windows: window_rows,
                    files: self.files.iter().chain(&delta.files).cloned().collect(),
                    late_files: self
                        .late_files
                        .iter()
                        .chain(&delta.late_files)
                        .cloned()
                        .collect(),
                })
            }
            None => None,
        };
        Ok(Some(Job {
            epoch,
            delta,
            delta_bytes: encoded.delta,
            base,
            chain: self.chain,
            rows: std::mem::take(pending),
            late: std::mem::take(pending_late),
            dirty,
        }))
    }

    /// Takes up `job`, committed, ending `chain`.
    pub fn committed(&mut self, job: Job, chain: Chain) {
        self.epoch = job.epoch;
        self.chain = Some(chain);
        self.force_base = false;
        self.files.extend(job.delta.files);
        self.late_files.extend(job.delta.late_files);
        self.offsets = job.delta.offsets;
    }

    /// `job` failed: its windows, rows and late records go back to the
    /// loop (ahead of what came since), so the next checkpoint holds
    /// everything since the last committed one; when it wrote a base, the
    /// next attempt at its epoch writes one too, so a stale base of that
    /// epoch never stands in a chain.
    pub fn failed(
        &mut self,
        job: Job,
        windows: &mut Windows,
        pending: &mut Vec<WindowRow>,
        pending_late: &mut Vec<LateRow>,
    ) {
        windows.mark_dirty(job.dirty);
        let mut rows = job.rows;
        rows.append(pending);
        *pending = rows;
        let mut late = job.late;
        late.append(pending_late);
        *pending_late = late;
        self.force_base |= job.base.is_some();
    }
}

struct Encoded {
    delta: Bytes,
    /// The open windows, when a base is due.
    base: Option<WindowsSnapshot>,
}

/// Encodes `delta`; when a base is due, only its commit (the base holds
/// the windows and files) with a snapshot of `windows`.
fn encode_delta(delta: &Delta, ledger: &Ledger, windows: &Windows) -> anyhow::Result<Encoded> {
    let encoded = serde_json::to_vec(delta).context("cannot encode a checkpoint delta")?;
    if !ledger.force_base && !Chain::base_due(ledger.chain.as_ref(), encoded.len() as u64) {
        return Ok(Encoded {
            delta: Bytes::from(encoded),
            base: None,
        });
    }
    let bare = Delta {
        base: delta.epoch,
        changed: Vec::new(),
        removed: Vec::new(),
        files: Vec::new(),
        late_files: Vec::new(),
        ..delta.clone()
    };
    let bytes = serde_json::to_vec(&bare).context("cannot encode a checkpoint delta")?;
    Ok(Encoded {
        delta: Bytes::from(bytes),
        base: Some(windows.snapshot()),
    })
}

/// Runs `job` (see the module's invariants); never fails itself: the
/// outcome says.
pub async fn upload(target: Target, job: Job, mut topic_sink: Option<TopicSink>) -> Outcome {
    let result = commit(&target, &job, topic_sink.as_mut()).await;
    Outcome {
        job,
        result,
        topic_sink,
    }
}

async fn commit(
    target: &Target,
    job: &Job,
    topic_sink: Option<&mut TopicSink>,
) -> anyhow::Result<Chain> {
    let epoch = job.epoch;
    if !job.late.is_empty() {
        let bytes =
            sink::encode_late(&job.late).context("cannot encode the late records as Parquet")?;
        target.store.put_data(&late_file(epoch), bytes).await?;
    }
    if !job.delta.files.is_empty() {
        for (name, rows) in sink::data_files(&target.pipeline, &data_file(epoch), &job.rows) {
            let bytes = sink::encode(&target.pipeline, &rows)
                .context("cannot encode the closed windows as Parquet")?;
            target.store.put_data(&name, bytes).await?;
        }
    }
    let base = match &job.base {
        Some(b) => Some(Bytes::from(
            serde_json::to_vec(b).context("cannot encode a checkpoint base")?,
        )),
        None => None,
    };
    let base_len = base.as_ref().map(|b| b.len() as u64);
    target
        .store
        .commit(epoch, job.delta_bytes.clone(), base)
        .await?;
    let chain = Chain::after(job.chain, epoch, job.delta_bytes.len() as u64, base_len);
    let state = target.state.clone();
    let delta = job.delta.clone();
    let fingerprint = crate::checkpoint::fingerprint(&job.delta_bytes);
    let url = target.pipeline.sink.url.clone();
    tokio::task::spawn_blocking(move || {
        state.apply(&Committed {
            delta: &delta,
            sink: &url,
            fingerprint,
            chain,
        })
    })
    .await
    .context("the state store's writer stopped")??;
    // a topic sink's transaction commits after the checkpoint it belongs
    // to is written; the next start tells from the group's offsets
    // whether it did
    if let Some(sink) = topic_sink {
        sink.publish(epoch, &job.rows, &job.delta.offsets).await?;
    }
    Ok(chain)
}
