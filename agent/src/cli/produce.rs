//! `aerostream produce`: stdin lines become records. Lines are batched per
//! partition into RecordBatch v2 and each partition's batch goes to its
//! leader (from Metadata); a batch leaves when the request is full, when
//! stdin has been quiet for a moment (so typed lines go out at once), or
//! at the end of input. Retriable errors (a leader moved) are retried after
//! fresh metadata; anything else is reported per partition and makes the
//! command exit non-zero.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail};
use bytes::Bytes;
use kafka_protocol::messages::{
    produce_request::{PartitionProduceData, TopicProduceData},
    ProduceRequest,
};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::client::{describe_error, error_name, is_retriable, topic_name, Client};
use super::topic::topic_metadata;
use super::Common;

/// A request is sent once the records waiting for it reach this size.
const REQUEST_BYTES: usize = 1 << 20;
/// Keyless records stay on one partition for about this many bytes.
const STICKY_BYTES: usize = 64 << 10;
/// How long stdin may stay quiet before what was read is sent.
const LINGER: Duration = Duration::from_millis(50);
const RETRIES: u32 = 5;
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

#[derive(clap::Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    common: Common,
    /// Topic to produce to.
    #[arg(long, short = 't')]
    topic: String,
    /// Send every record to this partition (default: by key, as Kafka's
    /// default partitioner; keyless records spread over all partitions).
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// Split each line at the first SEP into key and value (a line without
    /// SEP has no key).
    #[arg(long, short = 'K')]
    key_separator: Option<String>,
    /// Acknowledgements to wait for: 0 (none), 1 (the leader) or all (every in-sync replica).
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    acks: i16,
}

fn parse_acks(s: &str) -> Result<i16, String> {
    match s {
        "0" => Ok(0),
        "1" => Ok(1),
        "all" | "-1" => Ok(-1),
        _ => Err(format!("expected 0, 1 or all, got {s:?}")),
    }
}

/// Records waiting for one partition's next batch.
#[derive(Default)]
struct Pending {
    records: Vec<(Option<Bytes>, Bytes)>,
}

struct Producer {
    client: Client,
    topic: String,
    acks: i16,
    /// partition -> leader
    leaders: BTreeMap<i32, i32>,
    pending: BTreeMap<i32, Pending>,
    pending_bytes: usize,
    /// Records in each partition's batch under way.
    count: BTreeMap<i32, usize>,
    produced: u64,
    failed: u64,
    /// Each partition's failure is reported once.
    reported: BTreeSet<(i32, i16)>,
}

