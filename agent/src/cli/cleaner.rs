//! The cleaner figures of a compacted topic's partitions, for `aerostream
//! topic describe --http ADDR`: the Kafka protocol has no place for them,
//! so they come from an agent's REST API (`GET /v1/topics/{name}`), which
//! asks each partition's leader.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// `host:port` of `http` (`http://host:port` or `host:port`).
fn address(http: &str) -> anyhow::Result<&str> {
    let a = http.strip_prefix("http://").unwrap_or(http);
    let a = a.trim_end_matches('/');
    if a.starts_with("https://") || a.is_empty() || a.contains('/') {
        bail!("--http takes an agent's plain HTTP address, host:port (got {http})");
    }
    Ok(a)
}

/// The figures of every partition of `topic` whose leader reports them.
pub(super) async fn figures(http: &str, topic: &str) -> anyhow::Result<BTreeMap<i32, Cleaner>> {
    let addr = address(http)?;
    let mut s = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to the REST API at {addr}"))?;
    let req = format!(
        "GET /v1/topics/{topic} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .await
        .context("send the request")?;
    let mut raw = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(30), s.read_to_end(&mut raw))
        .await
        .context("the REST API did not answer in 30 s")?
        .context("read the answer")?;
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("the REST API at {addr} answered something that is not HTTP");
    };
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    if status != "200" {
        bail!("the REST API at {addr} answered {status}: {}", body.trim());
    }
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_string()
    };
    let t: Topic = serde_json::from_str(&body).context("decode the REST API's topic")?;
    Ok(t.partitions
        .into_iter()
        .filter_map(|p| p.cleaner.map(|c| (p.partition, c)))
        .collect())
}

/// The body of a chunked HTTP/1.1 answer.
fn dechunk(mut rest: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            bail!("a chunked answer ends early");
        };
        let n = usize::from_str_radix(size.trim(), 16).context("a chunk size")?;
        if n == 0 {
            return Ok(out);
        }
        let Some(chunk) = after.get(..n) else {
            bail!("a chunk runs past the answer");
        };
        out.push_str(chunk);
        rest = after.get(n..).unwrap_or("").trim_start_matches("\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_chunks_are_read() {
        assert_eq!(address("http://127.0.0.1:8080/").unwrap(), "127.0.0.1:8080");
        assert_eq!(address("localhost:8080").unwrap(), "localhost:8080");
        assert!(address("https://x:1").is_err());
        assert_eq!(
            dechunk("4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n").unwrap(),
            "abcdef"
        );
        assert!(dechunk("9\r\nabc").is_err());
    }
}
