//! Client quotas ([`metastore::quota`]) enforced as Kafka enforces them: each
//! agent measures the bytes it takes in (Produce, the request's size) and
//! gives out (Fetch, the records' size) per quota entity over a sliding
//! window, and when a client is over its rate answers with
//! `throttle_time_ms` and stops reading that connection's requests for that
//! long (KIP-219). Clients that honour the field back off by themselves;
//! the muted socket holds back those that do not.
//!
//! The quota is the most specific configured one ([`QuotaEntity::candidates`]).
//! All connections of a user (or client id) share its quota on an agent; a
//! `<default>` quota is each user's (or client id's) own, not one shared by
//! all, as in Kafka.
//! A request forwarded by another agent is counted where the client is
//! connected, not again at the owner.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use metastore::quota::{EntityName, QuotaEntity, QuotaTable};

/// Seconds of traffic a rate is measured over (Kafka's
/// `quota.window.num` × `quota.window.size.seconds`).
pub const WINDOW_SECONDS: u64 = 10;

/// How many windows are kept before idle ones are swept out.
const IDLE_SWEEP_AT: usize = 4096;

/// The longest a client is told to wait at once.
pub const MAX_THROTTLE: Duration = Duration::from_secs(WINDOW_SECONDS);

/// The bytes one entity moved per second, over the last
/// [`WINDOW_SECONDS`] seconds.
#[derive(Debug, Default)]
struct Window {
    /// (second since the manager started, bytes), oldest first.
    seconds: VecDeque<(u64, f64)>,
}

impl Window {
    /// Adds `bytes` at `now` and returns how long the entity must wait for
    /// its rate over the window to come back to `limit` bytes/s.
    fn record(&mut self, now: Duration, bytes: f64, limit: f64) -> Duration {
        let second = now.as_secs();
        while self
            .seconds
            .front()
            .is_some_and(|(s, _)| *s + WINDOW_SECONDS <= second)
        {
            self.seconds.pop_front();
        }
        match self.seconds.back_mut() {
            Some((s, b)) if *s == second => *b += bytes,
            _ => self.seconds.push_back((second, bytes)),
        }
        let total: f64 = self.seconds.iter().map(|(_, b)| b).sum();
        let oldest = self.seconds.front().map_or(second, |(s, _)| *s);
        // at least one second, so a first request is not measured over an
        // instant
        let elapsed = (now.as_secs_f64() - oldest as f64).max(1.0);
        let wait = total / limit - elapsed;
        if wait > 0.0 {
            Duration::from_secs_f64(wait).min(MAX_THROTTLE)
        } else {
            Duration::ZERO
        }
    }
}

/// What is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Traffic {
    /// Produce request bytes.
    Produce,
    /// Fetched record bytes.
    Fetch,
    /// Microseconds spent serving requests (`request_percentage`).
    Request,
}

impl Traffic {
    fn key(self) -> &'static str {
        match self {
            Traffic::Produce => metastore::quota::PRODUCER_BYTE_RATE,
            Traffic::Fetch => metastore::quota::CONSUMER_BYTE_RATE,
            Traffic::Request => metastore::quota::REQUEST_PERCENTAGE,
        }
    }

    /// The quota's value in units per second: bytes/s as configured, and
    /// for request time microseconds per second (1% of a thread is
    /// 10,000 µs each second).
    fn per_second(self, configured: f64) -> f64 {
        match self {
            Traffic::Produce | Traffic::Fetch => configured,
            Traffic::Request => configured * 10_000.0,
        }
    }
}

/// The quota that applies to `user` and `client_id` for `traffic`: whose
/// it is (a `<default>` entry stands for the client's own name) and its
/// units per second (bytes, or µs of request time), if any is configured.
pub fn applicable(
    table: &QuotaTable,
    traffic: Traffic,
    user: &str,
    client_id: &str,
) -> Option<(QuotaEntity, f64)> {
    let own =
        |side: Option<EntityName>, name: &str| side.map(|_| EntityName::Named(name.to_string()));
    QuotaEntity::candidates(user, client_id)
        .into_iter()
        .find_map(|e| {
            let v = traffic.per_second(table.get(&e)?.get(traffic.key())?.0);
            let whose = QuotaEntity {
                user: own(e.user, user),
                client_id: own(e.client_id, client_id),
            };
            Some((whose, v))
        })
}

/// Each entity's window, and the second of the last sweep of idle ones.
type Windows = (HashMap<(QuotaEntity, Traffic), Window>, u64);

/// Every entity's windows on this agent.
#[derive(Debug)]
pub struct Quotas {
    started: Instant,
    windows: Mutex<Windows>,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            started: Instant::now(),
            windows: Mutex::new((HashMap::new(), 0)),
        }
    }
}

impl Quotas {
    /// Counts `bytes` against `entity`'s `limit` and returns how long its
    /// client must now wait.
    pub fn record(
        &self,
        entity: QuotaEntity,
        traffic: Traffic,
        limit: f64,
        bytes: usize,
        now: Instant,
    ) -> Duration {
        let at = now.saturating_duration_since(self.started);
        let Ok(mut guard) = self.windows.lock() else {
            return Duration::ZERO;
        };
        let (windows, last_sweep) = &mut *guard;
        let second = at.as_secs();
        if windows.len() >= IDLE_SWEEP_AT && *last_sweep != second {
            // clients come and go: drop windows with nothing in them now
            *last_sweep = second;
            windows.retain(|_, w| {
                w.seconds
                    .back()
                    .is_some_and(|(s, _)| s + WINDOW_SECONDS > second)
            });
        }
        windows
            .entry((entity, traffic))
            .or_default()
            .record(at, bytes as f64, limit)
    }
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
