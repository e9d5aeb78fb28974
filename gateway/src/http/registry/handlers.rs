//! The endpoints of Confluent's Schema Registry API that AeroStream serves.

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use metastore::acl::AclOperation;
use metastore::registry::{code, RegistryCommand, RegistryOutput, StoredSchema};
use registry::{Compatibility, SchemaType};
use serde::Serialize;
use serde_json::{json as value, Value};

use super::request::{body, subject_not_found, Flags};
use super::service::{self, SchemaBody};
use super::{authz, json, Answer, RegistryError};
use crate::broker::Broker;
use crate::http::{Caller, HttpState};

pub fn routes() -> Router<HttpState> {
    Router::new()
        .route("/", get(|| async { json(&value!({})) }))
        .route("/schemas/types", get(types))
        .route("/schemas", get(all_schemas))
        .route("/contexts", get(|| async { json(&["."]) }))
        .route("/schemas/ids/{id}", get(schema_by_id))
        .route("/schemas/ids/{id}/schema", get(raw_schema_by_id))
        .route("/schemas/ids/{id}/versions", get(versions_of_id))
        .route("/schemas/ids/{id}/subjects", get(subjects_of_id))
        .route("/subjects", get(subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(versions).post(register))
        .route(
            "/subjects/{subject}/versions/{version}",
            get(version).delete(delete_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/schema",
            get(raw_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/referencedby",
            get(referenced_by),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            post(check_one),
        )
        .route(
            "/compatibility/subjects/{subject}/versions",
            post(check_all),
        )
}

/// A schema as `GET /schemas/ids/{id}` and the version reads show it.
fn schema_fields(s: &StoredSchema, out: &mut serde_json::Map<String, Value>) {
    out.insert("schema".into(), Value::String(s.schema.clone()));
    if s.schema_type != SchemaType::Avro.as_str() {
        out.insert("schemaType".into(), Value::String(s.schema_type.clone()));
    }
    if !s.references.is_empty() {
        out.insert("references".into(), value!(s.references));
    }
}

fn schema_not_found(id: i32) -> RegistryError {
    RegistryError::new(code::SCHEMA_NOT_FOUND, format!("Schema {id} not found"))
}

async fn types() -> Response {
    json(
        &SchemaType::ALL
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>(),
    )
}

/// Schema `id`, when the caller may describe a subject that holds it (or,
/// for a schema only referenced, any subject at all).
fn readable_schema(b: &Broker, caller: &Caller, id: i32) -> Result<StoredSchema, RegistryError> {
    let (schema, uses) = b.node.catalog.read(|s| {
        let reg = s.registry();
        let uses: Vec<String> = reg
            .uses_of(id)
            .into_iter()
            .map(|(s, _, _)| s.to_owned())
            .collect();
        (reg.schema(id).cloned(), uses)
    });
    let schema = schema.ok_or_else(|| schema_not_found(id))?;
    if uses
        .iter()
        .any(|s| authz::may(b, caller, AclOperation::Describe, s))
    {
        return Ok(schema);
    }
    Err(schema_not_found(id))
}

async fn schema_by_id(
    State(st): State<HttpState>,
    caller: Caller,
    Path(id): Path<i32>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    let mut s = readable_schema(b, &caller, id)?;
    if f.format.as_deref() == Some("serialized") {
        s.schema = in_format(b, &s)?;
    }
    let mut out = serde_json::Map::new();
    schema_fields(&s, &mut out);
    Ok(json(&out))
}

/// A Protobuf schema as the base64 of its FileDescriptorProto; other
/// types as they are.
fn in_format(b: &Broker, s: &StoredSchema) -> Result<String, RegistryError> {
    match service::parse_stored(b, s)? {
        registry::Parsed::Protobuf(p) => Ok(p.serialized()),
        _ => Ok(s.schema.clone()),
    }
}

async fn raw_schema_by_id(
    State(st): State<HttpState>,
    caller: Caller,
    Path(id): Path<i32>,
) -> Answer {
    let s = readable_schema(&st.broker, &caller, id)?;
    Ok(raw(&s.schema))
}

/// A schema's text as it was registered (the `/schema` endpoints).
fn raw(text: &str) -> Response {
    use axum::response::IntoResponse;
    (
        [(axum::http::header::CONTENT_TYPE, super::MEDIA)],
        text.to_owned(),
    )
        .into_response()
}

#[derive(Serialize)]
struct SubjectVersion<'a> {
    subject: &'a str,
    version: i32,
}

async fn versions_of_id(
    State(st): State<HttpState>,
    caller: Caller,
    Path(id): Path<i32>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    readable_schema(b, &caller, id)?;
    let uses: Vec<(String, i32, bool)> = b.node.catalog.read(|s| {
        s.registry()
            .uses_of(id)
            .into_iter()
            .map(|(s, v, d)| (s.to_owned(), v, d))
            .collect()
    });
    let shown: Vec<SubjectVersion> = uses
        .iter()
        .filter(|(s, _, deleted)| {
            (f.deleted || !deleted) && authz::may(b, &caller, AclOperation::Describe, s)
        })
        .map(|(s, v, _)| SubjectVersion {
            subject: s,
            version: *v,
        })
        .collect();
    Ok(json(&shown))
}

async fn subjects_of_id(
    State(st): State<HttpState>,
    caller: Caller,
    Path(id): Path<i32>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    readable_schema(b, &caller, id)?;
    let uses: BTreeSet<String> = b.node.catalog.read(|s| {
        s.registry()
            .uses_of(id)
            .into_iter()
            .filter(|(_, _, deleted)| f.deleted || !deleted)
            .map(|(s, _, _)| s.to_owned())
            .collect()
    });
    let shown: Vec<&String> = uses
        .iter()
        .filter(|s| authz::may(b, &caller, AclOperation::Describe, s))
        .collect();
    Ok(json(&shown))
}

/// `GET /schemas`: every version the caller may describe, as the version
/// reads show them (`latestOnly`: each subject's latest).
async fn all_schemas(State(st): State<HttpState>, caller: Caller, f: Flags) -> Response {
    let b = &st.broker;
    let rows: Vec<(String, i32, i32, StoredSchema)> = b.node.catalog.read(|s| {
        let reg = s.registry();
        let mut rows = Vec::new();
        for (name, sub) in reg.subjects(f.deleted) {
            if f.subject_prefix
                .as_deref()
                .is_some_and(|p| !name.starts_with(p))
            {
                continue;
            }
            let versions: Vec<(i32, i32)> = sub
                .versions
                .iter()
                .filter(|(_, v)| f.deleted || !v.deleted)
                .map(|(n, v)| (*n, v.id))
                .collect();
            let chosen = if f.latest_only {
                versions.last().copied().into_iter().collect()
            } else {
                versions
            };
            for (n, id) in chosen {
                if let Some(schema) = reg.schema(id) {
                    rows.push((name.clone(), n, id, schema.clone()));
                }
            }
        }
        rows
    });
    let shown: Vec<serde_json::Map<String, Value>> = rows
        .iter()
        .filter(|(subject, ..)| authz::may(b, &caller, AclOperation::Describe, subject))
        .map(|(subject, n, id, s)| version_body(subject, *n, *id, s))
        .collect();
    json(&shown)
}

async fn subjects(State(st): State<HttpState>, caller: Caller, f: Flags) -> Response {
    let b = &st.broker;
    let names: Vec<String> = b.node.catalog.read(|s| {
        s.registry()
            .subjects(f.deleted)
            .map(|(n, _)| n.clone())
            .filter(|n| f.subject_prefix.as_deref().is_none_or(|p| n.starts_with(p)))
            .collect()
    });
    let shown: Vec<&String> = names
        .iter()
        .filter(|n| authz::may(b, &caller, AclOperation::Describe, n))
        .collect();
    json(&shown)
}

async fn versions(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Describe, &subject)?;
    let versions: Option<Vec<i32>> = b.node.catalog.read(|s| {
        let sub = s.registry().subject(&subject)?;
        let v: Vec<i32> = sub
            .versions
            .iter()
            .filter(|(_, v)| f.deleted || !v.deleted)
            .map(|(n, _)| *n)
            .collect();
        (!v.is_empty()).then_some(v)
    });
    Ok(json(&versions.ok_or_else(|| subject_not_found(&subject))?))
}

/// `latest`, `-1` or a version number.
fn version_number(text: &str) -> Result<Option<i32>, RegistryError> {
    if text == "latest" || text == "-1" {
        return Ok(None);
    }
    match text.parse::<i32>() {
        Ok(v) if v >= 1 => Ok(Some(v)),
        _ => Err(RegistryError::new(
            code::INVALID_VERSION,
            format!(
                "The specified version '{text}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""
            ),
        )),
    }
}

/// A subject's version as the reads show it: (number, id, schema).
fn find_version(
    b: &Broker,
    subject: &str,
    version: &str,
    deleted: bool,
) -> Result<(i32, i32, StoredSchema), RegistryError> {
    let wanted = version_number(version)?;
    b.node.catalog.read(|s| {
        let reg = s.registry();
        let sub = reg
            .subject(subject)
            .filter(|sub| sub.versions.values().any(|v| deleted || !v.deleted))
            .ok_or_else(|| subject_not_found(subject))?;
        let found = match wanted {
            None => sub.latest_live(),
            Some(n) => sub
                .versions
                .get(&n)
                .filter(|v| deleted || !v.deleted)
                .map(|v| (n, *v)),
        };
        let (n, v) = found.ok_or_else(|| {
            RegistryError::new(
                code::VERSION_NOT_FOUND,
                format!("Version {version} not found."),
            )
        })?;
        let schema = reg
            .schema(v.id)
            .cloned()
            .ok_or_else(|| schema_not_found(v.id))?;
        Ok((n, v.id, schema))
    })
}

fn version_body(
    subject: &str,
    version: i32,
    id: i32,
    s: &StoredSchema,
) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    out.insert("subject".into(), Value::String(subject.to_owned()));
    out.insert("version".into(), value!(version));
    out.insert("id".into(), value!(id));
    schema_fields(s, &mut out);
    out
}

