//! A small HTTP/1.1 client for the admin commands that talk to an agent's
//! HTTP listeners (the REST API, the schema registry): one request per
//! connection, plain HTTP, an answer of bounded size read whole.

use anyhow::{bail, Context};
use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest answer read (a registry listing, a topic's figures).
const MAX_ANSWER: u64 = 64 << 20;

/// `host:port` of `url` (`http://host:port[/]` or `host:port`); `what`
/// names the flag in errors.
pub(super) fn address<'a>(url: &'a str, what: &str) -> anyhow::Result<&'a str> {
    let a = url.strip_prefix("http://").unwrap_or(url);
    let a = a.trim_end_matches('/');
    if a.starts_with("https://") || a.is_empty() || a.contains('/') {
        bail!(
            "{what} takes an agent's plain HTTP address, host:port or http://host:port (got {url})"
        );
    }
    Ok(a)
}

/// One request: the answer's status and body.
pub(super) async fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    content_type: &str,
    basic_auth: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to {addr}"))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n"
    );
    if let Some(auth) = basic_auth {
        let token = base64::engine::general_purpose::STANDARD.encode(auth);
        req.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes())
        .await
        .context("send the request")?;
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        (&mut s).take(MAX_ANSWER).read_to_end(&mut raw),
    )
    .await
    .with_context(|| format!("{addr} did not answer in 30 s"))?
    .context("read the answer")?;
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("{addr} answered something that is not HTTP");
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .with_context(|| format!("{addr} answered without a status"))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_string()
    };
    Ok((status, body))
}

/// The body of a chunked HTTP/1.1 answer.
pub(super) fn dechunk(mut rest: &str) -> anyhow::Result<String> {
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

/// One request whose answer is JSON: the answer (`null` when empty), or
/// the service's refusal as one line, naming `who` answered and the
/// `error_code` of its body (the status when it has none).
pub(super) async fn json_call(
    who: &str,
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    content_type: &str,
    basic_auth: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    use serde_json::Value;
    let text = body.map(Value::to_string);
    let (status, answer) = request(
        addr,
        method,
        path,
        text.as_deref(),
        content_type,
        basic_auth,
    )
    .await
    .with_context(|| format!("ask {who} at {addr}"))?;
    let value: Value = if answer.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&answer).unwrap_or(Value::String(answer))
    };
    if !(200..300).contains(&status) {
        let code = value
            .get("error_code")
            .map_or_else(|| status.to_string(), Value::to_string);
        match value.get("message") {
            Some(Value::String(message)) => anyhow::bail!("{who} refused ({code}): {message}"),
            _ => anyhow::bail!("{who} answered {status}: {value}"),
        }
    }
    Ok(value)
}

/// Path segments are sent percent-encoded (subjects and connector names may hold any text).
pub(super) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_chunks_are_read() {
        assert_eq!(
            address("http://127.0.0.1:8080/", "--http").unwrap(),
            "127.0.0.1:8080"
        );
        assert_eq!(
            address("localhost:8080", "--http").unwrap(),
            "localhost:8080"
        );
        assert!(address("https://x:1", "--http").is_err());
        assert_eq!(
            dechunk("4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n").unwrap(),
            "abcdef"
        );
        assert!(dechunk("9\r\nabc").is_err());
    }
}
