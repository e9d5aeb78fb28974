//! Tiered storage in the gateway: the production log backend that seals to
//! object storage ([`log::TieredLogFactory`]), the metastore as its manifest
//! ([`manifest::MetastoreManifest`]), and the read paths that reach below
//! the local log start (Fetch, ListOffsets) through [`Tiering`].
//!
//! Seams: the Kafka handlers call [`read`] and [`offsets`] instead of the
//! partition handle directly; without tiering (tests with memory logs)
//! those are plain pass-throughs.

pub mod log;
pub mod manifest;

use std::time::Duration;

use cache::fault::{Fault, FaultController, FaultRule, Op};
use storage::tier::{PartitionKey, Tier};
use uuid::Uuid;

use crate::backend::{LogError, Records, TimestampOffset};
use crate::broker::Broker;
use crate::partition::{Closed, OffsetQuery, PartitionHandle, ReadResult};

/// The node's tiering service as the gateway uses it.
pub struct Tiering {
    tier: Tier,
    faults: Option<FaultController>,
}

impl std::fmt::Debug for Tiering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiering")
            .field("tier", &self.tier)
            .field("faults", &self.faults.is_some())
            .finish()
    }
}

impl Tiering {
    /// `faults`: the controller of a fault-injecting store wrapper, which
    /// enables the `/admin/object-store/faults` HTTP endpoint (tests only).
    pub fn new(tier: Tier, faults: Option<FaultController>) -> Self {
        Tiering { tier, faults }
    }

    pub fn tier(&self) -> &Tier {
        &self.tier
    }

    /// Prometheus text of the tier's figures.
    pub fn render_metrics(&self) -> String {
        self.tier.snapshot().render()
    }

    /// The fault-injection endpoint: `GET /admin/object-store/faults?...`
    /// with one of `unreachable=MS`, `status=CODE[&ops=put,get,...][&times=N]`,
    /// `hang[&ops=...]`, `latency=MS`, `clear`. `None` when the path is not
    /// this endpoint or faults are disabled.
    pub fn admin(&self, target: &str) -> Option<(u16, String)> {
        let faults = self.faults.as_ref()?;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path != "/admin/object-store/faults" {
            return None;
        }
        Some(apply_fault(faults, query))
    }
}

fn parse_ops(value: Option<&str>) -> Result<Vec<Op>, String> {
    match value {
        None => Ok(Op::ALL.to_vec()),
        Some("writes") => Ok(Op::WRITES.to_vec()),
        Some("reads") => Ok(Op::READS.to_vec()),
        Some(list) => list
            .split(',')
            .map(|name| match name {
                "put" => Ok(Op::Put),
                "multipart" => Ok(Op::CreateMultipart),
                "part" => Ok(Op::PutPart),
                "complete" => Ok(Op::CompleteMultipart),
                "get" => Ok(Op::Get),
                "head" => Ok(Op::Head),
                "delete" => Ok(Op::Delete),
                "list" => Ok(Op::List),
                "copy" => Ok(Op::Copy),
                other => Err(format!("unknown operation {other:?}")),
            })
            .collect(),
    }
}

fn apply_fault(faults: &FaultController, query: &str) -> (u16, String) {
    let params: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    let get = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    let number = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
    let ops = match parse_ops(get("ops")) {
        Ok(ops) => ops,
        Err(e) => return (400, format!("{e}\n")),
    };
    let with_times = |rule: FaultRule| match number("times") {
        Some(n) => rule.times(n),
        None => rule,
    };
    if get("clear").is_some() {
        faults.clear();
    } else if let Some(ms) = number("unreachable") {
        faults.unreachable_for(Duration::from_millis(ms));
    } else if let Some(code) = number("status").and_then(|c| u16::try_from(c).ok()) {
        faults.inject(with_times(FaultRule::new(Fault::Status(code)).on(&ops)));
    } else if get("hang").is_some() {
        faults.inject(with_times(FaultRule::new(Fault::Hang).on(&ops)));
    } else if let Some(ms) = number("latency") {
        faults.set_latency(Duration::from_millis(ms));
    } else {
        return (
            400,
            "use one of: clear, unreachable=MS, status=CODE, hang, latency=MS\n".into(),
        );
    }
    (
        200,
        format!(
            "ok: {} calls failed or delayed so far, {} hanging\n",
            faults.injected(),
            faults.hanging()
        ),
    )
}

