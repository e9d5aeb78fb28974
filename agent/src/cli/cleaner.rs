//! The cleaner figures of a compacted topic's partitions, for `aerostream
//! topic describe --http ADDR`: the Kafka protocol has no place for them,
//! so they come from an agent's REST API (`GET /v1/topics/{name}`), which
//! asks each partition's leader.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use serde::Serialize;

use super::http;

/// One partition's cleaner figures, as the REST API gives them.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub(super) struct Cleaner {
    pub(super) dirty_ratio: f64,
    pub(super) dirty_bytes: u64,
    pub(super) compactable_bytes: u64,
    pub(super) compacted_below: u64,
    pub(super) runs: u64,
    pub(super) bytes_removed: u64,
    pub(super) records_removed: u64,
}

#[derive(serde::Deserialize)]
struct Partition {
    partition: i32,
    cleaner: Option<Cleaner>,
}

#[derive(serde::Deserialize)]
struct Topic {
    partitions: Vec<Partition>,
}

/// The figures of every partition of `topic` whose leader reports them.
pub(super) async fn figures(rest: &str, topic: &str) -> anyhow::Result<BTreeMap<i32, Cleaner>> {
    let addr = http::address(rest, "--http")?;
    let (status, body) = http::request(addr, "GET", &format!("/v1/topics/{topic}"), None, "", None)
        .await
        .context("ask the REST API")?;
    if status != 200 {
        bail!("the REST API at {addr} answered {status}: {}", body.trim());
    }
    let t: Topic = serde_json::from_str(&body).context("decode the REST API's topic")?;
    Ok(t.partitions
        .into_iter()
        .filter_map(|p| p.cleaner.map(|c| (p.partition, c)))
        .collect())
}
