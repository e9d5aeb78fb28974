//! How an agent takes part in a cluster: the certificates `aerostream
//! cluster-ca` writes, the metastore transport and bootstrap chosen from
//! `--voters`, and waiting (with progress lines) until the metastore has a
//! leader.
//!
//! Without `--voters` the metastore is the embedded single node. With it:
//! - a voter bootstraps with the voter map; voters started in any order
//!   elect a leader once a majority runs, and a restart finds its log and
//!   does not bootstrap again;
//! - any other agent starts empty and asks the voters to add it as a
//!   learner (`Metastore::join`), which does nothing when its log already
//!   names it a member.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use metastore::network::certs::{ensure_cluster_certificates, node_files, CA_CERT_FILE};
use metastore::{
    Bootstrap, ClusterControl, MetaError, Metastore, QuicSettings, RaftTls, Transport,
};

use crate::config::{ClusterSettings, Settings};

/// How often an agent waiting for its peers says so.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Flags of `aerostream cluster-ca`.
#[derive(Debug, Clone, Args)]
pub struct ClusterCaArgs {
    /// Folder for ca.pem, ca.key and node-ID.{pem,key}; an existing CA in it is reused.
    #[arg(long)]
    pub out: PathBuf,
    /// Node ids to issue certificates for, e.g. 1,2,3 (nodes that already
    /// have theirs are left alone).
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<u64>,
}

/// `aerostream cluster-ca`: makes (or reuses) the CA and issues the missing
/// node certificates, then says what it wrote.
pub fn create_certificates(args: &ClusterCaArgs) -> anyhow::Result<()> {
    let done = ensure_cluster_certificates(&args.out, args.nodes.iter().copied())
        .with_context(|| format!("cannot create certificates in {}", args.out.display()))?;
    let dir = args.out.display();
    if done.new_ca {
        println!("created a new cluster CA in {dir}");
    } else {
        println!("reused the cluster CA in {dir}");
    }
    for file in &done.written {
        println!("wrote {}", args.out.join(file).display());
    }
    for id in &done.kept {
        let files = node_files(*id);
        println!(
            "kept {} and {} (node {id} already had a certificate)",
            args.out.join(files.cert).display(),
            args.out.join(files.key).display()
        );
    }
    println!(
        "each agent needs {CA_CERT_FILE} and its own node-ID.pem and node-ID.key \
         (in --cluster-certs); keep ca.key off the agents"
    );
    Ok(())
}

/// Reads this node's TLS settings; a missing or unsuitable file gets an
/// error that says which command makes it.
fn load_tls(dir: &Path, node: u64) -> anyhow::Result<RaftTls> {
    let create = format!(
        "`aerostream cluster-ca --out {} --nodes {node}` (it reuses the CA already in that folder)",
        dir.display()
    );
    let files = node_files(node);
    for name in [
        CA_CERT_FILE.to_owned(),
        files.cert.clone(),
        files.key.clone(),
    ] {
        let path = dir.join(&name);
        anyhow::ensure!(
            path.exists(),
            "node {node} needs the cluster certificate file {}, which does not exist; \
             create it with {create}, or point --cluster-certs at the folder that holds it",
            path.display()
        );
    }
    RaftTls::load(dir, node)
        .and_then(|tls| tls.check_node(node).map(|()| tls))
        .map_err(|e| {
            anyhow::anyhow!(
                "the cluster certificate of node {node} in {} is unusable ({e}); \
                 remove {} and {} and create them again with {create}",
                dir.display(),
                files.cert,
                files.key
            )
        })
}

/// The metastore's transport and bootstrap for these settings.
pub fn metastore_transport(s: &Settings, node: u64) -> anyhow::Result<(Transport, Bootstrap)> {
    let Some(c) = &s.cluster else {
        return Ok((Transport::Embedded, Bootstrap::SingleNode));
    };
    let tls = load_tls(&c.certs_dir, node)?;
    let mut quic = QuicSettings::bind(c.cluster_addr, tls);
    quic.advertise = Some(c.advertised_cluster_addr.clone());
    // partition replication and request forwarding share the endpoint
    // (and its mutual TLS)
    quic.service_alpns = vec![
        dataplane::partition::replication::service::ALPN.to_vec(),
        gateway::forward::ALPN.to_vec(),
    ];
    let bootstrap = if c.is_voter(node) {
        Bootstrap::Members(c.voters.clone())
    } else {
        Bootstrap::Join
    };
    Ok((Transport::Quic(quic), bootstrap))
}

