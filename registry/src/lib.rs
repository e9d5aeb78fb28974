//! The schema registry's formats: what a schema of each type is, its
//! canonical text (two schemas with the same canonical text and references
//! are one schema, with one global id), and whether a new version is
//! compatible with earlier ones under Confluent's compatibility levels.
//!
//! Each format module answers one question, in its `cannot_read`:
//! can a consumer holding schema `reader` read data written with schema
//! `writer`? The levels are built on it here: BACKWARD asks whether the
//! new schema reads data of the latest one, FORWARD the reverse, FULL
//! both; the `_TRANSITIVE` forms ask it of every earlier version.

pub mod avro;
pub mod json;
pub mod protobuf;
mod types;

pub use types::{Compatibility, Mode, Reference, SchemaError, SchemaType};

/// A schema parsed and checked, with what identifies it.
#[derive(Debug, Clone)]
pub enum Parsed {
    Avro(avro::AvroSchema),
    Protobuf(protobuf::ProtobufSchema),
    Json(json::JsonSchema),
}

/// A referenced schema, resolved: the name the referencing schema uses for
/// it (an Avro full name, a `.proto` import path, a JSON Schema `$ref`
/// URL) and its text and type. Referenced schemas' own references come
/// first in the slice given to [`parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub name: String,
    pub schema_type: SchemaType,
    pub schema: String,
}

/// Parses `text` as a schema of `schema_type`, with its references
/// resolved; refused with [`SchemaError::Invalid`] (the registry's 42201).
pub fn parse(
    schema_type: SchemaType,
    text: &str,
    references: &[Resolved],
) -> Result<Parsed, SchemaError> {
    match schema_type {
        SchemaType::Avro => avro::parse(text, references).map(Parsed::Avro),
        SchemaType::Protobuf => protobuf::parse(text, references).map(Parsed::Protobuf),
        SchemaType::Json => json::parse(text, references).map(Parsed::Json),
    }
}

impl Parsed {
    /// The schema's type.
    pub fn schema_type(&self) -> SchemaType {
        match self {
            Parsed::Avro(_) => SchemaType::Avro,
            Parsed::Protobuf(_) => SchemaType::Protobuf,
            Parsed::Json(_) => SchemaType::Json,
        }
    }

    /// The text that identifies the schema: the same for two texts that
    /// differ only in layout (whitespace, the order of JSON keys), different
    /// whenever the meaning differs.
    pub fn canonical(&self) -> &str {
        match self {
            Parsed::Avro(s) => s.canonical(),
            Parsed::Protobuf(s) => s.canonical(),
            Parsed::Json(s) => s.canonical(),
        }
    }

    /// Why a consumer holding `self` cannot read data written with
    /// `writer`; empty when it can. Schemas of different types never read
    /// each other.
    pub fn cannot_read(&self, writer: &Parsed) -> Vec<String> {
        match (self, writer) {
            (Parsed::Avro(r), Parsed::Avro(w)) => avro::cannot_read(r, w),
            (Parsed::Protobuf(r), Parsed::Protobuf(w)) => protobuf::cannot_read(r, w),
            (Parsed::Json(r), Parsed::Json(w)) => json::cannot_read(r, w),
            (r, w) => vec![format!(
                "a {} schema cannot read data written with a {} schema",
                r.schema_type(),
                w.schema_type()
            )],
        }
    }
}

/// Why `new` may not follow `earlier` (oldest first) under `level`; empty
/// when it may. Non-transitive levels look at the latest version only.
pub fn incompatibilities(level: Compatibility, new: &Parsed, earlier: &[Parsed]) -> Vec<String> {
    let against: &[Parsed] = if level.is_transitive() {
        earlier
    } else {
        earlier.last().map(std::slice::from_ref).unwrap_or(&[])
    };
    let mut why = Vec::new();
    for (i, old) in against.iter().enumerate().rev() {
        let version = if level.is_transitive() {
            format!("version {}", i + 1)
        } else {
            "the latest version".to_owned()
        };
        if level.backward() {
            for w in new.cannot_read(old) {
                why.push(format!(
                    "the new schema cannot read data written with {version}: {w}"
                ));
            }
        }
        if level.forward() {
            for w in old.cannot_read(new) {
                why.push(format!(
                    "{version} cannot read data written with the new schema: {w}"
                ));
            }
        }
    }
    why
}

#[cfg(test)]
mod tests;
