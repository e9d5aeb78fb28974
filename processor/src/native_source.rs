//! The source over AeroStream's native protocol (`source.bootstrap:
//! aero://host:port`): each partition is a push subscription of the Rust
//! SDK, which the agent feeds as records are committed, never more than
//! the subscription's window of bytes ahead of what the loop has taken.
//! That credit is the backpressure between the agent and the processor:
//! a loop busy aggregating takes nothing, grants nothing back, and the
//! agent stops pushing until it does.
//!
//! Records come as the SDK's [`ConsumedRecord`]s and are handed to the
//! decoders as Kafka records (their key and value buffers shared, not
//! copied). The native protocol does not send high watermarks with pushed
//! records: a partition counts as caught up (for idleness) when a poll
//! has taken everything the agent pushed to it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::{FutureExt, StreamExt};
use kafka_protocol::records::{Record, TimestampType};
use sdk::{
    Client, ConsumedRecord, Consumer, ConsumerConfig, OffsetReset, OffsetSpec, ReadMode, StartAt,
};

use crate::pipeline::{is_native, Source};
use crate::source::{Fetched, TopicReader};

/// Bytes the agent may push ahead of the loop, per partition.
const WINDOW: u32 = 4 << 20;
/// How long a poll waits for a first record.
const WAIT: Duration = Duration::from_millis(200);
/// The most records one poll takes.
const MAX_RECORDS: usize = 50_000;

/// Reads partitions of a topic from positions it is given, by push
/// subscriptions.
pub struct NativeReader {
    client: Client,
    topic: String,
    partitions: Vec<i32>,
    consumer: Option<Consumer>,
    /// partition -> next offset to read (what the loop has been handed)
    positions: BTreeMap<i32, i64>,
}

impl NativeReader {
    /// Connects and learns the topic's partitions; an unknown topic is an
    /// error.
    pub async fn connect(source: &Source) -> anyhow::Result<NativeReader> {
        let (bootstrap, topic) = (&source.bootstrap, &source.topic);
        let mut builder = Client::builder(bootstrap).client_id("aerostream-process");
        if let Some(credentials) = crate::login::native_credentials(source)? {
            builder = builder.credentials(credentials);
        }
        let client = builder
            .connect()
            .await
            .with_context(|| format!("cannot reach {bootstrap}"))?;
        let metadata = client
            .metadata(&[topic])
            .await
            .with_context(|| format!("cannot read the metadata of {topic}"))?;
        let Some(t) = metadata.topic(topic) else {
            bail!("topic {topic} does not exist");
        };
        let mut partitions: Vec<i32> = t
            .partitions
            .iter()
            .filter_map(|p| i32::try_from(p.index).ok())
            .collect();
        partitions.sort_unstable();
        if partitions.is_empty() {
            bail!("topic {topic} has no partitions");
        }
        Ok(NativeReader {
            client,
            topic: topic.to_owned(),
            partitions,
            consumer: None,
            positions: BTreeMap::new(),
        })
    }

    pub fn partitions(&self) -> Vec<i32> {
        self.partitions.clone()
    }

    pub fn positions(&self) -> &BTreeMap<i32, i64> {
        &self.positions
    }

    /// Where to read from; subscriptions open there at the next poll.
    pub fn set_positions(&mut self, positions: BTreeMap<i32, i64>) {
        self.positions = positions;
        self.consumer = None;
    }

    /// Each partition's earliest offset.
    pub async fn earliest(&mut self, partitions: &[i32]) -> anyhow::Result<BTreeMap<i32, i64>> {
        let mut out = BTreeMap::new();
        for p in partitions {
            let index = u32::try_from(*p).with_context(|| format!("partition {p}"))?;
            let offset = self
                .client
                .list_offsets(&self.topic, index, OffsetSpec::Earliest)
                .await
                .with_context(|| format!("cannot find where {}/{p} starts", self.topic))?;
            out.insert(*p, offset);
        }
        Ok(out)
    }

