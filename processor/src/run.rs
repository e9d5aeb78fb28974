//! The processor's loop: restore the latest checkpoint (from the local
//! state store when it holds that one, else from object storage), then
//! fetch, decode, filter, aggregate, and every checkpoint interval hand the
//! windows closed and changed since the last committed checkpoint to an
//! upload task ([`crate::upload`]) while reading on, until told to stop (a
//! last checkpoint is taken then, and waited for).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::task::JoinHandle;

use crate::checkpoint::{CheckpointStore, Restored};
use crate::decode::{Columns, Decoder};
use crate::filter::Predicates;
use crate::live::Live;
use crate::native_source::Reader;
use crate::pipeline::{LateRecords, Pipeline, SinkKind};
use crate::sink::LateRow;
use crate::state::{self, StateStore};
use crate::stats::{Counts, Stats};
use crate::topic_sink::{self, TopicSink};
use crate::upload::{self, Ledger, Outcome, Target};
use crate::window::{WindowRow, Windows};

const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long a start waits for the broker to be reachable.
const CONNECT_FOR: Duration = Duration::from_secs(60);

/// How a run is watched.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Where to write counters and latency percentiles (see [`crate::stats`]).
    pub stats: Option<std::path::PathBuf>,
}

/// Counters the progress line reports.
#[derive(Default)]
struct Progress {
    records: u64,
    filtered: u64,
    records_at_last_line: u64,
    emitted: u64,
    checkpoints: u64,
    checkpoint_failures: u64,
}

/// One running pipeline.
struct Task {
    pipeline: Pipeline,
    target: Target,
    reader: Reader,
    decoder: Decoder,
    predicates: Predicates,
    windows: Windows,
    /// What the last committed checkpoint holds.
    ledger: Ledger,
    /// Windows closed since the last checkpoint (or the one in flight).
    pending: Vec<WindowRow>,
    /// Late records since the last checkpoint (when they are written).
    pending_late: Vec<LateRow>,
    progress: Progress,
    stats: Option<Stats>,
    /// With a topic sink, its transactional writer (with the upload task
    /// while a checkpoint is in flight).
    topic_sink: Option<TopicSink>,
    /// The checkpoint being uploaded.
    in_flight: Option<JoinHandle<Outcome>>,
    /// The live view, when the pipeline has one (shared by a worker's
    /// partitions).
    live: Option<Arc<Live>>,
    /// When the next early results are due (`window.early`, with a live
    /// view).
    next_early: Option<Instant>,
}

