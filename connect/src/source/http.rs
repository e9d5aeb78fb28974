//! `HttpSource`: polls a URL and writes what it answers to a topic.
//!
//! Every `http.poll.interval.ms` the task sends a GET (with the
//! `If-None-Match` and `If-Modified-Since` of the last answer, so an
//! unchanged resource answers 304 and writes nothing). A 2xx answer that
//! is a JSON array becomes one record per element
//! (`http.response.records=array`, the default), or the whole body one
//! record (`body`); `http.record.key.field` names a top-level field of
//! each element to key its record by. The source offset is the last
//! answer's validators (ETag, Last-Modified), so a task restarted
//! elsewhere does not write an unchanged answer again. Connection errors,
//! 5xx, 408 and 429 are logged and retried at the next poll; any other
//! answer fails the task with the answer as the reason.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::config::{Config, ConfigDef, Problem};

pub const CLASS: &str = "io.aerostream.connect.http.HttpSource";

pub fn definitions() -> Vec<ConfigDef> {
    vec![
        ConfigDef::new("http.url", "STRING", None, "HIGH", "The URL polled (GET).")
            .in_group("HTTP"),
        ConfigDef::new(
            "kafka.topic",
            "STRING",
            None,
            "HIGH",
            "The topic records are written to.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "http.poll.interval.ms",
            "LONG",
            Some("5000"),
            "MEDIUM",
            "Time between two polls.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "http.response.records",
            "STRING",
            Some("array"),
            "MEDIUM",
            "array: a JSON array answer is one record per element; body: the answer is one record.",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "http.record.key.field",
            "STRING",
            Some(""),
            "LOW",
            "A top-level field of each element whose value keys its record (array mode).",
        )
        .in_group("HTTP"),
        ConfigDef::new(
            "http.headers",
            "STRING",
            Some(""),
            "LOW",
            "Extra request headers, `Name: value` separated by `|`.",
        )
        .in_group("HTTP"),
    ]
}

/// The source's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub url: reqwest::Url,
    pub topic: String,
    pub interval: Duration,
    pub per_element: bool,
    pub key_field: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl Settings {
    pub fn parse(config: &Config) -> Result<Settings, Vec<Problem>> {
        let mut problems = Vec::new();
        let url = match config
            .get("http.url")
            .map(|u| reqwest::Url::parse(u.trim()))
        {
            Some(Ok(u)) if matches!(u.scheme(), "http" | "https") => Some(u),
            Some(_) => {
                problems.push((
                    "http.url".to_owned(),
                    "Invalid value for configuration http.url: an http:// or https:// URL"
                        .to_owned(),
                ));
                None
            }
            None => {
                problems.push((
                    "http.url".to_owned(),
                    "Missing required configuration \"http.url\" which has no default value."
                        .to_owned(),
                ));
                None
            }
        };
        let topic = crate::config::required(config, "kafka.topic", &mut problems);
        let interval = match config
            .get("http.poll.interval.ms")
            .map(|v| v.trim().parse::<u64>())
        {
            None => 5000,
            Some(Ok(ms)) if ms >= 100 => ms,
            Some(_) => {
                problems.push((
                    "http.poll.interval.ms".to_owned(),
                    "Invalid value for configuration http.poll.interval.ms: at least 100"
                        .to_owned(),
                ));
                5000
            }
        };
        let per_element = match config.get("http.response.records").map(|v| v.trim()) {
            None | Some("array") => true,
            Some("body") => false,
            Some(other) => {
                problems.push((
                    "http.response.records".to_owned(),
                    format!("Invalid value {other} for configuration http.response.records: array or body"),
                ));
                true
            }
        };
        let headers = crate::config::http_headers(config, "http.headers", &mut problems);
        match url {
            Some(url) if problems.is_empty() => Ok(Settings {
                url,
                topic,
                interval: Duration::from_millis(interval),
                per_element,
                key_field: config
                    .get("http.record.key.field")
                    .map(|f| f.trim().to_owned())
                    .filter(|f| !f.is_empty()),
                headers,
            }),
            _ => Err(problems),
        }
    }
}

