//! One worker of a distributed pipeline.
//!
//! With `distribution: {coordinators: [...]}` several `aerostream process`
//! workers run one pipeline and share its source's partitions. Each worker
//! heartbeats to an agent's REST API (`/v1/processors/<name>/heartbeat`),
//! which keeps every worker's partition leases in the metastore and
//! answers which partitions this worker holds and which it should give up.
//!
//! Every held partition runs on its own, as a pipeline over that one
//! partition (`run::run_scoped`): its windows, watermark and
//! checkpoints are its own, under `<sink url>/partitions/<partition>/`, and
//! with a topic sink its transactions are under their own transactional
//! id. A partition given up is stopped with a last checkpoint and then
//! released; the worker it goes to restores that checkpoint. A worker that
//! dies loses its leases when their time to live runs out and another
//! resumes its partitions from their last checkpoints. A worker that cannot
//! reach any coordinator for two thirds of the time to live (counted from
//! when it sent its last answered heartbeat) stops its partitions without a
//! checkpoint, before the metastore can grant them elsewhere.
//!
//! Results are exact per partition: a key's windows are aggregated where
//! its records are, so a key must be in one partition (records keyed by the
//! pipeline's key, as Kafka producers partition them) or its windows come
//! out once per partition holding it.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::live::Live;
use crate::pipeline::{Distribution, Pipeline};
use crate::run::{connect, run_scoped, Options};

/// How long one call to a coordinator may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the worker looks for partitions added to the source.
const METADATA_EVERY: Duration = Duration::from_secs(30);

#[derive(Serialize)]
struct HeartbeatBody<'a> {
    worker: &'a str,
    ttl_ms: i64,
    partitions: &'a [i32],
    release: &'a [i32],
}

/// What a heartbeat answered.
#[derive(Debug, Deserialize)]
pub struct Assignment {
    /// Held partitions and their grants' generations.
    pub held: BTreeMap<i32, u64>,
    /// Held partitions to give up.
    pub revoke: Vec<i32>,
    pub workers: Vec<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    message: String,
}

/// Why a call failed: refused by a coordinator that answered (not worth
/// asking another), or failed (unreachable, unavailable: ask the next).
enum CallError {
    Refused(anyhow::Error),
    Failed(anyhow::Error),
}
use CallError::{Failed, Refused};

/// The agents that keep the leases, tried in turn.
pub struct Coordinator {
    http: reqwest::Client,
    urls: Vec<String>,
    /// The one that answered last.
    current: usize,
    pipeline: String,
    worker: String,
    ttl: Duration,
    /// HTTP Basic credentials, when the pipeline logs in.
    login: Option<(String, String)>,
}

impl Coordinator {
    pub fn new(
        d: &Distribution,
        pipeline: &str,
        worker: &str,
        login: Option<(String, String)>,
    ) -> anyhow::Result<Coordinator> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .context("cannot build an HTTP client")?;
        Ok(Coordinator {
            http,
            urls: d
                .coordinators
                .iter()
                .map(|u| u.trim_end_matches('/').to_owned())
                .collect(),
            current: 0,
            pipeline: pipeline.to_owned(),
            worker: worker.to_owned(),
            ttl: d.lease_ttl,
            login,
        })
    }

    /// One heartbeat, to the coordinator that answered last and then to
    /// the others.
    pub async fn heartbeat(
        &mut self,
        partitions: &[i32],
        release: &[i32],
    ) -> anyhow::Result<Assignment> {
        let worker = self.worker.clone();
        let body = HeartbeatBody {
            worker: &worker,
            ttl_ms: i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX),
            partitions,
            release,
        };
        let path = format!("/v1/processors/{}/heartbeat", self.pipeline);
        self.call(&path, &body).await
    }

    /// Tells the coordinators this worker stops (its partitions are free
    /// at once).
    pub async fn leave(&mut self) -> anyhow::Result<()> {
        let path = format!("/v1/processors/{}/leave", self.pipeline);
        let body = serde_json::json!({ "worker": self.worker });
        self.call::<serde_json::Value>(&path, &body)
            .await
            .map(|_| ())
    }

    async fn call<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<T> {
        let mut last = None;
        for i in 0..self.urls.len() {
            let at = (self.current + i) % self.urls.len();
            let url = format!("{}{path}", self.urls[at]);
            match self.post(&url, body).await {
                Ok(out) => {
                    self.current = at;
                    return Ok(out);
                }
                // a refusal (bad request, forbidden) is the cluster's
                // answer: another agent answers the same
                Err(Refused(e)) => return Err(e.context(format!("POST {url}"))),
                Err(Failed(e)) => last = Some(e.context(format!("POST {url}"))),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no coordinator is configured")))
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        body: &impl Serialize,
    ) -> Result<T, CallError> {
        let mut req = self.http.post(url).json(body);
        if let Some((user, password)) = &self.login {
            req = req.basic_auth(user, Some(password));
        }
        let resp = req.send().await.map_err(|e| Failed(e.into()))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| Failed(e.into()))?;
        if !status.is_success() {
            let why = serde_json::from_slice::<ErrorBody>(&bytes)
                .map(|e| e.message)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
            let e = anyhow::anyhow!("{status}: {why}");
            return Err(if status.is_client_error() {
                Refused(e)
            } else {
                Failed(e)
            });
        }
        // a leave answers 204 with no body
        let bytes: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
        serde_json::from_slice(bytes)
            .map_err(|e| Failed(anyhow::Error::new(e).context("cannot read the answer")))
    }
}

