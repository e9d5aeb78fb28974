//! JSON Schemas: checked against their meta-schema (drafts 4, 6, 7,
//! 2019-09 and 2020-12) with the `jsonschema` crate, identified by their
//! JSON with sorted keys, and compared with Confluent's JSON Schema
//! compatibility rules.
//!
//! The reader is the schema that must accept every document valid under
//! the writer. The comparison walks both schemas side by side, as
//! Confluent's does: the same kind of schema on both sides is compared
//! keyword by keyword (a bound made stricter, a property added or removed
//! under an open or closed content model, an enum narrowed...), different
//! kinds are a type change unless the reader accepts anything or the
//! writer nothing. See `compare` for the list of rules.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::{Resolved, SchemaError, SchemaType};

mod compare;

/// A JSON Schema, with the schemas its `$ref`s may name.
#[derive(Debug, Clone)]
pub struct JsonSchema {
    canonical: String,
    docs: Arc<Docs>,
}

impl JsonSchema {
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// A validator of documents against the schema, its `$ref`s to
    /// references resolved (nothing is fetched).
    pub fn validator(&self) -> Result<jsonschema::Validator, SchemaError> {
        let Some((root, references)) = self.docs.docs.split_first() else {
            return Err(SchemaError::Invalid("an empty JSON Schema".into()));
        };
        let retriever = Retriever {
            docs: references
                .iter()
                .map(|d| (d.name.clone(), d.id.clone(), d.value.clone()))
                .collect(),
        };
        jsonschema::options()
            .with_retriever(retriever)
            .build(&root.value)
            .map_err(|e| SchemaError::Invalid(format!("not a valid JSON Schema: {e}")))
    }
}

/// The schema (document 0) and its references (1..), each with the name a
/// `$ref` uses for it and its `$id`.
#[derive(Debug)]
pub(crate) struct Docs {
    docs: Vec<Doc>,
}

#[derive(Debug)]
struct Doc {
    name: String,
    id: Option<String>,
    value: Value,
}

/// Parses `text` as a JSON Schema; `references` are the schemas its
/// `$ref`s may name by the reference's name (a URL or a file name).
pub fn parse(text: &str, references: &[Resolved]) -> Result<JsonSchema, SchemaError> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| SchemaError::Invalid(format!("a JSON Schema is JSON: {e}")))?;
    if !root.is_object() && !root.is_boolean() {
        return Err(SchemaError::Invalid(
            "a JSON Schema is an object or a boolean".into(),
        ));
    }
    let mut docs = vec![Doc::new(String::new(), root.clone())];
    for r in references {
        if r.schema_type != SchemaType::Json {
            return Err(SchemaError::Invalid(format!(
                "the reference {} is a {} schema; a JSON Schema references JSON Schemas only",
                r.name, r.schema_type
            )));
        }
        let value: Value = serde_json::from_str(&r.schema).map_err(|e| {
            SchemaError::Invalid(format!("the reference {} is not JSON: {e}", r.name))
        })?;
        docs.push(Doc::new(r.name.clone(), value));
    }
    let docs = Docs { docs };
    let retriever = Retriever {
        docs: docs.docs[1..]
            .iter()
            .map(|d| (d.name.clone(), d.id.clone(), d.value.clone()))
            .collect(),
    };
    // Checks the schema against its draft's meta-schema and that every
    // `$ref` resolves (references only: nothing is fetched).
    jsonschema::options()
        .with_retriever(retriever)
        .build(&root)
        .map_err(|e| SchemaError::Invalid(format!("not a valid JSON Schema: {e}")))?;
    if let Some(bad) = docs.first_unresolved(0, &root) {
        return Err(SchemaError::Invalid(format!(
            "not a valid JSON Schema: $ref {bad} names neither a location in the schema nor one of its references"
        )));
    }
    Ok(JsonSchema {
        canonical: sorted_compact(&root),
        docs: Arc::new(docs),
    })
}

/// Why a consumer holding `reader` cannot read data written with `writer`:
/// documents valid under `writer` that `reader` may refuse. Empty when it
/// can.
pub fn cannot_read(reader: &JsonSchema, writer: &JsonSchema) -> Vec<String> {
    compare::cannot_read(&writer.docs, &reader.docs)
}

/// `v` as compact JSON with every object's keys sorted: the same text for
/// two values that differ only in layout and key order.
pub(crate) fn sorted_compact(v: &Value) -> String {
    let mut out = String::new();
    write_sorted(v, &mut out);
    out
}

