//! The source: every partition of one topic, read over the Kafka protocol
//! from each partition's leader (Metadata for the partitions and leaders,
//! ListOffsets for where a fresh pipeline starts, Fetch for records).
//!
//! A lost connection or a retriable broker error is logged and retried
//! after a growing pause (up to 5 s) with fresh metadata; an error that
//! cannot heal (the topic is gone, an offset was deleted by retention) ends
//! the run with a sentence saying so.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest};
use kafka_protocol::records::Record;

use kafka_client::{decode_records, error_name, is_retriable, topic_name, Client};

use crate::pipeline::Source;

const FETCH_MAX_WAIT_MS: i32 = 200;
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_BYTES: i32 = 16 << 20;
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What one fetch brought for one partition.
pub struct Fetched {
    pub partition: i32,
    /// Data records (control records left out), from the reader's position on.
    pub records: Vec<Record>,
    /// The partition's high watermark as the leader answered it.
    pub high_watermark: i64,
}

/// Reads every partition of a topic from positions it is given.
pub struct TopicReader {
    bootstrap: String,
    topic: String,
    /// Connections to the brokers, and where each broker listens.
    client: Client,
    /// partition -> leader id (-1 when it has none right now)
    leaders: BTreeMap<i32, i32>,
    /// partition -> next offset to read
    positions: BTreeMap<i32, i64>,
    /// partition -> high watermark, as the last fetch of it answered
    high_watermarks: BTreeMap<i32, i64>,
    backoff: Duration,
}

impl TopicReader {
    /// Connects and learns the topic's partitions; an unknown topic is an
    /// error.
    pub async fn connect(source: &Source) -> anyhow::Result<TopicReader> {
        let topic = &source.topic;
        let mut reader = TopicReader {
            bootstrap: source.bootstrap.clone(),
            topic: topic.to_owned(),
            client: crate::login::kafka_client(source)?,
            leaders: BTreeMap::new(),
            positions: BTreeMap::new(),
            high_watermarks: BTreeMap::new(),
            backoff: Duration::from_millis(100),
        };
        reader.refresh_metadata().await?;
        if reader.leaders.is_empty() {
            bail!("topic {topic} has no partitions");
        }
        Ok(reader)
    }

    /// The topic's partitions, as Metadata listed them.
    pub fn partitions(&self) -> Vec<i32> {
        self.leaders.keys().copied().collect()
    }

    /// The next offset to read per partition.
    pub fn positions(&self) -> &BTreeMap<i32, i64> {
        &self.positions
    }

