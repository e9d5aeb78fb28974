//! A sink task: read its share of the topics' partitions (partition `i` of
//! the sorted list goes to task `i % tasks`), hand the records to the
//! connector, and commit to the consumer group `connect-<name>` (as
//! Connect names its sinks' groups) the offsets the connector reports
//! durable. A task that starts, anywhere, reads from those committed
//! offsets: what was read but not yet durable is read again.
//!
//! With `errors.tolerance=all` a record the connector refuses is skipped,
//! and sent to `errors.deadletterqueue.topic.name` when one is set (with
//! Connect's `__connect.errors.*` headers); otherwise the task fails.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use sdk::{ConsumerConfig, Isolation, ProducerConfig, Record, StartAt};
use tokio::sync::watch;

use super::{Ended, TaskCtx};
use crate::config;
use crate::convert::RecordConverters;
use crate::plugins::Plugin;
use crate::record::SinkRecord;
use crate::sink::http::{BatchError, HttpSink, HttpSinkConfig};
use crate::sink::object_store::{ObjectStoreSinkConfig, ObjectStoreWriter, WriterStats};
use crate::sink::postgres::{PostgresSink, PostgresSinkConfig};

/// How often buffers are checked for files that are due, and the topics
/// for new partitions.
const TICK: Duration = Duration::from_secs(1);
const METADATA_EVERY: Duration = Duration::from_secs(30);

/// The consumer group of a sink connector.
pub fn group_of(connector: &str) -> String {
    format!("connect-{connector}")
}

fn index_and_count(config: &config::Config) -> (usize, usize) {
    let num = |k: &str, d: usize| config.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    (num("task.index", 0), num("task.count", 1).max(1))
}

/// This task's partitions: every `count`th of the topics' partitions,
/// sorted, from `index`.
async fn my_partitions(
    ctx: &TaskCtx,
    topics: &[String],
) -> Result<BTreeSet<(String, u32)>, String> {
    let mut names: Vec<&str> = Vec::with_capacity(topics.len());
    for t in topics {
        names.push(t.as_str());
    }
    let md = ctx
        .client
        .metadata(&names)
        .await
        .map_err(|e| format!("reading the metadata of {topics:?} failed: {e}"))?;
    let mut all = Vec::new();
    for t in topics {
        // a topic that does not exist yet is looked for again later
        if let Some(tm) = md.topic(t) {
            all.extend(tm.partitions.iter().map(|p| (t.clone(), p.index)));
        }
    }
    all.sort();
    let (index, count) = index_and_count(&ctx.config);
    Ok(all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % count == index)
        .map(|(_, tp)| tp)
        .collect())
}