    /// What arrived since the last poll: waits up to `WAIT` (200 ms) for a first
    /// record, then takes what is already there. A partition with nothing
    /// comes as an empty [`Fetched`] that counts as caught up.
    pub async fn poll(&mut self) -> anyhow::Result<Vec<Fetched>> {
        if self.consumer.is_none() {
            let consumer = subscribe(&self.client, &self.topic, &self.positions).await?;
            self.consumer = Some(consumer);
        }
        let Some(consumer) = self.consumer.as_mut() else {
            bail!("no subscription");
        };
        let mut taken: Vec<ConsumedRecord> = Vec::new();
        match tokio::time::timeout(WAIT, consumer.next()).await {
            Ok(Some(Ok(r))) => taken.push(r),
            Ok(Some(Err(e))) => return Err(self.failed(e)),
            Ok(None) | Err(_) => {}
        }
        while taken.len() < MAX_RECORDS && !taken.is_empty() {
            match consumer.next().now_or_never() {
                Some(Some(Ok(r))) => taken.push(r),
                Some(Some(Err(e))) => return Err(self.failed(e)),
                Some(None) | None => break,
            }
        }
        let drained = taken.len() < MAX_RECORDS;
        let mut by_partition: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
        for r in taken {
            let Ok(p) = i32::try_from(r.partition) else {
                continue;
            };
            by_partition.entry(p).or_default().push(as_kafka(r));
        }
        let mut out = Vec::with_capacity(self.positions.len());
        for (p, position) in self.positions.iter_mut() {
            let records = by_partition.remove(p).unwrap_or_default();
            if let Some(last) = records.last() {
                *position = last.offset + 1;
            }
            out.push(Fetched {
                partition: *p,
                records,
                // caught up with what was pushed when the poll drained it
                high_watermark: if drained { *position } else { i64::MAX },
            });
        }
        Ok(out)
    }

    fn failed(&mut self, e: sdk::Error) -> anyhow::Error {
        // a retriable failure (a moved leader, a lost connection) is
        // retried by the SDK; what reaches here cannot be
        self.consumer = None;
        anyhow::Error::new(e).context(format!("reading {} over the native protocol", self.topic))
    }
}

/// A push subscription to each partition of `topic`, from `positions`.
async fn subscribe(
    client: &Client,
    topic: &str,
    positions: &BTreeMap<i32, i64>,
) -> anyhow::Result<Consumer> {
    let config = ConsumerConfig {
        read_mode: ReadMode::Push { window: WINDOW },
        // an offset deleted by retention stops the run, as over Kafka
        offset_reset: OffsetReset::Fail,
        ..ConsumerConfig::default()
    };
    let mut consumer = client.consumer(config)?;
    for (p, offset) in positions {
        let index = u32::try_from(*p).with_context(|| format!("partition {p}"))?;
        consumer
            .assign(topic, Some(vec![index]), StartAt::Offset(*offset))
            .await
            .with_context(|| format!("cannot subscribe to {topic}/{p}"))?;
    }
    Ok(consumer)
}

/// The Kafka record the decoders read, sharing the SDK record's buffers.
fn as_kafka(r: ConsumedRecord) -> Record {
    Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: r.offset,
        sequence: -1,
        delete_horizon: false,
        timestamp: r.timestamp,
        key: r.key,
        value: r.value,
        headers: Default::default(),
    }
}

/// The source, over the Kafka protocol or the native one.
pub enum Reader {
    Kafka(TopicReader),
    Native(NativeReader),
}

impl Reader {
    /// Connects over the protocol `bootstrap` names.
    pub async fn connect(source: &Source) -> anyhow::Result<Reader> {
        Ok(if is_native(&source.bootstrap) {
            Reader::Native(NativeReader::connect(source).await?)
        } else {
            Reader::Kafka(TopicReader::connect(source).await?)
        })
    }

    pub fn partitions(&self) -> Vec<i32> {
        match self {
            Reader::Kafka(r) => r.partitions(),
            Reader::Native(r) => r.partitions(),
        }
    }

    pub fn positions(&self) -> &BTreeMap<i32, i64> {
        match self {
            Reader::Kafka(r) => r.positions(),
            Reader::Native(r) => r.positions(),
        }
    }

    pub fn set_positions(&mut self, positions: BTreeMap<i32, i64>) {
        match self {
            Reader::Kafka(r) => r.set_positions(positions),
            Reader::Native(r) => r.set_positions(positions),
        }
    }

    pub async fn earliest(&mut self, partitions: &[i32]) -> anyhow::Result<BTreeMap<i32, i64>> {
        match self {
            Reader::Kafka(r) => r.earliest(partitions).await,
            Reader::Native(r) => r.earliest(partitions).await,
        }
    }

    pub async fn poll(&mut self) -> anyhow::Result<Vec<Fetched>> {
        match self {
            Reader::Kafka(r) => r.poll().await,
            Reader::Native(r) => r.poll().await,
        }
    }

    /// Records behind each partition's high watermark at the last fetch
    /// (over the Kafka protocol only: pushes carry no high watermark).
    pub fn lag(&self) -> Box<dyn Iterator<Item = (i32, i64)> + '_> {
        match self {
            Reader::Kafka(r) => Box::new(r.lag()),
            Reader::Native(_) => Box::new(std::iter::empty()),
        }
    }
}
