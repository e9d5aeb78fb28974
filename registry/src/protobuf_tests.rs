//! The compatibility rules between Protobuf schemas, one test table per rule:
//! (rule, writer's schema, reader's schema, can the reader read the data?).

use super::*;

/// A proto3 file of package `demo` with `body` as its declarations.
pub(super) fn p3(body: &str) -> String {
    format!("syntax = \"proto3\";\npackage demo;\n{body}\n")
}

/// A proto2 file of package `demo` with `body` as its declarations.
pub(super) fn p2(body: &str) -> String {
    format!("syntax = \"proto2\";\npackage demo;\n{body}\n")
}

pub(super) fn parsed(text: &str, references: &[Resolved]) -> ProtobufSchema {
    match parse(text, references) {
        Ok(schema) => schema,
        Err(e) => panic!("{e}\n{text}"),
    }
}

pub(super) fn reference(name: &str, schema: &str) -> Resolved {
    Resolved {
        name: name.into(),
        schema_type: SchemaType::Protobuf,
        schema: schema.into(),
    }
}

/// (rule, writer, reader, can the reader read the writer's data?)
pub(super) type Case = (&'static str, String, String, bool);

pub(super) fn check_with(cases: &[Case], references: &[Resolved]) {
    let mut failures = Vec::new();
    for (rule, writer, reader, compatible) in cases {
        let w = parsed(writer, references);
        let r = parsed(reader, references);
        let why = cannot_read(&r, &w);
        if why.is_empty() != *compatible {
            failures.push(format!(
                "{rule}: expected {}, got {why:?}",
                if *compatible {
                    "compatible"
                } else {
                    "incompatible"
                }
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub(super) fn check(cases: &[Case]) {
    check_with(cases, &[]);
}

pub(super) fn case(rule: &'static str, writer: String, reader: String, compatible: bool) -> Case {
    (rule, writer, reader, compatible)
}

#[test]
fn identical_schemas_read_each_other() {
    let text = p3("message User { string name = 1; int64 id = 2; repeated string tags = 3; }");
    check(&[case("identical", text.clone(), text, true)]);
}

#[test]
fn package_changed_is_compatible() {
    check(&[
        case(
            "PACKAGE_CHANGED",
            p3("message User { string name = 1; }"),
            "syntax = \"proto3\"; package other; message User { string name = 1; }".into(),
            true,
        ),
        case(
            "PACKAGE_CHANGED with a nested message field",
            p3("message User { Address a = 1; } message Address { string city = 1; }"),
            "syntax = \"proto3\"; package v2.demo;
             message User { Address a = 1; } message Address { string city = 1; }"
                .into(),
            true,
        ),
    ]);
}

#[test]
fn messages_added_and_removed() {
    let one = p3("message User { string name = 1; }");
    let two = p3("message User { string name = 1; } message Order { int64 id = 1; }");
    check(&[
        case("MESSAGE_ADDED", one.clone(), two.clone(), true),
        case("MESSAGE_REMOVED", two, one, false),
        case(
            "MESSAGE_MOVED (reordered)",
            p3("message A { int32 x = 1; } message B { int32 y = 1; }"),
            p3("message B { int32 y = 1; } message A { int32 x = 1; }"),
            true,
        ),
        case(
            "nested MESSAGE_REMOVED",
            p3("message User { message Inner { int32 x = 1; } }"),
            p3("message User { }"),
            false,
        ),
        case(
            "nested MESSAGE_ADDED",
            p3("message User { }"),
            p3("message User { message Inner { int32 x = 1; } }"),
            true,
        ),
    ]);
}

#[test]
fn fields_added_and_removed() {
    check(&[
        case(
            "FIELD_ADDED",
            p3("message User { string name = 1; }"),
            p3("message User { string name = 1; int32 age = 2; }"),
            true,
        ),
        case(
            "FIELD_REMOVED",
            p3("message User { string name = 1; int32 age = 2; }"),
            p3("message User { string name = 1; }"),
            true,
        ),
        case(
            "FIELD_REMOVED with its number reserved",
            p3("message User { string name = 1; int32 age = 2; }"),
            p3("message User { string name = 1; reserved 2; reserved \"age\"; }"),
            true,
        ),
        case(
            "removed field's number reused with another scalar group",
            p3("message User { string name = 1; int32 age = 2; }"),
            p3("message User { string name = 1; string nickname = 2; }"),
            false,
        ),
        case(
            "removed field's number reused with a message type",
            p3("message User { int32 age = 2; } message Age { int32 years = 1; }"),
            p3("message User { Age age = 2; } message Age { int32 years = 1; }"),
            false,
        ),
        case(
            "removed field's number reused within the same group",
            p3("message User { int32 age = 2; }"),
            p3("message User { int64 height = 2; }"),
            true,
        ),
        case(
            "proto2 optional FIELD_ADDED",
            p2("message User { optional string name = 1; }"),
            p2("message User { optional string name = 1; optional int32 age = 2; }"),
            true,
        ),
    ]);
}

#[test]
fn field_number_and_name_changes() {
    check(&[
        case(
            "FIELD_NAME_CHANGED",
            p3("message User { string name = 1; }"),
            p3("message User { string full_name = 1; }"),
            true,
        ),
        case(
            "field number changed (a removal and an addition)",
            p3("message User { string name = 1; }"),
            p3("message User { string name = 2; }"),
            true,
        ),
        case(
            "field numbers swapped between incompatible types",
            p3("message User { string name = 1; int32 age = 2; }"),
            p3("message User { string name = 2; int32 age = 1; }"),
            false,
        ),
        case(
            "field numbers swapped between compatible types",
            p3("message User { int64 a = 1; int32 b = 2; }"),
            p3("message User { int64 a = 2; int32 b = 1; }"),
            true,
        ),
    ]);
}

#[test]
fn field_kind_changed() {
    let with_address = "message Address { string city = 1; }";
    let with_color = "enum Color { RED = 0; GREEN = 1; }";
    check(&[
        case(
            "FIELD_KIND_CHANGED scalar to message",
            p3(&format!("message User {{ string a = 1; }} {with_address}")),
            p3(&format!("message User {{ Address a = 1; }} {with_address}")),
            false,
        ),
        case(
            "FIELD_KIND_CHANGED message to scalar",
            p3(&format!("message User {{ Address a = 1; }} {with_address}")),
            p3(&format!("message User {{ bytes a = 1; }} {with_address}")),
            false,
        ),
        case(
            "FIELD_KIND_CHANGED enum to message",
            p3(&format!("message User {{ Color c = 1; }} {with_color} {with_address}")),
            p3(&format!("message User {{ Address c = 1; }} {with_color} {with_address}")),
            false,
        ),
        case(
            "enum to int32 (both varints)",
            p3(&format!("message User {{ Color c = 1; }} {with_color}")),
            p3(&format!("message User {{ int32 c = 1; }} {with_color}")),
            true,
        ),
        case(
            "int64 to enum (both varints)",
            p3(&format!("message User {{ int64 c = 1; }} {with_color}")),
            p3(&format!("message User {{ Color c = 1; }} {with_color}")),
            true,
        ),
        case(
            "FIELD_SCALAR_KIND_CHANGED enum to sint32",
            p3(&format!("message User {{ Color c = 1; }} {with_color}")),
            p3(&format!("message User {{ sint32 c = 1; }} {with_color}")),
            false,
        ),
        case(
            "FIELD_KIND_CHANGED group to message",
            p2("message User { optional group G = 1 { optional int32 x = 2; } }"),
            p2("message User { optional G g = 1; message G { optional int32 x = 2; } }"),
            false,
        ),
        case(
            "FIELD_KIND_CHANGED map to scalar",
            p3("message User { map<string, string> m = 1; }"),
            p3("message User { string m = 1; }"),
            false,
        ),
        case(
            "FIELD_KIND_CHANGED map to repeated message",
            p3("message User { map<string, string> m = 1; }"),
            p3("message User { repeated Entry m = 1; } message Entry { string key = 1; string value = 2; }"),
            false,
        ),
    ]);
}

#[test]
fn scalar_groups() {
    // (writer type, reader type, same wire group?)
    let pairs = [
        ("int32", "uint32", true),
        ("int32", "int64", true),
        ("uint64", "bool", true),
        ("bool", "int32", true),
        ("sint32", "sint64", true),
        ("fixed32", "sfixed32", true),
        ("fixed64", "sfixed64", true),
        ("string", "bytes", true),
        ("bytes", "string", true),
        ("int32", "sint32", false),
        ("sint64", "int64", false),
        ("int32", "fixed32", false),
        ("fixed32", "fixed64", false),
        ("sfixed64", "double", false),
        ("float", "double", false),
        ("fixed32", "float", false),
        ("string", "int32", false),
        ("bytes", "uint64", false),
    ];
    let cases: Vec<Case> = pairs
        .iter()
        .map(|(w, r, ok)| {
            case(
                "FIELD_SCALAR_KIND_CHANGED",
                p3(&format!("message User {{ {w} v = 1; }}")),
                p3(&format!("message User {{ {r} v = 1; }}")),
                *ok,
            )
        })
        .collect();
    check(&cases);
    // Within repeated fields and map values too.
    check(&[
        case(
            "FIELD_SCALAR_KIND_CHANGED repeated",
            p3("message User { repeated int32 v = 1; }"),
            p3("message User { repeated sint32 v = 1; }"),
            false,
        ),
        case(
            "repeated within the group",
            p3("message User { repeated int32 v = 1; }"),
            p3("message User { repeated int64 v = 1; }"),
            true,
        ),
    ]);
}

#[test]
fn named_type_changed() {
    let types = "message Address { string city = 1; } message Place { string city = 1; }";
    check(&[
        case(
            "FIELD_NAMED_TYPE_CHANGED",
            p3(&format!("message User {{ Address a = 1; }} {types}")),
            p3(&format!("message User {{ Place a = 1; }} {types}")),
            false,
        ),
        case(
            "same named type spelled differently",
            p3(&format!("message User {{ Address a = 1; }} {types}")),
            p3(&format!("message User {{ .demo.Address a = 1; }} {types}")),
            true,
        ),
        case(
            "named type's own change (incompatible inside)",
            p3("message User { Address a = 1; } message Address { string city = 1; }"),
            p3("message User { Address a = 1; } message Address { int32 city = 1; }"),
            false,
        ),
        case(
            "named type's own change (compatible inside)",
            p3("message User { Address a = 1; } message Address { string city = 1; }"),
            p3("message User { Address a = 1; } message Address { string city = 1; string zip = 2; }"),
            true,
        ),
        case(
            "nested named type moved to another parent",
            p3("message User { message A { int32 x = 1; } A a = 1; } message Other { }"),
            p3("message User { Other.A a = 1; } message Other { message A { int32 x = 1; } }"),
            false,
        ),
        case(
            "enum named type changed (varints both)",
            p3("message User { E1 e = 1; } enum E1 { A = 0; } enum E2 { B = 0; }"),
            p3("message User { E2 e = 1; } enum E1 { A = 0; } enum E2 { B = 0; }"),
            true,
        ),
    ]);
}

#[test]
fn labels() {
    check(&[
        case(
            "FIELD_NUMERIC_LABEL_CHANGED singular to repeated",
            p3("message User { int32 v = 1; }"),
            p3("message User { repeated int32 v = 1; }"),
            false,
        ),
        case(
            "FIELD_NUMERIC_LABEL_CHANGED repeated to singular",
            p3("message User { repeated int64 v = 1; }"),
            p3("message User { int64 v = 1; }"),
            false,
        ),
        case(
            "FIELD_NUMERIC_LABEL_CHANGED repeated enum",
            p3("message User { E v = 1; } enum E { A = 0; }"),
            p3("message User { repeated E v = 1; } enum E { A = 0; }"),
            false,
        ),
        case(
            "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
            p3("message User { string v = 1; }"),
            p3("message User { repeated string v = 1; }"),
            true,
        ),
        case(
            "FIELD_STRING_OR_BYTES_LABEL_CHANGED bytes",
            p3("message User { repeated bytes v = 1; }"),
            p3("message User { bytes v = 1; }"),
            true,
        ),
        case(
            "proto3 optional and implicit are one label",
            p3("message User { int32 v = 1; }"),
            p3("message User { optional int32 v = 1; }"),
            true,
        ),
        case(
            "message field singular to repeated",
            p3("message User { A a = 1; } message A { int32 x = 1; }"),
            p3("message User { repeated A a = 1; } message A { int32 x = 1; }"),
            true,
        ),
        case(
            "proto2 FIELD_NUMERIC_LABEL_CHANGED optional to required",
            p2("message User { optional int32 v = 1; }"),
            p2("message User { required int32 v = 1; }"),
            false,
        ),
        case(
            "proto2 FIELD_NUMERIC_LABEL_CHANGED required to optional",
            p2("message User { required int32 v = 1; }"),
            p2("message User { optional int32 v = 1; }"),
            false,
        ),
        case(
            "proto2 string label changed",
            p2("message User { required string v = 1; }"),
            p2("message User { optional string v = 1; }"),
            true,
        ),
    ]);
}

#[test]
fn required_fields() {
    check(&[
        case(
            "REQUIRED_FIELD_ADDED",
            p2("message User { optional string name = 1; }"),
            p2("message User { optional string name = 1; required int32 age = 2; }"),
            false,
        ),
        case(
            "REQUIRED_FIELD_REMOVED",
            p2("message User { optional string name = 1; required int32 age = 2; }"),
            p2("message User { optional string name = 1; }"),
            false,
        ),
        case(
            "required fields kept",
            p2("message User { required int32 age = 2; }"),
            p2("message User { required int64 years = 2; }"),
            true,
        ),
        case(
            "optional field removed beside a required one",
            p2("message User { required int32 age = 2; optional string x = 3; }"),
            p2("message User { required int32 age = 2; }"),
            true,
        ),
    ]);
}

#[test]
fn oneofs() {
    check(&[
        case(
            "ONEOF_ADDED",
            p3("message User { string name = 1; }"),
            p3("message User { string name = 1; oneof id { int32 a = 2; string b = 3; } }"),
            true,
        ),
        case(
            "ONEOF_REMOVED",
            p3("message User { string name = 1; oneof id { int32 a = 2; string b = 3; } }"),
            p3("message User { string name = 1; }"),
            true,
        ),
        case(
            "ONEOF_FIELD_ADDED",
            p3("message User { oneof id { int32 a = 2; } }"),
            p3("message User { oneof id { int32 a = 2; string b = 3; } }"),
            true,
        ),
        case(
            "ONEOF_FIELD_REMOVED",
            p3("message User { oneof id { int32 a = 2; string b = 3; } }"),
            p3("message User { oneof id { int32 a = 2; } }"),
            false,
        ),
        case(
            "single field moved into a new oneof",
            p3("message User { string name = 1; int32 a = 2; }"),
            p3("message User { string name = 1; oneof id { int32 a = 2; string b = 3; } }"),
            true,
        ),
        case(
            "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
            p3("message User { int32 a = 2; string b = 3; }"),
            p3("message User { oneof id { int32 a = 2; string b = 3; } }"),
            false,
        ),
        case(
            "FIELD_MOVED_TO_EXISTING_ONEOF",
            p3("message User { int32 a = 2; oneof id { string b = 3; } }"),
            p3("message User { oneof id { int32 a = 2; string b = 3; } }"),
            false,
        ),
        case(
            "oneof member's type changed",
            p3("message User { oneof id { int32 a = 2; } }"),
            p3("message User { oneof id { string a = 2; } }"),
            false,
        ),
        case(
            "oneof renamed with a member's type changed",
            p3("message User { oneof id { int32 a = 2; } }"),
            p3("message User { oneof key { string a = 2; } }"),
            false,
        ),
        case(
            "field moved into a new oneof with its type changed",
            p3("message User { int32 a = 2; }"),
            p3("message User { oneof id { string a = 2; } }"),
            false,
        ),
    ]);
}

#[test]
fn enums() {
    check(&[
        case(
            "ENUM_CONST_ADDED",
            p3("message User { Color c = 1; } enum Color { RED = 0; }"),
            p3("message User { Color c = 1; } enum Color { RED = 0; GREEN = 1; }"),
            true,
        ),
        case(
            "ENUM_CONST_REMOVED",
            p3("message User { Color c = 1; } enum Color { RED = 0; GREEN = 1; }"),
            p3("message User { Color c = 1; } enum Color { RED = 0; }"),
            true,
        ),
        case(
            "ENUM_CONST_CHANGED",
            p3("message User { Color c = 1; } enum Color { RED = 0; GREEN = 1; }"),
            p3("message User { Color c = 1; } enum Color { RED = 0; VERT = 1; }"),
            true,
        ),
        case(
            "ENUM_ADDED",
            p3("message User { int32 c = 1; }"),
            p3("message User { int32 c = 1; } enum Color { RED = 0; }"),
            true,
        ),
        case(
            "ENUM_REMOVED",
            p3("message User { int32 c = 1; } enum Color { RED = 0; }"),
            p3("message User { int32 c = 1; }"),
            true,
        ),
        case(
            "nested enum changed",
            p3("message User { enum Kind { A = 0; } Kind k = 1; }"),
            p3("message User { enum Kind { A = 0; B = 1; } Kind k = 1; }"),
            true,
        ),
    ]);
}

#[test]
fn nested_messages() {
    check(&[
        case(
            "nested field type changed",
            p3("message User { message Inner { int32 x = 1; } Inner i = 1; }"),
            p3("message User { message Inner { string x = 1; } Inner i = 1; }"),
            false,
        ),
        case(
            "nested field added",
            p3("message User { message Inner { int32 x = 1; } Inner i = 1; }"),
            p3("message User { message Inner { int32 x = 1; int32 y = 2; } Inner i = 1; }"),
            true,
        ),
        case(
            "nested message not used by a field changed",
            p3("message User { message Inner { int32 x = 1; } }"),
            p3("message User { message Inner { double x = 1; } }"),
            false,
        ),
        case(
            "deeply nested change",
            p3("message A { message B { message C { int32 x = 1; } C c = 1; } B b = 1; }"),
            p3("message A { message B { message C { sint32 x = 1; } C c = 1; } B b = 1; }"),
            false,
        ),
        case(
            "recursive message compatible",
            p3("message Node { int32 v = 1; repeated Node children = 2; }"),
            p3("message Node { int64 v = 1; repeated Node children = 2; string label = 3; }"),
            true,
        ),
        case(
            "recursive message incompatible",
            p3("message Node { int32 v = 1; repeated Node children = 2; }"),
            p3("message Node { float v = 1; repeated Node children = 2; }"),
            false,
        ),
        case(
            "second top-level message changed",
            p3("message User { int32 a = 1; } message Order { int32 id = 1; }"),
            p3("message User { int32 a = 1; } message Order { string id = 1; }"),
            false,
        ),
    ]);
}

#[test]
fn maps() {
    check(&[
        case(
            "map value added field",
            p3("message User { map<string, int32> m = 1; }"),
            p3("message User { map<string, int32> m = 1; int32 x = 2; }"),
            true,
        ),
        case(
            "map value within its group",
            p3("message User { map<string, int32> m = 1; }"),
            p3("message User { map<string, int64> m = 1; }"),
            true,
        ),
        case(
            "map value FIELD_SCALAR_KIND_CHANGED",
            p3("message User { map<string, int32> m = 1; }"),
            p3("message User { map<string, string> m = 1; }"),
            false,
        ),
        case(
            "map key FIELD_SCALAR_KIND_CHANGED",
            p3("message User { map<int32, string> m = 1; }"),
            p3("message User { map<sint32, string> m = 1; }"),
            false,
        ),
        case(
            "map key within its group",
            p3("message User { map<string, string> m = 1; }"),
            p3("message User { map<bytes, string> m = 1; }")
                .replace("map<bytes, string>", "map<string, bytes>"),
            true,
        ),
        case(
            "map value scalar to message",
            p3("message User { map<string, int32> m = 1; } message V { int32 x = 1; }"),
            p3("message User { map<string, V> m = 1; } message V { int32 x = 1; }"),
            false,
        ),
        case(
            "map value message changed inside",
            p3("message User { map<string, V> m = 1; } message V { int32 x = 1; }"),
            p3("message User { map<string, V> m = 1; } message V { string x = 1; }"),
            false,
        ),
        case(
            "map value FIELD_NAMED_TYPE_CHANGED",
            p3("message User { map<string, V> m = 1; } message V { } message W { }"),
            p3("message User { map<string, W> m = 1; } message V { } message W { }"),
            false,
        ),
        case(
            "map field renamed",
            p3("message User { map<string, int32> m = 1; }"),
            p3("message User { map<string, int32> counts = 1; }"),
            true,
        ),
    ]);
}

#[test]
fn messages_name_the_rule_and_the_field() {
    let w = parsed(&p3("message User { string name = 1; int32 age = 2; }"), &[]);
    let r = parsed(
        &p3("message User { string name = 1; sint32 age = 2; }"),
        &[],
    );
    let why = cannot_read(&r, &w);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(
        why[0].starts_with("FIELD_SCALAR_KIND_CHANGED"),
        "{}",
        why[0]
    );
    assert!(
        why[0].contains("field 2 ('age') of message demo.User"),
        "{}",
        why[0]
    );
    assert!(
        why[0].contains("int32") && why[0].contains("sint32"),
        "{}",
        why[0]
    );
}

#[test]
fn levels_from_lib() {
    use crate::{incompatibilities, Compatibility, Parsed};
    let old = Parsed::Protobuf(parsed(
        &p3("message User { oneof id { int32 a = 1; } }"),
        &[],
    ));
    let new = Parsed::Protobuf(parsed(
        &p3("message User { oneof id { int32 a = 1; string b = 2; } }"),
        &[],
    ));
    // The new schema reads old data (a oneof member added); the old one
    // cannot read new data (a record with `b` set would read as unset).
    let earlier = std::slice::from_ref(&old);
    assert!(incompatibilities(Compatibility::Backward, &new, earlier).is_empty());
    assert!(!incompatibilities(Compatibility::Forward, &new, earlier).is_empty());
    assert!(!incompatibilities(Compatibility::Full, &new, earlier).is_empty());
}
