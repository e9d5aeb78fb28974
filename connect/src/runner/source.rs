//! A source task: make records, produce them (idempotent, acks=all), and
//! once all of a batch is acknowledged commit the source offset to the
//! metastore under the task's generation. A task restarted anywhere
//! resumes from the last committed offset: records are never skipped, and
//! only those acknowledged but not yet committed are made again.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use metastore::connect::{ConnectCommand, ConnectOutput};
use sdk::{ProducerConfig, Record};
use tokio::sync::watch;

use super::{pause_or_stop, Ended, TaskCtx};
use crate::convert::RecordConverters;
use crate::plugins::Plugin;
use crate::source::datagen::Datagen;
use crate::source::http::HttpSource;

/// How often acknowledged offsets are committed.
const COMMIT_EVERY: Duration = Duration::from_secs(1);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn problems(p: Vec<(String, String)>) -> String {
    p.into_iter()
        .map(|(k, m)| format!("{k}: {m}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The connector a source task drives.
enum Source {
    Datagen(Datagen),
    Http(Box<HttpSource>),
}

impl Source {
    fn open(plugin: Plugin, config: &crate::config::Config) -> Result<Source, String> {
        match plugin {
            Plugin::Datagen => Ok(Source::Datagen(Datagen::new(config).map_err(problems)?)),
            Plugin::HttpSource => Ok(Source::Http(Box::new(HttpSource::new(config)?))),
            other => Err(format!("{} is not a source connector", other.alias())),
        }
    }

    fn topic(&self) -> String {
        match self {
            Source::Datagen(g) => g.topic().to_owned(),
            Source::Http(h) => h.topic().to_owned(),
        }
    }

    fn partition(&self) -> String {
        match self {
            Source::Datagen(g) => g.partition(),
            Source::Http(h) => h.partition(),
        }
    }

    fn resume(&mut self, offset: &str) -> Result<(), String> {
        match self {
            Source::Datagen(g) => g.resume(offset),
            Source::Http(h) => h.resume(offset),
        }
    }

    /// Whether the source has nothing more to make (Datagen's max.records).
    fn done(&self) -> bool {
        match self {
            Source::Datagen(g) => g.done(),
            Source::Http(_) => false,
        }
    }

    fn pause(&self) -> Duration {
        match self {
            Source::Datagen(g) => g.pause(),
            Source::Http(h) => h.pause(),
        }
    }

    /// The next records (key, value) and the offset once they are
    /// acknowledged.
    async fn poll(&mut self) -> Result<(Vec<(Option<Bytes>, Bytes)>, Option<String>), String> {
        match self {
            Source::Datagen(g) => {
                let batch = g.poll(now_ms());
                let offset = batch.last().map(|r| Datagen::offset(r.next));
                Ok((
                    batch.into_iter().map(|r| (Some(r.key), r.value)).collect(),
                    offset,
                ))
            }
            Source::Http(h) => {
                let polled = h.poll().await?;
                Ok((polled.records, polled.offset))
            }
        }
    }
}

pub(super) async fn run(
    ctx: &TaskCtx,
    plugin: Plugin,
    mut stop: watch::Receiver<bool>,
) -> Result<Ended, String> {
    let mut source = Source::open(plugin, &ctx.config)?;
    let partition = source.partition();
    let committed = ctx.meta.read(|s| {
        s.connect()
            .connector(&ctx.connector)
            .and_then(|c| c.offsets.get(&partition).cloned())
    });
    if let Some(offset) = committed {
        if let Err(e) = source.resume(&offset) {
            tracing::warn!(connector = %ctx.connector, task = ctx.task, error = %e, "connect: starting from the beginning");
        }
    }
    let producer = ctx
        .client
        .producer(ProducerConfig::default())
        .map_err(|e| format!("the producer could not be set up: {e}"))?;
    let topic = source.topic();
    let converters = RecordConverters::for_source(&ctx.config, &ctx.registry).await?;
    let mut acknowledged: Option<String> = None;
    let mut last_commit = Instant::now();
    loop {
        if *stop.borrow() {
            break;
        }
        if source.done() {
            if pause_or_stop(&mut stop, Duration::from_secs(1)).await {
                break;
            }
            continue;
        }
        let (batch, offset) = source.poll().await?;
        if !batch.is_empty() {
            let count = batch.len() as u64;
            let mut written = Vec::with_capacity(batch.len());
            for (key, value) in batch {
                written.push(converters.encode(&topic, key, value).await?);
            }
            let batch = written;
            let deliveries: Vec<_> = batch
                .into_iter()
                .map(|(key, value)| {
                    let record = Record::new(value);
                    let record = match key {
                        Some(k) => record.with_key(k),
                        None => record,
                    };
                    producer.send(&topic, record)
                })
                .collect();
            for d in deliveries {
                d.await
                    .map_err(|e| format!("producing to {topic} failed: {e}"))?;
            }
            ctx.metrics.source_records(count);
        }
        if offset.is_some() {
            acknowledged = offset;
        }
        // committed at most once a second (Connect's offset.flush.interval.ms),
        // when the task is done, and when it stops
        if source.done() || last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            if !commit(ctx, &partition, acknowledged.take()).await {
                return Ok(Ended::Stopped);
            }
        }
        if pause_or_stop(&mut stop, source.pause()).await {
            break;
        }
    }
    commit(ctx, &partition, acknowledged).await;
    Ok(Ended::Stopped)
}

/// Commits the offset after the last acknowledged record; false when a
/// newer generation runs (or the connector stopped): its worker goes on
/// from the offsets committed so far, and this task ends.
async fn commit(ctx: &TaskCtx, partition: &str, offset: Option<String>) -> bool {
    let Some(offset) = offset else { return true };
    let command = ConnectCommand::CommitOffsets {
        name: ctx.connector.clone(),
        generation: Some(ctx.generation),
        offsets: vec![(partition.to_owned(), Some(offset))],
    };
    match ctx.meta.connect_command(command).await {
        Ok(ConnectOutput::Stale) => false,
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(connector = %ctx.connector, task = ctx.task, error = %e, "connect: source offsets not committed (the records may be made again)");
            true
        }
    }
}