/// Runs `pipeline` over `only` these partitions (all when `None`),
/// publishing to `live` when given (else to the pipeline's own live view).
pub(crate) async fn run_scoped(
    pipeline: Pipeline,
    only: Option<Vec<i32>>,
    options: Options,
    live: Option<Arc<Live>>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    // a stop asked for while connecting (the broker may be down) ends the
    // run at once: nothing has been read, there is nothing to checkpoint
    let mut task = tokio::select! {
        () = &mut shutdown => return Ok(()),
        task = Task::start(pipeline, only) => task?,
    };
    task.stats = options.stats.map(Stats::new);
    task.live = live;
    task.next_early = task
        .pipeline
        .window
        .early
        .map(|every| Instant::now() + every);
    if task.live.is_none() {
        if let Some(view) = task.pipeline.live.clone() {
            task.live = Some(Arc::new(Live::start(&task.pipeline, &view.listen).await?));
        }
    }
    let interval = task.pipeline.checkpoint_interval;
    let mut next_checkpoint = Instant::now() + interval;
    let mut next_line = Instant::now() + PROGRESS_EVERY;
    let mut last_line = Instant::now();
    loop {
        let fetched = tokio::select! {
            () = &mut shutdown => break,
            fetched = task.reader.poll() => fetched?,
        };
        // Avro: the schemas these records name, waiting out an unreachable
        // registry; a stop meanwhile leaves the batch unread, for the last
        // checkpoint not to commit offsets past it
        if !fetched.is_empty() {
            let read_from = task.reader.positions().clone();
            tokio::select! {
                () = &mut shutdown => {
                    task.reader.set_positions(rewound(read_from, &fetched));
                    break;
                }
                () = task.decoder.prepare(&fetched) => {}
            }
        }
        let now = Instant::now();
        for f in fetched {
            let cols = task.decoder.decode(f.partition, &f.records);
            task.progress.records += f.records.len() as u64;
            let (cols, dropped) = task
                .predicates
                .apply(cols)
                .context("cannot apply the filters")?;
            task.progress.filtered += dropped as u64;
            if task.pipeline.window.late_records == LateRecords::Write {
                let mut late = Vec::new();
                task.windows
                    .add_keeping_late(f.partition, &cols, now, &mut late);
                task.keep_late(f.partition, &cols, &late, &f.records);
            } else {
                task.windows.add(f.partition, &cols, now);
            }
            if let Some(stats) = task.stats.as_mut() {
                stats.ingested(&f.records);
            }
            let position = task.reader.positions().get(&f.partition).copied();
            task.windows
                .set_caught_up(f.partition, position.is_some_and(|p| p >= f.high_watermark));
        }
        let closed = task.windows.advance(now);
        task.progress.emitted += closed.len() as u64;
        let counts = task.counts();
        if let Some(stats) = task.stats.as_mut() {
            stats.emitted(&closed);
            stats.maybe_write(counts, false);
        }
        if let Some(live) = task.live.as_ref() {
            live.publish(&closed);
            live.publish_early(&mut task.windows, &mut task.next_early, now);
            live.metrics.observe(
                task.pipeline.instance.as_deref().unwrap_or(""),
                crate::metrics::Observed {
                    counts,
                    open_windows: task.windows.open_windows(),
                    watermark: task.windows.watermark(),
                    lag: task.reader.lag(),
                    stats: task.stats.as_ref(),
                    now,
                },
            );
        }
        task.pending.extend(closed);
        if task.in_flight.as_ref().is_some_and(JoinHandle::is_finished) {
            task.finish_checkpoint().await?;
        }
        // an interval that comes while a checkpoint is in flight waits for it
        if now >= next_checkpoint && task.in_flight.is_none() {
            task.begin_checkpoint();
            next_checkpoint = Instant::now() + interval;
        }
        if now >= next_line {
            task.log_progress(now.duration_since(last_line));
            last_line = now;
            next_line = now + PROGRESS_EVERY;
        }
    }
    // the final counters, whenever the last periodic line was
    task.log_progress(last_line.elapsed());
    tracing::info!(pipeline = %task.pipeline.name, "stopping: taking a last checkpoint");
    // the one in flight, then a last one with what came since
    task.finish_checkpoint().await?;
    task.begin_checkpoint();
    let committed = task.finish_checkpoint().await?;
    let counts = task.counts();
    if let Some(stats) = task.stats.as_mut() {
        stats.maybe_write(counts, true);
    }
    if let (Some(live), Some(instance)) = (&task.live, &task.pipeline.instance) {
        // a worker's partition given up: its counters stay in the totals
        live.metrics.observe(
            instance,
            crate::metrics::Observed {
                counts,
                open_windows: 0,
                watermark: None,
                lag: std::iter::empty(),
                stats: None,
                now: Instant::now(),
            },
        );
        live.metrics.forget(instance);
    }
    if !committed {
        bail!("the last checkpoint failed; the next start resumes from the one before");
    }
    Ok(())
}

impl Drop for Task {
    /// A loop dropped mid-run (a distributed worker's partition whose lease
    /// is gone) must not go on writing: its upload in flight stops too.
    fn drop(&mut self) {
        if let Some(upload) = self.in_flight.take() {
            upload.abort();
        }
    }
}

