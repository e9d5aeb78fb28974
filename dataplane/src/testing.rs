//! The real backends of one agent in a scratch directory, for tests
//! (compiled for this crate's own tests and with the `testing` feature,
//! never into the broker binary).
//!
//! Everything is what production runs: partition logs are the `storage`
//! crate's in a scratch directory (on tmpfs when the machine has one, so
//! fsyncs cost nothing), the catalog is an embedded one-node `Metastore`
//! whose agent keeps its lease, and the tiered backend seals to an
//! in-memory object store through the same `Tier` service and metastore
//! manifest the agent wires. Scenarios written once run on either log
//! backend ([`Logs`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use metastore::{
    AgentAddrs, AgentKeepAlive, AgentRegistration, ClusterControl, Metastore, MetastoreConfig,
};
use storage::tier::{Tier, TierConfig};
use tempfile::TempDir;

use crate::backend::disk::DiskLogFactory;
use crate::backend::manifest::MetastoreManifest;
use crate::backend::tiered::TieredLogFactory;
use crate::backend::LogFactory;

/// Which partition-log backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logs {
    /// Local segments only.
    Disk,
    /// Local segments sealed to object storage (the production backend).
    Tiered,
}

/// A scratch directory, on tmpfs when there is one.
pub fn scratch_dir() -> TempDir {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("aerostream-test-")
            .tempdir_in(shm)
    } else {
        tempfile::tempdir()
    };
    dir.expect("a scratch directory")
}

/// The backends of one test broker: a real metastore, real logs.
pub struct Backends {
    pub logs: Arc<dyn LogFactory>,
    pub meta: Metastore,
    pub tier: Option<Tier>,
    pub dir: TempDir,
    keep_alive: AgentKeepAlive,
}

impl Backends {
    /// Starts the metastore (agent `node_id` registered and kept alive) and
    /// the log backend under a fresh scratch directory.
    pub async fn start(kind: Logs, node_id: i32) -> Backends {
        Self::start_in(kind, node_id, scratch_dir()).await
    }

    /// As [`Backends::start`], in `dir` (a restart reuses a directory).
    pub async fn start_in(kind: Logs, node_id: i32, dir: TempDir) -> Backends {
        let id = u64::try_from(node_id).expect("node ids are not negative");
        let meta = Metastore::start(MetastoreConfig {
            node_id: id,
            ..MetastoreConfig::embedded(dir.path().join("meta"))
        })
        .await
        .expect("the metastore starts");
        meta.wait_ready(Duration::from_secs(30))
            .await
            .expect("the metastore becomes ready");
        let registration = AgentRegistration {
            id,
            addrs: AgentAddrs {
                connect: None,
                kafka: Some("127.0.0.1:9092".into()),
                native: None,
                quic: None,
            },
            rack: None,
            instance: None,
        };
        meta.register_agent(registration.clone())
            .await
            .expect("the agent registers");
        let keep_alive = meta.keep_agent_alive(registration, Duration::from_millis(200));
        let disk =
            DiskLogFactory::new(dir.path().join("log")).expect("the log directory is created");
        let (logs, tier): (Arc<dyn LogFactory>, _) = match kind {
            Logs::Disk => (Arc::new(disk), None),
            Logs::Tiered => {
                let store = cache::ObjectStoreHandle::in_memory();
                let cold = cache::ColdCache::open(cache::CacheConfig::default(), store.clone())
                    .await
                    .expect("the cold cache opens");
                let manifest = Arc::new(MetastoreManifest::new(meta.clone()));
                let tier = Tier::start(TierConfig::default(), store, cold, manifest);
                (
                    Arc::new(TieredLogFactory::new(disk, tier.clone())),
                    Some(tier),
                )
            }
        };
        Backends {
            logs,
            meta,
            tier,
            dir,
            keep_alive,
        }
    }

    /// Creates topic `name` of one partition and one replica, durable in
    /// object storage (`durability=object-store`).
    pub async fn create_durable_topic(&self, name: &str) -> metastore::TopicInfo {
        use metastore::Topics;
        self.meta
            .create_topic(
                metastore::CreateTopic {
                    configs: [("durability".to_owned(), "object-store".to_owned())].into(),
                    ..metastore::CreateTopic::new(name, 1, 1)
                },
                false,
            )
            .await
            .expect("the topic is created")
    }

    /// Stops the tier and the metastore; returns the directory so a test can
    /// start again on the same data. Close the brokers' partitions first.
    pub async fn stop(self) -> TempDir {
        if let Some(t) = &self.tier {
            t.shutdown().await;
        }
        self.keep_alive.stop();
        if let Err(e) = self.meta.shutdown().await {
            tracing::warn!(error = %e, "metastore shutdown failed");
        }
        self.dir
    }
}

/// One v2 record batch as a producer sends it: record `i` carries
/// `values[i]`, key `k{i}` when `keyed`, and the idempotent producer's id,
/// epoch and sequence when given.
pub fn record_batch(
    values: &[&[u8]],
    keyed: bool,
    producer: Option<(i64, i16, i32)>,
    compression: kafka_protocol::records::Compression,
) -> bytes::Bytes {
    use kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol starts a new batch wherever `offset - sequence`
            // changes, so the records of one request carry consecutive
            // sequence numbers even without a producer id: one batch.
            sequence: seq.max(0) + i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: keyed.then(|| bytes::Bytes::from(format!("k{i}"))),
            value: Some(bytes::Bytes::copy_from_slice(v)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("a batch encodes");
    buf.freeze()
}

/// One uncompressed batch holding `values`, ready for a log's `append`.
pub fn batch_of(values: &[&[u8]]) -> bytes::BytesMut {
    bytes::BytesMut::from(
        &record_batch(
            values,
            false,
            None,
            kafka_protocol::records::Compression::None,
        )[..],
    )
}

/// Waits until `done` holds, polling; fails the test after 30 s naming
/// `what`.
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
