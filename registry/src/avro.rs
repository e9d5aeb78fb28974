//! Avro schemas: parsed with `apache-avro`, identified by their JSON text
//! with sorted keys, and compared with the Avro specification's schema
//! resolution rules (what a reader can make of data a writer wrote).
//!
//! The resolution check is AeroStream's own rather than `apache-avro`'s
//! `SchemaCompatibility`: that one ignores enum defaults and aliases,
//! compares named types defined once and used again by name only by their
//! names, and reports which field is the problem only coarsely. Here every
//! finding names where in the schema it is.

use std::collections::{HashMap, HashSet};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use apache_avro::schema::{Alias, EnumSchema, Name, RecordSchema, Schema};
use serde_json::Value;

use crate::{Resolved, SchemaError, SchemaType};

/// An Avro schema, parsed together with the named types it references.
#[derive(Debug, Clone)]
pub struct AvroSchema {
    canonical: String,
    schema: Schema,
    /// Every named type the schema and its references define, by full name:
    /// where a type used by name (`Schema::Ref`) is found.
    names: Arc<HashMap<String, Schema>>,
    /// The schemas of the references, as parsed alongside it.
    referenced: Arc<Vec<Schema>>,
}

impl AvroSchema {
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The parsed schema (named types from references appear in it as
    /// `Schema::Ref`).
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The referenced schemas followed by the schema itself: what
    /// `apache-avro`'s `*_schemata` functions resolve names against.
    pub fn schemata(&self) -> Vec<&Schema> {
        self.referenced
            .iter()
            .chain(std::iter::once(&self.schema))
            .collect()
    }
}

/// Parses `text` as an Avro schema; `references` are the schemas of the
/// named types it uses from other subjects, in dependency order.
pub fn parse(text: &str, references: &[Resolved]) -> Result<AvroSchema, SchemaError> {
    let json: Value = serde_json::from_str(text)
        .map_err(|e| SchemaError::Invalid(format!("an Avro schema is JSON: {e}")))?;
    let mut texts = Vec::with_capacity(references.len());
    for r in references {
        if r.schema_type != SchemaType::Avro {
            return Err(SchemaError::Invalid(format!(
                "the reference {} is a {} schema; an Avro schema references Avro schemas only",
                r.name, r.schema_type
            )));
        }
        texts.push(r.schema.as_str());
    }
    // `apache-avro` panics on a few malformed inputs (a name that is not a
    // valid Avro name, for one) instead of returning an error: a panic is
    // one more way of saying the text is not a valid schema.
    let parsed = panic::catch_unwind(AssertUnwindSafe(|| {
        if texts.is_empty() {
            Schema::parse_str(text).map(|s| (s, Vec::new()))
        } else {
            Schema::parse_str_with_list(text, texts.iter().copied())
        }
    }));
    let (schema, referenced) = match parsed {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(e)) => {
            return Err(SchemaError::Invalid(format!(
                "not a valid Avro schema: {e}"
            )))
        }
        Err(_) => {
            return Err(SchemaError::Invalid(
                "not a valid Avro schema: a name, namespace or symbol is malformed".into(),
            ));
        }
    };
    let mut names = HashMap::new();
    for s in referenced.iter().chain(std::iter::once(&schema)) {
        collect_names(s, &mut names);
    }
    if let Some(missing) = unresolved(&schema, &names) {
        return Err(SchemaError::Invalid(format!(
            "not a valid Avro schema: the type {missing} is not defined by the schema or its references"
        )));
    }
    Ok(AvroSchema {
        canonical: canonical_text(&json),
        schema,
        names: Arc::new(names),
        referenced: Arc::new(referenced),
    })
}

/// The schema's JSON with keys sorted and no whitespace; a primitive type
/// spelt `{"type": "int"}` becomes `"int"`, as Avro reads both alike.
fn canonical_text(json: &Value) -> String {
    crate::json::sorted_compact(&normalize(json))
}