/// A Fetch read of one partition across both tiers: local data through the
/// partition task, offsets below the local start from object storage.
pub async fn read(
    b: &Broker,
    topic_id: Uuid,
    partition: i32,
    h: &PartitionHandle,
    offset: i64,
    max_bytes: usize,
) -> Result<Result<ReadResult, LogError>, Closed> {
    let local = h.read(offset, max_bytes).await?;
    let Some(t) = &b.tiering else {
        return Ok(local);
    };
    match local {
        Err(LogError::OffsetOutOfRange { start, .. }) if offset < start => {
            let key = PartitionKey::new(topic_id, partition);
            let cold = t.tier.read(key, offset, max_bytes).await;
            let (log_start, high_watermark) = h.bounds().await?;
            Ok(match cold {
                Ok(Some(r)) if offset >= log_start => Ok(ReadResult {
                    records: Records::Bytes(r.bytes),
                    high_watermark,
                    log_start_offset: log_start,
                }),
                Ok(_) => Err(LogError::OffsetOutOfRange {
                    offset,
                    start: log_start,
                    end: high_watermark,
                }),
                Err(e) => Err(log::from_tier(e)),
            })
        }
        other => Ok(other),
    }
}

/// A ListOffsets question across both tiers.
pub async fn offsets(
    b: &Broker,
    topic_id: Uuid,
    partition: i32,
    h: &PartitionHandle,
    query: OffsetQuery,
) -> Result<Result<Option<TimestampOffset>, LogError>, Closed> {
    let Some(t) = &b.tiering else {
        return h.offsets(query).await;
    };
    let key = PartitionKey::new(topic_id, partition);
    let Some(shared) = t.tier.partition(key) else {
        return h.offsets(query).await;
    };
    let tiered_below_local = shared
        .tiered_start()
        .is_some_and(|s| s < shared.local_start());
    if !tiered_below_local {
        return h.offsets(query).await;
    }
    let (log_start, _) = h.bounds().await?;
    match query {
        OffsetQuery::Timestamp(ts) => match t.tier.offset_for_timestamp(key, ts, log_start).await {
            // The first match in offset order: nothing local can come before it.
            Ok(Some((timestamp, offset))) => Ok(Ok(Some(TimestampOffset { timestamp, offset }))),
            Ok(None) => h.offsets(query).await,
            Err(e) => Ok(Err(log::from_tier(e))),
        },
        OffsetQuery::MaxTimestamp => {
            let local = match h.offsets(query).await? {
                Ok(l) => l,
                Err(e) => return Ok(Err(e)),
            };
            let tiered = match t.tier.max_timestamp(key, log_start).await {
                Ok(x) => x.map(|(timestamp, offset)| TimestampOffset { timestamp, offset }),
                Err(e) => return Ok(Err(log::from_tier(e))),
            };
            // The largest timestamp; on a tie the earlier record, which is the tiered one.
            Ok(Ok(match (tiered, local) {
                (Some(c), Some(l)) if l.timestamp > c.timestamp => Some(l),
                (Some(c), _) => Some(c),
                (None, l) => l,
            }))
        }
        OffsetQuery::Earliest | OffsetQuery::Latest => h.offsets(query).await,
    }
}

/// ListOffsets EARLIEST_LOCAL (-4): the first offset on local disk; `None`
/// when tiering is off (the caller answers the log start then).
pub fn earliest_local(b: &Broker, topic_id: Uuid, partition: i32) -> Option<i64> {
    let shared = b
        .tiering
        .as_ref()?
        .tier
        .partition(PartitionKey::new(topic_id, partition))?;
    Some(shared.local_start())
}

/// ListOffsets LATEST_TIERED (-5): the last offset in object storage, if any.
pub fn latest_tiered(b: &Broker, topic_id: Uuid, partition: i32) -> Option<i64> {
    b.tiering
        .as_ref()?
        .tier
        .partition(PartitionKey::new(topic_id, partition))?
        .tiered_last()
}
