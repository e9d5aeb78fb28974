//! The cost report's model: what an agent counted ([`CostReport`]), the
//! prices it is valued at ([`Prices`]) and the monthly estimate arithmetic
//! ([`Estimate`]). `GET /v1/cost` fills a report; `aerostream cost` reads
//! one or more, values them again at the prices it is given and sums them.
//!
//! The arithmetic is a pure function of counts, elapsed time and prices:
//!
//! 1. Rates are counts divided by the agent's uptime, per hour.
//! 2. A month is 730 hours (the convention AWS bills by).
//! 3. Requests are billed per 1,000: S3's PUT, COPY, POST, LIST rate for
//!    uploads, multipart steps, listings and copies; its GET rate for GETs
//!    and HEADs; DELETEs and multipart aborts are free by default.
//! 4. Storage is billed per GB-month on the bytes held now (a GB being
//!    2^30 bytes, as AWS counts it), assumed held for the whole month.
//! 5. Cross-zone transfer is billed per GB in each direction: the sender
//!    pays for what leaves its zone and the receiver for what enters it,
//!    so an agent pays for both its cross-zone bytes sent and received.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use cache::metered::RequestCounts;

/// Where the default prices come from, shown with every estimate.
pub const PRICES_SOURCE: &str = "AWS S3 Standard (us-east-1) and EC2 inter-AZ data transfer: list prices as published by AWS, checked 2026-12";

/// Hours in a billing month.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Bytes in a billed GB.
pub const GB: f64 = (1u64 << 30) as f64;

/// Prices in USD. Defaults: AWS list prices, see [`PRICES_SOURCE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Prices {
    /// Per 1,000 PUT, COPY, POST or LIST requests.
    pub put_per_1000: f64,
    /// Per 1,000 GET, HEAD (and other) requests.
    pub get_per_1000: f64,
    /// Per 1,000 DELETE requests and multipart aborts (free on S3).
    pub delete_per_1000: f64,
    /// Per GB-month held in object storage (S3 Standard, first 50 TB).
    pub storage_per_gb_month: f64,
    /// Per GB-month held on the agents' local disks (0: instance-store
    /// NVMe comes with the instance; set the volume's price for EBS).
    pub local_storage_per_gb_month: f64,
    /// Per GB moved between zones, in each direction.
    pub cross_zone_per_gb: f64,
    /// Where these prices come from.
    pub source: String,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            put_per_1000: 0.005,
            get_per_1000: 0.0004,
            delete_per_1000: 0.0,
            storage_per_gb_month: 0.023,
            local_storage_per_gb_month: 0.0,
            cross_zone_per_gb: 0.01,
            source: PRICES_SOURCE.to_string(),
        }
    }
}

/// A price that cannot be set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PriceError {
    #[error("unknown price {0:?}; known: put_per_1000, get_per_1000, delete_per_1000, storage_per_gb_month, local_storage_per_gb_month, cross_zone_per_gb")]
    Unknown(String),
    #[error("price {key} must be a number of USD, 0 or more (got {value:?})")]
    NotAPrice { key: String, value: String },
    #[error("expected KEY=VALUE, e.g. put_per_1000=0.005 (got {0:?})")]
    Malformed(String),
}

