//! A transactional producer over the public Kafka protocol: the writes of
//! one transaction, and a group's offsets with them, become visible to
//! `read_committed` readers together or not at all.
//!
//! ```text
//! init (FindCoordinator, InitProducerId: aborts what an earlier producer
//!       with the same transactional id left open, and fences it)
//! send (AddPartitionsToTxn for partitions new to the transaction, Produce)
//! send_offsets (AddOffsetsToTxn, TxnOffsetCommit to the group coordinator)
//! commit | abort (EndTxn)
//! ```
//!
//! Batches carry the producer id, epoch and per-partition sequence, so a
//! Produce retried after a lost answer is written once. Requests go one at a
//! time; the versions used are those of the transaction protocol before
//! KIP-890's second version (AddPartitionsToTxn up to v3, EndTxn up to v3),
//! which every Kafka broker since 2.5 and AeroStream serve.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, OffsetFetchRequest, ProduceRequest, ProducerId, TransactionalId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::{
    describe_error, encode_batch, error_name, is_retriable, topic_name, BatchProducer, Client,
};

/// How often a retriable answer is asked again before giving up.
const ATTEMPTS: u32 = 20;
const PAUSE: Duration = Duration::from_millis(200);
const PRODUCE_TIMEOUT_MS: i32 = 30_000;
/// CONCURRENT_TRANSACTIONS: the previous transaction is still completing.
const CONCURRENT_TRANSACTIONS: i16 = 51;
/// UNSTABLE_OFFSET_COMMIT: offsets of an open transaction are pending.
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

/// One record to write: its key and value.
pub type Entry = (Option<Bytes>, Bytes);

/// A producer with a transactional id, initialised.
pub struct TransactionalProducer {
    client: Client,
    id: String,
    timeout_ms: i32,
    producer_id: i64,
    epoch: i16,
    coordinator: i32,
    /// (topic, partition) -> next sequence
    sequences: HashMap<(String, i32), i32>,
    /// Partitions added to the open transaction.
    added: BTreeSet<(String, i32)>,
    /// Whether a group's offsets were added to the open transaction.
    open: bool,
    /// topic -> partition -> leader
    leaders: HashMap<String, BTreeMap<i32, i32>>,
}

fn id_of(s: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(s.to_owned()))
}

impl TransactionalProducer {
    /// Finds the transactional id's coordinator and gets a producer id and
    /// epoch for it; an earlier producer with the id is fenced and its open
    /// transaction aborted.
    pub async fn init(
        mut client: Client,
        transactional_id: &str,
        timeout: Duration,
    ) -> anyhow::Result<TransactionalProducer> {
        let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        let mut attempt = 0;
        loop {
            let coordinator = client.find_coordinator(transactional_id, 1).await?;
            let req = InitProducerIdRequest::default()
                .with_transactional_id(Some(id_of(transactional_id)))
                .with_transaction_timeout_ms(timeout_ms)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            let resp = client.call_node(coordinator, &req, 0, 4).await?;
            if resp.error_code == 0 {
                return Ok(TransactionalProducer {
                    client,
                    id: transactional_id.to_owned(),
                    timeout_ms,
                    producer_id: resp.producer_id.0,
                    epoch: resp.producer_epoch,
                    coordinator,
                    sequences: HashMap::new(),
                    added: BTreeSet::new(),
                    open: false,
                    leaders: HashMap::new(),
                });
            }
            attempt += 1;
            if !retriable_txn(resp.error_code) || attempt >= ATTEMPTS {
                bail!(describe_error(
                    &format!("InitProducerId for {transactional_id}"),
                    resp.error_code,
                    None
                ));
            }
            tokio::time::sleep(PAUSE).await;
        }
    }

    /// The producer id and epoch, as the broker gave them.
    pub fn producer(&self) -> (i64, i16) {
        (self.producer_id, self.epoch)
    }

    /// The transaction's timeout.
    pub fn timeout_ms(&self) -> i32 {
        self.timeout_ms
    }

    /// Writes `records` (partition -> records) to `topic` inside the open
    /// transaction (opening one if none is), acknowledged by every replica
    /// in sync.
    pub async fn send(
        &mut self,
        topic: &str,
        records: &BTreeMap<i32, Vec<Entry>>,
    ) -> anyhow::Result<()> {
        let new: Vec<i32> = records
            .keys()
            .copied()
            .filter(|p| !self.added.contains(&(topic.to_owned(), *p)))
            .collect();
        if !new.is_empty() {
            self.add_partitions(topic, &new).await?;
        }
        for (partition, entries) in records {
            if entries.is_empty() {
                continue;
            }
            self.produce(topic, *partition, entries).await?;
        }
        Ok(())
    }

    /// The partitions of `topic`, from fresh metadata.
    pub async fn partitions(&mut self, topic: &str) -> anyhow::Result<Vec<i32>> {
        self.refresh(topic).await?;
        Ok(self
            .leaders
            .get(topic)
            .map(|l| l.keys().copied().collect())
            .unwrap_or_default())
    }

