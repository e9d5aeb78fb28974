//! The allowance of failed password checks per client address: a token
//! bucket each, IPv6 per /64, with the memory it takes bounded.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// How many failed password checks an address may make: `burst` at once,
/// and `per_minute` more each minute after that.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailedLoginLimit {
    pub burst: u32,
    pub per_minute: f64,
}

impl Default for FailedLoginLimit {
    /// Ten at once, then ten a minute: plenty for a person mistyping (a
    /// client retrying one wrong password uses up one: see
    /// `recent_failures`), and a few hundred milliseconds of PBKDF2 a
    /// minute for each address that guesses.
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
pub(crate) struct FailedLogins {
    limit: FailedLoginLimit,
    buckets: HashMap<IpAddr, Bucket>,
}

impl FailedLogins {
    pub(crate) fn new(limit: FailedLoginLimit) -> FailedLogins {
        FailedLogins {
            limit,
            buckets: HashMap::new(),
        }
    }

    /// Takes a token for a check from `ip`; `false` when it has none left.
    pub(crate) fn take(&mut self, ip: IpAddr, now: Instant) -> bool {
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
    pub(crate) fn give_back(&mut self, ip: IpAddr, now: Instant) {
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

#[cfg(test)]
#[path = "login_limit_tests.rs"]
mod tests;
