//! Limits on what clients can hold open: connections (in total and per
//! address), and the bytes of requests being served at once.
//!
//! - A connection is admitted only while fewer than `max.connections` are
//!   open and fewer than `max.connections.per.ip` come from its address;
//!   otherwise it is closed at once, counted, and logged (at most one line per
//!   second, so a flood cannot flood the log too).
//! - A connection serves one request at a time (Kafka clients expect answers
//!   in order), so the bytes it holds in flight are bounded by the frame cap
//!   (`socket.request.max.bytes`). Across connections,
//!   `queued.max.request.bytes` bounds the request bytes read and not yet
//!   answered: a connection waits for room before it reads a frame's body.
//! - That budget is for clients that logged in. Before its login completes
//!   (on a listener that authenticates, and the native hello everywhere) a
//!   connection reads one small frame at a time (512 KiB on the Kafka
//!   listener, Kafka's `sasl.server.max.receive.size`, and 64 KiB on the
//!   native one), as its bytes arrive, outside the budget; and it must
//!   log in within the login timeout, or it is closed. So clients that
//!   never log in hold at most a small frame each, for seconds, and cannot
//!   make anyone else's requests wait.
//! - The per-address cap defaults to [`DEFAULT_MAX_CONNECTIONS_PER_IP`],
//!   far below the total: one host cannot take every place.
//! - Each connection gets an id that is never reused; state bound to a
//!   connection (fetch sessions) goes when it closes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use dataplane::telemetry::prometheus::write_metric;

/// Connection limits (Kafka's names where Kafka has the setting).
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// `max.connections`.
    pub max_connections: usize,
    /// `max.connections.per.ip`.
    pub max_connections_per_ip: usize,
    /// `connections.max.idle.ms`: a connection that sends no complete request
    /// for this long is closed (a request must arrive whole within it).
    pub idle_timeout: Duration,
    /// How long a connection has to log in (the native hello, and the SASL
    /// authentication a listener requires) before it is closed.
    pub login_timeout: Duration,
    /// How long writing one response may take before the connection is
    /// closed (a client that stops reading would otherwise pin the response,
    /// and the segment files it sends, forever).
    pub write_timeout: Duration,
    /// `queued.max.request.bytes`: request bytes being served at once, broker-wide.
    pub queued_max_request_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 4096,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            idle_timeout: Duration::from_secs(600),
            login_timeout: DEFAULT_LOGIN_TIMEOUT,
            write_timeout: Duration::from_secs(60),
            queued_max_request_bytes: 512 * 1024 * 1024,
        }
    }
}

/// The default of `max.connections.per.ip`: a sixteenth of the default
/// `max.connections`. A client application needs a few connections per
/// agent (librdkafka one per broker and client instance), so this leaves
/// room for a host of many clients or a NAT, while one address cannot fill
/// the broker. Behind a load balancer every client comes from the
/// balancer's address: the agent then defaults it to `max.connections`.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 256;

/// The default of [`ConnectionLimits::login_timeout`]: a client
/// connects and logs in within milliseconds; one still not logged in after
/// this long is stalling.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    TooManyConnections,
    TooManyFromAddress,
}

/// Counters of the connection limits, for `/metrics`.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    pub refused_total: AtomicU64,
    pub refused_per_ip: AtomicU64,
    pub idle_closed: AtomicU64,
    /// Connections closed for not logging in within the login timeout.
    pub login_timeouts: AtomicU64,
    pub write_timeouts: AtomicU64,
}