    /// Per partition fetched at least once, the records between the
    /// reader's position and the high watermark the last fetch saw.
    pub fn lag(&self) -> impl Iterator<Item = (i32, i64)> + '_ {
        self.high_watermarks.iter().filter_map(|(p, hw)| {
            let position = self.positions.get(p)?;
            Some((*p, hw.saturating_sub(*position).max(0)))
        })
    }

    /// Where to read from, per partition.
    pub fn set_positions(&mut self, positions: BTreeMap<i32, i64>) {
        self.positions = positions;
    }

    /// Each partition's earliest offset (ListOffsets at -2).
    pub async fn earliest(&mut self, partitions: &[i32]) -> anyhow::Result<BTreeMap<i32, i64>> {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for p in partitions {
            let leader = self.leaders.get(p).copied().unwrap_or(-1);
            if leader < 0 {
                bail!("{}/{p} has no leader right now", self.topic);
            }
            by_leader.entry(leader).or_default().push(*p);
        }
        let mut out = BTreeMap::new();
        for (leader, parts) in by_leader {
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(topic_name(&self.topic))
                    .with_partitions(
                        parts
                            .iter()
                            .map(|p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(*p)
                                    .with_current_leader_epoch(-1)
                                    .with_timestamp(-2)
                            })
                            .collect(),
                    )]);
            let resp = self.client.call_node(leader, &req, 1, 7).await?;
            for t in &resp.topics {
                for p in &t.partitions {
                    if p.error_code != 0 {
                        bail!(
                            "ListOffsets of {}/{}: {}",
                            self.topic,
                            p.partition_index,
                            error_name(p.error_code)
                        );
                    }
                    out.insert(p.partition_index, p.offset);
                }
            }
        }
        Ok(out)
    }

    /// One fetch from every leader. Returns what arrived (possibly nothing:
    /// a retriable failure is logged, waited out and retried on the next
    /// call); an error only for what retrying cannot heal.
    pub async fn poll(&mut self) -> anyhow::Result<Vec<Fetched>> {
        match self.fetch_round().await {
            Ok((fetched, stale)) => {
                if stale {
                    self.pause().await;
                    if let Err(e) = self.refresh_metadata().await {
                        tracing::warn!("{}: cannot refresh metadata: {e:#}", self.topic);
                    }
                } else {
                    self.backoff = Duration::from_millis(100);
                }
                Ok(fetched)
            }
            Err(Fatal(e)) => Err(e),
        }
    }

    async fn pause(&mut self) {
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// The fetched partitions, and whether some partition needs fresh
    /// metadata (a failed connection, no leader, a retriable error).
    async fn fetch_round(&mut self) -> Result<(Vec<Fetched>, bool), Fatal> {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for p in self.positions.keys() {
            let leader = self.leaders.get(p).copied().unwrap_or(-1);
            by_leader.entry(leader).or_default().push(*p);
        }
        let mut out: Vec<Fetched> = Vec::new();
        let mut stale = false;
        // positions move only once every fetch of the round has answered:
        // a poll cancelled at one of its awaits (a stop) leaves them where
        // the records it never returned begin
        let mut moved: Vec<(i32, i64)> = Vec::new();
        for (leader, parts) in by_leader {
            if leader < 0 {
                stale = true;
                continue;
            }
            match self.fetch(leader, &parts).await {
                Ok((fetched, next, s)) => {
                    out.extend(fetched);
                    moved.extend(next);
                    stale |= s;
                }
                Err(FetchError::Fatal(e)) => return Err(Fatal(e)),
                Err(FetchError::Retry(e)) => {
                    tracing::warn!("{}: fetch from broker {leader} failed: {e:#}", self.topic);
                    stale = true;
                }
            }
        }
        for (partition, next) in moved {
            if let Some(position) = self.positions.get_mut(&partition) {
                *position = next;
            }
        }
        Ok((out, stale))
    }

    /// One fetch from `leader`: what it brought, and each partition's next
    /// position after it.
    #[allow(clippy::type_complexity)]
    async fn fetch(
        &mut self,
        leader: i32,
        parts: &[i32],
    ) -> Result<(Vec<Fetched>, Vec<(i32, i64)>, bool), FetchError> {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(FETCH_MAX_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(0)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(&self.topic))
                .with_partitions(
                    parts
                        .iter()
                        .map(|p| {
                            FetchPartition::default()
                                .with_partition(*p)
                                .with_current_leader_epoch(-1)
                                .with_fetch_offset(self.positions.get(p).copied().unwrap_or(0))
                                .with_partition_max_bytes(PARTITION_MAX_BYTES)
                        })
                        .collect(),
                )]);
        // v13+ names topics by id only
        let resp = self
            .client
            .call_node(leader, &req, 4, 12)
            .await
            .map_err(FetchError::Retry)?;
        if resp.error_code != 0 {
            return Err(classify(&self.topic, resp.error_code));
        }
        let mut out = Vec::new();
        let mut moved = Vec::new();
        let mut stale = false;
        for t in &resp.responses {
            for p in &t.partitions {
                let partition = p.partition_index;
                if p.error_code != 0 {
                    match classify(&format!("{}/{partition}", self.topic), p.error_code) {
                        FetchError::Fatal(e) => return Err(FetchError::Fatal(e)),
                        FetchError::Retry(e) => {
                            tracing::warn!("{e:#}");
                            stale = true;
                            continue;
                        }
                    }
                }
                let Some(mut position) = self.positions.get(&partition).copied() else {
                    continue;
                };
                let mut records = Vec::new();
                if let Some(bytes) = &p.records {
                    for r in decode_records(bytes.clone()).map_err(FetchError::Fatal)? {
                        if r.offset < position {
                            continue; // the batch began before our position
                        }
                        position = r.offset + 1;
                        if !r.control {
                            records.push(r);
                        }
                    }
                }
                moved.push((partition, position));
                self.high_watermarks.insert(partition, p.high_watermark);
                out.push(Fetched {
                    partition,
                    records,
                    high_watermark: p.high_watermark,
                });
            }
        }
        Ok((out, moved, stale))
    }

    /// Learns the topic's partitions, their leaders and the brokers.
    async fn refresh_metadata(&mut self) -> anyhow::Result<()> {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(&self.topic)))
            ]))
            .with_allow_auto_topic_creation(false);
        let resp = self.client.call(&self.bootstrap, &req, 4, 12).await?;
        for b in &resp.brokers {
            self.client.learn_broker(b.node_id.0, &b.host, b.port);
        }
        let topic = resp
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == self.topic))
            .ok_or_else(|| anyhow!("unknown topic: {}", self.topic))?;
        if topic.error_code == 3 {
            bail!("unknown topic: {}", self.topic);
        }
        if topic.error_code != 0 {
            bail!("topic {}: {}", self.topic, error_name(topic.error_code));
        }
        self.leaders = topic
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        Ok(())
    }
}

struct Fatal(anyhow::Error);

enum FetchError {
    Fatal(anyhow::Error),
    Retry(anyhow::Error),
}

fn classify(what: &str, code: i16) -> FetchError {
    let message = anyhow!("{what}: {}", error_name(code));
    match code {
        // OFFSET_OUT_OF_RANGE: the records to read next are gone
        1 => FetchError::Fatal(anyhow!(
            "{what}: the next offset to read is out of range (deleted by retention, \
             or the topic was recreated); the pipeline cannot resume exactly"
        )),
        // TOPIC_AUTHORIZATION_FAILED
        29 => FetchError::Fatal(message),
        _ if is_retriable(code) => FetchError::Retry(message),
        // UNKNOWN_TOPIC_OR_PARTITION and the like: fresh metadata may help
        _ => FetchError::Retry(message),
    }
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
