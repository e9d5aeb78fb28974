//! Protobuf schemas: a `.proto` file (proto2 or proto3) as the Protobuf
//! serializers register it, with the files it imports given as references.
//! The schema and each reference may also come serialized, as the base64
//! of the file's encoded `FileDescriptorProto` (see `protobuf/serialized.rs`), and
//! [`ProtobufSchema::serialized`] gives that form back.
//!
//! [`parse`] compiles the text with protox into prost-reflect descriptors
//! (serialized files join the same descriptor pool as they are);
//! the canonical text is a normalized rendering of the file's descriptor
//! (see `protobuf/canonical.rs`), and [`cannot_read`] applies the registry's
//! Protobuf compatibility rules (see `protobuf/compat.rs`).

mod canonical;
mod compat;
mod serialized;

use std::collections::HashMap;
use std::fmt;

use prost_reflect::FileDescriptor;
use protox::file::{File, FileResolver, GoogleFileResolver};

use self::serialized::{Message, Serialized};
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

    /// The schema in serialized form (`?format=serialized`): the base64 of
    /// its file's encoded `FileDescriptorProto`, as [`parse`] reads it back.
    pub fn serialized(&self) -> String {
        serialized::encode(&self.file)
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
fn main_file_name(references: &HashMap<String, String>) -> String {
    let mut name = String::from("schema.proto");
    while references.contains_key(&name) {
        name.insert(0, '_');
    }
    name
}

/// Whether `name` is a relative path without `.` or `..` parts, the form
/// in which the compiler opens a file under its own name.
fn plain_name(name: &str) -> bool {
    name.split('/')
        .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Resolves imports to the schema's references first, then to the
/// well-known types bundled with protox (`google/protobuf/*.proto`). The
/// schema's own file, once read, is `main`.
struct References {
    main: Option<(String, File)>,
    files: HashMap<String, String>,
    google: GoogleFileResolver,
}

impl References {
    /// Whether an import of `name` resolves (without reading the file).
    fn resolves(&self, name: &str) -> bool {
        self.main.as_ref().is_some_and(|(main, _)| main == name)
            || self.files.contains_key(name)
            || self.google.open_file(name).is_ok()
    }

    /// Reads `text` as a `.proto` file named `name` or, when it is not one,
    /// as a serialized descriptor whose imports must all resolve. A
    /// serialized file is named `name` too, unless `own_name` lets it keep
    /// the name it gives itself (when no other file has that name).
    fn read(&self, name: &str, text: &str, own_name: bool) -> Result<(File, Form), protox::Error> {
        let text_error = match File::from_source(name, text) {
            Ok(file) => return Ok((file, Form::Text)),
            Err(e) => e,
        };
        let not_serialized =
            |e: String| protox::Error::new(Message(format!("{name}: not a .proto file, and {e}")));
        let serialized = match Serialized::decode(text) {
            // Not base64 either: the text's own error says what is wrong.
            None => return Err(text_error),
            Some(decoded) => decoded.map_err(not_serialized)?,
        };
        let own = serialized.name();
        let name = if own_name && plain_name(&own) && !self.resolves(&own) {
            own.as_str()
        } else {
            name
        };
        let file = serialized.into_file(name).map_err(not_serialized)?;
        if let Some(missing) = file
            .file_descriptor_proto()
            .dependency
            .iter()
            .find(|d| !self.resolves(d))
        {
            return Err(protox::Error::new(Message(format!(
                "{name} (a serialized FileDescriptorProto) imports '{missing}', \
                 which is neither a reference nor a well-known file"
            ))));
        }
        Ok((file, Form::Serialized))
    }
}

impl FileResolver for References {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if let Some((main, file)) = &self.main {
            if main == name {
                return Ok(file.clone());
            }
        }
        match self.files.get(name) {
            Some(text) => self.read(name, text, false).map(|(file, _)| file),
            None => self.google.open_file(name),
        }
    }
}

/// How a schema's text was read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Text,
    Serialized,
}

/// Parses `text`, a `.proto` file whose imports are among `references`
/// (by their names) or the well-known types. The schema and each reference
/// may instead be serialized: the base64 of the file's encoded
/// `FileDescriptorProto`, its imports named in its `dependency` list.
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
    let mut resolver = References {
        main: None,
        files,
        google: GoogleFileResolver::new(),
    };
    // protox's Debug rendering of an error is its message prefixed with
    // `file:line:column:` when the error has a location.
    let invalid = |e: protox::Error| SchemaError::Invalid(format!("{e:?}"));
    let default_name = main_file_name(&resolver.files);
    let (file, form) = resolver.read(&default_name, text, true).map_err(invalid)?;
    let main = file.name().to_owned();
    resolver.main = Some((main.clone(), file));

    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true).include_source_info(false);
    compiler.open_file(&main).map_err(|e| match form {
        Form::Text => invalid(e),
        Form::Serialized => SchemaError::Invalid(format!(
            "{main} (the schema, read as a serialized FileDescriptorProto): {e:?}"
        )),
    })?;
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

#[cfg(test)]
#[path = "protobuf_serialized_tests.rs"]
mod serialized_tests;