impl Prices {
    /// Sets one price by name (`put_per_1000=0.005` splits into these).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PriceError> {
        let slot = match key {
            "put_per_1000" => &mut self.put_per_1000,
            "get_per_1000" => &mut self.get_per_1000,
            "delete_per_1000" => &mut self.delete_per_1000,
            "storage_per_gb_month" => &mut self.storage_per_gb_month,
            "local_storage_per_gb_month" => &mut self.local_storage_per_gb_month,
            "cross_zone_per_gb" => &mut self.cross_zone_per_gb,
            other => return Err(PriceError::Unknown(other.to_string())),
        };
        *slot = match value.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => v,
            _ => {
                return Err(PriceError::NotAPrice {
                    key: key.to_string(),
                    value: value.to_string(),
                })
            }
        };
        if !self.source.contains("overridden") {
            self.source.push_str("; overridden:");
        }
        self.source.push(' ');
        self.source.push_str(key);
        Ok(())
    }

    /// Applies `KEY=VALUE` overrides in order.
    pub fn apply<S: AsRef<str>>(&mut self, overrides: &[S]) -> Result<(), PriceError> {
        for o in overrides {
            let o = o.as_ref();
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| PriceError::Malformed(o.to_string()))?;
            self.set(k.trim(), v)?;
        }
        Ok(())
    }

    /// Checks prices read from a file (serde cannot refuse negative numbers).
    pub fn validate(&self) -> Result<(), PriceError> {
        for (key, v) in [
            ("put_per_1000", self.put_per_1000),
            ("get_per_1000", self.get_per_1000),
            ("delete_per_1000", self.delete_per_1000),
            ("storage_per_gb_month", self.storage_per_gb_month),
            (
                "local_storage_per_gb_month",
                self.local_storage_per_gb_month,
            ),
            ("cross_zone_per_gb", self.cross_zone_per_gb),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(PriceError::NotAPrice {
                    key: key.to_string(),
                    value: v.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// Object-store requests and bytes, since the agent started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ObjectStoreUsage {
    /// Every counter, by request kind (multipart steps separately).
    #[schema(value_type = Object)]
    pub requests: RequestCounts,
    /// Requests billed at the PUT, COPY, POST, LIST rate.
    pub put_class: u64,
    /// Requests billed at the GET rate (GET, HEAD).
    pub get_class: u64,
    /// DELETEs and multipart aborts.
    pub delete_class: u64,
}

impl ObjectStoreUsage {
    pub fn of(requests: RequestCounts) -> Self {
        ObjectStoreUsage {
            put_class: requests.put_class(),
            get_class: requests.get_class(),
            delete_class: requests.free_class(),
            requests,
        }
    }
}

/// Bytes held by tier now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StorageUsage {
    /// Partition data on this agent's local disk (leaders and followers).
    pub local_bytes: u64,
    /// Segment objects in object storage: the whole cluster's, from the
    /// metastore (every agent reports the same figure).
    pub object_bytes: u64,
}

/// Bytes exchanged with one peer agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PeerUsage {
    pub agent: u64,
    /// The peer's rack as registered in the metastore.
    pub rack: Option<String>,
    /// Whether the peer is in another zone; `None` when either rack is unknown.
    pub cross_zone: Option<bool>,
    pub replication_sent_bytes: u64,
    pub replication_received_bytes: u64,
    pub forwarding_sent_bytes: u64,
    pub forwarding_received_bytes: u64,
}

impl PeerUsage {
    pub fn sent(&self) -> u64 {
        self.replication_sent_bytes + self.forwarding_sent_bytes
    }

    pub fn received(&self) -> u64 {
        self.replication_received_bytes + self.forwarding_received_bytes
    }
}

/// Traffic with other agents, split by zone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CrossZoneUsage {
    /// Bytes sent to and received from agents in another rack.
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// Bytes exchanged with agents whose zone is unknown (this agent or the
    /// peer has no `--rack`): not billed in the estimate.
    pub unknown_zone_bytes: u64,
    pub peers: Vec<PeerUsage>,
    /// Kafka clients' traffic with this agent, by the zone they name.
    #[serde(default)]
    pub clients: ClientUsage,
}

/// Bytes Kafka clients exchanged with this agent, classed by the zone a
/// client names (`client.rack` on Fetch, or `aerostream_az=` in its client
/// id) against this agent's rack.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClientUsage {
    /// Responses sent to clients in another zone.
    pub cross_zone_sent_bytes: u64,
    /// Requests received from clients in another zone.
    pub cross_zone_received_bytes: u64,
    /// Both directions, clients in this agent's zone.
    pub same_zone_bytes: u64,
    /// Both directions, clients that named no zone (or an agent without
    /// `--rack`): not billed in the estimate.
    pub unknown_zone_bytes: u64,
}

