//! Bytes Kafka clients exchanged with this agent, classed by the client's
//! zone: the client side of the cost report's cross-zone traffic.
//!
//! An agent learns a client's zone from the client itself: a consumer's
//! `client.rack` (sent with every Fetch, KIP-392), or a tag in any client's
//! id (`client.id=orders,aerostream_az=us-east-1a`), which producers and
//! admin clients can set where they have no `client.rack` to send. The zone
//! is kept per connection, from the last request that named one. Bytes of a
//! connection whose client named no zone are counted as of unknown zone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cost::ClientUsage;

/// The tag a client id carries its zone in; the zone runs to the next `,`,
/// `;`, space or the end.
pub const CLIENT_ID_TAG: &str = "aerostream_az=";

/// The zone a client id names with [`CLIENT_ID_TAG`], if any.
pub fn zone_in_client_id(client_id: &str) -> Option<&str> {
    let at = client_id.find(CLIENT_ID_TAG)?;
    let rest = &client_id[at + CLIENT_ID_TAG.len()..];
    let end = rest.find([',', ';', ' ']).unwrap_or(rest.len());
    let zone = &rest[..end];
    (!zone.is_empty()).then_some(zone)
}

/// The zone a connection's client named last.
#[derive(Debug, Default)]
pub struct ClientZone(Mutex<Option<Arc<str>>>);

impl ClientZone {
    fn lock(&self) -> MutexGuard<'_, Option<Arc<str>>> {
        // the value is replaced whole: a panicking holder leaves it intact
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn note(&self, zone: &str) {
        let mut z = self.lock();
        if z.as_deref() != Some(zone) {
            *z = Some(Arc::from(zone));
        }
    }

    pub fn get(&self) -> Option<Arc<str>> {
        self.lock().clone()
    }
}

/// Whether a client is in another zone than the agent: `None` when either
/// zone is unknown.
fn crosses(own: Option<&str>, client: Option<&str>) -> Option<bool> {
    Some(own? != client?)
}

/// Bytes of client connections, by direction and zone class.
#[derive(Debug, Default)]
pub struct ClientZoneCounters {
    /// `[cross zone, same zone, unknown]`, requests received.
    received: [AtomicU64; 3],
    /// The same for responses sent.
    sent: [AtomicU64; 3],
}

impl ClientZoneCounters {
    /// Counts one request of `received` bytes and its answer of `sent`
    /// bytes (size prefixes included), for a client in `client`'s zone and
    /// an agent in `own`.
    pub fn count(&self, own: Option<&str>, client: Option<&str>, received: u64, sent: u64) {
        let class = match crosses(own, client) {
            Some(true) => 0,
            Some(false) => 1,
            None => 2,
        };
        self.received[class].fetch_add(received, Ordering::Relaxed);
        if sent > 0 {
            self.sent[class].fetch_add(sent, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> ClientUsage {
        let r = |i: usize| self.received[i].load(Ordering::Relaxed);
        let s = |i: usize| self.sent[i].load(Ordering::Relaxed);
        ClientUsage {
            cross_zone_sent_bytes: s(0),
            cross_zone_received_bytes: r(0),
            same_zone_bytes: s(1) + r(1),
            unknown_zone_bytes: s(2) + r(2),
        }
    }
}

#[cfg(test)]
#[path = "client_zone_tests.rs"]
mod tests;
