//! Partitions replicated between three agents in one process: real
//! metastores over QUIC with mutual TLS, real gateways on sockets, real
//! partition logs in scratch directories, followers fetching over the
//! cluster endpoint. Clients speak Kafka over TCP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cache::{CacheConfig, ColdCache, ObjectStoreHandle};
use dataplane::backend::disk::DiskLogFactory;
use dataplane::backend::manifest::MetastoreManifest;
use dataplane::backend::tiered::TieredLogFactory;
use dataplane::backend::LogFactory;
use dataplane::partition::replication::manager::{ReplicaManager, ReplicationSettings};
use dataplane::partition::replication::service::ALPN;
use gateway::broker::BrokerConfig;
use gateway::testing::record_batch;
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use metastore::network::certs::create_cluster_certificates;
use metastore::{
    AgentAddrs, AgentKeepAlive, AgentRegistration, Bootstrap, CreateTopic, Metastore,
    MetastoreConfig, QuicSettings, RaftTiming, RaftTls, Transport,
};
use metastore::{ClusterControl, Manifests, Topics};
use storage::tier::{PartitionKey, Tier, TierConfig};
use tokio::net::TcpStream;

use common::roundtrip;

const TOPIC: &str = "replicated";
const LEASE: Duration = Duration::from_millis(1500);

struct Agent {
    id: u64,
    meta: Metastore,
    /// The agent's tiering service, when its partitions are tiered.
    tier: Option<Tier>,
    gw: Option<Gateway>,
    _replication: Option<ReplicaManager>,
    _alive: Option<AgentKeepAlive>,
    data: tempfile::TempDir,
}

struct Cluster {
    agents: Vec<Agent>,
    _certs: tempfile::TempDir,
}

async fn start_gateway(
    meta: &Metastore,
    id: u64,
    data: &std::path::Path,
    load_balanced: bool,
) -> (Gateway, ReplicaManager, AgentKeepAlive) {
    let logs = Arc::new(DiskLogFactory::new(data.join("log")).unwrap());
    start_gateway_on(meta, id, logs, load_balanced).await
}

/// Tiered logs in `data` over the object store every agent shares, with the
/// manifest in the agent's metastore; uploads held as in a cluster (only a
/// partition's leader uploads).
async fn tiered_logs(
    meta: &Metastore,
    data: &std::path::Path,
    store: &ObjectStoreHandle,
) -> (Arc<dyn LogFactory>, Tier) {
    let cold = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .unwrap();
    let config = TierConfig {
        retention_interval: Duration::from_millis(100),
        ..TierConfig::default()
    };
    let manifest = Arc::new(MetastoreManifest::new(meta.clone()));
    let tier = Tier::start(config, store.clone(), cold, manifest);
    tier.hold_uploads_until_limited();
    let disk = DiskLogFactory::new(data.join("log")).unwrap();
    (Arc::new(TieredLogFactory::new(disk, tier.clone())), tier)
}

/// Agents 1 and 2 share a zone; agent 3 is in another.
fn rack_of(id: u64) -> &'static str {
    if id == 3 {
        "zone-b"
    } else {
        "zone-a"
    }
}

