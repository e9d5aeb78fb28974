//! What the registry's endpoints do beyond reading the state: parse a
//! schema with its references, check it against a subject's versions, and
//! register it (again, if the subject moved while it was checked).

use std::str::FromStr;

use metastore::registry::{code, RegistryCommand, RegistryOutput, SchemaRef, StoredSchema};
use metastore::MetaError;
use registry::{Compatibility, Parsed, Resolved, SchemaType};
use serde::Deserialize;

use super::RegistryError;
use crate::broker::Broker;

/// How deep references may nest (a reference's references, ...).
const MAX_REFERENCE_DEPTH: usize = 32;

/// How often a registration is checked again when the subject moved.
const REGISTER_ATTEMPTS: usize = 8;

/// The body of a registration, a lookup or a compatibility check.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaBody {
    pub schema: String,
    #[serde(default)]
    pub schema_type: Option<String>,
    #[serde(default)]
    pub references: Vec<SchemaRef>,
    /// IMPORT mode only.
    #[serde(default)]
    pub id: Option<i32>,
    #[serde(default)]
    pub version: Option<i32>,
}

pub fn schema_type(name: Option<&str>) -> Result<SchemaType, RegistryError> {
    match name {
        None | Some("") => Ok(SchemaType::Avro),
        Some(t) => SchemaType::from_str(t)
            .map_err(|e| RegistryError::new(code::INVALID_SCHEMA, e.to_string())),
    }
}

fn invalid(e: impl std::fmt::Display) -> RegistryError {
    RegistryError::new(code::INVALID_SCHEMA, e.to_string())
}

/// The texts of `references` and of everything they reference in turn,
/// dependencies first, from this replica's state.
fn resolve(b: &Broker, references: &[SchemaRef]) -> Result<Vec<Resolved>, RegistryError> {
    let mut out: Vec<Resolved> = Vec::new();
    let mut stack: Vec<(SchemaRef, usize, bool)> = references
        .iter()
        .rev()
        .map(|r| (r.clone(), 0, false))
        .collect();
    while let Some((r, depth, expanded)) = stack.pop() {
        if depth > MAX_REFERENCE_DEPTH {
            return Err(invalid(format!(
                "Invalid schema: references nest deeper than {MAX_REFERENCE_DEPTH}"
            )));
        }
        let found = b.node.catalog.read(|s| {
            let reg = s.registry();
            reg.subject(&r.subject)
                .and_then(|sub| sub.versions.get(&r.version))
                .and_then(|v| reg.schema(v.id))
                .cloned()
        });
        let Some(schema) = found else {
            return Err(invalid(format!(
                "Invalid schema: reference {} names version {} of subject {}, which does not exist",
                r.name, r.version, r.subject
            )));
        };
        if expanded {
            if !out.iter().any(|o| o.name == r.name) {
                out.push(Resolved {
                    name: r.name.clone(),
                    schema_type: schema_type(Some(&schema.schema_type))?,
                    schema: schema.schema,
                });
            }
            continue;
        }
        stack.push((r, depth, true));
        for inner in schema.references.iter().rev() {
            stack.push((inner.clone(), depth + 1, false));
        }
    }
    Ok(out)
}

/// Parses a stored schema with its references.
pub fn parse_stored(b: &Broker, s: &StoredSchema) -> Result<Parsed, RegistryError> {
    let resolved = resolve(b, &s.references)?;
    registry::parse(schema_type(Some(&s.schema_type))?, &s.schema, &resolved).map_err(invalid)
}

/// Parses a request's schema: the parsed schema and what to store.
pub fn parse_body(b: &Broker, body: &SchemaBody) -> Result<(Parsed, StoredSchema), RegistryError> {
    let ty = schema_type(body.schema_type.as_deref())?;
    let resolved = resolve(b, &body.references)?;
    let parsed = registry::parse(ty, &body.schema, &resolved).map_err(invalid)?;
    let stored = StoredSchema {
        schema_type: ty.as_str().to_owned(),
        schema: body.schema.clone(),
        canonical: parsed.canonical().to_owned(),
        references: body.references.clone(),
    };
    Ok((parsed, stored))
}

/// The subject's live versions (oldest first) as stored, and the latest
/// version's number.
fn live_versions(b: &Broker, subject: &str) -> (Vec<StoredSchema>, Option<i32>) {
    b.node.catalog.read(|s| {
        let reg = s.registry();
        let Some(sub) = reg.subject(subject) else {
            return (Vec::new(), None);
        };
        let versions = sub
            .live()
            .filter_map(|(_, v)| reg.schema(v.id).cloned())
            .collect();
        (versions, sub.latest_live().map(|(n, _)| n))
    })
}

pub fn level(b: &Broker, subject: &str) -> Result<Compatibility, RegistryError> {
    let level = b
        .node
        .catalog
        .read(|s| s.registry().compatibility(Some(subject)).to_owned());
    Compatibility::from_str(&level).map_err(|e| RegistryError::new(code::INVALID_COMPATIBILITY, e))
}

/// Why `new` may not follow the given versions under `level`.
pub fn incompatibilities(
    b: &Broker,
    level: Compatibility,
    new: &Parsed,
    earlier: &[StoredSchema],
) -> Result<Vec<String>, RegistryError> {
    if level == Compatibility::None {
        return Ok(Vec::new());
    }
    let mut parsed = Vec::with_capacity(earlier.len());
    for s in earlier {
        parsed.push(parse_stored(b, s)?);
    }
    Ok(registry::incompatibilities(level, new, &parsed))
}

/// Registers `body` under `subject`: `(id, version)`.
pub async fn register(
    b: &Broker,
    subject: &str,
    body: &SchemaBody,
) -> Result<(i32, i32), RegistryError> {
    let (parsed, stored) = parse_body(b, body)?;
    let import = b
        .node
        .catalog
        .read(|s| s.registry().mode(Some(subject)) == "IMPORT");
    let mut last = None;
    for _ in 0..REGISTER_ATTEMPTS {
        let (earlier, latest) = live_versions(b, subject);
        let already = earlier.iter().any(|e| {
            e.schema_type == stored.schema_type
                && e.canonical == stored.canonical
                && e.references == stored.references
        });
        if !import && !already {
            let why = incompatibilities(b, level(b, subject)?, &parsed, &earlier)?;
            if !why.is_empty() {
                return Err(RegistryError::new(
                    code::INCOMPATIBLE,
                    format!(
                        "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{}]",
                        why.join(", ")
                    ),
                ));
            }
        }
        let command = RegistryCommand::Register {
            subject: subject.to_owned(),
            schema: stored.clone(),
            expect_latest: latest,
            id: body.id,
            version: body.version,
        };
        match b.node.catalog.registry_command(command).await {
            Ok(RegistryOutput::Registered { id, version }) => return Ok((id, version)),
            Ok(other) => {
                return Err(RegistryError::new(
                    code::STORE_ERROR,
                    format!("the store answered {other:?}"),
                ))
            }
            Err(e @ MetaError::StaleRequest { .. }) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(
        || RegistryError::new(code::STORE_ERROR, "registration not applied"),
        RegistryError::from,
    ))
}
