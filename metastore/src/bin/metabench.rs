//! metabench: measures the metastore on this machine and prints the figures.
//!
//! ```text
//! cargo run --release -p metastore --features bench --bin metabench            # all three
//! cargo run --release -p metastore --features bench --bin metabench -- --help
//! ```
//!
//! 1. single-node committed writes per second (one writer, then many: batching);
//! 2. three-node committed writes per second (QUIC, three nodes in this process);
//! 3. leader failover: kill the Raft leader, time until the survivors elect a
//!    new one and until the first write commits on it, over many trials;
//! 4. (`--only startup`) how long an embedded single node takes to start and
//!    be ready, in a fresh directory and again after a restart: what a test
//!    that uses a real metastore pays per test.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use hdrhistogram::Histogram;
use metastore::{
    AgentAddrs, AgentRegistration, Bootstrap, ClusterCa, CreateTopic, Metastore, MetastoreConfig,
    OffsetCommit, QuicSettings, RaftTiming, RaftTls, Transport,
};
use metastore::{ClusterControl, Groups, Topics};

#[derive(Parser)]
#[command(about = "Benchmarks the AeroStream metastore and prints what it measured")]
struct Args {
    /// Concurrent writers in the throughput runs.
    #[arg(long, default_value_t = 64)]
    writers: usize,
    /// Seconds each throughput run lasts.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Failover trials.
    #[arg(long, default_value_t = 25)]
    trials: usize,
    /// Heartbeat interval (ms) for the cluster runs; elections wait 3x to 6x this.
    #[arg(long, default_value_t = 50)]
    heartbeat_ms: u64,
    /// Run only these benchmarks (single, three, failover, startup); all but
    /// startup by default.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Raft entries a leader keeps in flight (the rest of the writes queue and batch).
    #[arg(long, default_value_t = MetastoreConfig::default().max_in_flight)]
    in_flight: usize,
    /// Where to put data (a fresh folder is made inside and removed after).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
}

fn agent(id: u64) -> AgentRegistration {
    AgentRegistration {
        id,
        addrs: AgentAddrs {
            connect: None,
            kafka: Some(format!("127.0.0.1:{}", 9092 + id)),
            ..AgentAddrs::default()
        },
        rack: None,
        instance: None,
    }
}

fn commit(offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic: "bench".into(),
        partition: 0,
        offset,
        leader_epoch: 0,
        metadata: None,
        commit_time_ms: 0,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn quantiles(h: &Histogram<u64>) -> String {
    let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        q(0.5),
        q(0.99),
        h.max() as f64 / 1000.0
    )
}

fn histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 600_000_000, 3).context("histogram")
}

/// fdatasync latency of the data folder's disk: what one unbatched commit costs at least.
fn fsync_cost(dir: &Path) -> Result<Histogram<u64>> {
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let mut h = histogram()?;
    for _ in 0..100 {
        f.write_all(&[0u8; 256])?;
        let t = Instant::now();
        f.sync_data()?;
        h.record(t.elapsed().as_micros().max(1) as u64)?;
    }
    std::fs::remove_file(&path)?;
    Ok(h)
}

/// Runs `writers` loops of offset commits against `targets` for `seconds`.
async fn throughput(
    targets: &[Metastore],
    writers: usize,
    seconds: u64,
) -> Result<(u64, Duration, Histogram<u64>)> {
    let stop = Instant::now() + Duration::from_secs(seconds);
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..writers {
        let ms = targets[w % targets.len()].clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = histogram()?;
            let group = format!("bench-{w}");
            let mut i = 0;
            while Instant::now() < stop {
                let t = Instant::now();
                let r = ms.commit_offsets(&group, None, vec![commit(i)]).await?;
                r.into_iter().collect::<Result<Vec<()>, _>>()?;
                h.record(t.elapsed().as_micros().max(1) as u64)?;
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            anyhow::Ok(h)
        }));
    }
    let start = Instant::now();
    let mut all = histogram()?;
    for t in tasks {
        all.add(t.await??)?;
    }
    Ok((done.load(Ordering::Relaxed), start.elapsed(), all))
}

async fn setup_bench_topic(ms: &Metastore) -> Result<()> {
    ms.register_agent(agent(1)).await?;
    ms.create_topic(CreateTopic::new("bench", 1, 1), false)
        .await?;
    Ok(())
}

async fn startup(args: &Args, root: &Path) -> Result<()> {
    let (mut fresh, mut again) = (histogram()?, histogram()?);
    for trial in 0..args.trials {
        let dir = root.join(format!("startup-{trial}"));
        for h in [&mut fresh, &mut again] {
            let t = Instant::now();
            let node = Metastore::start(MetastoreConfig::embedded(&dir)).await?;
            node.wait_ready(Duration::from_secs(10)).await?;
            h.record(t.elapsed().as_micros().max(1) as u64)?;
            node.shutdown().await?;
        }
    }
    println!(
        "[4] embedded single node, start until ready over {} trials:\n      fresh directory: {}\n      restart: {}",
        args.trials,
        quantiles(&fresh),
        quantiles(&again)
    );
    Ok(())
}