    async fn refresh(&mut self, topic: &str) -> anyhow::Result<()> {
        let resp = self
            .client
            .metadata(Some(&[topic.to_owned()]), false)
            .await?;
        let Some(t) = resp.topics.first() else {
            bail!("no metadata for topic {topic}");
        };
        if t.error_code != 0 {
            bail!(describe_error(
                &format!("topic {topic}"),
                t.error_code,
                None
            ));
        }
        let leaders = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        self.leaders.insert(topic.to_owned(), leaders);
        Ok(())
    }

    async fn add_partitions(&mut self, topic: &str, partitions: &[i32]) -> anyhow::Result<()> {
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(id_of(&self.id))
            .with_v3_and_below_producer_id(ProducerId(self.producer_id))
            .with_v3_and_below_producer_epoch(self.epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(partitions.to_vec())]);
        let mut attempt = 0;
        loop {
            let resp = self.client.call_node(self.coordinator, &req, 0, 3).await?;
            let mut worst = resp.error_code;
            for t in &resp.results_by_topic_v3_and_below {
                for p in &t.results_by_partition {
                    if p.partition_error_code != 0 {
                        worst = p.partition_error_code;
                    }
                }
            }
            if worst == 0 {
                for p in partitions {
                    self.added.insert((topic.to_owned(), *p));
                }
                return Ok(());
            }
            attempt += 1;
            if !retriable_txn(worst) || attempt >= ATTEMPTS {
                bail!(
                    "cannot add {topic} partitions {partitions:?} to transaction {}: {}",
                    self.id,
                    error_name(worst)
                );
            }
            self.recover_coordinator(worst).await?;
            tokio::time::sleep(PAUSE).await;
        }
    }

    async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        entries: &[Entry],
    ) -> anyhow::Result<()> {
        let key = (topic.to_owned(), partition);
        let sequence = self.sequences.get(&key).copied().unwrap_or(0);
        let batch = encode(entries, self.producer_id, self.epoch, sequence)?;
        let req = ProduceRequest::default()
            .with_transactional_id(Some(id_of(&self.id)))
            .with_acks(-1)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch))])]);
        let mut attempt = 0;
        loop {
            if !self
                .leaders
                .get(topic)
                .is_some_and(|l| l.contains_key(&partition))
            {
                self.refresh(topic).await?;
            }
            let leader = self
                .leaders
                .get(topic)
                .and_then(|l| l.get(&partition))
                .copied()
                .ok_or_else(|| anyhow!("{topic} has no partition {partition}"))?;
            let code = match self.client.call_node(leader, &req, 3, 11).await {
                Ok(resp) => resp
                    .responses
                    .iter()
                    .flat_map(|t| &t.partition_responses)
                    .map(|p| p.error_code)
                    .find(|c| *c != 0)
                    .unwrap_or(0),
                // the connection broke: the batch may or may not be
                // written; its sequence makes a second write a duplicate the
                // broker drops
                Err(e) if attempt + 1 < ATTEMPTS => {
                    tracing::warn!("produce to {topic}/{partition} failed, retrying: {e:#}");
                    -1
                }
                Err(e) => return Err(e),
            };
            if code == 0 {
                let n = i32::try_from(entries.len()).unwrap_or(i32::MAX);
                self.sequences.insert(key, sequence.wrapping_add(n));
                return Ok(());
            }
            attempt += 1;
            if (code != -1 && !is_retriable(code)) || attempt >= ATTEMPTS {
                bail!(
                    "cannot write to {topic}/{partition} in transaction {}: {}",
                    self.id,
                    error_name(code)
                );
            }
            self.leaders.remove(topic);
            tokio::time::sleep(PAUSE).await;
        }
    }

    /// Adds `offsets` ((topic, partition) -> next offset to read) of
    /// `group` to the open transaction, each with `metadata`: they are
    /// committed with it.
    pub async fn send_offsets(
        &mut self,
        group: &str,
        offsets: &BTreeMap<(String, i32), i64>,
        metadata: &str,
    ) -> anyhow::Result<()> {
        let group_id = GroupId(StrBytes::from_string(group.to_owned()));
        let req = AddOffsetsToTxnRequest::default()
            .with_transactional_id(id_of(&self.id))
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.epoch)
            .with_group_id(group_id.clone());
        self.coordinator_call("AddOffsetsToTxn", &req, |r| r.error_code)
            .await?;
        self.open = true;
        let mut topics: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
        for ((topic, partition), offset) in offsets {
            topics.entry(topic).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(StrBytes::from_string(metadata.to_owned()))),
            );
        }
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(id_of(&self.id))
            .with_group_id(group_id)
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.epoch)
            .with_generation_id(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, partitions)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let mut attempt = 0;
        loop {
            let node = self.client.find_coordinator(group, 0).await?;
            let resp = self.client.call_node(node, &req, 0, 3).await?;
            let worst = resp
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code)
                .find(|c| *c != 0)
                .unwrap_or(0);
            if worst == 0 {
                return Ok(());
            }
            attempt += 1;
            if !retriable_txn(worst) || attempt >= ATTEMPTS {
                bail!(
                    "cannot commit group {group}'s offsets in transaction {}: {}",
                    self.id,
                    error_name(worst)
                );
            }
            tokio::time::sleep(PAUSE).await;
        }
    }

    /// Commits the open transaction (nothing to do when nothing was sent).
    pub async fn commit(&mut self) -> anyhow::Result<()> {
        self.end(true).await
    }

    /// Aborts the open transaction.
    pub async fn abort(&mut self) -> anyhow::Result<()> {
        self.end(false).await
    }

    async fn end(&mut self, committed: bool) -> anyhow::Result<()> {
        if self.added.is_empty() && !self.open {
            return Ok(());
        }
        let req = EndTxnRequest::default()
            .with_transactional_id(id_of(&self.id))
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.epoch)
            .with_committed(committed);
        self.coordinator_call("EndTxn", &req, |r| r.error_code)
            .await?;
        self.added.clear();
        self.open = false;
        Ok(())
    }

    /// Sends `req` to the transaction coordinator until it answers without
    /// a retriable error (`code` reads the answer's), finding the
    /// coordinator again when it moved.
    async fn coordinator_call<R: Request>(
        &mut self,
        what: &str,
        req: &R,
        code: impl Fn(&R::Response) -> i16,
    ) -> anyhow::Result<()> {
        let mut attempt = 0;
        loop {
            let resp = self.client.call_node(self.coordinator, req, 0, 3).await?;
            let code = code(&resp);
            if code == 0 {
                return Ok(());
            }
            attempt += 1;
            if !retriable_txn(code) || attempt >= ATTEMPTS {
                bail!(
                    "{what} for transaction {} failed: {}",
                    self.id,
                    error_name(code)
                );
            }
            self.recover_coordinator(code).await?;
            tokio::time::sleep(PAUSE).await;
        }
    }

    /// After NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, finds the
    /// transaction's coordinator again.
    async fn recover_coordinator(&mut self, code: i16) -> anyhow::Result<()> {
        if matches!(code, 15 | 16) {
            self.coordinator = self.client.find_coordinator(&self.id, 1).await?;
        }
        Ok(())
    }
}

