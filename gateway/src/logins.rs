//! Logins bounded broker-wide. A password check (SASL/PLAIN, native PLAIN,
//! HTTP Basic) runs thousands of PBKDF2 iterations, milliseconds of CPU
//! that cost the client nothing, so a stream of wrong passwords could take
//! every core. What bounds it:
//!
//! 1. Every login step that may check a password or a token runs through
//!    [`Logins::run`] on the broker's login threads: at most
//!    [`LoginLimits::concurrent`] at once, the others waiting their turn
//!    (first come, first served) without holding a thread. The threads run
//!    at the lowest CPU priority (nice 19): when logins flood in from more
//!    addresses than the allowance per address can hold back, the
//!    connections' shards keep the CPU and the logins get what is left.
//! 2. [`security::Passwords`] refuses, without checking, a login that
//!    failed lately (same user, password and credential) and an address
//!    whose failed checks used up its allowance, and checks users that do
//!    not exist as costly as users that do.
//! 3. A failed login is answered after [`LoginLimits::failure_delay`]
//!    (Kafka's `connection.failed.authentication.delay.ms`), on the
//!    connection's own task, so a client retrying on one connection waits
//!    and nothing else does.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, Semaphore};

use dataplane::telemetry::prometheus::write_metric;
use security::{FailedLoginLimit, Passwords};

/// What bounds logins.
#[derive(Debug, Clone)]
pub struct LoginLimits {
    /// Login steps running at once, broker-wide.
    pub concurrent: usize,
    /// Failed password checks each address may make.
    pub failed_per_address: FailedLoginLimit,
    /// How long a failed login waits before it is answered.
    pub failure_delay: Duration,
}

impl Default for LoginLimits {
    /// As many steps at once as the machine has cores: a flood of wrong
    /// passwords from many addresses takes at most the CPU's share the
    /// blocking pool gets, and the connections' shards keep theirs.
    fn default() -> Self {
        LoginLimits {
            concurrent: std::thread::available_parallelism().map_or(1, |n| n.get()),
            failed_per_address: FailedLoginLimit::default(),
            failure_delay: DEFAULT_FAILURE_DELAY,
        }
    }
}

/// Kafka's default `connection.failed.authentication.delay.ms`.
pub const DEFAULT_FAILURE_DELAY: Duration = Duration::from_millis(100);

/// Why a login step gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum StepFailed {
    #[error("the login step panicked")]
    Panicked,
    #[error("the login threads are gone")]
    NoThreads,
}

type Job = Box<dyn FnOnce() + Send>;

/// The broker's login bounds (module docs).
pub struct Logins {
    pub passwords: Passwords,
    steps: Arc<Semaphore>,
    /// The login threads' queue; they end when it is dropped.
    jobs: mpsc::Sender<Job>,
    failure_delay: Duration,
}

impl Logins {
    pub fn new(limits: &LoginLimits) -> Logins {
        let concurrent = limits.concurrent.max(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..concurrent {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("login-{i}"))
                .spawn(move || login_thread(&queue));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start a login thread");
            }
        }
        Logins {
            passwords: Passwords::new(limits.failed_per_address),
            steps: Arc::new(Semaphore::new(concurrent)),
            jobs,
            failure_delay: limits.failure_delay,
        }
    }

    /// Runs a login step on a login thread once one of the places is free.
    pub async fn run<T, F>(&self, step: F) -> Result<T, StepFailed>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        // never closed, so the permit always comes
        let permit = self.steps.clone().acquire_owned().await.ok();
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move || {
            let outcome = catch_unwind(AssertUnwindSafe(step));
            drop(permit);
            let _ = answer.send(outcome);
        });
        self.jobs.send(job).map_err(|_| StepFailed::NoThreads)?;
        match answered.await {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(_)) => Err(StepFailed::Panicked),
            // no thread took the job (none could be started)
            Err(_) => Err(StepFailed::NoThreads),
        }
    }

    /// Waits as long as a failed login is held before it is answered.
    pub async fn hold_failure(&self) {
        tokio::time::sleep(self.failure_delay).await;
    }

    /// Prometheus text of the login figures.
    pub fn render(&self) -> String {
        let mut s = String::new();
        write_metric(
            &mut s,
            "aerostream_login_password_checks_refused_total",
            "counter",
            "Password logins refused unchecked: their address failed too many lately",
            self.passwords.refused(),
        );
        write_metric(
            &mut s,
            "aerostream_login_password_failures_repeated_total",
            "counter",
            "Password logins refused unchecked: the same user, password and credential failed lately",
            self.passwords.repeated(),
        );
        write_metric(
            &mut s,
            "aerostream_login_pbkdf2_iterations_total",
            "counter",
            "PBKDF2 iterations run to check passwords (PLAIN, HTTP Basic)",
            self.passwords.iterations_run(),
        );
        s
    }
}

/// A login thread: lowers its own CPU priority, then runs jobs until the
/// queue is dropped.
fn login_thread(queue: &Mutex<mpsc::Receiver<Job>>) {
    lowest_priority();
    loop {
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Gives the calling thread the lowest CPU priority (nice 19); on failure
/// (a sandbox refusing it) the thread keeps its priority.
#[expect(
    unsafe_code,
    reason = "setpriority has no safe wrapper in the crates at hand"
)]
fn lowest_priority() {
    // SAFETY: setpriority takes plain integers and touches no memory of
    // ours; on Linux, PRIO_PROCESS with the thread's id changes that thread
    // only.
    let tid = unsafe { libc::gettid() };
    let done = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
    if done != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "the login thread keeps its CPU priority");
    }
}

#[cfg(test)]
#[path = "logins_tests.rs"]
mod tests;