async fn single_node(args: &Args, root: &Path) -> Result<()> {
    let config = MetastoreConfig {
        agent_lease: Duration::from_secs(3600),
        max_in_flight: args.in_flight,
        ..MetastoreConfig::embedded(root.join("single"))
    };
    let node = Metastore::start(config).await?;
    setup_bench_topic(&node).await?;
    for writers in [1, args.writers] {
        let first = node.raft_metrics().last_log_index.unwrap_or(0);
        let (ops, took, h) = throughput(std::slice::from_ref(&node), writers, args.seconds).await?;
        let entries = node.raft_metrics().last_log_index.unwrap_or(0) - first;
        println!(
            "[1] single node, {writers:>3} writers: {:>8.0} committed writes/s ({ops} in {:.1} s; {} raft entries, {:.1} writes per entry); latency {}",
            ops as f64 / took.as_secs_f64(),
            took.as_secs_f64(),
            entries,
            ops as f64 / entries.max(1) as f64,
            quantiles(&h)
        );
    }
    node.shutdown().await?;
    Ok(())
}

struct NodeSetup<'a> {
    id: u64,
    dir: PathBuf,
    socket: UdpSocket,
    tls: RaftTls,
    members: &'a BTreeMap<u64, String>,
}

fn cluster_config(
    node: NodeSetup<'_>,
    heartbeat: u64,
    in_flight: usize,
) -> Result<MetastoreConfig> {
    let NodeSetup {
        id,
        dir,
        socket,
        tls,
        members,
    } = node;
    Ok(MetastoreConfig {
        node_id: id,
        dir,
        transport: Transport::Quic(QuicSettings::from_socket(socket, tls)?),
        bootstrap: Bootstrap::Members(members.clone()),
        timing: RaftTiming {
            heartbeat_ms: heartbeat,
            election_min_ms: heartbeat * 3,
            election_max_ms: heartbeat * 6,
        },
        agent_lease: Duration::from_secs(3600),
        max_in_flight: in_flight,
        ..MetastoreConfig::default()
    })
}

struct Cluster {
    root: PathBuf,
    addrs: BTreeMap<u64, String>,
    /// Each node's certificate, from one CA made for the run.
    tls: BTreeMap<u64, RaftTls>,
    nodes: BTreeMap<u64, Metastore>,
    heartbeat: u64,
    in_flight: usize,
}

impl Cluster {
    async fn start(root: &Path, heartbeat: u64, in_flight: usize) -> Result<Cluster> {
        let mut sockets = BTreeMap::new();
        for id in 1..=3u64 {
            sockets.insert(id, UdpSocket::bind("127.0.0.1:0")?);
        }
        let addrs: BTreeMap<u64, String> = sockets
            .iter()
            .map(|(id, s)| Ok((*id, s.local_addr()?.to_string())))
            .collect::<Result<_>>()?;
        let ca = ClusterCa::generate()?;
        let tls: BTreeMap<u64, RaftTls> = sockets
            .keys()
            .map(|id| Ok((*id, ca.issue(*id)?.tls(&ca))))
            .collect::<Result<_>>()?;
        let mut nodes = BTreeMap::new();
        for (id, socket) in sockets {
            let node = NodeSetup {
                id,
                dir: root.join(format!("node{id}")),
                socket,
                tls: tls[&id].clone(),
                members: &addrs,
            };
            let config = cluster_config(node, heartbeat, in_flight)?;
            nodes.insert(id, Metastore::start(config).await?);
        }
        for n in nodes.values() {
            n.wait_ready(Duration::from_secs(30)).await?;
        }
        Ok(Cluster {
            root: root.to_owned(),
            addrs,
            tls,
            nodes,
            heartbeat,
            in_flight,
        })
    }

    fn leader(&self) -> Option<u64> {
        let views: Vec<_> = self.nodes.values().map(|n| n.metastore_leader()).collect();
        let first = (*views.first()?)?;
        (views.iter().all(|v| *v == Some(first)) && self.nodes.contains_key(&first))
            .then_some(first)
    }