impl CrossZoneUsage {
    /// Classes each peer by its rack against `own` and sums the cross-zone bytes.
    pub fn of(own: Option<&str>, mut peers: Vec<PeerUsage>) -> Self {
        let mut out = CrossZoneUsage::default();
        for p in &mut peers {
            p.cross_zone = match (own, p.rack.as_deref()) {
                (Some(a), Some(b)) => Some(a != b),
                _ => None,
            };
            match p.cross_zone {
                Some(true) => {
                    out.sent_bytes += p.sent();
                    out.received_bytes += p.received();
                }
                Some(false) => {}
                None => out.unknown_zone_bytes += p.sent() + p.received(),
            }
        }
        out.peers = peers;
        out
    }

    /// Adds the clients' traffic: its cross-zone bytes count in the totals.
    pub fn with_clients(mut self, clients: ClientUsage) -> Self {
        self.sent_bytes += clients.cross_zone_sent_bytes;
        self.received_bytes += clients.cross_zone_received_bytes;
        self.clients = clients;
        self
    }
}

/// Rates per hour since start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Rates {
    pub put_class_requests: f64,
    pub get_class_requests: f64,
    pub delete_class_requests: f64,
    pub object_bytes_written: f64,
    pub object_bytes_read: f64,
    pub cross_zone_bytes_sent: f64,
    pub cross_zone_bytes_received: f64,
}

/// A monthly estimate in USD, by line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Estimate {
    pub put_requests: f64,
    pub get_requests: f64,
    pub delete_requests: f64,
    pub object_storage: f64,
    pub local_storage: f64,
    pub cross_zone_transfer: f64,
    pub total: f64,
}

/// One agent's report: `GET /v1/cost`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CostReport {
    /// The agent that answered.
    pub node_id: i32,
    /// Its `--rack` (zone), if set.
    pub rack: Option<String>,
    /// When the figures were read (ms since the epoch).
    pub at_ms: i64,
    /// Seconds the counts cover (since the agent started).
    pub uptime_seconds: f64,
    pub object_store: ObjectStoreUsage,
    pub storage: StorageUsage,
    pub cross_zone: CrossZoneUsage,
    pub per_hour: Rates,
    /// The prices the estimate uses.
    pub prices: Prices,
    /// The counts' rates over a 730-hour month, at `prices`.
    pub monthly_estimate_usd: Estimate,
}

/// Per hour over `seconds`; 0 before any time has passed.
fn per_hour(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 * 3600.0 / seconds
    } else {
        0.0
    }
}

impl CostReport {
    /// Fills in the rates and the estimate from the counts, at `prices`.
    pub fn valued(mut self, prices: Prices) -> Self {
        let s = self.uptime_seconds;
        let o = &self.object_store;
        let z = &self.cross_zone;
        self.per_hour = Rates {
            put_class_requests: per_hour(o.put_class, s),
            get_class_requests: per_hour(o.get_class, s),
            delete_class_requests: per_hour(o.delete_class, s),
            object_bytes_written: per_hour(o.requests.bytes_written, s),
            object_bytes_read: per_hour(o.requests.bytes_read, s),
            cross_zone_bytes_sent: per_hour(z.sent_bytes, s),
            cross_zone_bytes_received: per_hour(z.received_bytes, s),
        };
        let r = &self.per_hour;
        let month = |per_hour: f64| per_hour * HOURS_PER_MONTH;
        let mut e = Estimate {
            put_requests: month(r.put_class_requests) / 1000.0 * prices.put_per_1000,
            get_requests: month(r.get_class_requests) / 1000.0 * prices.get_per_1000,
            delete_requests: month(r.delete_class_requests) / 1000.0 * prices.delete_per_1000,
            object_storage: self.storage.object_bytes as f64 / GB * prices.storage_per_gb_month,
            local_storage: self.storage.local_bytes as f64 / GB * prices.local_storage_per_gb_month,
            cross_zone_transfer: month(r.cross_zone_bytes_sent + r.cross_zone_bytes_received) / GB
                * prices.cross_zone_per_gb,
            total: 0.0,
        };
        e.total = e.put_requests
            + e.get_requests
            + e.delete_requests
            + e.object_storage
            + e.local_storage
            + e.cross_zone_transfer;
        self.monthly_estimate_usd = e;
        self.prices = prices;
        self
    }
}

