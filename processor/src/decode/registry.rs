//! Schemas by id from a schema registry's REST API (AeroStream's own, on
//! any agent, or Confluent's): `GET /schemas/ids/{id}`. One request at a
//! time, and only for ids the Avro decoder has not cached; a registry that
//! cannot be reached (or answers 5xx, 401, 403...) is retried with backoff
//! until it answers, the processor's reads waiting meanwhile: records are
//! never skipped because the registry was away.

use std::time::Duration;

use serde::Deserialize;

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The registry's content type.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// What the registry says of a schema id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// An Avro schema's text.
    Avro(String),
    /// The registry does not know the id (404).
    Unknown,
    /// The registry knows it, but it cannot be used, and why.
    Unusable(String),
}

/// A registry's REST API.
pub struct Registry {
    /// No trailing slash.
    url: String,
    client: reqwest::Client,
}

/// `GET /schemas/ids/{id}`'s answer.
#[derive(Deserialize)]
struct Answer {
    schema: String,
    /// Left out for Avro.
    #[serde(default, rename = "schemaType")]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<serde_json::Value>,
}

impl Registry {
    pub fn new(url: &str) -> anyhow::Result<Registry> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot make an HTTP client for {url}: {e}"))?;
        Ok(Registry {
            url: url.trim_end_matches('/').to_owned(),
            client,
        })
    }

    /// The schema of id `id`, asking again with backoff (and a warning
    /// each time) until the registry answers.
    pub async fn schema(&self, id: u32) -> Lookup {
        let mut pause = FIRST_BACKOFF;
        let mut attempts = 0u32;
        loop {
            match self.get(id).await {
                Ok(found) => {
                    if attempts > 0 {
                        tracing::info!(url = %self.url, id, "the schema registry answers again");
                    }
                    return found;
                }
                Err(e) => {
                    attempts += 1;
                    tracing::warn!(
                        url = %self.url,
                        id,
                        attempts,
                        "cannot read schema id {id} from the schema registry, \
                         retrying in {pause:?}: {e}"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// One request: what the registry says, or why it said nothing usable
    /// (worth asking again).
    async fn get(&self, id: u32) -> Result<Lookup, String> {
        let target = format!("{}/schemas/ids/{id}", self.url);
        let response = self
            .client
            .get(&target)
            .header("Accept", CONTENT_TYPE)
            .send()
            .await
            .map_err(|e| format!("GET {target}: {e}"))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Lookup::Unknown);
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("GET {target}: {e}"))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            return Err(format!("GET {target} answered {status}: {text}"));
        }
        Ok(match serde_json::from_slice::<Answer>(&body) {
            Err(e) => Lookup::Unusable(format!("the registry's answer is not a schema: {e}")),
            Ok(a) => match a.schema_type.as_deref() {
                Some(other) if !other.eq_ignore_ascii_case("AVRO") => {
                    Lookup::Unusable(format!("it is a {other} schema, not Avro"))
                }
                _ if !a.references.is_empty() => Lookup::Unusable(
                    "it references other schemas, which format: avro does not resolve yet".into(),
                ),
                _ => Lookup::Avro(a.schema),
            },
        })
    }
}