/// A partition running on this worker.
struct Running {
    generation: u64,
    /// Dropped or sent: the partition stops with a last checkpoint.
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<anyhow::Result<()>>,
}

impl Running {
    fn stopping(&self) -> bool {
        self.stop.is_none()
    }
}

/// The pipeline over partition `partition` alone.
fn scoped(pipeline: &Pipeline, partition: i32) -> Pipeline {
    let mut p = pipeline.clone();
    p.sink.url = format!(
        "{}/partitions/{partition}",
        pipeline.sink.url.trim_end_matches('/')
    );
    p.instance = Some(format!("p{partition}"));
    p.distribution = None;
    // a partition's local state is its own (the default folder is named
    // after the sink URL, which is the partition's already)
    if let Some(state) = &mut p.state {
        state.dir = state.dir.join("partitions").join(partition.to_string());
    }
    p
}

/// This process's worker id when the file names none.
fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Runs as one of the pipeline's workers until `shutdown` completes; then
/// stops every held partition with a last checkpoint and leaves.
pub async fn run(
    pipeline: Pipeline,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let d = pipeline
        .distribution
        .clone()
        .context("the pipeline has no distribution")?;
    if options.stats.is_some() {
        tracing::warn!("--stats is not written by a distributed pipeline's worker");
    }
    let worker = d.worker.clone().unwrap_or_else(default_worker_id);
    let login = crate::login::basic_auth(&pipeline.source)?;
    let mut coordinator = Coordinator::new(&d, &pipeline.name, &worker, login)?;
    tokio::pin!(shutdown);
    let mut partitions = tokio::select! {
        () = &mut shutdown => return Ok(()),
        reader = connect(&pipeline) => reader?.partitions(),
    };
    let mut metadata_at = Instant::now();
    let live = match &pipeline.live {
        Some(view) => Some(Arc::new(Live::start(&pipeline, &view.listen).await?)),
        None => None,
    };
    tracing::info!(
        pipeline = %pipeline.name,
        worker = %worker,
        partitions = partitions.len(),
        coordinators = ?d.coordinators,
        "starting as one of the pipeline's workers"
    );
    let beat_every = (d.lease_ttl / 6).max(Duration::from_millis(200));
    let fence_after = d.lease_ttl * 2 / 3;
    let mut running: BTreeMap<i32, Running> = BTreeMap::new();
    let mut release: Vec<i32> = Vec::new();
    let mut last_answered: Option<Instant> = None;
    let mut last_error_logged: Option<Instant> = None;
    let result = loop {
        if let Err(e) = reap(&mut running, &mut release).await {
            break Err(e);
        }
        let sent = Instant::now();
        match coordinator.heartbeat(&partitions, &release).await {
            Ok(a) => {
                last_answered = Some(sent);
                release.clear();
                follow(&pipeline, &a, &mut running, &mut release, &live);
            }
            Err(e) => {
                if last_error_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
                    tracing::warn!("heartbeat failed: {e:#}");
                    last_error_logged = Some(Instant::now());
                }
                let lost = last_answered.is_none_or(|t| t.elapsed() >= fence_after);
                if lost && !running.is_empty() {
                    tracing::warn!(
                        partitions = ?running.keys().collect::<Vec<_>>(),
                        "no coordinator answered for {fence_after:?}: stopping every partition \
                         without a checkpoint before their leases run out"
                    );
                    abort_all(&mut running).await;
                }
            }
        }
        if metadata_at.elapsed() >= METADATA_EVERY {
            metadata_at = Instant::now();
            partitions = refreshed(&pipeline, partitions).await;
        }
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            () = tokio::time::sleep(beat_every) => {}
        }
    };
    // stop what still runs, each with a last checkpoint
    for r in running.values_mut() {
        if let Some(stop) = r.stop.take() {
            let _ = stop.send(());
        }
    }
    let mut failed = Vec::new();
    for (p, r) in std::mem::take(&mut running) {
        match r.handle.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failed.push(format!("partition {p}: {e:#}")),
            Err(e) => failed.push(format!("partition {p}: {e}")),
        }
    }
    if let Err(e) = coordinator.leave().await {
        tracing::warn!("cannot leave (the leases run out by themselves): {e:#}");
    }
    result?;
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    tracing::info!(pipeline = %pipeline.name, worker = %worker, "stopped and left");
    Ok(())
}