/// The registry of open connections.
pub struct Connections {
    limits: ConnectionLimits,
    open: Mutex<OpenConnections>,
    next_id: AtomicU64,
    memory: Arc<Semaphore>,
    memory_permits: u32,
    pub counters: ConnectionCounters,
    last_warning: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct OpenConnections {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// An admitted connection; dropping it frees its place.
pub struct Admitted {
    registry: Arc<Connections>,
    ip: IpAddr,
    pub id: u64,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.registry.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

/// Room for one request's bytes; dropping it gives the room back.
pub struct RequestRoom {
    _permit: Option<OwnedSemaphorePermit>,
}

impl RequestRoom {
    /// No room from the broker-wide budget: for a frame read before its
    /// connection logged in, which is small and bounded per connection.
    pub fn outside_budget() -> RequestRoom {
        RequestRoom { _permit: None }
    }
}

/// Semaphore permits count 1 KiB each, so the limit fits `u32`.
const PERMIT_BYTES: usize = 1024;

impl Connections {
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        let permits = (limits.queued_max_request_bytes / PERMIT_BYTES).clamp(1, u32::MAX as usize);
        Arc::new(Connections {
            memory: Arc::new(Semaphore::new(permits)),
            memory_permits: permits as u32,
            limits,
            open: Mutex::new(OpenConnections::default()),
            next_id: AtomicU64::new(1),
            counters: ConnectionCounters::default(),
            last_warning: Mutex::new(None),
        })
    }

    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OpenConnections> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a connection from `ip`, or says why not.
    /// A fresh connection id for a request that arrived some other way
    /// (forwarded by another agent); never equal to a client connection's.
    pub fn next_connection_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refused> {
        let refused = {
            let mut open = self.lock();
            if open.total >= self.limits.max_connections {
                Some(Refused::TooManyConnections)
            } else if open.per_ip.get(&ip).copied().unwrap_or(0)
                >= self.limits.max_connections_per_ip
            {
                Some(Refused::TooManyFromAddress)
            } else {
                open.total += 1;
                *open.per_ip.entry(ip).or_default() += 1;
                None
            }
        };
        match refused {
            None => Ok(Admitted {
                registry: self.clone(),
                ip,
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
            }),
            Some(why) => {
                let (counter, limit, what) = match why {
                    Refused::TooManyConnections => (
                        &self.counters.refused_total,
                        self.limits.max_connections,
                        "max.connections",
                    ),
                    Refused::TooManyFromAddress => (
                        &self.counters.refused_per_ip,
                        self.limits.max_connections_per_ip,
                        "max.connections.per.ip",
                    ),
                };
                counter.fetch_add(1, Ordering::Relaxed);
                self.warn_at_most_every_second(|| {
                    tracing::warn!(%ip, limit, setting = what, "connection refused: the limit of open connections is reached")
                });
                Err(why)
            }
        }
    }

    fn warn_at_most_every_second(&self, warn: impl FnOnce()) {
        let mut last = self.last_warning.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
            *last = Some(now);
            warn();
        }
    }

    /// Connections open now.
    pub fn open_count(&self) -> usize {
        self.lock().total
    }

    /// Waits for room for a request of `size` bytes among all requests being
    /// served. A request larger than the whole budget waits until it is alone.
    pub async fn room_for(&self, size: usize) -> RequestRoom {
        let wanted = size
            .div_ceil(PERMIT_BYTES)
            .clamp(1, self.memory_permits as usize) as u32;
        RequestRoom {
            _permit: self.memory.clone().acquire_many_owned(wanted).await.ok(),
        }
    }

    /// Request bytes holding room in the broker-wide budget now (in
    /// 1 KiB units, rounded up per request).
    pub fn request_bytes_in_use(&self) -> usize {
        (self.memory_permits as usize - self.memory.available_permits()) * PERMIT_BYTES
    }

    /// Prometheus text of the connection figures.
    pub fn render(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut s = String::new();
        write_metric(
            &mut s,
            "aerostream_connections_open",
            "gauge",
            "Kafka connections open now",
            self.open_count() as u64,
        );
        write_metric(
            &mut s,
            "aerostream_connections_limit",
            "gauge",
            "The max.connections setting",
            self.limits.max_connections as u64,
        );
        s.push_str("# HELP aerostream_connections_refused_total Connections closed at accept because a limit was reached\n# TYPE aerostream_connections_refused_total counter\n");
        for (limit, counter) in [
            ("max.connections", &self.counters.refused_total),
            ("max.connections.per.ip", &self.counters.refused_per_ip),
        ] {
            s.push_str(&format!(
                "aerostream_connections_refused_total{{limit=\"{limit}\"}} {}\n",
                g(counter)
            ));
        }
        write_metric(
            &mut s,
            "aerostream_connections_idle_closed_total",
            "counter",
            "Connections closed after connections.max.idle.ms without a request",
            g(&self.counters.idle_closed),
        );
        write_metric(
            &mut s,
            "aerostream_connections_login_timeouts_total",
            "counter",
            "Connections closed for not logging in (native hello, SASL) within the login timeout",
            g(&self.counters.login_timeouts),
        );
        write_metric(
            &mut s,
            "aerostream_connections_write_timeouts_total",
            "counter",
            "Connections closed because a response could not be written in time",
            g(&self.counters.write_timeouts),
        );
        write_metric(
            &mut s,
            "aerostream_queued_request_bytes",
            "gauge",
            "Request bytes being served now (in 1 KiB units, rounded up per request)",
            self.request_bytes_in_use() as u64,
        );
        s
    }
}

#[cfg(test)]
#[path = "connections_tests.rs"]
mod tests;
