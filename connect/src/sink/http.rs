//! `HttpSink`: records to a webhook, as JSON arrays of up to
//! `batch.max.size` records per request (each record as the object-storage
//! sink writes a JSON line: topic, partition, offset, timestamp, key,
//! value, headers).
//!
//! A batch is sent when it is full or its oldest record waited
//! `batch.linger.ms`; a 2xx answer makes its records durable (their
//! offsets are then committed). Connection failures, timeouts, 408, 429
//! and 5xx answers are retried `max.retries` times, `retry.backoff.ms`
//! apart (doubling, at most 30 s); any other answer, or retries run out,
//! is the batch's error: the task fails, or with `errors.tolerance=all`
//! the batch is skipped (and sent to the dead-letter topic). A crash
//! between a 2xx and the commit sends the batch again (at-least-once).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::config::{converter_kind, Config, ConfigDef, Problem};
use crate::record::SinkRecord;
use crate::sink::object_store::encode::json_lines_with;
use crate::sink::object_store::Converter;

pub const CLASS: &str = "io.aerostream.connect.http.HttpSink";

const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub fn definitions() -> Vec<ConfigDef> {
    vec![
        ConfigDef::new(
            "http.api.url",
            "STRING",
            None,
            "HIGH",
            "The URL records are sent to.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "http.method",
            "STRING",
            Some("POST"),
            "MEDIUM",
            "POST or PUT.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "http.headers",
            "STRING",
            Some(""),
            "MEDIUM",
            "Extra request headers, `Name: value` separated by `|`.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "batch.max.size",
            "INT",
            Some("100"),
            "MEDIUM",
            "The most records one request carries.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "batch.linger.ms",
            "LONG",
            Some("1000"),
            "LOW",
            "How long a batch that is not full waits for more records.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "max.retries",
            "INT",
            Some("10"),
            "MEDIUM",
            "How many times a failed request is sent again.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "retry.backoff.ms",
            "LONG",
            Some("300"),
            "LOW",
            "The first pause before a retry (doubling, at most 30 s).",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "request.timeout.ms",
            "LONG",
            Some("10000"),
            "LOW",
            "How long one request may take.",
        )
        .in_group("HTTP"),
    ]
}

/// The sink's settings.
#[derive(Debug, Clone)]
pub struct HttpSinkConfig {
    pub url: reqwest::Url,
    pub method: reqwest::Method,
    pub headers: Vec<(String, String)>,
    pub batch_max: usize,
    pub linger: Duration,
    pub max_retries: u32,
    pub backoff: Duration,
    pub timeout: Duration,
    pub key_converter: Converter,
    pub value_converter: Converter,
}

fn converter(config: &Config, key: &str) -> Converter {
    match config.get(key).and_then(|v| converter_kind(v)) {
        Some("string") => Converter::String,
        Some("bytes") => Converter::Bytes,
        _ => Converter::Json,
    }
}

impl HttpSinkConfig {
    pub fn parse(config: &Config) -> Result<HttpSinkConfig, Vec<Problem>> {
        let mut problems = Vec::new();
        let url = match config
            .get("http.api.url")
            .map(|u| reqwest::Url::parse(u.trim()))
        {
            Some(Ok(u)) if matches!(u.scheme(), "http" | "https") => Some(u),
            Some(_) => {
                problems.push((
                    "http.api.url".into(),
                    "Invalid value for configuration http.api.url: an http:// or https:// URL"
                        .into(),
                ));
                None
            }
            None => {
                problems.push((
                    "http.api.url".into(),
                    "Missing required configuration \"http.api.url\" which has no default value."
                        .into(),
                ));
                None
            }
        };
        let method = match config
            .get("http.method")
            .map(|m| m.trim().to_ascii_uppercase())
        {
            None => reqwest::Method::POST,
            Some(m) if m == "POST" => reqwest::Method::POST,
            Some(m) if m == "PUT" => reqwest::Method::PUT,
            Some(m) => {
                problems.push((
                    "http.method".into(),
                    format!("Invalid value {m} for configuration http.method: POST or PUT"),
                ));
                reqwest::Method::POST
            }
        };
        let headers = crate::config::http_headers(config, "http.headers", &mut problems);
        use crate::config::number;
        let any = |_: &u64| true;
        let batch_max = number(
            config,
            "batch.max.size",
            100usize,
            |n| (1..=100_000).contains(n),
            "1 to 100000",
            &mut problems,
        );
        let linger = number(
            config,
            "batch.linger.ms",
            1000u64,
            any,
            "milliseconds",
            &mut problems,
        );
        let max_retries = number(
            config,
            "max.retries",
            10u32,
            |_| true,
            "a count",
            &mut problems,
        );
        let backoff = number(
            config,
            "retry.backoff.ms",
            300u64,
            any,
            "milliseconds",
            &mut problems,
        );
        let timeout = number(
            config,
            "request.timeout.ms",
            10_000u64,
            |n| *n > 0,
            "milliseconds, more than 0",
            &mut problems,
        );
        match url {
            Some(url) if problems.is_empty() => Ok(HttpSinkConfig {
                url,
                method,
                headers,
                batch_max,
                linger: Duration::from_millis(linger),
                max_retries,
                backoff: Duration::from_millis(backoff),
                timeout: Duration::from_millis(timeout),
                key_converter: converter(config, "key.converter"),
                value_converter: converter(config, "value.converter"),
            }),
            _ => Err(problems),
        }
    }
}

