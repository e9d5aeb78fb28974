//! Protobuf schemas in serialized form: the base64 of a file's encoded
//! `FileDescriptorProto`, for the schema and for its references, read like
//! the text form and written back by `serialized()`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::FileDescriptorProto;

use super::tests::{p3, parsed, reference};
use super::*;

/// Resolves the test's own files, then the well-known types.
struct Texts {
    files: HashMap<String, String>,
    google: GoogleFileResolver,
}

impl FileResolver for Texts {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.files.get(name) {
            Some(text) => File::from_source(name, text),
            None => self.google.open_file(name),
        }
    }
}

/// Compiles `name` among `files` (name, text) with protox and returns its
/// descriptor, without source locations, as a serializer would have it.
fn descriptor(name: &str, files: &[(&str, &str)]) -> FileDescriptorProto {
    let mut compiler = protox::Compiler::with_file_resolver(Texts {
        files: files
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect(),
        google: GoogleFileResolver::new(),
    });
    if let Err(e) = compiler.open_file(name) {
        panic!("{e:?}");
    }
    let file = compiler
        .descriptor_pool()
        .get_file_by_name(name)
        .expect("compiled file");
    FileDescriptorProto {
        source_code_info: None,
        ..file.file_descriptor_proto().clone()
    }
}

fn base64(proto: &FileDescriptorProto) -> String {
    STANDARD.encode(proto.encode_to_vec())
}

/// The serialized form of `name` among `files`.
fn serialize(name: &str, files: &[(&str, &str)]) -> String {
    base64(&descriptor(name, files))
}

fn invalid(text: &str, references: &[Resolved]) -> String {
    match parse(text, references) {
        Err(SchemaError::Invalid(message)) => message,
        Ok(schema) => panic!("accepted: {}", schema.canonical()),
    }
}

const USER: &str = "syntax = \"proto3\";
package demo;
// Comments and layout are not part of the descriptor.
message User {
  string name = 1;
  optional int64 id = 2;
  map<string, Address> addresses = 3;
  oneof contact { string email = 4; string phone = 5; }
  Kind kind = 6;
  message Address { string city = 1; reserved 2, 5 to 8; }
  enum Kind { KIND_UNSPECIFIED = 0; ADMIN = 1; }
}
enum Status { STATUS_UNSPECIFIED = 0; ACTIVE = 1; }
service Users { rpc Get(User) returns (User); }
";

#[test]
fn serialized_schema_has_the_canonical_text_of_its_text_form() {
    let text = parsed(USER, &[]);
    let serialized = parsed(&serialize("user.proto", &[("user.proto", USER)]), &[]);
    assert_eq!(serialized.canonical(), text.canonical());
    // A serialized schema keeps the name it gives its file.
    assert_eq!(serialized.file().name(), "user.proto");
    assert!(cannot_read(&text, &serialized).is_empty());
    assert!(cannot_read(&serialized, &text).is_empty());
}

#[test]
fn whitespace_around_the_base64_is_ignored() {
    let encoded = serialize("user.proto", &[("user.proto", USER)]);
    let schema = parsed(&format!("  {encoded}\n"), &[]);
    assert_eq!(schema.canonical(), parsed(USER, &[]).canonical());
}

#[test]
fn serialized_form_reads_back_to_the_same_schema() {
    for schema in [
        parsed(USER, &[]),
        parsed(&serialize("user.proto", &[("user.proto", USER)]), &[]),
    ] {
        let encoded = schema.serialized();
        let bytes = STANDARD.decode(&encoded).expect("standard base64");
        let proto = FileDescriptorProto::decode(bytes.as_slice()).expect("a descriptor");
        assert!(proto.source_code_info.is_none(), "source locations kept");
        assert_eq!(parsed(&encoded, &[]).canonical(), schema.canonical());
    }
}

