//! Schemas by id, subject and version: from this agent's metastore (its
//! built-in registry) or over HTTP from a registry's REST API (the
//! built-in one of any agent, or Confluent's). Parsed schemas are cached
//! by id: an id always names the same schema.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use metastore::Metastore;
use registry::{Parsed, Resolved, SchemaType};
use serde_json::{json, Value};

use super::error::ConvertError;

/// How deep references may nest (the registry refuses deeper ones).
const MAX_REFERENCE_DEPTH: usize = 32;

/// The registry's content type.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// A reference: the name the schema uses, the subject and its version.
type Ref = (String, String, i32);

/// A reference still to resolve: how deep it is, and its target once
/// fetched (its own references are then resolved first).
type Pending = (Ref, usize, Option<Fetched>);

/// A schema as fetched: its type, text and references.
#[derive(Debug, Clone)]
struct Fetched {
    schema_type: SchemaType,
    text: String,
    references: Vec<Ref>,
}

/// A parsed schema, with a JSON Schema's validator built once.
pub struct Loaded {
    pub parsed: Parsed,
    /// The validator of a JSON Schema (`None` for the other types), or
    /// why it could not be built.
    pub validator: Option<Result<jsonschema::Validator, String>>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("type", &self.parsed.schema_type())
            .finish()
    }
}

/// Where schemas come from.
#[derive(Clone)]
pub enum Source {
    /// This agent's metastore replica.
    Local(Metastore),
    /// A registry's REST API at `url` (no trailing slash).
    Remote {
        url: String,
        client: reqwest::Client,
        user_info: Option<(String, String)>,
    },
}

/// The schemas a converter uses, cached by id.
pub struct Schemas {
    source: Source,
    by_id: Mutex<HashMap<i32, Arc<Loaded>>>,
}

impl Schemas {
    pub fn new(source: Source) -> Schemas {
        Schemas {
            source,
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// How errors name the registry.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Local(_) => "this agent's built-in registry".into(),
            Source::Remote { url, .. } => url.clone(),
        }
    }

    fn cached(&self, id: i32) -> Option<Arc<Loaded>> {
        self.by_id.lock().ok().and_then(|m| m.get(&id).cloned())
    }

    fn remember(&self, id: i32, loaded: Loaded) -> Arc<Loaded> {
        let loaded = Arc::new(loaded);
        if let Ok(mut m) = self.by_id.lock() {
            m.insert(id, Arc::clone(&loaded));
        }
        loaded
    }

    /// The schema of id `id`, parsed.
    pub async fn by_id(&self, id: i32) -> Result<Arc<Loaded>, ConvertError> {
        if let Some(hit) = self.cached(id) {
            return Ok(hit);
        }
        let fetched = match &self.source {
            Source::Local(meta) => meta.read(|s| {
                s.registry().schema(id).map(|stored| {
                    stored_to_fetched(
                        &stored.schema_type,
                        &stored.schema,
                        stored
                            .references
                            .iter()
                            .map(|r| (r.name.clone(), r.subject.clone(), r.version))
                            .collect(),
                    )
                })
            }),
            Source::Remote { .. } => self
                .get_json(&format!("/schemas/ids/{id}"))
                .await?
                .map(|body| answer_to_fetched(&body).map_err(|e| format!("schema id {id}: {e}"))),
        };
        let fetched = match fetched {
            None => {
                return Err(ConvertError::UnknownSchema {
                    id,
                    registry: self.describe(),
                })
            }
            Some(f) => f.map_err(ConvertError::Registry)?,
        };
        let loaded = self
            .parse(&fetched)
            .await
            .map_err(|e| ConvertError::Registry(format!("schema id {id} does not parse: {e}")))?;
        Ok(self.remember(id, loaded))
    }

