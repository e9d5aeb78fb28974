//! A source task: make records, produce them (idempotent, acks=all), and
//! once all of a batch is acknowledged commit the source offset to the
//! metastore under the task's generation. A task restarted anywhere
//! resumes from the last committed offset: records are never skipped, and
//! only those acknowledged but not yet committed are made again.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use metastore::connect::{ConnectCommand, ConnectOutput};
use sdk::{ProducerConfig, Record};
use tokio::sync::watch;

use super::{pause_or_stop, Ended, TaskCtx};
use crate::plugins::Plugin;
use crate::source::datagen::Datagen;

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

pub(super) async fn run(
    ctx: &TaskCtx,
    plugin: Plugin,
    mut stop: watch::Receiver<bool>,
) -> Result<Ended, String> {
    match plugin {
        Plugin::Datagen => {}
        other => return Err(format!("{} is not a source connector", other.alias())),
    }
    let mut gen = Datagen::new(&ctx.config).map_err(problems)?;
    let partition = gen.partition();
    let committed = ctx.meta.read(|s| {
        s.connect()
            .connector(&ctx.connector)
            .and_then(|c| c.offsets.get(&partition).cloned())
    });
    if let Some(offset) = committed {
        if let Err(e) = gen.resume(&offset) {
            tracing::warn!(connector = %ctx.connector, task = ctx.task, error = %e, "connect: starting from the beginning");
        }
    }
    let producer = ctx
        .client
        .producer(ProducerConfig::default())
        .map_err(|e| format!("the producer could not be set up: {e}"))?;
    let topic = gen.topic().to_owned();
    let mut acknowledged: Option<u64> = None;
    let mut last_commit = Instant::now();
    loop {
        if *stop.borrow() {
            break;
        }
        if gen.done() {
            if pause_or_stop(&mut stop, Duration::from_secs(1)).await {
                break;
            }
            continue;
        }
        let batch = gen.poll(now_ms());
        let Some(next) = batch.last().map(|r| r.next) else {
            continue;
        };
        let count = batch.len() as u64;
        let deliveries: Vec<_> = batch
            .into_iter()
            .map(|r| producer.send(&topic, Record::new(r.value).with_key(r.key)))
            .collect();
        for d in deliveries {
            d.await
                .map_err(|e| format!("producing to {topic} failed: {e}"))?;
        }
        ctx.metrics.source_records(count);
        acknowledged = Some(next);
        // committed at most once a second (Connect's offset.flush.interval.ms),
        // when the task is done, and when it stops
        if gen.done() || last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            if !commit(ctx, &partition, acknowledged.take()).await {
                return Ok(Ended::Stopped);
            }
        }
        if pause_or_stop(&mut stop, gen.pause()).await {
            break;
        }
    }
    commit(ctx, &partition, acknowledged).await;
    Ok(Ended::Stopped)
}

/// Commits the offset after the last acknowledged record; false when a
/// newer generation runs (or the connector stopped): its worker goes on
/// from the offsets committed so far, and this task ends.
async fn commit(ctx: &TaskCtx, partition: &str, next: Option<u64>) -> bool {
    let Some(next) = next else { return true };
    let command = ConnectCommand::CommitOffsets {
        name: ctx.connector.clone(),
        generation: Some(ctx.generation),
        offsets: vec![(partition.to_owned(), Some(Datagen::offset(next)))],
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
