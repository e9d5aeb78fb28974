//! Exactly-once delivery for source tasks (KIP-618), with
//! `exactly.once.support=required`: each batch a source polls is one
//! transaction of the task's own transactional producer
//! (`connect-<connector>-<task>`), and the source offset that batch
//! reaches rides in the same transaction, kept with its record in the
//! metastore until the commit applies it to the connector. Records and
//! offset are committed together or not at all, so a task that dies
//! anywhere resumes from exactly where its committed records end.
//!
//! A restarted task (or its successor on another agent) first initialises
//! the transactional id: that fences the producer it replaces and ends
//! whatever transaction it left (an open one is aborted; one already
//! committing is completed, its offsets applied), and only then reads the
//! committed offsets to resume from.

use metastore::connect::{ConnectCommand, ConnectOutput};
use sdk::{ProducerConfig, Record};

use super::TaskCtx;

/// The connector key that turns exactly-once delivery on (`required`).
pub const EXACTLY_ONCE: &str = "exactly.once.support";

/// Whether the connector asked for exactly-once delivery.
pub fn required(config: &crate::config::Config) -> bool {
    config.get(EXACTLY_ONCE).map(|v| v.trim()) == Some("required")
}

/// The transactional id of a task.
pub fn transactional_id(connector: &str, task: u32) -> String {
    format!("connect-{connector}-{task}")
}

/// A source task's transactional producer, initialised.
pub(super) struct TxnDelivery {
    producer: sdk::Producer,
    id: String,
}

impl TxnDelivery {
    /// Creates the producer and initialises its transactional id, fencing
    /// the task's previous instance and ending its last transaction.
    pub(super) async fn open(ctx: &TaskCtx) -> Result<TxnDelivery, String> {
        let id = transactional_id(&ctx.connector, ctx.task);
        let producer = ctx
            .client
            .producer(ProducerConfig::default().transactional_id(id.clone()))
            .map_err(|e| format!("the transactional producer could not be set up: {e}"))?;
        producer
            .init_transactions()
            .await
            .map_err(|e| format!("initialising transactional id {id} failed: {e}"))?;
        Ok(TxnDelivery { producer, id })
    }

    /// Writes `records` and the source offsets they reach as one
    /// transaction; `Ok(false)` when a newer instance of the task took
    /// over (this one ends). On `Err` the transaction was aborted (or, after
    /// a failed commit, its outcome is the coordinator's): the task fails,
    /// and its next instance resumes from the committed offsets.
    pub(super) async fn deliver(
        &self,
        ctx: &TaskCtx,
        records: Vec<(String, Record)>,
        offsets: Vec<(String, Option<String>)>,
    ) -> Result<bool, String> {
        if records.is_empty() {
            // nothing to write: the offsets alone, as an at-least-once
            // source commits them (no record can be duplicated by it)
            return plain_commit(ctx, offsets).await;
        }
        self.producer
            .begin_transaction()
            .map_err(|e| format!("beginning a transaction failed: {e}"))?;
        match self.write(ctx, records, offsets).await {
            Ok(()) => match self.producer.commit_transaction().await {
                Ok(()) => Ok(true),
                Err(sdk::Error::ProducerFenced(_)) => Ok(false),
                Err(e) => Err(format!(
                    "committing the transaction of {} failed: {e}",
                    self.id
                )),
            },
            Err(e) => {
                if let Err(abort) = self.producer.abort_transaction().await {
                    if matches!(abort, sdk::Error::ProducerFenced(_)) {
                        return Ok(false);
                    }
                    tracing::warn!(connector = %ctx.connector, task = ctx.task, error = %abort, "connect: aborting a failed transaction failed (the coordinator aborts it after its timeout)");
                }
                Err(e)
            }
        }
    }

    async fn write(
        &self,
        ctx: &TaskCtx,
        records: Vec<(String, Record)>,
        offsets: Vec<(String, Option<String>)>,
    ) -> Result<(), String> {
        let deliveries: Vec<_> = records
            .into_iter()
            .map(|(topic, record)| {
                let sent = self.producer.send(&topic, record);
                async move {
                    sent.await
                        .map_err(|e| format!("producing to {topic} failed: {e}"))
                }
            })
            .collect();
        for d in deliveries {
            d.await?;
        }
        let producer = self
            .producer
            .transactional_producer()
            .ok_or_else(|| format!("transactional id {} has no producer id", self.id))?;
        ctx.meta
            .connect_txn_offsets(&self.id, producer, &ctx.connector, offsets)
            .await
            .map_err(|e| format!("adding the source offsets to the transaction failed: {e}"))
    }
}

/// Commits offsets outside a transaction, fenced by the task's
/// generation; `Ok(false)` when a newer generation runs.
async fn plain_commit(
    ctx: &TaskCtx,
    offsets: Vec<(String, Option<String>)>,
) -> Result<bool, String> {
    if offsets.is_empty() {
        return Ok(true);
    }
    let command = ConnectCommand::CommitOffsets {
        name: ctx.connector.clone(),
        generation: Some(ctx.generation),
        offsets,
    };
    match ctx.meta.connect_command(command).await {
        Ok(ConnectOutput::Stale) => Ok(false),
        Ok(_) => Ok(true),
        Err(e) => Err(format!("committing source offsets failed: {e}")),
    }
}