impl Task {
    /// Restores the latest checkpoint (removing the data files and
    /// checkpoint objects it does not hold) and connects to the source,
    /// reading `only` these partitions when given.
    async fn start(pipeline: Pipeline, only: Option<Vec<i32>>) -> anyhow::Result<Task> {
        let store = CheckpointStore::open(&pipeline.sink.url)?;
        let latest = store.epochs().await?.last().copied();
        let latest_head = match latest {
            Some(e) => Some(store.head(e).await?),
            None => None,
        };
        if let Some(h) = &latest_head {
            if h.stored.topic() != pipeline.source.topic {
                bail!(
                    "{} holds the checkpoints of a pipeline reading topic {}, not {}; \
                     use another sink URL",
                    pipeline.sink.url,
                    h.stored.topic(),
                    pipeline.source.topic
                );
            }
        }
        let mut reader = connect(&pipeline).await?;
        let mut partitions = reader.partitions();
        if let Some(only) = only {
            if let Some(p) = only.iter().find(|p| !partitions.contains(p)) {
                bail!("topic {} has no partition {p}", pipeline.source.topic);
            }
            partitions = only;
        }
        let (topic_sink, resume) = match pipeline.sink.kind {
            SinkKind::Parquet => (None, latest),
            SinkKind::Topic => {
                // first: aborts a transaction a dead processor left open,
                // so its offsets no longer hold the group's back
                let sink = TopicSink::connect(&pipeline).await?;
                let committed = topic_sink::committed_epoch(&pipeline, &partitions).await?;
                (Some(sink), resume_epoch(latest, committed, &pipeline)?)
            }
        };
        let removed = store.remove_after(resume).await?;
        if !removed.is_empty() {
            tracing::info!(epochs = ?removed, "removed checkpoint objects no commit holds");
        }
        let head = match (resume, latest_head) {
            (None, _) => None,
            (Some(r), Some(h)) if h.stored.epoch() == r => Some(h),
            (Some(r), _) => Some(store.head(r).await?),
        };
        let state_dir = pipeline.state_dir();
        let state = StateStore::open(&state_dir)?;
        let (latest, local) = state::restore(&store, &state, head.as_ref(), &pipeline).await?;
        let (checkpoint, chain) = match latest {
            Some(Restored { checkpoint, chain }) => (Some(checkpoint), chain),
            None => (None, None),
        };
        let ledger = match &checkpoint {
            Some(c) => Ledger::restored(c, chain),
            None => Ledger::default(),
        };
        let committed: Vec<String> = ledger
            .files
            .iter()
            .chain(&ledger.late_files)
            .cloned()
            .collect();
        let removed = store.remove_uncommitted(&committed).await?;
        if !removed.is_empty() {
            tracing::info!(?removed, "removed data files no checkpoint committed");
        }
        let mut offsets = checkpoint
            .as_ref()
            .map(|c| c.offsets.clone())
            .unwrap_or_default();
        offsets.retain(|p, _| partitions.contains(p));
        let fresh: Vec<i32> = partitions
            .iter()
            .copied()
            .filter(|p| !offsets.contains_key(p))
            .collect();
        if !fresh.is_empty() {
            offsets.extend(reader.earliest(&fresh).await?);
        }
        reader.set_positions(offsets.clone());
        let mut windows = Windows::new(&pipeline, &partitions, Instant::now());
        if let Some(c) = &checkpoint {
            windows.restore(&c.windows);
        }
        let epoch = checkpoint.as_ref().map_or(0, |c| c.epoch);
        tracing::info!(
            pipeline = %pipeline.name,
            topic = %pipeline.source.topic,
            sink = %pipeline.sink.url,
            state = %state.path().display(),
            epoch,
            from_local_state = local,
            open_windows = windows.open_windows(),
            ?offsets,
            "{}",
            if checkpoint.is_some() { "resuming from the latest checkpoint" } else { "starting afresh" }
        );
        let pipeline_arc = Arc::new(pipeline.clone());
        Ok(Task {
            decoder: Decoder::new(&pipeline)?,
            predicates: Predicates::new(&pipeline),
            pipeline,
            target: Target {
                store,
                state: Arc::new(state),
                pipeline: pipeline_arc,
            },
            reader,
            windows,
            ledger,
            pending: Vec::new(),
            pending_late: Vec::new(),
            progress: Progress::default(),
            stats: None,
            live: None,
            next_early: None,
            topic_sink,
            in_flight: None,
        })
    }