async fn version(
    State(st): State<HttpState>,
    caller: Caller,
    Path((subject, version)): Path<(String, String)>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Describe, &subject)?;
    let (n, id, mut s) = find_version(b, &subject, &version, f.deleted)?;
    if f.format.as_deref() == Some("serialized") {
        s.schema = in_format(b, &s)?;
    }
    Ok(json(&version_body(&subject, n, id, &s)))
}

async fn raw_version(
    State(st): State<HttpState>,
    caller: Caller,
    Path((subject, version)): Path<(String, String)>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Describe, &subject)?;
    let (_, _, s) = find_version(b, &subject, &version, f.deleted)?;
    Ok(raw(&s.schema))
}

async fn referenced_by(
    State(st): State<HttpState>,
    caller: Caller,
    Path((subject, version)): Path<(String, String)>,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Describe, &subject)?;
    let (n, _, _) = find_version(b, &subject, &version, true)?;
    let ids = b
        .node
        .catalog
        .read(|s| s.registry().referenced_by(&subject, n));
    Ok(json(&ids))
}

/// The schema of a lookup's or a check's body, parsed, for a caller who
/// may describe `subject`.
fn described_schema(
    b: &Broker,
    caller: &Caller,
    subject: &str,
    bytes: &Bytes,
) -> Result<(registry::Parsed, StoredSchema), RegistryError> {
    authz::require(b, caller, AclOperation::Describe, subject)?;
    let req: SchemaBody = body(bytes)?;
    service::parse_body(b, &req)
}