/// Returns once the metastore has a leader and this replica has the
/// cluster's id: at once for the embedded node; in a cluster, after joining
/// (learners) and a quorum of voters is up. There is no time limit: peers
/// that are not started yet are waited for, with a line every few seconds
/// that names them. Errors other than waiting end the start.
pub async fn wait_for_metastore(meta: &Metastore, s: &Settings, node: u64) -> anyhow::Result<()> {
    let Some(c) = &s.cluster else {
        return meta
            .wait_ready(Duration::from_secs(30))
            .await
            .context("the metastore did not become ready");
    };
    let started = Instant::now();
    if !c.is_voter(node) {
        loop {
            match meta.join(&c.voters, PROGRESS_EVERY).await {
                Ok(()) => break,
                Err(MetaError::ShuttingDown) => anyhow::bail!("the metastore stopped"),
                Err(e @ MetaError::DuplicateAgent { .. }) => {
                    return Err(DuplicateNodeId(e.to_string()).into())
                }
                Err(e) => println!(
                    "aerostream waiting: node {node} is not a member yet and asks the voters {} \
                     to add it as a learner ({}s so far): {e}",
                    c.describe_voters(None),
                    started.elapsed().as_secs()
                ),
            }
        }
    }
    loop {
        match meta.wait_ready(PROGRESS_EVERY).await {
            Ok(()) => return Ok(()),
            Err(MetaError::Timeout { .. }) => println!("{}", waiting_line(c, node, started)),
            Err(e) => return Err(e).context("the metastore did not become ready"),
        }
    }
}

/// Another process runs with this agent's `--node-id` (the message says
/// where); the agent exits with [`DuplicateNodeId::EXIT_CODE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}; every agent needs its own --node-id")]
pub struct DuplicateNodeId(pub String);

impl DuplicateNodeId {
    /// `EX_CONFIG`: a configuration error, not worth restarting as is.
    pub const EXIT_CODE: i32 = 78;
}

/// The file in the data folder that holds this agent's instance id.
const INSTANCE_FILE: &str = "agent-instance";

/// This agent's instance id: made at its first start and kept in its data
/// folder, so the same agent restarted keeps it, and another process
/// started with the same `--node-id` (elsewhere, or on another folder) has
/// another one.
pub fn instance_id(data_dir: &Path) -> anyhow::Result<uuid::Uuid> {
    let path = data_dir.join(INSTANCE_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text
            .trim()
            .parse()
            .with_context(|| format!("{} does not hold an instance id", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::new_v4();
            let tmp = data_dir.join(format!("{INSTANCE_FILE}.tmp"));
            std::fs::write(&tmp, format!("{id}\n"))
                .and_then(|()| std::fs::rename(&tmp, &path))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(id)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Before serving anything: when another instance holds the lease of this
/// agent's id, waits up to one lease (and a second) for it to run out (a
/// previous life of this agent that died with another data folder), then
/// refuses to start. The metastore checks again when the agent registers.
pub async fn check_node_id_free(
    meta: &Metastore,
    node: u64,
    instance: uuid::Uuid,
    lease: Duration,
) -> anyhow::Result<()> {
    let _ = tokio::time::timeout(Duration::from_secs(5), meta.linearizable_barrier()).await;
    let deadline = Instant::now() + lease + Duration::from_secs(1);
    let mut said = false;
    loop {
        let holder = meta
            .agents()
            .into_iter()
            .find(|a| a.id == node && !a.fenced && a.instance.is_some_and(|i| i != instance));
        let Some(holder) = holder else {
            return Ok(());
        };
        let at = holder
            .addrs
            .quic
            .or(holder.addrs.kafka)
            .unwrap_or_else(|| "an unknown address".to_owned());
        if Instant::now() >= deadline {
            return Err(DuplicateNodeId(format!(
                "agent {node} is already running at {at} (another process with the same --node-id holds its lease)"
            ))
            .into());
        }
        if !said {
            println!(
                "aerostream waiting: agent {node} is registered at {at} by another process; \
                 waiting up to {}s for its lease to run out",
                (lease + Duration::from_secs(1)).as_secs()
            );
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn waiting_line(c: &ClusterSettings, node: u64, started: Instant) -> String {
    let quorum = c.voters.len() / 2 + 1;
    let others = c.describe_voters(Some(node));
    let role = if c.is_voter(node) { "voter" } else { "learner" };
    format!(
        "aerostream waiting: {role} {node} has no metastore leader yet; it needs {quorum} of the {} voters running, \
         waiting for {} ({}s so far)",
        c.voters.len(),
        if others.is_empty() { "itself".to_owned() } else { others },
        started.elapsed().as_secs()
    )
}

/// How long an agent keeps trying to register when the metastore cannot
/// take the write yet (an election under way after a crash, a slow disk).
const REGISTER_FOR: Duration = Duration::from_secs(120);

/// Registers this agent, trying again while the metastore answers with a
/// retriable error (no leader, a timed-out write): an agent restarted
/// while the voters elect a new leader waits for them rather than exiting.
/// Registering again with the same instance is harmless, so a timed-out
/// write that did take effect changes nothing.
pub async fn register(
    meta: &Metastore,
    registration: &metastore::AgentRegistration,
) -> Result<metastore::AgentInfo, MetaError> {
    let deadline = Instant::now() + REGISTER_FOR;
    let mut pause = Duration::from_millis(200);
    loop {
        match meta.register_agent(registration.clone()).await {
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                tracing::warn!(error = %e, "registering with the metastore failed; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            other => return other,
        }
    }
}