pub(super) async fn run(
    ctx: &TaskCtx,
    plugin: Plugin,
    mut stop: watch::Receiver<bool>,
) -> Result<Ended, String> {
    let mut writer = Sink::open(plugin, &ctx.config)?;
    if let Sink::Postgres(p) = &mut writer {
        p.stop_on(stop.clone());
    }
    let converters = RecordConverters::for_sink(&ctx.config, &ctx.meta)?;
    let topics = config::topics(&ctx.config);
    let group = group_of(&ctx.connector);
    let tolerate = ctx
        .config
        .get("errors.tolerance")
        .is_some_and(|v| v == "all");
    let dlq = ctx
        .config
        .get("errors.deadletterqueue.topic.name")
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
    let dlq_producer = match &dlq {
        Some(_) => Some(
            ctx.client
                .producer(ProducerConfig::default())
                .map_err(|e| format!("the dead-letter producer could not be set up: {e}"))?,
        ),
        None => None,
    };

    let mut consumer = ctx
        .client
        .consumer(
            ConsumerConfig {
                group: Some(group.clone()),
                ..ConsumerConfig::default()
            }
            .isolation_level(Isolation::ReadCommitted),
        )
        .map_err(|e| format!("the consumer could not be set up: {e}"))?;
    let mut owned: BTreeSet<(String, u32)> = BTreeSet::new();
    let mut last_metadata: Option<Instant> = None;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut since_flush = 0usize;
    let mut written = writer.stats();
    loop {
        if last_metadata.is_none_or(|at| at.elapsed() >= METADATA_EVERY) {
            last_metadata = Some(Instant::now());
            let now_mine = my_partitions(ctx, &topics).await?;
            for (topic, partition) in now_mine.difference(&owned) {
                consumer
                    .assign(topic, Some(vec![*partition]), StartAt::Committed)
                    .await
                    .map_err(|e| format!("reading {topic}-{partition} failed: {e}"))?;
            }
            owned = now_mine;
        }
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
            next = consumer.next(), if !owned.is_empty() => {
                let Some(next) = next else { break };
                let r = match next {
                    Ok(r) => r,
                    Err(e) if e.is_retriable() => continue,
                    Err(e) => return Err(format!("reading the topics failed: {e}")),
                };
                let record = SinkRecord {
                    topic: r.topic.to_string(),
                    partition: i32::try_from(r.partition).unwrap_or(i32::MAX),
                    offset: r.offset,
                    timestamp_ms: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                };
                // keys and values through the registry reach the
                // connector as JSON; one that does not decode is the
                // record's error, as one the connector refuses
                let put = match converters.normalize(&record).await {
                    Ok(decoded) => writer.put(decoded),
                    Err(e) => Err(e),
                };
                if let Err(e) = put {
                    if !tolerate {
                        return Err(e);
                    }
                    ctx.metrics.sink_errors(1);
                    if let (Some(topic), Some(p)) = (&dlq, &dlq_producer) {
                        dead_letter(p, topic, record, &e).await?;
                    }
                }
                since_flush += 1;
                if since_flush < 1000 {
                    continue;
                }
            }
        }
        since_flush = 0;
        let (mut durable, failed) = writer.flush_due(Instant::now()).await?;
        if let Some(failed) = failed {
            if !tolerate {
                // what was delivered before it is still committed
                commit(ctx, &group, &durable).await;
                return Err(failed.message);
            }
            ctx.metrics.sink_errors(failed.records.len() as u64);
            for (i, record) in failed.records.iter().enumerate() {
                if let (Some(topic), Some(p)) = (&dlq, &dlq_producer) {
                    let reason = failed.reasons.get(i).unwrap_or(&failed.message);
                    dead_letter(p, topic, record.clone(), reason).await?;
                }
            }
            durable = writer.skip(&failed.records, durable);
        }
        let stats = writer.stats();
        ctx.metrics.sink_written(
            stats.records_written - written.records_written,
            stats.files_written - written.files_written,
            stats.bytes_written - written.bytes_written,
        );
        written = stats;
        commit(ctx, &group, &durable).await;
    }
    Ok(Ended::Stopped)
}

async fn commit(ctx: &TaskCtx, group: &str, durable: &[(String, i32, i64)]) {
    if durable.is_empty() {
        return;
    }
    let mut offsets: Vec<(&str, u32, i64)> = Vec::with_capacity(durable.len());
    for (t, p, o) in durable {
        if let Ok(p) = u32::try_from(*p) {
            offsets.push((t.as_str(), p, *o));
        }
    }
    if let Err(e) = ctx.client.commit_offsets(group, &offsets).await {
        // the files are written; the next owner rewrites the same files
        tracing::warn!(connector = %ctx.connector, task = ctx.task, error = %e, "connect: sink offsets not committed");
    }
}

