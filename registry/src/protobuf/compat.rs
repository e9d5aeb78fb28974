//! Whether a consumer holding one Protobuf schema (the reader) can read data
//! written with another (the writer), by the registry's Protobuf rules.
//!
//! The two files are compared as the registry's API describes differences:
//! each change found has a type (`FIELD_KIND_CHANGED`, `MESSAGE_REMOVED`,
//! ...), and only some types break reading. Every top-level message and
//! enum of the writer's file is compared with the reader's one of the same
//! name (the serializers write a record of any message of the file, the
//! first one by default), and from there every message a field reaches,
//! in the file or in an imported one, and every nested type.
//!
//! Compatible (nothing reported):
//! - PACKAGE_CHANGED: the package is not on the wire;
//! - MESSAGE_ADDED, ENUM_ADDED, ENUM_REMOVED, MESSAGE_MOVED (order of
//!   messages: a record's message indexes refer to its own schema);
//! - ENUM_CONST_ADDED / ENUM_CONST_REMOVED / ENUM_CONST_CHANGED: unknown
//!   enum numbers are kept, not refused;
//! - FIELD_ADDED / FIELD_REMOVED of a field that is not `required`: unknown
//!   fields are skipped, missing ones take their default;
//! - FIELD_NAME_CHANGED: fields are matched by number;
//! - scalar types changed within one wire-compatible group: int32, uint32,
//!   int64, uint64, bool and enums; sint32 and sint64; fixed32 and sfixed32;
//!   fixed64 and sfixed64; string and bytes;
//! - FIELD_STRING_OR_BYTES_LABEL_CHANGED: `string`/`bytes` singular vs
//!   repeated (the last value read wins);
//! - ONEOF_ADDED, ONEOF_REMOVED, ONEOF_FIELD_ADDED, and a single field
//!   moved into a new oneof.
//!
//! Incompatible (reported):
//! - MESSAGE_REMOVED: data written with the removed message cannot be read;
//! - FIELD_KIND_CHANGED: scalar (or enum) vs message vs map, and a proto2
//!   group vs a message field;
//! - FIELD_SCALAR_KIND_CHANGED: scalars of different wire groups;
//! - FIELD_NAMED_TYPE_CHANGED: a message-typed field now names another
//!   message (compared by name within its package), or a map's message
//!   value did;
//! - FIELD_NUMERIC_LABEL_CHANGED: a numeric (or enum) field's label changed
//!   among singular, `required` and `repeated`; proto3's implicit label and
//!   `optional` count as one label (both singular on the wire);
//! - REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED (proto2);
//! - ONEOF_FIELD_REMOVED: the reader's oneof lacks a member the writer's
//!   same-named oneof has;
//! - MULTIPLE_FIELDS_MOVED_TO_ONEOF, FIELD_MOVED_TO_EXISTING_ONEOF.
//!
//! A field number reused for another field is compared as one field whose
//! name (compatible) and perhaps type (by the rules above) changed.

use std::collections::{BTreeMap, HashSet};

use prost_reflect::{Cardinality, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor};

use super::canonical::kind_name;

/// Why `reader` cannot read data written with `writer`; empty when it can.
pub(super) fn cannot_read(reader: &FileDescriptor, writer: &FileDescriptor) -> Vec<String> {
    let mut diff = Diff::default();
    diff.messages(writer.messages(), reader.messages());
    diff.why
}

#[derive(Default)]
struct Diff {
    why: Vec<String>,
    /// Pairs of messages (writer's, reader's full names) already compared
    /// or being compared: each is compared once, and recursive types end.
    compared: HashSet<(String, String)>,
}

/// How a field's values are encoded, as far as reading them goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A scalar or an enum.
    Scalar,
    Message,
    Map,
}

/// Scalars within a group read each other's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// Varints: int32, int64, uint32, uint64, bool, enums.
    Varint,
    /// Zigzag varints: sint32, sint64.
    Zigzag,
    Fixed32,
    Fixed64,
    Float,
    Double,
    StringOrBytes,
}

