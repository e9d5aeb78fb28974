//! The output-topic sink: closed windows as JSON records (keyed by the
//! window's key, partitioned by murmur2 as Kafka clients do), written in
//! one Kafka transaction per checkpoint together with the source offsets,
//! which the transaction commits for the group `aerostream-process-<name>`
//! with the checkpoint's epoch as their metadata.
//!
//! A checkpoint with a topic sink is taken in two steps: the state object
//! `_checkpoints/<epoch>.json` first, then the transaction (records,
//! offsets, EndTxn). At start the epoch the group's offsets carry says
//! which checkpoint's transaction committed: the latest one's, or the one
//! before it (the processor died between the two steps: that transaction
//! was aborted, and the processor resumes from the checkpoint before,
//! writing the same windows again, once). Readers with
//! `isolation.level=read_committed` see every window exactly once.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use kafka_client::txn::{committed_offsets, TransactionalProducer};
use kafka_client::Client;

use crate::pipeline::Pipeline;
use crate::sink::{json, Plan};
use crate::window::WindowRow;

/// How long a transaction may stay open before the coordinator aborts it.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The group and transactional id of a pipeline.
pub fn group_of(pipeline: &Pipeline) -> String {
    format!("aerostream-process-{}", pipeline.name)
}

/// The transactional id: the group's name, and for one partition of a
/// distributed pipeline the partition's instance after it (each partition
/// commits its own transactions, so a partition moving between workers
/// fences only its own earlier owner).
pub fn transactional_id_of(pipeline: &Pipeline) -> String {
    match &pipeline.instance {
        Some(instance) => format!("{}-{instance}", group_of(pipeline)),
        None => group_of(pipeline),
    }
}

fn client(pipeline: &Pipeline) -> anyhow::Result<Client> {
    crate::login::kafka_client(&pipeline.source)
}

/// The epoch whose transaction committed last, from the metadata of the
/// offsets the pipeline's group committed (none: no transaction committed).
pub async fn committed_epoch(
    pipeline: &Pipeline,
    partitions: &[i32],
) -> anyhow::Result<Option<u64>> {
    let mut c = client(pipeline)?;
    let committed = committed_offsets(
        &mut c,
        &group_of(pipeline),
        &pipeline.source.topic,
        partitions,
    )
    .await?;
    let epochs: Vec<Option<u64>> = committed
        .values()
        .map(|o| {
            o.metadata
                .as_deref()
                .and_then(|m| m.strip_prefix("epoch=")?.parse().ok())
        })
        .collect();
    match epochs.first() {
        None => Ok(None),
        Some(first) if epochs.iter().all(|e| e == first) => match first {
            Some(e) => Ok(Some(*e)),
            None => bail!(
                "group {} has offsets this processor did not commit; use another pipeline name",
                group_of(pipeline)
            ),
        },
        Some(_) => bail!(
            "the offsets of group {} carry different epochs; use another pipeline name",
            group_of(pipeline)
        ),
    }
}

/// A pipeline's transactional writer to its output topic.
pub struct TopicSink {
    producer: TransactionalProducer,
    topic: String,
    source_topic: String,
    group: String,
    partitions: u32,
    plan: Plan,
    pipeline: Pipeline,
}

impl TopicSink {
    /// Initialises the transactional id (aborting what an earlier process
    /// left open) and learns the output topic's partitions; the topic must
    /// exist.
    pub async fn connect(pipeline: &Pipeline) -> anyhow::Result<TopicSink> {
        let topic = pipeline
            .sink
            .topic
            .clone()
            .context("a topic sink needs its topic")?;
        let group = group_of(pipeline);
        let id = transactional_id_of(pipeline);
        let mut producer = TransactionalProducer::init(client(pipeline)?, &id, TRANSACTION_TIMEOUT)
            .await
            .with_context(|| format!("cannot start transactions as {id}"))?;
        let partitions = producer
            .partitions(&topic)
            .await
            .with_context(|| format!("cannot use the output topic {topic} (create it first)"))?;
        let partitions = u32::try_from(partitions.len()).unwrap_or(0);
        if partitions == 0 {
            bail!("the output topic {topic} has no partitions");
        }
        Ok(TopicSink {
            producer,
            topic,
            source_topic: pipeline.source.topic.clone(),
            group,
            partitions,
            plan: Plan::new(pipeline),
            pipeline: pipeline.clone(),
        })
    }

    /// Writes `rows` and commits `offsets` with `epoch`, in one
    /// transaction. On failure the transaction is aborted (or the producer
    /// started again), and the same rows can be published again.
    pub async fn publish(
        &mut self,
        epoch: u64,
        rows: &[WindowRow],
        offsets: &BTreeMap<i32, i64>,
    ) -> anyhow::Result<()> {
        let result = self.try_publish(epoch, rows, offsets).await;
        if result.is_err() {
            if let Err(e) = self.producer.abort().await {
                tracing::warn!("cannot abort the transaction ({e:#}); starting the producer again");
                let client = client(&self.pipeline)?;
                let id = transactional_id_of(&self.pipeline);
                self.producer =
                    TransactionalProducer::init(client, &id, TRANSACTION_TIMEOUT).await?;
            }
        }
        result
    }

    async fn try_publish(
        &mut self,
        epoch: u64,
        rows: &[WindowRow],
        offsets: &BTreeMap<i32, i64>,
    ) -> anyhow::Result<()> {
        let mut by_partition: BTreeMap<i32, Vec<(Option<Bytes>, Bytes)>> = BTreeMap::new();
        for row in rows {
            let key = Bytes::from(row.key.clone().into_bytes());
            let partition = sdk::partitioner::partition_for_key(&key, self.partitions);
            let value = serde_json::to_vec(&json(&self.pipeline, &self.plan, row))
                .context("cannot encode a window as JSON")?;
            by_partition
                .entry(i32::try_from(partition).unwrap_or(0))
                .or_default()
                .push((Some(key), Bytes::from(value)));
        }
        if !by_partition.is_empty() {
            self.producer.send(&self.topic, &by_partition).await?;
        }
        let offsets = offsets
            .iter()
            .map(|(p, o)| ((self.source_topic.clone(), *p), *o))
            .collect();
        self.producer
            .send_offsets(&self.group, &offsets, &format!("epoch={epoch}"))
            .await?;
        self.producer.commit().await
    }
}