/// The source's partitions as Metadata lists them now; `known` when the
/// broker cannot say (the next look may).
async fn refreshed(pipeline: &Pipeline, known: Vec<i32>) -> Vec<i32> {
    let source = &pipeline.source;
    match crate::native_source::Reader::connect(source).await {
        Ok(reader) => {
            let now = reader.partitions();
            if now != known {
                tracing::info!(
                    before = known.len(),
                    now = now.len(),
                    "the source's partitions changed"
                );
            }
            now
        }
        Err(e) => {
            tracing::warn!("cannot read the source's metadata: {e:#}");
            known
        }
    }
}

/// Takes up what a heartbeat answered: starts newly held partitions, asks
/// revoked ones to stop, and aborts any still running that this worker no
/// longer holds.
fn follow(
    pipeline: &Pipeline,
    a: &Assignment,
    running: &mut BTreeMap<i32, Running>,
    release: &mut Vec<i32>,
    live: &Option<Arc<Live>>,
) {
    let lost: Vec<i32> = running
        .keys()
        .filter(|p| !a.held.contains_key(p))
        .copied()
        .collect();
    for p in lost {
        if let Some(r) = running.remove(&p) {
            tracing::warn!(
                partition = p,
                "the lease is gone: stopping the partition without a checkpoint"
            );
            r.handle.abort();
        }
    }
    let revoke: BTreeSet<i32> = a.revoke.iter().copied().collect();
    for p in &revoke {
        match running.get_mut(p) {
            Some(r) => {
                if let Some(stop) = r.stop.take() {
                    tracing::info!(partition = p, "giving the partition up");
                    let _ = stop.send(());
                }
            }
            // held but never started here: nothing to checkpoint
            None => release.push(*p),
        }
    }
    for (p, generation) in &a.held {
        if revoke.contains(p) {
            continue;
        }
        if running.get(p).is_some_and(|r| r.generation == *generation) {
            continue;
        }
        if let Some(old) = running.remove(p) {
            // granted again under a newer generation: what ran was fenced
            old.handle.abort();
        }
        tracing::info!(partition = p, generation, workers = ?a.workers, "taking the partition");
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(run_scoped(
            scoped(pipeline, *p),
            Some(vec![*p]),
            Options::default(),
            live.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        running.insert(
            *p,
            Running {
                generation: *generation,
                stop: Some(tx),
                handle,
            },
        );
    }
}

/// Collects partitions that finished: a revoked one that stopped is
/// released (also when its last checkpoint failed: the next owner resumes
/// from the one before); one that stopped by itself ended in an error the
/// pipeline cannot go on from.
async fn reap(running: &mut BTreeMap<i32, Running>, release: &mut Vec<i32>) -> anyhow::Result<()> {
    let done: Vec<i32> = running
        .iter()
        .filter(|(_, r)| r.handle.is_finished())
        .map(|(p, _)| *p)
        .collect();
    for p in done {
        let Some(r) = running.remove(&p) else {
            continue;
        };
        let stopping = r.stopping();
        let outcome = r.handle.await;
        match (stopping, outcome) {
            (true, Ok(Ok(()))) => release.push(p),
            (true, Ok(Err(e))) => {
                tracing::warn!(
                    partition = p,
                    "releasing after a failed last checkpoint: {e:#}"
                );
                release.push(p);
            }
            (_, Err(e)) if e.is_cancelled() => {}
            (_, Err(e)) => bail!("partition {p} failed: {e}"),
            (false, Ok(Err(e))) => return Err(e.context(format!("partition {p}"))),
            (false, Ok(Ok(()))) => bail!("partition {p} stopped by itself"),
        }
    }
    Ok(())
}

async fn abort_all(running: &mut BTreeMap<i32, Running>) {
    for (_, r) in std::mem::take(running) {
        r.handle.abort();
        let _ = r.handle.await;
    }
}

#[cfg(test)]
#[path = "distribute_tests.rs"]
mod tests;
