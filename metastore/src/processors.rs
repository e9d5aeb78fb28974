//! Partition leases of the stream processor's workers.
//!
//! Several `aerostream process` workers may run one pipeline: each
//! heartbeats through an agent's REST API into this state, which keeps the
//! live workers of every pipeline (a worker is live until its heartbeat's
//! time to live runs out, on the metastore leader's clock) and which source
//! partition each one holds. The partitions are spread evenly over the live
//! workers, keeping a partition where it is when that stays even, so a
//! worker joining or leaving moves as few as it can.
//!
//! A partition is handed over, never shared: a worker that should give one
//! up is told to (`revoke`), takes its last checkpoint of it and releases
//! it in its next heartbeat; only then is it granted to another worker. A
//! worker that stops heartbeating loses its partitions when its time to
//! live runs out; the worker itself stops processing them before that (it
//! measures the time to live from when it sent its last answered
//! heartbeat), so two workers never write one partition's state at once.
//! Each grant carries a generation, larger than every earlier one, which
//! the worker's checkpoints of the partition are tagged with.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::MetaError;

/// The shortest time to live a worker may ask for (ms).
pub const MIN_TTL_MS: i64 = 1_000;
/// The longest time to live a worker may ask for (ms).
pub const MAX_TTL_MS: i64 = 300_000;
/// The most partitions a pipeline's source may have here.
pub const MAX_PARTITIONS: usize = 65_536;
/// The longest pipeline name or worker id.
pub const MAX_NAME: usize = 255;
/// The most pipelines with live workers at once.
pub const MAX_PIPELINES: usize = 10_000;
/// The most live workers of one pipeline.
pub const MAX_WORKERS: usize = 4_096;

/// One live worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worker {
    /// When its time to live runs out (ms since the epoch, the leader's
    /// clock).
    pub expires_ms: i64,
}

/// A partition held by a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub worker: String,
    /// Larger than every earlier grant of the pipeline's partitions.
    pub generation: u64,
}

/// One pipeline's workers and leases.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineLeases {
    pub workers: BTreeMap<String, Worker>,
    /// The source's partitions, as the latest heartbeat saw them.
    pub partitions: BTreeSet<i32>,
    pub leases: BTreeMap<i32, Lease>,
    /// The last generation granted.
    pub generation: u64,
}

/// Every pipeline's workers and leases.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessorState {
    pub pipelines: BTreeMap<String, PipelineLeases>,
}

/// A change to the processor leases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProcessorCommand {
    /// A worker is alive for `ttl_ms` more, sees the source's
    /// `partitions` (empty: unknown, keep what is known) and gives up
    /// `release`.
    Heartbeat {
        pipeline: String,
        worker: String,
        ttl_ms: i64,
        partitions: Vec<i32>,
        release: Vec<i32>,
    },
    /// A worker stops: its partitions are free at once.
    Leave { pipeline: String, worker: String },
}

/// What a heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The partitions the worker holds, with their grants' generations.
    pub held: BTreeMap<i32, u64>,
    /// Held partitions the worker should checkpoint and release.
    pub revoke: Vec<i32>,
    /// The pipeline's live workers.
    pub workers: Vec<String>,
}

/// What a processor command answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProcessorOutput {
    Assignment(Assignment),
    Left,
}

impl ProcessorState {
    pub(crate) fn apply(
        &mut self,
        now_ms: i64,
        command: ProcessorCommand,
    ) -> Result<ProcessorOutput, MetaError> {
        match command {
            ProcessorCommand::Heartbeat {
                pipeline,
                worker,
                ttl_ms,
                partitions,
                release,
            } => {
                check_name("pipeline name", &pipeline)?;
                check_name("worker id", &worker)?;
                if !(MIN_TTL_MS..=MAX_TTL_MS).contains(&ttl_ms) {
                    return Err(MetaError::invalid_request(format!(
                        "a worker's time to live is {MIN_TTL_MS} to {MAX_TTL_MS} ms, not {ttl_ms}"
                    )));
                }
                if partitions.len() > MAX_PARTITIONS || partitions.iter().any(|p| *p < 0) {
                    return Err(MetaError::invalid_request(format!(
                        "a source has 0 to {MAX_PARTITIONS} partitions numbered from 0"
                    )));
                }
                self.expire(now_ms);
                if !self.pipelines.contains_key(&pipeline) && self.pipelines.len() >= MAX_PIPELINES
                {
                    return Err(MetaError::invalid_request(format!(
                        "{MAX_PIPELINES} pipelines already have workers"
                    )));
                }
                let p = self.pipelines.entry(pipeline).or_default();
                if !p.workers.contains_key(&worker) && p.workers.len() >= MAX_WORKERS {
                    return Err(MetaError::invalid_request(format!(
                        "the pipeline already has {MAX_WORKERS} workers"
                    )));
                }
                Ok(ProcessorOutput::Assignment(
                    p.heartbeat(now_ms, worker, ttl_ms, partitions, &release),
                ))
            }
            ProcessorCommand::Leave { pipeline, worker } => {
                self.expire(now_ms);
                if let Some(p) = self.pipelines.get_mut(&pipeline) {
                    p.remove_worker(&worker);
                    if p.workers.is_empty() {
                        self.pipelines.remove(&pipeline);
                    }
                }
                Ok(ProcessorOutput::Left)
            }
        }
    }