async fn start_gateway_on(
    meta: &Metastore,
    id: u64,
    logs: Arc<dyn LogFactory>,
    load_balanced: bool,
) -> (Gateway, ReplicaManager, AgentKeepAlive) {
    let opts = GatewayOptions {
        broker: BrokerConfig {
            node_id: id as i32,
            rack: Some(rack_of(id).to_string()),
            load_balanced,
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, meta.clone(), logs).await.unwrap();
    gw.start_forwarding().unwrap();
    let replication = gw
        .broker()
        .node
        .start_replication(ReplicationSettings {
            lag_max_ms: 1_000,
            ..ReplicationSettings::default()
        })
        .unwrap();
    let registration = AgentRegistration {
        id,
        addrs: AgentAddrs {
            connect: None,
            kafka: Some(gw.kafka_addr().to_string()),
            native: None,
            quic: meta.raft_addr().map(|a| a.to_string()),
        },
        rack: Some(rack_of(id).to_string()),
        instance: None,
    };
    meta.register_agent(registration.clone()).await.unwrap();
    let alive = meta.keep_agent_alive(registration, Duration::from_millis(200));
    (gw, replication, alive)
}

impl Cluster {
    async fn start() -> Cluster {
        Cluster::start_with(false).await
    }

    /// `load_balanced`: every agent forwards what it does not own.
    async fn start_with(load_balanced: bool) -> Cluster {
        Cluster::start_on(None, load_balanced).await
    }

    /// Three agents; with `store`, their partitions are tiered to it;
    /// `load_balanced`: every agent forwards what it does not own.
    async fn start_on(store: Option<ObjectStoreHandle>, load_balanced: bool) -> Cluster {
        let certs = tempfile::tempdir().unwrap();
        create_cluster_certificates(certs.path(), [1, 2, 3]).unwrap();
        let sockets: Vec<UdpSocket> = (0..3)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let members: BTreeMap<u64, String> = (1..=3)
            .zip(sockets.iter().map(|s| s.local_addr().unwrap().to_string()))
            .collect();
        let mut metas = Vec::new();
        for (i, socket) in sockets.into_iter().enumerate() {
            let id = i as u64 + 1;
            let mut quic =
                QuicSettings::from_socket(socket, RaftTls::load(certs.path(), id).unwrap())
                    .unwrap();
            quic.service_alpns = vec![ALPN.to_vec(), gateway::forward::ALPN.to_vec()];
            let data = tempfile::tempdir().unwrap();
            let meta = Metastore::start(MetastoreConfig {
                node_id: id,
                dir: data.path().join("meta"),
                transport: Transport::Quic(quic),
                bootstrap: Bootstrap::Members(members.clone()),
                timing: RaftTiming::relaxed(),
                agent_lease: LEASE,
                ..MetastoreConfig::default()
            })
            .await
            .unwrap();
            metas.push((id, meta, data));
        }
        let mut agents = Vec::new();
        for (id, meta, data) in metas {
            meta.wait_ready(Duration::from_secs(30)).await.unwrap();
            let (logs, tier): (Arc<dyn LogFactory>, _) = match &store {
                Some(store) => {
                    let (logs, tier) = tiered_logs(&meta, data.path(), store).await;
                    (logs, Some(tier))
                }
                None => (
                    Arc::new(DiskLogFactory::new(data.path().join("log")).unwrap()),
                    None,
                ),
            };
            let (gw, replication, alive) = start_gateway_on(&meta, id, logs, load_balanced).await;
            agents.push(Agent {
                id,
                meta,
                tier,
                gw: Some(gw),
                _replication: Some(replication),
                _alive: Some(alive),
                data,
            });
        }
        Cluster {
            agents,
            _certs: certs,
        }
    }

    fn agent(&self, id: u64) -> &Agent {
        self.agents.iter().find(|a| a.id == id).unwrap()
    }

    fn live(&self) -> impl Iterator<Item = &Agent> {
        self.agents.iter().filter(|a| a.gw.is_some())
    }

    /// The partition's leader and ISR as a live agent's metastore replica sees them.
    fn leadership(&self) -> Option<(u64, Vec<u64>, i32)> {
        let a = self.live().next()?;
        let t = a.meta.topic(TOPIC)?;
        let p = t.partitions.first()?;
        Some((p.leader?, p.isr.clone(), p.leader_epoch))
    }

    async fn wait_for(&self, what: &str, mut cond: impl FnMut(&Cluster) -> bool) {
        for _ in 0..600 {
            if cond(self) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "timed out waiting until {what}; leadership {:?}",
            self.leadership()
        );
    }

    /// Stops an agent the way a crash looks to the others: its gateway and
    /// metastore go away and its lease lapses.
    async fn stop(&mut self, id: u64) {
        let a = self.agents.iter_mut().find(|a| a.id == id).unwrap();
        a._alive.take();
        a._replication.take();
        if let Some(gw) = a.gw.take() {
            gw.shutdown().await;
        }
        if let Some(tier) = a.tier.take() {
            tier.shutdown().await;
        }
        a.meta.shutdown().await.unwrap();
    }
}

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn batch(i: usize) -> Bytes {
    let values: Vec<String> = (0..10).map(|j| format!("b{i}-v{j}")).collect();
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    record_batch(&values, false, None, Compression::None)
}

/// Produces batch `i` with acks=all to `addr`; the error code.
async fn produce(addr: &str, i: usize) -> i16 {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return -1;
    };
    let resp: ProduceResponse = roundtrip(
        &mut s,
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name())
                .with_partition_data(vec![
                    PartitionProduceData::default().with_records(Some(batch(i)))
                ])]),
    )
    .await;
    resp.responses[0].partition_responses[0].error_code
}

/// Every record value the partition holds up to its high watermark, read
/// from `addr` (which must lead it).
async fn read_all(addr: &str) -> Vec<String> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut out = Vec::new();
    loop {
        let fetched: FetchResponse = roundtrip(
            &mut s,
            ApiKey::Fetch,
            12,
            &FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(topic_name())
                    .with_partitions(vec![FetchPartition::default()
                        .with_fetch_offset(out.len() as i64)
                        .with_partition_max_bytes(1 << 20)])]),
        )
        .await;
        let p = &fetched.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch from the leader");
        let mut records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        for set in RecordBatchDecoder::decode_all(&mut records).unwrap() {
            for r in set.records {
                if r.offset as usize == out.len() {
                    let v = r.value.unwrap_or_default();
                    out.push(String::from_utf8_lossy(&v).into_owned());
                }
            }
        }
    }
}

fn kafka_addr(c: &Cluster, id: u64) -> String {
    c.agent(id).gw.as_ref().unwrap().kafka_addr().to_string()
}

fn expected(batches: usize) -> Vec<String> {
    (0..batches)
        .flat_map(|i| (0..10).map(move |j| format!("b{i}-v{j}")))
        .collect()
}