pub fn validate(config: &Config) -> Vec<Problem> {
    Settings::parse(config).err().unwrap_or_default()
}

/// One poll's records, and the offset to keep once they are acknowledged.
#[derive(Debug, Default)]
pub struct Polled {
    pub records: Vec<(Option<Bytes>, Bytes)>,
    pub offset: Option<String>,
}

/// One task's poller.
pub struct HttpSource {
    settings: Settings,
    client: reqwest::Client,
    etag: Option<String>,
    last_modified: Option<String>,
    next_poll: Instant,
}

impl HttpSource {
    pub fn new(config: &Config) -> Result<HttpSource, String> {
        let settings = Settings::parse(config).map_err(|p| {
            p.into_iter()
                .map(|(k, m)| format!("{k}: {m}"))
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("the HTTP client could not be set up: {e}"))?;
        Ok(HttpSource {
            settings,
            client,
            etag: None,
            last_modified: None,
            next_poll: Instant::now(),
        })
    }

    pub fn topic(&self) -> &str {
        &self.settings.topic
    }

    /// The source partition: the URL.
    pub fn partition(&self) -> String {
        json!({ "url": self.settings.url.as_str() }).to_string()
    }

    /// Goes on from a committed offset (the last answer's validators).
    pub fn resume(&mut self, offset: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(offset)
            .map_err(|e| format!("the committed offset {offset} is not JSON: {e}"))?;
        self.etag = v.get("etag").and_then(Value::as_str).map(str::to_owned);
        self.last_modified = v
            .get("last_modified")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(())
    }

    /// How long until the next poll is due.
    pub fn pause(&self) -> Duration {
        self.next_poll.saturating_duration_since(Instant::now())
    }

    /// Polls once (when due; otherwise answers nothing).
    pub async fn poll(&mut self) -> Result<Polled, String> {
        if Instant::now() < self.next_poll {
            return Ok(Polled::default());
        }
        self.next_poll = Instant::now() + self.settings.interval;
        let mut request = self.client.get(self.settings.url.clone());
        for (name, value) in &self.settings.headers {
            request = request.header(name, value);
        }
        if let Some(etag) = &self.etag {
            request = request.header("If-None-Match", etag);
        }
        if let Some(lm) = &self.last_modified {
            request = request.header("If-Modified-Since", lm);
        }
        let url = &self.settings.url;
        let resp = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(%url, error = %e, "connect: HTTP source poll failed; trying again at the next poll");
                return Ok(Polled::default());
            }
        };
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(Polled::default());
        }
        if !status.is_success() {
            let retriable = status.is_server_error()
                || status == reqwest::StatusCode::REQUEST_TIMEOUT
                || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
            let text = resp.text().await.unwrap_or_default();
            let message = format!(
                "GET {url} answered {status}: {}",
                text.chars().take(300).collect::<String>()
            );
            if retriable {
                tracing::warn!(%message, "connect: HTTP source trying again at the next poll");
                return Ok(Polled::default());
            }
            return Err(message);
        }
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (etag, last_modified) = (header("ETag"), header("Last-Modified"));
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("reading the answer of GET {url} failed: {e}"))?;
        let records = self.records(body);
        self.etag = etag;
        self.last_modified = last_modified;
        Ok(Polled {
            records,
            offset: Some(
                json!({ "etag": self.etag, "last_modified": self.last_modified }).to_string(),
            ),
        })
    }

    fn records(&self, body: Bytes) -> Vec<(Option<Bytes>, Bytes)> {
        if !self.settings.per_element {
            return vec![(None, body)];
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Array(items)) => items
                .into_iter()
                .map(|item| {
                    let key = self.settings.key_field.as_ref().and_then(|f| {
                        item.get(f).map(|k| match k {
                            Value::String(s) => Bytes::from(s.clone()),
                            other => Bytes::from(other.to_string()),
                        })
                    });
                    (key, Bytes::from(item.to_string()))
                })
                .collect(),
            // not an array: the answer is one record
            _ => vec![(None, body)],
        }
    }
}