#[test]
fn custom_options_survive_the_serialized_form() {
    let text = "syntax = \"proto3\";
package demo;
import \"google/protobuf/descriptor.proto\";
extend google.protobuf.FieldOptions { string sensitivity = 50001; }
message User { string ssn = 1 [(sensitivity) = \"high\"]; }
";
    let schema = parsed(text, &[]);
    assert!(
        schema.canonical().contains("high"),
        "{}",
        schema.canonical()
    );
    let back = parsed(&schema.serialized(), &[]);
    assert_eq!(back.canonical(), schema.canonical());
}

#[test]
fn references_in_serialized_form_resolve_by_name() {
    let base = "syntax = \"proto3\"; package b; message Id { int64 v = 1; }";
    let mid = "syntax = \"proto3\"; package m; import \"base.proto\"; message Ref { b.Id id = 1; }";
    let main = p3("import \"mid.proto\";\nmessage User { m.Ref r = 1; }");
    let files = [
        ("base.proto", base),
        ("mid.proto", mid),
        ("main.proto", main.as_str()),
    ];
    let as_text = parsed(
        &main,
        &[reference("base.proto", base), reference("mid.proto", mid)],
    );
    let serialized_refs = [
        reference("base.proto", &serialize("base.proto", &files)),
        reference("mid.proto", &serialize("mid.proto", &files)),
    ];
    let text_refs = [reference("base.proto", base), reference("mid.proto", mid)];
    let mixed_refs = [
        reference("base.proto", base),
        reference("mid.proto", &serialize("mid.proto", &files)),
    ];
    let serialized_main = serialize("main.proto", &files);
    for (schema, references) in [
        (serialized_main.as_str(), &serialized_refs),
        (serialized_main.as_str(), &text_refs),
        (serialized_main.as_str(), &mixed_refs),
        (main.as_str(), &serialized_refs),
        (main.as_str(), &mixed_refs),
    ] {
        let schema = parsed(schema, references);
        assert_eq!(schema.canonical(), as_text.canonical());
        assert!(schema.canonical().contains(".m.Ref r = 1;"));
    }
}

#[test]
fn serialized_reference_is_known_by_its_reference_name() {
    // The descriptor names itself differently: the import path is the
    // reference's name, and the file is compiled under it.
    let other = "syntax = \"proto3\"; package o; message Thing { string id = 1; }";
    let mut proto = descriptor("other.proto", &[("other.proto", other)]);
    proto.name = Some("elsewhere/other.proto".into());
    let schema = parsed(
        &p3("import \"other.proto\";\nmessage User { o.Thing t = 1; }"),
        &[reference("other.proto", &base64(&proto))],
    );
    assert!(schema.canonical().contains(".o.Thing t = 1;"));
}

#[test]
fn serialized_schema_whose_name_is_taken_or_unusable_is_renamed() {
    let other = "syntax = \"proto3\"; package o; message Thing { string id = 1; }";
    let expected = parsed(USER, &[]);
    for (own, references) in [
        ("other.proto", vec![reference("other.proto", other)]),
        ("google/protobuf/timestamp.proto", vec![]),
        ("../user.proto", vec![]),
        ("/abs/user.proto", vec![]),
    ] {
        let mut proto = descriptor("user.proto", &[("user.proto", USER)]);
        proto.name = Some(own.into());
        let schema = parsed(&base64(&proto), &references);
        assert_eq!(schema.file().name(), "schema.proto", "{own}");
        assert_eq!(schema.canonical(), expected.canonical(), "{own}");
    }
}

#[test]
fn serialized_file_imports_a_well_known_type() {
    let text = p3("import \"google/protobuf/timestamp.proto\";\n\
         message Event { google.protobuf.Timestamp at = 1; }");
    let schema = parsed(&serialize("event.proto", &[("event.proto", &text)]), &[]);
    assert!(schema
        .canonical()
        .contains("import \"google/protobuf/timestamp.proto\";"));
    assert!(schema
        .canonical()
        .contains(".google.protobuf.Timestamp at = 1;"));
    assert_eq!(schema.canonical(), parsed(&text, &[]).canonical());
}

#[test]
fn compatibility_is_checked_across_the_two_forms() {
    let v1 = p3("message User { string name = 1; int64 id = 2; }");
    let v2 = p3("message User { string name = 1; string id = 2; }");
    let v1_text = parsed(&v1, &[]);
    let v2_serialized = parsed(&serialize("user.proto", &[("user.proto", &v2)]), &[]);
    assert!(!cannot_read(&v2_serialized, &v1_text).is_empty());
    assert!(!cannot_read(&v1_text, &v2_serialized).is_empty());
    let v1_serialized = parsed(&serialize("user.proto", &[("user.proto", &v1)]), &[]);
    assert!(cannot_read(&v1_serialized, &v1_text).is_empty());
}

#[test]
fn text_that_is_not_base64_keeps_the_text_error() {
    let message = invalid("@@ not base64, not a .proto file %%", &[]);
    assert!(message.contains("schema.proto:1:"), "{message}");
    assert!(!message.contains("FileDescriptorProto"), "{message}");
}

#[test]
fn base64_of_other_bytes_is_refused() {
    let message = invalid(&STANDARD.encode(b"not a descriptor at all"), &[]);
    assert!(
        message.contains("not a serialized FileDescriptorProto"),
        "{message}"
    );
    // Bytes that decode but name no file are not a file's descriptor.
    let nameless = FileDescriptorProto {
        package: Some("demo".into()),
        ..Default::default()
    };
    let message = invalid(&base64(&nameless), &[]);
    assert!(message.contains("no file name"), "{message}");
    // The same in a reference, when it is imported.
    let message = invalid(
        &p3("import \"other.proto\";\nmessage User { }"),
        &[reference("other.proto", &STANDARD.encode(b"\x0b\x0c\xff"))],
    );
    assert!(message.contains("other.proto"), "{message}");
    assert!(message.contains("FileDescriptorProto"), "{message}");
}

#[test]
fn missing_dependency_of_a_serialized_file_is_refused() {
    let other = "syntax = \"proto3\"; package o; message Thing { string id = 1; }";
    let main = p3("import \"other.proto\";\nmessage User { o.Thing t = 1; }");
    let files = [("other.proto", other), ("main.proto", main.as_str())];
    let message = invalid(&serialize("main.proto", &files), &[]);
    assert!(message.contains("'other.proto'"), "{message}");
    assert!(
        message.contains("serialized FileDescriptorProto"),
        "{message}"
    );
    // A serialized reference's own dependency must resolve as well.
    let mid =
        "syntax = \"proto3\"; package m; import \"other.proto\"; message Ref { o.Thing t = 1; }";
    let files = [("other.proto", other), ("mid.proto", mid)];
    let message = invalid(
        &p3("import \"mid.proto\";\nmessage User { m.Ref r = 1; }"),
        &[reference("mid.proto", &serialize("mid.proto", &files))],
    );
    assert!(message.contains("'other.proto'"), "{message}");
}