async fn create_replicated_topic(c: &Cluster) {
    c.agents[0]
        .meta
        .create_topic(
            CreateTopic::new(TOPIC, 1, 3).with_config("min.insync.replicas", "2"),
            false,
        )
        .await
        .unwrap();
    c.wait_for(
        "the partition has a leader and three in-sync replicas",
        |c| c.leadership().is_some_and(|(_, isr, _)| isr.len() == 3),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_the_loss_of_their_leader_and_production_continues() {
    let mut c = Cluster::start().await;
    create_replicated_topic(&c).await;
    let (leader, _, epoch) = c.leadership().unwrap();
    let addr = kafka_addr(&c, leader);
    for i in 0..30 {
        // the first writes may meet a partition whose role is being assigned
        assert_eq!(
            produce_settled(&addr, i).await,
            0,
            "acks=all write {i} to the leader"
        );
    }
    assert_eq!(read_all(&addr).await, expected(30));

    c.stop(leader).await;
    c.wait_for("another in-sync replica leads", |c| {
        c.leadership()
            .is_some_and(|(l, _, e)| l != leader && e > epoch)
    })
    .await;
    let (new_leader, _, _) = c.leadership().unwrap();
    let addr = kafka_addr(&c, new_leader);
    for i in 30..40 {
        assert_eq!(
            produce_settled(&addr, i).await,
            0,
            "acks=all write {i} to the new leader"
        );
    }
    assert_eq!(
        read_all(&addr).await,
        expected(40),
        "every acknowledged record, once, in order"
    );
    for id in [1, 2, 3] {
        if id != leader {
            c.stop(id).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_bytes_to_and_from_another_zone_are_counted_as_cross_zone() {
    let mut c = Cluster::start().await;
    create_replicated_topic(&c).await;
    let (leader, _, _) = c.leadership().unwrap();
    let addr = kafka_addr(&c, leader);
    let mut produced = 0u64;
    for i in 0..30 {
        assert_eq!(produce_settled(&addr, i).await, 0, "acks=all write {i}");
        produced += batch(i).len() as u64;
    }
    let report = |id: u64| gateway::cross_zone::usage(c.agent(id).gw.as_ref().unwrap().broker());
    // acks=all: every follower fetched every batch before its write was answered
    let leader_view = report(leader);
    for follower in [1, 2, 3].into_iter().filter(|&f| f != leader) {
        let p = leader_view
            .peers
            .iter()
            .find(|p| p.agent == follower)
            .unwrap();
        assert!(
            p.replication_sent_bytes >= produced,
            "the leader sent follower {follower} at least the records: {p:?}"
        );
        assert!(p.replication_received_bytes > 0, "its fetches: {p:?}");
        assert_eq!(p.rack.as_deref(), Some(rack_of(follower)));
        assert_eq!(
            p.cross_zone,
            Some(rack_of(follower) != rack_of(leader)),
            "{p:?}"
        );
    }
    let across: u64 = leader_view
        .peers
        .iter()
        .filter(|p| rack_of(p.agent) != rack_of(leader))
        .map(|p| p.sent())
        .sum();
    assert_eq!(leader_view.sent_bytes, across);
    assert!(
        leader_view.sent_bytes >= produced,
        "one follower at least is in another zone"
    );
    assert_eq!(leader_view.unknown_zone_bytes, 0);
    // the agent alone in zone b pays for all it received; the others only for what came from it
    let b = report(3);
    assert!(b.received_bytes > 0);
    assert_eq!(
        b.received_bytes,
        b.peers.iter().map(|p| p.received()).sum::<u64>()
    );
    assert!(b.peers.iter().all(|p| p.cross_zone == Some(true)));
    // what /metrics serves (the same text the OpenTelemetry export reads)
    let text = c.agent(3).gw.as_ref().unwrap().metrics_text().render();
    let served: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("aerostream_cross_zone_received_bytes_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("/metrics has the cross-zone bytes received");
    assert!(
        served >= b.received_bytes,
        "{served} < {}",
        b.received_bytes
    );
    assert!(text.contains("path=\"replication\",cross_zone=\"true\""));
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
}

/// Batch `i` written by idempotent producer `PRODUCER` with sequences
/// `10 * i ..= 10 * i + 9`, with acks=all, to `addr`; the error code.
async fn produce_idempotent(addr: &str, i: usize) -> i16 {
    let values: Vec<String> = (0..10).map(|j| format!("b{i}-v{j}")).collect();
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    let seq = i32::try_from(10 * i).unwrap();
    let records = record_batch(&values, false, Some((PRODUCER, 0, seq)), Compression::None);
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return -1;
    };
    let resp: ProduceResponse = roundtrip(
        &mut s,
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name())
                .with_partition_data(vec![
                    PartitionProduceData::default().with_records(Some(records))
                ])]),
    )
    .await;
    resp.responses[0].partition_responses[0].error_code
}

const PRODUCER: i64 = 4_711;

/// As [`produce_idempotent`], retrying for up to ten seconds while the
/// cluster settles; the final code.
async fn produce_idempotent_settled(addr: &str, i: usize) -> i16 {
    let mut code = produce_idempotent(addr, i).await;
    for _ in 0..100 {
        if code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        code = produce_idempotent(addr, i).await;
    }
    code
}

/// A leader cut off from the metastore keeps its role until it hears of
/// its successor. An idempotent producer whose next batches the successor
/// took, and which then comes back to it, sends a sequence that does not
/// follow anything in its log. That gap is the successor's writes, not a
/// lost batch: the old leader, unable to confirm its leadership, answers
/// NOT_LEADER_OR_FOLLOWER (retriable) rather than
/// OUT_OF_ORDER_SEQUENCE_NUMBER (which clients take as fatal), and once
/// the network heals the same batch is written at the real leader. A
/// leader that can confirm its leadership still refuses a real gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_metastore_does_not_refuse_a_sequence_its_successor_continued() {
    let mut c = Cluster::start().await;
    create_replicated_topic(&c).await;
    let (old, _, epoch) = c.leadership().unwrap();
    let old_addr = kafka_addr(&c, old);
    assert_eq!(produce_idempotent_settled(&old_addr, 0).await, 0);

    // The leader's metastore replica loses every link; the others elect
    // another leader once its lease lapses.
    c.agent(old).meta.fault_injection().isolate();
    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|&a| a != old).collect();
    for id in &others {
        c.agent(*id).meta.fault_injection().block(old);
    }
    let seen_by_others = |c: &Cluster| {
        let t = c.agent(others[0]).meta.topic(TOPIC)?;
        let p = t.partitions.first()?;
        Some((p.leader?, p.leader_epoch))
    };
    c.wait_for("another agent leads", |c| {
        seen_by_others(c).is_some_and(|(l, e)| l != old && e > epoch)
    })
    .await;
    let (new, _) = seen_by_others(&c).unwrap();
    assert_eq!(
        produce_idempotent_settled(&kafka_addr(&c, new), 1).await,
        0,
        "the new leader takes the producer's next batch"
    );

    // The producer comes back to the old leader, which still believes it
    // leads: its log ends before sequence 10.
    let old_view = c.agent(old).meta.topic(TOPIC).unwrap().partitions[0].clone();
    assert_eq!((old_view.leader, old_view.leader_epoch), (Some(old), epoch));
    assert_eq!(
        produce_idempotent(&old_addr, 2).await,
        kafka_protocol::ResponseError::NotLeaderOrFollower.code(),
        "a gap the old leader cannot confirm is not the producer's fault"
    );

    for a in &c.agents {
        a.meta.fault_injection().heal();
    }
    // Once the old leader is back in sync, the preferred replica leads
    // again; every agent sees the same settled leadership.
    let preferred = c.agent(others[0]).meta.topic(TOPIC).unwrap().partitions[0].replicas[0];
    c.wait_for("the preferred replica leads three in-sync replicas", |c| {
        c.agents.iter().all(|a| {
            a.meta.topic(TOPIC).is_some_and(|t| {
                let p = &t.partitions[0];
                p.leader == Some(preferred) && p.isr.len() == 3 && p.leader_epoch > epoch
            })
        })
    })
    .await;
    let addr = kafka_addr(&c, preferred);
    assert_eq!(
        produce_idempotent_settled(&addr, 2).await,
        0,
        "the batch the old leader refused is written where the partition leads"
    );
    assert_eq!(
        read_all(&addr).await,
        expected(3),
        "every batch, once, in order"
    );
    // a leader that confirms its leadership still refuses a real gap
    assert_eq!(
        produce_idempotent(&addr, 4).await,
        kafka_protocol::ResponseError::OutOfOrderSequenceNumber.code()
    );
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
}

