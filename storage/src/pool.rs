//! Worker threads for blocking device work, in two process-wide pools.
//!
//! - [`SEAL`] runs the durable end of rolls (`flusher`): fsyncs of sealed
//!   segments and recovery-point checkpoints.
//! - [`WRITEBACK`] runs the blocking half of paced writeback (`writeback`):
//!   the wait for a chunk's device writes and the page-cache drop behind it.
//!
//! Two pools, not one, for two reasons:
//! 1. A seal job waits for the writeback jobs of its segment before it
//!    reports success (a failed writeback wait consumes the I/O error its
//!    fsync would otherwise report). Were both on one pool, a seal job
//!    queued ahead of those writeback jobs on the same worker would wait
//!    for them forever. Writeback jobs wait for nothing but the device.
//! 2. A seal's `fdatasync` of a whole segment can take a long time; a
//!    partition whose appends are held by the four-chunk writeback bound
//!    must not wait behind another partition's seal.
//!
//! Jobs given the same route run on the same worker, in submission order.
//! If no worker thread could be started, a job runs on the caller's thread.
//!
//! Workers run at a lower CPU priority (nice
//! [`cache::background::BACKGROUND_NICE`]): their work
//! is mostly waiting for the device, but starting writeback and syncing
//! also cost CPU (block allocation, page submission), and on a broker with
//! one core per shard that CPU would otherwise be taken from the shard
//! thread in slices of milliseconds, which appends and fetches feel as
//! latency. The scheduler still gives them their share (about a tenth
//! under full load), so writeback never stops.

use std::sync::mpsc::{self, Sender};
use std::sync::{Condvar, Mutex, OnceLock};

/// Work a pool runs.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed set of named worker threads, started on first use.
pub(crate) struct Pool {
    name: &'static str,
    size: usize,
    workers: OnceLock<Vec<Sender<Job>>>,
}

/// Fsyncs of sealed segments and recovery-point checkpoints.
pub(crate) static SEAL: Pool = Pool::new("aerostream-flush", 2);
/// Waits and cache drops of paced writeback chunks.
pub(crate) static WRITEBACK: Pool = Pool::new("aerostream-writeback", 2);

impl Pool {
    const fn new(name: &'static str, size: usize) -> Pool {
        Pool {
            name,
            size,
            workers: OnceLock::new(),
        }
    }

    /// Runs `job` on the worker that owns `route`.
    pub(crate) fn submit(&self, route: u64, job: Job) {
        let workers = self.workers();
        if workers.is_empty() {
            job();
            return;
        }
        let i = (route % workers.len() as u64) as usize;
        if let Err(mpsc::SendError(job)) = workers[i].send(job) {
            job();
        }
    }

    fn workers(&self) -> &[Sender<Job>] {
        self.workers.get_or_init(|| {
            let mut out = Vec::with_capacity(self.size);
            for n in 0..self.size {
                let (tx, rx) = mpsc::channel::<Job>();
                let name = self.name;
                let spawned = std::thread::Builder::new()
                    .name(format!("{}-{n}", self.name))
                    .spawn(move || {
                        cache::background::lower_thread_priority(name);
                        for job in rx {
                            job();
                        }
                    });
                match spawned {
                    Ok(_) => out.push(tx),
                    Err(e) => {
                        tracing::warn!(pool = self.name, error = %e, "could not start a worker thread; its jobs will run inline");
                    }
                }
            }
            out
        })
    }
}

/// A latch that holds jobs back while closed; lets tests observe work whose
/// device calls have not happened yet.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    closed: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    #[cfg(test)]
    pub(crate) fn closed() -> std::sync::Arc<Gate> {
        std::sync::Arc::new(Gate {
            closed: Mutex::new(true),
            cv: Condvar::new(),
        })
    }

    #[cfg(test)]
    pub(crate) fn open(&self) {
        let mut g = match self.closed.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = false;
        self.cv.notify_all();
    }

    /// Blocks while the gate is closed.
    pub(crate) fn pass(&self) {
        let mut g = match self.closed.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        while *g {
            g = match self.cv.wait(g) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }
}

/// Opens its gate when dropped (so a failing test cannot wedge a worker).
#[cfg(test)]
pub(crate) struct GateGuard(pub(crate) std::sync::Arc<Gate>);

#[cfg(test)]
impl GateGuard {
    pub(crate) fn open(&self) {
        self.0.open();
    }
}

#[cfg(test)]
impl Drop for GateGuard {
    fn drop(&mut self) {
        self.0.open();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cache::background::{own_nice, BACKGROUND_NICE};

    #[test]
    fn workers_run_below_the_priority_of_the_thread_that_submits() {
        let (tx, rx) = mpsc::channel();
        WRITEBACK.submit(
            7,
            Box::new(move || {
                let _ = tx.send(own_nice());
            }),
        );
        let worker = rx.recv().expect("the job ran").expect("worker nice");
        let caller = own_nice().expect("caller nice");
        // Workers start from the nice of the first thread that used the
        // pool: this process's, as every thread here inherits it.
        assert_eq!(
            worker,
            (caller + BACKGROUND_NICE).min(19),
            "caller {caller}"
        );
    }
}