async fn register(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    bytes: Bytes,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Write, &subject)?;
    let req: SchemaBody = body(&bytes)?;
    let (id, _version) = service::register(b, &subject, &req).await?;
    Ok(json(&value!({ "id": id })))
}

/// `POST /subjects/{subject}`: the version of the subject that is this
/// schema.
async fn lookup(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    f: Flags,
    bytes: Bytes,
) -> Answer {
    let b = &st.broker;
    let (_, stored) = described_schema(b, &caller, &subject, &bytes)?;
    let found = b.node.catalog.read(|s| {
        let reg = s.registry();
        let sub = reg
            .subject(&subject)
            .filter(|sub| sub.versions.values().any(|v| f.deleted || !v.deleted))?;
        sub.versions
            .iter()
            .rev()
            .filter(|(_, v)| f.deleted || !v.deleted)
            .find_map(|(n, v)| {
                let s = reg.schema(v.id)?;
                (s.schema_type == stored.schema_type
                    && s.canonical == stored.canonical
                    && s.references == stored.references)
                    .then(|| (*n, v.id, s.clone()))
            })
            .map(Some)
            .or(Some(None))
    });
    match found {
        None => Err(subject_not_found(&subject)),
        Some(None) => Err(RegistryError::new(
            code::SCHEMA_NOT_FOUND,
            "Schema not found",
        )),
        Some(Some((n, id, s))) => Ok(json(&version_body(&subject, n, id, &s))),
    }
}