    async fn stable_leader(&self) -> Result<u64> {
        let start = Instant::now();
        loop {
            if let Some(l) = self.leader() {
                return Ok(l);
            }
            if start.elapsed() > Duration::from_secs(30) {
                bail!("no stable leader after 30 s");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn restart(&mut self, id: u64) -> Result<()> {
        let addr: SocketAddr = self.addrs[&id].parse()?;
        let start = Instant::now();
        let socket = loop {
            match UdpSocket::bind(addr) {
                Ok(s) => break s,
                Err(e) if start.elapsed() > Duration::from_secs(10) => {
                    bail!("cannot rebind {addr}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let node = NodeSetup {
            id,
            dir: self.root.join(format!("node{id}")),
            socket,
            tls: self.tls[&id].clone(),
            members: &self.addrs,
        };
        let config = cluster_config(node, self.heartbeat, self.in_flight)?;
        self.nodes.insert(id, Metastore::start(config).await?);
        Ok(())
    }

    async fn shutdown(self) -> Result<()> {
        for n in self.nodes.values() {
            n.shutdown().await?;
        }
        Ok(())
    }
}

async fn three_nodes(args: &Args, root: &Path) -> Result<()> {
    let c = Cluster::start(&root.join("three"), 100, args.in_flight).await?;
    let leader = c.stable_leader().await?;
    setup_bench_topic(&c.nodes[&leader]).await?;
    let on_leader = vec![c.nodes[&leader].clone()];
    let followers: Vec<Metastore> = c
        .nodes
        .iter()
        .filter(|(id, _)| **id != leader)
        .map(|(_, m)| m.clone())
        .collect();
    for (label, targets, writers) in [
        ("1 writer on the leader", &on_leader, 1),
        ("writers on the leader", &on_leader, args.writers),
        ("writers on followers (forwarded)", &followers, args.writers),
    ] {
        let first = c.nodes[&leader].raft_metrics().last_log_index.unwrap_or(0);
        let (ops, took, h) = throughput(targets, writers, args.seconds).await?;
        let entries = c.nodes[&leader].raft_metrics().last_log_index.unwrap_or(0) - first;
        println!(
            "[2] three nodes, {writers:>3} {label}: {:>8.0} committed writes/s ({ops} in {:.1} s; {} raft entries); latency {}",
            ops as f64 / took.as_secs_f64(),
            took.as_secs_f64(),
            entries,
            quantiles(&h)
        );
    }
    c.shutdown().await
}

async fn failover(args: &Args, root: &Path) -> Result<()> {
    let hb = args.heartbeat_ms;
    let mut c = Cluster::start(&root.join("failover"), hb, args.in_flight).await?;
    setup_bench_topic(&c.nodes[&c.stable_leader().await?]).await?;
    let (mut elect, mut write) = (histogram()?, histogram()?);
    let term = |c: &Cluster| {
        c.nodes
            .values()
            .map(|n| n.raft_metrics().current_term)
            .max()
            .unwrap_or(0)
    };
    let first_term = term(&c);
    for trial in 0..args.trials {
        let old = c.stable_leader().await?;
        // let the followers settle on fresh heartbeats so every trial starts alike
        tokio::time::sleep(Duration::from_millis(hb * 4)).await;
        let survivor = *c
            .nodes
            .keys()
            .find(|id| **id != old)
            .context("a survivor")?;
        let client = c.nodes[&survivor].clone();
        let killed = c.nodes.remove(&old).context("leader node")?;
        let t0 = Instant::now();
        let stopping = tokio::spawn(async move { killed.shutdown().await });
        let watcher = {
            let nodes: Vec<Metastore> = c.nodes.values().cloned().collect();
            tokio::spawn(async move {
                loop {
                    if nodes
                        .iter()
                        .any(|n| n.metastore_leader().is_some_and(|l| l != old))
                    {
                        return t0.elapsed();
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        };
        client
            .commit_offsets("failover", None, vec![commit(trial as i64)])
            .await?
            .into_iter()
            .collect::<Result<Vec<()>, _>>()?;
        let wrote = t0.elapsed();
        let elected = watcher.await?;
        stopping.await??;
        elect.record(elected.as_micros().max(1) as u64)?;
        write.record(wrote.as_micros().max(1) as u64)?;
        println!("    trial {trial:>2}: leader {old} killed; new leader after {:>6.1} ms, first write committed after {:>6.1} ms", ms(elected), ms(wrote));
        c.restart(old).await?;
        let back = c.nodes[&old].clone();
        let target = c.nodes[&survivor]
            .raft_metrics()
            .last_applied
            .map(|l| l.index);
        while back.raft_metrics().last_applied.map(|l| l.index) < target {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let elections = term(&c) - first_term;
    println!(
        "[3] failover over {} trials (heartbeat {hb} ms, election timeout {}-{} ms):\n      leader elected: {}\n      first committed write on the new leader: {}\n      raft terms used: {elections} ({} beyond one per kill: split votes, lease rejections or spurious elections)",
        args.trials,
        hb * 3,
        hb * 6,
        quantiles(&elect),
        quantiles(&write),
        elections.saturating_sub(args.trials as u64)
    );
    c.shutdown().await
}

fn main() -> Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Runtime::new()?;
    let root = args
        .dir
        .join(format!("metabench-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&root)?;
    let result = runtime.block_on(async {
        let fsync = fsync_cost(&root)?;
        println!(
            "metabench: {} cores, data in {}; fdatasync of a 256-byte append: {}",
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            root.display(),
            quantiles(&fsync)
        );
        let run = |name: &str| {
            (args.only.is_empty() && name != "startup") || args.only.iter().any(|o| o == name)
        };
        if run("single") {
            single_node(&args, &root).await?;
        }
        if run("three") {
            three_nodes(&args, &root).await?;
        }
        if run("failover") {
            failover(&args, &root).await?;
        }
        if run("startup") {
            startup(&args, &root).await?;
        }
        anyhow::Ok(())
    });
    let _ = std::fs::remove_dir_all(&root);
    result
}