fn group(kind: &Kind) -> Option<Group> {
    Some(match kind {
        Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => {
            Group::Varint
        }
        Kind::Sint32 | Kind::Sint64 => Group::Zigzag,
        Kind::Fixed32 | Kind::Sfixed32 => Group::Fixed32,
        Kind::Fixed64 | Kind::Sfixed64 => Group::Fixed64,
        Kind::Float => Group::Float,
        Kind::Double => Group::Double,
        Kind::String | Kind::Bytes => Group::StringOrBytes,
        Kind::Message(_) => return None,
    })
}

fn class(field: &FieldDescriptor) -> Class {
    if field.is_map() {
        return Class::Map;
    }
    match group(&field.kind()) {
        Some(_) => Class::Scalar,
        None => Class::Message,
    }
}

/// Singular (proto3 implicit or `optional`), `required` or `repeated`.
fn label(field: &FieldDescriptor) -> &'static str {
    match field.cardinality() {
        Cardinality::Optional => "singular",
        Cardinality::Required => "required",
        Cardinality::Repeated => "repeated",
    }
}

/// A message's or enum's name within its package: what stays when only
/// the package changes.
fn local_name<'a>(full_name: &'a str, package: &str) -> &'a str {
    if package.is_empty() {
        return full_name;
    }
    full_name
        .strip_prefix(package)
        .and_then(|rest| rest.strip_prefix('.'))
        .unwrap_or(full_name)
}

fn describe(field: &FieldDescriptor) -> String {
    format!(
        "field {} ('{}') of message {}",
        field.number(),
        field.name(),
        field.parent_message().full_name()
    )
}

impl Diff {
    fn report(&mut self, kind: &str, text: String) {
        self.why.push(format!("{kind}: {text}"));
    }

    /// Compares the messages declared at one level (a file's top level, or
    /// within a message), matched by name. Enums need no comparing: no
    /// change to an enum prevents reading (a number the reader does not
    /// know is kept as a number), and an enum-typed field is compared as a
    /// varint scalar.
    fn messages(
        &mut self,
        writer_messages: impl Iterator<Item = MessageDescriptor>,
        reader_messages: impl Iterator<Item = MessageDescriptor>,
    ) {
        // Map entries are part of their map field, compared with it.
        let reader: BTreeMap<String, MessageDescriptor> = reader_messages
            .filter(|m| !m.is_map_entry())
            .map(|m| (m.name().to_owned(), m))
            .collect();
        for writer in writer_messages.filter(|m| !m.is_map_entry()) {
            match reader.get(writer.name()) {
                Some(reader) => self.message(&writer, reader),
                None => self.report(
                    "MESSAGE_REMOVED",
                    format!(
                        "message {} is missing from the reader's schema, so data written with it cannot be read",
                        writer.full_name()
                    ),
                ),
            }
        }
    }