async fn delete_subject(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Delete, &subject)?;
    let out = b
        .node
        .catalog
        .registry_command(RegistryCommand::DeleteSubject {
            subject,
            permanent: f.permanent,
        })
        .await?;
    match out {
        RegistryOutput::Versions(v) => Ok(json(&v)),
        other => Err(RegistryError::new(
            code::STORE_ERROR,
            format!("the store answered {other:?}"),
        )),
    }
}

async fn delete_version(
    State(st): State<HttpState>,
    caller: Caller,
    Path((subject, version)): Path<(String, String)>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Delete, &subject)?;
    let n = match version_number(&version)? {
        Some(n) => n,
        None => find_version(b, &subject, &version, false)?.0,
    };
    let out = b
        .node
        .catalog
        .registry_command(RegistryCommand::DeleteVersion {
            subject,
            version: n,
            permanent: f.permanent,
        })
        .await?;
    match out {
        RegistryOutput::Version(v) => Ok(json(&v)),
        other => Err(RegistryError::new(
            code::STORE_ERROR,
            format!("the store answered {other:?}"),
        )),
    }
}

fn compatibility_answer(why: Vec<String>, verbose: bool) -> Response {
    if verbose {
        json(&value!({ "is_compatible": why.is_empty(), "messages": why }))
    } else {
        json(&value!({ "is_compatible": why.is_empty() }))
    }
}

/// Checks a schema against one version (`latest` or a number).
async fn check_one(
    State(st): State<HttpState>,
    caller: Caller,
    Path((subject, version)): Path<(String, String)>,
    f: Flags,
    bytes: Bytes,
) -> Answer {
    let b = &st.broker;
    let (parsed, _) = described_schema(b, &caller, &subject, &bytes)?;
    let level = service::level(b, &subject)?;
    let against = match find_version(b, &subject, &version, false) {
        Ok((_, _, s)) => vec![s],
        // nothing to be incompatible with yet
        Err(e) if e.code == code::SUBJECT_NOT_FOUND && version == "latest" => Vec::new(),
        Err(e) => return Err(e),
    };
    // one version: the level's direction, without its transitivity
    let level = match level {
        Compatibility::BackwardTransitive => Compatibility::Backward,
        Compatibility::ForwardTransitive => Compatibility::Forward,
        Compatibility::FullTransitive => Compatibility::Full,
        other => other,
    };
    let why = service::incompatibilities(b, level, &parsed, &against)?;
    Ok(compatibility_answer(why, f.verbose))
}

/// Checks a schema against the versions its subject's level names.
async fn check_all(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    f: Flags,
    bytes: Bytes,
) -> Answer {
    let b = &st.broker;
    let (parsed, _) = described_schema(b, &caller, &subject, &bytes)?;
    let level = service::level(b, &subject)?;
    let earlier: Vec<StoredSchema> = b.node.catalog.read(|s| {
        let reg = s.registry();
        reg.subject(&subject)
            .map(|sub| {
                sub.live()
                    .filter_map(|(_, v)| reg.schema(v.id).cloned())
                    .collect()
            })
            .unwrap_or_default()
    });
    let why = service::incompatibilities(b, level, &parsed, &earlier)?;
    Ok(compatibility_answer(why, f.verbose))
}
