//! A source task: make records, produce them (idempotent, acks=all), and
//! once all of a batch is acknowledged commit the source offsets to the
//! metastore under the task's generation. A task has one source partition
//! or several (the PostgreSQL source: one per table), each with its own
//! offset, and its records may go to several topics (each record names
//! its own). A task restarted anywhere resumes every partition from its
//! last committed offset: records are never skipped, and only those
//! acknowledged but not yet committed are made again.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use metastore::connect::{ConnectCommand, ConnectOutput};
use sdk::{ProducerConfig, Record};
use tokio::sync::watch;

use super::source_txn::{self, TxnDelivery};
use super::{pause_or_stop, Ended, TaskCtx};
use crate::convert::RecordConverters;
use crate::plugins::Plugin;
use crate::source::datagen::Datagen;
use crate::source::http::HttpSource;
use crate::source::postgres::PostgresSource;
use crate::source::{Polled, Produced};

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
    Postgres(Box<PostgresSource>),
}

impl Source {
    fn open(plugin: Plugin, config: &crate::config::Config) -> Result<Source, String> {
        match plugin {
            Plugin::Datagen => Ok(Source::Datagen(Datagen::new(config).map_err(problems)?)),
            Plugin::HttpSource => Ok(Source::Http(Box::new(HttpSource::new(config)?))),
            Plugin::PostgresSource => Ok(Source::Postgres(Box::new(
                PostgresSource::new(config).map_err(problems)?,
            ))),
            other => Err(format!("{} is not a source connector", other.alias())),
        }
    }

    /// The source partitions this task's offsets are kept under.
    fn partitions(&self) -> Vec<String> {
        match self {
            Source::Datagen(g) => vec![g.partition()],
            Source::Http(h) => vec![h.partition()],
            Source::Postgres(p) => p.partitions(),
        }
    }

    fn resume(&mut self, partition: &str, offset: &str) -> Result<(), String> {
        match self {
            Source::Datagen(g) => g.resume(offset),
            Source::Http(h) => h.resume(offset),
            Source::Postgres(p) => p.resume(partition, offset),
        }
    }

    /// Whether the source has nothing more to make (Datagen's max.records).
    fn done(&self) -> bool {
        match self {
            Source::Datagen(g) => g.done(),
            Source::Http(_) | Source::Postgres(_) => false,
        }
    }

    fn pause(&self) -> Duration {
        match self {
            Source::Datagen(g) => g.pause(),
            Source::Http(h) => h.pause(),
            Source::Postgres(p) => p.pause(),
        }
    }

    /// The next records and the offsets once they are acknowledged.
    async fn poll(&mut self) -> Result<Polled, String> {
        match self {
            Source::Datagen(g) => {
                let batch = g.poll(now_ms());
                let offsets = batch
                    .last()
                    .map(|r| vec![(g.partition(), Datagen::offset(r.next))])
                    .unwrap_or_default();
                let topic = g.topic().to_owned();
                Ok(Polled {
                    records: batch
                        .into_iter()
                        .map(|r| Produced {
                            topic: topic.clone(),
                            key: Some(r.key),
                            value: r.value,
                        })
                        .collect(),
                    offsets,
                })
            }
            Source::Http(h) => {
                let polled = h.poll().await?;
                let topic = h.topic().to_owned();
                Ok(Polled {
                    records: polled
                        .records
                        .into_iter()
                        .map(|(key, value)| Produced {
                            topic: topic.clone(),
                            key,
                            value,
                        })
                        .collect(),
                    offsets: polled
                        .offset
                        .map(|o| vec![(h.partition(), o)])
                        .unwrap_or_default(),
                })
            }
            Source::Postgres(p) => p.poll().await,
        }
    }
}

pub(super) async fn run(
    ctx: &TaskCtx,
    plugin: Plugin,
    mut stop: watch::Receiver<bool>,
) -> Result<Ended, String> {
    let mut source = Source::open(plugin, &ctx.config)?;
    let partitions = source.partitions();
    // exactly-once: the transactional id is taken over (ending the last
    // instance's transaction, its offsets applied if it committed) before
    // the offsets to resume from are read
    let txn = if source_txn::required(&ctx.config) {
        Some(TxnDelivery::open(ctx).await?)
    } else {
        None
    };
    let committed: Vec<(String, String)> = ctx.meta.read(|s| {
        s.connect()
            .connector(&ctx.connector)
            .map(|c| {
                partitions
                    .iter()
                    .filter_map(|p| c.offsets.get(p).map(|o| (p.clone(), o.clone())))
                    .collect()
            })
            .unwrap_or_default()
    });
    for (partition, offset) in committed {
        if let Err(e) = source.resume(&partition, &offset) {
            tracing::warn!(connector = %ctx.connector, task = ctx.task, %partition, error = %e, "connect: starting the partition from the beginning");
        }
    }
    let converters = RecordConverters::for_source(&ctx.config, &ctx.registry).await?;
    if let Some(txn) = txn {
        return run_exactly_once(ctx, source, &converters, txn, stop).await;
    }
    let producer = ctx
        .client
        .producer(ProducerConfig::default())
        .map_err(|e| format!("the producer could not be set up: {e}"))?;
    // per source partition, the offset after its last acknowledged record
    let mut acknowledged: BTreeMap<String, String> = BTreeMap::new();
    // batches sent and not all acknowledged yet, oldest first: the next
    // poll does not wait for them (a source making a record per poll would
    // otherwise go at one record per produce round trip)
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut last_commit = Instant::now();
    while let Some(Polled { records, offsets }) = next_poll(&mut source, &mut stop).await? {
        let sending = if records.is_empty() {
            None
        } else {
            let deliveries: Vec<_> = encoded(&converters, records)
                .await?
                .into_iter()
                .map(|(topic, record)| {
                    let sent = producer.send(&topic, record);
                    async move {
                        sent.await
                            .map_err(|e| format!("producing to {topic} failed: {e}"))
                    }
                })
                .collect();
            Some(tokio::spawn(async move {
                let count = deliveries.len() as u64;
                for d in deliveries {
                    d.await?;
                }
                Ok(count)
            }))
        };
        in_flight.push_back((sending, offsets));
        let keep = if source.done() { 0 } else { MAX_IN_FLIGHT };
        settle(ctx, &mut in_flight, &mut acknowledged, keep).await?;
        // committed at most once a second (Connect's offset.flush.interval.ms),
        // when the task is done, and when it stops
        if source.done() || last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            if !commit(ctx, &mut acknowledged).await {
                return Ok(Ended::Stopped);
            }
        }
        if pause_or_stop(&mut stop, source.pause()).await {
            break;
        }
    }
    settle(ctx, &mut in_flight, &mut acknowledged, 0).await?;
    commit(ctx, &mut acknowledged).await;
    Ok(Ended::Stopped)
}