pub async fn run(args: ProduceArgs) -> anyhow::Result<()> {
    let client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    let mut producer = Producer {
        client,
        topic: args.topic.clone(),
        acks: args.acks,
        leaders: BTreeMap::new(),
        pending: BTreeMap::new(),
        pending_bytes: 0,
        count: BTreeMap::new(),
        produced: 0,
        failed: 0,
        reported: BTreeSet::new(),
    };
    producer.refresh_leaders(true).await?;
    let partitions = i32::try_from(producer.leaders.len())?;
    if let Some(p) = args.partition {
        if !(0..partitions).contains(&p) {
            bail!(
                "topic {} has no partition {p} (it has {partitions})",
                args.topic
            );
        }
    }
    let separator = args.key_separator.as_deref().map(str::as_bytes);
    let progress = std::io::stderr().is_terminal();
    let mut last_progress = Instant::now();
    let mut sticky = Sticky {
        partition: start_partition(partitions),
        bytes: 0,
    };
    let mut stdin = BufReader::with_capacity(256 << 10, tokio::io::stdin());
    // kept across linger timeouts: a cancelled read leaves its bytes here
    let mut line = Vec::new();
    loop {
        let read = if producer.pending_bytes > 0 {
            match tokio::time::timeout(LINGER, stdin.read_until(b'\n', &mut line)).await {
                Ok(r) => r,
                Err(_) => {
                    producer.flush().await?;
                    continue;
                }
            }
        } else {
            stdin.read_until(b'\n', &mut line).await
        };
        let n = read.map_err(|e| anyhow!("cannot read stdin: {e}"))?;
        if n == 0 && line.is_empty() {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let (key, value) = split(&line, separator);
        let partition = match (args.partition, &key) {
            (Some(p), _) => p,
            (None, Some(k)) => sdk::partitioner::partition_for_key(k, partitions.unsigned_abs())
                .try_into()
                .unwrap_or(0),
            (None, None) => sticky.next(partitions, value.len()),
        };
        producer.pending_bytes += value.len() + key.as_ref().map_or(0, |k| k.len()) + 16;
        producer
            .pending
            .entry(partition)
            .or_default()
            .records
            .push((key, value));
        line.clear();
        if producer.pending_bytes >= REQUEST_BYTES {
            producer.flush().await?;
        }
        if progress && last_progress.elapsed() >= Duration::from_secs(1) {
            eprint!("\rproduced {} records", producer.produced);
            last_progress = Instant::now();
        }
        if n == 0 {
            break; // a last line without a newline
        }
    }
    producer.flush().await?;
    if progress && producer.produced >= 10_000 {
        eprintln!("\rproduced {} records", producer.produced);
    }
    if producer.failed > 0 {
        bail!(
            "{} of {} records were not produced to {}",
            producer.failed,
            producer.failed + producer.produced,
            producer.topic
        );
    }
    Ok(())
}

/// Key and value of a line.
fn split(line: &[u8], separator: Option<&[u8]>) -> (Option<Bytes>, Bytes) {
    if let Some(sep) = separator.filter(|s| !s.is_empty()) {
        if let Some(at) = line.windows(sep.len()).position(|w| w == sep) {
            return (
                Some(Bytes::copy_from_slice(&line[..at])),
                Bytes::copy_from_slice(&line[at + sep.len()..]),
            );
        }
    }
    (None, Bytes::copy_from_slice(line))
}

/// Keyless records fill one partition's batch, then move to the next.
struct Sticky {
    partition: i32,
    bytes: usize,
}

impl Sticky {
    fn next(&mut self, partitions: i32, size: usize) -> i32 {
        if self.bytes >= STICKY_BYTES {
            self.partition = (self.partition + 1) % partitions.max(1);
            self.bytes = 0;
        }
        self.bytes += size;
        self.partition
    }
}

/// Where keyless records start: differs between runs, so that several
/// producers do not all pile onto partition 0.
fn start_partition(partitions: i32) -> i32 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    i32::try_from(nanos % partitions.max(1).unsigned_abs()).unwrap_or(0)
}