    fn message(&mut self, writer: &MessageDescriptor, reader: &MessageDescriptor) {
        let pair = (writer.full_name().to_owned(), reader.full_name().to_owned());
        if !self.compared.insert(pair) {
            return;
        }

        // Fields by number: those outside any oneof, and every field with
        // the name of its oneof (synthetic oneofs of proto3 `optional` are
        // no oneofs here).
        let oneof_of = |f: &FieldDescriptor| {
            f.containing_oneof()
                .filter(|o| !o.is_synthetic())
                .map(|o| o.name().to_owned())
        };
        let mut writer_plain: BTreeMap<u32, FieldDescriptor> = BTreeMap::new();
        let mut writer_all: BTreeMap<u32, (FieldDescriptor, Option<String>)> = BTreeMap::new();
        for field in writer.fields() {
            let oneof = oneof_of(&field);
            if oneof.is_none() {
                writer_plain.insert(field.number(), field.clone());
            }
            writer_all.insert(field.number(), (field, oneof));
        }
        let mut reader_plain: BTreeMap<u32, FieldDescriptor> = BTreeMap::new();
        let mut reader_all: BTreeMap<u32, (FieldDescriptor, Option<String>)> = BTreeMap::new();
        for field in reader.fields() {
            let oneof = oneof_of(&field);
            if oneof.is_none() {
                reader_plain.insert(field.number(), field.clone());
            }
            reader_all.insert(field.number(), (field, oneof));
        }

        // Fields moved into a oneof of the reader: one field alone into a
        // new oneof reads the same; several into one oneof, or one joining
        // members the writer already had in a oneof, do not (a record with
        // more than one of them set would lose all but one).
        for oneof in reader.oneofs().filter(|o| !o.is_synthetic()) {
            let mut moved = Vec::new();
            let mut existing = 0;
            for member in oneof.fields() {
                if let Some(field) = writer_plain.remove(&member.number()) {
                    moved.push(field.number().to_string());
                } else if matches!(writer_all.get(&member.number()), Some((_, Some(_)))) {
                    existing += 1;
                }
            }
            let place = format!("oneof '{}' of message {}", oneof.name(), reader.full_name());
            if moved.len() > 1 {
                self.report(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
                    format!(
                        "fields {} are outside any oneof in the writer's schema but in {place} in the reader's",
                        moved.join(", ")
                    ),
                );
            } else if moved.len() == 1 && existing > 0 {
                self.report(
                    "FIELD_MOVED_TO_EXISTING_ONEOF",
                    format!(
                        "field {} is outside any oneof in the writer's schema but joins members of an existing oneof in {place}",
                        moved.join(", ")
                    ),
                );
            }
        }

        // Members of the writer's oneofs that the reader's oneof of the same
        // name lacks: a record with that member set reads as having none.
        for oneof in writer.oneofs().filter(|o| !o.is_synthetic()) {
            let Some(reader_oneof) = reader
                .oneofs()
                .find(|o| !o.is_synthetic() && o.name() == oneof.name())
            else {
                continue;
            };
            for member in oneof.fields() {
                if !reader_oneof.fields().any(|f| f.number() == member.number()) {
                    self.report(
                        "ONEOF_FIELD_REMOVED",
                        format!(
                            "{} is a member of oneof '{}' in the writer's schema but not in the reader's",
                            describe(&member),
                            oneof.name()
                        ),
                    );
                }
            }
        }

        // Required fields that only one side has.
        for (number, field) in &writer_plain {
            if !reader_plain.contains_key(number) && field.is_required() {
                self.report(
                    "REQUIRED_FIELD_REMOVED",
                    format!(
                        "{} is required by the writer's schema and missing from the reader's",
                        describe(field)
                    ),
                );
            }
        }
        for (number, field) in &reader_plain {
            if !writer_plain.contains_key(number) && field.is_required() {
                self.report(
                    "REQUIRED_FIELD_ADDED",
                    format!(
                        "{} is required by the reader's schema and missing from the writer's",
                        describe(field)
                    ),
                );
            }
        }

        // Every number both sides use, inside a oneof or not, is one field.
        for (number, (writer_field, _)) in &writer_all {
            if let Some((reader_field, _)) = reader_all.get(number) {
                self.field(writer_field, reader_field);
            }
        }

        self.messages(writer.child_messages(), reader.child_messages());
    }