    /// Hands what changed since the last committed checkpoint to an upload
    /// task; nothing when nothing changed (or a checkpoint is in flight).
    fn begin_checkpoint(&mut self) {
        if self.in_flight.is_some() {
            return;
        }
        let offsets = self.reader.positions().clone();
        let job = self.ledger.job(
            &self.pipeline,
            &mut self.windows,
            offsets,
            &mut self.pending,
            &mut self.pending_late,
        );
        match job {
            Ok(Some(job)) => {
                let target = self.target.clone();
                let sink = self.topic_sink.take();
                self.in_flight = Some(tokio::spawn(upload::upload(target, job, sink)));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(
                epoch = self.ledger.epoch + 1,
                "cannot encode a checkpoint, retrying at the next interval: {e:#}"
            ),
        }
    }

    /// Waits for the checkpoint in flight, if any, and takes its outcome:
    /// whether it committed (true with none in flight). A failed one is
    /// logged and its windows kept for the next.
    async fn finish_checkpoint(&mut self) -> anyhow::Result<bool> {
        let Some(handle) = self.in_flight.take() else {
            return Ok(true);
        };
        let Outcome {
            job,
            result,
            topic_sink,
        } = handle.await.context("the checkpoint upload task stopped")?;
        self.topic_sink = topic_sink;
        match result {
            Ok(chain) => {
                tracing::debug!(
                    epoch = job.epoch,
                    windows = job.rows.len(),
                    changed = job.delta.changed.len(),
                    removed = job.delta.removed.len(),
                    base = job.base.is_some(),
                    "checkpoint committed"
                );
                self.ledger.committed(job, chain);
                self.progress.checkpoints += 1;
                Ok(true)
            }
            Err(e) => {
                self.progress.checkpoint_failures += 1;
                tracing::warn!(
                    epoch = job.epoch,
                    "checkpoint failed, retrying at the next interval: {e:#}"
                );
                self.ledger.failed(
                    job,
                    &mut self.windows,
                    &mut self.pending,
                    &mut self.pending_late,
                );
                Ok(false)
            }
        }
    }

    /// Keeps the late rows of `cols` for the late output, with their
    /// records' values (found by offset among the fetched `records`).
    fn keep_late(
        &mut self,
        partition: i32,
        cols: &Columns,
        late: &[usize],
        records: &[kafka_protocol::records::Record],
    ) {
        for &i in late {
            let offset = cols.offsets.value(i);
            let value = records
                .binary_search_by_key(&offset, |r| r.offset)
                .ok()
                .and_then(|at| records.get(at))
                .and_then(|r| r.value.as_deref())
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            self.pending_late.push(LateRow {
                partition,
                offset,
                key: cols.keys.value(i).to_owned(),
                event_time: cols.event_times.value(i),
                value,
            });
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            records: self.progress.records,
            filtered: self.progress.filtered,
            late: self.windows.late,
            windows_emitted: self.progress.emitted,
            skipped: self.decoder.skipped(),
            checkpoints: self.progress.checkpoints,
            checkpoint_failures: self.progress.checkpoint_failures,
        }
    }

    fn log_progress(&mut self, since: Duration) {
        let p = &mut self.progress;
        let rate = (p.records - p.records_at_last_line) as f64 / since.as_secs_f64().max(0.001);
        p.records_at_last_line = p.records;
        tracing::info!(
            pipeline = %self.pipeline.name,
            records = p.records,
            records_per_s = rate.round() as u64,
            watermark = self.windows.watermark(),
            open_windows = self.windows.open_windows(),
            windows_emitted = p.emitted,
            checkpoints = p.checkpoints,
            epoch = self.ledger.epoch,
            late = self.windows.late,
            filtered = p.filtered,
            skipped = self.decoder.skipped(),
            "progress"
        );
    }
}

/// With a topic sink, the epoch to resume from: the latest checkpoint's,
/// or the one before it when the processor died between writing the
/// latest and committing its transaction (`committed`: the epoch the
/// group's offsets carry).
fn resume_epoch(
    latest: Option<u64>,
    committed: Option<u64>,
    pipeline: &Pipeline,
) -> anyhow::Result<Option<u64>> {
    match (latest, committed) {
        (None, None) => Ok(None),
        (Some(l), Some(c)) if l == c => Ok(latest),
        (Some(l), c) if c.unwrap_or(0) + 1 == l => {
            tracing::info!(
                checkpoint = l,
                "the latest checkpoint's transaction did not commit: resuming from the one before"
            );
            Ok(c)
        }
        (l, c) => bail!(
            "group {} committed epoch {c:?}, but the latest checkpoint under {} is {l:?}: \
             they belong to different runs; use another pipeline name or sink URL",
            topic_sink::group_of(pipeline),
            pipeline.sink.url
        ),
    }
}

/// Connects to the source, retrying an unreachable broker for a while.
pub(crate) async fn connect(pipeline: &Pipeline) -> anyhow::Result<Reader> {
    let deadline = Instant::now() + CONNECT_FOR;
    let mut pause = Duration::from_millis(200);
    loop {
        match Reader::connect(&pipeline.source).await {
            Ok(r) => return Ok(r),
            Err(e) if Instant::now() < deadline && is_unreachable(&e) => {
                tracing::warn!("{e:#}; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// `positions` with each fetched partition back at its first fetched
/// record: nothing of `fetched` counts as read.
fn rewound(
    mut positions: std::collections::BTreeMap<i32, i64>,
    fetched: &[crate::source::Fetched],
) -> std::collections::BTreeMap<i32, i64> {
    for f in fetched {
        if let Some(first) = f.records.first() {
            let at = positions.entry(f.partition).or_insert(first.offset);
            *at = (*at).min(first.offset);
        }
    }
    positions
}

fn is_unreachable(e: &anyhow::Error) -> bool {
    let text = format!("{e:#}");
    text.contains("cannot reach") || text.contains("closed the connection")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_sink_resumes_from_the_checkpoint_whose_transaction_committed() {
        let p = Pipeline::parse(
            r#"
name: t
source: {bootstrap: "b:9092", topic: t, format: json, event_time: ts, key: k}
window: {type: tumbling, size: 1s}
aggregates: [{op: count, as: n}]
sink: {type: topic, topic: out, url: "file:///tmp/x"}
"#,
        )
        .unwrap();
        assert_eq!(resume_epoch(None, None, &p).unwrap(), None);
        assert_eq!(resume_epoch(Some(7), Some(7), &p).unwrap(), Some(7));
        assert_eq!(resume_epoch(Some(7), Some(6), &p).unwrap(), Some(6));
        assert_eq!(resume_epoch(Some(1), None, &p).unwrap(), None);
        let e = resume_epoch(Some(7), Some(3), &p).unwrap_err();
        assert!(format!("{e}").contains("different runs"), "{e}");
        assert!(resume_epoch(None, Some(3), &p).is_err());
    }
}