async fn dead_letter(
    producer: &sdk::Producer,
    topic: &str,
    record: SinkRecord,
    reason: &str,
) -> Result<(), String> {
    let mut out = Record::new(record.value.unwrap_or_default())
        .with_header("__connect.errors.topic", record.topic.clone())
        .with_header("__connect.errors.partition", record.partition.to_string())
        .with_header("__connect.errors.offset", record.offset.to_string())
        .with_header("__connect.errors.exception.message", reason.to_owned());
    if let Some(k) = record.key {
        out = out.with_key(k);
    }
    producer.send(topic, out).await.map(|_| ()).map_err(|e| {
        format!("sending a failed record to the dead-letter topic {topic} failed: {e}")
    })
}

/// The connector a sink task drives.
enum Sink {
    Files(ObjectStoreWriter),
    Http(HttpSink),
    Postgres(Box<PostgresSink>),
}

impl Sink {
    fn open(plugin: Plugin, config: &config::Config) -> Result<Sink, String> {
        match plugin {
            Plugin::ObjectStoreSink => {
                let settings = ObjectStoreSinkConfig::parse(config).map_err(|e| e.to_string())?;
                Ok(Sink::Files(
                    ObjectStoreWriter::open(settings).map_err(|e| e.to_string())?,
                ))
            }
            Plugin::HttpSink => {
                let settings = HttpSinkConfig::parse(config).map_err(|p| {
                    p.into_iter()
                        .map(|(k, m)| format!("{k}: {m}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                })?;
                Ok(Sink::Http(HttpSink::new(settings)?))
            }
            Plugin::PostgresSink => {
                let settings = PostgresSinkConfig::parse(config).map_err(|p| {
                    p.into_iter()
                        .map(|(k, m)| format!("{k}: {m}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                })?;
                Ok(Sink::Postgres(Box::new(PostgresSink::new(settings))))
            }
            other => Err(format!("{} is not a sink connector", other.alias())),
        }
    }

    /// Buffers a record; the reason when the connector cannot take it.
    fn put(&mut self, record: SinkRecord) -> Result<(), String> {
        match self {
            Sink::Files(w) => w.put(record).map_err(|e| e.to_string()),
            Sink::Http(h) => {
                h.put(record);
                Ok(())
            }
            Sink::Postgres(p) => p.put(record),
        }
    }

    /// Writes what is due: the offsets to commit, and a batch that could
    /// not be delivered (HTTP) or written (PostgreSQL); `Err` fails the
    /// task.
    async fn flush_due(
        &mut self,
        now: Instant,
    ) -> Result<(Vec<(String, i32, i64)>, Option<BatchError>), String> {
        match self {
            Sink::Files(w) => w
                .flush_due(now)
                .await
                .map(|d| (d, None))
                .map_err(|e| format!("writing files failed: {e}")),
            Sink::Http(h) => Ok(h.flush_due(now).await),
            Sink::Postgres(p) => p.flush_due(now).await,
        }
    }

    /// Skips a batch that failed (errors.tolerance=all): the offsets to
    /// commit with it.
    fn skip(
        &mut self,
        records: &[SinkRecord],
        durable: Vec<(String, i32, i64)>,
    ) -> Vec<(String, i32, i64)> {
        match self {
            Sink::Files(_) => durable,
            Sink::Http(_) | Sink::Postgres(_) => {
                let mut all: std::collections::BTreeMap<(String, i32), i64> =
                    durable.into_iter().map(|(t, p, o)| ((t, p), o)).collect();
                for r in records {
                    let next = all.entry((r.topic.clone(), r.partition)).or_insert(0);
                    *next = (*next).max(r.offset + 1);
                }
                all.into_iter().map(|((t, p), o)| (t, p, o)).collect()
            }
        }
    }

    /// Records written, files (or requests) and bytes so far.
    fn stats(&self) -> WriterStats {
        match self {
            Sink::Files(w) => w.stats(),
            Sink::Http(h) => WriterStats {
                files_written: h.requests,
                records_written: h.records_sent,
                bytes_written: h.bytes_sent,
            },
            Sink::Postgres(p) => WriterStats {
                files_written: p.transactions,
                records_written: p.records_written,
                bytes_written: p.bytes_written,
            },
        }
    }
}
