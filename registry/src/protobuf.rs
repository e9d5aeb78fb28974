//! Protobuf schemas: a `.proto` file (proto2 or proto3) as the Protobuf
//! serializers register it, with the files it imports given as references.
//!
//! [`parse`] compiles the text with protox into prost-reflect descriptors;
//! the canonical text is a normalized rendering of the file's descriptor
//! (see [`canonical`]), and [`cannot_read`] applies the registry's
//! Protobuf compatibility rules (see [`compat`]).

mod canonical;
mod compat;

use std::collections::HashMap;
use std::fmt;

use prost_reflect::FileDescriptor;
use protox::file::{File, FileResolver, GoogleFileResolver};

use crate::{Resolved, SchemaError, SchemaType};

/// A parsed `.proto` file with everything it imports.
#[derive(Clone)]
pub struct ProtobufSchema {
    /// The schema's own file; its pool holds the imported files too.
    file: FileDescriptor,
    canonical: String,
}

impl ProtobufSchema {
    /// The normalized text that identifies the schema: the same for two
    /// files that differ only in layout, comments or the spelling of type
    /// names, different whenever the meaning differs.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The descriptor of the schema's own file.
    pub fn file(&self) -> &FileDescriptor {
        &self.file
    }
}

impl fmt::Debug for ProtobufSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtobufSchema")
            .field("file", &self.file.name())
            .field("canonical", &self.canonical)
            .finish()
    }
}

/// The name under which the schema's own text is compiled: one that no
/// reference uses, so that an import can never resolve to the schema itself.
fn main_file_name(references: &[Resolved]) -> String {
    let mut name = String::from("schema.proto");
    while references.iter().any(|r| r.name == name) {
        name.insert(0, '_');
    }
    name
}

/// Resolves imports to the schema's references first, then to the
/// well-known types bundled with protox (`google/protobuf/*.proto`).
struct References {
    files: HashMap<String, String>,
    google: GoogleFileResolver,
}

impl FileResolver for References {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.files.get(name) {
            Some(text) => File::from_source(name, text),
            None => self.google.open_file(name),
        }
    }
}

/// Parses `text`, a `.proto` file whose imports are among `references`
/// (by their names) or the well-known types.
pub fn parse(text: &str, references: &[Resolved]) -> Result<ProtobufSchema, SchemaError> {
    let mut files = HashMap::new();
    for reference in references {
        if reference.schema_type != SchemaType::Protobuf {
            return Err(SchemaError::Invalid(format!(
                "reference '{}' is a {} schema: a Protobuf schema can import Protobuf schemas only",
                reference.name, reference.schema_type
            )));
        }
        files.insert(reference.name.clone(), reference.schema.clone());
    }
    let main = main_file_name(references);
    files.insert(main.clone(), text.to_owned());

    let mut compiler = protox::Compiler::with_file_resolver(References {
        files,
        google: GoogleFileResolver::new(),
    });
    compiler.include_imports(true).include_source_info(false);
    // protox's Debug rendering of an error is its message prefixed with
    // `file:line:column:` when the error has a location.
    compiler
        .open_file(&main)
        .map_err(|e| SchemaError::Invalid(format!("{e:?}")))?;
    let file = compiler
        .descriptor_pool()
        .get_file_by_name(&main)
        .ok_or_else(|| SchemaError::Invalid(format!("{main}: the file was not compiled")))?;
    let canonical = canonical::render(&file);
    Ok(ProtobufSchema { file, canonical })
}

/// Why a consumer holding `reader` cannot read data written with `writer`;
/// empty when it can.
pub fn cannot_read(reader: &ProtobufSchema, writer: &ProtobufSchema) -> Vec<String> {
    compat::cannot_read(&reader.file, &writer.file)
}

#[cfg(test)]
#[path = "protobuf_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "protobuf_parse_tests.rs"]
mod parse_tests;