    /// The latest version of `subject`: its id and schema.
    pub async fn latest(&self, subject: &str) -> Result<(i32, Arc<Loaded>), ConvertError> {
        let id = match &self.source {
            Source::Local(meta) => meta.read(|s| {
                s.registry()
                    .subject(subject)
                    .and_then(|sub| sub.latest_live())
                    .map(|(_, v)| v.id)
            }),
            Source::Remote { .. } => {
                let path = format!("/subjects/{}/versions/latest", encode_path(subject));
                match self.get_json(&path).await? {
                    None => None,
                    Some(body) => Some(
                        body.get("id")
                            .and_then(Value::as_i64)
                            .and_then(|i| i32::try_from(i).ok())
                            .ok_or_else(|| {
                                ConvertError::Registry(format!(
                                    "the latest version of {subject} has no id"
                                ))
                            })?,
                    ),
                }
            }
        };
        let id = id.ok_or_else(|| {
            ConvertError::Registry(format!(
                "subject {subject} has no version in {} (register one, or set auto.register.schemas=true and use.latest.version=false)",
                self.describe()
            ))
        })?;
        Ok((id, self.by_id(id).await?))
    }

    /// Registers `text` (of `schema_type`) under `subject` (or finds it
    /// registered): its id and the parsed schema. Over HTTP only.
    pub async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        text: &str,
    ) -> Result<(i32, Arc<Loaded>), ConvertError> {
        let Source::Remote {
            url,
            client,
            user_info,
        } = &self.source
        else {
            return Err(ConvertError::Registry(
                "schemas are registered over the registry's REST API: no URL is known".into(),
            ));
        };
        let target = format!("{url}/subjects/{}/versions", encode_path(subject));
        let mut body = json!({ "schema": text });
        if schema_type != SchemaType::Avro {
            body["schemaType"] = Value::String(schema_type.as_str().to_owned());
        }
        let mut request = client
            .post(&target)
            .header("Content-Type", CONTENT_TYPE)
            .header("Accept", CONTENT_TYPE)
            .body(body.to_string());
        if let Some((user, password)) = user_info {
            request = request.basic_auth(user, Some(password));
        }
        let response = request
            .send()
            .await
            .map_err(|e| ConvertError::Registry(format!("POST {target} failed: {e}")))?;
        let status = response.status();
        let text_body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(ConvertError::Registry(format!(
                "registering a schema under {subject} at {url} was refused ({status}): {}",
                text_body.chars().take(300).collect::<String>()
            )));
        }
        let id = serde_json::from_str::<Value>(&text_body)
            .ok()
            .and_then(|v| v.get("id").and_then(Value::as_i64))
            .and_then(|i| i32::try_from(i).ok())
            .ok_or_else(|| {
                ConvertError::Registry(format!(
                    "registering under {subject}: the answer names no id: {text_body}"
                ))
            })?;
        Ok((id, self.by_id(id).await?))
    }

    /// A GET of the registry's API: the JSON answer, `None` on 404.
    async fn get_json(&self, path: &str) -> Result<Option<Value>, ConvertError> {
        let Source::Remote {
            url,
            client,
            user_info,
        } = &self.source
        else {
            return Ok(None);
        };
        let target = format!("{url}{path}");
        let mut request = client.get(&target).header("Accept", CONTENT_TYPE);
        if let Some((user, password)) = user_info {
            request = request.basic_auth(user, Some(password));
        }
        let response = request
            .send()
            .await
            .map_err(|e| ConvertError::Registry(format!("GET {target} failed: {e}")))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(ConvertError::Registry(format!(
                "GET {target} answered {status}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        serde_json::from_str(&body)
            .map(Some)
            .map_err(|e| ConvertError::Registry(format!("GET {target}: not JSON: {e}")))
    }

    /// One version of a subject (a reference's target).
    async fn version(&self, subject: &str, version: i32) -> Result<Option<Fetched>, String> {
        match &self.source {
            Source::Local(meta) => meta.read(|s| {
                let reg = s.registry();
                reg.subject(subject)
                    .and_then(|sub| sub.versions.get(&version))
                    .and_then(|v| reg.schema(v.id))
                    .map(|stored| {
                        stored_to_fetched(
                            &stored.schema_type,
                            &stored.schema,
                            stored
                                .references
                                .iter()
                                .map(|r| (r.name.clone(), r.subject.clone(), r.version))
                                .collect(),
                        )
                    })
                    .transpose()
            }),
            Source::Remote { .. } => {
                let path = format!("/subjects/{}/versions/{version}", encode_path(subject));
                match self.get_json(&path).await.map_err(|e| e.to_string())? {
                    None => Ok(None),
                    Some(body) => answer_to_fetched(&body).map(Some),
                }
            }
        }
    }

    /// Parses a fetched schema with its references resolved (dependencies
    /// first).
    async fn parse(&self, fetched: &Fetched) -> Result<Loaded, String> {
        let mut resolved: Vec<Resolved> = Vec::new();
        let mut stack: Vec<Pending> = fetched
            .references
            .iter()
            .rev()
            .map(|r| (r.clone(), 0, None))
            .collect();
        while let Some(((name, subject, version), depth, expanded)) = stack.pop() {
            if depth > MAX_REFERENCE_DEPTH {
                return Err(format!("references nest deeper than {MAX_REFERENCE_DEPTH}"));
            }
            if let Some(target) = expanded {
                if !resolved.iter().any(|r| r.name == name) {
                    resolved.push(Resolved {
                        name,
                        schema_type: target.schema_type,
                        schema: target.text,
                    });
                }
                continue;
            }
            let target = self.version(&subject, version).await?.ok_or_else(|| {
                format!("reference {name} names version {version} of subject {subject}, which does not exist")
            })?;
            let inner: Vec<_> = target.references.iter().rev().cloned().collect();
            stack.push(((name, subject, version), depth, Some(target)));
            for r in inner {
                stack.push((r, depth + 1, None));
            }
        }
        let parsed = registry::parse(fetched.schema_type, &fetched.text, &resolved)
            .map_err(|e| e.to_string())?;
        let validator = match &parsed {
            Parsed::Json(j) => Some(j.validator().map_err(|e| e.to_string())),
            _ => None,
        };
        Ok(Loaded { parsed, validator })
    }
}

fn stored_to_fetched(
    schema_type: &str,
    text: &str,
    references: Vec<(String, String, i32)>,
) -> Result<Fetched, String> {
    Ok(Fetched {
        schema_type: schema_type_of(Some(schema_type))?,
        text: text.to_owned(),
        references,
    })
}

fn schema_type_of(name: Option<&str>) -> Result<SchemaType, String> {
    match name.unwrap_or("AVRO").to_ascii_uppercase().as_str() {
        "AVRO" => Ok(SchemaType::Avro),
        "PROTOBUF" => Ok(SchemaType::Protobuf),
        "JSON" => Ok(SchemaType::Json),
        other => Err(format!("unknown schema type {other}")),
    }
}

/// A registry answer (`/schemas/ids/{id}`, `/subjects/{s}/versions/{v}`).
fn answer_to_fetched(body: &Value) -> Result<Fetched, String> {
    let text = body
        .get("schema")
        .and_then(Value::as_str)
        .ok_or("the answer has no schema")?;
    let mut references = Vec::new();
    for r in body
        .get("references")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let name = r.get("name").and_then(Value::as_str);
        let subject = r.get("subject").and_then(Value::as_str);
        let version = r
            .get("version")
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok());
        match (name, subject, version) {
            (Some(n), Some(s), Some(v)) => references.push((n.to_owned(), s.to_owned(), v)),
            _ => return Err(format!("a reference is malformed: {r}")),
        }
    }
    Ok(Fetched {
        schema_type: schema_type_of(body.get("schemaType").and_then(Value::as_str))?,
        text: text.to_owned(),
        references,
    })
}

/// A subject name as one URL path segment.
fn encode_path(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