/// A batch being sent (its record count once all are acknowledged; `None`
/// for a poll that made no records) and the offsets it reaches.
type InFlight = (
    Option<tokio::task::JoinHandle<Result<u64, String>>>,
    Vec<(String, String)>,
);

/// The most batches a source task has in flight.
const MAX_IN_FLIGHT: usize = 64;

/// Takes the acknowledged batches off the front of `in_flight`, in order,
/// their offsets into `acknowledged`; waits for the oldest while more than
/// `keep` are left. A failed send fails the task.
async fn settle(
    ctx: &TaskCtx,
    in_flight: &mut VecDeque<InFlight>,
    acknowledged: &mut BTreeMap<String, String>,
    keep: usize,
) -> Result<(), String> {
    while let Some((sending, _)) = in_flight.front() {
        let finished = sending.as_ref().is_none_or(|h| h.is_finished());
        if !finished && in_flight.len() <= keep {
            break;
        }
        let Some((sending, offsets)) = in_flight.pop_front() else {
            break;
        };
        if let Some(handle) = sending {
            let count = handle
                .await
                .map_err(|e| format!("a send of the task failed: {e}"))??;
            ctx.metrics.source_records(count);
        }
        acknowledged.extend(offsets);
    }
    Ok(())
}

/// The source's next batch; `None` once the task is asked to stop. A
/// source with nothing more to make (Datagen's max.records) waits here.
async fn next_poll(
    source: &mut Source,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<Polled>, String> {
    loop {
        if *stop.borrow() {
            return Ok(None);
        }
        if !source.done() {
            return source.poll().await.map(Some);
        }
        if pause_or_stop(stop, Duration::from_secs(1)).await {
            return Ok(None);
        }
    }
}

/// The records to send, each with its topic, keys and values as the
/// converters write them.
async fn encoded(
    converters: &RecordConverters,
    records: Vec<Produced>,
) -> Result<Vec<(String, Record)>, String> {
    let mut out = Vec::with_capacity(records.len());
    for p in records {
        let (key, value) = converters.encode(&p.topic, p.key, p.value).await?;
        let record = Record::new(value);
        let record = match key {
            Some(k) => record.with_key(k),
            None => record,
        };
        out.push((p.topic, record));
    }
    Ok(out)
}

/// The source loop with exactly-once delivery: each poll's records and
/// the offsets they reach are one transaction.
async fn run_exactly_once(
    ctx: &TaskCtx,
    mut source: Source,
    converters: &RecordConverters,
    txn: TxnDelivery,
    mut stop: watch::Receiver<bool>,
) -> Result<Ended, String> {
    while let Some(Polled { records, offsets }) = next_poll(&mut source, &mut stop).await? {
        let count = records.len() as u64;
        let records = encoded(converters, records).await?;
        let offsets = offsets.into_iter().map(|(p, o)| (p, Some(o))).collect();
        if !txn.deliver(ctx, records, offsets).await? {
            // a newer instance of the task took over
            return Ok(Ended::Stopped);
        }
        ctx.metrics.source_records(count);
        if pause_or_stop(&mut stop, source.pause()).await {
            break;
        }
    }
    Ok(Ended::Stopped)
}

/// Commits, in one metastore write, each partition's offset after its
/// last acknowledged record (they are kept for the next try when the
/// write fails); false when a newer generation runs (or the connector
/// stopped): its worker goes on from the offsets committed so far, and
/// this task ends.
async fn commit(ctx: &TaskCtx, offsets: &mut BTreeMap<String, String>) -> bool {
    if offsets.is_empty() {
        return true;
    }
    let command = ConnectCommand::CommitOffsets {
        name: ctx.connector.clone(),
        generation: Some(ctx.generation),
        offsets: offsets
            .iter()
            .map(|(p, o)| (p.clone(), Some(o.clone())))
            .collect(),
    };
    match ctx.meta.connect_command(command).await {
        Ok(ConnectOutput::Stale) => false,
        Ok(_) => {
            offsets.clear();
            true
        }
        Err(e) => {
            tracing::warn!(connector = %ctx.connector, task = ctx.task, error = %e, "connect: source offsets not committed yet (tried again at the next commit)");
            true
        }
    }
}