fn normalize(v: &Value) -> Value {
    const PRIMITIVES: [&str; 8] = [
        "null", "boolean", "int", "long", "float", "double", "bytes", "string",
    ];
    match v {
        Value::Object(m) => {
            if m.len() == 1 {
                if let Some(Value::String(t)) = m.get("type") {
                    if PRIMITIVES.contains(&t.as_str()) {
                        return Value::String(t.clone());
                    }
                }
            }
            Value::Object(m.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

fn full_name(name: &Name) -> String {
    name.fullname(None)
}

/// Registers the named types `schema` defines, by full name.
fn collect_names(schema: &Schema, names: &mut HashMap<String, Schema>) {
    match schema {
        Schema::Record(r) => {
            names.insert(full_name(&r.name), schema.clone());
            for f in &r.fields {
                collect_names(&f.schema, names);
            }
        }
        Schema::Enum(e) => {
            names.insert(full_name(&e.name), schema.clone());
        }
        Schema::Fixed(f) => {
            names.insert(full_name(&f.name), schema.clone());
        }
        Schema::Decimal(d) => collect_names(&d.inner, names),
        Schema::Array(a) => collect_names(&a.items, names),
        Schema::Map(m) => collect_names(&m.types, names),
        Schema::Union(u) => {
            for v in u.variants() {
                collect_names(v, names);
            }
        }
        _ => {}
    }
}

/// The first type used by name that no definition provides.
fn unresolved(schema: &Schema, names: &HashMap<String, Schema>) -> Option<String> {
    match schema {
        Schema::Ref { name } => {
            let full = full_name(name);
            (!names.contains_key(&full)).then_some(full)
        }
        Schema::Record(r) => r.fields.iter().find_map(|f| unresolved(&f.schema, names)),
        Schema::Array(a) => unresolved(&a.items, names),
        Schema::Map(m) => unresolved(&m.types, names),
        Schema::Union(u) => u.variants().iter().find_map(|v| unresolved(v, names)),
        _ => None,
    }
}

/// Why a consumer holding `reader` cannot read data written with `writer`
/// (empty when it can), by the Avro specification's schema resolution.
pub fn cannot_read(reader: &AvroSchema, writer: &AvroSchema) -> Vec<String> {
    let mut checker = Checker {
        reader_names: &reader.names,
        writer_names: &writer.names,
        in_progress: HashSet::new(),
    };
    let mut out = Vec::new();
    checker.check(&writer.schema, &reader.schema, "", &mut out);
    out
}

/// A named type's names, as resolution compares them.
struct Named {
    /// The name without its namespace: what a reader and a writer type
    /// must share (as Avro's own implementations compare them).
    simple: String,
    full: String,
    /// The reader's aliases, full names: a writer type of one of these
    /// names is read as this type.
    aliases: Vec<String>,
}

impl Named {
    fn new(name: &Name, aliases: Option<&Vec<Alias>>) -> Named {
        Named {
            simple: name
                .name
                .rsplit('.')
                .next()
                .unwrap_or(&name.name)
                .to_owned(),
            full: full_name(name),
            aliases: aliases
                .map(|a| {
                    a.iter()
                        .map(|a| a.fullname(name.namespace.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Whether a reader type named `self` reads a writer type named `writer`.
    fn reads(&self, writer: &Named) -> bool {
        self.simple == writer.simple || self.aliases.contains(&writer.full)
    }
}

/// A schema as resolution sees it: logical types are their underlying
/// types, types used by name are their definitions.
enum View<'a> {
    Primitive(&'static str),
    Array(&'a Schema),
    Map(&'a Schema),
    Union(&'a [Schema]),
    Record(&'a RecordSchema),
    Enum(&'a EnumSchema),
    Fixed(Named, usize),
    Unknown(String),
}

impl View<'_> {
    fn describe(&self) -> String {
        match self {
            View::Primitive(p) => (*p).to_owned(),
            View::Array(_) => "array".into(),
            View::Map(_) => "map".into(),
            View::Union(_) => "union".into(),
            View::Record(r) => format!("record {}", full_name(&r.name)),
            View::Enum(e) => format!("enum {}", full_name(&e.name)),
            View::Fixed(n, size) => format!("fixed {} (size {size})", n.full),
            View::Unknown(name) => format!("undefined type {name}"),
        }
    }
}

fn view<'a>(schema: &'a Schema, names: &'a HashMap<String, Schema>) -> View<'a> {
    match schema {
        Schema::Null => View::Primitive("null"),
        Schema::Boolean => View::Primitive("boolean"),
        Schema::Int | Schema::Date | Schema::TimeMillis => View::Primitive("int"),
        Schema::Long
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => View::Primitive("long"),
        Schema::Float => View::Primitive("float"),
        Schema::Double => View::Primitive("double"),
        Schema::Bytes | Schema::BigDecimal => View::Primitive("bytes"),
        Schema::String | Schema::Uuid => View::Primitive("string"),
        Schema::Array(a) => View::Array(&a.items),
        Schema::Map(m) => View::Map(&m.types),
        Schema::Union(u) => View::Union(u.variants()),
        Schema::Record(r) => View::Record(r),
        Schema::Enum(e) => View::Enum(e),
        Schema::Fixed(f) => View::Fixed(Named::new(&f.name, f.aliases.as_ref()), f.size),
        Schema::Decimal(d) => view(&d.inner, names),
        Schema::Duration => View::Fixed(
            Named {
                simple: "duration".into(),
                full: "duration".into(),
                aliases: Vec::new(),
            },
            12,
        ),
        Schema::Ref { name } => {
            let full = full_name(name);
            match names.get(&full) {
                Some(s) if !matches!(s, Schema::Ref { .. }) => view(s, names),
                _ => View::Unknown(full),
            }
        }
    }
}

/// Whether a writer's primitive is read as the reader's: the same type, or
/// one of the specification's promotions.
fn promotes(writer: &str, reader: &str) -> bool {
    writer == reader
        || matches!(
            (writer, reader),
            ("int", "long" | "float" | "double")
                | ("long", "float" | "double")
                | ("float", "double")
                | ("string", "bytes")
                | ("bytes", "string")
        )
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "at the top level".into()
    } else {
        format!("at {path}")
    }
}

fn join(path: &str, step: &str) -> String {
    if path.is_empty() {
        step.to_owned()
    } else {
        format!("{path}.{step}")
    }
}

struct Checker<'a> {
    reader_names: &'a HashMap<String, Schema>,
    writer_names: &'a HashMap<String, Schema>,
    /// Pairs of (writer, reader) records being compared: met again further
    /// down a recursive type, they are taken as compatible (whatever is
    /// wrong with them is found where the comparison began).
    in_progress: HashSet<(String, String)>,
}

impl<'a> Checker<'a> {
    /// Whether `reader` reads `writer`, without reporting why not.
    fn reads(&mut self, writer: &'a Schema, reader: &'a Schema) -> bool {
        let mut out = Vec::new();
        self.check(writer, reader, "", &mut out);
        out.is_empty()
    }

    fn check(&mut self, writer: &'a Schema, reader: &'a Schema, path: &str, out: &mut Vec<String>) {
        let w = view(writer, self.writer_names);
        let r = view(reader, self.reader_names);
        match (&w, &r) {
            (View::Unknown(_), _) | (_, View::Unknown(_)) => out.push(format!(
                "{}: the reader's {} cannot read the writer's {}",
                at(path),
                r.describe(),
                w.describe()
            )),
            // Every branch the writer may have written must be readable.
            (View::Union(branches), _) => {
                for b in branches.iter() {
                    self.check(b, reader, path, out);
                }
            }
            // The reader's union reads what one of its branches reads.
            (_, View::Union(branches)) => {
                if !branches.iter().any(|b| self.reads(writer, b)) {
                    out.push(format!(
                        "{}: no branch of the reader's union can read the writer's {}",
                        at(path),
                        w.describe()
                    ));
                }
            }
            (View::Primitive(wp), View::Primitive(rp)) => {
                if !promotes(wp, rp) {
                    out.push(format!(
                        "{}: the reader's type {rp} cannot read the writer's type {wp}",
                        at(path)
                    ));
                }
            }
            (View::Array(wi), View::Array(ri)) => self.check(wi, ri, &format!("{path}[]"), out),
            (View::Map(wv), View::Map(rv)) => self.check(wv, rv, &format!("{path}{{}}"), out),
            (View::Fixed(wn, ws), View::Fixed(rn, rs)) => {
                if !rn.reads(wn) {
                    out.push(format!(
                        "{}: the reader's fixed {} cannot read the writer's fixed {}: the names differ",
                        at(path),
                        rn.full,
                        wn.full
                    ));
                } else if ws != rs {
                    out.push(format!(
                        "{}: the reader's fixed {} has size {rs}, the writer's {ws}",
                        at(path),
                        rn.full
                    ));
                }
            }
            (View::Enum(we), View::Enum(re)) => self.check_enum(we, re, path, out),
            (View::Record(wr), View::Record(rr)) => self.check_record(wr, rr, path, out),
            _ => out.push(format!(
                "{}: the reader's {} cannot read the writer's {}",
                at(path),
                r.describe(),
                w.describe()
            )),
        }
    }

    fn check_enum(
        &self,
        writer: &EnumSchema,
        reader: &EnumSchema,
        path: &str,
        out: &mut Vec<String>,
    ) {
        let wn = Named::new(&writer.name, writer.aliases.as_ref());
        let rn = Named::new(&reader.name, reader.aliases.as_ref());
        if !rn.reads(&wn) {
            out.push(format!(
                "{}: the reader's enum {} cannot read the writer's enum {}: the names differ",
                at(path),
                rn.full,
                wn.full
            ));
            return;
        }
        let missing: Vec<&str> = writer
            .symbols
            .iter()
            .filter(|s| !reader.symbols.contains(s))
            .map(String::as_str)
            .collect();
        // A reader enum with a default reads unknown symbols as the default.
        if !missing.is_empty() && reader.default.is_none() {
            out.push(format!(
                "{}: the reader's enum {} lacks the writer's symbols {} and has no default",
                at(path),
                rn.full,
                missing.join(", ")
            ));
        }
    }

    fn check_record(
        &mut self,
        writer: &'a RecordSchema,
        reader: &'a RecordSchema,
        path: &str,
        out: &mut Vec<String>,
    ) {
        let wn = Named::new(&writer.name, writer.aliases.as_ref());
        let rn = Named::new(&reader.name, reader.aliases.as_ref());
        if !rn.reads(&wn) {
            out.push(format!(
                "{}: the reader's record {} cannot read the writer's record {}: the names differ",
                at(path),
                rn.full,
                wn.full
            ));
            return;
        }
        let key = (wn.full.clone(), rn.full.clone());
        if !self.in_progress.insert(key.clone()) {
            return;
        }
        let base = if path.is_empty() {
            rn.simple.clone()
        } else {
            path.to_owned()
        };
        for field in &reader.fields {
            let found = writer.fields.iter().find(|w| {
                w.name == field.name || field.aliases.as_ref().is_some_and(|a| a.contains(&w.name))
            });
            let field_path = join(&base, &field.name);
            match found {
                Some(w) => self.check(&w.schema, &field.schema, &field_path, out),
                None if field.default.is_none() => out.push(format!(
                    "{}: the reader's field {} is not in the writer's record {} and has no default",
                    at(&field_path),
                    field.name,
                    wn.full
                )),
                None => {}
            }
        }
        self.in_progress.remove(&key);
    }
}

#[cfg(test)]
#[path = "avro_tests.rs"]
mod tests;