pub fn validate(config: &Config) -> Vec<Problem> {
    HttpSinkConfig::parse(config).err().unwrap_or_default()
}

/// Why a batch was not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchError {
    pub message: String,
    /// The records of the batch (for the dead-letter topic).
    pub records: Vec<SinkRecord>,
    /// Each record's own reason when they differ (the PostgreSQL sink's
    /// refused records); empty when `message` is every record's.
    pub reasons: Vec<String>,
}

/// The sink: buffered records and the client that sends them.
pub struct HttpSink {
    config: HttpSinkConfig,
    client: reqwest::Client,
    buffer: VecDeque<(Instant, SinkRecord)>,
    /// Per partition, the next offset once what was sent is durable.
    delivered: BTreeMap<(String, i32), i64>,
    pub requests: u64,
    pub records_sent: u64,
    pub bytes_sent: u64,
}

impl HttpSink {
    pub fn new(config: HttpSinkConfig) -> Result<HttpSink, String> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| format!("the HTTP client could not be set up: {e}"))?;
        Ok(HttpSink {
            config,
            client,
            buffer: VecDeque::new(),
            delivered: BTreeMap::new(),
            requests: 0,
            records_sent: 0,
            bytes_sent: 0,
        })
    }

    pub fn put(&mut self, record: SinkRecord) {
        self.buffer.push_back((Instant::now(), record));
    }

    fn due(&self, now: Instant) -> bool {
        self.buffer.len() >= self.config.batch_max
            || self
                .buffer
                .front()
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= self.config.linger)
    }

    /// Sends every batch that is due; answers the offsets to commit, and
    /// the first batch that could not be delivered (its records are no
    /// longer buffered: the caller fails the task or skips them).
    pub async fn flush_due(
        &mut self,
        now: Instant,
    ) -> (Vec<(String, i32, i64)>, Option<BatchError>) {
        let mut failed = None;
        while failed.is_none() && self.due(now) {
            let n = self.buffer.len().min(self.config.batch_max);
            let batch: Vec<SinkRecord> = self.buffer.drain(..n).map(|(_, r)| r).collect();
            match self.send(&batch).await {
                Ok(bytes) => {
                    self.requests += 1;
                    self.records_sent += batch.len() as u64;
                    self.bytes_sent += bytes;
                    self.mark(&batch);
                }
                Err(message) => {
                    // its offsets move on only if the caller tolerates the
                    // failure (see the sink runner)
                    failed = Some(BatchError {
                        message,
                        records: batch,
                        reasons: Vec::new(),
                    });
                }
            }
        }
        let offsets = std::mem::take(&mut self.delivered)
            .into_iter()
            .map(|((t, p), o)| (t, p, o))
            .collect();
        (offsets, failed)
    }

    /// Marks a batch's records as done (delivered, or skipped by the
    /// caller).
    pub fn mark(&mut self, batch: &[SinkRecord]) {
        for r in batch {
            let next = self
                .delivered
                .entry((r.topic.clone(), r.partition))
                .or_insert(r.offset + 1);
            *next = (*next).max(r.offset + 1);
        }
    }

    /// One batch, retried as the module says; the body's size once sent.
    async fn send(&self, batch: &[SinkRecord]) -> Result<u64, String> {
        let refs: Vec<&SinkRecord> = batch.iter().collect();
        let lines = json_lines_with(
            &refs,
            self.config.key_converter,
            self.config.value_converter,
        )
        .map_err(|e| e.to_string())?;
        let text = String::from_utf8(lines).map_err(|e| e.to_string())?;
        let body = format!("[{}]", text.trim_end().replace('\n', ","));
        let mut backoff = self.config.backoff;
        let mut attempt = 0u32;
        loop {
            let mut request = self
                .client
                .request(self.config.method.clone(), self.config.url.clone())
                .header("Content-Type", "application/json")
                .body(body.clone());
            for (name, value) in &self.config.headers {
                request = request.header(name, value);
            }
            let outcome = match request.send().await {
                Ok(resp) if resp.status().is_success() => return Ok(body.len() as u64),
                Ok(resp) => {
                    let status = resp.status();
                    let retriable = status.is_server_error()
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
                    let text = resp.text().await.unwrap_or_default();
                    let message = format!(
                        "{} {} answered {status}: {}",
                        self.config.method,
                        self.config.url,
                        text.chars().take(300).collect::<String>()
                    );
                    if !retriable {
                        return Err(message);
                    }
                    message
                }
                Err(e) => format!("{} {} failed: {e}", self.config.method, self.config.url),
            };
            if attempt >= self.config.max_retries {
                return Err(format!("{outcome} (after {} retries)", attempt));
            }
            attempt += 1;
            tracing::debug!(attempt, error = %outcome, "connect: HTTP sink retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