/// Several agents' reports as one, valued at `prices`.
///
/// Counts, local bytes, cross-zone bytes, rates and estimate lines add up;
/// object-storage bytes are the cluster's in every report, so the largest
/// (the freshest view) is taken once. Peers are merged by agent id.
pub fn sum(reports: &[CostReport], prices: Prices) -> CostReport {
    let mut out = CostReport {
        node_id: -1,
        ..CostReport::default()
    };
    let mut peers: BTreeMap<u64, PeerUsage> = BTreeMap::new();
    let mut lines = Estimate::default();
    let mut rates = Rates::default();
    for r in reports {
        let r = r.clone().valued(prices.clone());
        out.at_ms = out.at_ms.max(r.at_ms);
        out.uptime_seconds = out.uptime_seconds.max(r.uptime_seconds);
        out.object_store.requests = out.object_store.requests.plus(&r.object_store.requests);
        out.storage.local_bytes += r.storage.local_bytes;
        out.storage.object_bytes = out.storage.object_bytes.max(r.storage.object_bytes);
        let (z, rz) = (&mut out.cross_zone, &r.cross_zone);
        z.sent_bytes += rz.sent_bytes;
        z.received_bytes += rz.received_bytes;
        z.unknown_zone_bytes += rz.unknown_zone_bytes;
        let (c, rc) = (&mut z.clients, &rz.clients);
        c.cross_zone_sent_bytes += rc.cross_zone_sent_bytes;
        c.cross_zone_received_bytes += rc.cross_zone_received_bytes;
        c.same_zone_bytes += rc.same_zone_bytes;
        c.unknown_zone_bytes += rc.unknown_zone_bytes;
        for p in &rz.peers {
            let m = peers.entry(p.agent).or_insert_with(|| PeerUsage {
                agent: p.agent,
                rack: p.rack.clone(),
                ..PeerUsage::default()
            });
            m.replication_sent_bytes += p.replication_sent_bytes;
            m.replication_received_bytes += p.replication_received_bytes;
            m.forwarding_sent_bytes += p.forwarding_sent_bytes;
            m.forwarding_received_bytes += p.forwarding_received_bytes;
        }
        let h = &r.per_hour;
        rates.put_class_requests += h.put_class_requests;
        rates.get_class_requests += h.get_class_requests;
        rates.delete_class_requests += h.delete_class_requests;
        rates.object_bytes_written += h.object_bytes_written;
        rates.object_bytes_read += h.object_bytes_read;
        rates.cross_zone_bytes_sent += h.cross_zone_bytes_sent;
        rates.cross_zone_bytes_received += h.cross_zone_bytes_received;
        let e = &r.monthly_estimate_usd;
        lines.put_requests += e.put_requests;
        lines.get_requests += e.get_requests;
        lines.delete_requests += e.delete_requests;
        lines.local_storage += e.local_storage;
        lines.cross_zone_transfer += e.cross_zone_transfer;
    }
    out.object_store = ObjectStoreUsage::of(out.object_store.requests);
    out.cross_zone.peers = peers.into_values().collect();
    lines.object_storage = out.storage.object_bytes as f64 / GB * prices.storage_per_gb_month;
    lines.total = lines.put_requests
        + lines.get_requests
        + lines.delete_requests
        + lines.object_storage
        + lines.local_storage
        + lines.cross_zone_transfer;
    out.per_hour = rates;
    out.monthly_estimate_usd = lines;
    out.prices = prices;
    out
}

