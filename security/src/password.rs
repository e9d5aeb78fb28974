//! Password checks by a user's SCRAM credential: SASL/PLAIN, the HTTP
//! port's Basic logins and the native protocol's PLAIN logins check
//! passwords this way, so one password serves every mechanism.
//!
//! A check costs thousands of PBKDF2 iterations (milliseconds of CPU) and
//! a client nothing, so [`Passwords`] bounds what failed checks cost. In
//! the order a check goes:
//!
//! 1. A login that failed lately, with the same user, password and
//!    credential, fails again without PBKDF2, and uses up nothing
//!    (`recent_failures`): a client retrying a stale password costs
//!    nothing and locks no one out.
//! 2. An address whose failed checks used up its allowance
//!    ([`FailedLoginLimit`], a token bucket per address: `login_limit`) is
//!    refused with [`LoginError::TooManyFailures`] before any PBKDF2 runs.
//!    A check takes a token before it runs and gives it back if the
//!    password was right, so concurrent checks from one address cannot
//!    overdraw the bucket, and logins that succeed use up nothing.
//! 3. A user that does not exist is checked against a stand-in credential
//!    with the iteration count of the last real credential checked
//!    ([`scram::DEFAULT_ITERATIONS`] before any), so it costs what a user
//!    costs: neither the time of the answer nor the CPU spent tells whether
//!    the user exists.
//!
//! How many checks run at once is the front ends' to bound (they run them
//! on the blocking pool), and so is how long a refusal waits before it is
//! answered.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use metastore::{Metastore, ScramCredential, ScramMechanism, Security};

use crate::error::LoginError;
use crate::login_limit::{FailedLoginLimit, FailedLogins};
use crate::recent_failures::RecentFailures;
use crate::scram;

/// Password checks with their cost bounded (module docs). One per agent,
/// shared by its front ends.
#[derive(Debug)]
pub struct Passwords {
    recent: Mutex<RecentFailures>,
    failures: Mutex<FailedLogins>,
    /// What a user that does not exist is checked against: a SHA-512
    /// credential no password matches...
    stand_in: ScramCredential,
    /// ...with the iterations of the last real credential checked.
    usual_iterations: AtomicU32,
    /// PBKDF2 iterations run by checks so far.
    iterations: AtomicU64,
    /// Checks refused without running, their address over its allowance.
    refused: AtomicU64,
    /// Checks answered without running: the same login failed lately.
    repeated: AtomicU64,
}

impl Default for Passwords {
    fn default() -> Self {
        Passwords::new(FailedLoginLimit::default())
    }
}

impl Passwords {
    pub fn new(limit: FailedLoginLimit) -> Passwords {
        let len = ScramMechanism::Sha512.hash_len();
        Passwords {
            recent: Mutex::new(RecentFailures::new()),
            failures: Mutex::new(FailedLogins::new(limit)),
            // The salt needs no secrecy (PLAIN and Basic never show it) and
            // a zero key is no SHA-512 digest anyone can produce.
            stand_in: ScramCredential {
                salt: vec![0; 32],
                stored_key: vec![0; len],
                server_key: vec![0; len],
                iterations: scram::DEFAULT_ITERATIONS,
            },
            usual_iterations: AtomicU32::new(scram::DEFAULT_ITERATIONS),
            iterations: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            repeated: AtomicU64::new(0),
        }
    }

    /// Whether `password` is `user`'s, by the user's SCRAM credential
    /// (SHA-512 first), for a client at `from`.
    pub fn check(
        &self,
        catalog: &Metastore,
        user: &str,
        password: &str,
        from: IpAddr,
        now: Instant,
    ) -> Result<(), LoginError> {
        self.check_with(
            |m| catalog.scram_credential(user, m),
            user,
            password,
            from,
            now,
        )
    }

    /// [`Passwords::check`] with the user's credentials looked up by
    /// `credential`.
    pub fn check_with(
        &self,
        credential: impl Fn(ScramMechanism) -> Option<ScramCredential>,
        user: &str,
        password: &str,
        from: IpAddr,
        now: Instant,
    ) -> Result<(), LoginError> {
        let found = [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .find_map(|m| credential(m).map(|c| (m, c)));
        let refusal = || match found {
            Some(_) => LoginError::WrongPassword(user.to_string()),
            None => LoginError::UnknownUser(user.to_string()),
        };
        let tag = lock(&self.recent).tag(user, password, found.as_ref().map(|(_, c)| c));
        if tag
            .as_deref()
            .is_some_and(|t| lock(&self.recent).knows(t, now))
        {
            self.repeated.fetch_add(1, Ordering::Relaxed);
            return Err(refusal());
        }
        if !lock(&self.failures).take(from, now) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(LoginError::TooManyFailures(from.to_canonical()));
        }
        let stand_in;
        let (m, c) = match &found {
            Some((m, c)) => {
                self.usual_iterations.store(c.iterations, Ordering::Relaxed);
                (*m, c)
            }
            None => {
                stand_in = ScramCredential {
                    iterations: self.usual_iterations.load(Ordering::Relaxed),
                    ..self.stand_in.clone()
                };
                (ScramMechanism::Sha512, &stand_in)
            }
        };
        self.iterations
            .fetch_add(u64::from(c.iterations), Ordering::Relaxed);
        // run for the stand-in too: the same work as for a user
        let matches = scram::password_matches(m, c, password);
        if matches && found.is_some() {
            lock(&self.failures).give_back(from, now);
            return Ok(());
        }
        if let Some(tag) = tag {
            lock(&self.recent).remember(tag, now);
        }
        Err(refusal())
    }

    /// PBKDF2 iterations password checks ran so far.
    pub fn iterations_run(&self) -> u64 {
        self.iterations.load(Ordering::Relaxed)
    }

    /// Checks refused without running, their address over its allowance.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Checks answered without running: the same login failed lately.
    pub fn repeated(&self) -> u64 {
        self.repeated.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
#[path = "password_tests.rs"]
mod tests;
