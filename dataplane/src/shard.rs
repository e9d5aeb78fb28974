//! Shards: single-threaded tokio runtimes on their own OS threads, pinned to a
//! core when there are no more shards than cores.

use std::thread::JoinHandle;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The running shards.
pub struct Shards {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl Shards {
    /// Starts `n` shards (at least one).
    pub fn start(n: usize) -> std::io::Result<Shards> {
        let n = n.max(1);
        let cores = std::thread::available_parallelism()
            .map(|c| c.get())
            .unwrap_or(1);
        let mut handles = Vec::with_capacity(n);
        let mut stops = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name(format!("shard-{i}"))
                .build()?;
            handles.push(rt.handle().clone());
            let (tx, rx) = oneshot::channel::<()>();
            stops.push(tx);
            let pin = n <= cores;
            let t = std::thread::Builder::new()
                .name(format!("shard-{i}"))
                .spawn(move || {
                    if pin {
                        pin_to_core(i);
                    }
                    rt.block_on(async {
                        let _ = rx.await;
                    });
                    // Give spawned tasks (connections, partition closes) a moment to finish.
                    rt.shutdown_timeout(std::time::Duration::from_secs(2));
                })?;
            threads.push(t);
        }
        Ok(Shards {
            handles,
            stops,
            threads,
        })
    }

    pub fn handles(&self) -> Vec<Handle> {
        self.handles.clone()
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Stops every shard runtime and joins its thread.
    pub fn stop(self) {
        for s in self.stops {
            let _ = s.send(());
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn pin_to_core(core: usize) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(core).is_ok() {
        if let Err(e) = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set) {
            tracing::debug!(core, error = %e, "could not pin shard thread");
        }
    }
}