/// Prometheus text of the object-store counters (the names `/metrics`
/// shows next to the tier's `aerostream_tier_*`).
pub fn render_object_store(c: &RequestCounts) -> String {
    let mut s = String::new();
    s.push_str("# HELP aerostream_object_store_requests_total Requests sent to the object store, by kind (each multipart step and listing page counts; failed ones too)\n");
    s.push_str("# TYPE aerostream_object_store_requests_total counter\n");
    for (op, n) in [
        ("put", c.put),
        ("create_multipart", c.create_multipart),
        ("put_part", c.put_part),
        ("complete_multipart", c.complete_multipart),
        ("abort_multipart", c.abort_multipart),
        ("get", c.get),
        ("head", c.head),
        ("list", c.list),
        ("delete", c.delete),
        ("copy", c.copy),
        ("rename", c.rename),
    ] {
        s.push_str(&format!(
            "aerostream_object_store_requests_total{{op=\"{op}\"}} {n}\n"
        ));
    }
    for (name, help, v) in [
        (
            "aerostream_object_store_request_errors_total",
            "Object-store requests that failed",
            c.errors,
        ),
        (
            "aerostream_object_store_written_bytes_total",
            "Bytes uploaded to the object store (PUT and part payloads)",
            c.bytes_written,
        ),
        (
            "aerostream_object_store_read_bytes_total",
            "Bytes the object store answered GETs with",
            c.bytes_read,
        ),
    ] {
        s.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}\n"
        ));
    }
    s
}

/// Prometheus text of the bytes exchanged with each peer, labelled by the
/// path (replication, forwarding) and whether the peer is in another zone
/// (`true`, `false`, `unknown`).
pub fn render_cross_zone(z: &CrossZoneUsage) -> String {
    let mut s = String::new();
    for (name, help, v) in [
        (
            "aerostream_cross_zone_sent_bytes_total",
            "Bytes sent to agents in another rack (replication and forwarding) and to Kafka clients that named another zone",
            z.sent_bytes,
        ),
        (
            "aerostream_cross_zone_received_bytes_total",
            "Bytes received from agents in another rack (replication and forwarding) and from Kafka clients that named another zone",
            z.received_bytes,
        ),
    ] {
        s.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}\n"
        ));
    }
    let name = "aerostream_client_bytes_total";
    s.push_str(&format!(
        "# HELP {name} Bytes Kafka clients exchanged with this agent, by whether the zone the client named is another than this agent's\n# TYPE {name} counter\n"
    ));
    let c = &z.clients;
    for (direction, zone, v) in [
        ("sent", "true", c.cross_zone_sent_bytes),
        ("received", "true", c.cross_zone_received_bytes),
        ("both", "false", c.same_zone_bytes),
        ("both", "unknown", c.unknown_zone_bytes),
    ] {
        s.push_str(&format!(
            "{name}{{direction=\"{direction}\",cross_zone=\"{zone}\"}} {v}\n"
        ));
    }
    for (name, help, pick) in [
        (
            "aerostream_peer_sent_bytes_total",
            "Bytes sent to each peer agent",
            (|p: &PeerUsage| [p.replication_sent_bytes, p.forwarding_sent_bytes])
                as fn(&PeerUsage) -> [u64; 2],
        ),
        (
            "aerostream_peer_received_bytes_total",
            "Bytes received from each peer agent",
            |p: &PeerUsage| [p.replication_received_bytes, p.forwarding_received_bytes],
        ),
    ] {
        s.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
        for p in &z.peers {
            let zone = match p.cross_zone {
                Some(true) => "true",
                Some(false) => "false",
                None => "unknown",
            };
            for (path, v) in ["replication", "forwarding"].into_iter().zip(pick(p)) {
                s.push_str(&format!(
                    "{name}{{peer=\"{}\",path=\"{path}\",cross_zone=\"{zone}\"}} {v}\n",
                    p.agent
                ));
            }
        }
    }
    s
}

#[cfg(test)]
#[path = "cost_tests.rs"]
mod tests;