/// A retriable transaction error: the coordinator loading, moving or still
/// completing the previous transaction.
fn retriable_txn(code: i16) -> bool {
    is_retriable(code) || code == CONCURRENT_TRANSACTIONS
}

/// An offset a group committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The next offset to read.
    pub offset: i64,
    pub metadata: Option<String>,
}

/// The offsets `group` committed for `topic`'s partitions (those it
/// committed nothing for are left out); asks again while a transaction's
/// offsets are pending.
pub async fn committed_offsets(
    client: &mut Client,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<BTreeMap<i32, Committed>> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(partitions.to_vec())]))
        .with_require_stable(true);
    let mut attempt = 0;
    loop {
        let node = client.find_coordinator(group, 0).await?;
        let resp = client
            .call_node(node, &req, 7, 7)
            .await
            .with_context(|| format!("cannot read group {group}'s offsets"))?;
        let mut worst = resp.error_code;
        let mut out = BTreeMap::new();
        for t in &resp.topics {
            for p in &t.partitions {
                if p.error_code != 0 {
                    worst = p.error_code;
                } else if p.committed_offset >= 0 {
                    out.insert(
                        p.partition_index,
                        Committed {
                            offset: p.committed_offset,
                            metadata: p.metadata.as_ref().map(|m| m.to_string()),
                        },
                    );
                }
            }
        }
        if worst == 0 {
            return Ok(out);
        }
        attempt += 1;
        if !(is_retriable(worst) || worst == UNSTABLE_OFFSET_COMMIT) || attempt >= ATTEMPTS {
            bail!("cannot read group {group}'s offsets: {}", error_name(worst));
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// One transactional RecordBatch v2 of `entries`.
fn encode(entries: &[Entry], producer_id: i64, epoch: i16, sequence: i32) -> anyhow::Result<Bytes> {
    encode_batch(
        entries,
        Some(BatchProducer {
            id: producer_id,
            epoch,
            sequence,
            transactional: true,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn a_batch_is_transactional_with_the_producer_and_its_sequence() {
        let entries = vec![
            (Some(Bytes::from_static(b"k")), Bytes::from_static(b"one")),
            (None, Bytes::from_static(b"two")),
        ];
        let mut bytes = encode(&entries, 7, 3, 40).unwrap();
        let records = RecordBatchDecoder::decode(&mut bytes).unwrap().records;
        assert_eq!(records.len(), 2, "one batch");
        assert!(records
            .iter()
            .all(|r| r.transactional && r.producer_id == 7 && r.producer_epoch == 3));
        assert_eq!(records[0].sequence, 40);
        assert_eq!(records[1].sequence, 41);
        assert_eq!(records[1].value.as_deref(), Some(&b"two"[..]));
    }
}