fn write_sorted(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, &Value> = m.iter().collect();
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_sorted(v, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

impl Doc {
    fn new(name: String, value: Value) -> Doc {
        let id = value
            .get("$id")
            .or_else(|| value.get("id"))
            .and_then(Value::as_str)
            .map(|s| s.trim_end_matches('#').to_owned());
        Doc { name, id, value }
    }
}

/// Whether `uri` (a `$ref`'s document part, made absolute or not) names a
/// reference called `name` or identified by `id`.
fn names_doc(uri: &str, name: &str, id: Option<&str>) -> bool {
    let name = name.trim_start_matches("./");
    uri == name || id == Some(uri) || (!name.is_empty() && uri.ends_with(&format!("/{name}")))
}

/// Hands `jsonschema` the referenced schemas it asks for by URI.
struct Retriever {
    docs: Vec<(String, Option<String>, Value)>,
}

impl jsonschema::Retrieve for Retriever {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let uri = uri.as_str().trim_end_matches('#');
        self.docs
            .iter()
            .find(|(name, id, _)| names_doc(uri, name, id.as_deref()))
            .map(|(_, _, v)| v.clone())
            .ok_or_else(|| format!("{uri} is not one of the schema's references").into())
    }
}

impl Docs {
    /// The schema a `$ref` found in document `doc` names: its document and
    /// the schema there.
    pub(crate) fn resolve(&self, doc: usize, reference: &str) -> Option<(usize, &Value)> {
        let (base, fragment) = match reference.split_once('#') {
            Some((b, f)) => (b, f),
            None => (reference, ""),
        };
        let target = if base.is_empty() {
            doc
        } else {
            let joined = self.docs[doc].id.as_deref().map(|id| join_uri(id, base));
            self.docs.iter().position(|d| {
                names_doc(base, &d.name, d.id.as_deref())
                    || joined
                        .as_deref()
                        .is_some_and(|j| names_doc(j, &d.name, d.id.as_deref()))
            })?
        };
        let root = &self.docs[target].value;
        if fragment.is_empty() {
            return Some((target, root));
        }
        if fragment.starts_with('/') {
            let pointer = fragment.replace("%25", "%").replace("%22", "\"");
            return root.pointer(&pointer).map(|v| (target, v));
        }
        find_anchor(root, fragment).map(|v| (target, v))
    }

    /// The first `$ref` under `v` (in document `doc`) that does not resolve.
    fn first_unresolved(&self, doc: usize, v: &Value) -> Option<String> {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    if self.resolve(doc, r).is_none() {
                        return Some(r.clone());
                    }
                }
                m.iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "enum" | "const" | "default" | "examples")
                    })
                    .find_map(|(_, v)| self.first_unresolved(doc, v))
            }
            Value::Array(a) => a.iter().find_map(|v| self.first_unresolved(doc, v)),
            _ => None,
        }
    }
}

/// `reference` resolved against the base URI `base` (enough of RFC 3986
/// for the `$id`s schemas use: a relative path replaces the last segment).
fn join_uri(base: &str, reference: &str) -> String {
    if reference.contains("://") {
        return reference.to_owned();
    }
    match base.rfind('/') {
        Some(i) => format!("{}{}", &base[..=i], reference.trim_start_matches("./")),
        None => reference.to_owned(),
    }
}

/// The subschema named by a plain-name fragment: `$anchor` (2019-09 and
/// later) or an `$id`/`id` of `#name` (drafts 4 to 7).
fn find_anchor<'v>(v: &'v Value, anchor: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => {
            let named = |key: &str| m.get(key).and_then(Value::as_str);
            if named("$anchor") == Some(anchor)
                || named("$id").or_else(|| named("id")) == Some(&format!("#{anchor}"))
            {
                return Some(v);
            }
            m.values().find_map(|v| find_anchor(v, anchor))
        }
        Value::Array(a) => a.iter().find_map(|v| find_anchor(v, anchor)),
        _ => None,
    }
}

/// Keywords that belong to one instance type, for schemas that leave
/// `type` out.
pub(crate) fn implied_type(m: &Map<String, Value>) -> Option<&'static str> {
    const KINDS: [(&str, &[&str]); 4] = [
        (
            "object",
            &[
                "properties",
                "required",
                "additionalProperties",
                "patternProperties",
                "minProperties",
                "maxProperties",
                "dependencies",
                "dependentRequired",
                "dependentSchemas",
            ],
        ),
        (
            "array",
            &[
                "items",
                "prefixItems",
                "additionalItems",
                "minItems",
                "maxItems",
                "uniqueItems",
            ],
        ),
        ("string", &["minLength", "maxLength", "pattern"]),
        (
            "number",
            &[
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
                "multipleOf",
            ],
        ),
    ];
    KINDS
        .iter()
        .find(|(_, keys)| keys.iter().any(|k| m.contains_key(*k)))
        .map(|(kind, _)| *kind)
}

/// Deduplicates by canonical text, keeping the first of each.
pub(crate) fn distinct(values: Vec<(usize, Value)>) -> Vec<(usize, Value)> {
    let mut seen = HashSet::new();
    values
        .into_iter()
        .filter(|(doc, v)| seen.insert((*doc, sorted_compact(v))))
        .collect()
}

/// Keys in either map, sorted, each once.
pub(crate) fn all_keys<'m>(
    a: Option<&'m Map<String, Value>>,
    b: Option<&'m Map<String, Value>>,
) -> Vec<&'m String> {
    let mut keys: Vec<&String> = a.into_iter().chain(b).flat_map(|m| m.keys()).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Counts how often each text occurs, for set comparisons of JSON values.
pub(crate) fn texts(values: &[Value]) -> HashMap<String, &Value> {
    values.iter().map(|v| (sorted_compact(v), v)).collect()
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