impl Producer {
    /// Learns each partition's leader, waiting briefly for a topic the
    /// broker has just created (its leaders may not be elected yet).
    async fn refresh_leaders(&mut self, auto_create: bool) -> anyhow::Result<()> {
        let mut attempt = 0;
        loop {
            let meta = match topic_metadata(&mut self.client, &self.topic, auto_create).await {
                Ok(m) => m,
                // a topic the broker is creating answers LeaderNotAvailable at first
                Err(e) if attempt < 10 && e.to_string().contains("LeaderNotAvailable") => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some(t) = meta
                .topics
                .iter()
                .find(|t| super::client::named(t.name.as_ref(), &self.topic))
            else {
                bail!("unknown topic: {}", self.topic);
            };
            self.leaders = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect();
            let leaderless = self.leaders.values().any(|l| *l < 0);
            if !self.leaders.is_empty() && (!leaderless || attempt >= 10) {
                return Ok(());
            }
            attempt += 1;
            if attempt > 10 {
                bail!("topic {} has no partitions", self.topic);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Sends every waiting record; retriable failures are retried after
    /// fresh metadata, others are counted and reported.
    async fn flush(&mut self) -> anyhow::Result<()> {
        let mut batches: BTreeMap<i32, Bytes> = BTreeMap::new();
        for (partition, pending) in std::mem::take(&mut self.pending) {
            batches.insert(partition, encode(&pending)?);
            self.count.insert(partition, pending.records.len());
        }
        self.pending_bytes = 0;
        let mut attempt = 0;
        while !batches.is_empty() {
            let mut retry = BTreeMap::new();
            let mut by_leader: BTreeMap<i32, Vec<(i32, Bytes)>> = BTreeMap::new();
            for (partition, batch) in batches {
                let leader = self.leaders.get(&partition).copied().unwrap_or(-1);
                by_leader
                    .entry(leader)
                    .or_default()
                    .push((partition, batch));
            }
            for (leader, parts) in by_leader {
                if leader < 0 {
                    for (p, batch) in parts {
                        self.fail_or_retry(p, 5, attempt, batch, &mut retry);
                    }
                    continue;
                }
                match self.send(leader, &parts).await {
                    Ok(results) => {
                        for (p, batch) in parts {
                            let code = results.get(&p).copied().unwrap_or(-1);
                            if code == 0 {
                                self.produced += self.count.remove(&p).unwrap_or(0) as u64;
                            } else {
                                self.fail_or_retry(p, code, attempt, batch, &mut retry);
                            }
                        }
                    }
                    Err(_) if attempt < RETRIES => {
                        // the leader may be gone: retry where fresh metadata
                        // says (a request that did arrive is then written twice)
                        retry.extend(parts);
                    }
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        for (p, _) in parts {
                            self.failed += self.count.remove(&p).unwrap_or(0) as u64;
                        }
                    }
                }
            }
            batches = retry;
            if !batches.is_empty() {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                self.refresh_leaders(false).await?;
            }
        }
        Ok(())
    }

    fn fail_or_retry(
        &mut self,
        partition: i32,
        code: i16,
        attempt: u32,
        batch: Bytes,
        retry: &mut BTreeMap<i32, Bytes>,
    ) {
        if is_retriable(code) && attempt < RETRIES {
            retry.insert(partition, batch);
            return;
        }
        let records = self.count.remove(&partition).unwrap_or(0) as u64;
        self.failed += records;
        if self.reported.insert((partition, code)) {
            eprintln!(
                "error: {}",
                describe_error(&format!("{}/{partition}", self.topic), code, None)
            );
        }
    }

    /// One Produce request to `leader`; the error code of each partition.
    async fn send(
        &mut self,
        leader: i32,
        parts: &[(i32, Bytes)],
    ) -> anyhow::Result<BTreeMap<i32, i16>> {
        let req = ProduceRequest::default()
            .with_acks(self.acks)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(&self.topic))
                .with_partition_data(
                    parts
                        .iter()
                        .map(|(p, batch)| {
                            PartitionProduceData::default()
                                .with_index(*p)
                                .with_records(Some(batch.clone()))
                        })
                        .collect(),
                )]);
        let addr = self.client.broker_addr(leader)?;
        let version = self.client.version::<ProduceRequest>(&addr, 3, 11).await?;
        if self.acks == 0 {
            // the broker never answers acks=0
            self.client.send_only(&addr, &req, version).await?;
            return Ok(parts.iter().map(|(p, _)| (*p, 0)).collect());
        }
        let resp = self.client.call_at(&addr, &req, version).await?;
        let mut out = BTreeMap::new();
        for t in &resp.responses {
            for p in &t.partition_responses {
                if p.error_code != 0 {
                    if let Some(m) = p.error_message.as_ref().filter(|m| !m.is_empty()) {
                        if !is_retriable(p.error_code) {
                            eprintln!(
                                "error: {}/{}: {} ({m})",
                                self.topic,
                                p.index,
                                error_name(p.error_code)
                            );
                        }
                    }
                }
                out.insert(p.index, p.error_code);
            }
        }
        Ok(out)
    }
}

/// One RecordBatch v2 of a partition's waiting records.
fn encode(pending: &Pending) -> anyhow::Result<Bytes> {
    kafka_client::encode_batch(&pending.records, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn a_key_separator_splits_at_its_first_occurrence_only() {
        let (k, v) = split(b"user-1:a:b", Some(b":"));
        assert_eq!(k.as_deref(), Some(&b"user-1"[..]));
        assert_eq!(&v[..], b"a:b");
        let (k, v) = split(b"no separator", Some(b":"));
        assert_eq!(k, None);
        assert_eq!(&v[..], b"no separator");
    }

    #[test]
    fn a_partitions_lines_become_one_batch_without_a_producer_sequence() {
        let pending = Pending {
            records: vec![
                (None, Bytes::from_static(b"one")),
                (Some(Bytes::from_static(b"k")), Bytes::from_static(b"two")),
            ],
        };
        let mut bytes = encode(&pending).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(info.len(), 1, "one batch for all the lines");
        assert_eq!(info[0].record_count, 2);
        assert_eq!(info[0].base_sequence, -1);
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        let values: Vec<_> = set.records.iter().map(|r| r.value.clone()).collect();
        assert_eq!(
            values,
            vec![
                Some(Bytes::from_static(b"one")),
                Some(Bytes::from_static(b"two"))
            ]
        );
    }
}
