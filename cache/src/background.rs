//! CPU-heavy background work at a lower priority than the threads that
//! serve clients.
//!
//! A broker runs one shard thread per core. Work that is not on any
//! client's path (seal fsyncs, paced writeback, checksums of sealed
//! segments) still takes CPU, and at the default priority the scheduler
//! splits a core evenly between it and a shard, so a shard waits in slices
//! of milliseconds for as long as the burst lasts. Threads that run it
//! lower their own priority by [`BACKGROUND_NICE`]: the scheduler then
//! gives them about a tenth of a busy core and all of an idle one, so the
//! work always finishes and the shard barely notices it.

use std::io;

/// How much nicer than the thread that starts it background work runs (the
/// nice scale goes from -20 to 19, the lowest priority).
pub const BACKGROUND_NICE: i32 = 10;

/// The calling thread's nice value, from /proc (field 19 of its stat);
/// `None` where /proc cannot tell.
pub fn own_nice() -> Option<i32> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // The command name (field 2) may hold spaces: count after its ')'.
    let after = stat.get(stat.rfind(')')? + 2..)?;
    after.split(' ').nth(16)?.parse().ok()
}

/// Lowers the calling thread's CPU priority by [`BACKGROUND_NICE`]. Linux
/// keeps a nice value per thread; lowering one's own priority needs no
/// privilege (raising it back would, so only threads that do nothing else
/// call this). A failure only costs latency elsewhere, so it is logged.
pub fn lower_thread_priority(label: &str) {
    let nice = (own_nice().unwrap_or(0) + BACKGROUND_NICE).min(19);
    // SAFETY: setpriority reads no memory of ours; `who` 0 with
    // PRIO_PROCESS names the calling thread.
    #[expect(unsafe_code, reason = "nix has no setpriority wrapper")]
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        tracing::debug!(thread = label, error = %e, "could not lower a thread's priority");
    }
}

/// Runs `job` on a thread of its own named `name`, at the lower priority,
/// and waits for its result without blocking the caller's runtime. For
/// jobs of milliseconds or more (the thread is started for each one).
pub async fn run<T: Send + 'static>(
    name: &str,
    job: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let label = name.to_string();
    std::thread::Builder::new()
        .name(label.clone())
        .spawn(move || {
            lower_thread_priority(&label);
            let _ = tx.send(job());
        })?;
    rx.await
        .map_err(|_| io::Error::other(format!("the {name} thread stopped before it answered")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn background_work_runs_below_the_callers_priority_and_answers() {
        let caller = own_nice().expect("caller nice");
        let (worker, answer) = run("test-background", || (own_nice(), 6 * 7))
            .await
            .expect("ran");
        assert_eq!(answer, 42);
        assert_eq!(
            worker.expect("worker nice"),
            (caller + BACKGROUND_NICE).min(19)
        );
        // the caller's own priority is untouched
        assert_eq!(own_nice(), Some(caller));
    }

    #[tokio::test]
    async fn a_job_that_panics_is_an_error_not_a_hang() {
        let r = run("test-panics", || -> u8 { panic!("boom") }).await;
        assert!(r.is_err());
    }
}
