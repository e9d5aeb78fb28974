//! Failed password checks remembered for a while, so that a client
//! retrying the same wrong password (a stale one in its configuration:
//! librdkafka reconnects and logs in again at once after a failure) is
//! refused without PBKDF2 and without using up its address's allowance:
//! only new guesses are checked and counted.
//!
//! A failure is remembered by a keyed hash (HMAC-SHA256 with a random key
//! per process) of the user, the password and the user's credential at the
//! time, never the password itself; so a credential that changed (the
//! password set anew, the user made) makes every remembered failure of its
//! user stale at once, and the next login is checked.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_lc_rs::hmac;
use metastore::ScramCredential;

/// How long a failure is remembered.
const TTL: Duration = Duration::from_secs(600);

/// Failures remembered at most; past it the older half is forgotten.
const MAX_REMEMBERED: usize = 65_536;

pub(crate) struct RecentFailures {
    /// `None` when the system gave no randomness: nothing is remembered.
    key: Option<hmac::Key>,
    seen: HashMap<Vec<u8>, Instant>,
}

impl std::fmt::Debug for RecentFailures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentFailures")
            .field("remembered", &self.seen.len())
            .finish()
    }
}

impl RecentFailures {
    pub(crate) fn new() -> RecentFailures {
        let mut raw = [0u8; 32];
        let key = aws_lc_rs::rand::fill(&mut raw)
            .ok()
            .map(|()| hmac::Key::new(hmac::HMAC_SHA256, &raw));
        RecentFailures {
            key,
            seen: HashMap::new(),
        }
    }

    /// The tag of `user` logging in with `password` while its credential
    /// is `credential` (`None`: no such user).
    pub(crate) fn tag(
        &self,
        user: &str,
        password: &str,
        credential: Option<&ScramCredential>,
    ) -> Option<Vec<u8>> {
        let mut ctx = hmac::Context::with_key(self.key.as_ref()?);
        // each part length-prefixed: no other split of the bytes tags alike
        for part in [user.as_bytes(), password.as_bytes()] {
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part);
        }
        if let Some(c) = credential {
            ctx.update(&c.iterations.to_be_bytes());
            for part in [&c.salt, &c.stored_key] {
                ctx.update(&(part.len() as u64).to_be_bytes());
                ctx.update(part);
            }
        }
        Some(ctx.sign().as_ref().to_vec())
    }

    /// Whether this login failed lately.
    pub(crate) fn knows(&self, tag: &[u8], now: Instant) -> bool {
        self.seen
            .get(tag)
            .is_some_and(|at| now.saturating_duration_since(*at) < TTL)
    }

    pub(crate) fn remember(&mut self, tag: Vec<u8>, now: Instant) {
        if self.seen.len() >= MAX_REMEMBERED {
            self.seen
                .retain(|_, at| now.saturating_duration_since(*at) < TTL / 2);
            if self.seen.len() >= MAX_REMEMBERED {
                self.seen.clear();
            }
        }
        self.seen.insert(tag, now);
    }
}
