//! Logins bounded broker-wide. A password check (SASL/PLAIN, native PLAIN,
//! HTTP Basic) runs thousands of PBKDF2 iterations, milliseconds of CPU
//! that cost the client nothing, so a stream of wrong passwords could take
//! every core. What bounds it:
//!
//! 1. Every login step that may check a password or a token runs on the
//!    blocking pool through [`Logins::run`], at most
//!    [`LoginLimits::concurrent`] at once broker-wide; the others wait their
//!    turn (first come, first served) without holding a thread.
//! 2. [`security::Passwords`] refuses, without checking, a login that
//!    failed lately (same user, password and credential) and an address
//!    whose failed checks used up its allowance, and checks users that do
//!    not exist as costly as users that do.
//! 3. A failed login is answered after [`LoginLimits::failure_delay`]
//!    (Kafka's `connection.failed.authentication.delay.ms`), on the
//!    connection's own task, so a client retrying on one connection waits
//!    and nothing else does.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

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

/// The broker's login bounds (module docs).
pub struct Logins {
    pub passwords: Passwords,
    steps: Arc<Semaphore>,
    failure_delay: Duration,
}

impl Logins {
    pub fn new(limits: &LoginLimits) -> Logins {
        Logins {
            passwords: Passwords::new(limits.failed_per_address),
            steps: Arc::new(Semaphore::new(limits.concurrent.max(1))),
            failure_delay: limits.failure_delay,
        }
    }

    /// Runs a login step on the blocking pool once one of the places is
    /// free. `Err`: the step panicked, or the runtime is going away.
    pub async fn run<T, F>(&self, step: F) -> Result<T, tokio::task::JoinError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        // never closed, so the permit always comes
        let permit = self.steps.clone().acquire_owned().await.ok();
        tokio::task::spawn_blocking(move || {
            let answer = step();
            drop(permit);
            answer
        })
        .await
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

#[cfg(test)]
#[path = "logins_tests.rs"]
mod tests;
