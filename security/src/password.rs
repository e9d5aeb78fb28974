//! Password checks by a user's SCRAM credential: SASL/PLAIN, the HTTP
//! port's Basic logins and the native protocol's PLAIN logins check
//! passwords this way, so one password serves every mechanism.
//!
//! A check costs thousands of PBKDF2 iterations (milliseconds of CPU) and
//! a client nothing, so [`Passwords`] bounds what failed checks cost:
//!
//! 1. An address whose failed checks used up its allowance
//!    ([`FailedLoginLimit`], a token bucket per address) is refused with
//!    [`LoginError::TooManyFailures`] before any PBKDF2 runs. A check takes
//!    a token before it runs and gives it back if the password was right,
//!    so concurrent checks from one address cannot overdraw the bucket,
//!    and logins that succeed cost nothing of it.
//! 2. A user that does not exist is checked against a stand-in credential
//!    with the iteration count of the last real credential checked
//!    ([`scram::DEFAULT_ITERATIONS`] before any), so it costs what a user
//!    costs: neither the time of the answer nor the CPU spent tells whether
//!    the user exists.
//!
//! How many checks run at once is the front ends' to bound (they run them
//! on the blocking pool), and so is how long a refusal waits before it is
//! answered.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use metastore::{Metastore, ScramCredential, ScramMechanism, Security};

use crate::error::LoginError;
use crate::scram;

/// How many failed password checks an address may make: `burst` at once,
/// and `per_minute` more each minute after that.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailedLoginLimit {
    pub burst: u32,
    pub per_minute: f64,
}

impl Default for FailedLoginLimit {
    /// Ten at once, then ten a minute: plenty for a person mistyping or a
    /// client retrying with a stale password, and a few hundred
    /// milliseconds of PBKDF2 a minute for each address that guesses.
    fn default() -> Self {
        FailedLoginLimit {
            burst: 10,
            per_minute: 10.0,
        }
    }
}

/// Addresses whose failed checks are remembered at most. Past it, full
/// buckets (what an address not remembered has anyway) are dropped; if
/// none is full, a new address is not tracked: the front ends' bound on
/// concurrent checks still bounds the total.
const MAX_TRACKED: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// `b` with what it earned since it was last touched.
fn refill(limit: FailedLoginLimit, b: Bucket, now: Instant) -> Bucket {
    let minutes = now.saturating_duration_since(b.at).as_secs_f64() / 60.0;
    Bucket {
        tokens: (b.tokens + minutes * limit.per_minute).min(f64::from(limit.burst)),
        at: now,
    }
}

/// The key an address is counted under: IPv6 per /64, the block one host
/// usually holds (an IPv4 address written as IPv6 is the IPv4 address).
fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::from([s[0], s[1], s[2], s[3], 0, 0, 0, 0])
        }
        v4 => v4,
    }
}

/// The failed-check allowance of each address (a token bucket each).
#[derive(Debug)]
struct FailedLogins {
    limit: FailedLoginLimit,
    buckets: HashMap<IpAddr, Bucket>,
}

impl FailedLogins {
    /// Takes a token for a check from `ip`; `false` when it has none left.
    fn take(&mut self, ip: IpAddr, now: Instant) -> bool {
        let limit = self.limit;
        let burst = f64::from(limit.burst);
        let k = key(ip);
        if !self.buckets.contains_key(&k) && self.buckets.len() >= MAX_TRACKED {
            self.buckets
                .retain(|_, b| refill(limit, *b, now).tokens < burst);
            if self.buckets.len() >= MAX_TRACKED {
                return true;
            }
        }
        let full = Bucket {
            tokens: burst,
            at: now,
        };
        let b = refill(limit, self.buckets.get(&k).copied().unwrap_or(full), now);
        let taken = b.tokens >= 1.0;
        let left = if taken { b.tokens - 1.0 } else { b.tokens };
        self.buckets.insert(
            k,
            Bucket {
                tokens: left,
                at: now,
            },
        );
        taken
    }

    /// Gives back the token of a check that succeeded.
    fn give_back(&mut self, ip: IpAddr, now: Instant) {
        let burst = f64::from(self.limit.burst);
        let k = key(ip);
        let Some(b) = self.buckets.get(&k).copied() else {
            return;
        };
        let b = refill(self.limit, b, now);
        if b.tokens + 1.0 >= burst {
            self.buckets.remove(&k);
        } else {
            self.buckets.insert(
                k,
                Bucket {
                    tokens: b.tokens + 1.0,
                    at: now,
                },
            );
        }
    }
}

/// Password checks with their cost bounded (module docs). One per agent,
/// shared by its front ends.
#[derive(Debug)]
pub struct Passwords {
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
            failures: Mutex::new(FailedLogins {
                limit,
                buckets: HashMap::new(),
            }),
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
        if !self.failures().take(from, now) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(LoginError::TooManyFailures(from.to_canonical()));
        }
        let found = [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .find_map(|m| credential(m).map(|c| (m, c)));
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
        let matches = scram::password_matches(m, c, password);
        match (found.is_some(), matches) {
            (true, true) => {
                self.failures().give_back(from, now);
                Ok(())
            }
            (true, false) => Err(LoginError::WrongPassword(user.to_string())),
            (false, _) => Err(LoginError::UnknownUser(user.to_string())),
        }
    }

    /// PBKDF2 iterations password checks ran so far.
    pub fn iterations_run(&self) -> u64 {
        self.iterations.load(Ordering::Relaxed)
    }

    /// Checks refused without running, their address over its allowance.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, FailedLogins> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
#[path = "password_tests.rs"]
mod tests;