/// Produces batch `i`, retrying for up to ten seconds while the cluster
/// settles; the final code.
async fn produce_settled(addr: &str, i: usize) -> i16 {
    let mut code = produce(addr, i).await;
    for _ in 0..100 {
        if code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        code = produce(addr, i).await;
    }
    code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_follower_leaves_the_isr_and_rejoins_once_it_caught_up() {
    let mut c = Cluster::start().await;
    create_replicated_topic(&c).await;
    let (leader, _, _) = c.leadership().unwrap();
    let addr = kafka_addr(&c, leader);
    assert_eq!(produce_settled(&addr, 0).await, 0);
    let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|&a| a != leader).collect();

    // The first follower's replication stops (its agent stays registered,
    // so only the leader's lag rule can take it out of the ISR).
    let a = c.agents.iter_mut().find(|a| a.id == followers[0]).unwrap();
    a._replication.take();
    a.gw.take().unwrap().shutdown().await;
    c.wait_for("the silent follower left the ISR", |c| {
        c.leadership()
            .is_some_and(|(_, isr, _)| !isr.contains(&followers[0]) && isr.len() == 2)
    })
    .await;
    for i in 1..20 {
        assert_eq!(
            produce(&addr, i).await,
            0,
            "two in-sync replicas take acks=all"
        );
    }

    // With the second follower gone too, acks=all is refused.
    let b = c.agents.iter_mut().find(|a| a.id == followers[1]).unwrap();
    b._replication.take();
    b.gw.take().unwrap().shutdown().await;
    // (as the leader's own metastore replica sees it: its produce path
    // refuses before appending from then on)
    c.wait_for("only the leader is in sync", |c| {
        c.agent(leader)
            .meta
            .topic(TOPIC)
            .is_some_and(|t| t.partitions[0].isr == vec![leader])
    })
    .await;
    assert_eq!(
        produce(&addr, 20).await,
        kafka_protocol::ResponseError::NotEnoughReplicas.code()
    );

    // Both come back on their old data and catch up.
    for id in followers.iter().copied() {
        let a = c.agents.iter_mut().find(|a| a.id == id).unwrap();
        let (gw, replication, alive) = start_gateway(&a.meta, id, a.data.path(), false).await;
        a.gw = Some(gw);
        a._replication = Some(replication);
        a._alive = Some(alive);
    }
    c.wait_for("both followers rejoined the ISR", |c| {
        c.leadership().is_some_and(|(_, isr, _)| isr.len() == 3)
    })
    .await;
    assert_eq!(produce(&addr, 20).await, 0);
    assert_eq!(read_all(&addr).await, expected(21));

    // A follower that rejoined holds the data: it can lead.
    c.stop(leader).await;
    c.wait_for("a rejoined follower leads", |c| {
        c.leadership().is_some_and(|(l, _, _)| l != leader)
    })
    .await;
    let (new_leader, _, _) = c.leadership().unwrap();
    let addr = kafka_addr(&c, new_leader);
    assert_eq!(produce_settled(&addr, 21).await, 0);
    assert_eq!(read_all(&addr).await, expected(22));
    for id in followers {
        c.stop(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_deleted_through_one_agent_leaves_no_replica_on_the_others() {
    let mut c = Cluster::start().await;
    create_replicated_topic(&c).await;
    let (leader, _, _) = c.leadership().unwrap();
    assert_eq!(produce_settled(&kafka_addr(&c, leader), 0).await, 0);
    let dir = |a: &Agent| a.data.path().join("log").join(format!("{TOPIC}-0"));
    c.wait_for("every agent holds the replica", |c| {
        c.agents.iter().all(|a| dir(a).exists())
    })
    .await;
    c.agents[0].meta.delete_topic(TOPIC).await.unwrap();
    c.wait_for("no agent keeps the deleted topic's data", |c| {
        c.agents.iter().all(|a| !dir(a).exists())
    })
    .await;
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_load_balancer_any_agent_serves_a_partition_another_agent_leads() {
    let c = Cluster::start_with(true).await;
    create_replicated_topic(&c).await;
    let (leader, _, _) = c.leadership().unwrap();
    let elsewhere = c.agents.iter().find(|a| a.id != leader).unwrap().id;
    let addr = kafka_addr(&c, elsewhere);

    // the client sees one broker, which leads the partition (once this
    // agent's catalog has caught up with the topic's creation)
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let md = loop {
        let md: MetadataResponse = roundtrip(
            &mut s,
            ApiKey::Metadata,
            9,
            &MetadataRequest::default().with_topics(None),
        )
        .await;
        if md.topics.first().is_some_and(|t| !t.partitions.is_empty())
            || std::time::Instant::now() > deadline
        {
            break md;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(md.brokers.len(), 1);
    assert_eq!(md.brokers[0].node_id, BrokerId(0));
    let p = &md.topics[0].partitions[0];
    assert_eq!(
        (p.leader_id, p.replica_nodes.clone()),
        (BrokerId(0), vec![BrokerId(0)])
    );

    // acks=all writes and reads through an agent that does not lead
    for i in 0..20 {
        assert_eq!(
            produce(&addr, i).await,
            0,
            "batch {i} through agent {elsewhere}"
        );
    }
    assert_eq!(read_all(&addr).await, expected(20));
    // the leader holds them: it was not served locally
    assert_eq!(read_all_from_leader(&c).await, expected(20));
    let served = c
        .agent(leader)
        .gw
        .as_ref()
        .unwrap()
        .broker()
        .forward_counters
        .served
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        served >= 21,
        "the leader served {served} forwarded requests"
    );
    // the forwarded produce requests' bytes, counted on both ends for the cost report
    let produced: u64 = (0..20).map(|i| batch(i).len() as u64).sum();
    let peer_bytes = |on: u64, peer: u64| {
        c.agent(on)
            .gw
            .as_ref()
            .unwrap()
            .broker()
            .forward_counters
            .peers
            .snapshot()
            .get(&peer)
            .copied()
            .unwrap_or_default()
    };
    let forwarder = peer_bytes(elsewhere, leader);
    let owner = peer_bytes(leader, elsewhere);
    assert!(forwarder.sent >= produced, "{forwarder:?}");
    assert!(owner.received >= produced, "{owner:?}");
    assert!(forwarder.received > 0 && owner.sent > 0);
}

/// An agent that has begun shutting down serves no more forwarded
/// requests: a produce it took now could be acknowledged from its own log
/// alone. The client gets NOT_LEADER_OR_FOLLOWER and retries elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutting_down_leader_refuses_forwarded_produce() {
    let mut c = Cluster::start_with(true).await;
    create_replicated_topic(&c).await;
    let (leader, _, _) = c.leadership().unwrap();
    let elsewhere = c.agents.iter().find(|a| a.id != leader).unwrap().id;
    let addr = kafka_addr(&c, elsewhere);
    let broker = c.agent(leader).gw.as_ref().unwrap().broker().clone();
    let served = || {
        broker
            .forward_counters
            .served
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    assert_eq!(
        produce_settled(&addr, 0).await,
        0,
        "served while the leader runs"
    );
    let before = served();
    broker.begin_shutdown();
    assert_eq!(
        produce(&addr, 1).await,
        6,
        "NOT_LEADER_OR_FOLLOWER once the leader is shutting down"
    );
    assert_eq!(served(), before, "the leader served nothing more");
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
}

/// Produces batch `i` with acks=all to `addr` at Produce `version`.
async fn produce_at(addr: &str, i: usize, version: i16) -> ProduceResponse {
    let mut s = TcpStream::connect(addr).await.unwrap();
    roundtrip(
        &mut s,
        ApiKey::Produce,
        version,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name())
                .with_partition_data(vec![
                    PartitionProduceData::default().with_records(Some(batch(i)))
                ])]),
    )
    .await
}

/// Controlled shutdown: the leader hands its partition to an in-sync
/// follower before it closes. A produce that still reaches it is answered
/// NOT_LEADER_OR_FOLLOWER naming the new leader (KIP-951), and the new
/// leader holds every write the old one acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_hands_over_names_the_new_leader_and_loses_no_acknowledged_write() {
    let mut c = Cluster::start().await;
    create_replicated_topic(&c).await;
    let (leader, _, epoch) = c.leadership().unwrap();
    let addr = kafka_addr(&c, leader);
    for i in 0..10 {
        assert_eq!(produce_settled(&addr, i).await, 0, "batch {i}");
    }
    let a = c.agents.iter_mut().find(|a| a.id == leader).unwrap();
    let alive = a._alive.take();
    let handed =
        a.gw.as_ref()
            .unwrap()
            .hand_over(alive, Duration::from_secs(5))
            .await;
    assert!(handed.applied);
    assert_eq!((handed.moved, handed.kept), (1, 0));
    // the leaving agent's own view has the change: its write resolved
    // once applied there
    let p = c.agent(leader).meta.topic(TOPIC).unwrap().partitions[0].clone();
    let next = p.leader.unwrap();
    assert_ne!(next, leader);
    assert!(!p.isr.contains(&leader), "{:?}", p.isr);
    assert_eq!(p.leader_epoch, epoch + 1);

    let refused = produce_at(&addr, 10, 10).await;
    let r = &refused.responses[0].partition_responses[0];
    assert_eq!(
        r.error_code, 6,
        "NOT_LEADER_OR_FOLLOWER from the old leader"
    );
    assert_eq!(
        (r.current_leader.leader_id, r.current_leader.leader_epoch),
        (BrokerId(next as i32), epoch + 1)
    );
    let next_addr = kafka_addr(&c, next);
    let endpoint = &refused.node_endpoints[0];
    assert_eq!(
        format!("{}:{}", endpoint.host, endpoint.port),
        next_addr,
        "the new leader's endpoint"
    );
    for i in 10..20 {
        assert_eq!(produce_settled(&next_addr, i).await, 0, "batch {i}");
    }
    c.stop(leader).await;
    assert_eq!(read_all(&next_addr).await, expected(20));
    for id in [1, 2, 3].into_iter().filter(|id| *id != leader) {
        c.stop(id).await;
    }
}

/// Behind a load balancer the client sees one broker that never moves, so
/// the agent that forwards a produce follows the leadership itself: a
/// partition the leader refuses is sent again to the leader the metastore
/// names once it moved, and the client gets its acknowledgement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_load_balancer_a_produce_refused_by_a_leaving_leader_reaches_the_new_one() {
    let mut c = Cluster::start_with(true).await;
    create_replicated_topic(&c).await;
    let (leader, _, _) = c.leadership().unwrap();
    let elsewhere = c.agents.iter().find(|a| a.id != leader).unwrap().id;
    let addr = kafka_addr(&c, elsewhere);
    assert_eq!(produce_settled(&addr, 0).await, 0);
    // the leader refuses forwarded requests from now on, and hands its
    // partition over a moment later
    c.agent(leader)
        .gw
        .as_ref()
        .unwrap()
        .broker()
        .begin_shutdown();
    let pending = tokio::spawn({
        let addr = addr.clone();
        async move { produce(&addr, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let a = c.agents.iter_mut().find(|a| a.id == leader).unwrap();
    a._alive.take();
    a.meta.shutdown_agent(leader).await.unwrap();
    assert_eq!(
        pending.await.unwrap(),
        0,
        "acknowledged by the new leader, not NOT_LEADER_OR_FOLLOWER"
    );
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
}

/// Reads the partition from its leader directly.
async fn read_all_from_leader(c: &Cluster) -> Vec<String> {
    let (leader, _, _) = c.leadership().unwrap();
    read_all(&kafka_addr(c, leader)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_moved_off_its_leader_keeps_every_acknowledged_write_and_leaves_no_copy_behind()
{
    let mut c = Cluster::start().await;
    let topic = c.agents[0]
        .meta
        .create_topic(
            CreateTopic {
                name: TOPIC.into(),
                partitions: -1,
                replication_factor: -1,
                assignments: vec![vec![1, 2]],
                ..CreateTopic::default()
            }
            .with_config("min.insync.replicas", "2"),
            false,
        )
        .await
        .unwrap();
    c.wait_for("agents 1 and 2 are in sync, 1 leading", |c| {
        c.leadership()
            .is_some_and(|(l, isr, _)| l == 1 && isr.len() == 2)
    })
    .await;
    for i in 0..20 {
        assert_eq!(produce_settled(&kafka_addr(&c, 1), i).await, 0);
    }
    // agent 3 replaces agent 1, the leader
    c.agents[0]
        .meta
        .alter_reassignment(topic.id, 0, Some(vec![3, 2]))
        .await
        .unwrap();
    let replicas = |c: &Cluster| {
        let p = c.agents[0].meta.topic(TOPIC).unwrap().partitions[0].clone();
        (p.replicas.clone(), p.leader, p.is_reassigning())
    };
    c.wait_for("the move completed with agent 3 leading", |c| {
        replicas(c) == (vec![3, 2], Some(3), false)
    })
    .await;
    let dir = |a: &Agent| a.data.path().join("log").join(format!("{TOPIC}-0"));
    c.wait_for("agent 1 removed its copy", |c| !dir(c.agent(1)).exists())
        .await;
    assert!(dir(c.agent(3)).exists());
    for i in 20..30 {
        assert_eq!(produce_settled(&kafka_addr(&c, 3), i).await, 0);
    }
    assert_eq!(read_all(&kafka_addr(&c, 3)).await, expected(30));
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
}

/// Batch `i` of ten ~10 KiB records, so a few dozen fill several 1 MiB
/// segments.
fn big_batch(i: usize) -> Bytes {
    let values = big_values(i);
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    record_batch(&values, false, None, Compression::None)
}

fn big_values(i: usize) -> Vec<String> {
    (0..10)
        .map(|j| format!("b{i}-v{j}-{}", "x".repeat(10_000)))
        .collect()
}

/// Produces big batch `i` with acks=all, retrying while the cluster settles.
async fn produce_big(addr: &str, i: usize) -> i16 {
    let mut code = -1;
    for _ in 0..100 {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let resp: ProduceResponse = roundtrip(
            &mut s,
            ApiKey::Produce,
            9,
            &ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic_name())
                    .with_partition_data(vec![
                        PartitionProduceData::default().with_records(Some(big_batch(i)))
                    ])]),
        )
        .await;
        code = resp.responses[0].partition_responses[0].error_code;
        if code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    code
}

/// The offsets the partition's manifest entries serve, as an agent's
/// metastore replica holds them.
fn manifest_served(a: &Agent) -> Vec<(i64, i64)> {
    let Some(t) = a.meta.topic(TOPIC) else {
        return Vec::new();
    };
    a.meta
        .segments(t.id, 0)
        .iter()
        .map(|e| (e.first_served(), e.last_offset))
        .collect()
}

fn partition_dir(a: &Agent) -> std::path::PathBuf {
    a.data.path().join("log").join(format!("{TOPIC}-0"))
}

/// Base offsets of the local segment files of the partition on `a`.
fn local_segments(a: &Agent) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(partition_dir(a))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    name.strip_suffix(".log")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    bases.sort_unstable();
    bases
}

/// Tiering in a cluster: only the leader uploads; followers delete their
/// local copies of what it uploaded under the same local retention; after
/// the leader is killed the new leader continues from the manifest; the
/// whole history reads back from object storage on the new leader and on
/// the remaining follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiering_continues_on_a_new_leader_and_followers_drop_what_was_uploaded() {
    let mut c = Cluster::start_on(Some(ObjectStoreHandle::in_memory()), false).await;
    c.agents[0]
        .meta
        .create_topic(
            CreateTopic::new(TOPIC, 1, 3)
                .with_config("min.insync.replicas", "2")
                .with_config("segment.bytes", "1048576")
                .with_config("local.retention.bytes", "0")
                // the test batches carry old timestamps
                .with_config("retention.ms", "-1"),
            false,
        )
        .await
        .unwrap();
    c.wait_for("three in-sync replicas", |c| {
        c.leadership().is_some_and(|(_, isr, _)| isr.len() == 3)
    })
    .await;
    let (leader, _, epoch) = c.leadership().unwrap();
    let addr = kafka_addr(&c, leader);
    for i in 0..40 {
        assert_eq!(produce_big(&addr, i).await, 0, "write {i} to the leader");
    }
    let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|&a| a != leader).collect();
    c.wait_for("the leader uploaded sealed segments", |c| {
        manifest_served(c.agent(leader)).len() >= 2
    })
    .await;
    c.wait_for(
        "every follower dropped local copies of uploaded segments",
        |c| {
            followers.iter().all(|&f| {
                let a = c.agent(f);
                let tiered_end = manifest_served(a).last().map_or(0, |e| e.1 + 1);
                local_segments(a)
                    .first()
                    .is_some_and(|&b| b > 0 && b <= tiered_end)
            })
        },
    )
    .await;
    for &f in &followers {
        let uploaded = c
            .agent(f)
            .tier
            .as_ref()
            .unwrap()
            .snapshot()
            .uploaded_segments;
        assert_eq!(uploaded, 0, "follower {f} uploads nothing");
    }

    c.stop(leader).await;
    c.wait_for("another in-sync replica leads", |c| {
        c.leadership()
            .is_some_and(|(l, _, e)| l != leader && e > epoch)
    })
    .await;
    let (new_leader, _, _) = c.leadership().unwrap();
    let old_end = 40 * 10;
    let addr = kafka_addr(&c, new_leader);
    for i in 40..80 {
        assert_eq!(
            produce_big(&addr, i).await,
            0,
            "write {i} to the new leader"
        );
    }
    c.wait_for("the new leader uploaded past the old leader's end", |c| {
        manifest_served(c.agent(new_leader))
            .last()
            .is_some_and(|e| e.1 >= old_end + 100)
    })
    .await;
    let served = manifest_served(c.agent(new_leader));
    assert_eq!(served[0].0, 0, "{served:?}");
    for w in served.windows(2) {
        assert_eq!(w[0].1 + 1, w[1].0, "no gap, no overlap: {served:?}");
    }
    let snapshot = c.agent(new_leader).tier.as_ref().unwrap().snapshot();
    assert_eq!(snapshot.commit_failures, 0, "no commit was refused");
    c.wait_for("the new leader dropped its local copies too", |c| {
        local_segments(c.agent(new_leader))
            .first()
            .is_some_and(|&b| b > old_end)
    })
    .await;

    let expected: Vec<String> = (0..80).flat_map(big_values).collect();
    assert!(
        read_all(&addr).await == expected,
        "every record, from object storage and the local tail, on the new leader"
    );
    // a cold read of the whole tiered history on the remaining follower
    let follower = *followers.iter().find(|&&f| f != new_leader).unwrap();
    let key = PartitionKey::new(c.agent(follower).meta.topic(TOPIC).unwrap().id, 0);
    let tiered_end = served.last().unwrap().1 + 1;
    c.wait_for(
        "the follower's agent learnt the new leader's commits",
        |c| {
            let tier = c.agent(follower).tier.as_ref().unwrap();
            tier.partition(key)
                .is_some_and(|p| p.tiered_last() >= Some(tiered_end - 1))
        },
    )
    .await;
    let a = c.agent(follower);
    let mut at = 0;
    while at < tiered_end {
        let r = a
            .tier
            .as_ref()
            .unwrap()
            .read(key, at, 1 << 20)
            .await
            .unwrap()
            .expect("tiered records");
        assert!(r.first_offset <= at && r.next_offset > at);
        at = r.next_offset;
    }
    for id in followers {
        c.stop(id).await;
    }
}

/// An admin client creates a topic through one agent and describes its
/// configs through another, whose metastore replica has not applied the
/// creation yet. The answering agent catches up with the metastore before
/// it says the topic does not exist: admin clients do not retry
/// UNKNOWN_TOPIC_OR_PARTITION on DescribeConfigs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_of_a_topic_just_created_elsewhere_are_described_by_a_lagging_agent() {
    let c = Cluster::start().await;
    let leader = c.agents[0].meta.metastore_leader().unwrap();
    let lagging = c.agents.iter().find(|a| a.id != leader).unwrap();
    lagging.meta.fault_injection().hold_entries(leader);
    c.agent(leader)
        .meta
        .create_topic(
            CreateTopic::new("configured", 1, 1).with_config("retention.ms", "3600000"),
            false,
        )
        .await
        .unwrap();
    assert!(
        lagging.meta.topic("configured").is_none(),
        "the lagging replica has not applied the creation"
    );

    let addr = kafka_addr(&c, lagging.id);
    let describe = tokio::spawn(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let resp: DescribeConfigsResponse = roundtrip(
            &mut s,
            ApiKey::DescribeConfigs,
            4,
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("configured")),
            ]),
        )
        .await;
        resp
    });
    // the request waits on the lagging replica until its log flows again
    tokio::time::sleep(Duration::from_millis(300)).await;
    lagging.meta.fault_injection().heal();
    let resp = describe.await.unwrap();
    let result = &resp.results[0];
    assert_eq!(
        result.error_code,
        0,
        "{:?}",
        result.error_message.as_ref().map(|m| m.as_str())
    );
    let retention = result
        .configs
        .iter()
        .find(|e| e.name.as_str() == "retention.ms")
        .and_then(|e| e.value.as_ref())
        .map(|v| v.to_string());
    assert_eq!(retention.as_deref(), Some("3600000"));
}