    /// One field number in both schemas. Its name may change freely.
    fn field(&mut self, writer: &FieldDescriptor, reader: &FieldDescriptor) {
        let (w, r) = (class(writer), class(reader));
        if w != r {
            self.report(
                "FIELD_KIND_CHANGED",
                format!(
                    "{} is {} in the writer's schema but {} in the reader's",
                    describe(reader),
                    class_text(writer),
                    class_text(reader)
                ),
            );
            return;
        }
        match w {
            Class::Scalar => {
                if !self.scalar_groups(writer, reader) {
                    return;
                }
                let numeric = group(&writer.kind()) != Some(Group::StringOrBytes);
                if label(writer) != label(reader) && numeric {
                    self.report(
                        "FIELD_NUMERIC_LABEL_CHANGED",
                        format!(
                            "{} is {} in the writer's schema but {} in the reader's",
                            describe(reader),
                            label(writer),
                            label(reader)
                        ),
                    );
                }
            }
            Class::Message => {
                // A proto2 group is delimited on the wire by start and end
                // tags, a message field by its length.
                if writer.is_group() != reader.is_group() {
                    let what = |f: &FieldDescriptor| {
                        if f.is_group() {
                            "a group"
                        } else {
                            "a message field"
                        }
                    };
                    self.report(
                        "FIELD_KIND_CHANGED",
                        format!(
                            "{} is {} in the writer's schema but {} in the reader's",
                            describe(reader),
                            what(writer),
                            what(reader)
                        ),
                    );
                    return;
                }
                if let (Kind::Message(w), Kind::Message(r)) = (writer.kind(), reader.kind()) {
                    self.named_type(reader, &w, &r);
                }
            }
            Class::Map => {
                if let (Kind::Message(w), Kind::Message(r)) = (writer.kind(), reader.kind()) {
                    self.map_part(
                        reader,
                        "key",
                        &w.map_entry_key_field(),
                        &r.map_entry_key_field(),
                    );
                    self.map_part(
                        reader,
                        "value",
                        &w.map_entry_value_field(),
                        &r.map_entry_value_field(),
                    );
                }
            }
        }
    }

    /// The key or value of a map field in both schemas.
    fn map_part(
        &mut self,
        field: &FieldDescriptor,
        part: &str,
        writer: &FieldDescriptor,
        reader: &FieldDescriptor,
    ) {
        match (group(&writer.kind()), group(&reader.kind())) {
            (Some(w), Some(r)) if w != r => self.report(
                "FIELD_SCALAR_KIND_CHANGED",
                format!(
                    "the {part} of map {} is {} in the writer's schema but {} in the reader's",
                    describe(field),
                    kind_name(&writer.kind()),
                    kind_name(&reader.kind())
                ),
            ),
            (Some(_), Some(_)) => {}
            (None, None) => {
                if let (Kind::Message(w), Kind::Message(r)) = (writer.kind(), reader.kind()) {
                    self.named_type(field, &w, &r);
                }
            }
            _ => self.report(
                "FIELD_KIND_CHANGED",
                format!(
                    "the {part} of map {} is {} in the writer's schema but {} in the reader's",
                    describe(field),
                    kind_name(&writer.kind()),
                    kind_name(&reader.kind())
                ),
            ),
        }
    }

    /// A message-typed field (or map value) in both schemas: the same
    /// message by name within its package, then compared itself.
    fn named_type(
        &mut self,
        field: &FieldDescriptor,
        writer: &MessageDescriptor,
        reader: &MessageDescriptor,
    ) {
        let w = local_name(writer.full_name(), writer.package_name());
        let r = local_name(reader.full_name(), reader.package_name());
        if w != r {
            self.report(
                "FIELD_NAMED_TYPE_CHANGED",
                format!(
                    "{} is of message {} in the writer's schema but {} in the reader's",
                    describe(field),
                    writer.full_name(),
                    reader.full_name()
                ),
            );
        } else {
            self.message(writer, reader);
        }
    }
}

/// What kind of field this is, for a message: its type and what it is.
fn class_text(field: &FieldDescriptor) -> String {
    match class(field) {
        Class::Map => "a map".to_owned(),
        Class::Message => format!("message {}", kind_name(&field.kind())),
        Class::Scalar => match field.kind() {
            Kind::Enum(e) => format!("enum {}", e.full_name()),
            other => format!("scalar {}", kind_name(&other)),
        },
    }
}

impl Diff {
    /// Scalars of different wire groups (FIELD_SCALAR_KIND_CHANGED): false
    /// when reported.
    fn scalar_groups(&mut self, writer: &FieldDescriptor, reader: &FieldDescriptor) -> bool {
        let (Some(w), Some(r)) = (group(&writer.kind()), group(&reader.kind())) else {
            return true;
        };
        if w == r {
            return true;
        }
        self.report(
            "FIELD_SCALAR_KIND_CHANGED",
            format!(
                "{} is {} in the writer's schema but {} in the reader's, which reads its values wrongly",
                describe(reader),
                kind_name(&writer.kind()),
                kind_name(&reader.kind())
            ),
        );
        false
    }
}
