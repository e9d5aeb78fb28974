//! The processor's loop: restore the latest checkpoint, then fetch, decode,
//! filter, aggregate, and every checkpoint interval write the windows closed since
//! the last checkpoint and commit a new one, until told to stop (a last
//! checkpoint is taken then).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::checkpoint::{data_file, late_file, Checkpoint, CheckpointStore};
use crate::decode::{Columns, Decoder};
use crate::filter::Predicates;
use crate::live::Live;
use crate::native_source::Reader;
use crate::pipeline::{LateRecords, Pipeline, SinkKind};
use crate::sink::{self, LateRow};
use crate::stats::{Counts, Stats};
use crate::topic_sink::{self, TopicSink};
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
    store: CheckpointStore,
    reader: Reader,
    decoder: Decoder,
    predicates: Predicates,
    windows: Windows,
    epoch: u64,
    files: Vec<String>,
    late_files: Vec<String>,
    /// Windows closed since the last checkpoint.
    pending: Vec<WindowRow>,
    /// Late records since the last checkpoint (when they are written).
    pending_late: Vec<LateRow>,
    /// The offsets the last checkpoint committed.
    committed_offsets: std::collections::BTreeMap<i32, i64>,
    progress: Progress,
    stats: Option<Stats>,
    /// With a topic sink, its transactional writer.
    topic_sink: Option<TopicSink>,
    /// The live view, when the pipeline has one (shared by a worker's
    /// partitions).
    live: Option<Arc<Live>>,
    /// When the next early results are due (`window.early`, with a live
    /// view).
    next_early: Option<Instant>,
}