    /// Drops the workers whose time to live ran out, freeing their
    /// partitions, and the pipelines left without workers.
    fn expire(&mut self, now_ms: i64) {
        for p in self.pipelines.values_mut() {
            let gone: Vec<String> = p
                .workers
                .iter()
                .filter(|(_, w)| w.expires_ms <= now_ms)
                .map(|(id, _)| id.clone())
                .collect();
            for id in gone {
                p.remove_worker(&id);
            }
        }
        self.pipelines.retain(|_, p| !p.workers.is_empty());
    }
}

impl PipelineLeases {
    fn remove_worker(&mut self, worker: &str) {
        self.workers.remove(worker);
        self.leases.retain(|_, l| l.worker != worker);
    }

    fn heartbeat(
        &mut self,
        now_ms: i64,
        worker: String,
        ttl_ms: i64,
        partitions: Vec<i32>,
        release: &[i32],
    ) -> Assignment {
        self.workers.insert(
            worker.clone(),
            Worker {
                expires_ms: now_ms.saturating_add(ttl_ms),
            },
        );
        if !partitions.is_empty() {
            self.partitions = partitions.into_iter().collect();
            let known = &self.partitions;
            self.leases.retain(|p, _| known.contains(p));
        }
        for p in release {
            if self.leases.get(p).is_some_and(|l| l.worker == worker) {
                self.leases.remove(p);
            }
        }
        let target = self.target();
        let mine = target.get(&worker).cloned().unwrap_or_default();
        for p in &mine {
            if !self.leases.contains_key(p) {
                self.generation += 1;
                self.leases.insert(
                    *p,
                    Lease {
                        worker: worker.clone(),
                        generation: self.generation,
                    },
                );
            }
        }
        let held: BTreeMap<i32, u64> = self
            .leases
            .iter()
            .filter(|(_, l)| l.worker == worker)
            .map(|(p, l)| (*p, l.generation))
            .collect();
        let revoke = held.keys().filter(|p| !mine.contains(p)).copied().collect();
        Assignment {
            held,
            revoke,
            workers: self.workers.keys().cloned().collect(),
        }
    }

    /// Where each partition should be: spread evenly over the live workers
    /// (in id order, the first ones taking one more when they do not
    /// divide), each keeping what it holds up to its share.
    pub fn target(&self) -> BTreeMap<String, BTreeSet<i32>> {
        let workers: Vec<&String> = self.workers.keys().collect();
        let mut target: BTreeMap<String, BTreeSet<i32>> = workers
            .iter()
            .map(|w| ((*w).clone(), BTreeSet::new()))
            .collect();
        if workers.is_empty() {
            return target;
        }
        let n = workers.len();
        let base = self.partitions.len() / n;
        let extra = self.partitions.len() % n;
        let share: BTreeMap<&String, usize> = workers
            .iter()
            .enumerate()
            .map(|(i, w)| (*w, base + usize::from(i < extra)))
            .collect();
        let mut unplaced = Vec::new();
        for p in &self.partitions {
            let kept = self.leases.get(p).and_then(|l| {
                let room = share.get(&l.worker)?;
                let set = target.get_mut(&l.worker)?;
                (set.len() < *room).then(|| set.insert(*p))
            });
            if kept.is_none() {
                unplaced.push(*p);
            }
        }
        let mut unplaced = unplaced.into_iter();
        for w in &workers {
            let room = share.get(w).copied().unwrap_or(0);
            if let Some(set) = target.get_mut(*w) {
                while set.len() < room {
                    match unplaced.next() {
                        Some(p) => {
                            set.insert(p);
                        }
                        None => break,
                    }
                }
            }
        }
        target
    }
}

fn check_name(what: &str, name: &str) -> Result<(), MetaError> {
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(MetaError::invalid_request(format!(
            "a {what} is 1 to {MAX_NAME} printable characters"
        )));
    }
    Ok(())
}

#[cfg(test)]
#[path = "processors_tests.rs"]
mod tests;