/// Runs `pipeline` until `shutdown` completes, then takes a last
/// checkpoint. An error only for what the processor cannot go on from.
/// A pipeline with `distribution` runs as one of its workers
/// ([`crate::distribute`]).
pub async fn run(
    pipeline: Pipeline,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    if pipeline.distribution.is_some() {
        return crate::distribute::run(pipeline, options, shutdown).await;
    }
    run_scoped(pipeline, None, options, None, shutdown).await
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
        if now >= next_checkpoint {
            task.checkpoint().await;
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
    let committed = task.checkpoint().await;
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

impl Task {
    /// Restores the latest checkpoint (removing data files it does not
    /// list) and connects to the source, reading `only` these partitions
    /// when given.
    async fn start(pipeline: Pipeline, only: Option<Vec<i32>>) -> anyhow::Result<Task> {
        let store = CheckpointStore::open(&pipeline.sink.url)?;
        let mut latest = store.latest().await?;
        if let Some(c) = &latest {
            if c.topic != pipeline.source.topic {
                bail!(
                    "{} holds the checkpoints of a pipeline reading topic {}, not {}; \
                     use another sink URL",
                    pipeline.sink.url,
                    c.topic,
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
        let topic_sink = match pipeline.sink.kind {
            SinkKind::Parquet => None,
            SinkKind::Topic => {
                // first: aborts a transaction a dead processor left open,
                // so its offsets no longer hold the group's back
                let sink = TopicSink::connect(&pipeline).await?;
                let committed = topic_sink::committed_epoch(&pipeline, &partitions).await?;
                latest = committed_checkpoint(&store, latest, committed, &pipeline).await?;
                Some(sink)
            }
        };
        let files = latest.as_ref().map(|c| c.files.clone()).unwrap_or_default();
        let late_files = latest
            .as_ref()
            .map(|c| c.late_files.clone())
            .unwrap_or_default();
        let committed: Vec<String> = files.iter().chain(&late_files).cloned().collect();
        let removed = store.remove_uncommitted(&committed).await?;
        if !removed.is_empty() {
            tracing::info!(?removed, "removed data files no checkpoint committed");
        }
        let mut offsets = latest
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
        if let Some(c) = &latest {
            windows.restore(&c.windows);
        }
        let epoch = latest.as_ref().map_or(0, |c| c.epoch);
        tracing::info!(
            pipeline = %pipeline.name,
            topic = %pipeline.source.topic,
            sink = %pipeline.sink.url,
            epoch,
            open_windows = windows.open_windows(),
            ?offsets,
            "{}",
            if latest.is_some() { "resuming from the latest checkpoint" } else { "starting afresh" }
        );
        Ok(Task {
            decoder: Decoder::new(&pipeline)?,
            predicates: Predicates::new(&pipeline),
            pipeline,
            store,
            reader,
            windows,
            epoch,
            files,
            late_files,
            pending: Vec::new(),
            pending_late: Vec::new(),
            committed_offsets: latest.map(|c| c.offsets).unwrap_or_default(),
            progress: Progress::default(),
            stats: None,
            live: None,
            next_early: None,
            topic_sink,
        })
    }

    /// Writes the windows closed since the last checkpoint and commits a
    /// checkpoint; nothing when nothing changed. A failure is logged and
    /// retried at the next interval (false).
    async fn checkpoint(&mut self) -> bool {
        let offsets = self.reader.positions().clone();
        if self.pending.is_empty()
            && self.pending_late.is_empty()
            && offsets == self.committed_offsets
            && self.epoch > 0
        {
            return true;
        }
        let epoch = self.epoch + 1;
        let mut files = self.files.clone();
        let mut late_files = self.late_files.clone();
        let result = async {
            if !self.pending_late.is_empty() {
                let name = late_file(epoch);
                let bytes = sink::encode_late(&self.pending_late)
                    .context("cannot encode the late records as Parquet")?;
                self.store.put_data(&name, bytes).await?;
                late_files.push(name);
            }
            if !self.pending.is_empty() && self.topic_sink.is_none() {
                let name = data_file(epoch);
                let bytes = sink::encode(&self.pipeline, &self.pending)
                    .context("cannot encode the closed windows as Parquet")?;
                self.store.put_data(&name, bytes).await?;
                files.push(name);
            }
            let checkpoint = Checkpoint {
                pipeline: self.pipeline.name.clone(),
                topic: self.pipeline.source.topic.clone(),
                epoch,
                offsets: offsets.clone(),
                windows: self.windows.snapshot(),
                files: files.clone(),
                late_files: late_files.clone(),
            };
            self.store.commit(&checkpoint).await?;
            // a topic sink's transaction commits after the checkpoint it
            // belongs to is written; the next start tells from the group's
            // offsets whether it did
            if let Some(sink) = self.topic_sink.as_mut() {
                sink.publish(epoch, &self.pending, &offsets).await?;
            }
            Ok::<(), anyhow::Error>(())
        }
        .await;
        match result {
            Ok(()) => {
                tracing::debug!(epoch, windows = self.pending.len(), "checkpoint committed");
                self.epoch = epoch;
                self.files = files;
                self.late_files = late_files;
                self.pending.clear();
                self.pending_late.clear();
                self.committed_offsets = offsets;
                self.progress.checkpoints += 1;
                true
            }
            Err(e) => {
                self.progress.checkpoint_failures += 1;
                tracing::warn!(
                    epoch,
                    "checkpoint failed, retrying at the next interval: {e:#}"
                );
                false
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
            epoch = self.epoch,
            late = self.windows.late,
            filtered = p.filtered,
            skipped = self.decoder.skipped(),
            "progress"
        );
    }
}

/// With a topic sink, the checkpoint whose transaction committed: the
/// latest, or the one before it when the processor died between writing
/// the latest and committing its transaction.
async fn committed_checkpoint(
    store: &CheckpointStore,
    latest: Option<Checkpoint>,
    committed: Option<u64>,
    pipeline: &Pipeline,
) -> anyhow::Result<Option<Checkpoint>> {
    let latest_epoch = latest.as_ref().map(|c| c.epoch);
    match (latest_epoch, committed) {
        (None, None) => Ok(None),
        (Some(l), Some(c)) if l == c => Ok(latest),
        (Some(l), c) if c.unwrap_or(0) + 1 == l => {
            tracing::info!(
                checkpoint = l,
                "the latest checkpoint's transaction did not commit: resuming from the one before"
            );
            match c {
                Some(c) => store.get(c).await.map(Some),
                None => Ok(None),
            }
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

/// [`run`] until SIGTERM or SIGINT.
pub async fn run_until_signalled(pipeline: Pipeline, options: Options) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch for SIGINT")?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    run(pipeline, options, shutdown).await
}
